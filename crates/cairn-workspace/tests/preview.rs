//! Rewind previews: they list exactly what the rewind then does, change no
//! file, and name the operator's edits they leave alone.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use cairn_workspace::*;
use common::*;
use sha2::{Digest, Sha256};

/// Every entry under the root: path -> (kind, SHA-256 of the content or
/// the link target, permission bits).
fn fingerprint(root: &Path) -> BTreeMap<String, (char, String, u32)> {
    fn go(base: &Path, dir: &Path, out: &mut BTreeMap<String, (char, String, u32)>) {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(base).unwrap().to_str().unwrap().to_owned();
            let m = fs::symlink_metadata(&p).unwrap();
            let mode = m.permissions().mode() & 0o7777;
            let hex = |b: &[u8]| format!("{:x}", Sha256::digest(b));
            if m.file_type().is_symlink() {
                let t = fs::read_link(&p).unwrap();
                out.insert(rel, ('l', hex(t.to_str().unwrap().as_bytes()), 0));
            } else if m.is_dir() {
                out.insert(rel, ('d', String::new(), mode));
                go(base, &p, out);
            } else {
                out.insert(rel, ('f', hex(&fs::read(&p).unwrap()), mode));
            }
        }
    }
    let mut out = BTreeMap::new();
    go(root, root, &mut out);
    out
}

/// Two exec nodes with the operator's edits in the window between them
/// and after the run (as in tests/restore.rs), plus a symlink and a
/// binary file the run rewrote.
fn story() -> Fixture {
    let f = Fixture::new();
    f.write("shared.txt", "s0\n");
    f.write("gone.txt", "deleted\nby the run\n");
    f.write("op.txt", "o0\n");
    f.write("tool.sh", "#!/bin/sh\n");
    fs::write(f.root.join("data.bin"), b"\0\x01").unwrap();
    std::os::unix::fs::symlink("shared.txt", f.root.join("link")).unwrap();
    let exec = node("exec");

    let one = f.ws.enter_node(&exec, &NoProgress).unwrap();
    f.write("shared.txt", "s0\ns1 by the run\n");
    f.write("made/deep/run.txt", "created by the run\n");
    f.remove("gone.txt");
    fs::write(f.root.join("data.bin"), b"\0\x02").unwrap();
    fs::set_permissions(f.root.join("tool.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    f.ws.leave_node(&one.at, NodeEnd::Completed, &NoProgress)
        .unwrap();

    f.write("op.txt", "o1 by the operator\n");
    f.write("opnew.txt", "new from the operator\n");

    let two = f.ws.enter_node(&exec, &NoProgress).unwrap();
    f.write("run2.txt", "second node\n");
    f.ws.leave_node(&two.at, NodeEnd::Completed, &NoProgress)
        .unwrap();

    f.write("late.txt", "operator, after the run\n");
    f
}

fn paths(v: &[FileChange]) -> BTreeSet<String> {
    v.iter().map(|c| c.path.clone()).collect()
}

/// Previews, checks nothing in the workspace moved, rewinds, and checks
/// the rewind did exactly what the preview listed. Returns the preview.
fn preview_then_rewind(f: &Fixture, to: &str, scope: RestoreScope) -> RewindPreview {
    let to = NodeRef::parse(to).unwrap();
    let before = fingerprint(&f.root);
    let p = f.ws.preview_rewind(&to, scope, &NoProgress).unwrap();
    assert_eq!(fingerprint(&f.root), before, "the preview changed a file");
    assert_eq!(p.scope, scope);

    let r = f.ws.rewind_to(&to, scope, &NoProgress).unwrap();
    assert!(r.is_complete(), "{:?}", r.failed);
    assert_eq!((&r.target, &r.target_label), (&p.target, &p.target_label));
    // Nothing moved since the preview's bank: the rewind's lands on it.
    assert_eq!(r.bank.snapshot, p.bank.snapshot);
    assert!(r.bank.deduped);
    let done: BTreeSet<String> = r
        .written
        .iter()
        .chain(&r.deleted)
        .chain(&r.modes)
        .cloned()
        .collect();
    assert_eq!(paths(&p.changes), done);
    let of = |k: &[ChangeKind]| -> Vec<String> {
        p.changes
            .iter()
            .filter(|c| k.contains(&c.change))
            .map(|c| c.path.clone())
            .collect()
    };
    assert_eq!(of(&[ChangeKind::Added, ChangeKind::Modified]), r.written);
    assert_eq!(of(&[ChangeKind::Deleted]), r.deleted);
    assert_eq!(of(&[ChangeKind::Mode]), r.modes);
    assert_eq!(p.left_alone, r.left_alone);
    p
}

#[test]
fn a_scoped_preview_lists_exactly_what_the_rewind_does_and_changes_nothing() {
    use ChangeKind::*;
    let f = story();
    let p = preview_then_rewind(&f, "exec:1", RestoreScope::Run);
    assert_eq!(p.bank.label, label("bank:1"));
    assert!(p.closed.is_none());
    let row = |path: &str, change, added, removed, binary| FileChange {
        path: path.into(),
        change,
        added,
        removed,
        binary,
    };
    assert_eq!(
        p.changes,
        vec![
            row("data.bin", Modified, 0, 0, true),
            row("gone.txt", Added, 2, 0, false),
            row("made/deep/run.txt", Deleted, 0, 1, false),
            row("run2.txt", Deleted, 0, 1, false),
            row("shared.txt", Modified, 0, 1, false),
            row("tool.sh", Mode, 0, 0, false),
        ]
    );
    let left: Vec<(&str, &str)> = p
        .left_alone
        .iter()
        .map(|l| (l.path.as_str(), l.reason.as_str()))
        .collect();
    let window = "changed outside the session (between post:exec:1 and resume:exec:2), so it is yours and is left alone";
    assert_eq!(
        left,
        vec![
            ("late.txt", "changed outside the session (between post:exec:2 and bank:1), so it is yours and is left alone"),
            ("op.txt", window),
            ("opnew.txt", window),
        ]
    );
    assert_eq!(f.read("op.txt").as_deref(), Some("o1 by the operator\n"));
    assert_eq!(f.read("shared.txt").as_deref(), Some("s0\n"));
}

#[test]
fn a_full_preview_lists_the_operators_edits_as_changes() {
    let f = story();
    let p = preview_then_rewind(&f, "exec:1", RestoreScope::Full);
    assert!(p.left_alone.is_empty(), "{:?}", p.left_alone);
    let c = p.changes.iter().find(|c| c.path == "op.txt").unwrap();
    assert_eq!(
        (c.change.clone(), c.added, c.removed),
        (ChangeKind::Modified, 1, 1)
    );
    for gone in ["late.txt", "opnew.txt"] {
        let c = p.changes.iter().find(|c| c.path == gone).unwrap();
        assert_eq!(c.change, ChangeKind::Deleted, "{gone}");
    }
    assert_eq!(f.read("op.txt").as_deref(), Some("o0\n"));
}

/// The agent loop's pause (an approval prompt): what the person edits
/// while deciding is theirs.
#[test]
fn an_edit_in_a_pause_window_is_left_alone_with_the_windows_labels() {
    let build = || {
        let f = Fixture::new();
        f.write("notes.md", "v0\n");
        let t1 = NodeIter::new(node("turn"), 1);
        f.ws.mark_pre(&t1, &NoProgress).unwrap();
        f.write("a.txt", "turn one\n");
        f.ws.leave_node(&t1, NodeEnd::Completed, &NoProgress)
            .unwrap();
        let t2 = NodeIter::new(node("turn"), 2);
        f.ws.mark_pre(&t2, &NoProgress).unwrap();
        f.write("b.txt", "turn two, before the prompt\n");
        f.ws.leave_node(&t2, NodeEnd::Paused, &NoProgress).unwrap();
        f.write("notes.md", "v0\nwhile deciding\n");
        f.capture("resume:turn:2");
        f.write("c.txt", "turn two, after the prompt\n");
        f.ws.leave_node(&t2, NodeEnd::Completed, &NoProgress)
            .unwrap();
        f
    };

    let f = build();
    let p = preview_then_rewind(&f, "turn:2", RestoreScope::Run);
    assert_eq!(p.target_label, Some(label("pre:turn:2")));
    assert_eq!(
        paths(&p.changes),
        ["b.txt", "c.txt"].map(String::from).into()
    );
    assert_eq!(p.left_alone.len(), 1, "{:?}", p.left_alone);
    assert_eq!(p.left_alone[0].path, "notes.md");
    let reason = &p.left_alone[0].reason;
    assert!(
        reason.contains("between pause:turn:2 and resume:turn:2"),
        "{reason}"
    );
    assert_eq!(f.read("notes.md").as_deref(), Some("v0\nwhile deciding\n"));
    assert_eq!(f.read("a.txt").as_deref(), Some("turn one\n"));

    // With scope full the same edit is a change, and the rewind takes it.
    let f = build();
    let p = preview_then_rewind(&f, "turn:2", RestoreScope::Full);
    assert!(p.left_alone.is_empty(), "{:?}", p.left_alone);
    let notes = p.changes.iter().find(|c| c.path == "notes.md").unwrap();
    assert_eq!(
        (notes.change.clone(), notes.added, notes.removed),
        (ChangeKind::Modified, 0, 1)
    );
    assert_eq!(f.read("notes.md").as_deref(), Some("v0\n"));
}

#[test]
fn a_preview_closes_an_interrupted_node_and_banks_like_a_rewind() {
    let f = Fixture::new();
    f.write("a.txt", "a0\n");
    f.ws.enter_node(&node("exec"), &NoProgress).unwrap();
    f.write("a.txt", "a1 before the crash\n");
    let p =
        f.ws.preview_rewind(
            &NodeRef::parse("exec:1").unwrap(),
            RestoreScope::Run,
            &NoProgress,
        )
        .unwrap();
    assert_eq!(
        p.closed.as_ref().map(|c| c.label.clone()),
        Some(label("fail:exec:1"))
    );
    assert_eq!(p.bank.label, label("bank:1"));
    assert_eq!(
        f.ws.resolve(&label("bank:1")).unwrap(),
        Some(p.bank.snapshot.clone())
    );
    assert_eq!(p.changes.len(), 1);
    assert_eq!(p.changes[0].path, "a.txt");
    assert!(p.left_alone.is_empty());
    assert_eq!(f.read("a.txt").as_deref(), Some("a1 before the crash\n"));
    // The bank undoes a rewind taken after it.
    let r =
        f.ws.rewind_to(
            &NodeRef::parse("exec:1").unwrap(),
            RestoreScope::Run,
            &NoProgress,
        )
        .unwrap();
    assert_eq!(r.written, vec!["a.txt"]);
    f.ws.restore_snapshot(&p.bank.snapshot, &NoProgress)
        .unwrap();
    assert_eq!(f.read("a.txt").as_deref(), Some("a1 before the crash\n"));
}

#[test]
fn a_preview_of_an_unknown_boundary_is_refused_and_banks_nothing() {
    let f = Fixture::new();
    f.write("a.txt", "a\n");
    f.capture("snap:1");
    let before = f.manifests();
    let e =
        f.ws.preview_rewind(
            &NodeRef::parse("exec:9").unwrap(),
            RestoreScope::Run,
            &NoProgress,
        )
        .unwrap_err();
    assert!(matches!(e, WorkspaceError::NoSuchBoundary { .. }), "{e}");
    assert_eq!(f.manifests(), before);
    assert_eq!(f.ws.resolve(&label("bank:1")).unwrap(), None);
}
