//! Workspace boundaries of the agent loop (DESIGN §5.3, §4.4).
//!
//! The loop's nodes are `turn:N`: `pre:turn:N` before the model is asked
//! (a label on the head: nothing touches the workspace between two turns),
//! `post:turn:N` once its tool calls are done, `fail:turn:N` when a turn is
//! cut short (suspend, interruption, failure), `pause:turn:N` when the run
//! stops between turns to wait for a human, and `resume:turn:N` on every way
//! back in, which closes the window the last stop opened. Each boundary is
//! journaled as a `snapshot` record. On the way back in, the paths that
//! changed while nothing of the run executed are journaled as a `reconcile`
//! record and told to the model.
//!
//! Versioning never stops the agent: a capture that fails (a tree over the
//! file limit, say) is reported once and versioning is off for the rest of
//! the process.

use std::collections::BTreeSet;

use cairn_workspace::{
    CaptureReport, Label, Manifest, NoProgress, NodeIter, NodeName, SnapshotId, Workspace,
};

/// A boundary taken: the snapshot that holds the state, and what changed
/// since the head before it (for `resume:`).
pub(crate) struct Taken {
    pub(crate) snapshot: SnapshotId,
    pub(crate) changed: Vec<String>,
}

/// The run's workspace tracker, switched off after its first failure.
pub(crate) struct Boundaries {
    tracker: Option<Workspace>,
}

pub(crate) fn turn(n: u64) -> Option<NodeIter> {
    let node = NodeName::parse("turn").ok()?;
    Some(NodeIter::new(node, u32::try_from(n).ok()?))
}

impl Boundaries {
    pub(crate) fn new(tracker: Option<Workspace>) -> Self {
        Boundaries { tracker }
    }

    /// `pre:turn:N`: a label on the head (a capture only for a run's first).
    pub(crate) fn pre(&mut self, n: u64) -> Result<Option<Taken>, String> {
        let (Some(t), Some(at)) = (&self.tracker, turn(n)) else {
            return Ok(None);
        };
        match t.mark_pre(&at, &NoProgress) {
            Ok(entry) => Ok(Some(Taken {
                snapshot: entry.pre,
                changed: Vec::new(),
            })),
            Err(e) => Err(self.off(&format!("pre:turn:{n}"), e)),
        }
    }

    /// A capture under `label` (post, fail, pause, resume). For `resume:`,
    /// `changed` lists the paths that differ from the head before it.
    pub(crate) fn capture(&mut self, label: Label) -> Result<Option<Taken>, String> {
        self.capture_since(label, None)
    }

    /// As [`Boundaries::capture`]; when this run has no snapshot yet (a fork),
    /// `base` is the state it started from, to compare against.
    pub(crate) fn capture_since(
        &mut self,
        label: Label,
        base: Option<Manifest>,
    ) -> Result<Option<Taken>, String> {
        let Some(t) = &self.tracker else {
            return Ok(None);
        };
        let before = t
            .head()
            .ok()
            .flatten()
            .and_then(|h| t.manifest(&h).ok())
            .or(base);
        let report: CaptureReport = match t.capture(&label, &NoProgress) {
            Ok(r) => r,
            Err(e) => return Err(self.off(&label.to_string(), e)),
        };
        let changed = match (report.deduped, before, t.manifest(&report.snapshot)) {
            (false, Some(b), Ok(now)) => diff(&b, &now),
            _ => Vec::new(),
        };
        Ok(Some(Taken {
            snapshot: report.snapshot,
            changed,
        }))
    }

    /// Whether this run has captured anything yet (a fresh fork has not:
    /// its past, and the boundaries in it, belong to its ancestors).
    pub(crate) fn has_own_snapshots(&self) -> bool {
        self.tracker
            .as_ref()
            .is_some_and(|t| matches!(t.head(), Ok(Some(_))))
    }

    fn off(&mut self, at: &str, e: cairn_workspace::WorkspaceError) -> String {
        self.tracker = None;
        format!("the workspace was not captured at {at} ({e}); workspace versioning is off for the rest of this process")
    }
}

/// Paths added, changed or removed between two snapshots of `t`'s run.
pub fn changed_paths(t: &Workspace, a: &SnapshotId, b: &SnapshotId) -> Vec<String> {
    match (t.manifest(a), t.manifest(b)) {
        (Ok(a), Ok(b)) => diff(&a, &b),
        _ => Vec::new(),
    }
}

fn diff(a: &Manifest, b: &Manifest) -> Vec<String> {
    let mut out = BTreeSet::new();
    for (p, e) in &b.entries {
        if a.entries.get(p) != Some(e) {
            out.insert(p.clone());
        }
    }
    for p in a.entries.keys() {
        if !b.entries.contains_key(p) {
            out.insert(p.clone());
        }
    }
    out.into_iter().collect()
}
