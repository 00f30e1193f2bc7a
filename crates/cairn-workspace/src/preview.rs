//! Previewing a rewind (DESIGN §11's confirm screen): what
//! [`crate::Workspace::rewind_to`] would do now, with per-file line stats.
//!
//! Invariants:
//! - The preview plans through the restore's own `prepare` (one
//!   implementation of the rules): with the workspace unchanged in between,
//!   [`RewindPreview::changes`] names exactly the paths the rewind then
//!   writes, deletes or chmods, and [`RewindPreview::left_alone`] exactly
//!   the paths it reports left alone.
//! - No file of the workspace is changed. The store is: like every rewind,
//!   the preview banks the current state first (and closes an interrupted
//!   node with `fail:`), so those captures are in the preview for the
//!   caller to journal.

use cairn_objects::Progress;
use serde::Serialize;

use crate::capture::CaptureReport;
use crate::diffstat::{describe_all, FileChange, Pair};
use crate::manifest::SnapshotId;
use crate::restore::{prepare, LeftAlone, RestoreScope, Target};
use crate::workspace::Session;
use crate::{Label, WorkspaceError};

/// What a rewind would do, without doing it
/// ([`crate::Workspace::preview_rewind`]).
#[derive(Clone, Debug, Serialize)]
pub struct RewindPreview {
    /// The snapshot the rewind would restore.
    pub target: SnapshotId,
    /// The `pre:` boundary it resolved to.
    pub target_label: Option<Label>,
    /// The scope applied.
    pub scope: RestoreScope,
    /// A `fail:` capture that closed a node which had started and never
    /// recorded its end, taken before the bank.
    pub closed: Option<CaptureReport>,
    /// The bank: the workspace as it is now (restoring it after the rewind
    /// undoes the rewind).
    pub bank: CaptureReport,
    /// The files the restore would write, delete or chmod, from the current
    /// (banked) state to the target, with line stats (including changes
    /// made by shell commands: everything is compared by content), sorted
    /// by path.
    pub changes: Vec<FileChange>,
    /// Paths that differ from the target but would be left alone, with why:
    /// the plan's own (skipped, uncaptured, a file in the way) plus, for
    /// scope [`RestoreScope::Run`], the operator's edits — paths changed
    /// inside non-executing windows after the target and not by the run,
    /// each reason naming the window's labels. Sorted by path.
    pub left_alone: Vec<LeftAlone>,
}

pub(crate) fn preview(
    s: &mut Session<'_>,
    target: Target<'_>,
    scope: RestoreScope,
    progress: &dyn Progress,
) -> Result<RewindPreview, WorkspaceError> {
    let p = prepare(s, target, scope, progress)?;
    let (have, want) = (&p.have.entries, &p.want.entries);
    let pairs: Vec<Pair<'_>> = p
        .plan
        .writes
        .iter()
        .map(|w| w.path.as_str())
        .chain(p.plan.deletes.iter().map(String::as_str))
        .chain(p.plan.modes.iter().map(|(path, _)| path.as_str()))
        .map(|path| (path, have.get(path), want.get(path)))
        .collect();
    let changes = describe_all(s.ws.pool(), &pairs)?;
    let mut left_alone = p.plan.left_alone;
    left_alone.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(RewindPreview {
        target: p.target,
        target_label: p.target_label,
        scope: p.scope,
        closed: p.closed,
        bank: p.bank,
        changes,
        left_alone,
    })
}
