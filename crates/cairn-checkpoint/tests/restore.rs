//! Restore and materialise round trips, and refusals that change nothing.

mod common;

use std::fs;
use std::path::Path;

use cairn_checkpoint::*;
use cairn_objects::ObjectPool;
use common::*;

/// A workspace, a 3 MiB image and a data directory (with a big file in it).
fn scene(f: &Fixture) {
    f.write("src/main.rs", b"fn main() {}\n");
    f.write("README.md", b"# demo\n");
    f.write("bin/run.sh", b"#!/bin/sh\necho hi\n");
    chmod(&f.root.join("bin/run.sh"), 0o755);
    f.write("data/blob.bin", &noise(2 << 20, 1));
    fs::write(f.out("disk.img"), noise(3 << 20, 2)).unwrap();
    chmod(&f.out("disk.img"), 0o640);
    fs::create_dir_all(f.out("state/deep")).unwrap();
    fs::write(f.out("state/a.json"), b"{\"a\":1}").unwrap();
    fs::write(f.out("state/deep/big.db"), noise(5 << 20, 3)).unwrap();
}

fn mess_up(f: &Fixture) {
    f.write("src/main.rs", b"fn main() { panic!() }\n");
    fs::remove_file(f.root.join("README.md")).unwrap();
    f.write("new/file.txt", b"created after the checkpoint");
    chmod(&f.root.join("bin/run.sh"), 0o644);
    poke(&f.root.join("data/blob.bin"), 3, 9);
    poke(&f.out("disk.img"), 5, 10);
    chmod(&f.out("disk.img"), 0o600);
    fs::write(f.out("state/a.json"), b"{\"a\":2}").unwrap();
    fs::write(f.out("state/extra.log"), b"written after").unwrap();
    poke(&f.out("state/deep/big.db"), 2, 11);
}

#[test]
fn restore_round_trips_byte_for_byte_and_can_be_undone() {
    let mut f = Fixture::new();
    scene(&f);
    let (disk, state) = (f.out("disk.img"), f.out("state"));
    let saved = f.save(&[disk.as_path(), state.as_path()]);
    assert_eq!(saved.files, 3);
    let ws_then = tree(&f.root);
    let disk_then = (fs::read(&disk).unwrap(), fs::metadata(&disk).unwrap());
    let state_then = tree(&state);

    mess_up(&f);
    let ws_messy = tree(&f.root);
    let state_messy = tree(&state);
    let disk_messy = fs::read(&disk).unwrap();

    let r = f.restore(&saved.id).unwrap();
    assert_eq!(tree(&f.root), ws_then, "workspace");
    assert_eq!(tree(&state), state_then, "named directory");
    assert_eq!(fs::read(&disk).unwrap(), disk_then.0, "named file");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(
        fs::metadata(&disk).unwrap().permissions().mode() & 0o777,
        0o640
    );
    assert!(r.deleted.iter().any(|p| p.ends_with("state/extra.log")));
    assert!(r.written.iter().any(|p| p.ends_with("disk.img")));
    assert_eq!(r.unchanged, 0);
    let ws_bank = r.workspace.as_ref().unwrap().bank.snapshot.clone();

    // The bank checkpoint undoes it all.
    let bank = r.bank.clone().unwrap();
    let listed = list(&f.store, &f.run).unwrap();
    assert_eq!(listed[0].id, bank, "newest first");
    assert_eq!(listed[0].kind, CheckpointKind::Bank);
    assert_eq!(
        show(&f.store, &bank).unwrap().workspace.unwrap().snapshot,
        ws_bank
    );
    let undo = f.restore(&bank).unwrap();
    assert_eq!(tree(&f.root), ws_messy);
    assert_eq!(tree(&state), state_messy);
    assert_eq!(fs::read(&disk).unwrap(), disk_messy);
    assert!(undo.bank.is_some());

    // Restoring onto an identical state writes nothing.
    f.restore(&saved.id).unwrap();
    let again = f.restore(&saved.id).unwrap();
    assert!(again.written.is_empty() && again.deleted.is_empty());
    assert_eq!(again.unchanged, 3);
}

#[test]
fn restore_recreates_a_named_path_that_was_removed() {
    let mut f = Fixture::new();
    scene(&f);
    let (disk, state) = (f.out("disk.img"), f.out("state"));
    let saved = f.save(&[disk.as_path(), state.as_path()]);
    let state_then = tree(&state);
    fs::remove_file(&disk).unwrap();
    fs::remove_dir_all(&state).unwrap();
    let r = f.restore(&saved.id).unwrap();
    assert!(r.bank.is_none(), "nothing was there to bank");
    assert_eq!(fs::read(&disk).unwrap(), noise(3 << 20, 2));
    assert_eq!(tree(&state), state_then);
}

#[test]
fn a_flipped_byte_in_a_chunk_fails_verify_and_refuses_restore_before_any_change() {
    let mut f = Fixture::new();
    scene(&f);
    let disk = f.out("disk.img");
    let saved = f.save(&[disk.as_path()]);
    let hash = show(&f.store, &saved.id).unwrap().paths[0].entries[0].hash;
    let pool = ObjectPool::at(&f.store);
    let chunk = pool.chunk_list(&hash).unwrap().unwrap()[5].hash;
    let file = pool.path_of(&chunk);
    let mut raw = fs::read(&file).unwrap();
    let mid = raw.len() / 2;
    raw[mid] ^= 0x10;
    fs::write(&file, &raw).unwrap();

    let v = verify(&f.store, &saved.id, &NoProgress).unwrap();
    assert!(!v.ok);
    assert_eq!(v.id, saved.id);
    assert_eq!(v.bad.len(), 1, "{:?}", v.bad);
    assert_eq!(v.bad[0].object, Some(chunk));
    assert_eq!(
        v.bad[0].file,
        disk.canonicalize().unwrap().to_str().unwrap()
    );
    assert!(v.chunks > 40);

    mess_up(&f);
    let ws_before = tree(&f.root);
    let disk_before = fs::read(&disk).unwrap();
    let snapshots = f.ws.list_snapshots().unwrap().len();
    let checkpoints = list(&f.store, &f.run).unwrap().len();
    let err = f.restore(&saved.id).unwrap_err();
    assert!(err.is_integrity(), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains(saved.id.as_str()) && msg.contains(&chunk.to_hex()),
        "{msg}"
    );
    assert!(msg.contains("nothing was changed"), "{msg}");
    assert_eq!(tree(&f.root), ws_before, "workspace changed");
    assert_eq!(fs::read(&disk).unwrap(), disk_before, "named path changed");
    assert_eq!(
        f.ws.list_snapshots().unwrap().len(),
        snapshots,
        "banked anyway"
    );
    assert_eq!(list(&f.store, &f.run).unwrap().len(), checkpoints);
}

#[test]
fn a_damaged_workspace_object_also_refuses_restore() {
    let mut f = Fixture::new();
    scene(&f);
    let saved = f.save(&[]);
    let snap = show(&f.store, &saved.id)
        .unwrap()
        .workspace
        .unwrap()
        .snapshot;
    let hash = f.ws.manifest(&snap).unwrap().entries["README.md"].hash;
    let pool = ObjectPool::at(&f.store);
    fs::remove_file(pool.path_of(&hash)).unwrap();
    let v = verify(&f.store, &saved.id, &NoProgress).unwrap();
    assert!(!v.ok && v.bad[0].missing && v.bad[0].file == "workspace:README.md");
    mess_up(&f);
    let before = tree(&f.root);
    let err = f.restore(&saved.id).unwrap_err();
    assert!(matches!(err, CheckpointError::Damaged { .. }), "{err}");
    assert_eq!(tree(&f.root), before);
}

#[test]
fn a_symlink_on_a_named_path_refuses_restore_before_any_change() {
    let mut f = Fixture::new();
    scene(&f);
    let state = f.out("state");
    let saved = f.save(&[state.as_path()]);
    mess_up(&f);
    let ws_before = tree(&f.root);
    // The directory is swapped for a symlink to somewhere else.
    let elsewhere = f.dir.path().join("elsewhere");
    fs::rename(&state, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &state).unwrap();
    let err = f.restore(&saved.id).unwrap_err();
    assert!(matches!(err, CheckpointError::UnsafePath { .. }), "{err}");
    assert_eq!(tree(&f.root), ws_before);
    assert_eq!(fs::read(elsewhere.join("state/a.json")).ok(), None);
    assert_eq!(fs::read(elsewhere.join("a.json")).unwrap(), b"{\"a\":2}");
}

#[test]
fn a_checkpoint_of_another_run_is_refused() {
    let mut f = Fixture::new();
    scene(&f);
    let saved = f.save(&[]);
    let g = Fixture::new();
    let err = restore_in(&mut f, Some(&g.ws), &saved.id, &NoProgress).unwrap_err();
    assert!(
        matches!(err, CheckpointError::WrongRun { .. }) && err.is_usage(),
        "{err}"
    );
}

#[test]
fn materialize_round_trips_into_a_fresh_directory() {
    let mut f = Fixture::new();
    scene(&f);
    let saved = f.save(&[]);
    let then = tree(&f.root);
    mess_up(&f);

    let fork = f.dir.path().join("fork/ws");
    let m = materialize(&f.store, &saved.id, &fork, &NoProgress).unwrap();
    assert_eq!(m.files, 4);
    assert_eq!(tree(&fork), then);
    // Separate and writable: changing the fork touches neither the
    // workspace nor the store's copy.
    fs::write(fork.join("src/main.rs"), b"forked").unwrap();
    assert_ne!(fs::read(f.root.join("src/main.rs")).unwrap(), b"forked");
    assert!(verify(&f.store, &saved.id, &NoProgress).unwrap().ok);

    // An existing empty directory is fine; a non-empty one is refused.
    let empty = f.dir.path().join("empty");
    fs::create_dir(&empty).unwrap();
    materialize(&f.store, &saved.id, &empty, &NoProgress).unwrap();
    assert_eq!(tree(&empty), then);
    let err = materialize(&f.store, &saved.id, &empty, &NoProgress).unwrap_err();
    assert!(
        matches!(err, CheckpointError::DirNotEmpty { .. }) && err.is_usage(),
        "{err}"
    );
    let file = f.dir.path().join("a-file");
    fs::write(&file, b"x").unwrap();
    assert!(materialize(&f.store, &saved.id, &file, &NoProgress).is_err());
}

#[test]
fn materialize_of_a_damaged_checkpoint_leaves_nothing_behind() {
    let mut f = Fixture::new();
    scene(&f);
    let saved = f.save(&[]);
    let snap = show(&f.store, &saved.id)
        .unwrap()
        .workspace
        .unwrap()
        .snapshot;
    let hash = f.ws.manifest(&snap).unwrap().entries["data/blob.bin"].hash;
    let pool = ObjectPool::at(&f.store);
    let chunk = pool.chunk_list(&hash).unwrap().unwrap()[3].hash;
    let mut raw = fs::read(pool.path_of(&chunk)).unwrap();
    let n = raw.len();
    raw[n - 100] ^= 1;
    fs::write(pool.path_of(&chunk), &raw).unwrap();
    let fork = f.dir.path().join("fork");
    let err = materialize(&f.store, &saved.id, &fork, &NoProgress).unwrap_err();
    assert!(err.is_integrity(), "{err}");
    assert!(
        fs::read_dir(&fork).unwrap().next().is_none(),
        "partial fork left"
    );
}

#[test]
fn a_checkpoint_without_workspace_cannot_be_materialised() {
    let mut f = Fixture::new();
    let disk = f.out("disk.img");
    fs::write(&disk, b"small").unwrap();
    let req = SaveRequest::new(f.run.clone(), f.position()).paths([&disk]);
    let saved = save(&f.store, &req, &NoProgress).unwrap();
    f.journal(&saved.id);
    assert!(saved.snapshot.is_none());
    let err = materialize(
        &f.store,
        &saved.id,
        Path::new("/nonexistent/x"),
        &NoProgress,
    )
    .unwrap_err();
    assert!(matches!(err, CheckpointError::NoWorkspace { .. }), "{err}");
}
