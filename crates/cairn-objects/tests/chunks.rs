//! Content-defined chunks: round trips, small edits, damage, prune.

use std::collections::HashSet;
use std::fs;
use std::path::{Path, PathBuf};

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

/// Incompressible, deterministic bytes.
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(n);
    out
}

/// Every object file in the pool, by name.
fn objects(pool: &ObjectPool) -> HashSet<String> {
    let mut out = HashSet::new();
    for fan in fs::read_dir(pool.dir()).unwrap() {
        let fan = fan.unwrap();
        if !fan.file_type().unwrap().is_dir() {
            continue;
        }
        for f in fs::read_dir(fan.path()).unwrap() {
            let name = f.unwrap().file_name().into_string().unwrap();
            if !name.starts_with('.') {
                out.insert(format!("{}{name}", fan.file_name().to_str().unwrap()));
            }
        }
    }
    out
}

fn pool_bytes(pool: &ObjectPool, names: &HashSet<String>) -> u64 {
    names
        .iter()
        .map(|n| {
            let h = ObjectHash::parse(n).unwrap();
            fs::metadata(pool.path_of(&h)).unwrap().len()
        })
        .sum()
}

fn write(dir: &Path, name: &str, bytes: &[u8]) -> PathBuf {
    let p = dir.join(name);
    fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn a_large_file_round_trips_as_chunks_and_accounts_its_bytes() {
    let (d, pool) = pool();
    let mut bytes = noise(5 << 20, 1);
    bytes.extend(std::iter::repeat_n(b'z', 2 << 20)); // a compressible run
    let path = write(d.path(), "big.bin", &bytes);
    let put = pool.put_file(&lock(&pool), &path).unwrap();
    assert!(put.new);
    assert_eq!(
        put.hash,
        ObjectHash::of(&bytes),
        "named by the whole content"
    );
    assert_eq!(put.size, bytes.len() as u64);
    assert_eq!(pool.info(&put.hash).unwrap().kind, ObjectKind::ChunkList);

    // Stored bytes are exactly what landed in the pool.
    assert_eq!(put.stored_bytes, pool_bytes(&pool, &objects(&pool)));
    assert!(
        put.stored_bytes < bytes.len() as u64,
        "the run of z compresses"
    );

    let list = pool.chunk_list(&put.hash).unwrap().unwrap();
    assert!(list.len() > 40, "{} chunks", list.len());
    assert!(list.iter().all(|c| c.size as usize <= MAX_CHUNK));
    assert_eq!(list.iter().map(|c| c.size).sum::<u64>(), bytes.len() as u64);

    assert_eq!(pool.get(&put.hash).unwrap(), bytes);
    let mut streamed = Vec::new();
    assert_eq!(
        pool.read_to(&put.hash, &mut streamed).unwrap(),
        bytes.len() as u64
    );
    assert_eq!(streamed, bytes);
    assert_eq!(pool.verify(&put.hash).unwrap().size, bytes.len() as u64);
    let check = pool.check(&put.hash).unwrap();
    assert!(check.ok(), "{:?}", check.bad);
    assert_eq!(check.kind, Some(ObjectKind::ChunkList));
    assert_eq!(check.size, bytes.len() as u64);
    pool.require(&put.hash).unwrap();

    // Storing it again adds nothing.
    let again = pool.put_file(&lock(&pool), &path).unwrap();
    assert!(!again.new);
    assert_eq!(again.stored_bytes, 0);

    // Small files and put_bytes stay blobs.
    let small = write(d.path(), "small", &noise(1 << 20, 2));
    let p = pool.put_file(&lock(&pool), &small).unwrap();
    assert_eq!(pool.info(&p.hash).unwrap().kind, ObjectKind::Blob);
    let p = pool.put_bytes(&lock(&pool), &noise(3 << 20, 3)).unwrap();
    assert_eq!(pool.info(&p.hash).unwrap().kind, ObjectKind::Blob);
}

#[test]
fn a_small_edit_to_a_64_mib_file_adds_only_a_few_chunks() {
    let (d, pool) = pool();
    let mut bytes = noise(64 << 20, 4);
    let path = write(d.path(), "disk.img", &bytes);
    let first = pool.put_file(&lock(&pool), &path).unwrap();
    let before = objects(&pool);

    // Two 4 KiB page writes far apart.
    for off in [10 << 20, 50 << 20] {
        bytes[off..off + 4096].copy_from_slice(&noise(4096, off as u64));
    }
    fs::write(&path, &bytes).unwrap();
    let second = pool.put_file(&lock(&pool), &path).unwrap();
    assert!(second.new && second.hash != first.hash);
    let added: HashSet<String> = objects(&pool).difference(&before).cloned().collect();
    // At most two chunks per write (one straddling a boundary), plus the list.
    assert!(added.len() <= 5, "{} objects added", added.len());
    assert_eq!(second.stored_bytes, pool_bytes(&pool, &added));
    // Each chunk is at most 256 KiB; the list is ~36 bytes per chunk.
    assert!(
        second.stored_bytes < 4 * MAX_CHUNK as u64 + 64 * 1024,
        "{} bytes stored for an 8 KiB edit",
        second.stored_bytes
    );
    assert_eq!(pool.get(&second.hash).unwrap(), bytes);
}

#[test]
fn zeros_dedupe_within_one_file() {
    let (d, pool) = pool();
    let path = write(d.path(), "zeros", &vec![0u8; 8 << 20]);
    let put = pool.put_file(&lock(&pool), &path).unwrap();
    let list = pool.chunk_list(&put.hash).unwrap().unwrap();
    assert_eq!(list.len(), 32);
    assert_eq!(objects(&pool).len(), 2, "one chunk, one list");
    assert_eq!(pool.get(&put.hash).unwrap(), vec![0u8; 8 << 20]);
}

#[test]
fn a_flipped_byte_in_a_chunk_is_found_and_named() {
    let (d, pool) = pool();
    let bytes = noise(3 << 20, 5);
    let path = write(d.path(), "big.bin", &bytes);
    let put = pool.put_file(&lock(&pool), &path).unwrap();
    let list = pool.chunk_list(&put.hash).unwrap().unwrap();
    let victim = list[list.len() / 2].hash;
    let file = pool.path_of(&victim);
    let mut raw = fs::read(&file).unwrap();
    let mid = raw.len() / 2;
    raw[mid] ^= 0x01;
    fs::write(&file, &raw).unwrap();

    let err = pool.verify(&put.hash).unwrap_err();
    match &err {
        ObjectError::Corrupt { hash, .. } => assert_eq!(*hash, victim),
        other => panic!("{other}"),
    }
    assert!(err.is_integrity());
    assert!(err.to_string().contains(&victim.to_hex()), "{err}");
    assert!(pool.get(&put.hash).is_err());
    let check = pool.check(&put.hash).unwrap();
    assert!(!check.ok());
    assert_eq!(check.bad.len(), 1);
    assert_eq!(check.bad[0].hash, victim);
    assert!(!check.bad[0].missing);

    // A missing chunk is named by require and check.
    fs::remove_file(&file).unwrap();
    match pool.require(&put.hash).unwrap_err() {
        ObjectError::Missing { hash } => assert_eq!(hash, victim),
        other => panic!("{other}"),
    }
    let check = pool.check(&put.hash).unwrap();
    assert!(check.bad[0].missing && check.bad[0].hash == victim);
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

#[test]
fn prune_keeps_the_chunks_of_live_lists_and_sweeps_orphans() {
    let (d, pool) = pool();
    let shared = noise(2 << 20, 6);
    let mut a = shared.clone();
    a.extend(noise(2 << 20, 7));
    let mut b = shared;
    b.extend(noise(2 << 20, 8));
    let pa = pool
        .put_file(&lock(&pool), &write(d.path(), "a", &a))
        .unwrap();
    let pb = pool
        .put_file(&lock(&pool), &write(d.path(), "b", &b))
        .unwrap();
    let a_chunks: HashSet<ObjectHash> = pool
        .chunk_list(&pa.hash)
        .unwrap()
        .unwrap()
        .iter()
        .map(|c| c.hash)
        .collect();
    let b_only: Vec<ObjectHash> = pool
        .chunk_list(&pb.hash)
        .unwrap()
        .unwrap()
        .iter()
        .map(|c| c.hash)
        .filter(|h| !a_chunks.contains(h))
        .collect();
    assert!(!b_only.is_empty());

    let report = prune(
        &pool,
        &[&Named(vec![pa.hash])],
        &PruneOptions::new(),
        &NoProgress,
    )
    .unwrap();
    assert_eq!(report.objects as usize, 1 + b_only.len());
    assert!(!pool.contains(&pb.hash));
    assert!(b_only.iter().all(|h| !pool.contains(h)));
    assert!(a_chunks.iter().all(|h| pool.contains(h)));
    assert_eq!(pool.get(&pa.hash).unwrap(), a);

    // A live chunk list that cannot be read: nothing is deleted.
    let orphan = pool.put_bytes(&lock(&pool), b"unreferenced").unwrap();
    let list_file = pool.path_of(&pa.hash);
    let mut raw = fs::read(&list_file).unwrap();
    raw[5] = 0x7f; // an unknown kind
    fs::write(&list_file, &raw).unwrap();
    let err = prune(
        &pool,
        &[&Named(vec![pa.hash])],
        &PruneOptions::new(),
        &NoProgress,
    )
    .unwrap_err();
    assert!(
        matches!(err, ObjectError::ManifestUnreadable { .. }),
        "{err}"
    );
    assert!(pool.contains(&orphan.hash));
    assert!(a_chunks.iter().all(|h| pool.contains(h)));
}

#[test]
fn an_older_pool_format_is_raised() {
    let (_d, pool) = pool();
    let fmt = pool.dir().join("FORMAT");
    assert_eq!(
        fs::read_to_string(&fmt).unwrap(),
        format!("cairn-objects {POOL_FORMAT}\n")
    );
    fs::write(&fmt, "cairn-objects 1\n").unwrap();
    ObjectPool::open(pool.store()).unwrap();
    assert_eq!(fs::read_to_string(&fmt).unwrap(), "cairn-objects 2\n");
}

#[test]
fn a_dropped_batch_leaves_no_chunk_behind() {
    let (d, pool) = pool();
    let path = write(d.path(), "big", &noise(3 << 20, 9));
    let l = lock(&pool);
    let batch = pool.batch(&l);
    let file = fs::File::open(&path).unwrap();
    let put = batch.put_open_file(&file, &path).unwrap();
    assert!(put.new && batch.len() > 10);
    drop(batch);
    assert!(objects(&pool).is_empty());
    assert!(!pool.contains(&put.hash));
}

#[test]
fn the_threshold_is_configurable() {
    let (d, pool) = pool();
    let pool = pool.with_chunking(ChunkConfig::default().threshold(u64::MAX));
    let path = write(d.path(), "big", &noise(3 << 20, 10));
    let put = pool.put_file(&lock(&pool), &path).unwrap();
    assert_eq!(pool.info(&put.hash).unwrap().kind, ObjectKind::Blob);
}

#[test]
fn a_body_resent_with_more_appended_costs_what_was_appended_and_a_chunk() {
    let (_d, pool) = pool();
    let lock = lock(&pool);
    // A conversation of 50 turns, re-sent whole each turn, 2 KiB a turn.
    let mut body = noise(20 << 10, 1);
    let mut stored = 0u64;
    let mut sent = 0u64;
    for turn in 0..50 {
        body.extend_from_slice(&noise(2 << 10, 100 + turn));
        let batch = pool.batch(&lock);
        let put = batch.put_body(&body).unwrap();
        batch.commit(&NoProgress).unwrap();
        stored += put.stored_bytes;
        sent += body.len() as u64;
        assert_eq!(pool.get(&put.hash).unwrap(), body, "turn {turn} reads back");
        assert_eq!(put.hash, ObjectHash::of(&body));
    }
    let last = body.len() as u64;
    // Incompressible bytes: what is stored is the new bytes plus about one
    // body chunk a turn, far below the sum of what was sent.
    assert!(
        stored < last + 50 * (BODY_CHUNK_BOUND as u64),
        "{stored} for {last}"
    );
    assert!(stored * 10 < sent, "{stored} of {sent}");
    // The chunk list verifies like a file's.
    let check = pool.check(&ObjectHash::of(&body)).unwrap();
    assert!(check.ok());
}

/// Two body-class chunks: the most one re-sent turn adds besides its new bytes.
const BODY_CHUNK_BOUND: usize = 2 * cairn_objects::BODY_AVG_CHUNK + 512;
