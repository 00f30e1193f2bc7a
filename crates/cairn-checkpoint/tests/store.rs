//! Listing, stats and dedup, journal positions, prune.

mod common;

use std::fs;

use cairn_checkpoint::*;
use cairn_objects::{prune, ObjectPool, PruneOptions};
use cairn_workspace::SnapshotManifests;
use common::*;

#[test]
fn many_saves_of_a_slowly_changing_big_file_dedupe() {
    let mut f = Fixture::new();
    for i in 0..30 {
        f.write(&format!("src/f{i}.txt"), format!("file {i}\n").as_bytes());
    }
    let disk = f.out("disk.img");
    fs::write(&disk, noise(8 << 20, 1)).unwrap();
    let saves = 12;
    let mut reports = Vec::new();
    for i in 0..saves {
        if i > 0 {
            poke(&disk, 3, i);
            f.write("src/f0.txt", format!("edit {i}\n").as_bytes());
        }
        reports.push(f.save(&[disk.as_path()]));
    }
    let first = reports[0].stored_bytes;
    assert!(first > 8 << 20, "{first}");
    for r in &reports[1..] {
        // Three 4 KiB writes: at most two chunks each, plus the list.
        assert!(
            r.stored_bytes < 6 * (256 << 10) + (64 << 10),
            "a save stored {} bytes",
            r.stored_bytes
        );
    }
    let s = stats(&f.store, &f.run).unwrap();
    assert_eq!(s.checkpoints, saves);
    let logical: u64 = reports.iter().map(|r| r.logical_bytes).sum();
    assert_eq!(s.logical_bytes, logical);
    assert!(s.logical_bytes > saves * (8 << 20));
    assert!(s.stored_bytes < (8 << 20) + (4 << 20), "{}", s.stored_bytes);
    assert!(s.dedup_ratio.unwrap() > 7.0, "{:?}", s.dedup_ratio);
    assert_eq!(s.missing, 0);
    // Stored bytes are bounded by what the saves added.
    let added: u64 = reports.iter().map(|r| r.stored_bytes).sum();
    assert!(s.stored_bytes <= added);
}

#[test]
fn list_is_newest_first_per_run_and_ignores_temporaries() {
    let mut f = Fixture::new();
    f.write("a.txt", b"a");
    let one = f.save(&[]);
    f.write("a.txt", b"b");
    let two = f.save(&[]);
    let mut g = Fixture::new();
    g.store = f.store.clone();
    let dir = f.store.checkpoints_dir();
    fs::write(dir.join(format!(".{}.json.abc123.tmp", two.id)), b"{\"half").unwrap();
    fs::write(dir.join("notes.txt"), b"not a checkpoint").unwrap();
    let l = list(&f.store, &f.run).unwrap();
    assert_eq!(
        l.iter().map(|c| c.id.clone()).collect::<Vec<_>>(),
        vec![two.id.clone(), one.id.clone()]
    );
    assert_eq!(l[0].seq, two.seq);
    assert_eq!(two.seq, one.seq + 1, "the checkpoint record was journaled");
    assert!(list(&g.store, &g.run).unwrap().is_empty());
    assert_eq!(list_all(&f.store).unwrap().len(), 2);

    let cp = show(&f.store, &one.id).unwrap();
    assert_eq!(cp.journal.seq, one.seq);
    assert_eq!(
        cp.workspace.as_ref().unwrap().snapshot,
        one.snapshot.clone().unwrap()
    );
    // The snapshot carries the checkpoint id as its label.
    let snaps = f.ws.list_snapshots().unwrap();
    assert!(snaps
        .iter()
        .any(|s| s.labels.iter().any(|l| l.to_string() == one.id.as_str())));

    // A damaged manifest is an error, not silently skipped.
    fs::write(dir.join(format!("{}.json", one.id)), b"{").unwrap();
    let err = list(&f.store, &f.run).unwrap_err();
    assert!(err.is_integrity(), "{err}");
    let err = show(&f.store, &"cp_nope".parse().unwrap()).unwrap_err();
    assert!(err.is_usage(), "{err}");
}

#[test]
fn verify_checks_the_journal_position() {
    let mut f = Fixture::new();
    f.write("a.txt", b"a");
    let good = f.save(&[]);
    assert!(verify(&f.store, &good.id, &NoProgress).unwrap().ok);
    // A checkpoint recording a position the journal does not have.
    let mut pos = f.position();
    pos.hash = cairn_journal::ChainHash([7; 32]);
    let req = SaveRequest::new(f.run.clone(), pos).capture(&f.ws);
    let bad = save(&f.store, &req, &NoProgress).unwrap();
    f.journal(&bad.id);
    let v = verify(&f.store, &bad.id, &NoProgress).unwrap();
    assert!(!v.ok);
    assert!(v.anchored, "{:?}", v.bad);
    assert_eq!(v.bad.len(), 1, "{:?}", v.bad);
    assert_eq!(v.bad[0].file, "journal");
    pos.seq = 999;
    let req = SaveRequest::new(f.run.clone(), pos);
    let far = save(&f.store, &req, &NoProgress).unwrap();
    assert!(!verify(&f.store, &far.id, &NoProgress).unwrap().ok);
}

#[test]
fn named_paths_that_do_not_exist_are_refused_before_anything_is_written() {
    let f = Fixture::new();
    let req = SaveRequest::new(f.run.clone(), f.position())
        .capture(&f.ws)
        .paths([f.out("missing.img")]);
    let err = save(&f.store, &req, &NoProgress).unwrap_err();
    assert!(err.is_usage(), "{err}");
    assert!(list(&f.store, &f.run).unwrap().is_empty());
    assert!(f.ws.list_snapshots().unwrap().is_empty());
    let req = SaveRequest::new(f.run.clone(), f.position()).paths([f.store.objects_dir()]);
    assert!(save(&f.store, &req, &NoProgress).unwrap_err().is_usage());
    // A directory holding the store saves everything but the store.
    f.write("a.txt", b"a");
    let req = SaveRequest::new(f.run.clone(), f.position()).paths([f.dir.path()]);
    let r = save(&f.store, &req, &NoProgress).unwrap();
    assert!(
        r.skipped.iter().any(|s| s.ends_with("/store (store)")),
        "{:?}",
        r.skipped
    );
    let cp = show(&f.store, &r.id).unwrap();
    assert!(cp.paths[0].entries.iter().any(|e| e.path == "ws/a.txt"));
    assert!(!cp.paths[0]
        .entries
        .iter()
        .any(|e| e.path.starts_with("store/")));
}

#[test]
fn prune_keeps_checkpoint_chunks_and_sweeps_them_once_unnamed() {
    let mut f = Fixture::new();
    f.write("a.txt", b"a");
    let disk = f.out("disk.img");
    fs::write(&disk, noise(4 << 20, 5)).unwrap();
    let saved = f.save(&[disk.as_path()]);
    let hash = show(&f.store, &saved.id).unwrap().paths[0].entries[0].hash;
    let pool = ObjectPool::at(&f.store);
    let chunks = pool.chunk_list(&hash).unwrap().unwrap();

    let snaps = SnapshotManifests::new(&f.store);
    let cps = CheckpointManifests::new(&f.store);
    let r = prune(&pool, &[&snaps, &cps], &PruneOptions::new(), &NoProgress).unwrap();
    assert_eq!(r.objects, 0);
    assert!(verify(&f.store, &saved.id, &NoProgress).unwrap().ok);

    // A damaged checkpoint manifest: prune deletes nothing.
    let path = f.store.checkpoints_dir().join(format!("{}.json", saved.id));
    let good = fs::read(&path).unwrap();
    fs::write(&path, b"[not a manifest").unwrap();
    let orphan = pool
        .put_bytes(
            &cairn_objects::StoreLock::shared(&f.store).unwrap(),
            b"orphan",
        )
        .unwrap();
    let err = prune(&pool, &[&snaps, &cps], &PruneOptions::new(), &NoProgress).unwrap_err();
    assert!(err.is_integrity(), "{err}");
    assert!(pool.contains(&orphan.hash) && pool.contains(&hash));

    // Without the checkpoint nothing names the image: it goes, chunks too.
    fs::write(&path, &good).unwrap();
    fs::remove_file(&path).unwrap();
    let r = prune(&pool, &[&snaps, &cps], &PruneOptions::new(), &NoProgress).unwrap();
    assert!(r.objects as usize > chunks.len(), "the list and its chunks");
    assert!(!pool.contains(&hash));
    assert!(chunks.iter().all(|c| !pool.contains(&c.hash)));
    // The workspace snapshot is still named by its own manifest.
    let snap = saved.snapshot.unwrap();
    let a = f.ws.manifest(&snap).unwrap().entries["a.txt"].hash;
    assert!(pool.contains(&a));
}

#[test]
fn naming_run_answers_which_checkpoints_belong_to_a_run_or_fails_naming_the_unreadable_one() {
    let mut f = Fixture::new();
    f.write("a.txt", b"a");
    let one = f.save(&[]);
    let two = f.save(&[]);
    let mut g = Fixture::new();
    g.store = f.store.clone();
    let mut expect = vec![one.id.clone(), two.id.clone()];
    expect.sort();
    assert_eq!(naming_run(&f.store, &f.run).unwrap(), expect);
    assert!(naming_run(&f.store, &g.run).unwrap().is_empty());

    // A manifest of ANOTHER run that cannot be read: the answer for `g`'s
    // run is an error naming it, never an empty list (it may be `g`'s).
    let other = Fixture::new();
    let req = SaveRequest::new(other.run.clone(), other.position());
    let stray = save(&other.store, &req, &NoProgress).unwrap();
    let path = f.store.checkpoints_dir().join(format!("{}.json", stray.id));
    fs::copy(other.manifest_path(&stray.id), &path).unwrap();
    assert_eq!(naming_run(&f.store, &g.run).unwrap(), vec![]);
    fs::write(&path, b"{\"version\":1,\"id\":").unwrap();
    for err in [
        naming_run(&f.store, &g.run).unwrap_err(),
        naming_run(&f.store, &f.run).unwrap_err(),
    ] {
        assert!(err.is_integrity(), "{err}");
        assert!(
            err.to_string().contains(&path.display().to_string()),
            "{err}"
        );
    }
    // `list` does not hide it either.
    assert!(list(&f.store, &g.run).is_err());

    // A manifest that reads but holds a path today's rule refuses still
    // answers which run it names.
    fs::remove_file(&path).unwrap();
    g.tamper(&two.id, |m| {
        m["paths"] = serde_json::json!([{"path": "/repo/.git", "kind": "dir", "mode": 493,
            "files": 0, "bytes": 0, "entries": [], "skipped": []}]);
    });
    assert!(show(&f.store, &two.id).unwrap_err().is_integrity());
    assert_eq!(naming_run(&f.store, &f.run).unwrap(), expect);
}
