//! The end of a stretch of work: the `terminal` record, its totals, and the `override` a forced resume records.

use serde::{Deserialize, Serialize};

use super::{Cost, Fingerprint};

/// One field that differed at a forced resume.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForcedField {
    /// Field name, e.g. `model`.
    pub field: String,
    /// The recorded value (a hash for prompts and tools).
    pub was: String,
    /// The new value.
    pub now: String,
}

/// A resume forced past the guard.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Override {
    /// What differed.
    pub forced: Vec<ForcedField>,
    /// The fingerprint in force from here on.
    pub fingerprint: Fingerprint,
}

/// Why a stretch of work ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TerminalReason {
    /// The model finished.
    Completed,
    /// Stopped cleanly on request; resumable, repeats nothing.
    Suspended,
    /// An error stopped it.
    Failed,
    /// Stopped at once; the call in flight may be unknown.
    Interrupted,
    /// A budget ran out; resumable with a raised budget.
    BudgetExhausted,
}

impl TerminalReason {
    /// The snake_case name used in records and JSON.
    pub fn as_str(&self) -> &'static str {
        match self {
            TerminalReason::Completed => "completed",
            TerminalReason::Suspended => "suspended",
            TerminalReason::Failed => "failed",
            TerminalReason::Interrupted => "interrupted",
            TerminalReason::BudgetExhausted => "budget_exhausted",
        }
    }
}

/// Cumulative figures of a run, derived only from its records.
///
/// DESIGN §2 requires `turns`, `input_tokens`, `output_tokens` and `cost`
/// in a terminal's totals; `tool_calls` is cairn's addition, which another
/// writer may leave out. Such totals read back with `tool_calls` 0 and
/// [`Totals::tool_calls_unstated`] set, so the totals check compares only
/// what the record states, and they are written back out without it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(from = "StatedTotals", into = "StatedTotals")]
pub struct Totals {
    /// Model turns.
    pub turns: u64,
    /// Prompt tokens.
    pub input_tokens: u64,
    /// Completion tokens.
    pub output_tokens: u64,
    /// Cost.
    pub cost: Cost,
    /// Tool calls dispatched.
    pub tool_calls: u64,
    /// True when these totals were read from a record that does not state
    /// `tool_calls` (then 0 above, and not checked). Default: false, as for
    /// every total the fold computes.
    pub tool_calls_unstated: bool,
}

/// [`Totals`] as a record holds them.
#[derive(Clone, Copy, Serialize, Deserialize)]
struct StatedTotals {
    turns: u64,
    input_tokens: u64,
    output_tokens: u64,
    cost: Cost,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    tool_calls: Option<u64>,
}

impl From<StatedTotals> for Totals {
    fn from(t: StatedTotals) -> Totals {
        Totals {
            turns: t.turns,
            input_tokens: t.input_tokens,
            output_tokens: t.output_tokens,
            cost: t.cost,
            tool_calls: t.tool_calls.unwrap_or(0),
            tool_calls_unstated: t.tool_calls.is_none(),
        }
    }
}

impl From<Totals> for StatedTotals {
    fn from(t: Totals) -> StatedTotals {
        StatedTotals {
            turns: t.turns,
            input_tokens: t.input_tokens,
            output_tokens: t.output_tokens,
            cost: t.cost,
            tool_calls: (!t.tool_calls_unstated).then_some(t.tool_calls),
        }
    }
}

impl Totals {
    /// Input and output tokens together, saturating: each count comes from
    /// a provider (or a journal) and can be anything up to `u64::MAX`, and a
    /// sum that wrapped would read as a budget barely touched.
    pub fn tokens(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

/// The end of a stretch of work.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Terminal {
    /// Why it ended.
    pub reason: TerminalReason,
    /// Cumulative totals at this point.
    pub totals: Totals,
    /// A message for `failed` and `budget_exhausted`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}
