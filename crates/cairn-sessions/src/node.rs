//! Any command as a node of a session (DESIGN §5.5, §10): the protocol
//! `cairn exec` follows, for whoever wraps a process.
//!
//! The records of one node iteration, in this order:
//! 1. On a way back in (the run already has a head): `snapshot` with
//!    `resume:<node>:<i>` — deduped when nothing moved — and a `reconcile`
//!    naming what changed since the head, which did not come from the run;
//! 2. `snapshot` with `pre:<node>:<i>`;
//! 3. `tool_start {call: "<node>:<i>", name: <node>}` — then the caller runs
//!    the command;
//! 4. `tool_result` with the outcome, the exit, the duration and the tail
//!    of the output;
//! 5. `snapshot` with `post:` (exit status 0) or `fail:` (anything else);
//! 6. `terminal`: `completed` or `failed`.
//!
//! Invariants: a change list is computed from manifests read back, and one
//! that cannot be computed is journaled as unknown, with why (`reconcile`
//! with `unknown`), never as an empty list — no record says "nothing
//! changed" where the truth is "unknown"; the caller holds the session (and
//! so its lock) from [`Node::start`] to [`Node::finish`], so no other writer
//! interleaves.

use cairn_journal::{
    Outcome, Reconcile, RecordBody, Snapshot, Terminal, TerminalReason, ToolResult, ToolStart,
};
use cairn_workspace::{
    CaptureReport, NodeEnd, NodeIter, NodeName, Progress, SnapshotId, Workspace,
};

use crate::{Session, SessionError};

/// How the command of a node ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum NodeExit {
    /// It exited with this status.
    Code(i32),
    /// It was killed by this signal.
    Signal(i32),
    /// It could not be started; why.
    NotRun(String),
}

impl NodeExit {
    /// True for exit status 0 only.
    pub fn success(&self) -> bool {
        *self == NodeExit::Code(0)
    }

    /// How it ended, for people and for the `tool_result` record:
    /// `exit status N`, `killed by signal N`, `could not be run: …`.
    pub fn describe(&self) -> String {
        match self {
            NodeExit::Code(c) => format!("exit status {c}"),
            NodeExit::Signal(s) => format!("killed by signal {s}"),
            NodeExit::NotRun(why) => format!("could not be run: {why}"),
        }
    }
}

/// What the caller observed of the command.
#[derive(Clone, Debug)]
pub struct NodeOutcome {
    /// The command line, for the record.
    pub command: String,
    /// How it ended.
    pub exit: NodeExit,
    /// How long it ran.
    pub seconds: f64,
    /// The last bytes of its output (the caller bounds it).
    pub output_tail: String,
}

/// A node iteration that has started: its boundaries are journaled and its
/// command may run.
#[derive(Debug)]
pub struct Node {
    at: NodeIter,
    pre: SnapshotId,
    call: String,
    resume: Option<Result<Vec<String>, String>>,
}

/// What [`Node::finish`] journaled.
#[derive(Clone, Debug)]
pub struct NodeReport {
    /// The node and its iteration.
    pub at: NodeIter,
    /// `completed` or `failed`.
    pub reason: TerminalReason,
    /// The `post:`/`fail:` capture.
    pub capture: CaptureReport,
    /// Paths the node itself changed (between `pre:` and its end), or why
    /// that is unknown.
    pub changed: Result<Vec<String>, String>,
}

impl Node {
    /// Journals steps 1–3 of the module doc for the next iteration of
    /// `name` in `session`, whose workspace `ws` tracks.
    ///
    /// # Errors
    /// Workspace errors (a capture) and journal errors.
    pub fn start(
        session: &mut Session,
        ws: &Workspace,
        name: &NodeName,
        progress: &dyn Progress,
    ) -> Result<Node, SessionError> {
        let head_before = ws.head()?;
        let entry = ws.enter_node(name, progress)?;
        let mut resume = None;
        if let Some(r) = &entry.resume {
            let changed = match (&head_before, r.deduped) {
                (Some(before), false) => ws
                    .changed_paths(before, &r.snapshot)
                    .map_err(|e| e.to_string()),
                _ => Ok(Vec::new()),
            };
            session.record_capture(r)?;
            session.append(RecordBody::Reconcile(Reconcile {
                changed: changed.clone().unwrap_or_default(),
                snapshot: Some(r.snapshot.to_string()),
                unknown: changed.clone().err(),
                machine: None,
            }))?;
            resume = Some(changed);
        }
        let at = entry.at.clone();
        session.append(RecordBody::Snapshot(Snapshot {
            snapshot: entry.pre.to_string(),
            label: format!("pre:{at}"),
        }))?;
        let call = at.to_string();
        session.append(RecordBody::ToolStart(ToolStart {
            call: call.clone(),
            name: name.to_string(),
            mcp: None,
        }))?;
        Ok(Node {
            at,
            pre: entry.pre,
            call,
            resume,
        })
    }

    /// The node and the iteration it was given.
    pub fn at(&self) -> &NodeIter {
        &self.at
    }

    /// The paths that changed outside the run since its last head (or why
    /// that is unknown), when this start was a way back in.
    pub fn changed_outside(&self) -> Option<&Result<Vec<String>, String>> {
        self.resume.as_ref()
    }

    /// Journals steps 4–6 of the module doc.
    ///
    /// # Errors
    /// Workspace and journal errors.
    pub fn finish(
        self,
        session: &mut Session,
        ws: &Workspace,
        outcome: &NodeOutcome,
        progress: &dyn Progress,
    ) -> Result<NodeReport, SessionError> {
        let success = outcome.exit.success();
        let summary = outcome.exit.describe();
        session.append(RecordBody::ToolResult(ToolResult {
            call: self.call,
            outcome: if success { Outcome::Ok } else { Outcome::Error },
            output: format!(
                "command: {}\n{summary}, after {:.3} s\n--- last {} bytes of output ---\n{}",
                outcome.command,
                outcome.seconds,
                outcome.output_tail.len(),
                outcome.output_tail
            ),
        }))?;
        let end = if success {
            NodeEnd::Completed
        } else {
            NodeEnd::Failed
        };
        let capture = ws.leave_node(&self.at, end, progress)?;
        session.record_capture(&capture)?;
        let changed = if capture.snapshot == self.pre {
            Ok(Vec::new())
        } else {
            ws.changed_paths(&self.pre, &capture.snapshot)
                .map_err(|e| e.to_string())
        };
        let reason = if success {
            TerminalReason::Completed
        } else {
            TerminalReason::Failed
        };
        let totals = session.state().totals;
        session.append(RecordBody::Terminal(Terminal {
            reason,
            totals,
            detail: (!success).then(|| format!("{} {summary}", outcome.command)),
        }))?;
        Ok(NodeReport {
            at: self.at,
            reason,
            capture,
            changed,
        })
    }
}
