//! Object round trips, dedup, group commit, and damage detection.

use std::fs;
use std::os::unix::fs::PermissionsExt;

use cairn_objects::*;
use cairn_store::Store;

fn lock(pool: &ObjectPool) -> StoreLock {
    StoreLock::shared(pool.store()).unwrap()
}

fn pool() -> (tempfile::TempDir, ObjectPool) {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store")).unwrap();
    let pool = ObjectPool::open(&store).unwrap();
    (dir, pool)
}

/// Deterministic bytes that compress somewhat, like source text.
fn text(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            b"abcdefgh ijklm\n"[(x >> 60) as usize % 15]
        })
        .collect()
}

#[test]
fn round_trip_small_empty_and_large() {
    let (_d, pool) = pool();
    for bytes in [
        Vec::new(),
        b"hello".to_vec(),
        text(100_000, 1),
        text(9 << 20, 2),
    ] {
        let put = pool.put_bytes(&lock(&pool), &bytes).unwrap();
        assert!(put.new);
        assert_eq!(put.size, bytes.len() as u64);
        assert_eq!(put.hash, ObjectHash::of(&bytes));
        assert!(pool.contains(&put.hash));
        assert_eq!(pool.get(&put.hash).unwrap(), bytes);
        let info = pool.verify(&put.hash).unwrap();
        assert_eq!(info.size, bytes.len() as u64);
        assert_eq!(info.kind, ObjectKind::Blob);
        let path = pool.path_of(&put.hash);
        assert_eq!(fs::metadata(&path).unwrap().len(), put.stored_bytes);
        assert_eq!(
            fs::metadata(&path).unwrap().permissions().mode() & 0o777,
            0o600
        );
        let name = format!(
            "{}{}",
            path.parent()
                .unwrap()
                .file_name()
                .unwrap()
                .to_str()
                .unwrap(),
            path.file_name().unwrap().to_str().unwrap()
        );
        assert_eq!(name, put.hash.to_hex());
    }
}

#[test]
fn compressible_content_is_stored_smaller() {
    let (_d, pool) = pool();
    let bytes = vec![b'a'; 1 << 20];
    let put = pool.put_bytes(&lock(&pool), &bytes).unwrap();
    assert!(put.stored_bytes < 10_000, "{}", put.stored_bytes);
}

#[test]
fn putting_existing_content_is_a_no_op() {
    let (_d, pool) = pool();
    let a = pool.put_bytes(&lock(&pool), b"same").unwrap();
    let before = fs::metadata(pool.path_of(&a.hash))
        .unwrap()
        .modified()
        .unwrap();
    let b = pool.put_bytes(&lock(&pool), b"same").unwrap();
    assert_eq!(a.hash, b.hash);
    assert!(!b.new);
    assert_eq!(b.stored_bytes, 0);
    let after = fs::metadata(pool.path_of(&a.hash))
        .unwrap()
        .modified()
        .unwrap();
    assert_eq!(before, after);
}

#[test]
fn put_file_streams_large_files_and_refuses_symlinks() {
    let (d, pool) = pool();
    let big = d.path().join("big.bin");
    let bytes = text(10 << 20, 3);
    fs::write(&big, &bytes).unwrap();
    let put = pool.put_file(&lock(&pool), &big).unwrap();
    assert_eq!(put.hash, ObjectHash::of(&bytes));
    assert_eq!(pool.get(&put.hash).unwrap(), bytes);
    assert!(!pool.put_file(&lock(&pool), &big).unwrap().new);

    let link = d.path().join("link");
    std::os::unix::fs::symlink(&big, &link).unwrap();
    assert!(pool.put_file(&lock(&pool), &link).is_err());
}

#[test]
fn batch_objects_are_invisible_until_commit_and_gone_if_dropped() {
    let (_d, pool) = pool();
    let l = lock(&pool);
    let batch = pool.batch(&l);
    let a = batch.put_bytes(b"one").unwrap();
    let again = batch.put_bytes(b"one").unwrap();
    assert!(a.new && !again.new);
    let b = batch.put_bytes(b"two").unwrap();
    assert_eq!(batch.len(), 2);
    assert!(!pool.contains(&a.hash) && !pool.contains(&b.hash));
    let report = batch.commit(&NoProgress).unwrap();
    assert_eq!(report.objects, 2);
    assert!(pool.contains(&a.hash) && pool.contains(&b.hash));

    let l = lock(&pool);
    let dropped = pool.batch(&l);
    let c = dropped.put_bytes(b"three").unwrap();
    let fan = pool.path_of(&c.hash).parent().unwrap().to_owned();
    drop(dropped);
    assert!(!pool.contains(&c.hash));
    let leftovers: Vec<_> = fs::read_dir(&fan).unwrap().collect();
    assert!(leftovers.is_empty(), "temporary files left behind");
}

#[test]
fn a_large_batch_publishes_every_object_and_leaves_no_temporaries() {
    // Large enough for the one-barrier commit (syncfs) rather than an fsync
    // per object; blobs and chunk lists together.
    let (d, pool) = pool();
    let l = lock(&pool);
    let batch = pool.batch(&l);
    let mut puts = Vec::new();
    for i in 0..300u64 {
        puts.push(batch.put_bytes(&text(100 + i as usize * 7, i)).unwrap());
    }
    let big = d.path().join("big");
    fs::write(&big, text(3 << 20, 99)).unwrap();
    puts.push(
        batch
            .put_open_file(&fs::File::open(&big).unwrap(), &big)
            .unwrap(),
    );
    for p in &puts {
        assert!(!pool.contains(&p.hash), "visible before commit");
    }
    let report = batch.commit(&NoProgress).unwrap();
    assert!(report.objects >= 301, "{report:?}");
    for (i, p) in puts.iter().enumerate().take(300) {
        assert_eq!(pool.get(&p.hash).unwrap(), text(100 + i * 7, i as u64));
    }
    assert_eq!(pool.get(&puts[300].hash).unwrap(), text(3 << 20, 99));
    assert!(pool.check(&puts[300].hash).unwrap().ok());
    for fan in fs::read_dir(pool.dir()).unwrap() {
        let fan = fan.unwrap();
        if fan.file_type().unwrap().is_dir() {
            for e in fs::read_dir(fan.path()).unwrap() {
                let name = e.unwrap().file_name();
                assert!(!name.to_string_lossy().starts_with('.'), "{name:?} left");
            }
        }
    }
}

#[test]
fn verify_detects_corruption_truncation_and_missing() {
    let (_d, pool) = pool();
    let bytes = text(200_000, 4);
    let put = pool.put_bytes(&lock(&pool), &bytes).unwrap();
    let path = pool.path_of(&put.hash);
    let good = fs::read(&path).unwrap();

    // A flipped bit in the compressed body.
    let mut bad = good.clone();
    let mid = bad.len() / 2;
    bad[mid] ^= 0x40;
    fs::write(&path, &bad).unwrap();
    let err = pool.verify(&put.hash).unwrap_err();
    assert!(matches!(err, ObjectError::Corrupt { .. }), "{err}");
    assert!(err.is_integrity());
    assert!(pool.get(&put.hash).is_err());

    // Truncated.
    fs::write(&path, &good[..good.len() - 10]).unwrap();
    assert!(matches!(
        pool.verify(&put.hash).unwrap_err(),
        ObjectError::Corrupt { .. }
    ));

    // Another object's bytes under this name.
    let other = pool.put_bytes(&lock(&pool), b"other").unwrap();
    fs::copy(pool.path_of(&other.hash), &path).unwrap();
    let err = pool.verify(&put.hash).unwrap_err();
    assert!(matches!(err, ObjectError::Corrupt { .. }), "{err}");

    // Damaged header.
    fs::write(&path, b"garbage").unwrap();
    assert!(matches!(
        pool.verify(&put.hash).unwrap_err(),
        ObjectError::Corrupt { .. }
    ));

    // Restored: fine again.
    fs::write(&path, &good).unwrap();
    pool.verify(&put.hash).unwrap();

    // Missing.
    fs::remove_file(&path).unwrap();
    assert!(matches!(
        pool.verify(&put.hash).unwrap_err(),
        ObjectError::Missing { .. }
    ));
}

#[test]
fn newer_header_version_is_refused_not_misread() {
    let (_d, pool) = pool();
    let put = pool.put_bytes(&lock(&pool), b"x").unwrap();
    let path = pool.path_of(&put.hash);
    let mut b = fs::read(&path).unwrap();
    b[4] = 9;
    fs::write(&path, &b).unwrap();
    assert!(matches!(
        pool.get(&put.hash).unwrap_err(),
        ObjectError::NewerFormat { .. }
    ));
}

#[test]
fn concurrent_batches_of_the_same_content_agree() {
    let (_d, pool) = pool();
    let blobs: Vec<Vec<u8>> = (0..50).map(|i| text(5_000, i)).collect();
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| {
                let l = lock(&pool);
                let batch = pool.batch(&l);
                for b in &blobs {
                    batch.put_bytes(b).unwrap();
                }
                batch.commit(&NoProgress).unwrap();
            });
        }
    });
    for b in &blobs {
        assert_eq!(pool.get(&ObjectHash::of(b)).unwrap(), *b);
    }
}

/// Nothing is written through a link inside the store: a linked `objects/`
/// or fan-out directory is refused, naming it, and the directory it points
/// at stays empty.
#[test]
fn puts_never_write_through_a_link_in_the_store() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store")).unwrap();
    let outside = dir.path().join("outside");
    fs::create_dir(&outside).unwrap();
    std::os::unix::fs::symlink(&outside, store.objects_dir()).unwrap();
    match ObjectPool::open(&store) {
        Err(ObjectError::NotPlain { path, .. }) => assert_eq!(path, store.objects_dir()),
        other => panic!("{other:?}"),
    }
    let pool = ObjectPool::at(&store);
    let err = pool.put_bytes(&lock(&pool), b"x").unwrap_err();
    assert!(matches!(err, ObjectError::NotPlain { .. }), "{err}");
    assert!(err.to_string().contains("symbolic link"), "{err}");
    assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);

    // A linked fan-out directory in a real pool.
    fs::remove_file(store.objects_dir()).unwrap();
    let pool = ObjectPool::open(&store).unwrap();
    let hash = ObjectHash::of(b"y");
    let fan = pool.dir().join(&hash.to_hex()[..2]);
    std::os::unix::fs::symlink(&outside, &fan).unwrap();
    match pool.put_bytes(&lock(&pool), b"y") {
        Err(ObjectError::NotPlain { path, .. }) => assert_eq!(path, fan),
        other => panic!("{other:?}"),
    }
    assert_eq!(fs::read_dir(&outside).unwrap().count(), 0);
    assert!(!pool.contains(&hash));
}
