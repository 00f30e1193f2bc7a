//! Restores: scope, banking and undo, modes, gaps, and refusals that change
//! nothing.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;

use cairn_objects::{ObjectError, ObjectPool};
use cairn_workspace::*;
use common::*;

/// A run of two exec nodes with operator edits in the window between them
/// and after the run; returns the fixture and the tree at `pre:exec:1`.
fn story() -> (Fixture, BTreeMap<String, (String, u32)>) {
    let f = Fixture::new();
    f.write("shared.txt", "s0");
    f.write("gone.txt", "deleted by the run");
    f.write("op.txt", "o0");
    f.write("tool.sh", "#!/bin/sh\n");
    let start = f.tree();
    let exec = node("exec");

    let one = f.ws.enter_node(&exec, &NoProgress).unwrap();
    f.write("shared.txt", "s1 by the run");
    f.write("made/deep/run.txt", "created by the run");
    f.remove("gone.txt");
    fs::set_permissions(f.root.join("tool.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    f.ws.leave_node(&one.at, NodeEnd::Completed, &NoProgress)
        .unwrap();

    // Inside the window: the operator's own work.
    f.write("op.txt", "o1 by the operator");
    f.write("opnew.txt", "new from the operator");

    let two = f.ws.enter_node(&exec, &NoProgress).unwrap();
    f.write("run2.txt", "second node");
    f.ws.leave_node(&two.at, NodeEnd::Completed, &NoProgress)
        .unwrap();

    // After the run stopped: more operator work, only the bank will see it.
    f.write("late.txt", "operator, after the run");
    (f, start)
}

#[test]
fn a_scoped_rewind_undoes_the_run_and_keeps_the_operators_work() {
    let (f, start) = story();
    let r =
        f.ws.rewind_to(
            &NodeRef::parse("exec:1").unwrap(),
            RestoreScope::Run,
            &NoProgress,
        )
        .unwrap();
    assert_eq!(r.target_label, Some(label("pre:exec:1")));
    assert_eq!(r.bank.label, label("bank:1"));
    assert_eq!(f.read("shared.txt").as_deref(), Some("s0"));
    assert_eq!(f.read("gone.txt").as_deref(), Some("deleted by the run"));
    assert!(f.read("made/deep/run.txt").is_none() && f.read("run2.txt").is_none());
    assert!(
        !f.root.join("made").exists(),
        "empty directories the run created stay behind"
    );
    assert_eq!(r.dirs_removed, vec!["made", "made/deep"]);
    assert_eq!(
        fs::metadata(f.root.join("tool.sh"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777,
        0o644
    );
    assert_eq!(r.modes, vec!["tool.sh"]);
    // The operator's edits, inside the window and after the run, survive.
    assert_eq!(f.read("op.txt").as_deref(), Some("o1 by the operator"));
    assert!(f.read("opnew.txt").is_some() && f.read("late.txt").is_some());
    assert_ne!(f.tree(), start);
}

#[test]
fn a_full_rewind_puts_back_the_whole_tree() {
    let (f, start) = story();
    let r =
        f.ws.rewind_to(
            &NodeRef::parse("exec").unwrap(),
            RestoreScope::Full,
            &NoProgress,
        )
        .unwrap();
    // Without an iteration, the latest one.
    assert_eq!(r.target_label, Some(label("pre:exec:2")));
    let r =
        f.ws.rewind_to(
            &NodeRef::parse("exec:1").unwrap(),
            RestoreScope::Full,
            &NoProgress,
        )
        .unwrap();
    assert_eq!(r.bank.label, label("bank:2"));
    assert_eq!(f.tree(), start);
}

#[test]
fn every_restore_banks_first_and_the_bank_undoes_it() {
    let (f, _) = story();
    let before = f.tree();
    let r =
        f.ws.rewind_to(
            &NodeRef::parse("exec:1").unwrap(),
            RestoreScope::Full,
            &NoProgress,
        )
        .unwrap();
    assert_ne!(f.tree(), before);
    let undo =
        f.ws.restore_snapshot(&r.bank.snapshot, &NoProgress)
            .unwrap();
    assert_eq!(undo.scope, RestoreScope::Full);
    assert_eq!(f.tree(), before);
    // The undo banked too. Restoring the same state again changes nothing;
    // once nothing moved since the last bank, the next bank lands on that
    // snapshot as a second label, and the listing shows it.
    assert_eq!(undo.bank.label, label("bank:2"));
    let again =
        f.ws.restore_snapshot(&r.bank.snapshot, &NoProgress)
            .unwrap();
    assert!(again.written.is_empty() && again.deleted.is_empty() && again.modes.is_empty());
    let third =
        f.ws.restore_snapshot(&r.bank.snapshot, &NoProgress)
            .unwrap();
    assert!(third.bank.deduped);
    assert_eq!(third.bank.snapshot, again.bank.snapshot);
    let rows = f.ws.list_snapshots().unwrap();
    let row = rows.iter().find(|x| x.id == third.bank.snapshot).unwrap();
    assert_eq!(row.labels, vec![label("bank:3"), label("bank:4")]);
    assert_eq!(f.tree(), before);
}

#[test]
fn an_interrupted_node_is_closed_with_fail_before_the_bank() {
    let f = Fixture::new();
    f.write("a.txt", "a0");
    let exec = node("exec");
    f.ws.enter_node(&exec, &NoProgress).unwrap();
    f.write("a.txt", "a1 written before the crash");
    // No leave_node: the process died.
    let r =
        f.ws.rewind_to(
            &NodeRef::parse("exec:1").unwrap(),
            RestoreScope::Run,
            &NoProgress,
        )
        .unwrap();
    assert_eq!(
        r.closed.as_ref().map(|c| c.label.clone()),
        Some(label("fail:exec:1"))
    );
    assert_eq!(
        f.read("a.txt").as_deref(),
        Some("a0"),
        "the crashed node's write is the run's"
    );
}

#[test]
fn skipped_paths_are_never_deleted_or_overwritten() {
    let f = Fixture::with(CaptureConfig::default().max_file_bytes(50));
    f.write("small.txt", "v0");
    f.write("grows.txt", "tiny");
    let exec = node("exec");
    let one = f.ws.enter_node(&exec, &NoProgress).unwrap();
    f.write("big.bin", &"x".repeat(100));
    f.write("grows.txt", &"y".repeat(100));
    std::os::unix::fs::symlink("small.txt", f.root.join("link")).unwrap();
    f.write("small.txt", "v1");
    f.ws.leave_node(&one.at, NodeEnd::Completed, &NoProgress)
        .unwrap();

    let r =
        f.ws.rewind_to(
            &NodeRef::parse("exec:1").unwrap(),
            RestoreScope::Full,
            &NoProgress,
        )
        .unwrap();
    assert_eq!(f.read("small.txt").as_deref(), Some("v0"));
    assert!(f.root.join("big.bin").exists());
    assert!(f.root.join("link").symlink_metadata().is_ok());
    assert_eq!(
        f.read("grows.txt").unwrap().len(),
        100,
        "an oversized file was overwritten"
    );
    let left: Vec<&str> = r.left_alone.iter().map(|l| l.path.as_str()).collect();
    assert_eq!(left, vec!["grows.txt"]);
}

fn craft(f: &Fixture, id: &str, paths: &[&str]) -> SnapshotId {
    let pool = ObjectPool::open(&f.store).unwrap();
    let put = pool
        .put_bytes(
            &cairn_objects::StoreLock::shared(&f.store).unwrap(),
            b"planted",
        )
        .unwrap();
    let id = SnapshotId::parse(id).unwrap();
    let entries = paths
        .iter()
        .map(|p| {
            (
                (*p).to_owned(),
                Entry {
                    hash: put.hash,
                    size: put.size,
                    mode: 0o644,
                },
            )
        })
        .collect();
    let m = Manifest {
        version: MANIFEST_VERSION,
        id: id.clone(),
        parent: None,
        label: label("snap:99"),
        created: "2026-01-01T00:00:00Z".into(),
        files: paths.len() as u64,
        bytes: 7,
        entries,
        skipped: vec![],
    };
    fs::write(
        f.store.snapshots_dir(&f.run).join(format!("{id}.json")),
        serde_json::to_vec(&m).unwrap(),
    )
    .unwrap();
    id
}

#[test]
fn crafted_manifests_are_refused_and_nothing_changes() {
    let f = Fixture::new();
    f.write("a.txt", "a");
    f.capture("snap:1");
    let outside = f.dir.path().join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("x"), "outside content").unwrap();
    std::os::unix::fs::symlink(&outside, f.root.join("link")).unwrap();
    let rows: &[(&str, &[&str])] = &[
        ("DOTDOT", &["a.txt", "../escaped.txt"]),
        ("DOTDOTDEEP", &["sub/../../escaped.txt"]),
        ("ABSOLUTE", &["/tmp/cairn-absolute.txt"]),
        ("EMPTY", &["a//b"]),
        ("GIT", &[".git/hooks/pre-commit"]),
        // `.git` in any letter case (a case-insensitive file system's `.git`).
        ("GITCASE", &["sub/.GIT/hooks/pre-commit"]),
        // `..` between backslashes (a path separator elsewhere).
        ("BACKSLASH", &["sub\\..\\..\\escaped.txt"]),
        // cairn's own temporary names are never restored.
        ("TEMPNAME", &[".cairn-tmp-1-2-abc"]),
        ("SYMLINKED", &["link/x"]),
        ("SYMLINKEDNEW", &["link/new.txt"]),
    ];
    for (id, paths) in rows {
        let before = f.tree();
        let outside_before = fs::read_dir(&outside).unwrap().count();
        let id = craft(&f, id, paths);
        let e = f.ws.restore_snapshot(&id, &NoProgress).unwrap_err();
        assert!(matches!(e, WorkspaceError::UnsafePath { .. }), "{id}: {e}");
        assert!(e.is_integrity(), "{id}");
        assert!(e.to_string().contains("nothing was changed"), "{e}");
        assert_eq!(f.tree(), before, "{id} changed the workspace");
        assert_eq!(fs::read_dir(&outside).unwrap().count(), outside_before);
        assert_eq!(
            fs::read_to_string(outside.join("x")).unwrap(),
            "outside content"
        );
    }
    assert!(!f.dir.path().join("escaped.txt").exists());
    assert!(!std::path::Path::new("/tmp/cairn-absolute.txt").exists());
}

#[test]
fn a_missing_object_is_found_before_anything_changes() {
    let f = Fixture::new();
    f.write("a.txt", "precious original");
    let first = f.capture("snap:1");
    f.write("a.txt", "changed");
    f.write("b.txt", "new");
    f.capture("snap:2");
    let pool = ObjectPool::at(&f.store);
    let hash = f.ws.manifest(&first.snapshot).unwrap().entries["a.txt"].hash;
    fs::remove_file(pool.path_of(&hash)).unwrap();
    let before = f.tree();
    let e =
        f.ws.restore_snapshot(&first.snapshot, &NoProgress)
            .unwrap_err();
    assert!(
        matches!(e, WorkspaceError::Objects(ObjectError::Missing { .. })),
        "{e}"
    );
    assert!(e.is_integrity());
    assert_eq!(f.tree(), before);
}

#[test]
fn a_damaged_object_aborts_staging_and_leaves_no_trace() {
    let f = Fixture::new();
    f.write("keep.txt", "k");
    let first = f.capture("snap:1");
    f.write("new/dir/a.txt", "a");
    f.remove("keep.txt");
    f.capture("snap:2");
    let pool = ObjectPool::at(&f.store);
    let hash = f.ws.manifest(&first.snapshot).unwrap().entries["keep.txt"].hash;
    let mut bytes = fs::read(pool.path_of(&hash)).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 0xff;
    fs::write(pool.path_of(&hash), bytes).unwrap();
    let before = f.tree();
    let e =
        f.ws.restore_snapshot(&first.snapshot, &NoProgress)
            .unwrap_err();
    assert!(e.is_integrity(), "{e}");
    assert_eq!(f.tree(), before, "staging left files behind");
}

/// Incompressible, deterministic bytes.
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

#[test]
fn big_files_are_captured_as_chunks_and_restored_whole() {
    let f = Fixture::new();
    let mut big = noise(6 << 20, 1);
    fs::write(f.root.join("disk.img"), &big).unwrap();
    f.write("small.txt", "small");
    let first = f.capture("gate:1");
    let pool = ObjectPool::at(&f.store);
    let hash = f.ws.manifest(&first.snapshot).unwrap().entries["disk.img"].hash;
    assert!(
        pool.chunk_list(&hash).unwrap().is_some(),
        "stored as chunks"
    );

    // A 4 KiB write stores a chunk or two, not the file again.
    big[3 << 20..(3 << 20) + 4096].fill(7);
    fs::write(f.root.join("disk.img"), &big).unwrap();
    let second = f.capture("gate:2");
    assert!(
        second.stored_bytes < 1 << 20,
        "{} bytes stored for a 4 KiB edit",
        second.stored_bytes
    );

    let before = big.clone();
    fs::write(f.root.join("disk.img"), b"clobbered").unwrap();
    f.ws.restore_snapshot(&second.snapshot, &NoProgress)
        .unwrap();
    assert_eq!(fs::read(f.root.join("disk.img")).unwrap(), before);
    f.ws.restore_snapshot(&first.snapshot, &NoProgress).unwrap();
    assert_eq!(
        fs::read(f.root.join("disk.img")).unwrap(),
        noise(6 << 20, 1)
    );
}

#[test]
fn a_missing_chunk_refuses_the_restore_before_any_change() {
    let f = Fixture::new();
    fs::write(f.root.join("disk.img"), noise(3 << 20, 2)).unwrap();
    let snap = f.capture("gate:1").snapshot;
    let pool = ObjectPool::at(&f.store);
    let hash = f.ws.manifest(&snap).unwrap().entries["disk.img"].hash;
    let chunk = pool.chunk_list(&hash).unwrap().unwrap()[1].hash;
    fs::remove_file(pool.path_of(&chunk)).unwrap();
    fs::write(f.root.join("disk.img"), b"changed").unwrap();
    let err = f.ws.restore_snapshot(&snap, &NoProgress).unwrap_err();
    assert!(err.is_integrity(), "{err}");
    assert!(
        matches!(err, WorkspaceError::Objects(ObjectError::Missing { hash }) if hash == chunk),
        "{err}"
    );
    assert_eq!(fs::read(f.root.join("disk.img")).unwrap(), b"changed");
}

#[test]
fn temporary_files_of_any_cairn_writer_are_never_captured_or_deleted() {
    let f = Fixture::new();
    f.write("a.txt", "a");
    let first = f.capture("snap:1");
    // Crash leftovers of a tool or a restore, named by the one scheme.
    let top = cairn_store::safe::temp_name();
    let deep = format!("sub/{}", cairn_store::safe::temp_name());
    f.write(&top, "half a file");
    f.write(&deep, "half another");
    f.write("sub/real.txt", "real");
    let second = f.capture("snap:2");
    let m = f.ws.manifest(&second.snapshot).unwrap();
    assert_eq!(
        m.entries.keys().collect::<Vec<_>>(),
        vec!["a.txt", "sub/real.txt"]
    );
    let decided =
        f.ws.check_ignore(std::path::Path::new(&top))
            .unwrap()
            .unwrap();
    assert!(
        decided.excluded && decided.source == RuleSource::Always,
        "{decided:?}"
    );
    // A full restore of a snapshot without them deletes what the run made,
    // never what it did not capture.
    f.ws.restore_snapshot(&first.snapshot, &NoProgress).unwrap();
    assert_eq!(f.read(&top).as_deref(), Some("half a file"));
    assert_eq!(f.read(&deep).as_deref(), Some("half another"));
    assert_eq!(f.read("sub/real.txt"), None);
}

#[test]
fn recorded_modes_apply_as_permission_bits_only() {
    let f = Fixture::new();
    f.write("tool.sh", "echo tool");
    f.write("lib.sh", "echo lib");
    let first = f.capture("snap:1");
    // A manifest altered by hand: setuid, setgid, sticky and world-writable
    // on a mode-only change (tool.sh) and on a file to write (new.sh).
    let mut m = f.ws.manifest(&first.snapshot).unwrap();
    let lib = m.entries["lib.sh"];
    m.entries.get_mut("tool.sh").unwrap().mode = 0o7777;
    m.entries.insert(
        "new.sh".into(),
        Entry {
            mode: 0o6755,
            ..lib
        },
    );
    m.id = SnapshotId::parse("TAMPERED").unwrap();
    m.files = 3;
    fs::write(
        f.store.snapshots_dir(&f.run).join("TAMPERED.json"),
        serde_json::to_vec(&m).unwrap(),
    )
    .unwrap();
    let r = f.ws.restore_snapshot(&m.id, &NoProgress).unwrap();
    assert_eq!(r.modes, vec!["tool.sh"]);
    assert_eq!(r.written, vec!["new.sh"]);
    assert!(r.failed.is_empty(), "{:?}", r.failed);
    let mode = |p: &str| fs::metadata(f.root.join(p)).unwrap().permissions().mode() & 0o7777;
    assert_eq!(mode("tool.sh"), 0o777);
    assert_eq!(mode("new.sh"), 0o755);
}
