//! Object files, chunk lists among them, read through the object pool.
//!
//! Input: one flags byte, then either (bit 0 clear) the object file's bytes,
//! or (bit 0 set) the header's version, kind, codec and reserved bytes, its
//! plain length (u64, little-endian) and the plain payload, which the target
//! compresses into the file itself (so the fuzzer need not write zstd).
//! With bits 0 and 1 set the plain length is replaced by the one the payload
//! implies (its length for a blob, its entries' sizes added up for a list).
//!
//! The file is stored under the name its content would have, when that can
//! be told: a blob's decompressed bytes, or a list's chunks when every one is
//! among the blobs the scratch pool holds (a few short ones, and the chunks
//! of a real chunked file); else under the hash of the file itself.
//!
//! Properties:
//! 1. what `get` returns hashes to the object's name and is as long as the
//!    header says; `verify` and `check` succeed exactly when `get` does, with
//!    the same size;
//! 2. a chunk list that reads lists chunks of at least one byte adding up to
//!    the header's length, and `check` names each distinct chunk;
//! 3. a well-formed object (a blob the target compressed, or a list whose
//!    chunks are all present and reassemble to its name) reads back;
//! 4. the same bytes arriving from a remote (`ObjectPool::import_stored`,
//!    into the same pool without the file) are accepted only when the pool
//!    can read them, and then stored unchanged: bytes from elsewhere that a
//!    read would refuse never become visible. Import is stricter than a
//!    read in one way, on purpose: a read takes the first zstd frame and
//!    ignores bytes after it, an import refuses them. Readable bytes without
//!    such a tail are always accepted.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io::Read;

use cairn_objects::{ChunkConfig, ObjectHash, ObjectKind, ObjectPool, StoreLock};

use crate::scratch::Scratch;

/// How much of a blob the target decompresses to name it.
const GUESS_MAX: u64 = 1 << 20;

struct Pool {
    /// Holds the pool's directory.
    _scratch: Scratch,
    pool: ObjectPool,
    /// Held shared, as a fetch holds it, for the imports.
    lock: StoreLock,
    /// Every blob the pool held before fuzzing, by name: never overwritten.
    known: HashMap<ObjectHash, Vec<u8>>,
}

thread_local! {
    static POOL: RefCell<Option<Pool>> = const { RefCell::new(None) };
}

/// The blobs the [`chunks`] target's scratch pool holds besides a chunked
/// file's chunks; the corpus's lists name them.
pub const SMALL_BLOBS: [&[u8]; 3] = [b"chunk one\n", b"chunk two\n", b"x"];

/// The content of the chunked file the [`chunks`] target's scratch pool
/// holds (320 KiB, the same every time); the corpus's lists name its chunks.
pub fn chunked_content() -> Vec<u8> {
    let mut state = 0x2545_F491_4F6C_DD1Du64;
    (0..320 << 10)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect()
}

impl Pool {
    fn new() -> Pool {
        let scratch = Scratch::new();
        let fail = |what: &str, e: &dyn std::fmt::Display| -> ! { panic!("{what}: {e}") };
        let pool = ObjectPool::open(&scratch.store)
            .unwrap_or_else(|e| fail("opening the pool", &e))
            .with_chunking(ChunkConfig::default().threshold(0));
        let lock = StoreLock::shared(&scratch.store).unwrap_or_else(|e| fail("locking", &e));
        let mut known = HashMap::new();
        for b in SMALL_BLOBS {
            let put = pool
                .put_bytes(&lock, b)
                .unwrap_or_else(|e| fail("putting", &e));
            known.insert(put.hash, b.to_vec());
        }
        let big = chunked_content();
        let path = scratch.file("chunked.bin");
        std::fs::write(&path, &big).unwrap_or_else(|e| fail("writing", &e));
        let put = pool
            .put_file(&lock, &path)
            .unwrap_or_else(|e| fail("putting", &e));
        let list = match pool.chunk_list(&put.hash) {
            Ok(Some(list)) => list,
            other => panic!("the chunked file is not a chunk list: {other:?}"),
        };
        let mut at = 0usize;
        for c in list {
            let end = at + c.size as usize;
            known.insert(c.hash, big[at..end].to_vec());
            at = end;
        }
        // The list itself is not kept from being overwritten: a fuzzed list
        // of the same content is stored under its name.
        drop(big);
        Pool {
            _scratch: scratch,
            pool,
            lock,
            known,
        }
    }
}

/// Checks the object properties (see the module doc) on `data`.
pub fn chunks(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let (file, built) = if flags & 1 == 0 {
        (rest.to_vec(), None)
    } else {
        match build(rest, flags & 2 == 2) {
            Some((file, payload)) => (file, Some(payload)),
            None => return,
        }
    };
    POOL.with(|cell| {
        let mut cell = cell.borrow_mut();
        let p = cell.get_or_insert_with(Pool::new);
        check(p, &file, built.as_deref());
    });
}

/// The file of a structured input, and its payload.
fn build(rest: &[u8], fix_len: bool) -> Option<(Vec<u8>, Vec<u8>)> {
    let (head, payload) = (rest.get(..12)?, &rest[12..]);
    let mut plain_len = u64::from_le_bytes(head[4..12].try_into().ok()?);
    if fix_len {
        plain_len = match head[1] {
            2 => payload
                .chunks(36)
                .filter_map(|e| e.get(32..36))
                .map(|l| u64::from(u32::from_le_bytes([l[0], l[1], l[2], l[3]])))
                .sum(),
            _ => payload.len() as u64,
        };
    }
    let mut file = b"CRNO".to_vec();
    file.extend_from_slice(&head[..4]);
    file.extend_from_slice(&plain_len.to_le_bytes());
    match zstd::bulk::compress(payload, 1) {
        Ok(z) => file.extend_from_slice(&z),
        Err(e) => panic!("compressing a payload: {e}"),
    }
    Some((file, payload.to_vec()))
}

/// The header fields the target reads itself: kind code and plain length,
/// when the file has a header this build would accept.
fn header(file: &[u8]) -> Option<(u8, u64)> {
    let h = file.get(..16)?;
    if &h[..4] != b"CRNO" || h[4] != 1 || !matches!(h[5], 1 | 2) || h[6] != 1 {
        return None;
    }
    Some((h[5], u64::from_le_bytes(h[8..16].try_into().ok()?)))
}

/// The decompressed bytes after the header, at most [`GUESS_MAX`].
fn decompressed(file: &[u8]) -> Option<Vec<u8>> {
    let dec = zstd::stream::read::Decoder::new(file.get(16..)?).ok()?;
    let mut out = Vec::new();
    dec.single_frame()
        .take(GUESS_MAX + 1)
        .read_to_end(&mut out)
        .ok()?;
    (out.len() as u64 <= GUESS_MAX).then_some(out)
}

/// The content a list names, when every chunk is known with its size.
fn reassembled(p: &Pool, list: &[u8]) -> Option<Vec<u8>> {
    if list.is_empty() || !list.len().is_multiple_of(36) {
        return None;
    }
    let mut out = Vec::new();
    for e in list.chunks(36) {
        let hash = ObjectHash::from_bytes(e[..32].try_into().ok()?);
        let size = u32::from_le_bytes(e[32..36].try_into().ok()?);
        let chunk = p.known.get(&hash)?;
        if chunk.len() as u64 != u64::from(size) {
            return None;
        }
        out.extend_from_slice(chunk);
    }
    Some(out)
}

fn check(p: &Pool, file: &[u8], built: Option<&[u8]>) {
    let header = header(file);
    let plain = decompressed(file);
    let content = match (header, &plain) {
        (Some((1, _)), Some(plain)) => Some(plain.clone()),
        (Some((2, _)), Some(list)) => reassembled(p, list),
        _ => None,
    };
    let hash = ObjectHash::of(content.as_deref().unwrap_or(file));
    if p.known.contains_key(&hash) {
        return;
    }
    let path = p.pool.path_of(&hash);
    let written = path
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|()| std::fs::write(&path, file));
    if let Err(e) = written {
        panic!("writing {}: {e}", path.display());
    }

    let got = p.pool.get(&hash);
    let verified = p.pool.verify(&hash);
    let checked = p.pool.check(&hash);
    let info = p.pool.info(&hash);
    let list = p.pool.chunk_list(&hash);
    let _ = std::fs::remove_file(&path);

    // 4.
    let imported = p.pool.import_stored(&p.lock, &hash, file, "fuzz");
    let stored = p.pool.stored_bytes(&hash);
    let _ = std::fs::remove_file(&path);
    if imported.is_ok() {
        assert!(
            got.is_ok(),
            "an import accepted what a read refuses: {got:?}"
        );
    } else if got.is_ok() {
        let body = file.get(16..).unwrap_or_default();
        let one_frame = zstd::zstd_safe::find_frame_compressed_size(body) == Ok(body.len());
        assert!(
            !one_frame,
            "an import refused a readable object: {imported:?}"
        );
    }
    if imported.is_ok() {
        match &stored {
            Ok(bytes) => assert_eq!(bytes, file, "an import stored other bytes"),
            Err(e) => panic!("an import succeeded and left nothing: {e}"),
        }
    } else {
        assert!(stored.is_err(), "a refused import left the object visible");
    }

    // 1.
    let check_ok = checked.as_ref().is_ok_and(|c| c.ok());
    assert_eq!(got.is_ok(), check_ok, "get: {got:?}, check: {checked:?}");
    assert_eq!(
        got.is_ok(),
        verified.is_ok(),
        "get: {got:?}, verify: {verified:?}"
    );
    if let Ok(bytes) = &got {
        assert_eq!(
            ObjectHash::of(bytes),
            hash,
            "get returned bytes of another name"
        );
        let Ok(info) = &info else {
            panic!("get succeeds, info fails: {info:?}");
        };
        assert_eq!(info.size, bytes.len() as u64, "the header's length");
        if let (Ok(v), Ok(c)) = (&verified, &checked) {
            assert_eq!(v.size, info.size, "verify's size");
            assert_eq!(c.size, info.size, "check's size");
        }
    }
    // 2.
    if let Ok(Some(list)) = &list {
        let Ok(info) = &info else {
            panic!("a chunk list reads, its header does not: {info:?}");
        };
        assert_eq!(info.kind, ObjectKind::ChunkList);
        assert!(list.iter().all(|c| c.size > 0), "an empty chunk was listed");
        let total: u64 = list.iter().map(|c| c.size).sum();
        assert_eq!(
            total, info.size,
            "the chunks do not add up to the header's length"
        );
        if let Ok(c) = &checked {
            let mut distinct = Vec::new();
            for h in list.iter().map(|c| c.hash) {
                if !distinct.contains(&h) {
                    distinct.push(h);
                }
            }
            assert_eq!(c.chunks, distinct, "check names other chunks");
        }
        // 3, for lists.
        if list.iter().all(|c| {
            p.known
                .get(&c.hash)
                .is_some_and(|b| b.len() as u64 == c.size)
        }) && content.is_some()
        {
            assert!(
                got.is_ok(),
                "a list of present chunks does not read: {got:?}"
            );
        }
    }
    // 3, for blobs the target compressed.
    if let (Some(payload), Some((1, len))) = (built, header) {
        if len == payload.len() as u64 {
            match &got {
                Ok(bytes) => assert_eq!(bytes, payload, "a blob read back differently"),
                Err(e) => panic!("a well-formed blob does not read: {e}"),
            }
        }
    }
}
