//! The workspace's one error type.
//!
//! Policy: every variant names the path, snapshot or label concerned, and
//! every message says what to do next. Three families matter to the CLI's
//! exit codes: [`WorkspaceError::is_integrity`] (a manifest, index, object or
//! path does not verify: exit 3), [`WorkspaceError::is_refusal`] (refused on
//! purpose, e.g. a tree over the file limit: exit 4) and
//! [`WorkspaceError::is_usage`] (bad input: exit 2). A restore that fails
//! after it started changing files says so, and names the bank that undoes it.

use std::path::PathBuf;

use crate::{LabelError, SnapshotIdError};

/// What went wrong while versioning a workspace.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum WorkspaceError {
    /// A file-system operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What cairn was doing.
        action: &'static str,
        /// The path.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The store could not be prepared.
    #[error(transparent)]
    Store(#[from] cairn_store::StoreError),
    /// The object pool failed (missing or damaged object, busy store, IO).
    #[error(transparent)]
    Objects(#[from] cairn_objects::ObjectError),
    /// The workspace's rule file exists but cannot be read.
    #[error("cannot read the ignore rules in {path}: {source}; fix its permissions or remove it")]
    IgnoreFile {
        /// `.cairnignore` or `.gitignore`.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// More files to capture than the limit; nothing was captured.
    #[error("the workspace {root} has more than {limit} files to capture, so cairn refused rather than grind through it: exclude generated trees in .cairnignore (`cairn check-ignore -v PATH` shows what decides a path) or raise the limit with CAIRN_WORKSPACE_MAX_FILES (now {limit})")]
    TooManyFiles {
        /// The workspace root.
        root: PathBuf,
        /// The limit in force.
        limit: usize,
    },
    /// The run has no capture yet.
    #[error("this session has no workspace snapshot yet: capture one with `cairn snapshot` first")]
    NoSnapshots,
    /// No snapshot with this id in the run.
    #[error(
        "no snapshot {snapshot} in this session: list them with `cairn rewind ID --list-snapshots`"
    )]
    NoSuchSnapshot {
        /// The id asked for.
        snapshot: String,
    },
    /// No `pre:` boundary for the node (and iteration) asked for.
    #[error("no `pre:` boundary for {node} in this session: list the boundaries with `cairn rewind ID --list-snapshots`")]
    NoSuchBoundary {
        /// `NODE` or `NODE:ITER` as asked.
        node: String,
    },
    /// A manifest does not parse or does not describe itself.
    #[error("snapshot manifest {path} is damaged: {reason}. Other snapshots are unaffected; restore from another one, or remove this file")]
    ManifestDamaged {
        /// The manifest.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The index does not parse.
    #[error("workspace index {path} is damaged: {reason}. Rebuild it from the journal with `cairn reindex` (every label comes back; nothing else changes)")]
    IndexDamaged {
        /// The index.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The index names a head snapshot whose manifest is not in this run
    /// (deleted, or the index names another run's snapshot): nothing is
    /// labelled on it.
    #[error("the workspace index {index} names {snapshot} as the newest snapshot, but this session has no such snapshot (its manifest is missing, or the index belongs to another session): capture again (`cairn snapshot`) to start afresh, or rebuild the index from the journal with `cairn reindex`")]
    HeadMissing {
        /// The head the index names.
        snapshot: String,
        /// The index.
        index: PathBuf,
    },
    /// A snapshot's parent chain is broken.
    #[error("snapshot {snapshot} is not on the chain from the head (a parent manifest is missing or the index points elsewhere): restore it by id with `--restore-snapshot` instead")]
    BrokenChain {
        /// The snapshot.
        snapshot: String,
    },
    /// A path that would leave the workspace, go through a symlink, or enter
    /// `.git`: the restore is refused before anything changes.
    #[error("refusing to restore snapshot {snapshot}: path `{path}` is unsafe ({reason}); nothing was changed. The manifest may have been altered; inspect it before trusting it")]
    UnsafePath {
        /// The snapshot being restored.
        snapshot: String,
        /// The offending path.
        path: String,
        /// Why it is unsafe.
        reason: String,
    },
    /// A path given to `check-ignore` lies outside the workspace.
    #[error("{path} is outside the workspace {root}: give a path inside it")]
    OutsideWorkspace {
        /// The path given.
        path: PathBuf,
        /// The workspace root.
        root: PathBuf,
    },
    /// A label, node name or node reference does not parse.
    #[error(transparent)]
    Label(#[from] LabelError),
    /// A snapshot id does not parse.
    #[error(transparent)]
    SnapshotId(#[from] SnapshotIdError),
    /// A manifest or index could not be encoded.
    #[error("encoding workspace state: {0}")]
    Encode(#[source] serde_json::Error),
    /// A restore failed after it had begun changing files.
    #[error("the restore stopped part-way ({source}); the workspace as it was before is banked as snapshot {bank}: `cairn rewind ID --restore-snapshot {bank}` puts it back")]
    RestoreIncomplete {
        /// The bank snapshot that undoes the partial restore.
        bank: String,
        /// What failed.
        #[source]
        source: Box<WorkspaceError>,
    },
}

impl WorkspaceError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        WorkspaceError::Io {
            action,
            path: path.into(),
            source,
        }
    }

    /// True when stored state does not verify: a damaged manifest, index or
    /// object, a head with no manifest, a broken chain, or an unsafe path
    /// (exit code 3).
    pub fn is_integrity(&self) -> bool {
        match self {
            WorkspaceError::ManifestDamaged { .. }
            | WorkspaceError::IndexDamaged { .. }
            | WorkspaceError::HeadMissing { .. }
            | WorkspaceError::BrokenChain { .. }
            | WorkspaceError::UnsafePath { .. } => true,
            WorkspaceError::Objects(e) => e.is_integrity(),
            WorkspaceError::RestoreIncomplete { source, .. } => source.is_integrity(),
            _ => false,
        }
    }

    /// True when cairn refused on purpose: a tree over the file limit, a busy
    /// store (exit code 4).
    pub fn is_refusal(&self) -> bool {
        match self {
            WorkspaceError::TooManyFiles { .. } => true,
            WorkspaceError::Objects(e) => e.is_refusal(),
            _ => false,
        }
    }

    /// True for bad input: an unknown snapshot, boundary or label, a path
    /// outside the workspace (exit code 2).
    pub fn is_usage(&self) -> bool {
        matches!(
            self,
            WorkspaceError::NoSuchSnapshot { .. }
                | WorkspaceError::NoSuchBoundary { .. }
                | WorkspaceError::NoSnapshots
                | WorkspaceError::OutsideWorkspace { .. }
                | WorkspaceError::Label(_)
                | WorkspaceError::SnapshotId(_)
        )
    }
}
