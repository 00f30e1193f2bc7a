//! `<run>/workspace/index.json`: the label map, the head, the open node.
//!
//! The index is pointers; the stat cache (`statcache.rs`) is a cache. The
//! index names the cache file by its checksum, so a cache file that does not
//! go with the index (a crash between the two writes) is not used.

use std::collections::BTreeMap;
use std::path::Path;

use cairn_objects::ObjectHash;
use serde::{Deserialize, Serialize};

use crate::manifest::{Manifest, Skipped, SnapshotId};
use crate::statcache::{CacheEntry, Stat, StatCache};
use crate::{Label, WorkspaceError};

/// The index format this build writes.
pub(crate) const INDEX_VERSION: u32 = 2;

/// The whole index file (without the stat cache, which lives in
/// [`crate::statcache::STATCACHE_FILE`] since index v2).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub(crate) struct Index {
    pub(crate) version: u32,
    /// The newest capture; the parent of the next.
    pub(crate) head: Option<SnapshotId>,
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
    /// The SHA-256 of the stat-cache file that describes the head. A cache
    /// file with another checksum (stale, torn, corrupt) is not used.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) statcache: Option<ObjectHash>,
    /// Index v1 only (read, never written): the start of the capture that
    /// wrote the index, which the stat cache below was trusted against.
    #[serde(default, skip_serializing)]
    pub(crate) started_ns: Option<i64>,
    /// Index v1 only (read, never written): the stat cache, inline. Also set
    /// by a rebuild. Moved to [`crate::statcache::STATCACHE_FILE`] on the next write.
    #[serde(default, skip_serializing)]
    pub(crate) files: Option<BTreeMap<String, CacheEntry>>,
}

impl Index {
    /// Reads the index; a missing one is rebuilt from the manifests (labels
    /// other than each snapshot's own are then lost, and nothing is trusted).
    /// Also returns the bytes read, so an unchanged index is not rewritten.
    pub(crate) fn load(
        path: &Path,
        snapshots: &Path,
    ) -> Result<(Index, Option<Vec<u8>>), WorkspaceError> {
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
                Ok((idx, Some(bytes)))
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                Ok((Self::rebuild(snapshots)?, None))
            }
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
            idx.files = Some(untrusted(&m).collect());
        }
        Ok(idx)
    }

    /// The index as it is written (v2: no stat cache inside).
    pub(crate) fn encode(&self) -> Result<Vec<u8>, WorkspaceError> {
        serde_json::to_vec(self).map_err(WorkspaceError::Encode)
    }

    /// True when the index names a head whose manifest is not in this run
    /// (deleted, or the index names another run's snapshot): nothing may be
    /// deduped onto it or labelled on it, and the stat cache, which
    /// describes it, is not trusted.
    ///
    /// # Errors
    /// The head's manifest is there but damaged or names another snapshot
    /// (an integrity error: cairn does not capture over it); IO errors.
    pub(crate) fn head_missing(&self, snapshots: &Path) -> Result<bool, WorkspaceError> {
        let Some(id) = &self.head else {
            return Ok(false);
        };
        let path = snapshots.join(format!("{id}.json"));
        Ok(Manifest::summary_if_present(&path, id)?.is_none())
    }

    /// Takes the stat cache that goes with this index: the v1 or rebuilt one
    /// held inline; else the cache file if its checksum is the one the index
    /// names; else (missing, stale, torn, corrupt, newer) the head's entries
    /// with no stat, so that nothing is trusted but "same tree as the head"
    /// still holds. The inline cache is taken out of the index. With
    /// `head_missing` ([`Index::head_missing`]) the cache is empty: it
    /// described a snapshot that is not there.
    pub(crate) fn take_cache(
        &mut self,
        cache_path: &Path,
        snapshots: &Path,
        head_missing: bool,
    ) -> Result<StatCache, WorkspaceError> {
        if head_missing {
            self.files = None;
            self.started_ns = None;
            return Ok(StatCache::default());
        }
        if let Some(files) = self.files.take() {
            return Ok(StatCache {
                started_ns: self.started_ns.take(),
                files: files.into_iter().collect(),
                on_disk: None,
            });
        }
        if let Some(want) = self.statcache {
            if let Ok(bytes) = std::fs::read(cache_path) {
                if let Some(c) = StatCache::decode(&bytes).filter(|c| c.on_disk == Some(want)) {
                    return Ok(c);
                }
            }
        }
        let files = match &self.head {
            Some(id) => {
                let m = Manifest::load(&snapshots.join(format!("{id}.json")), id)?;
                untrusted(&m).collect()
            }
            None => Vec::new(),
        };
        Ok(StatCache {
            started_ns: None,
            files,
            on_disk: None,
        })
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

/// The head's entries as cache entries with no stat: never trusted.
fn untrusted(m: &Manifest) -> impl Iterator<Item = (String, CacheEntry)> + '_ {
    m.entries.iter().map(|(p, e)| {
        let stat = Stat {
            size: e.size,
            mode: e.mode,
            ..Stat::default()
        };
        (p.clone(), CacheEntry::new(&stat, e.hash))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

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
