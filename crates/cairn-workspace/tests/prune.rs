//! Prune over every run's snapshot manifests (DESIGN §5.6).

mod common;

use std::fs;
use std::sync::atomic::{AtomicBool, Ordering};

use cairn_objects::{ObjectError, ObjectHash, ObjectPool, StoreLock};
use cairn_store::RunId;
use cairn_workspace::*;
use common::*;

fn sources(store: &cairn_store::Store) -> SnapshotManifests {
    SnapshotManifests::new(store)
}

fn object_count(pool: &ObjectPool) -> usize {
    fs::read_dir(pool.dir())
        .unwrap()
        .filter_map(|e| e.ok())
        .filter(|e| e.file_type().unwrap().is_dir())
        .map(|d| fs::read_dir(d.path()).unwrap().count())
        .sum()
}

fn referenced(f: &Fixture, ws: &Workspace) -> Vec<ObjectHash> {
    let _ = f;
    ws.list_snapshots()
        .unwrap()
        .iter()
        .flat_map(|s| {
            ws.manifest(&s.id)
                .unwrap()
                .entries
                .into_values()
                .map(|e| e.hash)
        })
        .collect()
}

#[test]
fn prune_keeps_what_any_run_names_and_removes_what_a_deleted_run_named() {
    let f = Fixture::new();
    f.write("shared.txt", "in both runs");
    f.write("a.txt", "only in run A");
    f.capture("snap:1");
    let other =
        Workspace::open(&f.store, &RunId::new(), &f.root, CaptureConfig::default()).unwrap();
    f.write("b.txt", "only in run B");
    let b = other.capture(&label("snap:1"), &NoProgress).unwrap();
    let pool = ObjectPool::open(&f.store).unwrap();
    let total = object_count(&pool);
    pool.put_bytes(&StoreLock::shared(&f.store).unwrap(), b"named by nothing")
        .unwrap();

    let dry = prune(
        &pool,
        &[&sources(&f.store)],
        &PruneOptions::new().dry_run(true),
        &NoProgress,
    )
    .unwrap();
    assert_eq!((dry.objects, dry.dry_run), (1, true));
    assert_eq!(object_count(&pool), total + 1);
    let r = prune(
        &pool,
        &[&sources(&f.store)],
        &PruneOptions::new(),
        &NoProgress,
    )
    .unwrap();
    assert_eq!((r.objects, r.kept), (1, total as u64));

    // `session rm` deletes a run's records and manifests, never objects;
    // prune then removes what only that run named.
    let b_only = other.manifest(&b.snapshot).unwrap().entries["b.txt"].hash;
    fs::remove_dir_all(f.store.run_dir(other.run())).unwrap();
    let r = prune(
        &pool,
        &[&sources(&f.store)],
        &PruneOptions::new(),
        &NoProgress,
    )
    .unwrap();
    assert_eq!(r.objects, 1);
    assert!(!pool.contains(&b_only));
    for h in referenced(&f, &f.ws) {
        pool.verify(&h).unwrap();
    }
}

#[test]
fn a_broken_manifest_means_prune_deletes_nothing() {
    let f = Fixture::new();
    f.write("a.txt", "one");
    f.capture("snap:1");
    f.write("a.txt", "two");
    let second = f.capture("snap:2");
    let pool = ObjectPool::open(&f.store).unwrap();
    pool.put_bytes(&StoreLock::shared(&f.store).unwrap(), b"garbage")
        .unwrap();
    let before = object_count(&pool);
    let path = f
        .store
        .snapshots_dir(&f.run)
        .join(format!("{}.json", second.snapshot));
    let text = fs::read(&path).unwrap();
    fs::write(&path, &text[..text.len() / 2]).unwrap();

    let e = prune(
        &pool,
        &[&sources(&f.store)],
        &PruneOptions::new(),
        &NoProgress,
    )
    .unwrap_err();
    assert!(matches!(e, ObjectError::ManifestUnreadable { .. }), "{e}");
    assert!(e.to_string().contains(&second.snapshot.to_string()), "{e}");
    assert_eq!(object_count(&pool), before);

    // A temporary left by an interrupted manifest write is not a manifest.
    fs::write(&path, &text).unwrap();
    fs::write(f.store.snapshots_dir(&f.run).join(".x.json.tmp"), b"{").unwrap();
    let r = prune(
        &pool,
        &[&sources(&f.store)],
        &PruneOptions::new(),
        &NoProgress,
    )
    .unwrap();
    assert_eq!(r.objects, 1);
}

/// One thread captures in a loop (new content every time, plus unreferenced
/// objects for prune to find) while another prunes in a loop. Prune must
/// never remove an object a manifest names, whatever the interleaving.
#[test]
fn prune_racing_captures_never_loses_a_referenced_object() {
    let f = Fixture::new();
    f.write("stable.txt", "stable");
    let pool = ObjectPool::open(&f.store).unwrap();
    let mut pruned = 0;
    for trial in 0..100u64 {
        // Vary the interleaving: the pruner starts 0-3 ms in, and pauses
        // 0-1 ms between its prunes.
        let offset = std::time::Duration::from_micros((trial * 7919) % 3000);
        let gap = std::time::Duration::from_micros((trial * 104_729) % 1000);
        let captures_done = AtomicBool::new(false);
        std::thread::scope(|s| {
            s.spawn(|| {
                for k in 0..2 {
                    f.write(&format!("t{k}.txt"), &format!("trial {trial} step {k}"));
                    pool.put_bytes(
                        &StoreLock::shared(&f.store).unwrap(),
                        format!("garbage {trial} {k}").as_bytes(),
                    )
                    .unwrap();
                    f.ws.capture(&label(&format!("snap:{}", trial * 2 + k + 1)), &NoProgress)
                        .unwrap();
                }
                captures_done.store(true, Ordering::SeqCst);
            });
            s.spawn(|| {
                std::thread::sleep(offset);
                for _ in 0..3 {
                    let r = prune(
                        &pool,
                        &[&sources(&f.store)],
                        &PruneOptions::new().wait(true),
                        &NoProgress,
                    )
                    .unwrap();
                    if r.objects > 0 {
                        pruned += 1;
                    }
                    if captures_done.load(Ordering::SeqCst) {
                        break;
                    }
                    std::thread::sleep(gap);
                }
            });
        });
        for h in referenced(&f, &f.ws) {
            assert!(
                pool.contains(&h),
                "trial {trial}: referenced object {h} was pruned"
            );
        }
    }
    assert!(
        pruned > 0,
        "prune never found garbage: the race was not exercised"
    );
    for h in referenced(&f, &f.ws) {
        pool.verify(&h).unwrap();
    }
    let r = prune(
        &pool,
        &[&sources(&f.store)],
        &PruneOptions::new(),
        &NoProgress,
    )
    .unwrap();
    assert_eq!(r.kept as usize, object_count(&pool));
}
