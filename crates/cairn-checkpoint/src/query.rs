//! Reading checkpoints: list, show, stats.

use std::collections::HashSet;

use cairn_objects::{ObjectError, ObjectHash, ObjectPool};
use cairn_store::{RunId, Store};
use cairn_workspace::Manifest as SnapshotManifest;
use serde::Serialize;

use crate::manifest::{heads, manifest_files, Checkpoint, CheckpointSummary};
use crate::{CheckpointError, CheckpointId};

/// A run's checkpoints, newest first (`cairn checkpoint ls ID`). Only
/// complete checkpoints exist to be listed: a save publishes its manifest by
/// rename, and files that are not `<id>.json` are ignored. A listing does
/// not verify: a checkpoint the journal does not vouch for is listed, and
/// [`verify`](crate::verify) says so.
///
/// # Errors
/// Any manifest in the store that exists but cannot be read or parsed, of
/// this run or another ([`CheckpointError::ManifestDamaged`] or
/// [`CheckpointError::Io`], naming the file): the listing never leaves one
/// out, since whether it belongs to this run cannot be told.
pub fn list(store: &Store, run: &RunId) -> Result<Vec<CheckpointSummary>, CheckpointError> {
    let mut out: Vec<CheckpointSummary> = heads(store)?
        .into_iter()
        .filter(|h| h.run == run.as_str())
        .collect();
    out.sort_by(|a, b| (&b.created, &b.id).cmp(&(&a.created, &a.id)));
    Ok(out)
}

/// Every checkpoint in the store, newest first.
///
/// # Errors
/// As [`list`].
pub fn list_all(store: &Store) -> Result<Vec<CheckpointSummary>, CheckpointError> {
    let mut out = heads(store)?;
    out.sort_by(|a, b| (&b.created, &b.id).cmp(&(&a.created, &a.id)));
    Ok(out)
}

/// The id of every checkpoint in the store, read from the manifests' file
/// names alone (nothing is parsed): what a reference by prefix is resolved
/// against.
///
/// # Errors
/// The checkpoints directory cannot be listed.
pub fn ids(store: &Store) -> Result<Vec<CheckpointId>, CheckpointError> {
    let mut out: Vec<CheckpointId> = crate::manifest::manifest_files(store)?
        .into_iter()
        .map(|(id, _)| id)
        .collect();
    out.sort();
    Ok(out)
}

/// One checkpoint's manifest, checked (`cairn checkpoint show CP`). This
/// reads the manifest; it does not check it against the journal
/// ([`verify`](crate::verify) does).
///
/// # Errors
/// [`CheckpointError::NotFound`], [`CheckpointError::ManifestDamaged`],
/// [`CheckpointError::UnsafePath`].
pub fn show(store: &Store, id: &CheckpointId) -> Result<Checkpoint, CheckpointError> {
    Ok(Checkpoint::load(store, id)?.cp)
}

/// The checkpoints that belong to `run` (their manifest names it), oldest
/// id first: what a policy that deletes a run must ask first, since a
/// checkpoint needs its run's journal and snapshots.
///
/// Every checkpoint manifest in the store is read, whichever run it
/// belongs to, because which run an unreadable one names cannot be told.
///
/// # Errors
/// The first manifest that cannot be read, or does not parse or describe
/// itself ([`CheckpointError::ManifestDamaged`], [`CheckpointError::Io`],
/// naming the file) — never an empty answer in its place. A manifest that
/// reads but holds a path the path rule refuses still answers which run it
/// names.
pub fn naming_run(store: &Store, run: &RunId) -> Result<Vec<CheckpointId>, CheckpointError> {
    let mut out = Vec::new();
    for (id, path) in manifest_files(store)? {
        let loaded = Checkpoint::read(store, &id).map_err(|e| match e {
            // It was listed a moment ago: gone now means another process
            // removed it, which is still not an answer about it.
            CheckpointError::NotFound { .. } => CheckpointError::io(
                "reading checkpoint manifest",
                &path,
                std::io::Error::from(std::io::ErrorKind::NotFound),
            ),
            e => e,
        })?;
        if loaded.cp.run == run.as_str() {
            out.push(id);
        }
    }
    out.sort();
    Ok(out)
}

/// Storage of a run's checkpoints (`cairn checkpoint stats ID`).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Stats {
    /// How many checkpoints the run has.
    pub checkpoints: u64,
    /// The sum of their logical sizes: what they would take without
    /// deduplication or compression.
    pub logical_bytes: u64,
    /// What the pool actually holds for the union of their content:
    /// compressed, every object and chunk counted once (chunk lists
    /// included).
    pub stored_bytes: u64,
    /// `logical_bytes / stored_bytes`; `None` when nothing is stored.
    pub dedup_ratio: Option<f64>,
    /// Distinct objects and chunks counted.
    pub objects: u64,
    /// Objects named but absent (a damaged store; `verify` says more).
    pub missing: u64,
}

/// Logical against stored bytes over all of `run`'s checkpoints.
///
/// # Errors
/// A manifest (checkpoint or workspace snapshot) cannot be read; IO errors.
pub fn stats(store: &Store, run: &RunId) -> Result<Stats, CheckpointError> {
    let pool = ObjectPool::at(store);
    let mut roots: HashSet<ObjectHash> = HashSet::new();
    let mut snapshots = HashSet::new();
    let mut logical_bytes = 0;
    let summaries = list(store, run)?;
    for s in &summaries {
        let cp = Checkpoint::load(store, &s.id)?.cp;
        logical_bytes += cp.logical_bytes;
        if let Some(w) = &cp.workspace {
            if snapshots.insert(w.snapshot.clone()) {
                let m = SnapshotManifest::read(store, run, &w.snapshot)?;
                roots.extend(m.entries.values().map(|e| e.hash));
            }
        }
        for p in &cp.paths {
            roots.extend(p.entries.iter().map(|e| e.hash));
        }
    }
    let mut seen: HashSet<ObjectHash> = HashSet::new();
    let (mut stored_bytes, mut missing) = (0u64, 0u64);
    let mut add = |h: ObjectHash, seen: &mut HashSet<ObjectHash>| -> Result<(), CheckpointError> {
        if !seen.insert(h) {
            return Ok(());
        }
        match pool.info(&h) {
            Ok(i) => stored_bytes += i.stored_bytes,
            Err(ObjectError::Missing { .. }) => missing += 1,
            Err(e) => return Err(e.into()),
        }
        Ok(())
    };
    for h in roots {
        add(h, &mut seen)?;
        match pool.chunk_list(&h) {
            Ok(Some(list)) => {
                for c in list {
                    add(c.hash, &mut seen)?;
                }
            }
            Ok(None) | Err(ObjectError::Missing { .. }) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Stats {
        checkpoints: summaries.len() as u64,
        logical_bytes,
        stored_bytes,
        dedup_ratio: (stored_bytes > 0).then(|| logical_bytes as f64 / stored_bytes as f64),
        objects: seen.len() as u64,
        missing,
    })
}
