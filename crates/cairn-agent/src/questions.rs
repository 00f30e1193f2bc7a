//! A question waiting for a person, posted where another process can answer
//! it (DESIGN §11): a run asking on a terminal can be answered from the
//! viewer of a `cairn serve` over the same store, from any device that has
//! the token, and a run the server drives is answered the same way.
//!
//! Two small files in the session's directory carry it:
//! `question.json` (written by the run: the call, its preview, and a token
//! naming this asking) and `answer.json` (written by whoever answers: the
//! token, the call and the decision). Each is replaced whole (temporary
//! file, rename), so a reader sees all of one or nothing.
//!
//! Rules:
//! 1. A question is pending only while a writer holds the session's journal
//!    lock: a question left behind by a crash is never offered.
//! 2. An answer names the asking it answers (its token) and the call, so an
//!    answer meant for one question never lands on the next.
//! 3. The first answer wins, wherever it was given; the run then withdraws
//!    the question, and an answer written after that is ignored.
//! 4. Posting removes any answer left over from an earlier asking before the
//!    question appears.
//! 5. Nothing here is a record of the run: the decision is journaled by the
//!    loop as before (a `refused` result, or the call's `tool_start`).

use std::fs::File;
use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use cairn_journal::ToolCall;
use cairn_store::{durable, RunId, Store, StoreError};
use serde::{Deserialize, Serialize};

use crate::approve::Decision;

/// The largest question file read (a call's arguments and its preview).
pub const MAX_QUESTION_BYTES: u64 = 16 << 20;

/// The largest answer file read.
const MAX_ANSWER_BYTES: u64 = 4 << 10;

/// A call waiting for a person's yes, as posted.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Question {
    /// Names this asking: the answer must carry it.
    pub asked: String,
    /// The call.
    pub call: ToolCall,
    /// For a file write or edit, the unified diff it would make (the
    /// model's text: show it as text).
    pub preview: Option<String>,
}

#[derive(Debug, Serialize, Deserialize)]
struct AnswerFile {
    asked: String,
    call: String,
    decision: Decision,
}

/// Why an answer was not taken.
#[derive(Debug, thiserror::Error)]
pub enum QuestionError {
    /// No question about that call is pending.
    #[error("session {run} is not waiting for an answer about call {call} (it was answered, or the run stopped)")]
    NotWaiting {
        /// The session.
        run: String,
        /// The call named.
        call: String,
    },
    /// The answer could not be written.
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn question_path(store: &Store, run: &RunId) -> PathBuf {
    store.run_dir(run).join("question.json")
}

fn answer_path(store: &Store, run: &RunId) -> PathBuf {
    store.run_dir(run).join("answer.json")
}

/// A token no other asking in this store shares: the process, the time and
/// a counter.
fn token() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!(
        "{}-{nanos:x}-{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

/// Posts the question about `call` for session `run` (rule 4 first).
///
/// # Errors
/// The file cannot be written (the question can then be answered only
/// where it was asked).
pub fn post(
    store: &Store,
    run: &RunId,
    call: &ToolCall,
    preview: Option<&str>,
) -> Result<Question, StoreError> {
    remove(&answer_path(store, run))?;
    let q = Question {
        asked: token(),
        call: call.clone(),
        preview: preview.map(str::to_owned),
    };
    let path = question_path(store, run);
    let bytes = serde_json::to_vec(&q).map_err(|e| io_error("encoding", &path, e.into()))?;
    durable::write_atomic(&path, &bytes)?;
    Ok(q)
}

/// Withdraws the question of session `run`, and any answer to it. Best
/// effort: a question left behind is not pending once the run lets its
/// lock go (rule 1), and the next post replaces it.
pub fn withdraw(store: &Store, run: &RunId) {
    let _ = remove(&question_path(store, run));
    let _ = remove(&answer_path(store, run));
}

fn remove(path: &std::path::Path) -> Result<(), StoreError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_error("removing", path, e)),
    }
}

fn io_error(action: &'static str, path: &std::path::Path, source: std::io::Error) -> StoreError {
    StoreError::Io {
        action,
        path: path.to_owned(),
        source,
    }
}

/// Reads at most `cap` bytes of `path` and parses them; `None` when the
/// file is absent, larger, or not what it should be.
fn read_json<T: for<'de> Deserialize<'de>>(path: &std::path::Path, cap: u64) -> Option<T> {
    let file = File::open(path).ok()?;
    let mut bytes = Vec::new();
    file.take(cap + 1).read_to_end(&mut bytes).ok()?;
    if bytes.len() as u64 > cap {
        return None;
    }
    serde_json::from_slice(&bytes).ok()
}

/// The question session `run` is waiting on, if a writer is alive to hear
/// the answer (rule 1).
pub fn pending(store: &Store, run: &RunId) -> Option<Question> {
    if cairn_journal::writer_alive(&store.lock_path(run)) != Some(true) {
        return None;
    }
    read_json(&question_path(store, run), MAX_QUESTION_BYTES)
}

/// Whether the asking `asked` is still the one posted for session `run`.
/// Asked again and again while an answer waits to be heard, so only the
/// token is taken from the file (the call and its preview are skipped).
pub fn still_asked(store: &Store, run: &RunId, asked: &str) -> bool {
    #[derive(Deserialize)]
    struct Token {
        asked: String,
    }
    read_json::<Token>(&question_path(store, run), MAX_QUESTION_BYTES)
        .is_some_and(|q| q.asked == asked)
}

/// Answers the pending question of session `run` about `call`; returns
/// the question answered.
///
/// # Errors
/// [`QuestionError::NotWaiting`] when no such question is pending; the
/// store's error when the answer cannot be written.
pub fn answer(
    store: &Store,
    run: &RunId,
    call: &str,
    decision: Decision,
) -> Result<Question, QuestionError> {
    let q = pending(store, run)
        .filter(|q| q.call.id == call)
        .ok_or_else(|| QuestionError::NotWaiting {
            run: run.to_string(),
            call: call.to_owned(),
        })?;
    let a = AnswerFile {
        asked: q.asked.clone(),
        call: call.to_owned(),
        decision,
    };
    let path = answer_path(store, run);
    let bytes = serde_json::to_vec(&a).map_err(|e| io_error("encoding", &path, e.into()))?;
    durable::write_atomic(&path, &bytes)?;
    Ok(q)
}

/// The answer given to the asking `q` of session `run`, once there is one
/// (an answer to any other asking is ignored, rule 2).
pub fn taken(store: &Store, run: &RunId, q: &Question) -> Option<Decision> {
    read_json::<AnswerFile>(&answer_path(store, run), MAX_ANSWER_BYTES)
        .filter(|a| a.asked == q.asked && a.call == q.call.id)
        .map(|a| a.decision)
}

/// A question the loop posted; withdrawn when dropped, however the wait
/// ended (an answer here or there, a stop, an error), so none is left
/// behind by a run that goes on.
pub(crate) struct Posted {
    store: Store,
    run: RunId,
    question: Question,
}

/// How often a waiting run looks for an answer given elsewhere.
const ANSWER_POLL: std::time::Duration = std::time::Duration::from_millis(200);

impl Posted {
    /// Posts the question about `call` ([`post`]).
    pub(crate) fn post(
        store: &Store,
        run: &RunId,
        call: &ToolCall,
        preview: Option<&str>,
    ) -> Result<Posted, StoreError> {
        Ok(Posted {
            question: post(store, run, call, preview)?,
            store: store.clone(),
            run: run.clone(),
        })
    }

    /// The answer given elsewhere to the posted question; never, when none
    /// was posted.
    pub(crate) async fn answered(posted: Option<&Posted>) -> Decision {
        let Some(p) = posted else {
            return std::future::pending().await;
        };
        loop {
            tokio::time::sleep(ANSWER_POLL).await;
            if let Some(d) = taken(&p.store, &p.run, &p.question) {
                return d;
            }
        }
    }
}

impl Drop for Posted {
    fn drop(&mut self) {
        withdraw(&self.store, &self.run);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: "shell".into(),
            arguments: json!({"command": "echo hi"}),
            raw_arguments: None,
        }
    }

    /// A store with session `run`'s directory and its journal lock held.
    fn held() -> (tempfile::TempDir, Store, RunId, File) {
        let d = tempfile::tempdir().unwrap();
        let store = Store::at(d.path());
        let run = RunId::parse("01HZZZZZZZZZZZZZZZZZZZZZZZ").unwrap();
        std::fs::create_dir_all(store.run_dir(&run)).unwrap();
        let lock = File::create(store.lock_path(&run)).unwrap();
        lock.lock().unwrap();
        (d, store, run, lock)
    }

    #[test]
    fn a_posted_question_is_answered_once_and_withdrawn() {
        let (_d, store, run, _lock) = held();
        assert!(pending(&store, &run).is_none());
        let q = post(&store, &run, &call("c1"), Some("+new\n")).unwrap();
        assert_eq!(pending(&store, &run).as_ref(), Some(&q));
        assert_eq!(taken(&store, &run, &q), None);
        let err = answer(&store, &run, "c2", Decision::Run).unwrap_err();
        assert!(matches!(err, QuestionError::NotWaiting { .. }), "{err}");
        assert_eq!(
            taken(&store, &run, &q),
            None,
            "a refused answer writes nothing"
        );
        let answered = answer(&store, &run, "c1", Decision::Decline).unwrap();
        assert_eq!(answered, q);
        assert_eq!(taken(&store, &run, &q), Some(Decision::Decline));
        assert!(still_asked(&store, &run, &q.asked));
        withdraw(&store, &run);
        assert!(pending(&store, &run).is_none());
        assert!(!still_asked(&store, &run, &q.asked));
        assert!(answer(&store, &run, "c1", Decision::Run).is_err());
    }

    #[test]
    fn an_answer_to_an_earlier_asking_never_lands_on_the_next() {
        let (_d, store, run, _lock) = held();
        let first = post(&store, &run, &call("same"), None).unwrap();
        answer(&store, &run, "same", Decision::Run).unwrap();
        // The same call id asked again (a resume asks again): the old answer
        // is removed by the post, and one written late is ignored.
        let second = post(&store, &run, &call("same"), None).unwrap();
        assert_ne!(first.asked, second.asked);
        assert_eq!(taken(&store, &run, &second), None);
        let late = AnswerFile {
            asked: first.asked.clone(),
            call: "same".into(),
            decision: Decision::Run,
        };
        std::fs::write(
            answer_path(&store, &run),
            serde_json::to_vec(&late).unwrap(),
        )
        .unwrap();
        assert_eq!(taken(&store, &run, &second), None);
    }

    #[test]
    fn a_question_without_a_living_writer_is_not_pending() {
        let (_d, store, run, lock) = held();
        post(&store, &run, &call("c1"), None).unwrap();
        drop(lock);
        assert!(pending(&store, &run).is_none(), "left behind by a crash");
        assert!(matches!(
            answer(&store, &run, "c1", Decision::Run),
            Err(QuestionError::NotWaiting { .. })
        ));
    }

    #[test]
    fn damaged_or_oversized_files_are_no_question_and_no_answer() {
        let (_d, store, run, _lock) = held();
        let q = post(&store, &run, &call("c1"), None).unwrap();
        std::fs::write(answer_path(&store, &run), b"{\"asked\":").unwrap();
        assert_eq!(taken(&store, &run, &q), None);
        let big = vec![b' '; (MAX_ANSWER_BYTES + 1) as usize];
        std::fs::write(answer_path(&store, &run), big).unwrap();
        assert_eq!(taken(&store, &run, &q), None);
        std::fs::write(question_path(&store, &run), b"not json").unwrap();
        assert!(pending(&store, &run).is_none());
    }
}
