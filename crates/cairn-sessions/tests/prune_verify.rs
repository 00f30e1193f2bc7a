//! The prune roots and what `verify` means, as the library gives them to
//! every front end: a prune keeps every object any root names (stored
//! responses and journaled model calls included) and nothing else, and a
//! session whose model call lost a body does not verify.

mod common;

use cairn_calls::{Entry, ResponseStore};
use cairn_journal::{Cost, ModelCall, RecordBody, TerminalReason};
use cairn_objects::{NoProgress, ObjectHash, ObjectPool, PruneOptions, StoreLock};
use cairn_store::{RunId, Store};
use common::*;

fn put(store: &Store, bytes: &[u8]) -> ObjectHash {
    let lock = StoreLock::shared(store).unwrap();
    ObjectPool::open(store)
        .unwrap()
        .put_bytes(&lock, bytes)
        .unwrap()
        .hash
}

/// A session whose gateway call failed: journaled with its request body,
/// never stored as a response.
fn session_with_a_failed_call(store: &Store, request: &ObjectHash) -> RunId {
    let mut w = Writer::create(store, "/ws", "calls");
    w.append(user("task"));
    w.append(RecordBody::ModelCall(ModelCall {
        endpoint: "/v1/chat/completions".into(),
        key: "k".into(),
        request: Some(request.to_hex()),
        response: None,
        status: 502,
        cost: Cost::ZERO,
        error: Some("the upstream went away".into()),
        ..ModelCall::default()
    }));
    w.end(TerminalReason::Completed);
    w.id.clone()
}

fn store_response(store: &Store, run: &RunId) -> Entry {
    let entry = Entry {
        stream: true,
        content_type: "text/event-stream".into(),
        ..Entry::whole_json("cd".repeat(32), run.to_string(), "/v1/messages")
    };
    ResponseStore::new(store)
        .put(
            entry,
            b"event: message_stop\n\n",
            Some(b"{\"model\":\"m\"}"),
        )
        .unwrap()
}

#[test]
fn a_prune_keeps_what_stored_responses_and_journaled_calls_name_and_nothing_else() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let journaled = put(&store, b"{\"messages\": [\"a failed call\"]}");
    let id = session_with_a_failed_call(&store, &journaled);
    let entry = store_response(&store, &id);
    let orphan = put(&store, b"named by nothing");

    let dry =
        cairn_sessions::prune(&store, &PruneOptions::new().dry_run(true), &NoProgress).unwrap();
    assert_eq!(dry.objects, 1, "{dry:?}");
    let done = cairn_sessions::prune(&store, &PruneOptions::new().wait(true), &NoProgress).unwrap();
    assert_eq!(done.objects, 1, "{done:?}");

    let pool = ObjectPool::open(&store).unwrap();
    assert!(!pool.contains(&orphan), "the unnamed object stayed");
    assert!(pool.contains(&journaled), "the journaled call's body went");
    for h in std::iter::once(&entry.body).chain(entry.request.iter()) {
        let h = ObjectHash::parse(h).unwrap();
        assert!(pool.contains(&h), "a stored response's body went");
    }
    assert!(cairn_sessions::verify(&store, &id).unwrap().ok());
}

#[test]
fn a_session_whose_model_call_lost_its_body_does_not_verify() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let body = put(&store, b"{\"messages\": [\"gone\"]}");
    let id = session_with_a_failed_call(&store, &body);
    assert!(cairn_sessions::verify(&store, &id).unwrap().ok());

    std::fs::remove_file(ObjectPool::open(&store).unwrap().path_of(&body)).unwrap();
    let report = cairn_sessions::verify(&store, &id).unwrap();
    assert!(!report.ok());
    let problem = report.problem.unwrap();
    assert!(
        problem.contains("model_call at seq 3") && problem.contains(&body.to_string()),
        "{problem}"
    );
    // The records themselves hold: no bad seq is named.
    assert_eq!(report.first_bad_seq, None);
}
