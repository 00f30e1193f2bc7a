//! The checkpoint crate's one error type.
//!
//! Policy: every variant names the checkpoint, run or path concerned, and
//! every message says what to do next. Three families matter to the CLI's
//! exit codes: [`CheckpointError::is_integrity`] (a manifest, chunk, object
//! or journal position does not verify: exit 3),
//! [`CheckpointError::is_refusal`] (refused on purpose, e.g. a busy store:
//! exit 4) and [`CheckpointError::is_usage`] (bad input: exit 2). A restore
//! that fails after it started changing files says so and names the banks
//! that undo it; one that fails before changed nothing.

use std::path::PathBuf;

use crate::CheckpointIdError;

/// What went wrong with a checkpoint.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckpointError {
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
    /// Capturing or restoring the workspace failed.
    #[error(transparent)]
    Workspace(#[from] cairn_workspace::WorkspaceError),
    /// A checkpoint id does not parse.
    #[error(transparent)]
    Id(#[from] CheckpointIdError),
    /// No checkpoint with this id in the store.
    #[error("no checkpoint {id} in this store: list them with `cairn checkpoint ls ID`")]
    NotFound {
        /// The id asked for.
        id: String,
    },
    /// A checkpoint manifest does not parse or does not describe itself.
    #[error("checkpoint manifest {path} is damaged: {reason}. Other checkpoints are unaffected; remove this file if the checkpoint is not needed")]
    ManifestDamaged {
        /// The manifest.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The checkpoint does not verify, so it was not restored (nothing was
    /// changed) or cannot be materialised.
    #[error("checkpoint {id} does not verify ({count} problem(s); first: {first}); nothing was changed. `cairn checkpoint verify {id}` lists them; restore another checkpoint")]
    Damaged {
        /// The checkpoint.
        id: String,
        /// How many problems verify found.
        count: usize,
        /// The first one, in words (naming the object or chunk).
        first: String,
    },
    /// The checkpoint belongs to another run than the workspace given.
    #[error("checkpoint {id} belongs to session {run}, not {given}: restore it into its own session, or fork it with `cairn fork {run} --at {id} --workspace DIR`")]
    WrongRun {
        /// The checkpoint.
        id: String,
        /// Its run.
        run: String,
        /// The run of the workspace given.
        given: String,
    },
    /// A path named for saving does not exist or cannot be resolved.
    #[error("cannot save {path}: {source}; name an existing file or directory with --path")]
    PathMissing {
        /// The path given.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A path named for saving is not UTF-8, so a manifest cannot name it.
    #[error("cannot save {path}: its name is not UTF-8; rename it or name a directory above it")]
    NotUtf8 {
        /// The path (lossy).
        path: PathBuf,
    },
    /// A file kept changing while it was saved: the checkpoint would not be
    /// one moment, so none was written.
    #[error("{path} kept changing while it was saved, so no checkpoint was written: pause whatever writes it (stop the VM, the process) and save again")]
    Changing {
        /// The file.
        path: PathBuf,
    },
    /// The checkpoint holds no workspace snapshot to materialise.
    #[error("checkpoint {id} holds no workspace snapshot, so there is nothing to materialise")]
    NoWorkspace {
        /// The checkpoint.
        id: String,
    },
    /// The directory to materialise into is not empty (or not a directory).
    #[error(
        "{dir} is not an empty directory: give a new or empty directory for the forked workspace"
    )]
    DirNotEmpty {
        /// The directory given.
        dir: PathBuf,
    },
    /// A manifest path that would leave its root, or a path reached through
    /// a symbolic link: refused before anything changed.
    #[error(
        "refusing to restore checkpoint {id}: `{path}` is unsafe ({reason}); nothing was changed"
    )]
    UnsafePath {
        /// The checkpoint.
        id: String,
        /// The offending path.
        path: String,
        /// Why.
        reason: String,
    },
    /// A manifest could not be encoded.
    #[error("encoding a checkpoint manifest: {0}")]
    Encode(#[source] serde_json::Error),
    /// A restore failed after it had begun changing files.
    #[error("restoring checkpoint {id} stopped part-way ({source}); the state before is banked{}: restore that to put it back", bank.as_ref().map(|b| format!(" as checkpoint {b}")).unwrap_or_default())]
    RestoreIncomplete {
        /// The checkpoint being restored.
        id: String,
        /// The bank checkpoint holding the named paths as they were.
        bank: Option<String>,
        /// What failed.
        #[source]
        source: Box<CheckpointError>,
    },
}

impl CheckpointError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        CheckpointError::Io {
            action,
            path: path.into(),
            source,
        }
    }

    /// True when stored state does not verify: a damaged manifest, a bad or
    /// missing chunk, a journal that does not match, an unsafe path (exit 3).
    pub fn is_integrity(&self) -> bool {
        match self {
            CheckpointError::ManifestDamaged { .. }
            | CheckpointError::Damaged { .. }
            | CheckpointError::UnsafePath { .. } => true,
            CheckpointError::Objects(e) => e.is_integrity(),
            CheckpointError::Workspace(e) => e.is_integrity(),
            CheckpointError::RestoreIncomplete { source, .. } => source.is_integrity(),
            _ => false,
        }
    }

    /// True when cairn refused on purpose: a busy store, a tree over the
    /// file limit (exit 4).
    pub fn is_refusal(&self) -> bool {
        match self {
            CheckpointError::Objects(e) => e.is_refusal(),
            CheckpointError::Workspace(e) => e.is_refusal(),
            _ => false,
        }
    }

    /// True for bad input: an unknown or malformed checkpoint id, a path that
    /// does not exist, a checkpoint of another run, a non-empty directory
    /// (exit 2).
    pub fn is_usage(&self) -> bool {
        match self {
            CheckpointError::Id(_)
            | CheckpointError::NotFound { .. }
            | CheckpointError::WrongRun { .. }
            | CheckpointError::PathMissing { .. }
            | CheckpointError::NotUtf8 { .. }
            | CheckpointError::NoWorkspace { .. }
            | CheckpointError::DirNotEmpty { .. } => true,
            CheckpointError::Workspace(e) => e.is_usage(),
            _ => false,
        }
    }
}
