//! The checkpoint crate's one error type.
//!
//! Policy: every variant names the checkpoint, run or path concerned, and
//! every message says what to do next. Three families matter to the CLI's
//! exit codes: [`CheckpointError::is_integrity`] (a manifest, chunk, object
//! or journal position does not verify: exit 3),
//! [`CheckpointError::is_refusal`] (refused on purpose, e.g. a busy store:
//! exit 4) and [`CheckpointError::is_usage`] (bad input: exit 2).
//!
//! A restore's error says exactly what state it left: the refusals made
//! before anything changed say "nothing was changed"
//! ([`CheckpointError::Damaged`], [`CheckpointError::UnsafePath`], the
//! anchor errors, [`CheckpointError::WrongWorkspace`],
//! [`CheckpointError::NotRestored`]); one that failed after it began
//! changing files is [`CheckpointError::RestoreIncomplete`], which says what
//! was changed and how to undo it, and never says "nothing was changed".
//! Errors that can happen part-way ([`CheckpointError::Unreachable`], IO,
//! pool errors) make no claim about the state themselves; they are the
//! source of one of the two. Messages do not repeat their source: the CLI
//! prints the chain.

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
    /// The checkpoint names no such saved directory.
    #[error("checkpoint {id} saved no directory {path}: `cairn checkpoint show {id}` lists what it saved")]
    NoSuchPath {
        /// The checkpoint.
        id: String,
        /// The path asked for.
        path: String,
    },
    /// The checkpoint holds no workspace snapshot to materialise.
    #[error("checkpoint {id} holds no workspace snapshot, so there is nothing to materialise")]
    NoWorkspace {
        /// The checkpoint.
        id: String,
    },
    /// The directory to materialise into is a directory that is not empty.
    #[error(
        "{dir} is not an empty directory: give a new or empty directory for the forked workspace"
    )]
    DirNotEmpty {
        /// The directory given.
        dir: PathBuf,
    },
    /// The directory to materialise into exists and is not a directory (a
    /// file, a symbolic link, a device).
    #[error("{dir} exists and is not a directory ({what}): give a new or empty directory for the forked workspace")]
    NotADirectory {
        /// The path given.
        dir: PathBuf,
        /// What is there.
        what: &'static str,
    },
    /// A manifest path that would leave its root or break the path rule
    /// (`cairn_store::safe`), or a path reached through a symbolic link:
    /// refused before anything changed.
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
    /// A path to write could not be reached without following a symbolic
    /// link, found while writing (the source of a
    /// [`CheckpointError::RestoreIncomplete`] or of a failed materialisation).
    #[error("cannot reach `{path}` without following a symbolic link or leaving a directory ({reason}); something changed it meanwhile")]
    Unreachable {
        /// The path.
        path: String,
        /// Why.
        reason: String,
    },
    /// The manifest's bytes are not the ones the journal's `checkpoint`
    /// record vouches for: it was changed after it was saved.
    #[error("checkpoint {id} does not verify: its manifest (`checkpoints/{id}.json` in the store) was changed after it was saved (its SHA-256 is {actual}, session {run}'s journal recorded {recorded} at seq {seq}); nothing was changed, and cairn will not use it. Restore or fork another checkpoint (`cairn checkpoint ls {run}`), and find out who changed the file")]
    ManifestChanged {
        /// The checkpoint.
        id: String,
        /// Its run.
        run: String,
        /// The journal record naming it.
        seq: u64,
        /// The hash that record holds.
        recorded: String,
        /// The hash of the manifest's bytes now.
        actual: String,
    },
    /// No `checkpoint` record of the run's journal names the checkpoint, so
    /// nothing vouches for its manifest.
    #[error("checkpoint {id} does not verify: no `checkpoint` record in session {run}'s journal after seq {seq} names it, so nothing vouches for its manifest {path} (a save interrupted before it was journaled, or a file put in the store by hand); nothing was changed, and cairn will not use it. Use another checkpoint (`cairn checkpoint ls {run}`), or remove the file if it is not needed")]
    Unjournaled {
        /// The checkpoint.
        id: String,
        /// The run its manifest names.
        run: String,
        /// The journal position its manifest names.
        seq: u64,
        /// The manifest.
        path: PathBuf,
    },
    /// The checkpoint was journaled by a cairn that did not record the
    /// manifest's hash, so whether the manifest changed since cannot be told.
    #[error("checkpoint {id} is unanchored: it was saved by an older cairn, whose journal record (session {run}, seq {seq}) does not hold the manifest's hash, so cairn cannot tell whether the manifest was changed since; nothing was changed, and cairn will not use it. {}", unanchored_advice(id, run, snapshot.as_deref()))]
    Unanchored {
        /// The checkpoint.
        id: String,
        /// Its run.
        run: String,
        /// The journal record naming it.
        seq: u64,
        /// Its workspace snapshot, which `cairn rewind` can restore alone.
        snapshot: Option<String>,
    },
    /// A restore into a workspace that is not the session's, or of a
    /// manifest whose workspace is not the session's.
    #[error("refusing to restore checkpoint {id}: {what}; nothing was changed. A checkpoint is restored only into its session's own workspace, {workspace} (as the session's journal records it); to have its files somewhere else, fork it: `cairn fork {run} --at {id} --workspace DIR`")]
    WrongWorkspace {
        /// The checkpoint.
        id: String,
        /// Its run.
        run: String,
        /// The workspace the run's journal names.
        workspace: String,
        /// What disagrees with it.
        what: String,
    },
    /// Appending to the run's journal failed (a restore journals its bank).
    #[error("appending to session {run}'s journal failed")]
    Journal {
        /// The run.
        run: String,
        /// What failed.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A manifest could not be encoded.
    #[error("encoding a checkpoint manifest: {0}")]
    Encode(#[source] serde_json::Error),
    /// A restore failed after it verified everything but before it changed
    /// any file: the workspace and the named paths are as they were.
    #[error("checkpoint {id} was not restored, and nothing was changed: {step} failed")]
    NotRestored {
        /// The checkpoint being restored.
        id: String,
        /// What was being done.
        step: &'static str,
        /// What failed.
        #[source]
        source: Box<CheckpointError>,
    },
    /// A restore failed after it had begun changing files.
    #[error("restoring checkpoint {id} stopped part-way: {done}. {undo}")]
    RestoreIncomplete {
        /// The checkpoint being restored.
        id: String,
        /// The bank checkpoint holding the named paths as they were (and the
        /// workspace bank), when it was written.
        bank: Option<String>,
        /// What had been changed when it stopped, in words.
        done: String,
        /// How to put things back, in words.
        undo: String,
        /// What failed.
        #[source]
        source: Box<CheckpointError>,
    },
}

/// What to do with an unanchored checkpoint: take its parts back one by one,
/// through commands that do not need to trust its manifest.
fn unanchored_advice(id: &str, run: &str, snapshot: Option<&str>) -> String {
    let mut s = String::new();
    if let Some(snap) = snapshot {
        s.push_str(&format!("Its workspace snapshot can be restored on its own, into the session's workspace only, with `cairn rewind {run} --restore-snapshot {snap}`; "));
    }
    s.push_str(&format!("check its named paths with `cairn checkpoint show {id}` before copying anything back; `cairn checkpoint save {run}` then makes a checkpoint whose manifest the journal vouches for"));
    s
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
            | CheckpointError::UnsafePath { .. }
            | CheckpointError::Unreachable { .. }
            | CheckpointError::ManifestChanged { .. }
            | CheckpointError::Unjournaled { .. }
            | CheckpointError::Unanchored { .. } => true,
            CheckpointError::Objects(e) => e.is_integrity(),
            CheckpointError::Workspace(e) => e.is_integrity(),
            CheckpointError::RestoreIncomplete { source, .. }
            | CheckpointError::NotRestored { source, .. } => source.is_integrity(),
            _ => false,
        }
    }

    /// True when cairn refused on purpose: a busy store, a tree over the
    /// file limit, a workspace that is not the session's (exit 4).
    pub fn is_refusal(&self) -> bool {
        match self {
            CheckpointError::WrongWorkspace { .. } => true,
            CheckpointError::Objects(e) => e.is_refusal(),
            CheckpointError::Workspace(e) => e.is_refusal(),
            CheckpointError::RestoreIncomplete { source, .. }
            | CheckpointError::NotRestored { source, .. } => source.is_refusal(),
            _ => false,
        }
    }

    /// True for bad input: an unknown or malformed checkpoint id, a path that
    /// does not exist, a checkpoint of another run, a non-empty directory or
    /// one that is not a directory (exit 2).
    pub fn is_usage(&self) -> bool {
        match self {
            CheckpointError::Id(_)
            | CheckpointError::NotFound { .. }
            | CheckpointError::WrongRun { .. }
            | CheckpointError::PathMissing { .. }
            | CheckpointError::NotUtf8 { .. }
            | CheckpointError::NoWorkspace { .. }
            | CheckpointError::NoSuchPath { .. }
            | CheckpointError::DirNotEmpty { .. }
            | CheckpointError::NotADirectory { .. } => true,
            CheckpointError::Workspace(e) => e.is_usage(),
            _ => false,
        }
    }
}
