//! A new lineage from a workspace checkpoint: the checkpoint's files
//! written into a new directory, and a fork of its session pinned at the
//! journal position the checkpoint recorded.
//!
//! Invariant: nothing is written until the checkpoint is known to belong to
//! the session and the session's journal still holds, at the checkpoint's
//! seq, the record hash the checkpoint names; a materialisation that fails
//! removes what it wrote (the checkpoint crate's rule), and no fork exists
//! unless its workspace was written whole.

use std::path::Path;

use cairn_checkpoint::{CheckpointId, Progress};
use cairn_journal::{JournalWriter, RunState};
use cairn_store::{RunId, Store};

use crate::error::SessionError;

/// A fork made from a workspace checkpoint.
#[derive(Debug)]
#[non_exhaustive]
pub struct CheckpointFork {
    /// The new session.
    pub id: RunId,
    /// Its journal, open for appending.
    pub writer: JournalWriter,
    /// Its state (suspended, resumable).
    pub state: RunState,
    /// How many files its workspace received.
    pub files: u64,
}

/// Forks `parent` at checkpoint `cp`, its workspace written into `dir` (a
/// new or empty directory), separate and writable.
///
/// # Errors
/// [`SessionError::CheckpointOfAnother`] when `cp` was saved from another
/// session; [`SessionError::CheckpointStale`] when the parent's journal no
/// longer holds what the checkpoint recorded; the checkpoint crate's
/// errors (a non-empty `dir`, damaged objects); fork errors.
pub fn fork_from_checkpoint(
    store: &Store,
    parent: &RunId,
    cp: &CheckpointId,
    dir: &Path,
    progress: &dyn Progress,
) -> Result<CheckpointFork, SessionError> {
    let saved = cairn_checkpoint::show(store, cp)?;
    if saved.run_id()? != *parent {
        return Err(SessionError::CheckpointOfAnother {
            checkpoint: cp.to_string(),
            owner: saved.run.clone(),
            run: parent.to_string(),
        });
    }
    let (pin, _) = crate::fork::pin_at(store, parent, Some(saved.journal.seq))?;
    if pin.hash != saved.journal.hash {
        return Err(SessionError::CheckpointStale {
            checkpoint: cp.to_string(),
            run: parent.to_string(),
            seq: saved.journal.seq,
        });
    }
    let made = cairn_checkpoint::materialize(store, cp, dir, progress)?;
    let root = std::fs::canonicalize(dir)
        .map_err(|source| cairn_store::StoreError::Io {
            action: "resolving",
            path: dir.to_path_buf(),
            source,
        })?
        .to_string_lossy()
        .into_owned();
    let (id, writer, state) =
        crate::fork::fork(store, parent, Some(saved.journal.seq), Some(root))?;
    Ok(CheckpointFork {
        id,
        writer,
        state,
        files: made.files,
    })
}
