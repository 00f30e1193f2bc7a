//! Removing sessions: what a session owns outside its directory (its
//! stored model responses) goes first, a removal that stopped part-way is
//! finished by the next, and a removal and a fork of the same parent
//! exclude each other.

mod common;

use std::sync::{Arc, Barrier};

use cairn_calls::{Entry, ResponseStore};
use cairn_journal::{JournalError, TerminalReason};
use cairn_sessions::{remove, RemoveOptions, SessionError};
use cairn_store::{RunId, Store};
use common::*;

/// Stores a model response bought by `run` (what the gateway or cairn's
/// own loop keeps), under a key made from `n`; returns the key.
fn stored_response(store: &Store, run: &RunId, n: u8) -> String {
    let key = format!("{n:02x}").repeat(32);
    let entry = Entry::whole_json(key.clone(), run.to_string(), "/v1/chat/completions");
    ResponseStore::new(store)
        .put(entry, b"{\"prompt\": \"secret\"}", Some(b"{}"))
        .unwrap();
    key
}

fn has_response(store: &Store, key: &str) -> bool {
    ResponseStore::new(store).get(key).unwrap().is_some()
}

fn finished(store: &Store, name: &str) -> RunId {
    let mut w = Writer::create(store, "/ws", name);
    w.append(user("task"));
    w.end(TerminalReason::Completed);
    w.id.clone()
}

fn listed(store: &Store) -> Vec<String> {
    cairn_sessions::list(store)
        .unwrap()
        .into_iter()
        .map(|s| s.id)
        .collect()
}

#[test]
fn a_failed_removal_of_what_a_session_owns_keeps_it_and_the_next_rm_completes() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let id = finished(&store, "doomed");
    // The response store cannot be read: its directory is a file.
    let responses_dir = store.gateway_dir().join("responses");
    std::fs::create_dir_all(store.gateway_dir()).unwrap();
    std::fs::write(&responses_dir, b"not a directory").unwrap();
    let err = remove(&store, &id, RemoveOptions::new()).unwrap_err();
    assert!(matches!(err, SessionError::StoredResponses { .. }), "{err}");
    assert!(err.to_string().contains("cairn session rm"), "{err}");
    // The session is whole: listed, verifying.
    assert_eq!(listed(&store), [id.to_string()]);
    assert!(cairn_sessions::verify(&store, &id).unwrap().ok());

    // The cause fixed, the next rm removes the session and its response.
    std::fs::remove_file(&responses_dir).unwrap();
    let key = stored_response(&store, &id, 0xab);
    let done = remove(&store, &id, RemoveOptions::new()).unwrap();
    assert_eq!(done.runs, std::slice::from_ref(&id));
    assert_eq!(done.responses, 1);
    assert!(!has_response(&store, &key));
    assert!(!store.run_dir(&id).exists());
    assert!(!store.removing_dir(&id).exists());
    assert!(listed(&store).is_empty());
    // Nothing left: a third is "no such session".
    let err = remove(&store, &id, RemoveOptions::new()).unwrap_err();
    assert!(
        matches!(err, SessionError::Journal(JournalError::NotFound { .. })),
        "{err}"
    );
}

#[test]
fn a_removal_leaves_the_responses_of_other_sessions() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let (a, b) = (finished(&store, "a"), finished(&store, "b"));
    let (ka, kb) = (
        stored_response(&store, &a, 1),
        stored_response(&store, &b, 2),
    );
    let done = remove(&store, &a, RemoveOptions::new()).unwrap();
    assert_eq!(done.responses, 1);
    assert!(!has_response(&store, &ka));
    assert!(has_response(&store, &kb), "b's response went with a");
}

#[test]
fn a_removal_stopped_after_the_move_is_no_session_and_the_next_rm_finishes_it() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let a = finished(&store, "a");
    let b = finished(&store, "b");
    // A crash before step 1 was durable: their responses are still there.
    let (ka, kb) = (
        stored_response(&store, &a, 1),
        stored_response(&store, &b, 2),
    );
    // What a crash after step 2 leaves, for both.
    for id in [&a, &b] {
        std::fs::rename(store.run_dir(id), store.removing_dir(id)).unwrap();
    }
    assert!(
        listed(&store).is_empty(),
        "a half-removed session is listed"
    );
    let c = finished(&store, "c");
    assert_eq!(listed(&store), [c.to_string()]);

    // `rm a` finishes a (and b, whose prompts must not stay either).
    let done = remove(&store, &a, RemoveOptions::new()).unwrap();
    assert_eq!(done.runs, std::slice::from_ref(&a));
    let mut finished_now = done.finished.clone();
    finished_now.sort();
    let mut want = vec![a.clone(), b.clone()];
    want.sort();
    assert_eq!(finished_now, want);
    assert!(
        !has_response(&store, &ka) && !has_response(&store, &kb),
        "their responses are removed again"
    );
    for id in [&a, &b] {
        assert!(!store.removing_dir(id).exists());
    }
    assert_eq!(listed(&store), [c.to_string()]);
}

/// Many rounds of `rm P` and `fork P` at the same moment: one of them
/// wins, and never is a fork left whose parent is gone.
#[test]
fn rm_and_fork_of_one_parent_never_leave_a_fork_without_its_parent() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let (mut removed, mut forked) = (0, 0);
    for round in 0..60 {
        let parent = finished(&store, &format!("parent {round}"));
        let start = Arc::new(Barrier::new(2));
        let (rm, fork) = std::thread::scope(|scope| {
            let rm = scope.spawn({
                let start = Arc::clone(&start);
                let (store, parent) = (store.clone(), parent.clone());
                move || {
                    start.wait();
                    remove(&store, &parent, RemoveOptions::new())
                }
            });
            let fork = scope.spawn({
                let start = Arc::clone(&start);
                let (store, parent) = (store.clone(), parent.clone());
                move || {
                    start.wait();
                    cairn_sessions::fork(&store, &parent, None, None).map(|(id, _, _)| id)
                }
            });
            (rm.join().unwrap(), fork.join().unwrap())
        });
        match (&rm, &fork) {
            (Ok(_), Err(SessionError::Journal(JournalError::NotFound { .. }))) => removed += 1,
            (Err(SessionError::PinnedByForks { .. }), Ok(_)) => forked += 1,
            other => panic!("round {round}: {other:?}"),
        }
        // Every fork in the store still has its parent, and verifies.
        for s in cairn_sessions::list(&store).unwrap() {
            if let Some(p) = &s.parent {
                let pid = RunId::parse(&p.id).unwrap();
                assert!(
                    store.journal_path(&pid).is_file(),
                    "round {round}: {} lost {}",
                    s.id,
                    p.id
                );
                assert!(s.valid, "round {round}: {s:?}");
            }
        }
    }
    eprintln!("{removed} rounds removed the parent first, {forked} forked it first");
}
