//! Group commit of purchases (DESIGN §7, "Order", step 2): the calls that
//! finish together are made durable together.
//!
//! One thread takes every purchase waiting to be made durable, stores all
//! their bodies and entries with one commit of the object pool (one
//! file-system barrier for a group of several while little else is dirty,
//! else an fsync per file), then appends each session's `model_call`
//! records with one write and one fsync, and only then tells each purchase
//! it may release its final event. A call that finishes alone pays what it
//! would alone; calls that finish while another group commits wait for the
//! next group, which is never longer than one commit.
//!
//! Outcomes are per session: the bodies and entries of a group are one
//! commit (all durable or none visible), but each session's records are
//! their own append, so a session whose append fails fails its own calls
//! and no other (every other session's records are appended all the same).

use std::collections::HashMap;
use std::sync::mpsc;

use cairn_journal::{ModelCall, RecordBody};
use tokio::sync::oneshot;

use crate::filing::Filed;
use cairn_calls::{Barrier, Entry, GroupPut, ResponseStore};

use crate::GatewayError;

/// When the pool's barrier replaces the per-file fsyncs of a group: from
/// two new files on (one call's request and answer, or two calls'
/// requests), and only while little else is dirty. On a disk at rest one
/// barrier costs less than even two fsyncs and their directories' (the
/// gateway bench, five alternating runs: a median of 2,397 calls/s, against
/// 1,750 when the barrier was taken from eight files on, whatever else was
/// dirty); beside a writer (`dd` writing gigabytes) the group's fsyncs wait
/// for its own files only (551 against 331 calls/s, three runs each).
const BARRIER: Barrier = Barrier::FromWhenQuiet(2);
/// At most this many calls in one group.
const MAX_GROUP: usize = 64;

/// One purchase to make durable.
pub(crate) struct Job {
    pub(crate) entry: Option<Entry>,
    pub(crate) body: Vec<u8>,
    pub(crate) request: Vec<u8>,
    pub(crate) record: ModelCall,
    pub(crate) session: Filed,
    pub(crate) done: oneshot::Sender<Result<(), String>>,
}

/// What the committing thread is sent.
enum Msg {
    /// A purchase to make durable.
    Job(Box<Job>),
    /// Answered once every job sent before it is done.
    Flush(oneshot::Sender<()>),
}

/// The committing thread's queue; `None` once closed.
pub(crate) struct Committer {
    tx: std::sync::Mutex<Option<mpsc::Sender<Msg>>>,
}

impl Committer {
    pub(crate) fn start(responses: ResponseStore) -> Result<Committer, GatewayError> {
        let (tx, rx) = mpsc::channel::<Msg>();
        std::thread::Builder::new()
            .name("cairn-gateway-commit".into())
            .spawn(move || run(&responses, &rx))
            .map_err(|e| GatewayError::Internal {
                reason: format!("cannot start the commit thread: {e}"),
            })?;
        Ok(Committer {
            tx: std::sync::Mutex::new(Some(tx)),
        })
    }

    /// Makes a purchase durable: bodies, entry, record. Resolves when done.
    ///
    /// # Errors
    /// The commit failed, or the committer is closed (the gateway is
    /// stopping at once): then nothing of the purchase is stored.
    pub(crate) async fn commit(
        &self,
        job: impl FnOnce(oneshot::Sender<Result<(), String>>) -> Job,
    ) -> Result<(), GatewayError> {
        let (done, wait) = oneshot::channel();
        let sent = match self.tx.lock().map_err(|_| poisoned())?.as_ref() {
            Some(tx) => tx.send(Msg::Job(Box::new(job(done)))).is_ok(),
            None => {
                return Err(GatewayError::Internal {
                    reason: "the gateway is stopping: the response was not stored".into(),
                })
            }
        };
        if !sent {
            return Err(GatewayError::Internal {
                reason: "the commit thread is gone".into(),
            });
        }
        match wait.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(reason)) => Err(GatewayError::Internal { reason }),
            Err(_) => Err(GatewayError::Internal {
                reason: "the commit thread dropped a purchase".into(),
            }),
        }
    }

    /// Refuses every later commit, and resolves once every commit taken
    /// before is done (durable or failed): nothing is written after it.
    pub(crate) async fn close(&self) {
        let (flushed, wait) = oneshot::channel();
        let tx = match self.tx.lock() {
            Ok(mut tx) => tx.take(),
            Err(_) => None,
        };
        if let Some(tx) = tx {
            if tx.send(Msg::Flush(flushed)).is_ok() {
                let _ = wait.await;
            }
        }
    }
}

fn run(responses: &ResponseStore, rx: &mpsc::Receiver<Msg>) {
    let mut flush = None;
    while let Ok(first) = rx.recv() {
        let mut jobs = Vec::new();
        match first {
            Msg::Job(j) => jobs.push(*j),
            Msg::Flush(f) => {
                let _ = f.send(());
                continue;
            }
        }
        while jobs.len() < MAX_GROUP {
            match rx.try_recv() {
                Ok(Msg::Job(j)) => jobs.push(*j),
                // Answered once the group before it is committed.
                Ok(Msg::Flush(f)) => {
                    flush = Some(f);
                    break;
                }
                Err(_) => break,
            }
        }
        let outcomes = commit_group(responses, &mut jobs);
        for (j, outcome) in jobs.into_iter().zip(outcomes) {
            let _ = j.done.send(outcome);
        }
        if let Some(f) = flush.take() {
            let _ = f.send(());
        }
    }
}

/// Commits a group; the outcome of each job, in order. The bodies and
/// entries are one commit, so they succeed or fail for all; the records are
/// appended session by session, and a session whose append fails fails only
/// its own calls (their responses stay stored, for the retry to be served).
fn commit_group(responses: &ResponseStore, jobs: &mut [Job]) -> Vec<Result<(), String>> {
    // Held until the records are appended: a call without an entry has
    // its bodies named by its record alone.
    let held = match responses.lock() {
        Ok(held) => held,
        Err(e) => return vec![Err(e.to_string()); jobs.len()],
    };
    let mut group: Vec<GroupPut> = jobs
        .iter_mut()
        .map(|j| GroupPut {
            entry: j.entry.take(),
            body: std::mem::take(&mut j.body),
            request: std::mem::take(&mut j.request),
            hashes: None,
        })
        .collect();
    if let Err(e) = responses.put_group(&held, &mut group, BARRIER) {
        return vec![Err(e.to_string()); jobs.len()];
    }
    let mut outcomes: Vec<Result<(), String>> = vec![Ok(()); jobs.len()];
    // Each session's records in one append, in the order the calls came.
    let mut by_session: HashMap<cairn_store::RunId, (Filed, Vec<usize>, Vec<RecordBody>)> =
        HashMap::new();
    let mut order = Vec::new();
    for (i, (j, g)) in jobs.iter().zip(group).enumerate() {
        let mut record = j.record.clone();
        if let Some((response, request)) = g.hashes {
            record.response = Some(response);
            record.request = Some(request);
        }
        let k = match j.session.run() {
            Ok(k) => k,
            Err(e) => {
                outcomes[i] = Err(e.to_string());
                continue;
            }
        };
        if !by_session.contains_key(&k) {
            order.push(k.clone());
        }
        let (_, calls, records) = by_session
            .entry(k)
            .or_insert_with(|| (j.session.clone(), Vec::new(), Vec::new()));
        calls.push(i);
        records.push(RecordBody::ModelCall(record));
    }
    for k in order {
        if let Some((session, calls, records)) = by_session.remove(&k) {
            if let Err(e) = session.append_all(records) {
                let why = format!("the model_call records of session {k} were not journaled: {e}");
                tracing::error!("{why}");
                for i in calls {
                    outcomes[i] = Err(why.clone());
                }
            }
        }
    }
    drop(held);
    outcomes
}

fn poisoned() -> GatewayError {
    GatewayError::Internal {
        reason: "a lock was poisoned by a panic".into(),
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use cairn_journal::{ModelCall, RecordBody};
    use cairn_sessions::Session;
    use cairn_store::{RunId, Store};

    use super::{commit_group, Job};
    use crate::filing::Filed;
    use cairn_calls::{Entry, GroupPut, ResponseStore};

    fn job(session: Filed, key: &str) -> Job {
        let (done, _) = tokio::sync::oneshot::channel();
        Job {
            entry: Some(Entry::whole_json(key, "", "/v1/chat/completions")),
            body: format!("{{\"answer\": \"{key}\"}}").into_bytes(),
            request: format!("{{\"question\": \"{key}\"}}").into_bytes(),
            record: ModelCall {
                endpoint: "/v1/chat/completions".into(),
                key: key.to_owned(),
                ..ModelCall::default()
            },
            session,
            done,
        }
    }

    /// The bodies of a call journaled without an entry (an error, a cut)
    /// are named by its record alone: a prune must not run between their
    /// put and that record.
    #[test]
    fn a_prune_waits_until_the_bodies_of_a_call_without_an_entry_are_journaled() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("store")).unwrap();
        let mut session = Session::create_without_model(&store, dir.path(), "p").unwrap();
        let responses = ResponseStore::new(&store);
        let held = responses.lock().unwrap();
        let mut group = vec![GroupPut {
            entry: None,
            body: b"a cut answer".to_vec(),
            request: b"the question".to_vec(),
            hashes: None,
        }];
        responses
            .put_group(&held, &mut group, cairn_calls::Barrier::From(0))
            .unwrap();
        let (response, request) = group[0].hashes.clone().unwrap();
        // Nothing names the bodies yet: a prune now would delete them.
        let pruning = {
            let store = store.clone();
            std::thread::spawn(move || {
                let options = cairn_objects::PruneOptions::new().wait(true);
                cairn_sessions::prune(&store, &options, &cairn_objects::NoProgress)
            })
        };
        std::thread::sleep(std::time::Duration::from_millis(300));
        assert!(
            !pruning.is_finished(),
            "a prune ran while a writer held the store lock"
        );
        session
            .append_all(vec![RecordBody::ModelCall(ModelCall {
                endpoint: "/v1/messages".into(),
                key: "k".into(),
                response: Some(response.clone()),
                request: Some(request.clone()),
                ..ModelCall::default()
            })])
            .unwrap();
        drop(held);
        let report = pruning.join().unwrap().unwrap();
        assert_eq!(report.objects, 0, "{report:?}");
        let pool = cairn_objects::ObjectPool::open(&store).unwrap();
        for h in [response, request] {
            assert!(pool.contains(&h.parse().unwrap()), "{h} was pruned");
        }
    }

    fn calls(store: &Store, id: &RunId) -> Vec<String> {
        cairn_journal::read_journal(&store.journal_path(id), id.as_str())
            .unwrap()
            .records
            .into_iter()
            .filter_map(|r| match r.body {
                RecordBody::ModelCall(m) => Some(m.key),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn a_session_whose_append_fails_fails_only_its_own_calls() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("store")).unwrap();
        let held = |name: &str| {
            let s = Session::create_without_model(&store, dir.path(), name).unwrap();
            let id = s.id().clone();
            (Filed::Held(Arc::new(Mutex::new(s))), id)
        };
        let (a, a_id) = held("a");
        let (c, c_id) = held("c");
        // A session whose journal cannot be opened: every append fails.
        let broken = Filed::Visited {
            store: store.clone(),
            run: RunId::new(),
        };
        let mut jobs = vec![
            job(a.clone(), "k-a1"),
            job(broken.clone(), "k-b"),
            job(c, "k-c"),
            job(a, "k-a2"),
        ];
        let responses = ResponseStore::new(&store);
        let outcomes = commit_group(&responses, &mut jobs);
        assert!(outcomes[0].is_ok(), "{outcomes:?}");
        assert!(outcomes[1].is_err(), "{outcomes:?}");
        assert!(outcomes[2].is_ok(), "{outcomes:?}");
        assert!(outcomes[3].is_ok(), "{outcomes:?}");
        assert_eq!(calls(&store, &a_id), ["k-a1", "k-a2"]);
        assert_eq!(
            calls(&store, &c_id),
            ["k-c"],
            "the session after the failed one"
        );
        // Every response is kept, the failed session's too: its retry is
        // served instead of bought again.
        for key in ["k-a1", "k-b", "k-c", "k-a2"] {
            assert!(responses.get(key).unwrap().is_some(), "{key}");
        }
    }
}
