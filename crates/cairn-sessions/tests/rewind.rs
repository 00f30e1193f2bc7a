//! `rewind_and_fork` checks what a fork needs before it changes a file.

mod common;

use cairn_journal::TerminalReason;
use cairn_sessions::{rewind_and_fork, Session, SessionError};
use cairn_store::Store;
use cairn_workspace::{CaptureConfig, Label, NoProgress, NodeRef, RestoreScope, Workspace};
use common::*;

/// A boundary the workspace holds but the journal does not (captured and
/// never journaled) cannot be forked at: refused, and nothing changes.
#[test]
fn a_boundary_the_journal_does_not_hold_is_refused_before_any_change() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path().join("store")).unwrap();
    let root = d.path().join("ws");
    std::fs::create_dir(&root).unwrap();
    let mut w = Writer::create(&store, root.to_str().unwrap(), "s");
    w.append(user("task"));
    w.end(TerminalReason::Completed);
    let id = w.id.clone();
    drop(w);
    let ws = Workspace::open(&store, &id, &root, CaptureConfig::default()).unwrap();
    std::fs::write(root.join("f.txt"), "before\n").unwrap();
    ws.capture(&Label::parse("pre:turn:1").unwrap(), &NoProgress)
        .unwrap();
    std::fs::write(root.join("f.txt"), "after\n").unwrap();
    ws.capture(&Label::parse("post:turn:1").unwrap(), &NoProgress)
        .unwrap();
    let journal = std::fs::read(store.journal_path(&id)).unwrap();
    let snapshots = ws.list_snapshots().unwrap().len();

    let mut session = Session::open(&store, &id).unwrap();
    let node = NodeRef::parse("turn:1").unwrap();
    match rewind_and_fork(&mut session, &ws, &node, RestoreScope::Full, &NoProgress) {
        Err(SessionError::NoForkBoundary { label, .. }) => assert_eq!(label, "pre:turn:1"),
        other => panic!("{:?}", other.map(|r| r.fork)),
    }
    drop(session);
    assert_eq!(
        std::fs::read_to_string(root.join("f.txt")).unwrap(),
        "after\n"
    );
    assert_eq!(std::fs::read(store.journal_path(&id)).unwrap(), journal);
    assert_eq!(
        ws.list_snapshots().unwrap().len(),
        snapshots,
        "nothing banked"
    );
    assert_eq!(cairn_sessions::list(&store).unwrap().len(), 1, "no fork");
}
