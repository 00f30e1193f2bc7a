//! A damaged or lost index.json is rebuilt from the journal's boundary
//! records: the `pre:` labels (labels on existing snapshots, in no manifest)
//! come back, and `rewind --to` works again.

mod common;

use std::fs;

use cairn_workspace::*;
use common::*;

/// The boundary records a caller would journal, in order.
#[derive(Default)]
struct Journal(Vec<(SnapshotId, Label)>);

impl Journal {
    fn enter(&mut self, ws: &Workspace, name: &str) -> NodeIter {
        let e = ws.enter_node(&node(name), &NoProgress).unwrap();
        for c in e.resume.iter().chain(&e.first) {
            self.0.push((c.snapshot.clone(), c.label.clone()));
        }
        self.0.push((e.pre.clone(), Label::Pre(e.at.clone())));
        e.at
    }

    fn leave(&mut self, ws: &Workspace, at: &NodeIter) {
        let c = ws.leave_node(at, NodeEnd::Completed, &NoProgress).unwrap();
        self.0.push((c.snapshot, c.label));
    }
}

/// Two exec nodes, each rewriting `notes.md`.
fn two_nodes() -> (Fixture, Journal) {
    let f = Fixture::new();
    let mut j = Journal::default();
    f.write("notes.md", "draft\n");
    let one = j.enter(&f.ws, "exec");
    f.write("notes.md", "by node 1\n");
    j.leave(&f.ws, &one);
    let two = j.enter(&f.ws, "exec");
    f.write("notes.md", "by node 2\n");
    f.write("new.txt", "node 2 made this\n");
    j.leave(&f.ws, &two);
    (f, j)
}

fn index_path(f: &Fixture) -> std::path::PathBuf {
    f.store.workspace_index_path(&f.run)
}

#[test]
fn a_garbage_index_is_rebuilt_from_the_journal_and_rewind_works() {
    let (f, j) = two_nodes();
    let head = f.ws.head().unwrap();
    fs::write(index_path(&f), b"\x00garbage{").unwrap();
    let e = f.ws.rewind_to(
        &NodeRef::parse("exec:2").unwrap(),
        RestoreScope::Run,
        &NoProgress,
    );
    let e = e.unwrap_err();
    assert!(e.is_integrity(), "{e}");
    assert!(e.to_string().contains("cairn reindex"), "{e}");

    let r = f.ws.rebuild_index(&j.0).unwrap();
    assert!(r.not_rebuilt.is_empty(), "{:?}", r.not_rebuilt);
    assert_eq!(r.head, head);
    assert_eq!(r.snapshots, 3, "pre:exec:1, post:exec:1 and post:exec:2");
    let rw =
        f.ws.rewind_to(
            &NodeRef::parse("exec:2").unwrap(),
            RestoreScope::Run,
            &NoProgress,
        )
        .unwrap();
    assert_eq!(f.read("notes.md").as_deref(), Some("by node 1\n"));
    assert_eq!(f.read("new.txt"), None);
    assert_eq!(rw.target_label, Some(label("pre:exec:2")));
    assert!(rw.closed.is_none(), "no node was left open");
    assert!(
        rw.bank.deduped,
        "the head was rebuilt: nothing changed since"
    );
}

#[test]
fn a_deleted_index_loses_the_pre_labels_until_it_is_rebuilt() {
    let (f, j) = two_nodes();
    fs::remove_file(index_path(&f)).unwrap();
    // Rebuilt from the manifests alone, only each snapshot's own label
    // survives: `pre:exec:2` was a label on `post:exec:1`.
    assert!(f.ws.resolve(&label("pre:exec:2")).unwrap().is_none());
    // As `cairn reindex` calls it, without opening the workspace.
    let r = Workspace::rebuild_index_of(&f.store, &f.run, &j.0).unwrap();
    assert!(r.not_rebuilt.is_empty(), "{:?}", r.not_rebuilt);
    let post1 = f.ws.resolve(&label("post:exec:1")).unwrap();
    assert_eq!(f.ws.resolve(&label("pre:exec:2")).unwrap(), post1);
    assert_eq!(f.ws.next_iteration(&node("exec")).unwrap(), 3);
    f.ws.rewind_to(
        &NodeRef::parse("exec:1").unwrap(),
        RestoreScope::Full,
        &NoProgress,
    )
    .unwrap();
    assert_eq!(f.read("notes.md").as_deref(), Some("draft\n"));
}

#[test]
fn an_open_node_stays_open_and_what_cannot_be_rebuilt_is_reported() {
    let (f, mut j) = two_nodes();
    let three = j.enter(&f.ws, "exec");
    f.write("notes.md", "node 3 died here\n");
    // A record naming a snapshot this run does not have, and a manifest
    // that is damaged.
    let stray = SnapshotId::parse("NOTINTHISRUN").unwrap();
    j.0.push((stray.clone(), label("gate:1")));
    let damaged = SnapshotId::parse("DAMAGED").unwrap();
    fs::write(
        f.store.snapshots_dir(&f.run).join("DAMAGED.json"),
        b"{\"version\":1",
    )
    .unwrap();
    fs::write(index_path(&f), b"[]").unwrap();

    let r = f.ws.rebuild_index(&j.0).unwrap();
    let left: Vec<&SnapshotId> = r.not_rebuilt.iter().map(|n| &n.snapshot).collect();
    assert_eq!(left.len(), 2, "{:?}", r.not_rebuilt);
    assert!(left.contains(&&stray) && left.contains(&&damaged));
    assert!(f.ws.resolve(&label("gate:1")).unwrap().is_none());
    fs::remove_file(f.store.snapshots_dir(&f.run).join("DAMAGED.json")).unwrap();

    // exec:3 was entered and never left: a rewind closes it with `fail:`
    // first, as it would have without the rebuild.
    let rw =
        f.ws.rewind_to(
            &NodeRef::parse("exec:3").unwrap(),
            RestoreScope::Run,
            &NoProgress,
        )
        .unwrap();
    assert_eq!(rw.closed.unwrap().label, Label::Fail(three));
    assert_eq!(f.read("notes.md").as_deref(), Some("by node 2\n"));
}

#[test]
fn a_run_that_never_captured_is_left_as_it_is() {
    let f = Fixture::new();
    let other = cairn_store::RunId::new();
    let stray = (SnapshotId::parse("NOPE").unwrap(), label("snap:1"));
    let r = Workspace::rebuild_index_of(&f.store, &other, &[stray]).unwrap();
    assert_eq!((r.head, r.snapshots, r.labels), (None, 0, 0));
    assert_eq!(r.not_rebuilt.len(), 1);
    assert!(!f.store.workspace_dir(&other).exists());
}
