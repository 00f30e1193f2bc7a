//! A run's snapshots as a reader sees them, from the store alone: a
//! snapshot's tree, one file's content, and the diff between two (for the
//! viewer, and anything else that shows history without restoring it).
//! The workspace directory is never touched, so the history of a checkout
//! that is gone still reads; [`Workspace`](crate::Workspace)'s own diffs
//! are these.
//!
//! Invariants: content is read through the object pool, so it is verified
//! against its hash as it is read; a file is shown as text only by the
//! diff's rules (no NUL in its first bytes, valid UTF-8), and never over
//! [`MAX_COUNTED_BYTES`] (its size is said instead). Nothing is written
//! and no lock is taken: manifests and objects never change once written.

use cairn_objects::ObjectPool;
use cairn_store::{RunId, Store};
use serde::Serialize;

use crate::diffstat::{self, text, FileChange, MAX_COUNTED_BYTES};
use crate::manifest::Manifest;
use crate::{SnapshotId, WorkspaceError};

/// The snapshots of one run, read-only.
#[derive(Debug)]
pub struct Snapshots {
    store: Store,
    run: RunId,
    pool: ObjectPool,
}

/// One file of a snapshot's tree.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TreeEntry {
    /// Its path, relative to the workspace, `/`-separated.
    pub path: String,
    /// Its length in bytes.
    pub size: u64,
    /// Its permission bits.
    pub mode: u32,
}

/// One file of a snapshot, as shown.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FileAt {
    /// Its path.
    pub path: String,
    /// Its length in bytes.
    pub size: u64,
    /// Its permission bits.
    pub mode: u32,
    /// Its text, when it is text and not over [`MAX_COUNTED_BYTES`].
    pub text: Option<String>,
    /// It holds bytes that are not text.
    pub binary: bool,
    /// It is over [`MAX_COUNTED_BYTES`]: not read.
    pub too_large: bool,
}

/// Where snapshot `id` of run `run` keeps its manifest.
pub(crate) fn manifest_path(store: &Store, run: &RunId, id: &SnapshotId) -> std::path::PathBuf {
    store.snapshots_dir(run).join(format!("{id}.json"))
}

impl Snapshots {
    /// The snapshots of run `run` of `store`.
    pub fn of(store: &Store, run: &RunId) -> Snapshots {
        Snapshots {
            store: store.clone(),
            run: run.clone(),
            pool: ObjectPool::at(store),
        }
    }

    /// The manifest of snapshot `id`.
    ///
    /// # Errors
    /// [`WorkspaceError::NoSuchSnapshot`], a damaged manifest, an unsafe path.
    pub fn manifest(&self, id: &SnapshotId) -> Result<Manifest, WorkspaceError> {
        Manifest::load(&manifest_path(&self.store, &self.run, id), id)
    }

    /// Per-file line stats from snapshot `from` to snapshot `to`: every
    /// path whose entry differs, sorted (the rules are [`FileChange`]'s).
    ///
    /// # Errors
    /// Either manifest cannot be read, or an object cannot be read: never a
    /// shorter list instead.
    pub fn diff_stat(
        &self,
        from: &SnapshotId,
        to: &SnapshotId,
    ) -> Result<Vec<FileChange>, WorkspaceError> {
        let (a, b) = (self.manifest(from)?, self.manifest(to)?);
        diffstat::describe_all(&self.pool, &diffstat::differing(&a.entries, &b.entries))
    }

    /// A unified diff of `path` from snapshot `from` to snapshot `to`:
    /// `None` when it is equal in both, binary, or too large to diff.
    ///
    /// # Errors
    /// A manifest cannot be read; a missing or damaged object.
    pub fn unified_diff(
        &self,
        from: &SnapshotId,
        to: &SnapshotId,
        path: &str,
    ) -> Result<Option<String>, WorkspaceError> {
        let (a, b) = (self.manifest(from)?, self.manifest(to)?);
        diffstat::unified(&self.pool, path, a.entries.get(path), b.entries.get(path))
    }

    /// The files of snapshot `id`, sorted by path.
    ///
    /// # Errors
    /// [`WorkspaceError::NoSuchSnapshot`], a damaged manifest.
    pub fn tree(&self, id: &SnapshotId) -> Result<Vec<TreeEntry>, WorkspaceError> {
        Ok(self
            .manifest(id)?
            .entries
            .into_iter()
            .map(|(path, e)| TreeEntry {
                path,
                size: e.size,
                mode: e.mode,
            })
            .collect())
    }

    /// `path` as snapshot `id` holds it; `None` when it holds no such file.
    ///
    /// # Errors
    /// [`WorkspaceError::NoSuchSnapshot`], a damaged manifest, a missing or
    /// damaged object.
    pub fn file_at(&self, id: &SnapshotId, path: &str) -> Result<Option<FileAt>, WorkspaceError> {
        let manifest = self.manifest(id)?;
        let Some(e) = manifest.entries.get(path) else {
            return Ok(None);
        };
        let mut shown = FileAt {
            path: path.to_owned(),
            size: e.size,
            mode: e.mode,
            text: None,
            binary: false,
            too_large: e.size > MAX_COUNTED_BYTES,
        };
        if !shown.too_large {
            let bytes = self.pool.get(&e.hash)?;
            match text(Some(&bytes)) {
                Some(t) => shown.text = Some(t.to_owned()),
                None => shown.binary = true,
            }
        }
        Ok(Some(shown))
    }
}
