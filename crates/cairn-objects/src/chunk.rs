//! Content-defined chunking (FastCDC 2020) and the chunk-list encoding.
//!
//! A file larger than [`ChunkConfig::threshold`] is cut where its content
//! says (a rolling gear hash), not at fixed offsets, so an edit moves only
//! the boundaries next to it: a 4 KiB write into a 256 MiB disk image
//! changes one or two chunks, and only those are stored again.
//!
//! The sizes, and why:
//! - **average 64 KiB**: what a small edit costs. restic (1 MiB) and borg
//!   (2 MiB) pick larger averages because they pack chunks into large files
//!   and index each one; cairn stores one file per object, so a chunk costs
//!   an inode and a 36-byte list entry — 16 per MiB, 160,000 for a 10 GiB
//!   image, which a local file system handles well — and in exchange a
//!   page-sized write costs ~64 KiB instead of ~1–2 MiB.
//! - **minimum 16 KiB** (a quarter of the average): FastCDC skips the
//!   first `min` bytes of every chunk without hashing them, which is most of
//!   its speed; a quarter keeps that gain while letting boundaries
//!   resynchronise within one chunk after an insertion.
//! - **maximum 256 KiB** (four times the average): bounds the memory of a
//!   chunk (each is compressed and verified whole) and the cost of a chunk
//!   in content with no cut points (runs of zeros in an image all become
//!   identical 256 KiB chunks, stored once).
//! - normalisation level 1 (the crate's default): most chunks fall near the
//!   average.
//!
//! These are constants, not settings: chunks dedupe only against chunks cut
//! the same way, so changing them would make every file new again. Only the
//! threshold (which files are chunked at all) is configurable.
//!
//! A second, smaller class ([`Chunker::body`]: 1/4/16 KiB) cuts model
//! request and response bodies ([`crate::ObjectBatch::put_body`]): a
//! conversation is re-sent whole with every turn and grows by a few KiB, so
//! what a turn costs is what it appended plus about one 4 KiB chunk, not a
//! 64 KiB one. Its chunks dedupe only with other bodies, which is the point.

use std::ops::Range;

use fastcdc::v2020;

use crate::format::LIST_ENTRY_LEN;
use crate::ObjectHash;

/// The smallest chunk the chunker cuts (except a file's last one).
pub const MIN_CHUNK: usize = 16 << 10;
/// The average chunk size the chunker aims at.
pub const AVG_CHUNK: usize = 64 << 10;
/// The largest chunk the chunker cuts.
pub const MAX_CHUNK: usize = 256 << 10;

/// Which files the pool stores as chunks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct ChunkConfig {
    /// Files strictly larger than this many bytes, stored with
    /// [`crate::ObjectPool::put_file`] or [`crate::ObjectBatch::put_open_file`],
    /// are stored as content-defined chunks plus a chunk list; smaller files
    /// (and every [`crate::ObjectPool::put_bytes`]) as one blob.
    /// Default: 1 MiB. Never below [`MAX_CHUNK`], so a chunked file is
    /// always longer than any chunk (a chunk list never names itself).
    pub threshold: u64,
}

impl ChunkConfig {
    /// The default threshold, 1 MiB.
    pub const DEFAULT_THRESHOLD: u64 = 1 << 20;

    /// Sets [`ChunkConfig::threshold`], raised to [`MAX_CHUNK`] when lower;
    /// `u64::MAX` turns chunking off.
    pub fn threshold(mut self, bytes: u64) -> Self {
        self.threshold = bytes.max(MAX_CHUNK as u64);
        self
    }

    /// True when a file of `len` bytes is stored as chunks.
    pub fn chunks(&self, len: u64) -> bool {
        len > self.threshold
    }
}

impl Default for ChunkConfig {
    fn default() -> Self {
        ChunkConfig {
            threshold: Self::DEFAULT_THRESHOLD,
        }
    }
}

/// One entry of a chunk list: a chunk's name and its plain length.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
pub struct ChunkRef {
    /// The chunk's object (always a blob).
    pub hash: ObjectHash,
    /// Its plain length in bytes.
    pub size: u64,
}

/// The smallest, average and largest chunk of the body class.
pub const BODY_MIN_CHUNK: usize = 1 << 10;
/// The average chunk of the body class.
pub const BODY_AVG_CHUNK: usize = 4 << 10;
/// The largest chunk of the body class.
pub const BODY_MAX_CHUNK: usize = 16 << 10;

/// FastCDC 2020 with one of cairn's two fixed size classes (see the module
/// notes).
#[derive(Clone, Copy, Debug)]
pub struct Chunker {
    mask_s: u64,
    mask_l: u64,
    min: usize,
    avg: usize,
    max: usize,
}

impl Default for Chunker {
    fn default() -> Self {
        Self::new()
    }
}

impl Chunker {
    /// The chunker every pool uses for files (16/64/256 KiB).
    pub fn new() -> Self {
        Self::sized(MIN_CHUNK, AVG_CHUNK, MAX_CHUNK)
    }

    /// The chunker for model bodies (1/4/16 KiB).
    pub fn body() -> Self {
        Self::sized(BODY_MIN_CHUNK, BODY_AVG_CHUNK, BODY_MAX_CHUNK)
    }

    fn sized(min: usize, avg: usize, max: usize) -> Self {
        let bits = v2020::logarithm2(avg as u32);
        let norm = v2020::Normalization::Level1.bits();
        Chunker {
            mask_s: v2020::MASKS[(bits + norm) as usize],
            mask_l: v2020::MASKS[(bits - norm) as usize],
            min,
            avg,
            max,
        }
    }

    /// The largest chunk this chunker cuts.
    pub fn max_chunk(&self) -> usize {
        self.max
    }

    /// The length of the chunk that starts at `data[0]`. `data` must hold at
    /// least [`Chunker::max_chunk`] bytes unless it is the rest of the input.
    pub fn cut(&self, data: &[u8]) -> usize {
        let (_, len) = v2020::cut(
            data,
            self.min,
            self.avg,
            self.max,
            self.mask_s,
            self.mask_l,
            self.mask_s << 1,
            self.mask_l << 1,
        );
        len.max(1).min(data.len())
    }

    /// The chunks of a whole input, as byte ranges in order.
    pub fn chunks<'a>(&self, data: &'a [u8]) -> impl Iterator<Item = Range<usize>> + 'a {
        let me = *self;
        let mut pos = 0;
        std::iter::from_fn(move || {
            if pos >= data.len() {
                return None;
            }
            let end = pos + me.cut(&data[pos..]);
            let r = pos..end;
            pos = end;
            Some(r)
        })
    }
}

/// Encodes a chunk list's plain bytes.
pub(crate) fn encode_list(chunks: &[ChunkRef]) -> Vec<u8> {
    let mut out = Vec::with_capacity(chunks.len() * LIST_ENTRY_LEN);
    for c in chunks {
        out.extend_from_slice(c.hash.as_bytes());
        // A chunk is at most MAX_CHUNK bytes (either class); the cast
        // cannot truncate.
        out.extend_from_slice(&(c.size as u32).to_le_bytes());
    }
    out
}

/// Decodes a chunk list, checking its shape against the header's length.
pub(crate) fn decode_list(bytes: &[u8], plain_len: u64) -> Result<Vec<ChunkRef>, String> {
    if bytes.is_empty() || !bytes.len().is_multiple_of(LIST_ENTRY_LEN) {
        return Err(format!(
            "its chunk list is {} bytes, not a positive multiple of {LIST_ENTRY_LEN}",
            bytes.len()
        ));
    }
    let mut out = Vec::with_capacity(bytes.len() / LIST_ENTRY_LEN);
    let mut total = 0u64;
    for e in bytes.chunks_exact(LIST_ENTRY_LEN) {
        let mut h = [0u8; 32];
        h.copy_from_slice(&e[..32]);
        let mut l = [0u8; 4];
        l.copy_from_slice(&e[32..]);
        let size = u64::from(u32::from_le_bytes(l));
        if size == 0 {
            return Err("its chunk list holds an empty chunk".into());
        }
        total += size;
        out.push(ChunkRef {
            hash: ObjectHash::from_bytes(h),
            size,
        });
    }
    if total != plain_len {
        return Err(format!(
            "its chunks add up to {total} bytes, its header says {plain_len}"
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn chunks_respect_the_bounds_and_cover_the_input() {
        let data = noise(3 << 20, 7);
        let c = Chunker::new();
        let mut next = 0;
        let mut n = 0;
        for r in c.chunks(&data) {
            assert_eq!(r.start, next);
            assert!(r.len() <= MAX_CHUNK);
            if r.end != data.len() {
                assert!(r.len() >= MIN_CHUNK, "{}", r.len());
            }
            next = r.end;
            n += 1;
        }
        assert_eq!(next, data.len());
        let avg = data.len() / n;
        assert!(avg > AVG_CHUNK / 2 && avg < AVG_CHUNK * 2, "average {avg}");
        // Zeros have no cut points: every chunk is the maximum.
        let zeros = vec![0u8; 1 << 20];
        assert!(c.chunks(&zeros).all(|r| r.len() == MAX_CHUNK));
    }

    #[test]
    fn an_edit_moves_only_nearby_boundaries() {
        let a = noise(4 << 20, 9);
        let mut b = a.clone();
        b.splice(2_000_000..2_000_000, noise(100, 3));
        let c = Chunker::new();
        let ha: std::collections::HashSet<&[u8]> = c.chunks(&a).map(|r| &a[r]).collect();
        let total = c.chunks(&b).count();
        let fresh = c.chunks(&b).filter(|r| !ha.contains(&b[r.clone()])).count();
        assert!(fresh <= 2, "{fresh} of {total} chunks changed");
    }

    #[test]
    fn list_round_trip_and_refusals() {
        let l = vec![
            ChunkRef {
                hash: ObjectHash::of(b"a"),
                size: 5,
            },
            ChunkRef {
                hash: ObjectHash::of(b"b"),
                size: 7,
            },
        ];
        let enc = encode_list(&l);
        assert_eq!(decode_list(&enc, 12).unwrap(), l);
        assert!(decode_list(&enc, 13).is_err());
        assert!(decode_list(&enc[..35], 12).is_err());
        assert!(decode_list(&[], 0).is_err());
    }

    #[test]
    fn the_threshold_never_drops_below_a_chunk() {
        assert_eq!(
            ChunkConfig::default().threshold(10).threshold,
            MAX_CHUNK as u64
        );
        assert!(!ChunkConfig::default().chunks(1 << 20));
        assert!(ChunkConfig::default().chunks((1 << 20) + 1));
    }
}
