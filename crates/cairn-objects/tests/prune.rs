//! Prune: mark and sweep, dry runs, refusal on unreadable manifests, the lock.

use std::fs;

use cairn_objects::*;
use cairn_store::Store;

fn lock(pool: &ObjectPool) -> StoreLock {
    StoreLock::shared(pool.store()).unwrap()
}

struct Named(Vec<ObjectHash>);

impl ManifestSource for Named {
    fn name(&self) -> String {
        "test manifests".into()
    }
    fn referenced(&self, mark: &mut dyn FnMut(ObjectHash)) -> Result<(), SourceError> {
        self.0.iter().for_each(|h| mark(*h));
        Ok(())
    }
}

struct Broken;

impl ManifestSource for Broken {
    fn name(&self) -> String {
        "broken manifests".into()
    }
    fn referenced(&self, _mark: &mut dyn FnMut(ObjectHash)) -> Result<(), SourceError> {
        Err("snapshot 01ABC.json: expected value at line 1 column 1".into())
    }
}

fn setup() -> (tempfile::TempDir, Store, ObjectPool, Vec<ObjectHash>) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let pool = ObjectPool::open(&store).unwrap();
    let hashes = (0..10)
        .map(|i| {
            pool.put_bytes(&lock(&pool), format!("object {i}").as_bytes())
                .unwrap()
                .hash
        })
        .collect();
    (dir, store, pool, hashes)
}

#[test]
fn sweeps_exactly_the_unreferenced() {
    let (_d, _s, pool, h) = setup();
    let keep = Named(h[..4].to_vec());
    let also = Named(vec![h[4]]);
    let dry = prune(
        &pool,
        &[&keep, &also],
        &PruneOptions::new().dry_run(true),
        &NoProgress,
    )
    .unwrap();
    assert_eq!((dry.objects, dry.kept, dry.dry_run), (5, 5, true));
    assert!(dry.bytes > 0);
    assert!(
        h.iter().all(|x| pool.contains(x)),
        "dry run deleted something"
    );

    let real = prune(&pool, &[&keep, &also], &PruneOptions::new(), &NoProgress).unwrap();
    assert_eq!((real.objects, real.bytes, real.kept), (5, dry.bytes, 5));
    for (i, x) in h.iter().enumerate() {
        assert_eq!(pool.contains(x), i < 5, "object {i}");
    }
    let again = prune(&pool, &[&keep, &also], &PruneOptions::new(), &NoProgress).unwrap();
    assert_eq!(again.objects, 0);
}

#[test]
fn an_unreadable_manifest_means_nothing_is_deleted() {
    let (_d, _s, pool, h) = setup();
    let keep = Named(vec![h[0]]);
    let err = prune(&pool, &[&keep, &Broken], &PruneOptions::new(), &NoProgress).unwrap_err();
    assert!(
        matches!(err, ObjectError::ManifestUnreadable { .. }),
        "{err}"
    );
    assert!(err.is_integrity());
    assert!(err.to_string().contains("deleted nothing"), "{err}");
    assert!(h.iter().all(|x| pool.contains(x)));
}

#[test]
fn leftover_temporaries_are_swept_and_foreign_files_kept() {
    let (_d, _s, pool, h) = setup();
    let fan = pool.path_of(&h[0]).parent().unwrap().to_owned();
    fs::write(fan.join(".deadbeef.tmp"), b"half an object").unwrap();
    fs::write(fan.join("README"), b"not ours").unwrap();
    let r = prune(
        &pool,
        &[&Named(h.clone())],
        &PruneOptions::new(),
        &NoProgress,
    )
    .unwrap();
    assert_eq!((r.objects, r.temporaries), (0, 1));
    assert!(!fan.join(".deadbeef.tmp").exists());
    assert!(fan.join("README").exists());
}

#[test]
fn a_held_store_lock_makes_prune_refuse_or_wait() {
    let (_d, store, pool, h) = setup();
    let shared = StoreLock::shared(&store).unwrap();
    let err = prune(
        &pool,
        &[&Named(h.clone())],
        &PruneOptions::new(),
        &NoProgress,
    )
    .unwrap_err();
    assert!(matches!(err, ObjectError::StoreBusy { .. }), "{err}");
    assert!(err.is_refusal());
    // Shared holders coexist.
    let second = StoreLock::shared(&store).unwrap();
    assert_eq!(second.mode(), LockMode::Shared);
    let t = std::thread::spawn({
        let pool = pool.clone();
        move || {
            prune(
                &pool,
                &[&Named(vec![])],
                &PruneOptions::new().wait(true),
                &NoProgress,
            )
            .unwrap()
        }
    });
    std::thread::sleep(std::time::Duration::from_millis(100));
    assert!(
        !t.is_finished(),
        "prune did not wait for the shared holders"
    );
    drop((shared, second));
    assert_eq!(t.join().unwrap().objects, 10);
}

#[test]
fn a_newer_pool_format_is_not_pruned() {
    let (_d, _s, pool, h) = setup();
    let newer = format!("cairn-objects {}\n", POOL_FORMAT + 1);
    fs::write(pool.dir().join("FORMAT"), newer).unwrap();
    let err = prune(&pool, &[&Named(vec![])], &PruneOptions::new(), &NoProgress).unwrap_err();
    assert!(matches!(err, ObjectError::NewerPool { .. }), "{err}");
    assert!(h.iter().all(|x| pool.contains(x)));
}

#[test]
fn a_dry_run_shares_the_store_with_captures_and_deletes_nothing() {
    let (_d, store, pool, h) = setup();
    // A capture holds the store lock shared; a dry run goes ahead beside it.
    let capture = StoreLock::shared(&store).unwrap();
    let report = prune(
        &pool,
        &[&Named(h[..3].to_vec())],
        &PruneOptions::new().dry_run(true),
        &NoProgress,
    )
    .unwrap();
    assert!(report.dry_run);
    assert_eq!(report.objects, 7);
    drop(capture);
    for x in &h {
        assert!(pool.contains(x), "a dry run deleted {x}");
    }
}

#[test]
fn a_linked_fan_out_directory_is_refused_and_nothing_outside_is_deleted() {
    let (d, _s, pool, h) = setup();
    let fan = pool.dir().join(&h[0].to_hex()[..2]);
    let outside = d.path().join("outside");
    fs::rename(&fan, &outside).unwrap();
    std::os::unix::fs::symlink(&outside, &fan).unwrap();
    let before: Vec<_> = fs::read_dir(&outside)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert!(!before.is_empty());
    // Nothing names anything: every object would go, were the link followed.
    match prune(&pool, &[], &PruneOptions::new(), &NoProgress) {
        Err(ObjectError::NotPlain { path, what, .. }) => {
            assert_eq!(path, fan);
            assert_eq!(what, "a symbolic link");
        }
        other => panic!("{other:?}"),
    }
    let after: Vec<_> = fs::read_dir(&outside)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(after, before);
    assert!(h
        .iter()
        .all(|x| x.to_hex().starts_with(&h[0].to_hex()[..2]) || pool.contains(x)));
}
