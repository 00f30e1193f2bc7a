//! The workspace snapshots as a prune [`ManifestSource`].

use std::collections::BTreeMap;

use cairn_objects::{ManifestSource, ObjectHash, SourceError};
use cairn_store::Store;
use serde::Deserialize;

use crate::manifest::SnapshotId;

/// Every snapshot manifest of every run in a store, for
/// [`cairn_objects::prune`]. A manifest that exists but cannot be read or
/// parsed is an error, so prune deletes nothing.
#[derive(Clone, Debug)]
pub struct SnapshotManifests {
    store: Store,
}

impl SnapshotManifests {
    /// The snapshots of `store`.
    pub fn new(store: &Store) -> Self {
        SnapshotManifests {
            store: store.clone(),
        }
    }
}

#[derive(Deserialize)]
struct Hashes {
    entries: BTreeMap<String, HashOnly>,
}

#[derive(Deserialize)]
struct HashOnly {
    hash: ObjectHash,
}

impl ManifestSource for SnapshotManifests {
    fn name(&self) -> String {
        "workspace snapshots".into()
    }

    fn referenced(&self, mark: &mut dyn FnMut(ObjectHash)) -> Result<(), SourceError> {
        for run in self.store.run_ids()? {
            let dir = self.store.snapshots_dir(&run);
            let entries = match std::fs::read_dir(&dir) {
                Ok(e) => e,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(format!("listing {}: {e}", dir.display()).into()),
            };
            for entry in entries {
                let entry = entry.map_err(|e| format!("listing {}: {e}", dir.display()))?;
                let name = entry.file_name();
                let is_manifest = name
                    .to_str()
                    .and_then(|n| n.strip_suffix(".json"))
                    .is_some_and(|stem| SnapshotId::parse(stem).is_ok());
                if !is_manifest {
                    continue;
                }
                let path = entry.path();
                let bytes =
                    std::fs::read(&path).map_err(|e| format!("reading {}: {e}", path.display()))?;
                let m: Hashes = serde_json::from_slice(&bytes)
                    .map_err(|e| format!("snapshot manifest {}: {e}", path.display()))?;
                for e in m.entries.values() {
                    mark(e.hash);
                }
            }
        }
        Ok(())
    }
}
