//! Rebuilding a run's `index.json` from the journal's boundary records and
//! the manifests, when the index is damaged, lost, or names snapshots that
//! are not this run's.
//!
//! The manifests say which snapshots exist and each one's own label; the
//! journal says every label ever pointed (`pre:` labels included, which are
//! labels on an existing snapshot and so in no manifest) and in which order.
//! The rebuilt index:
//!
//! 1. holds every readable manifest's own label, then every journaled
//!    boundary whose snapshot is a readable manifest of this run, applied in
//!    journal order (a later record re-points a label, as it did when it was
//!    written), then the own labels of manifests newer than every journaled
//!    snapshot (captures whose record the journal never got), oldest first;
//!    the open node follows from that same order;
//! 2. has as head the newest readable manifest (as a capture left it);
//! 3. names no stat cache: it is only a cache, and the next capture reads
//!    every file once;
//! 4. is written by the one durable helper (temp file, fsync, rename).
//!
//! What could not be rebuilt is reported, never dropped silently.

use std::collections::HashSet;

use std::path::Path;

use cairn_store::{RunId, Store};
use serde::Serialize;

use crate::history;
use crate::index::{Index, INDEX_VERSION};
use crate::manifest::{Manifest, SnapshotId, Summary};
use crate::workspace::{lock_run, Workspace};
use crate::{Label, WorkspaceError};

/// What [`Workspace::rebuild_index`] rebuilt.
#[derive(Clone, Debug, Serialize)]
pub struct RebuildReport {
    /// The head of the rebuilt index (the newest readable snapshot).
    pub head: Option<SnapshotId>,
    /// Readable snapshot manifests found in this run.
    pub snapshots: usize,
    /// Labels in the rebuilt label map.
    pub labels: usize,
    /// Boundaries and manifests that could not be used, with why.
    pub not_rebuilt: Vec<NotRebuilt>,
}

/// A boundary record or a manifest the rebuild could not use.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct NotRebuilt {
    /// The snapshot named.
    pub snapshot: SnapshotId,
    /// The label the journal gave it (`None` for a manifest no record names).
    pub label: Option<Label>,
    /// Why it was left out.
    pub reason: String,
}

impl Workspace {
    /// Rebuilds this run's workspace index from `boundaries`, the run's
    /// journaled `snapshot` records in journal order (`pre:` labels are
    /// labels on an existing snapshot), and the snapshot manifests of this
    /// run: the label map (so `rewind --to` works again), the head and the
    /// open node. The stat cache is dropped (the next capture reads every
    /// file once). Takes the run's workspace lock. A record whose snapshot
    /// is not a readable manifest of this run, and a damaged manifest, are
    /// reported in [`RebuildReport::not_rebuilt`]; the rest is rebuilt. A
    /// run that never captured is left as it is (nothing is created).
    ///
    /// # Errors
    /// The snapshot directory cannot be listed, or the index cannot be
    /// written.
    pub fn rebuild_index(
        &self,
        boundaries: &[(SnapshotId, Label)],
    ) -> Result<RebuildReport, WorkspaceError> {
        Self::rebuild_index_of(self.store(), self.run(), boundaries)
    }

    /// [`Workspace::rebuild_index`] for run `run` of `store`, without
    /// opening a workspace (whose directory may be gone): what `cairn
    /// reindex` calls for every run.
    ///
    /// # Errors
    /// As [`Workspace::rebuild_index`].
    pub fn rebuild_index_of(
        store: &Store,
        run: &RunId,
        boundaries: &[(SnapshotId, Label)],
    ) -> Result<RebuildReport, WorkspaceError> {
        let snapshots = store.snapshots_dir(run);
        let mut not_rebuilt = Vec::new();
        if !store.workspace_dir(run).exists() {
            // A run that never captured: nothing to rebuild, nothing created.
            not_rebuilt.extend(boundaries.iter().map(|(id, label)| NotRebuilt {
                snapshot: id.clone(),
                label: Some(label.clone()),
                reason: "this session has no workspace snapshots at all".into(),
            }));
            return Ok(RebuildReport {
                head: None,
                snapshots: 0,
                labels: 0,
                not_rebuilt,
            });
        }
        let _lock = lock_run(store, run)?;
        let readable = readable_manifests(&snapshots, &mut not_rebuilt)?;
        let known: HashSet<&SnapshotId> = readable.iter().map(|s| &s.id).collect();

        let mut index = Index {
            version: INDEX_VERSION,
            ..Index::default()
        };
        // 1. Every snapshot's own label (the open node is replayed below).
        for s in &readable {
            index.labels.insert(s.label.clone(), s.id.clone());
        }
        // ... then the journal, in its order.
        let mut journaled: HashSet<&SnapshotId> = HashSet::new();
        for (id, label) in boundaries {
            if known.contains(id) {
                index.set_label(label, id);
                journaled.insert(id);
            } else if !not_rebuilt.iter().any(|n: &NotRebuilt| n.snapshot == *id) {
                not_rebuilt.push(NotRebuilt {
                    snapshot: id.clone(),
                    label: Some(label.clone()),
                    reason: "this session has no readable manifest of that snapshot".into(),
                });
            }
        }
        // ... then captures newer than anything the journal names.
        let last_journaled = readable.iter().rposition(|s| journaled.contains(&s.id));
        let after = last_journaled.map_or(0, |i| i + 1);
        for s in &readable[after..] {
            index.set_label(&s.label, &s.id);
        }

        // 2. The head: the newest snapshot that reads whole.
        for s in readable.iter().rev() {
            match Manifest::load(&snapshots.join(format!("{}.json", s.id)), &s.id) {
                Ok(m) => {
                    index.head = Some(m.id);
                    index.head_skipped = m.skipped;
                    break;
                }
                Err(e) => not_rebuilt.push(NotRebuilt {
                    snapshot: s.id.clone(),
                    label: None,
                    reason: format!("not used as the head: {e}"),
                }),
            }
        }

        // 3, 4. No stat cache named; written durably.
        cairn_store::durable::write_atomic(&store.workspace_index_path(run), &index.encode()?)?;
        Ok(RebuildReport {
            head: index.head,
            snapshots: readable.len(),
            labels: index.labels.len(),
            not_rebuilt,
        })
    }
}

/// Every readable manifest's summary in `dir`, oldest first; a damaged one
/// goes to `not_rebuilt` instead of failing the rebuild.
fn readable_manifests(
    dir: &Path,
    not_rebuilt: &mut Vec<NotRebuilt>,
) -> Result<Vec<Summary>, WorkspaceError> {
    let mut out = Vec::new();
    for (id, path) in history::manifest_files(dir)? {
        match Manifest::summary_if_present(&path, &id) {
            Ok(Some(s)) => out.push(s),
            Ok(None) => {} // removed meanwhile
            Err(e) => not_rebuilt.push(NotRebuilt {
                snapshot: id,
                label: None,
                reason: e.to_string(),
            }),
        }
    }
    history::sort_oldest_first(&mut out);
    Ok(out)
}
