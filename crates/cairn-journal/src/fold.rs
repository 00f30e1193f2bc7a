//! The fold: records in, [`RunState`] out. Pure: no IO, no clock, no
//! configuration, no credentials (DESIGN §2).
//!
//! Invariants:
//! - every counter is derived from records alone, so it can never drift from
//!   the journal;
//! - the status is the last terminal's reason, or `running` when work
//!   follows it (a resume: any record but `snapshot`, `reconcile` and
//!   `checkpoint`, which are bookkeeping) or none exists;
//! - a terminal's totals are the fold's at that point, cumulative over the
//!   lineage: [`RunState::apply_checked`] and the reader's check hold every
//!   terminal to that; token and call counters saturate, never wrap;
//! - the in-flight batch is the last assistant turn's tool calls that have no
//!   result yet, each marked by whether its `tool_start` was journaled.

use std::borrow::Cow;

use serde::Serialize;

use crate::record::{
    Cost, CostState, Fingerprint, ForkPin, Meta, Outcome, Reasoning, Record, RecordBody, Routing,
    Snapshot, TerminalReason, Thinking, ToolCall, Totals,
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
        /// cairn's own note to the model, not the person's words
        /// ([`crate::User::is_note`]).
        note: bool,
    },
    /// A model turn.
    Assistant {
        /// Its text.
        text: String,
        /// The calls it made.
        tool_calls: Vec<ToolCall>,
        /// Its thinking blocks, to send back unmodified.
        thinking: Vec<Thinking>,
        /// Its reasoning, to send back where the server requires it.
        reasoning: Option<Reasoning>,
        /// Its Responses API output items, to send back as they came.
        items: Vec<serde_json::Value>,
    },
    /// A tool call's outcome.
    ToolResult {
        /// The call id.
        call: String,
        /// The tool's name.
        name: String,
        /// ok | error | unknown | refused.
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
    /// The MCP server tool it went to and the hints the tool declared then,
    /// from its `tool_start`.
    pub mcp: Option<crate::record::McpCall>,
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
    /// The stop reason of the last model turn, in the provider's words.
    pub last_stop_reason: Option<String>,
    /// The refusal of the last model turn, when it refused.
    pub last_refusal: Option<String>,
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
            last_stop_reason: None,
            last_refusal: None,
        }
    }

    /// The 1-based number of the next model turn.
    pub fn next_turn(&self) -> u64 {
        self.totals.turns.saturating_add(1)
    }

    /// Folds one more record in.
    ///
    /// A `meta` after others (a fork's own meta folded over its parent's
    /// prefix) takes over the run's identity and keeps the conversation and
    /// totals it inherits.
    pub fn apply(&mut self, record: &Record) {
        self.fold_in(Cow::Borrowed(record));
    }

    /// [`RunState::apply`] taking the record: what the conversation keeps
    /// of it (texts, calls, outputs) is moved, not copied — a resume folds
    /// records it drops afterwards.
    pub fn apply_owned(&mut self, record: Record) {
        self.fold_in(Cow::Owned(record));
    }

    fn fold_in(&mut self, record: Cow<'_, Record>) {
        self.records = self.records.saturating_add(1);
        self.updated.clone_from(&record.ts);
        // Work after a terminal starts a new stretch (a resume); bookkeeping
        // (snapshots, reconciliation, checkpoints, a rewind's bank) does not.
        if !record.body.is_bookkeeping() && !matches!(record.body, RecordBody::Terminal(_)) {
            self.status = Status::Running;
            self.detail = None;
        }
        count(&mut self.totals, &record.body);
        if matches!(
            record.body,
            RecordBody::User(_) | RecordBody::Assistant(_) | RecordBody::ToolResult(_)
        ) {
            let v = record.v;
            let body = match record {
                Cow::Owned(r) => r.body,
                Cow::Borrowed(r) => r.body.clone(),
            };
            self.converse(v, body);
            return;
        }
        match &record.body {
            RecordBody::Meta(m) => {
                let inherited = std::mem::take(&mut self.conversation);
                let totals = self.totals;
                let pending = std::mem::take(&mut self.pending);
                let last_snapshot = self.last_snapshot.take();
                let last_stop_reason = self.last_stop_reason.take();
                let last_refusal = self.last_refusal.take();
                *self = RunState::from_meta(m, &record.ts);
                self.conversation = inherited;
                self.totals = totals;
                self.pending = pending;
                self.last_snapshot = last_snapshot;
                self.last_stop_reason = last_stop_reason;
                self.last_refusal = last_refusal;
            }
            RecordBody::ToolStart(s) => {
                if let Some(p) = self.pending.iter_mut().find(|p| p.call.id == s.call) {
                    p.started = true;
                    p.mcp.clone_from(&s.mcp);
                }
            }
            RecordBody::Snapshot(s) => self.last_snapshot = Some(s.clone()),
            RecordBody::Override(o) => self.fingerprint = Some(o.fingerprint.clone()),
            RecordBody::Terminal(t) => {
                self.status = Status::Ended(t.reason);
                self.detail.clone_from(&t.detail);
            }
            RecordBody::User(_)
            | RecordBody::Assistant(_)
            | RecordBody::ToolResult(_)
            | RecordBody::Reconcile(_)
            | RecordBody::Checkpoint(_)
            | RecordBody::Versioning(_)
            | RecordBody::Machine(_)
            | RecordBody::ModelCall(_) => {}
        }
    }

    /// A turn of the conversation (a user message, a model turn, a tool's
    /// result), its text moved in.
    fn converse(&mut self, v: u32, body: RecordBody) {
        match body {
            RecordBody::User(u) => {
                let note = u.is_note(v);
                self.conversation.push(Entry::User { text: u.text, note });
            }
            RecordBody::Assistant(a) => {
                self.pending = a
                    .tool_calls
                    .iter()
                    .map(|c| PendingCall {
                        call: c.clone(),
                        started: false,
                        mcp: None,
                    })
                    .collect();
                self.last_stop_reason = a.stop_reason;
                self.last_refusal = a.refusal;
                self.conversation.push(Entry::Assistant {
                    text: a.text,
                    tool_calls: a.tool_calls,
                    thinking: a.thinking,
                    reasoning: a.reasoning,
                    items: a.items,
                });
            }
            RecordBody::ToolResult(r) => {
                let name = match self.pending.iter().position(|p| p.call.id == r.call) {
                    Some(i) => self.pending.remove(i).call.name,
                    None => String::new(),
                };
                self.conversation.push(Entry::ToolResult {
                    call: r.call,
                    name,
                    outcome: r.outcome,
                    output: r.output,
                });
            }
            _ => {}
        }
    }
}

/// Adds what one record contributes to the cumulative counters. The one
/// place the counting rule lives: the fold and the totals check both use it.
/// Sums saturate: a counter read from disk can be anything up to `u64::MAX`,
/// and a total must never wrap or panic.
fn count(totals: &mut Totals, body: &RecordBody) {
    match body {
        RecordBody::Assistant(a) => {
            totals.turns = totals.turns.saturating_add(1);
            totals.input_tokens = totals.input_tokens.saturating_add(a.usage.input_tokens);
            totals.output_tokens = totals.output_tokens.saturating_add(a.usage.output_tokens);
            totals.cost = totals.cost + a.cost;
        }
        RecordBody::ToolStart(_) => totals.tool_calls = totals.tool_calls.saturating_add(1),
        // A call through the gateway spends tokens and money, but it is not
        // one of the loop's turns; a replay re-delivers a call already
        // journaled, so it adds nothing.
        RecordBody::ModelCall(m) if !m.replay => {
            totals.input_tokens = totals.input_tokens.saturating_add(m.usage.input_tokens);
            totals.output_tokens = totals.output_tokens.saturating_add(m.usage.output_tokens);
            totals.cost = totals.cost + m.cost;
        }
        _ => {}
    }
}

/// A `terminal` record whose totals are not what the records before it add
/// up to. The journal's own records are intact up to the seq before it; the
/// terminal's figures are not to be believed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("its totals say {field} = {recorded}, but the records before it add up to {folded}")]
pub struct TotalsMismatch {
    /// The terminal's seq.
    pub seq: u64,
    /// The field that disagrees: `turns`, `input_tokens`, `output_tokens`,
    /// `tool_calls` or `cost`.
    pub field: &'static str,
    /// What the terminal says.
    pub recorded: String,
    /// What the fold says.
    pub folded: String,
}

impl RunState {
    /// Folds one more record in, as [`RunState::apply`], after checking that a
    /// `terminal`'s totals are the fold's so far. The state must hold the
    /// whole lineage (for a fork, its ancestors' pinned prefixes), since a
    /// terminal's totals are cumulative over it.
    ///
    /// # Errors
    /// [`TotalsMismatch`] naming the first field that differs; the record is
    /// not folded in.
    pub fn apply_checked(&mut self, record: &Record) -> Result<(), TotalsMismatch> {
        self.checked_in(Cow::Borrowed(record))
    }

    /// [`RunState::apply_checked`] taking the record
    /// ([`RunState::apply_owned`]).
    ///
    /// # Errors
    /// As [`RunState::apply_checked`].
    pub fn apply_checked_owned(&mut self, record: Record) -> Result<(), TotalsMismatch> {
        self.checked_in(Cow::Owned(record))
    }

    fn checked_in(&mut self, record: Cow<'_, Record>) -> Result<(), TotalsMismatch> {
        if let RecordBody::Terminal(t) = &record.body {
            compare(record.seq, &t.totals, &self.totals)?;
        }
        self.fold_in(record);
        Ok(())
    }
}

/// Checks every terminal of one journal read on its own (DESIGN.md, "Totals").
///
/// A root run's totals start at zero, so each terminal must equal the fold.
/// A fork inherits totals from its parent's prefix, which this journal does
/// not hold: until its first terminal, the check only knows that the
/// terminal must be reachable (every counter at least the fork's own
/// records', an unknown cost still unknown); from that terminal on it is
/// exact. Checking a fork against its real lineage is
/// [`RunState::apply_checked`]'s job.
pub(crate) struct TotalsCheck {
    /// The fold's totals, once known.
    expected: Option<Totals>,
    /// A fork's own counts before its first terminal.
    own: Totals,
}

impl TotalsCheck {
    /// For a root run (`fork` false) or a fork read alone.
    pub(crate) fn new(fork: bool) -> Self {
        TotalsCheck {
            expected: (!fork).then(Totals::default),
            own: Totals::default(),
        }
    }

    /// Counts one record, first checking it when it is a terminal.
    pub(crate) fn check(&mut self, record: &Record) -> Result<(), TotalsMismatch> {
        match (&mut self.expected, &record.body) {
            (Some(folded), RecordBody::Terminal(t)) => compare(record.seq, &t.totals, folded),
            (None, RecordBody::Terminal(t)) => {
                reachable(record.seq, &t.totals, &self.own)?;
                self.expected = Some(t.totals);
                Ok(())
            }
            (Some(folded), body) => {
                count(folded, body);
                Ok(())
            }
            (None, body) => {
                count(&mut self.own, body);
                Ok(())
            }
        }
    }
}

/// The counters of `recorded` to hold to `other`, by name: each one the
/// record states (and `other` knows: a fork's base inherited from a
/// terminal that left one out does not).
fn counters(recorded: &Totals, other: &Totals) -> Vec<(&'static str, u64, u64)> {
    let mut out = vec![
        ("turns", recorded.turns, other.turns),
        ("input_tokens", recorded.input_tokens, other.input_tokens),
        ("output_tokens", recorded.output_tokens, other.output_tokens),
    ];
    if !recorded.tool_calls_unstated && !other.tool_calls_unstated {
        out.push(("tool_calls", recorded.tool_calls, other.tool_calls));
    }
    out
}

fn compare(seq: u64, recorded: &Totals, folded: &Totals) -> Result<(), TotalsMismatch> {
    let mismatch = |field, recorded: String, folded: String| TotalsMismatch {
        seq,
        field,
        recorded,
        folded,
    };
    for (field, r, f) in counters(recorded, folded) {
        if r != f {
            return Err(mismatch(field, r.to_string(), f.to_string()));
        }
    }
    let same = recorded.cost.state == folded.cost.state
        && match (recorded.cost.usd, folded.cost.usd) {
            (Some(r), Some(f)) => close(r, f),
            (None, None) => true,
            _ => false,
        };
    if !same {
        return Err(mismatch(
            "cost",
            show_cost(&recorded.cost),
            show_cost(&folded.cost),
        ));
    }
    Ok(())
}

/// Whether a fork's first terminal can be some inherited base plus `own`.
fn reachable(seq: u64, recorded: &Totals, own: &Totals) -> Result<(), TotalsMismatch> {
    let mismatch = |field, recorded: String, folded: String| TotalsMismatch {
        seq,
        field,
        recorded,
        folded: format!("at least {folded} (this fork's own records, before what it inherits)"),
    };
    for (field, r, o) in counters(recorded, own) {
        if r < o {
            return Err(mismatch(field, r.to_string(), o.to_string()));
        }
    }
    let ok = match (recorded.cost.state, own.cost.state) {
        (CostState::Unknown, _) | (_, CostState::Zero) => true,
        (_, CostState::Unknown) => false,
        (CostState::Zero, CostState::Known) => false,
        (CostState::Known, CostState::Known) => {
            let (r, o) = (
                recorded.cost.usd.unwrap_or(0.0),
                own.cost.usd.unwrap_or(0.0),
            );
            r >= o || close(r, o)
        }
    };
    if !ok {
        return Err(mismatch(
            "cost",
            show_cost(&recorded.cost),
            show_cost(&own.cost),
        ));
    }
    Ok(())
}

/// Equal up to the rounding of re-adding amounts parsed back from JSON (a
/// parser may land one unit in the last place away from the written value).
fn close(a: f64, b: f64) -> bool {
    (a - b).abs() <= 1e-9 * a.abs().max(b.abs()) + 1e-12
}

fn show_cost(c: &Cost) -> String {
    match (c.state, c.usd) {
        (CostState::Known, Some(u)) => format!("{u} USD"),
        (CostState::Zero, _) => "zero".into(),
        _ => "unknown".into(),
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
