//! Rewind points (DESIGN §11): the person's messages of a session, each
//! with the files its model turns changed, and the rewind to one of them —
//! the files, the conversation, or both — as every front end offers it.
//!
//! A point is a `user` record the person wrote (cairn's own notes to the
//! model are not points) in the session's own journal. Its state to go
//! back to is the `pre:` snapshot of the first model turn it started; its
//! files are every path a `pre:`→`post:`/`fail:` pair of its turns changed
//! (by content, shell commands included).
//!
//! Going back in the conversation is a fork just before the message
//! (`seq - 1`, the parent keeps every turn), so the message can be sent
//! again or changed; going back in the files is the scoped restore of
//! [`crate::rewind`], banked and journaled. Both is the restore, then the
//! fork, under the lineage lock taken before the first change, as
//! [`crate::rewind_and_fork`] does for `cairn rewind --fork`.

use cairn_journal::{Record, RecordBody};
use cairn_store::{RunId, Store};
use cairn_workspace::{Label, LabelKind, NodeRef, Progress, RestoreReport, RestoreScope};
use cairn_workspace::{SnapshotId, Workspace};

use crate::fork::fork_held;
use crate::lineage_lock::LineageLock;
use crate::restore::{rewind, RewindTarget};
use crate::{Session, SessionError};

/// The three ways back (DESIGN §11).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RewindAction {
    /// Files and conversation: a scoped restore, then a fork before the turn.
    Both,
    /// Conversation only: a fork before the turn, files untouched.
    Conversation,
    /// Files only: the scoped restore of §5.4.
    Code,
}

impl RewindAction {
    /// The words on a menu.
    pub fn describe(self) -> &'static str {
        match self {
            RewindAction::Both => "code and conversation",
            RewindAction::Conversation => "conversation only (fork before this turn)",
            RewindAction::Code => "code only (put the files back)",
        }
    }

    /// True when the action changes files.
    pub fn touches_files(self) -> bool {
        !matches!(self, RewindAction::Conversation)
    }

    /// True when the action forks the conversation.
    pub fn forks(self) -> bool {
        !matches!(self, RewindAction::Code)
    }
}

/// A message of the person's that a rewind can go back to.
#[derive(Clone, Debug, PartialEq)]
pub struct RewindPoint {
    /// 1 for the first message of this session's own journal.
    pub number: usize,
    /// Seq of its `user` record.
    pub seq: u64,
    /// What the person wrote.
    pub text: String,
    /// The first model turn it started, whose `pre:` is the state to go
    /// back to; `None` when no model turn ran after it.
    pub turn: Option<u64>,
    /// The files its turns changed (by content, shell commands included).
    pub files: Vec<String>,
}

impl RewindPoint {
    /// The point as the command line names it: `turn:N`, the model turn
    /// it began (`cairn rewind ID --to turn:N` goes to the same place), or
    /// `message K` when no model turn ran after it.
    pub fn name(&self) -> String {
        match self.turn {
            Some(t) => format!("turn:{t}"),
            None => format!("message {}", self.number),
        }
    }

    /// The node whose `pre:` state its files go back to, if a model turn
    /// ran after it.
    pub fn node(&self) -> Option<NodeRef> {
        self.turn
            .and_then(|t| NodeRef::parse(&format!("turn:{t}")).ok())
    }

    /// The seq a fork of the conversation before it is made at.
    pub fn fork_seq(&self) -> u64 {
        self.seq.saturating_sub(1).max(1)
    }
}

/// The rewind points of session `id` (module doc), first message first;
/// `ws` is its workspace, whose snapshots say which files each turn changed.
///
/// # Errors
/// The journal does not read; a snapshot its records name does not read.
pub fn rewind_points(
    store: &Store,
    id: &RunId,
    ws: &Workspace,
) -> Result<Vec<RewindPoint>, SessionError> {
    points_in(&crate::load(store, id)?.scan.records, ws)
}

/// The rewind points of session `id` with its workspace versioning
/// (opened with `capture`), its journal read once.
///
/// # Errors
/// As [`crate::load`] and [`points_in`]; the workspace index cannot be
/// opened.
pub fn points_of(
    store: &Store,
    id: &RunId,
    capture: cairn_workspace::CaptureConfig,
) -> Result<Vec<RewindPoint>, SessionError> {
    let loaded = crate::load(store, id)?;
    let ws = crate::tracker(store, id, &loaded.state.workspace, capture)?;
    points_in(&loaded.scan.records, &ws)
}

/// The rewind points of a session whose records are `records` (as
/// [`Session::open_with_records`] hands them back).
///
/// # Errors
/// A snapshot the records name does not read.
pub fn points_in(records: &[Record], ws: &Workspace) -> Result<Vec<RewindPoint>, SessionError> {
    let mut points: Vec<RewindPoint> = Vec::new();
    // The `pre:` snapshot of the turn in progress, by turn number.
    let mut open: Option<(u64, SnapshotId)> = None;
    for r in records {
        match &r.body {
            RecordBody::User(u) if !u.is_note(r.v) => points.push(RewindPoint {
                number: points.len() + 1,
                seq: r.seq,
                text: u.text.clone(),
                turn: None,
                files: Vec::new(),
            }),
            RecordBody::Snapshot(s) => {
                let (Ok(label), Ok(snap)) =
                    (Label::parse(&s.label), SnapshotId::parse(&s.snapshot))
                else {
                    continue;
                };
                let turn = label
                    .node_iter()
                    .filter(|n| n.node.as_str() == "turn")
                    .map(|n| u64::from(n.iter));
                match (label.kind(), turn) {
                    (LabelKind::Pre, Some(t)) => {
                        if let Some(p) = points.last_mut() {
                            p.turn.get_or_insert(t);
                        }
                        open = Some((t, snap));
                    }
                    (LabelKind::Post | LabelKind::Fail, Some(t)) => match open.take() {
                        Some((t0, pre)) if t0 == t => {
                            let changed = ws.run_changed_paths(&pre, &snap)?;
                            if let Some(p) = points.last_mut() {
                                for path in changed {
                                    if !p.files.contains(&path) {
                                        p.files.push(path);
                                    }
                                }
                            }
                        }
                        other => open = other,
                    },
                    _ => {}
                }
            }
            _ => {}
        }
    }
    Ok(points)
}

/// What [`rewind_to_point`] did.
#[derive(Debug)]
#[non_exhaustive]
pub struct PointRewound {
    /// The restore of the files, when the action touched them (its bank
    /// undoes it).
    pub report: Option<RestoreReport>,
    /// The fork before the message, when the action forked — or why it
    /// failed after the files were restored.
    pub fork: Option<Result<RunId, SessionError>>,
}

/// Goes back to `point` of `session` by `action` (module doc): the files
/// of `ws` within the run's scope, then the conversation as a fork before
/// the message, which the caller then continues in.
///
/// # Errors
/// Before any change: [`SessionError::NoTurnAfter`] when files are to go
/// back but no model turn ran after the message; lock and read errors. Then
/// as [`crate::rewind`]; with files restored, a failed fork is reported in
/// [`PointRewound::fork`], beside the report whose bank undoes them.
pub fn rewind_to_point(
    session: &mut Session,
    ws: &Workspace,
    point: &RewindPoint,
    action: RewindAction,
    progress: &dyn Progress,
) -> Result<PointRewound, SessionError> {
    let node = match (action.touches_files(), point.node()) {
        (true, None) => {
            return Err(SessionError::NoTurnAfter {
                run: session.id().to_string(),
                message: point.number,
            })
        }
        (_, node) => node,
    };
    let store = session.store().clone();
    let id = session.id().clone();
    // Taken before the first change: no removal of this session can come
    // between the restore and the fork.
    let lineage = LineageLock::shared(&store)?;
    let report = match node.as_ref().filter(|_| action.touches_files()) {
        Some(node) => Some(rewind(
            session,
            ws,
            RewindTarget::Node(node, RestoreScope::Run),
            progress,
        )?),
        None => None,
    };
    let fork = action.forks().then(|| {
        fork_held(&store, &id, Some(point.fork_seq()), None, &lineage).map(|(child, _, _)| child)
    });
    match (&report, fork) {
        // Nothing changed yet: a failed fork is the error.
        (None, Some(Err(e))) => Err(e),
        (_, fork) => Ok(PointRewound { report, fork }),
    }
}
