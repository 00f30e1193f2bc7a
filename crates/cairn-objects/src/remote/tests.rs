//! The transfers against an in-memory remote that counts its calls and can
//! be told to fail.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Mutex;

use cairn_store::Store;

use super::*;
use crate::format::{Header, HEADER_LEN};
use crate::{ChunkConfig, NoProgress, ObjectPool, StoreLock};

#[derive(Default)]
struct Calls {
    contains: u64,
    puts: u64,
    gets: u64,
}

/// A remote in a map: create-only, like S3 with `If-None-Match: *`.
#[derive(Default)]
struct MemoryRemote {
    objects: Mutex<BTreeMap<ObjectHash, Vec<u8>>>,
    calls: Mutex<Calls>,
    /// Objects created, in order.
    created: Mutex<Vec<ObjectHash>>,
    /// A put of this name fails.
    fail_put: Mutex<Option<ObjectHash>>,
}

impl MemoryRemote {
    fn bytes(&self, hash: &ObjectHash) -> Option<Vec<u8>> {
        self.objects.lock().unwrap().get(hash).cloned()
    }

    /// Replaces an object's bytes behind the trait's back.
    fn damage(&self, hash: &ObjectHash, f: impl FnOnce(&mut Vec<u8>)) {
        f(self.objects.lock().unwrap().get_mut(hash).unwrap());
    }

    fn remove(&self, hash: &ObjectHash) {
        self.objects.lock().unwrap().remove(hash);
    }

    fn puts(&self) -> u64 {
        self.calls.lock().unwrap().puts
    }

    fn gets(&self) -> u64 {
        self.calls.lock().unwrap().gets
    }
}

impl RemoteObjects for MemoryRemote {
    fn name(&self) -> &str {
        "memory://test"
    }

    fn contains(&self, hash: &ObjectHash) -> Result<bool, RemoteError> {
        self.calls.lock().unwrap().contains += 1;
        Ok(self.objects.lock().unwrap().contains_key(hash))
    }

    fn put_create(&self, hash: &ObjectHash, stored: &[u8]) -> Result<PutOutcome, RemoteError> {
        self.calls.lock().unwrap().puts += 1;
        if *self.fail_put.lock().unwrap() == Some(*hash) {
            return Err("the test's remote refuses this put".into());
        }
        let mut objects = self.objects.lock().unwrap();
        if objects.contains_key(hash) {
            return Ok(PutOutcome::AlreadyThere);
        }
        objects.insert(*hash, stored.to_vec());
        self.created.lock().unwrap().push(*hash);
        Ok(PutOutcome::Created)
    }

    fn get(&self, hash: &ObjectHash) -> Result<Option<Vec<u8>>, RemoteError> {
        self.calls.lock().unwrap().gets += 1;
        Ok(self.bytes(hash))
    }

    fn list(
        &self,
        hex_prefix: &str,
        visit: &mut dyn FnMut(RemoteEntry),
    ) -> Result<(), RemoteError> {
        for (hash, bytes) in self.objects.lock().unwrap().iter() {
            if hash.to_hex().starts_with(hex_prefix) {
                visit(RemoteEntry {
                    hash: *hash,
                    stored_bytes: bytes.len() as u64,
                    last_modified: None,
                });
            }
        }
        Ok(())
    }
}

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

struct Fixture {
    _dir: tempfile::TempDir,
    pool: ObjectPool,
    /// Three blobs, then a chunked file.
    named: Vec<ObjectHash>,
    big: ObjectHash,
    chunks: Vec<ChunkRef>,
}

/// A pool that chunks from 256 KiB on, with three blobs and a 1.5 MiB file
/// stored as chunks.
fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let (pool, lock) = empty_pool(&dir.path().join("a"));
    let mut named: Vec<ObjectHash> = ["one", "two", "three"]
        .iter()
        .map(|s| pool.put_bytes(&lock, s.as_bytes()).unwrap().hash)
        .collect();
    let file = dir.path().join("big.bin");
    std::fs::write(&file, noise(1536 << 10, 5)).unwrap();
    let big = pool.put_file(&lock, &file).unwrap().hash;
    named.push(big);
    let chunks = pool.chunk_list(&big).unwrap().unwrap();
    assert!(chunks.len() > 4, "{} chunks", chunks.len());
    Fixture {
        _dir: dir,
        pool,
        named,
        big,
        chunks,
    }
}

fn empty_pool(root: &Path) -> (ObjectPool, StoreLock) {
    let store = Store::open(root).unwrap();
    let pool = ObjectPool::open(&store)
        .unwrap()
        .with_chunking(ChunkConfig::default().threshold(0));
    let lock = StoreLock::shared(&store).unwrap();
    (pool, lock)
}

fn second_pool(f: &Fixture) -> (ObjectPool, StoreLock) {
    empty_pool(&f._dir.path().join("b"))
}

/// Every file under the pool's directory (objects and temporaries alike).
fn pool_files(pool: &ObjectPool) -> Vec<String> {
    let mut out = Vec::new();
    for fan in std::fs::read_dir(pool.dir()).unwrap() {
        let fan = fan.unwrap().path();
        if fan.is_dir() {
            for f in std::fs::read_dir(&fan).unwrap() {
                out.push(f.unwrap().file_name().to_string_lossy().into_owned());
            }
        }
    }
    out
}

#[test]
fn upload_then_fetch_carries_every_object_byte_for_byte() {
    let f = fixture();
    let remote = MemoryRemote::default();
    let up = upload(&f.pool, &remote, &f.named, &NoProgress).unwrap();
    let total = f.named.len() + f.chunks.len();
    assert_eq!(up.objects as usize, total);
    assert_eq!(up.present, 0);
    for h in f.named.iter().chain(f.chunks.iter().map(|c| &c.hash)) {
        assert_eq!(remote.bytes(h).unwrap(), f.pool.stored_bytes(h).unwrap());
    }
    // The list went up after every one of its chunks.
    let created = remote.created.lock().unwrap().clone();
    let at = |h: &ObjectHash| created.iter().position(|c| c == h).unwrap();
    assert!(f.chunks.iter().all(|c| at(&c.hash) < at(&f.big)));

    let (b, lock) = second_pool(&f);
    let down = fetch_missing(&b, &lock, &remote, &f.named, &NoProgress).unwrap();
    assert_eq!(down.objects as usize, total);
    assert_eq!(down.bytes, up.bytes);
    for h in &f.named {
        b.verify(h).unwrap();
        assert_eq!(b.get(h).unwrap(), f.pool.get(h).unwrap());
        assert_eq!(b.stored_bytes(h).unwrap(), f.pool.stored_bytes(h).unwrap());
    }
    assert_eq!(b.chunk_list(&f.big).unwrap().unwrap(), f.chunks);
    assert!(pool_files(&b).iter().all(|n| !n.ends_with(".tmp")));
}

#[test]
fn a_second_transfer_moves_nothing_and_reads_nothing() {
    let f = fixture();
    let remote = MemoryRemote::default();
    upload(&f.pool, &remote, &f.named, &NoProgress).unwrap();
    let puts = remote.puts();
    // A chunk gone locally is not noticed: a list on the remote implies its
    // chunks, so they are not looked at, let alone read.
    std::fs::remove_file(f.pool.path_of(&f.chunks[2].hash)).unwrap();
    let again = upload(&f.pool, &remote, &f.named, &NoProgress).unwrap();
    assert_eq!(
        again,
        TransferReport {
            objects: 0,
            bytes: 0,
            present: f.named.len() as u64
        }
    );
    assert_eq!(remote.puts(), puts);

    let (b, lock) = second_pool(&f);
    fetch_missing(&b, &lock, &remote, &f.named, &NoProgress).unwrap();
    let gets = remote.gets();
    let again = fetch_missing(&b, &lock, &remote, &f.named, &NoProgress).unwrap();
    assert_eq!(again.objects, 0);
    assert_eq!(again.present, f.named.len() as u64);
    assert_eq!(remote.gets(), gets);
}

#[test]
fn uploads_never_overwrite_and_what_is_there_is_checked_on_fetch() {
    let f = fixture();
    let remote = MemoryRemote::default();
    let x = f.named[0];
    assert_eq!(
        remote.put_create(&x, b"not an object").unwrap(),
        PutOutcome::Created
    );
    let up = upload(&f.pool, &remote, &[x], &NoProgress).unwrap();
    assert_eq!((up.objects, up.present), (0, 1));
    assert_eq!(remote.bytes(&x).unwrap(), b"not an object");
    let (b, lock) = second_pool(&f);
    let err = fetch_missing(&b, &lock, &remote, &[x], &NoProgress).unwrap_err();
    assert!(
        matches!(&err, ObjectError::FetchedCorrupt { hash, origin, .. } if *hash == x && origin == "memory://test"),
        "{err}"
    );
    assert!(err.is_integrity());
    assert!(!b.contains(&x));
}

/// A way to damage stored bytes: what it is, what it does, and whether the
/// error is "newer" rather than "corrupt".
type Damage = (&'static str, Box<dyn Fn(&mut Vec<u8>)>, bool);

/// Ways the stored bytes of a blob can be wrong.
fn damages(other: Vec<u8>) -> Vec<Damage> {
    vec![
        (
            "a body byte flipped",
            Box::new(|b: &mut Vec<u8>| {
                let at = b.len() - 2;
                b[at] ^= 0x40;
            }),
            false,
        ),
        (
            "truncated",
            Box::new(|b: &mut Vec<u8>| b.truncate(b.len() - 1)),
            false,
        ),
        (
            "no header",
            Box::new(|b: &mut Vec<u8>| {
                b.drain(..HEADER_LEN);
            }),
            false,
        ),
        ("empty", Box::new(|b: &mut Vec<u8>| b.clear()), false),
        (
            "bytes after the frame",
            Box::new(|b: &mut Vec<u8>| b.extend_from_slice(b"tail")),
            false,
        ),
        (
            "the header's length changed",
            Box::new(|b: &mut Vec<u8>| b[8] ^= 1),
            false,
        ),
        (
            "the header says chunk list",
            Box::new(|b: &mut Vec<u8>| b[5] = 2),
            false,
        ),
        (
            "another object's bytes",
            Box::new(move |b: &mut Vec<u8>| b.clone_from(&other)),
            false,
        ),
        (
            "a newer header version",
            Box::new(|b: &mut Vec<u8>| b[4] = 9),
            true,
        ),
    ]
}

#[test]
fn a_damaged_remote_object_is_refused_and_nothing_is_imported() {
    let f = fixture();
    let x = f.named[1];
    let other = f.pool.stored_bytes(&f.named[2]).unwrap();
    for (what, damage, newer) in damages(other) {
        let remote = MemoryRemote::default();
        upload(&f.pool, &remote, &f.named, &NoProgress).unwrap();
        remote.damage(&x, damage);
        let dir = tempfile::tempdir().unwrap();
        let (b, lock) = empty_pool(dir.path());
        let err = fetch_missing(&b, &lock, &remote, &f.named, &NoProgress).unwrap_err();
        match &err {
            ObjectError::FetchedCorrupt { hash, .. } if !newer => assert_eq!(*hash, x, "{what}"),
            ObjectError::FetchedNewer { hash, version, .. } if newer => {
                assert_eq!((*hash, *version), (x, 9), "{what}")
            }
            other => panic!("{what}: {other}"),
        }
        assert!(err.to_string().contains("memory://test"), "{what}: {err}");
        assert!(pool_files(&b).is_empty(), "{what}: {:?}", pool_files(&b));
    }
}

#[test]
fn a_damaged_chunk_is_refused_and_nothing_of_its_file_is_imported() {
    let f = fixture();
    let remote = MemoryRemote::default();
    upload(&f.pool, &remote, &f.named, &NoProgress).unwrap();
    let bad = f.chunks[3].hash;
    remote.damage(&bad, |b| {
        let at = b.len() / 2;
        b[at] ^= 1;
    });
    let (b, lock) = second_pool(&f);
    let err = fetch_missing(&b, &lock, &remote, &[f.big], &NoProgress).unwrap_err();
    assert!(
        matches!(err, ObjectError::FetchedCorrupt { hash, .. } if hash == bad),
        "{err}"
    );
    assert!(pool_files(&b).is_empty(), "{:?}", pool_files(&b));

    // A chunk whose bytes are another chunk's: a sound blob, wrong name.
    remote.damage(&bad, |b| {
        *b = f.pool.stored_bytes(&f.chunks[0].hash).unwrap();
    });
    let err = fetch_missing(&b, &lock, &remote, &[f.big], &NoProgress).unwrap_err();
    assert!(
        matches!(err, ObjectError::FetchedCorrupt { hash, .. } if hash == bad),
        "{err}"
    );
    assert!(pool_files(&b).is_empty());
}

/// The stored bytes of a chunk list naming `chunks` for content of
/// `plain_len` bytes.
fn list_bytes(chunks: &[ChunkRef], plain_len: u64) -> Vec<u8> {
    let body = crate::chunk::encode_list(chunks);
    let mut out = Header {
        kind: ObjectKind::ChunkList,
        plain_len,
    }
    .encode()
    .to_vec();
    out.extend(zstd::bulk::compress(&body, 1).unwrap());
    out
}

#[test]
fn a_list_whose_chunks_do_not_make_its_content_is_refused() {
    let f = fixture();
    let remote = MemoryRemote::default();
    upload(&f.pool, &remote, &f.named, &NoProgress).unwrap();
    let size: u64 = f.chunks.iter().map(|c| c.size).sum();
    // Sound chunks, lengths that add up, the wrong order.
    let mut swapped = f.chunks.clone();
    swapped.swap(0, 1);
    // A list whose "chunk" is a chunk list (itself).
    let mut selfish = f.chunks.clone();
    selfish[1] = ChunkRef {
        hash: f.big,
        size: selfish[1].size,
    };
    for (what, bytes) in [
        ("swapped", list_bytes(&swapped, size)),
        ("names itself", list_bytes(&selfish, size)),
        ("short", list_bytes(&f.chunks[1..], size)),
    ] {
        remote.damage(&f.big, |b| *b = bytes);
        let dir = tempfile::tempdir().unwrap();
        let (b, lock) = empty_pool(dir.path());
        let err = fetch_missing(&b, &lock, &remote, &[f.big], &NoProgress).unwrap_err();
        assert!(
            matches!(err, ObjectError::FetchedCorrupt { hash, .. } if hash == f.big),
            "{what}: {err}"
        );
        assert!(!b.contains(&f.big), "{what}");
    }
}

#[test]
fn a_failed_chunk_upload_leaves_its_list_unsent_and_a_retry_completes() {
    let f = fixture();
    let remote = MemoryRemote::default();
    let failing = f.chunks[1].hash;
    *remote.fail_put.lock().unwrap() = Some(failing);
    let err = upload(&f.pool, &remote, &f.named, &NoProgress).unwrap_err();
    assert!(
        matches!(&err, ObjectError::Remote { hash, action: "uploading", .. } if *hash == failing),
        "{err}"
    );
    assert!(err.to_string().contains("refuses this put"), "{err}");
    assert!(remote.bytes(&f.big).is_none());
    *remote.fail_put.lock().unwrap() = None;
    let sent_before = remote.created.lock().unwrap().len();
    let up = upload(&f.pool, &remote, &f.named, &NoProgress).unwrap();
    assert_eq!(
        up.objects as usize + sent_before,
        f.named.len() + f.chunks.len()
    );
    let (b, lock) = second_pool(&f);
    fetch_missing(&b, &lock, &remote, &f.named, &NoProgress).unwrap();
    b.verify(&f.big).unwrap();
}

#[test]
fn an_object_the_remote_lacks_is_named() {
    let f = fixture();
    let remote = MemoryRemote::default();
    upload(&f.pool, &remote, &f.named, &NoProgress).unwrap();
    let gone = f.chunks[0].hash;
    remote.remove(&gone);
    let (b, lock) = second_pool(&f);
    let err = fetch_missing(&b, &lock, &remote, &f.named, &NoProgress).unwrap_err();
    assert!(
        matches!(&err, ObjectError::RemoteMissing { hash, remote } if *hash == gone && remote == "memory://test"),
        "{err}"
    );
    assert!(err.is_integrity());
    assert!(pool_files(&b).is_empty());
}

#[test]
fn a_damaged_local_object_is_not_uploaded() {
    let f = fixture();
    let x = f.named[0];
    let path = f.pool.path_of(&x);
    let mut bytes = std::fs::read(&path).unwrap();
    let at = bytes.len() - 2;
    bytes[at] ^= 0x10;
    std::fs::write(&path, bytes).unwrap();
    let remote = MemoryRemote::default();
    let err = upload(&f.pool, &remote, &[x], &NoProgress).unwrap_err();
    assert!(
        matches!(&err, ObjectError::Corrupt { hash, .. } if *hash == x),
        "{err}"
    );
    assert!(remote.bytes(&x).is_none());
    // A missing one is named too.
    std::fs::remove_file(&path).unwrap();
    let err = upload(&f.pool, &remote, &[x], &NoProgress).unwrap_err();
    assert!(matches!(err, ObjectError::Missing { hash } if hash == x));
}

#[test]
fn import_stored_takes_a_list_only_once_its_chunks_are_in_the_pool() {
    let f = fixture();
    let (b, lock) = second_pool(&f);
    let list = f.pool.stored_bytes(&f.big).unwrap();
    let err = b.import_stored(&lock, &f.big, &list, "pool a").unwrap_err();
    assert!(matches!(err, ObjectError::Missing { .. }), "{err}");
    assert!(!b.contains(&f.big));
    for c in &f.chunks {
        let put = b
            .import_stored(
                &lock,
                &c.hash,
                &f.pool.stored_bytes(&c.hash).unwrap(),
                "pool a",
            )
            .unwrap();
        assert!(put.new);
    }
    let put = b.import_stored(&lock, &f.big, &list, "pool a").unwrap();
    assert!(put.new);
    assert_eq!(put.size, f.pool.info(&f.big).unwrap().size);
    assert_eq!(b.verify(&f.big).unwrap().kind, ObjectKind::ChunkList);
    // Again: checked, then a no-op.
    assert!(!b.import_stored(&lock, &f.big, &list, "pool a").unwrap().new);
}

#[test]
fn stored_bytes_does_not_follow_a_symlink() {
    let f = fixture();
    let x = f.named[0];
    let path = f.pool.path_of(&x);
    let elsewhere = f._dir.path().join("elsewhere");
    std::fs::rename(&path, &elsewhere).unwrap();
    std::os::unix::fs::symlink(&elsewhere, &path).unwrap();
    assert!(matches!(
        f.pool.stored_bytes(&x),
        Err(ObjectError::NotPlain {
            what: "a symbolic link",
            ..
        })
    ));
    std::fs::remove_file(&path).unwrap();
    assert!(matches!(
        f.pool.stored_bytes(&x),
        Err(ObjectError::Missing { .. })
    ));
    // Nor a linked fan-out directory: the object there is not the pool's.
    std::fs::rename(&elsewhere, &path).unwrap();
    let fan = path.parent().unwrap();
    let moved = f._dir.path().join("moved-fan");
    std::fs::rename(fan, &moved).unwrap();
    std::os::unix::fs::symlink(&moved, fan).unwrap();
    match f.pool.stored_bytes(&x) {
        Err(ObjectError::NotPlain { path, .. }) => assert_eq!(path, fan),
        other => panic!("{other:?}"),
    }
    assert!(!f.pool.contains(&x));
    assert!(matches!(f.pool.get(&x), Err(ObjectError::NotPlain { .. })));
}
