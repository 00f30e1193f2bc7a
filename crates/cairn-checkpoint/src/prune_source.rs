//! The checkpoints as a prune [`ManifestSource`].

use cairn_objects::{ManifestSource, ObjectHash, SourceError};
use cairn_store::Store;
use cairn_workspace::Manifest as SnapshotManifest;

use crate::manifest::{manifest_files, Checkpoint};

/// Every checkpoint manifest in a store, for [`cairn_objects::prune`]: the
/// objects of every named path, and of every checkpoint's workspace snapshot
/// (so a checkpoint keeps its workspace even if the snapshot's own run
/// disappears later, while its snapshot manifest is still there). Chunks of
/// chunk lists are marked by prune itself. A checkpoint manifest, or the
/// snapshot manifest it names, that exists but cannot be read is an error,
/// so prune deletes nothing. (A checkpoint manifest is read for its hashes
/// only: a path in it that the path rule refuses makes it unrestorable, not
/// unmarked.)
#[derive(Clone, Debug)]
pub struct CheckpointManifests {
    store: Store,
}

impl CheckpointManifests {
    /// The checkpoints of `store`.
    pub fn new(store: &Store) -> Self {
        CheckpointManifests {
            store: store.clone(),
        }
    }
}

impl ManifestSource for CheckpointManifests {
    fn name(&self) -> String {
        "checkpoints".into()
    }

    fn referenced(&self, mark: &mut dyn FnMut(ObjectHash)) -> Result<(), SourceError> {
        for (id, _) in manifest_files(&self.store)? {
            let cp = Checkpoint::read(&self.store, &id)?.cp;
            for p in &cp.paths {
                p.entries.iter().for_each(|e| mark(e.hash));
            }
            if let Some(w) = &cp.workspace {
                let run = cp.run_id()?;
                let path = self
                    .store
                    .snapshots_dir(&run)
                    .join(format!("{}.json", w.snapshot));
                if !path.exists() {
                    // The run was removed with its snapshots: nothing to keep.
                    continue;
                }
                let m = SnapshotManifest::read(&self.store, &run, &w.snapshot)?;
                m.entries.values().for_each(|e| mark(e.hash));
            }
        }
        Ok(())
    }
}
