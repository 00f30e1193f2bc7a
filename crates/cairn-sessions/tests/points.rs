//! Rewind points and the rewind to one, as the TUI (and any front end)
//! gets them from the library: the person's messages with the files their
//! turns changed, and the three ways back.

mod common;

use cairn_journal::TerminalReason;
use cairn_sessions::{rewind_points, rewind_to_point, RewindAction, Session, SessionError};
use cairn_store::{RunId, Store};
use cairn_workspace::{CaptureConfig, Label, NoProgress, Workspace};
use common::*;

struct Fixture {
    _dir: tempfile::TempDir,
    store: Store,
    root: std::path::PathBuf,
    id: RunId,
    ws: Workspace,
}

/// Message one, whose turn 1 changed `f.txt` (its `pre:` and `post:`
/// journaled as the agent journals them); then message two, after which no
/// turn ran.
fn session() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store")).unwrap();
    let root = dir.path().join("ws");
    std::fs::create_dir(&root).unwrap();
    std::fs::write(root.join("f.txt"), "before\n").unwrap();
    let mut w = Writer::create(&store, root.to_str().unwrap(), "s");
    w.append(user("one"));
    w.end(TerminalReason::Completed);
    let id = w.id.clone();
    drop(w);
    let ws = Workspace::open(&store, &id, &root, CaptureConfig::default()).unwrap();
    let mut session = Session::open(&store, &id).unwrap();
    let pre = ws
        .capture(&Label::parse("pre:turn:1").unwrap(), &NoProgress)
        .unwrap();
    session.record_capture(&pre).unwrap();
    std::fs::write(root.join("f.txt"), "after\n").unwrap();
    let post = ws
        .capture(&Label::parse("post:turn:1").unwrap(), &NoProgress)
        .unwrap();
    session.record_capture(&post).unwrap();
    session.append(user("two")).unwrap();
    drop(session);
    Fixture {
        _dir: dir,
        store,
        root,
        id,
        ws,
    }
}

fn read(f: &Fixture) -> String {
    std::fs::read_to_string(f.root.join("f.txt")).unwrap()
}

#[test]
fn the_points_are_the_persons_messages_with_the_files_their_turns_changed() {
    let f = session();
    let points = rewind_points(&f.store, &f.id, &f.ws).unwrap();
    assert_eq!(points.len(), 2, "{points:?}");
    assert_eq!((points[0].number, points[0].text.as_str()), (1, "one"));
    assert_eq!(points[0].turn, Some(1));
    assert_eq!(points[0].name(), "turn:1");
    assert_eq!(points[0].files, ["f.txt"]);
    assert_eq!((points[1].number, points[1].turn), (2, None));
    assert_eq!(points[1].name(), "message 2");
    assert!(points[1].files.is_empty());
}

#[test]
fn both_puts_the_files_back_and_forks_before_the_message() {
    let f = session();
    let points = rewind_points(&f.store, &f.id, &f.ws).unwrap();
    let mut session = Session::open(&f.store, &f.id).unwrap();
    let done = rewind_to_point(
        &mut session,
        &f.ws,
        &points[0],
        RewindAction::Both,
        &NoProgress,
    )
    .unwrap();
    drop(session);
    assert_eq!(read(&f), "before\n");
    let report = done.report.expect("the files were restored");
    assert_eq!(report.written, ["f.txt"]);
    let child = done.fork.expect("a fork").unwrap();
    let listed = cairn_sessions::list(&f.store).unwrap();
    let fork = listed.iter().find(|s| s.id == child.to_string()).unwrap();
    let parent = fork.parent.as_ref().unwrap();
    assert_eq!(parent.id, f.id.to_string());
    assert_eq!(
        parent.seq,
        points[0].seq - 1,
        "forked just before the message"
    );
    // The parent keeps every turn, and its restore is journaled with its bank.
    let bank = cairn_sessions::last_bank(&f.store, &f.id).unwrap();
    assert_eq!(bank, Some(report.bank.snapshot));
}

#[test]
fn code_needs_a_turn_after_the_message_and_conversation_does_not() {
    let f = session();
    let points = rewind_points(&f.store, &f.id, &f.ws).unwrap();
    let journal = std::fs::read(f.store.journal_path(&f.id)).unwrap();
    let mut session = Session::open(&f.store, &f.id).unwrap();
    for action in [RewindAction::Code, RewindAction::Both] {
        match rewind_to_point(&mut session, &f.ws, &points[1], action, &NoProgress) {
            Err(SessionError::NoTurnAfter { message: 2, .. }) => {}
            other => panic!("{action:?}: {other:?}"),
        }
    }
    assert_eq!(std::fs::read(f.store.journal_path(&f.id)).unwrap(), journal);
    assert_eq!(read(&f), "after\n");

    let done = rewind_to_point(
        &mut session,
        &f.ws,
        &points[1],
        RewindAction::Conversation,
        &NoProgress,
    )
    .unwrap();
    assert!(done.report.is_none(), "files untouched");
    assert!(done.fork.unwrap().is_ok());
    assert_eq!(read(&f), "after\n");
    assert_eq!(std::fs::read(f.store.journal_path(&f.id)).unwrap(), journal);
}
