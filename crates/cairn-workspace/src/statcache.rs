//! `<run>/workspace/statcache.bin`: the stat cache, and the rule for
//! trusting one of its entries.
//!
//! The stat cache always describes the head snapshot's entries (same paths,
//! hashes, sizes and modes), so a capture can tell "same tree as the head"
//! without reading the head's manifest, and every hash it holds is named by
//! a manifest prune can see.

use std::io::Write;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use cairn_objects::ObjectHash;
use cairn_store::safe::mtime_ns;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use crate::WorkspaceError;

/// The stat cache's file name, next to `index.json`.
pub(crate) const STATCACHE_FILE: &str = "statcache.bin";

/// The stat-cache format this build writes.
pub(crate) const STATCACHE_VERSION: u32 = 1;

const STATCACHE_MAGIC: &[u8; 8] = b"cairnSC\n";

/// What a stat tells about a regular file; compared to trust a cache entry.
/// Times are nanoseconds since the epoch by the one conversion
/// (`cairn_store::safe::mtime_ns`), saturating: a file dated after 2262 reads
/// as `i64::MAX`, which is never before a capture's start, so it is never
/// trusted, only read again.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub(crate) struct Stat {
    pub(crate) size: u64,
    pub(crate) mtime_ns: i64,
    pub(crate) ctime_ns: i64,
    pub(crate) inode: u64,
    /// Full `st_mode`: file type and permission bits.
    pub(crate) mode: u32,
}

impl Stat {
    /// The fields `statx(2)` fills for [`Stat::STATX_MASK`]; the same values
    /// as [`Stat::of`] for the same file.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub(crate) fn of_statx(x: &rustix::fs::Statx) -> Stat {
        Stat {
            size: x.stx_size,
            mtime_ns: mtime_ns(x.stx_mtime.tv_sec, i64::from(x.stx_mtime.tv_nsec)),
            ctime_ns: mtime_ns(x.stx_ctime.tv_sec, i64::from(x.stx_ctime.tv_nsec)),
            inode: x.stx_ino,
            mode: u32::from(x.stx_mode),
        }
    }

    /// What [`Stat::of_statx`] reads.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    pub(crate) const STATX_MASK: rustix::fs::StatxFlags = rustix::fs::StatxFlags::TYPE
        .union(rustix::fs::StatxFlags::MODE)
        .union(rustix::fs::StatxFlags::INO)
        .union(rustix::fs::StatxFlags::SIZE)
        .union(rustix::fs::StatxFlags::MTIME)
        .union(rustix::fs::StatxFlags::CTIME);

    pub(crate) fn of(m: &std::fs::Metadata) -> Stat {
        Stat {
            size: m.size(),
            mtime_ns: mtime_ns(m.mtime(), m.mtime_nsec()),
            ctime_ns: mtime_ns(m.ctime(), m.ctime_nsec()),
            inode: m.ino(),
            mode: m.mode(),
        }
    }
}

/// One stat-cache entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct CacheEntry {
    pub(crate) size: u64,
    pub(crate) mtime_ns: i64,
    pub(crate) ctime_ns: i64,
    pub(crate) inode: u64,
    pub(crate) mode: u32,
    pub(crate) hash: ObjectHash,
}

impl CacheEntry {
    /// The manifest entry this cache entry stands for.
    pub(crate) fn entry(&self) -> crate::manifest::Entry {
        crate::manifest::Entry {
            hash: self.hash,
            size: self.size,
            mode: cairn_store::safe::permission_bits(self.mode),
        }
    }

    pub(crate) fn new(stat: &Stat, hash: ObjectHash) -> Self {
        CacheEntry {
            size: stat.size,
            mtime_ns: stat.mtime_ns,
            ctime_ns: stat.ctime_ns,
            inode: stat.inode,
            mode: stat.mode,
            hash,
        }
    }
}

/// How much to trust the stat cache.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Trust {
    /// Start of the capture that wrote the cache, on the store's clock.
    pub(crate) started_ns: Option<i64>,
    /// The racy window, in nanoseconds.
    pub(crate) slack_ns: i64,
    /// Compare ctime too (turn off where something rewrites ctimes).
    pub(crate) ctime: bool,
}

impl Trust {
    /// Whether `entry` may stand for the file now stat'ed as `now`, without
    /// reading it:
    /// 1. type, permission bits, size, mtime, inode (and ctime) are unchanged;
    /// 2. and the racy guard: mtime (and ctime) are older than the start of the
    ///    capture that wrote the entry minus the slack. A file written in the
    ///    same clock tick as that capture's stat could have changed again
    ///    without its times moving; such an entry is re-hashed.
    pub(crate) fn trusts(&self, entry: &CacheEntry, now: &Stat) -> bool {
        let Some(start) = self.started_ns else {
            return false;
        };
        let limit = start.saturating_sub(self.slack_ns);
        entry.size == now.size
            && entry.mode == now.mode
            && entry.inode == now.inode
            && entry.mtime_ns == now.mtime_ns
            && now.mtime_ns < limit
            && (!self.ctime || (entry.ctime_ns == now.ctime_ns && now.ctime_ns < limit))
    }
}

/// The stat cache: path → stat and hash, describing the head's entries.
///
/// File layout (all integers little-endian):
///
/// ```text
/// magic "cairnSC\n" | version u32 | started_ns i64 (i64::MIN: none) | count u64
/// count × { path_len u32 | path (UTF-8) | size u64 | mtime_ns i64 | ctime_ns i64
///           | inode u64 | mode u32 | hash [32] }
/// SHA-256 of everything before it [32]
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct StatCache {
    /// Start of the capture that wrote this cache, on the store's clock: what
    /// its entries are trusted against.
    pub(crate) started_ns: Option<i64>,
    /// Sorted by path, no duplicates.
    pub(crate) files: Vec<(String, CacheEntry)>,
    /// The checksum of the cache file this was read from or written to, when
    /// the file holds exactly this cache; `None` when it must be written.
    pub(crate) on_disk: Option<ObjectHash>,
}

const ENTRY_FIXED: usize = 8 + 8 + 8 + 8 + 4 + 32;

impl StatCache {
    /// The file's bytes; the last 32 are the checksum.
    #[cfg(test)]
    pub(crate) fn encode(&self) -> Vec<u8> {
        let paths: usize = self.files.iter().map(|(p, _)| p.len()).sum();
        let mut out = Vec::with_capacity(28 + 32 + paths + self.files.len() * (4 + ENTRY_FIXED));
        // Writing to memory fails only on a path over 4 GiB, which no walk
        // produces; such a cache would simply fail to decode.
        let _ = self.encode_to(&mut out);
        out
    }

    /// Streams the file's bytes into `w` and returns the checksum that ends
    /// them (SHA-256 of everything before it).
    pub(crate) fn encode_to(&self, w: &mut dyn Write) -> std::io::Result<ObjectHash> {
        let mut w = Summing {
            inner: w,
            sha: Sha256::new(),
        };
        w.write_all(STATCACHE_MAGIC)?;
        w.write_all(&STATCACHE_VERSION.to_le_bytes())?;
        w.write_all(&self.started_ns.unwrap_or(i64::MIN).to_le_bytes())?;
        w.write_all(&(self.files.len() as u64).to_le_bytes())?;
        let mut rec = Vec::with_capacity(512);
        for (p, e) in &self.files {
            let len = u32::try_from(p.len()).map_err(|_| {
                std::io::Error::new(std::io::ErrorKind::InvalidData, "a path over 4 GiB")
            })?;
            rec.clear();
            rec.extend_from_slice(&len.to_le_bytes());
            rec.extend_from_slice(p.as_bytes());
            rec.extend_from_slice(&e.size.to_le_bytes());
            rec.extend_from_slice(&e.mtime_ns.to_le_bytes());
            rec.extend_from_slice(&e.ctime_ns.to_le_bytes());
            rec.extend_from_slice(&e.inode.to_le_bytes());
            rec.extend_from_slice(&e.mode.to_le_bytes());
            rec.extend_from_slice(e.hash.as_bytes());
            w.write_all(&rec)?;
        }
        let sum: [u8; 32] = w.sha.finalize().into();
        w.inner.write_all(&sum)?;
        Ok(ObjectHash::from_bytes(sum))
    }

    /// Reads a cache file; `None` for anything that is not a whole, intact
    /// cache of a version this build reads (it is then ignored).
    pub(crate) fn decode(bytes: &[u8]) -> Option<StatCache> {
        let body_len = bytes.len().checked_sub(32)?;
        let (body, sum) = bytes.split_at(body_len);
        let sum = ObjectHash::from_bytes(sum.try_into().ok()?);
        if ObjectHash::of(body) != sum {
            return None;
        }
        let mut r = Reader(body);
        if r.take(8)? != STATCACHE_MAGIC || r.u32()? != STATCACHE_VERSION {
            return None;
        }
        let started = r.i64()?;
        let count = usize::try_from(r.u64()?).ok()?;
        // Each entry takes at least 4 + ENTRY_FIXED bytes.
        if count > r.0.len() / (4 + ENTRY_FIXED) {
            return None;
        }
        let mut files: Vec<(String, CacheEntry)> = Vec::with_capacity(count);
        for _ in 0..count {
            let len = usize::try_from(r.u32()?).ok()?;
            let path = std::str::from_utf8(r.take(len)?).ok()?.to_owned();
            if files.last().is_some_and(|(last, _)| *last >= path) {
                return None;
            }
            let entry = CacheEntry {
                size: r.u64()?,
                mtime_ns: r.i64()?,
                ctime_ns: r.i64()?,
                inode: r.u64()?,
                mode: r.u32()?,
                hash: ObjectHash::from_bytes(r.take(32)?.try_into().ok()?),
            };
            files.push((path, entry));
        }
        if !r.0.is_empty() {
            return None;
        }
        Some(StatCache {
            started_ns: (started != i64::MIN).then_some(started),
            files,
            on_disk: Some(sum),
        })
    }

    /// Writes the cache file (temp file, fsync, rename) and records its
    /// checksum.
    pub(crate) fn save(&mut self, path: &Path) -> Result<ObjectHash, WorkspaceError> {
        let sum = self.write(path)?;
        self.on_disk = Some(sum);
        Ok(sum)
    }

    /// Writes the cache file as [`StatCache::save`] does, without recording
    /// it (the caller sets `on_disk`): for writing it while the list is
    /// borrowed elsewhere.
    pub(crate) fn write(&self, path: &Path) -> Result<ObjectHash, WorkspaceError> {
        let mut sum = None;
        cairn_store::durable::write_atomic_with(path, |w| {
            sum = Some(self.encode_to(w)?);
            Ok(())
        })?;
        sum.ok_or_else(|| {
            WorkspaceError::io(
                "writing",
                path,
                std::io::Error::other("the stat cache encoder returned no checksum"),
            )
        })
    }
}

/// Decodes the bytes of a stat-cache file and encodes what they decoded to
/// again, for the fuzz targets of `crates/cairn-fuzz` (not part of the
/// API): `None` when the bytes are not a whole, intact cache of a version
/// this build reads; else the bytes the encoder writes for the decoded
/// cache and the checksum the decoder recorded for the file.
#[doc(hidden)]
pub fn statcache_round_trip(bytes: &[u8]) -> Option<(Vec<u8>, Option<ObjectHash>)> {
    let cache = StatCache::decode(bytes)?;
    let mut out = Vec::with_capacity(bytes.len());
    cache.encode_to(&mut out).ok()?;
    Some((out, cache.on_disk))
}

/// A writer that hashes what passes through it.
struct Summing<'w> {
    inner: &'w mut dyn Write,
    sha: Sha256,
}

impl Write for Summing<'_> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.sha.update(&buf[..n]);
        Ok(n)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// A cursor over the cache file's body.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }
    fn u32(&mut self) -> Option<u32> {
        Some(u32::from_le_bytes(self.take(4)?.try_into().ok()?))
    }
    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
    fn i64(&mut self) -> Option<i64> {
        Some(i64::from_le_bytes(self.take(8)?.try_into().ok()?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;

    fn entry(mtime: i64, ctime: i64) -> CacheEntry {
        CacheEntry {
            size: 10,
            mtime_ns: mtime,
            ctime_ns: ctime,
            inode: 7,
            mode: 0o100644,
            hash: ObjectHash::of(b"x"),
        }
    }

    fn stat(mtime: i64, ctime: i64) -> Stat {
        Stat {
            size: 10,
            mtime_ns: mtime,
            ctime_ns: ctime,
            inode: 7,
            mode: 0o100644,
        }
    }

    #[test]
    fn racy_guard_table() {
        let start = 100 * S;
        let t = Trust {
            started_ns: Some(start),
            slack_ns: 2 * S,
            ctime: true,
        };
        let no_ctime = Trust { ctime: false, ..t };
        let old = 50 * S;
        // (entry, now, trust, expected)
        let rows: Vec<(CacheEntry, Stat, Trust, bool)> = vec![
            (entry(old, old), stat(old, old), t, true),
            // Same second as the capture: racy, re-hash.
            (entry(start, start), stat(start, start), t, false),
            // Within the slack before the start: still racy.
            (entry(start - S, old), stat(start - S, old), t, false),
            (
                entry(start - 2 * S - 1, old),
                stat(start - 2 * S - 1, old),
                t,
                true,
            ),
            // ctime inside the window even though mtime is old (e.g. chmod, or
            // mtime set back by a tool): re-hash.
            (entry(old, start), stat(old, start), t, false),
            (entry(old, start), stat(old, start), no_ctime, true),
            // Any field moved.
            (
                entry(old, old),
                Stat {
                    size: 11,
                    ..stat(old, old)
                },
                t,
                false,
            ),
            (
                entry(old, old),
                Stat {
                    inode: 8,
                    ..stat(old, old)
                },
                t,
                false,
            ),
            (
                entry(old, old),
                Stat {
                    mode: 0o100755,
                    ..stat(old, old)
                },
                t,
                false,
            ),
            (
                entry(old, old),
                Stat {
                    mode: 0o120644,
                    ..stat(old, old)
                },
                t,
                false,
            ),
            (entry(old, old), stat(old + 1, old), t, false),
            (entry(old, old), stat(old, old + 1), t, false),
            (entry(old, old), stat(old, old + 1), no_ctime, true),
            // No start recorded: never trusted.
            (
                entry(old, old),
                stat(old, old),
                Trust {
                    started_ns: None,
                    ..t
                },
                false,
            ),
            // A file time in the future (clock skew): never trusted.
            (entry(start * 2, old), stat(start * 2, old), t, false),
        ];
        for (i, (e, s, trust, want)) in rows.iter().enumerate() {
            assert_eq!(trust.trusts(e, s), *want, "row {i}");
        }
    }

    fn reseal(mut bytes: Vec<u8>) -> Vec<u8> {
        let body = bytes.len() - 32;
        let sum = ObjectHash::of(&bytes[..body]);
        bytes[body..].copy_from_slice(sum.as_bytes());
        bytes
    }

    #[test]
    fn stat_cache_round_trips_and_refuses_damage() {
        let cache = StatCache {
            started_ns: Some(123 * S),
            files: vec![
                ("a".into(), entry(1, 2)),
                ("b/ü.txt".into(), entry(-5, 7)),
                ("c".into(), entry(i64::MAX, i64::MIN + 1)),
            ],
            on_disk: None,
        };
        let bytes = cache.encode();
        let back = StatCache::decode(&bytes).unwrap();
        assert_eq!(back.files, cache.files);
        assert_eq!(back.started_ns, cache.started_ns);
        assert_eq!(
            back.on_disk.unwrap().as_bytes()[..],
            bytes[bytes.len() - 32..]
        );
        let none = StatCache::default().encode();
        assert_eq!(StatCache::decode(&none).unwrap().started_ns, None);

        // Every truncation and every flipped bit is detected.
        for n in 0..bytes.len() {
            assert!(StatCache::decode(&bytes[..n]).is_none(), "cut at {n}");
        }
        for i in 0..bytes.len() {
            let mut b = bytes.clone();
            b[i] ^= 1;
            assert!(StatCache::decode(&b).is_none(), "byte {i}");
        }
        // Intact but not readable: a newer version, a bad magic, unsorted
        // paths, an overlong count, trailing bytes.
        let mut newer = bytes.clone();
        newer[8] = 2;
        assert!(StatCache::decode(&reseal(newer)).is_none());
        let mut magic = bytes.clone();
        magic[0] = b'X';
        assert!(StatCache::decode(&reseal(magic)).is_none());
        let unsorted = StatCache {
            files: vec![("b".into(), entry(1, 1)), ("a".into(), entry(1, 1))],
            ..StatCache::default()
        };
        assert!(StatCache::decode(&unsorted.encode()).is_none());
        let mut count = bytes.clone();
        count[20] = 4;
        assert!(StatCache::decode(&reseal(count)).is_none());
        let mut trailing = bytes[..bytes.len() - 32].to_vec();
        trailing.extend_from_slice(&[0; 33]);
        assert!(StatCache::decode(&reseal(trailing)).is_none());
    }
}
