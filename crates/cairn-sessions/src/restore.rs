//! Putting a session's files back (DESIGN §5.4, §6, §11), with the record
//! kept: the one implementation the CLI commands and the TUI both call.
//!
//! Invariants:
//! - the caller holds the [`Session`] (its journal lock), so no run of it
//!   moves while files are put back;
//! - every capture a restore makes — the `fail:` that closes an interrupted
//!   node, the `bank:` of the state before — is journaled as a `snapshot`
//!   record, so the journal names every state the workspace was in and a
//!   bank can always be found again to undo the restore;
//! - a checkpoint exists for the session only once its `checkpoint` record
//!   is journaled, after the checkpoint is complete.

use std::path::PathBuf;

use cairn_checkpoint::{CheckpointId, JournalPosition, RestoreJournal, SaveRequest};
use cairn_journal::{CheckpointRef, RecordBody};
use cairn_store::{RunId, Store};
use cairn_workspace::{
    NodeRef, Progress, RestoreReport, RestoreScope, RewindPreview, SnapshotId, Workspace,
};

use crate::fork::fork_held;
use crate::lineage_lock::LineageLock;
use crate::{Session, SessionError};

/// What to put back.
#[derive(Clone, Copy, Debug)]
pub enum RewindTarget<'a> {
    /// The `pre:` state of a node, within a scope (`rewind --to`).
    Node(&'a NodeRef, RestoreScope),
    /// A whole snapshot, always full scope (`rewind --restore-snapshot`,
    /// and undoing a rewind by restoring its bank).
    Snapshot(&'a SnapshotId),
}

/// Restores files of `session`'s workspace and journals the captures the
/// restore made (its bank first among them), then refreshes the session's
/// projections.
///
/// # Errors
/// Workspace errors (nothing was changed for refusals and integrity
/// errors; see [`cairn_workspace::WorkspaceError::RestoreIncomplete`]);
/// journal errors.
pub fn rewind(
    session: &mut Session,
    ws: &Workspace,
    target: RewindTarget<'_>,
    progress: &dyn Progress,
) -> Result<RestoreReport, SessionError> {
    let report = match target {
        RewindTarget::Node(node, scope) => ws.rewind_to(node, scope, progress)?,
        RewindTarget::Snapshot(id) => ws.restore_snapshot(id, progress)?,
    };
    for c in report.closed.iter().chain(std::iter::once(&report.bank)) {
        // Files changed: an error from here on names the bank that undoes it.
        session
            .record_capture(c)
            .map_err(|e| SessionError::RestoreNotJournaled {
                run: session.id().to_string(),
                bank: report.bank.snapshot.to_string(),
                source: Box::new(e),
            })?;
    }
    session.refresh_projections();
    Ok(report)
}

/// What [`rewind_and_fork`] did: the restore, and the fork made at the
/// boundary it restored — or why none could be made after the restore
/// (whose bank, in the report, undoes it).
#[derive(Debug)]
#[non_exhaustive]
pub struct RewoundFork {
    /// The restore, its bank among it.
    pub report: RestoreReport,
    /// The fork, or why it failed after the files were restored.
    pub fork: Result<RunId, SessionError>,
}

/// `rewind --to NODE --fork`: restores the `pre:` state of `node` within
/// `scope`, as [`rewind`] does, and forks the conversation at that
/// boundary, so the fork goes on from the files as they were then.
///
/// Every precondition is checked before the first change: `node` resolves
/// to a boundary, the session's journal holds it (a `snapshot` record, so
/// there is a seq to fork at), and the lineage lock is taken (held until
/// the fork exists, so no removal comes between). The caller holds the
/// session, so no run of it moves meanwhile. After the restore, a failure
/// to fork is in [`RewoundFork::fork`], beside the report and its bank —
/// never an error that loses the bank.
///
/// # Errors
/// Before any change: [`SessionError::NoForkBoundary`], the workspace's
/// [`cairn_workspace::WorkspaceError::NoSuchBoundary`], lock and read
/// errors. Then as [`rewind`] (each naming the bank once files changed).
pub fn rewind_and_fork(
    session: &mut Session,
    ws: &Workspace,
    node: &NodeRef,
    scope: RestoreScope,
    progress: &dyn Progress,
) -> Result<RewoundFork, SessionError> {
    let store = session.store().clone();
    let id = session.id().clone();
    let (label, _) = ws.boundary_of(node)?;
    let seq_of = |label: &str| -> Result<u64, SessionError> {
        boundary_seq(&store, &id, label)?.ok_or_else(|| SessionError::NoForkBoundary {
            run: id.to_string(),
            label: label.to_owned(),
        })
    };
    let mut seq = seq_of(&label.to_string())?;
    let lineage = LineageLock::shared(&store)?;
    let report = rewind(session, ws, RewindTarget::Node(node, scope), progress)?;
    let fork = (|| {
        // The same boundary, as nothing moved in between; were it another,
        // the fork goes where the files went.
        if let Some(restored) = report.target_label.as_ref().filter(|l| **l != label) {
            seq = seq_of(&restored.to_string())?;
        }
        injected_fork_failure()?;
        let (child, _, _) = fork_held(&store, &id, Some(seq), None, &lineage)?;
        Ok(child)
    })();
    Ok(RewoundFork { report, fork })
}

/// `CAIRN_FAULT=fail-fork-after-rewind` (builds with the `fault-injection`
/// feature only): the fork of [`rewind_and_fork`] fails after the restore.
fn injected_fork_failure() -> Result<(), SessionError> {
    #[cfg(feature = "fault-injection")]
    if std::env::var("CAIRN_FAULT")
        .is_ok_and(|v| v.split(',').any(|f| f.trim() == "fail-fork-after-rewind"))
    {
        return Err(SessionError::Store(cairn_store::StoreError::Io {
            action: "forking (injected failure)",
            path: std::path::PathBuf::new(),
            source: std::io::Error::other("CAIRN_FAULT=fail-fork-after-rewind"),
        }));
    }
    Ok(())
}

/// What [`rewind`] to `node` within `scope` would change now, without
/// changing a file: the per-file diff stat and the paths it would leave
/// alone (the operator's own edits among them). Banks the current state
/// first, as every rewind does, and journals that capture.
///
/// # Errors
/// As [`rewind`].
pub fn preview(
    session: &mut Session,
    ws: &Workspace,
    node: &NodeRef,
    scope: RestoreScope,
    progress: &dyn Progress,
) -> Result<RewindPreview, SessionError> {
    let preview = ws.preview_rewind(node, scope, progress)?;
    for c in preview.closed.iter().chain(std::iter::once(&preview.bank)) {
        session.record_capture(c)?;
    }
    Ok(preview)
}

/// The seq of the first `snapshot` record of run `id`'s own journal that
/// carries `label` (a boundary such as `pre:turn:3`), to fork at.
///
/// # Errors
/// The journal cannot be read.
pub fn boundary_seq(store: &Store, id: &RunId, label: &str) -> Result<Option<u64>, SessionError> {
    let records = crate::load(store, id)?.scan.records;
    Ok(records.iter().find_map(|r| match &r.body {
        RecordBody::Snapshot(s) if s.label == label => Some(r.seq),
        _ => None,
    }))
}

/// The newest `bank:` capture journaled in run `id`'s own journal: the
/// state just before its last restore, which restoring undoes it.
///
/// # Errors
/// The journal cannot be read, or the journaled id does not parse.
pub fn last_bank(store: &Store, id: &RunId) -> Result<Option<SnapshotId>, SessionError> {
    let records = crate::load(store, id)?.scan.records;
    let Some(id) = records.iter().rev().find_map(|r| match &r.body {
        RecordBody::Snapshot(s) if s.label.starts_with("bank:") => Some(s.snapshot.clone()),
        _ => None,
    }) else {
        return Ok(None);
    };
    SnapshotId::parse(&id)
        .map(Some)
        .map_err(|e| SessionError::Workspace(e.into()))
}

/// Saves `session` as a checkpoint (its journal position, the workspace
/// when `ws` is given, and `paths`), then journals it: the workspace
/// capture as a `snapshot` record and the `checkpoint` record holding the
/// manifest's SHA-256.
///
/// # Errors
/// Checkpoint and journal errors.
pub fn save_checkpoint(
    session: &mut Session,
    ws: Option<&Workspace>,
    paths: Vec<PathBuf>,
    progress: &dyn Progress,
) -> Result<cairn_checkpoint::SaveReport, SessionError> {
    let position = JournalPosition::of(session.writer());
    let mut request = SaveRequest::new(session.id().clone(), position).paths(paths);
    if let Some(ws) = ws {
        request = request.capture(ws);
    }
    let report = cairn_checkpoint::save(session.store(), &request, progress)?;
    if let Some(c) = &report.capture {
        session.append(RecordBody::Snapshot(cairn_journal::Snapshot {
            snapshot: c.snapshot.to_string(),
            label: c.label.to_string(),
        }))?;
    }
    session.append(RecordBody::Checkpoint(CheckpointRef {
        checkpoint: report.id.to_string(),
        manifest: Some(report.manifest.clone()),
    }))?;
    session.refresh_projections();
    Ok(report)
}

/// Restores checkpoint `id` of `session` (its workspace through `ws` and
/// its named paths), journaling its banks before it changes a named path,
/// then refreshes the projections.
///
/// # Errors
/// Checkpoint and journal errors.
pub fn restore_checkpoint(
    session: &mut Session,
    id: &CheckpointId,
    ws: &Workspace,
    progress: &dyn Progress,
) -> Result<cairn_checkpoint::RestoreReport, SessionError> {
    let store = session.store().clone();
    let restored = cairn_checkpoint::restore(&store, id, ws, &mut Journaled(session), progress);
    session.refresh_projections();
    Ok(restored?)
}

/// The session's journal, as a checkpoint restore appends its banks to it.
struct Journaled<'a>(&'a mut Session);

impl RestoreJournal for Journaled<'_> {
    fn position(&self) -> JournalPosition {
        JournalPosition::of(self.0.writer())
    }

    fn append(
        &mut self,
        record: RecordBody,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        self.0.append(record).map(drop).map_err(Into::into)
    }
}
