//! Materialising a checkpoint's workspace into a new directory, for a fork
//! (`cairn fork ID --at CHECKPOINT --workspace DIR`).
//!
//! Invariants: nothing is written before the manifest is anchored in its
//! run's journal, the journal position matches, the target is found to be
//! missing or an empty directory, the snapshot manifest read with
//! cairn-workspace's one reader and path rule, and every object found
//! present; files are written only below the target, by temporary file and
//! rename, never through a symlink, with permission bits only; on failure
//! what was written is removed.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use cairn_objects::{ObjectHash, ObjectPool, Phase, Progress};
use cairn_store::Store;
use cairn_workspace::{Manifest as SnapshotManifest, SnapshotId};
use rayon::prelude::*;
use serde::Serialize;

use crate::manifest::{check_target, Checkpoint, PathKind};
use crate::safe_fs::{self, ReachExt};
use crate::verify::check_journal;
use crate::{CheckpointError, CheckpointId};

/// What [`materialize`] wrote.
#[derive(Clone, Debug, Serialize)]
pub struct MaterializeReport {
    /// The checkpoint.
    pub id: CheckpointId,
    /// The directory written.
    pub dir: PathBuf,
    /// The workspace snapshot materialised.
    pub snapshot: SnapshotId,
    /// Files written.
    pub files: u64,
    /// Their total size.
    pub bytes: u64,
}

/// Writes the workspace snapshot of checkpoint `id` into `dir`, a new or
/// empty directory (created when missing), as plain writable files separate
/// from the store: what `cairn fork ID --at CHECKPOINT --workspace DIR`
/// starts the new lineage in.
///
/// The checkpoint's manifest must be anchored in its run's journal and its
/// position must match the chain (as for [`restore`]); the snapshot manifest
/// is read with cairn-workspace's reader and its one path rule (so nothing is
/// ever written inside `.git`); every object (and chunk) is checked present;
/// each file is verified as it is written, with permission bits only, by
/// temporary file and rename, never through a symlink. On failure what was
/// written is removed.
///
/// # Errors
/// Before anything is written: the anchor errors,
/// [`CheckpointError::Damaged`] (the journal position),
/// [`CheckpointError::NoWorkspace`], [`CheckpointError::DirNotEmpty`],
/// [`CheckpointError::NotADirectory`] (`dir` exists and is a file, a
/// symlink, …), the workspace crate's errors for a snapshot manifest that
/// does not read or breaks the path rule, missing objects. While writing:
/// damaged objects, [`CheckpointError::Unreachable`], IO errors.
pub fn materialize(
    store: &Store,
    id: &CheckpointId,
    dir: &Path,
    progress: &dyn Progress,
) -> Result<MaterializeReport, CheckpointError> {
    let loaded = Checkpoint::load(store, id)?;
    if let Some(e) = check_journal(store, &loaded).refusal(&loaded) {
        return Err(e);
    }
    let cp = &loaded.cp;
    let w = cp
        .workspace
        .as_ref()
        .ok_or_else(|| CheckpointError::NoWorkspace { id: id.to_string() })?;
    check_target(dir)?;
    let m = SnapshotManifest::read(store, &cp.run_id()?, &w.snapshot)?;
    let entries: Vec<(&str, &ObjectHash, u32, u64)> = m
        .entries
        .iter()
        .map(|(p, e)| (p.as_str(), &e.hash, e.mode, e.size))
        .collect();
    write_tree(store, dir, &entries, progress)?;
    Ok(MaterializeReport {
        id: id.clone(),
        dir: dir.to_owned(),
        snapshot: w.snapshot.clone(),
        files: m.files,
        bytes: m.bytes,
    })
}

/// What [`materialize_path`] wrote.
#[derive(Clone, Debug, Serialize)]
pub struct PathReport {
    /// The checkpoint.
    pub id: CheckpointId,
    /// The saved path, as the manifest names it.
    pub saved: String,
    /// The directory written.
    pub dir: PathBuf,
    /// Files written.
    pub files: u64,
    /// Their total size.
    pub bytes: u64,
}

/// Writes the files of the named directory `saved` of checkpoint `id` into
/// `dir`, a new or empty directory, leaving the saved path itself alone:
/// how a machine's memory and disk are laid out for a second guest (a fork)
/// or for a restore into a new generation.
///
/// The same checks as [`materialize`]: the manifest anchored, the journal
/// position matching, every entry's path through the one path rule (checked
/// when the manifest is loaded), every object present, each file verified as
/// written, by temporary file and rename; on failure what was written is
/// removed.
///
/// # Errors
/// As [`materialize`], and [`CheckpointError::NoSuchPath`] when the
/// checkpoint names no directory `saved`.
pub fn materialize_path(
    store: &Store,
    id: &CheckpointId,
    saved: &str,
    dir: &Path,
    progress: &dyn Progress,
) -> Result<PathReport, CheckpointError> {
    let loaded = Checkpoint::load(store, id)?;
    if let Some(e) = check_journal(store, &loaded).refusal(&loaded) {
        return Err(e);
    }
    let part = loaded
        .cp
        .paths
        .iter()
        .find(|p| p.path == saved && p.kind == PathKind::Dir)
        .ok_or_else(|| CheckpointError::NoSuchPath {
            id: id.to_string(),
            path: saved.to_string(),
        })?;
    check_target(dir)?;
    let entries: Vec<(&str, &ObjectHash, u32, u64)> = part
        .entries
        .iter()
        .map(|e| (e.path.as_str(), &e.hash, e.mode, e.size))
        .collect();
    write_tree(store, dir, &entries, progress)?;
    Ok(PathReport {
        id: id.clone(),
        saved: saved.to_string(),
        dir: dir.to_owned(),
        files: part.files,
        bytes: part.bytes,
    })
}

/// Writes `entries` (relative path, object, mode, size) below `dir`, which
/// [`check_target`] found new or empty: objects checked present first,
/// `dir` and its missing ancestors created (each one's parent fsynced),
/// each file staged and verified, renamed into place, every directory
/// synced; on failure everything written below `dir` is removed.
fn write_tree(
    store: &Store,
    dir: &Path,
    entries: &[(&str, &ObjectHash, u32, u64)],
    progress: &dyn Progress,
) -> Result<(), CheckpointError> {
    let pool = ObjectPool::at(store);
    let needed: HashSet<&ObjectHash> = entries.iter().map(|e| e.1).collect();
    for h in needed {
        pool.require(h)?;
    }
    // Each directory made here has its entry made durable by an fsync of
    // its parent (an error stops the materialisation, as every failed sync
    // must): a fork never names a workspace that a power cut can lose.
    cairn_store::durable::create_dir_all_durable(dir, "checkpoint.materialize.dir")?;
    let root = safe_fs::open_dir_path(dir).map_err(|e| CheckpointError::io("opening", dir, e))?;
    progress.begin(Phase::Stage, Some(entries.len() as u64));
    let result = entries
        .par_iter()
        .map(|&(p, hash, mode, size)| -> Result<(), CheckpointError> {
            let (parent, name) = safe_fs::split(p);
            let d = safe_fs::open_dir_in(&root, parent, true).map_err(|r| r.into_unreachable(p))?;
            let t = safe_fs::stage(&pool, &d, hash, mode, p)?;
            safe_fs::rename_at(&d, &t, name)
                .map_err(|err| CheckpointError::io("renaming into place", p, err))?;
            progress.advance(Phase::Stage, 1, size);
            Ok(())
        })
        .collect::<Result<Vec<()>, _>>();
    progress.end(Phase::Stage);
    let synced = result.and_then(|_| {
        let dirs: BTreeSet<&str> = entries.iter().map(|e| safe_fs::split(e.0).0).collect();
        for d in dirs {
            let fd = safe_fs::open_dir_in(&root, d, false).map_err(|r| r.into_unreachable(d))?;
            safe_fs::sync_dir(&fd).map_err(|e| CheckpointError::io("syncing", dir, e))?;
        }
        Ok(())
    });
    if let Err(e) = synced {
        // The directory was empty: take back everything written into it.
        if let Ok(found) = std::fs::read_dir(dir) {
            for entry in found.flatten() {
                let p = entry.path();
                let _ = if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    std::fs::remove_dir_all(&p)
                } else {
                    std::fs::remove_file(&p)
                };
            }
        }
        return Err(e);
    }
    Ok(())
}
