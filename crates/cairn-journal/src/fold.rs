//! The fold: records in, [`RunState`] out. Pure: no IO, no clock, no
//! configuration, no credentials (DESIGN §2).
//!
//! Invariants:
//! - every counter is derived from records alone, so it can never drift from
//!   the journal;
//! - the status is the last terminal's reason, or `running` when work
//!   follows it (a resume: any record but `snapshot`, `reconcile` and
//!   `checkpoint`, which are bookkeeping) or none exists;
//! - the in-flight batch is the last assistant turn's tool calls that have no
//!   result yet, each marked by whether its `tool_start` was journaled.

use serde::Serialize;

use crate::record::{
    Fingerprint, ForkPin, Meta, Outcome, Record, RecordBody, Routing, Snapshot, TerminalReason,
    ToolCall, Totals,
};

/// A run's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// No terminal record after the last stretch of work.
    Running,
    /// Ended with this reason.
    Ended(TerminalReason),
}

impl Status {
    /// `running` or the terminal reason.
    pub fn as_str(&self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Ended(r) => r.as_str(),
        }
    }
}

/// One entry of the committed conversation.
#[derive(Clone, Debug, PartialEq)]
pub enum Entry {
    /// A user message.
    User {
        /// Its text.
        text: String,
    },
    /// A model turn.
    Assistant {
        /// Its text.
        text: String,
        /// The calls it made.
        tool_calls: Vec<ToolCall>,
    },
    /// A tool call's outcome.
    ToolResult {
        /// The call id.
        call: String,
        /// The tool's name.
        name: String,
        /// ok | error | unknown.
        outcome: Outcome,
        /// Its output.
        output: String,
    },
}

/// A tool call of the last turn that has no result yet.
#[derive(Clone, Debug, PartialEq)]
pub struct PendingCall {
    /// The call.
    pub call: ToolCall,
    /// Whether its `tool_start` was journaled (it may have been dispatched).
    pub started: bool,
}

/// Everything a resume needs, rebuilt from records.
#[derive(Clone, Debug, PartialEq)]
pub struct RunState {
    /// Run id.
    pub run: String,
    /// Human name.
    pub name: Option<String>,
    /// Creation time.
    pub created: String,
    /// Workspace root.
    pub workspace: String,
    /// Fork origin.
    pub fork: Option<ForkPin>,
    /// The fingerprint in force (the meta's, or the last override's).
    pub fingerprint: Option<Fingerprint>,
    /// Model routing recorded at creation.
    pub routing: Option<Routing>,
    /// The system prompt file.
    pub system_file: Option<String>,
    /// The committed conversation.
    pub conversation: Vec<Entry>,
    /// Cumulative counters.
    pub totals: Totals,
    /// Running or ended.
    pub status: Status,
    /// The detail of the last terminal, if any.
    pub detail: Option<String>,
    /// The in-flight tool batch.
    pub pending: Vec<PendingCall>,
    /// Records folded.
    pub records: u64,
    /// Timestamp of the last record.
    pub updated: String,
    /// The last workspace boundary.
    pub last_snapshot: Option<Snapshot>,
}

/// Why records do not fold.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FoldError {
    /// There are no records.
    #[error("the journal holds no records")]
    Empty,
    /// The first record is not `meta`.
    #[error("the first record is `{0}`, not `meta`")]
    NoMeta(&'static str),
}

impl RunState {
    /// The state right after `meta`.
    pub fn from_meta(meta: &Meta, ts: &str) -> Self {
        RunState {
            run: meta.run.clone(),
            name: meta.name.clone(),
            created: meta.created.clone(),
            workspace: meta.workspace.clone(),
            fork: meta.fork.clone(),
            fingerprint: meta.fingerprint.clone(),
            routing: meta.routing.clone(),
            system_file: meta.system_file.clone(),
            conversation: Vec::new(),
            totals: Totals::default(),
            status: Status::Running,
            detail: None,
            pending: Vec::new(),
            records: 1,
            updated: ts.to_owned(),
            last_snapshot: None,
        }
    }

    /// The 1-based number of the next model turn.
    pub fn next_turn(&self) -> u64 {
        self.totals.turns + 1
    }

    /// Folds one more record in.
    ///
    /// A `meta` after others (a fork's own meta folded over its parent's
    /// prefix) takes over the run's identity and keeps the conversation and
    /// totals it inherits.
    pub fn apply(&mut self, record: &Record) {
        self.records += 1;
        self.updated.clone_from(&record.ts);
        // Work after a terminal starts a new stretch (a resume); bookkeeping
        // (snapshots, reconciliation, checkpoints, a rewind's bank) does not.
        if !matches!(
            record.body,
            RecordBody::Terminal(_)
                | RecordBody::Snapshot(_)
                | RecordBody::Reconcile(_)
                | RecordBody::Checkpoint(_)
        ) {
            self.status = Status::Running;
            self.detail = None;
        }
        match &record.body {
            RecordBody::Meta(m) => {
                let inherited = std::mem::take(&mut self.conversation);
                let totals = self.totals;
                let pending = std::mem::take(&mut self.pending);
                let last_snapshot = self.last_snapshot.take();
                *self = RunState::from_meta(m, &record.ts);
                self.conversation = inherited;
                self.totals = totals;
                self.pending = pending;
                self.last_snapshot = last_snapshot;
            }
            RecordBody::User(u) => self.conversation.push(Entry::User {
                text: u.text.clone(),
            }),
            RecordBody::Assistant(a) => {
                self.totals.turns += 1;
                self.totals.input_tokens += a.usage.input_tokens;
                self.totals.output_tokens += a.usage.output_tokens;
                self.totals.cost = self.totals.cost + a.cost;
                self.pending = a
                    .tool_calls
                    .iter()
                    .map(|c| PendingCall {
                        call: c.clone(),
                        started: false,
                    })
                    .collect();
                self.conversation.push(Entry::Assistant {
                    text: a.text.clone(),
                    tool_calls: a.tool_calls.clone(),
                });
            }
            RecordBody::ToolStart(s) => {
                self.totals.tool_calls += 1;
                if let Some(p) = self.pending.iter_mut().find(|p| p.call.id == s.call) {
                    p.started = true;
                }
            }
            RecordBody::ToolResult(r) => {
                let name = match self.pending.iter().position(|p| p.call.id == r.call) {
                    Some(i) => self.pending.remove(i).call.name,
                    None => String::new(),
                };
                self.conversation.push(Entry::ToolResult {
                    call: r.call.clone(),
                    name,
                    outcome: r.outcome,
                    output: r.output.clone(),
                });
            }
            RecordBody::Snapshot(s) => self.last_snapshot = Some(s.clone()),
            RecordBody::Override(o) => self.fingerprint = Some(o.fingerprint.clone()),
            RecordBody::Terminal(t) => {
                self.status = Status::Ended(t.reason);
                self.detail.clone_from(&t.detail);
            }
            RecordBody::Reconcile(_) | RecordBody::Checkpoint(_) => {}
        }
    }
}

/// Folds a run's records, `meta` first, into its state.
///
/// # Errors
/// [`FoldError`] when there is no record or the first is not `meta`.
pub fn fold<'a>(records: impl IntoIterator<Item = &'a Record>) -> Result<RunState, FoldError> {
    let mut it = records.into_iter();
    let first = it.next().ok_or(FoldError::Empty)?;
    let RecordBody::Meta(meta) = &first.body else {
        return Err(FoldError::NoMeta(first.body.kind()));
    };
    let mut state = RunState::from_meta(meta, &first.ts);
    for r in it {
        state.apply(r);
    }
    Ok(state)
}
