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
//! Invariants:
//! 1. Versioning never stops the agent, and never stops silently: a capture
//!    that fails (a tree over the file limit, a damaged manifest) ends
//!    versioning for the rest of the process, and the loop journals a
//!    `versioning` record saying where and why ([`Stopped`]).
//! 2. A change list is a fact or an admitted unknown: when the manifests it
//!    is computed from cannot be read, it is `Err(why)`, never an empty list.
//! 3. What a capture could not cover (skipped files, rule lines it could not
//!    use) is reported once per path, not at every boundary.

use std::collections::BTreeSet;

use cairn_workspace::{
    CaptureReport, Label, Manifest, NoProgress, NodeIter, NodeName, SnapshotId, Workspace,
};

/// A boundary taken: the snapshot that holds the state, and what changed
/// since the head before it (for `resume:`).
pub(crate) struct Taken {
    pub(crate) snapshot: SnapshotId,
    /// Paths changed since the head before, or why that is unknown.
    pub(crate) changed: Result<Vec<String>, String>,
    /// Coverage gaps and rule warnings not reported before, for people.
    pub(crate) news: Vec<String>,
}

/// Versioning stopped at a boundary: the label it was taking, and why.
pub(crate) struct Stopped {
    pub(crate) at: String,
    pub(crate) reason: String,
}

/// The run's workspace tracker, switched off after its first failure.
pub(crate) struct Boundaries {
    tracker: Option<Workspace>,
    /// Gaps and warnings already reported.
    told: BTreeSet<String>,
}

pub(crate) fn turn(n: u64) -> Option<NodeIter> {
    let node = NodeName::parse("turn").ok()?;
    Some(NodeIter::new(node, u32::try_from(n).ok()?))
}

impl Boundaries {
    pub(crate) fn new(tracker: Option<Workspace>) -> Self {
        Boundaries {
            tracker,
            told: BTreeSet::new(),
        }
    }

    /// `pre:turn:N`: a label on the head (a capture only for a run's first).
    pub(crate) fn pre(&mut self, n: u64) -> Result<Option<Taken>, Stopped> {
        let (Some(t), Some(at)) = (&self.tracker, turn(n)) else {
            return Ok(None);
        };
        match t.mark_pre(&at, &NoProgress) {
            Ok(entry) => {
                let news = entry
                    .first
                    .as_ref()
                    .map(|r| self.news(r))
                    .unwrap_or_default();
                Ok(Some(Taken {
                    snapshot: entry.pre,
                    changed: Ok(Vec::new()),
                    news,
                }))
            }
            Err(e) => Err(self.off(&format!("pre:turn:{n}"), e)),
        }
    }

    /// Whether the workspace is still captured (versioning has not stopped).
    pub(crate) fn tracking(&self) -> bool {
        self.tracker.is_some()
    }

    /// A capture under `label` (post, fail, pause, resume). For `resume:`,
    /// `changed` lists the paths that differ from the head before it; when
    /// this run has no snapshot yet (a fork), `base` is the state it started
    /// from, to compare against.
    pub(crate) fn capture_since(
        &mut self,
        label: Label,
        base: Result<Option<Manifest>, String>,
    ) -> Result<Option<Taken>, Stopped> {
        let Some(t) = &self.tracker else {
            return Ok(None);
        };
        // What the head held before this capture, or why it cannot be told.
        let before: Result<Option<Manifest>, String> = match t.head() {
            Ok(Some(h)) => t.manifest(&h).map(Some).map_err(|e| e.to_string()),
            Ok(None) => base,
            Err(e) => Err(e.to_string()),
        };
        let report: CaptureReport = match t.capture(&label, &NoProgress) {
            Ok(r) => r,
            Err(e) => return Err(self.off(&label.to_string(), e)),
        };
        let changed = match before {
            _ if report.deduped => Ok(Vec::new()),
            Ok(None) => Ok(Vec::new()),
            Ok(Some(b)) => t
                .manifest(&report.snapshot)
                .map(|now| b.changed_paths(&now))
                .map_err(|e| e.to_string()),
            Err(why) => Err(why),
        };
        let news = self.news(&report);
        Ok(Some(Taken {
            snapshot: report.snapshot,
            changed,
            news,
        }))
    }

    /// Whether this run has captured anything yet (a fresh fork has not:
    /// its past, and the boundaries in it, belong to its ancestors).
    pub(crate) fn has_own_snapshots(&self) -> bool {
        self.tracker
            .as_ref()
            .is_some_and(|t| matches!(t.head(), Ok(Some(_))))
    }

    /// The coverage gaps and rule warnings of `report` not told before.
    fn news(&mut self, report: &CaptureReport) -> Vec<String> {
        let mut out = Vec::new();
        for s in &report.skipped {
            let line = format!("not captured: {} ({})", s.path, s.reason);
            if self.told.insert(line.clone()) {
                out.push(line);
            }
        }
        for w in &report.warnings {
            let line = format!("workspace rules: {w}");
            if self.told.insert(line.clone()) {
                out.push(line);
            }
        }
        out
    }

    fn off(&mut self, at: &str, e: cairn_workspace::WorkspaceError) -> Stopped {
        self.tracker = None;
        Stopped {
            at: at.to_owned(),
            reason: format!(
                "{e}; the workspace is no longer captured in this process, so a rewind cannot undo what follows"
            ),
        }
    }
}
