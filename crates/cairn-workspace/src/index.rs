//! `<run>/workspace/index.json`: the stat cache, the label map, the head.
//!
//! The index is a cache plus pointers. Its stat cache always describes the
//! head snapshot's entries (same paths, hashes, sizes and modes), so a
//! capture can tell "same tree as the head" without reading the head's
//! manifest, and every hash it holds is named by a manifest prune can see.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use cairn_objects::ObjectHash;
use serde::{Deserialize, Serialize};

use crate::manifest::{Manifest, Skipped, SnapshotId};
use crate::{Label, WorkspaceError};

/// The index format this build writes.
pub(crate) const INDEX_VERSION: u32 = 1;

/// What a stat tells about a regular file; compared to trust a cache entry.
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
    pub(crate) fn of(m: &std::fs::Metadata) -> Stat {
        Stat {
            size: m.size(),
            mtime_ns: m.mtime() * 1_000_000_000 + m.mtime_nsec(),
            ctime_ns: m.ctime() * 1_000_000_000 + m.ctime_nsec(),
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

/// The whole index file.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct Index {
    pub(crate) version: u32,
    /// The newest capture; the parent of the next.
    pub(crate) head: Option<SnapshotId>,
    /// Start of the capture that wrote this index, ns on the store's clock.
    pub(crate) started_ns: Option<i64>,
    /// The boundary that started a node that has not recorded its end
    /// (`pre:` or `resume:`), if any.
    #[serde(default)]
    pub(crate) open: Option<Label>,
    /// Label → snapshot. A label may be re-pointed (a second pause at the
    /// same node and iteration); a snapshot's own label never moves.
    pub(crate) labels: BTreeMap<Label, SnapshotId>,
    /// The head's coverage gaps.
    #[serde(default)]
    pub(crate) head_skipped: Vec<Skipped>,
    /// The stat cache: path → stat and hash, describing the head's entries.
    pub(crate) files: BTreeMap<String, CacheEntry>,
}

impl Index {
    /// Reads the index; a missing one is rebuilt from the manifests (labels
    /// other than each snapshot's own are then lost, and nothing is trusted).
    pub(crate) fn load(path: &Path, snapshots: &Path) -> Result<Index, WorkspaceError> {
        match std::fs::read(path) {
            Ok(bytes) => {
                let idx: Index =
                    serde_json::from_slice(&bytes).map_err(|e| WorkspaceError::IndexDamaged {
                        path: path.to_owned(),
                        reason: e.to_string(),
                    })?;
                if idx.version > INDEX_VERSION {
                    return Err(WorkspaceError::IndexDamaged {
                        path: path.to_owned(),
                        reason: format!(
                            "format version {} is newer than this cairn's",
                            idx.version
                        ),
                    });
                }
                Ok(idx)
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Self::rebuild(snapshots),
            Err(e) => Err(WorkspaceError::io("reading", path, e)),
        }
    }

    fn rebuild(snapshots: &Path) -> Result<Index, WorkspaceError> {
        let mut idx = Index {
            version: INDEX_VERSION,
            ..Index::default()
        };
        let summaries = crate::history::summaries(snapshots)?;
        for s in &summaries {
            idx.labels.insert(s.label.clone(), s.id.clone());
        }
        if let Some(newest) = summaries.last() {
            let m = Manifest::load(&snapshots.join(format!("{}.json", newest.id)), &newest.id)?;
            idx.head = Some(m.id.clone());
            idx.head_skipped = m.skipped.clone();
            for (p, e) in &m.entries {
                let stat = Stat {
                    size: e.size,
                    mode: e.mode,
                    ..Stat::default()
                };
                idx.files.insert(p.clone(), CacheEntry::new(&stat, e.hash));
            }
        }
        Ok(idx)
    }

    pub(crate) fn save(&self, path: &Path) -> Result<(), WorkspaceError> {
        let bytes = serde_json::to_vec(self).map_err(WorkspaceError::Encode)?;
        cairn_store::durable::write_atomic(path, &bytes)?;
        Ok(())
    }

    /// Points `label` at `snapshot` and keeps the open-node state: `pre:` and
    /// `resume:` open a node, `post:`/`fail:`/`pause:` of it close it.
    pub(crate) fn set_label(&mut self, label: &Label, snapshot: &SnapshotId) {
        self.labels.insert(label.clone(), snapshot.clone());
        match label {
            Label::Pre(_) | Label::Resume(_) => self.open = Some(label.clone()),
            Label::Post(n) | Label::Fail(n) | Label::Pause(n)
                if self.open.as_ref().and_then(Label::node_iter) == Some(n) =>
            {
                self.open = None;
            }
            _ => {}
        }
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

    #[test]
    fn open_node_follows_boundaries() {
        let mut idx = Index::default();
        let id = SnapshotId::parse("A").unwrap();
        let l = |s: &str| Label::parse(s).unwrap();
        idx.set_label(&l("pre:exec:1"), &id);
        assert_eq!(idx.open, Some(l("pre:exec:1")));
        idx.set_label(&l("post:other:1"), &id);
        assert!(idx.open.is_some());
        idx.set_label(&l("pause:exec:1"), &id);
        assert_eq!(idx.open, None);
        idx.set_label(&l("resume:exec:1"), &id);
        assert_eq!(idx.open, Some(l("resume:exec:1")));
        idx.set_label(&l("post:exec:1"), &id);
        assert_eq!(idx.open, None);
    }
}
