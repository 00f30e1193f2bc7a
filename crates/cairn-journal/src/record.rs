//! The records of a run (DESIGN §2): a common header and one body per kind.
//!
//! A line on disk is `{"v":…,"seq":…,"prev":"…","ts":"…","kind":"…",…body…}`.
//! A reader ignores fields it does not know; a newer schema version is refused.
//! Each kind's minimal fields are fixed by the design; more are optional.

use serde::{Deserialize, Serialize};

use crate::chain::ChainHash;

/// The newest schema version this crate reads (and writes).
///
/// Each version only adds record kinds or optional fields, and each record
/// is written with the oldest version that can say what it says
/// ([`RecordBody::version`]): an older cairn reads every record it
/// understands and refuses, with a message to upgrade, one it would misread.
///
/// Version log: 1 — the kinds of DESIGN §2; 2 — `versioning`, `model_call`, a
/// `reconcile` whose change list is unknown, and an `assistant` carrying
/// `thinking` or `reasoning` (which a resume must send back); 3 — a
/// `tool_result` whose outcome is `refused` (a person declined the call); 4 —
/// `machine` (a VM session's guest started, restored, stopped or died) and a
/// `reconcile` naming what a machine restore rolled back (DESIGN §13); 5 —
/// a `user` record's `origin` (see [`User`]): from version 5 on, a `user`
/// record without one is the person's whatever its text, so the person's
/// text that starts with `cairn: ` is written as version 5; 6 — an
/// `assistant` carrying `items` (the Responses API's output items, which a
/// resume must send back). A tool call's `raw_arguments` needs no version:
/// a reader that ignores it sends the same call compactly.
pub const SCHEMA_VERSION: u32 = 6;

/// One record as read back: header plus body.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    /// Schema version of this record.
    pub v: u32,
    /// 1, 2, 3 … without gaps.
    pub seq: u64,
    /// `h(seq - 1)`.
    pub prev: ChainHash,
    /// When it was written, RFC 3339 UTC.
    pub ts: String,
    /// What it says.
    #[serde(flatten)]
    pub body: RecordBody,
}

/// The body of a record, tagged by `kind`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
#[non_exhaustive]
pub enum RecordBody {
    /// Always first, seq 1. Boxed: it is by far the largest body.
    Meta(Box<Meta>),
    /// A follow-up (or the task) from the user.
    User(User),
    /// One model turn, verbatim, with usage.
    Assistant(Assistant),
    /// A tool call is about to be dispatched.
    ToolStart(ToolStart),
    /// A tool call's outcome.
    ToolResult(ToolResult),
    /// A workspace boundary (DESIGN §5).
    Snapshot(Snapshot),
    /// Paths changed outside the run, found on resume (DESIGN §4.4).
    Reconcile(Reconcile),
    /// A checkpoint was saved (DESIGN §6).
    Checkpoint(CheckpointRef),
    /// A resume that was forced past the guard (DESIGN §4.3).
    Override(Override),
    /// Workspace versioning stopped for this stretch of work, and why.
    Versioning(Versioning),
    /// A model call made through the gateway (DESIGN §7).
    ModelCall(ModelCall),
    /// What happened to a VM session's guest (DESIGN §13). Schema version 4.
    Machine(Machine),
    /// The end of a stretch of work.
    Terminal(Terminal),
}

impl RecordBody {
    /// True for bookkeeping: `snapshot`, `reconcile` and `checkpoint`. They
    /// record something about a stretch of work (a workspace boundary, a gap
    /// closed, a checkpoint saved) without being work, so one appended after
    /// a `terminal` (by `cairn snapshot`, `cairn checkpoint save`, a resume's
    /// reconciliation) leaves the session's status the terminal's reason.
    /// So do a VM session's `machine stopped` and `machine died`; a guest
    /// `started` or `restored` is work. Every other kind after a terminal
    /// starts a new stretch: `running`.
    pub fn is_bookkeeping(&self) -> bool {
        matches!(
            self,
            RecordBody::Snapshot(_)
                | RecordBody::Reconcile(_)
                | RecordBody::Checkpoint(_)
                | RecordBody::Versioning(_)
                | RecordBody::Machine(Machine {
                    event: MachineEvent::Stopped | MachineEvent::Died,
                    ..
                })
        )
    }

    /// The schema version this record is written with: the oldest that can
    /// say what it says (see [`SCHEMA_VERSION`]).
    pub fn version(&self) -> u32 {
        match self {
            RecordBody::User(u) => u.version(),
            RecordBody::Assistant(a) if !a.items.is_empty() => 6,
            RecordBody::Machine(_) => 4,
            RecordBody::Reconcile(r) if r.machine.is_some() => 4,
            RecordBody::Versioning(_) | RecordBody::ModelCall(_) => 2,
            RecordBody::Reconcile(r) if r.unknown.is_some() => 2,
            RecordBody::Assistant(a) if !a.thinking.is_empty() || a.reasoning.is_some() => 2,
            // An older reader cannot parse the outcome: it must refuse the
            // record with a message to upgrade, not report it as damage.
            RecordBody::ToolResult(r) if r.outcome == Outcome::Refused => 3,
            _ => 1,
        }
    }

    /// The `kind` string of this body.
    pub fn kind(&self) -> &'static str {
        match self {
            RecordBody::Meta(_) => "meta",
            RecordBody::User(_) => "user",
            RecordBody::Assistant(_) => "assistant",
            RecordBody::ToolStart(_) => "tool_start",
            RecordBody::ToolResult(_) => "tool_result",
            RecordBody::Snapshot(_) => "snapshot",
            RecordBody::Reconcile(_) => "reconcile",
            RecordBody::Checkpoint(_) => "checkpoint",
            RecordBody::Override(_) => "override",
            RecordBody::Versioning(_) => "versioning",
            RecordBody::ModelCall(_) => "model_call",
            RecordBody::Machine(_) => "machine",
            RecordBody::Terminal(_) => "terminal",
        }
    }
}

mod bookkeeping;
mod call;
mod cost;
mod line;
mod meta;
mod terminal;
mod turn;

pub use bookkeeping::{
    CheckpointRef, Machine, MachineEvent, Reconcile, Rollback, Snapshot, Versioning,
    VersioningState,
};
pub use call::{Choice, Delivered, ModelCall};
pub use cost::{Cost, CostState};
pub use meta::{Budgets, Fingerprint, ForkPin, Meta, Routing};
pub use terminal::{ForcedField, Override, Terminal, TerminalReason, Totals};
pub use turn::{
    Assistant, McpCall, Origin, Outcome, Reasoning, Thinking, ToolCall, ToolHints, ToolResult,
    ToolStart, Usage, User, NOTE_PREFIX,
};

impl Record {
    /// Parses one line (without its newline).
    ///
    /// Equivalent to deserialising [`Record`], but without serde's buffering
    /// of a flattened, internally tagged body: the header is read first, then
    /// the body struct its `kind` names is read from the same bytes (unknown
    /// fields, the header's among them, are ignored). A line whose header
    /// comes first, in the order a writer puts it, is read in one pass to the
    /// same record (see `record::line`).
    ///
    /// # Errors
    /// The line is not UTF-8 (JSON text is, and serde refuses such a line
    /// even where the bytes are in a field this build ignores), or not a
    /// record of a known kind with its fields.
    pub fn from_line(line: &[u8]) -> Result<Record, serde_json::Error> {
        let line = std::str::from_utf8(line).map_err(|e| {
            <serde_json::Error as serde::de::Error>::custom(format!("the line is not UTF-8: {e}"))
        })?;
        match line::in_order(line) {
            Some(record) => Ok(record),
            None => two_passes(line),
        }
    }
}

/// What [`Record::from_line`] means: the header, then the body from the
/// whole line.
fn two_passes(line: &str) -> Result<Record, serde_json::Error> {
    #[derive(Deserialize)]
    struct Head<'a> {
        v: u32,
        seq: u64,
        prev: ChainHash,
        ts: String,
        #[serde(borrow)]
        kind: std::borrow::Cow<'a, str>,
    }
    let h: Head = serde_json::from_str(line)?;
    // As `serde_json::from_str` of the body struct: the object, then nothing
    // but whitespace.
    let mut de = serde_json::Deserializer::from_str(line);
    let body = body(&h.kind, &mut de)?.ok_or_else(|| {
        <serde_json::Error as serde::de::Error>::custom(format!("unknown record kind `{}`", h.kind))
    })?;
    de.end()?;
    Ok(Record {
        v: h.v,
        seq: h.seq,
        prev: h.prev,
        ts: h.ts,
        body,
    })
}

/// The body a record of `kind` holds, read by `d`; `None` for a kind this
/// build does not know. The one list of kinds and their body structs.
fn body<'de, D: serde::Deserializer<'de>>(
    kind: &str,
    d: D,
) -> Result<Option<RecordBody>, D::Error> {
    Ok(Some(match kind {
        "meta" => RecordBody::Meta(Box::new(Deserialize::deserialize(d)?)),
        "user" => RecordBody::User(Deserialize::deserialize(d)?),
        "assistant" => RecordBody::Assistant(Deserialize::deserialize(d)?),
        "tool_start" => RecordBody::ToolStart(Deserialize::deserialize(d)?),
        "tool_result" => RecordBody::ToolResult(Deserialize::deserialize(d)?),
        "snapshot" => RecordBody::Snapshot(Deserialize::deserialize(d)?),
        "reconcile" => RecordBody::Reconcile(Deserialize::deserialize(d)?),
        "checkpoint" => RecordBody::Checkpoint(Deserialize::deserialize(d)?),
        "override" => RecordBody::Override(Deserialize::deserialize(d)?),
        "versioning" => RecordBody::Versioning(Deserialize::deserialize(d)?),
        "model_call" => RecordBody::ModelCall(Deserialize::deserialize(d)?),
        "machine" => RecordBody::Machine(Deserialize::deserialize(d)?),
        "terminal" => RecordBody::Terminal(Deserialize::deserialize(d)?),
        _ => return Ok(None),
    }))
}

/// The header fields only; what `verify` needs to check the chain.
#[derive(Deserialize)]
pub(crate) struct Header<'a> {
    pub v: u32,
    pub seq: u64,
    #[serde(borrow)]
    pub prev: std::borrow::Cow<'a, str>,
    #[allow(dead_code)]
    #[serde(borrow)]
    pub kind: std::borrow::Cow<'a, str>,
}

/// What the first line must hold to compute the genesis.
#[derive(Deserialize)]
pub(crate) struct MetaHead {
    pub run: String,
    #[serde(default)]
    pub fork: Option<ForkPin>,
}

/// Serialises a record line (without the newline) into `out`.
pub(crate) fn write_line(
    out: &mut Vec<u8>,
    seq: u64,
    prev: &ChainHash,
    ts: &str,
    body: &RecordBody,
) -> Result<(), serde_json::Error> {
    #[derive(Serialize)]
    struct Line<'a> {
        v: u32,
        seq: u64,
        prev: &'a ChainHash,
        ts: &'a str,
        #[serde(flatten)]
        body: &'a RecordBody,
    }
    serde_json::to_writer(
        &mut *out,
        &Line {
            v: body.version(),
            seq,
            prev,
            ts,
            body,
        },
    )
}

/// Now, RFC 3339 UTC with microseconds.
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_that_is_not_utf8_is_refused_even_in_a_field_it_ignores() {
        let prev = "0".repeat(64);
        let ok = format!(
            r#"{{"v":1,"seq":2,"prev":"{prev}","ts":"t","kind":"user","text":"a","extra":"?"}}"#
        );
        assert!(Record::from_line(ok.as_bytes()).is_ok());
        let bad: Vec<u8> = ok
            .bytes()
            .map(|b| if b == b'?' { 0xff } else { b })
            .collect();
        assert!(Record::from_line(&bad).is_err());
        assert!(serde_json::from_slice::<Record>(&bad).is_err());
    }

    #[test]
    fn a_refused_result_is_spelled_refused_and_written_as_v3() {
        let result = |outcome| {
            RecordBody::ToolResult(ToolResult {
                call: "c1".into(),
                outcome,
                output: "declined".into(),
            })
        };
        let refused = result(Outcome::Refused);
        let json = serde_json::to_value(&refused).unwrap();
        assert_eq!(json["outcome"], "refused");
        assert_eq!(refused.version(), 3);
        for other in [Outcome::Ok, Outcome::Error, Outcome::Unknown] {
            assert_eq!(result(other).version(), 1, "{other:?}");
        }
        let mut line = Vec::new();
        let prev = ChainHash([0; 32]);
        assert!(write_line(&mut line, 2, &prev, "2024-01-01T00:00:00Z", &refused).is_ok());
        let back = Record::from_line(&line).map(|r| (r.v, r.body));
        assert_eq!(back.ok(), Some((3, refused)));
    }
}
