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

/// Where a fork branched from: the parent run, the seq, and the parent's chain
/// hash at that seq.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkPin {
    /// Parent run id.
    pub parent: String,
    /// Last parent record the child shares.
    pub seq: u64,
    /// Parent's `h(seq)`.
    pub hash: ChainHash,
}

/// The configuration a resume must match (DESIGN §4.3). Hashes only, never the
/// prompt itself.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// Model name, e.g. `openai:gpt-4.1`.
    pub model: String,
    /// SHA-256 of the system prompt, hex; `None` when there is none.
    #[serde(default)]
    pub system: Option<String>,
    /// SHA-256 of the tool set's canonical description, hex.
    #[serde(default)]
    pub tools: String,
    /// Thinking mode.
    #[serde(default)]
    pub thinking: Option<String>,
    /// Budgets.
    #[serde(default)]
    pub budgets: Budgets,
}

/// Limits that stop a run with `budget_exhausted`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Budgets {
    /// Most model turns.
    #[serde(default)]
    pub max_turns: Option<u64>,
    /// Most tokens, input plus output.
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// Most cost in US dollars.
    #[serde(default)]
    pub max_cost_usd: Option<f64>,
}

/// Where model calls go: restored on resume unless overridden.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Routing {
    /// `script`, `openai` or `anthropic`.
    pub provider: String,
    /// Model name, or the script path for `script`.
    pub model: String,
    /// Base URL, when not the provider's default.
    #[serde(default)]
    pub base_url: Option<String>,
}

/// The first record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// The run id; must match the directory and feeds the genesis.
    pub run: String,
    /// Creation time, RFC 3339 UTC.
    pub created: String,
    /// Absolute workspace root.
    pub workspace: String,
    /// Human name.
    #[serde(default)]
    pub name: Option<String>,
    /// Resume guard; `None` for runs with no model (e.g. `cairn exec`).
    #[serde(default)]
    pub fingerprint: Option<Fingerprint>,
    /// Fork origin; `None` for a root run.
    #[serde(default)]
    pub fork: Option<ForkPin>,
    /// Model routing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing: Option<Routing>,
    /// The system prompt file given to `cairn run`, re-read on resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_file: Option<String>,
}

/// A user message: the person's, or cairn's own note to the model (what
/// changed in the workspace while the session was stopped, say).
///
/// Who wrote it ([`User::is_note`]):
/// 1. `origin: "cairn"` is cairn's note, in a record of any version;
/// 2. no `origin` in a record of version 5 or later is the person's,
///    whatever the text says;
/// 3. no `origin` in a record of an older version: cairn's note when its
///    text starts with `cairn: ` ([`NOTE_PREFIX`]), the rule of the cairns
///    that wrote them, else the person's.
///
/// A record is written with the oldest version that says who wrote it: a
/// note (which starts with the prefix) and the person's text that does not
/// need no version 5, and an older cairn reads them right by the prefix;
/// the person's text that starts with the prefix is version 5, which an
/// older cairn refuses rather than take it for a note.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    /// The text.
    pub text: String,
    /// Who wrote it: `cairn` for cairn's own notes; absent for the person.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<Origin>,
}

/// Who wrote a `user` record other than the person.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum Origin {
    /// cairn itself: a note to the model.
    Cairn,
}

/// How cairn's notes to the model begin; before schema version 5 this
/// prefix was the only sign of one.
pub const NOTE_PREFIX: &str = "cairn: ";

/// The first schema version whose `user` records say who wrote them.
const ORIGIN_VERSION: u32 = 5;

impl User {
    /// The person's message.
    pub fn person(text: impl Into<String>) -> User {
        User {
            text: text.into(),
            origin: None,
        }
    }

    /// cairn's own note to the model.
    pub fn note(text: impl Into<String>) -> User {
        User {
            text: text.into(),
            origin: Some(Origin::Cairn),
        }
    }

    /// Whether this record, of schema version `v`, is cairn's own note
    /// rather than the person's (the rules in the type's doc).
    pub fn is_note(&self, v: u32) -> bool {
        match self.origin {
            Some(Origin::Cairn) => true,
            None => v < ORIGIN_VERSION && self.text.starts_with(NOTE_PREFIX),
        }
    }

    /// The oldest schema version under which this record says who wrote it.
    fn version(&self) -> u32 {
        // An older cairn ignores `origin` and goes by the prefix alone.
        let older = self.text.starts_with(NOTE_PREFIX);
        if older == self.is_note(ORIGIN_VERSION) {
            1
        } else {
            ORIGIN_VERSION
        }
    }
}

/// A tool call requested by the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// Provider-assigned call id.
    pub id: String,
    /// Tool name.
    pub name: String,
    /// Arguments as the model gave them.
    #[serde(default)]
    pub arguments: serde_json::Value,
    /// The arguments' text exactly as the model produced it, when that is
    /// not `arguments` written compactly (spacing, key order): what a
    /// resume sends back. Optional in every version: a reader that ignores
    /// it sends `arguments` compactly, which providers accept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_arguments: Option<String>,
}

/// Token usage of one model call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    #[serde(default)]
    pub input_tokens: u64,
    /// Completion tokens.
    #[serde(default)]
    pub output_tokens: u64,
}

/// How much is known about a cost (DESIGN §4.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CostState {
    /// Known to be free.
    Zero,
    /// An amount from a price table.
    Known,
    /// No price known.
    Unknown,
}

/// A cost: its state and, unless unknown, an amount.
///
/// Reading one enforces, per state (anything else is a schema error, so the
/// record holding it is reported as damage at its seq):
/// 1. `zero`: `usd` is `0`;
/// 2. `known`: `usd` is a finite number, `0` or more (a number too large for
///    an `f64` does not parse at all);
/// 3. `unknown`: `usd` is `null` or absent.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Cost {
    /// zero | known | unknown.
    pub state: CostState,
    /// US dollars; `None` exactly when unknown.
    pub usd: Option<f64>,
}

impl<'de> Deserialize<'de> for Cost {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Fields {
            state: CostState,
            #[serde(default)]
            usd: Option<f64>,
        }
        let f = Fields::deserialize(d)?;
        let cost = Cost {
            state: f.state,
            usd: f.usd,
        };
        match cost.problem() {
            None => Ok(cost),
            Some(why) => Err(serde::de::Error::custom(why)),
        }
    }
}

impl Cost {
    /// Free.
    pub const ZERO: Cost = Cost {
        state: CostState::Zero,
        usd: Some(0.0),
    };
    /// Not known.
    pub const UNKNOWN: Cost = Cost {
        state: CostState::Unknown,
        usd: None,
    };

    /// A known amount.
    pub fn known(usd: f64) -> Cost {
        Cost {
            state: CostState::Known,
            usd: Some(usd),
        }
    }

    /// This cost for people: `$0.0123`, `free`, or `unknown` (an unknown
    /// cost is never shown as a number).
    pub fn for_people(&self) -> String {
        match (self.state, self.usd) {
            (CostState::Zero, _) => "free".into(),
            (CostState::Known, Some(usd)) => format!("${usd:.4}"),
            _ => "unknown".into(),
        }
    }

    /// Whether this cost obeys the rules of its state (see [`Cost`]). The
    /// writer refuses to append a record with a cost that is not valid, since
    /// no reader would accept it.
    pub fn is_valid(&self) -> bool {
        self.problem().is_none()
    }

    /// What is wrong with this cost, if anything.
    fn problem(&self) -> Option<String> {
        match (self.state, self.usd) {
            (CostState::Zero, Some(0.0)) => None,
            (CostState::Zero, Some(u)) => Some(format!("a `zero` cost has usd {u}, not 0")),
            (CostState::Zero, None) => Some("a `zero` cost has no usd; it must be 0".into()),
            (CostState::Known, Some(u)) if u.is_finite() && u >= 0.0 => None,
            (CostState::Known, Some(u)) => Some(format!(
                "a `known` cost has usd {u}; it must be a finite amount of 0 or more"
            )),
            (CostState::Known, None) => Some("a `known` cost has no usd".into()),
            (CostState::Unknown, None) => None,
            (CostState::Unknown, Some(u)) => Some(format!(
                "an `unknown` cost has usd {u}; an unknown cost carries no amount"
            )),
        }
    }
}

impl std::ops::Add for Cost {
    type Output = Cost;

    /// The sum of two costs. Unknown absorbs everything: a total never turns an
    /// unknown into a number. Zero plus zero stays zero; otherwise known. A
    /// sum too large for an `f64` saturates at `f64::MAX` rather than becoming
    /// infinite (which JSON cannot hold).
    fn add(self, other: Cost) -> Cost {
        match (self.state, other.state) {
            (CostState::Unknown, _) | (_, CostState::Unknown) => Cost::UNKNOWN,
            (CostState::Zero, CostState::Zero) => Cost::ZERO,
            _ => {
                let sum = self.usd.unwrap_or(0.0) + other.usd.unwrap_or(0.0);
                Cost::known(if sum == f64::INFINITY { f64::MAX } else { sum })
            }
        }
    }
}

impl Default for Cost {
    fn default() -> Self {
        Cost::ZERO
    }
}

/// One model turn: everything the model said, so that a resume sends exactly
/// what a continuous run would have sent.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Assistant {
    /// The text the model produced.
    pub text: String,
    /// The tool calls it asked for, in order.
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
    /// Token usage.
    #[serde(default)]
    pub usage: Usage,
    /// Its cost.
    pub cost: Cost,
    /// True when the response was served from the response store rather than
    /// bought from the provider (DESIGN §7).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replay: bool,
    /// The model that answered, as the provider named it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The model that was asked for, when it is not the one that answered
    /// (the cost is the answering model's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_model: Option<String>,
    /// Why generation stopped, in the provider's words (`stop`, `tool_calls`,
    /// `end_turn`, `length`, `max_tokens`, `refusal`, `content_filter`, …).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// The model's refusal, in its words, when it refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
    /// Anthropic thinking blocks, complete and in order (schema version 2:
    /// a resume must send them back).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub thinking: Vec<Thinking>,
    /// Reasoning an OpenAI-compatible server streamed beside the answer
    /// (schema version 2 when it holds `details` or text to pass back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reasoning: Option<Reasoning>,
    /// What the provider said about the stop beyond its reason, verbatim
    /// (Anthropic's `stop_details`: a refusal's `type`, `category` and
    /// `explanation`). Optional and additive: an older reader that ignores
    /// it misreads nothing a resume needs, so it raises no schema version.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_details: Option<serde_json::Value>,
    /// The Responses API's output items, as its final event listed them
    /// (reasoning items with their `encrypted_content`, messages, function
    /// calls): what a resume sends back (schema version 6).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<serde_json::Value>,
}

/// One model call through the gateway: what was asked, what came back (both
/// bodies in the object pool, by hash), and what it cost. Schema version 2.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelCall {
    /// The API path, e.g. `/v1/chat/completions`.
    pub endpoint: String,
    /// The model asked for (from the request body).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    /// The model that answered, when the response says and it differs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub answered_by: Option<String>,
    /// The call's key (DESIGN §7): what a retry is matched by.
    pub key: String,
    /// Object hash of the request body (credentials are never in it: they
    /// travel in headers, which are not stored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// Object hash of the response body as the upstream sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub response: Option<String>,
    /// The HTTP status the client got (502 when the upstream was unreachable).
    pub status: u16,
    /// Token usage, from the response.
    #[serde(default)]
    pub usage: Usage,
    /// What it cost: zero for a replay.
    pub cost: Cost,
    /// Whether the client asked for a stream.
    #[serde(default)]
    pub stream: bool,
    /// True when it was served from the response store, not bought.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub replay: bool,
    /// Whether the client was still there for the end of the response.
    pub delivered: Delivered,
    /// Milliseconds from the request to the end of the response.
    #[serde(default)]
    pub duration_ms: u64,
    /// The client's own session id, when it sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client: Option<String>,
    /// Why the call failed, when it did (an unreachable upstream, a cut
    /// upstream stream).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// How each answer of the response ended, in index order: every choice
    /// of a chat completion (a request with `n: 3` has three), the one
    /// message of the Messages and Responses APIs. The answers themselves
    /// are in the response body (`response`). Optional and additive (empty
    /// for a response that is not one, or was cut before any answer began):
    /// an older reader ignores it and misreads nothing.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub choices: Vec<Choice>,
}

/// How one answer of a gateway response ended ([`ModelCall::choices`]),
/// in the provider's words.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Choice {
    /// The choice's `index` (0 for the APIs that give one answer).
    pub index: u64,
    /// Why it stopped: a chat choice's `finish_reason`, a message's
    /// `stop_reason`, a response's `status`; `None` while none arrived.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_reason: Option<String>,
    /// The provider's details of the stop, verbatim: Anthropic's
    /// `stop_details` (a refusal's `category` and `explanation`), a
    /// response's `incomplete_details`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_details: Option<serde_json::Value>,
    /// A chat choice's refusal text (`refusal`), verbatim.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refusal: Option<String>,
}

/// Whether a response reached its client.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Delivered {
    /// The client was connected for the final event.
    #[default]
    Complete,
    /// The client went away first; the response was read to its end and
    /// kept (the money was spent), for its retry.
    ClientGone,
}

/// One block of extended thinking, kept byte for byte.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Thinking {
    /// Thinking text and its signature.
    Thinking {
        /// The text.
        thinking: String,
        /// The signature (opaque).
        #[serde(default)]
        signature: String,
    },
    /// Encrypted thinking, opaque.
    RedactedThinking {
        /// The payload.
        data: String,
    },
}

/// Reasoning from an OpenAI-compatible server.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reasoning {
    /// The reasoning text.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
    /// The field that carried it (`reasoning_content`, `reasoning`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// `reasoning_details` items as the server sent them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<serde_json::Value>,
}

/// A tool call about to be dispatched.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolStart {
    /// The call id.
    pub call: String,
    /// The tool name.
    pub name: String,
}

/// How a tool call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// It succeeded.
    Ok,
    /// It failed.
    Error,
    /// It was in flight when the process died and was not re-run.
    Unknown,
    /// A person declined it; it was not run.
    Refused,
}

/// A tool call's outcome.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    /// The call id.
    pub call: String,
    /// ok | error | unknown | refused.
    pub outcome: Outcome,
    /// What the tool printed, or why the outcome is unknown.
    pub output: String,
}

/// A workspace boundary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Snapshot id.
    pub snapshot: String,
    /// Its label, e.g. `post:turn:3`.
    pub label: String,
}

/// Paths that changed while nothing of the run executed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reconcile {
    /// The changed paths (empty when none, or when `unknown` says why they
    /// could not be listed).
    pub changed: Vec<String>,
    /// The `resume:` snapshot that captured them.
    #[serde(default)]
    pub snapshot: Option<String>,
    /// Why the change list is unknown (a manifest that did not read): then
    /// `changed` is empty and means nothing. Schema version 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown: Option<String>,
    /// A VM session's guest restored from a checkpoint: what the host saw
    /// after the checkpoint that the restored guest has not. Schema version 4.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<Rollback>,
}

/// What a machine restore rolled back (DESIGN §13, the two ledgers): the
/// host's record after the checkpoint, which the guest, woken at the
/// checkpoint, does not remember.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rollback {
    /// The checkpoint the guest was restored from.
    pub checkpoint: String,
    /// The journal seq the checkpoint was taken at.
    pub at_seq: u64,
    /// Model calls journaled after the checkpoint (their seqs): paid for
    /// already, served again as replays when the guest retries them.
    #[serde(default)]
    pub model_calls: Vec<u64>,
    /// How many lines the guest wrote on its console after the checkpoint.
    #[serde(default)]
    pub console_lines: u64,
    /// The last of those lines (at most a few, each cut short): what the
    /// guest was doing when its work was rolled back.
    #[serde(default)]
    pub console_tail: Vec<String>,
}

/// One event of a VM session's guest (DESIGN §13). Schema version 4.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    /// What happened.
    pub event: MachineEvent,
    /// The checkpoint restored from (`restored`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
    /// The qemu process (`started`, `restored`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// More, for a person: the accelerator, why it died.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// What happened to a guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MachineEvent {
    /// Booted.
    Started,
    /// Started from a checkpoint.
    Restored,
    /// Stopped by `cairn vm stop`.
    Stopped,
    /// Found gone without a stop.
    Died,
}

/// Workspace versioning of a stretch of work stopped: from here on its
/// file changes are not captured, so a rewind cannot undo them. Schema
/// version 2.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Versioning {
    /// What the state is now; only `off` is written.
    pub state: VersioningState,
    /// The boundary whose capture failed, e.g. `pre:turn:1`.
    #[serde(default)]
    pub at: Option<String>,
    /// Why, and what to do about it.
    pub reason: String,
}

/// Whether workspace versioning is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VersioningState {
    /// Captures stopped.
    Off,
}

/// A checkpoint of this run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointRef {
    /// Checkpoint id.
    pub checkpoint: String,
    /// SHA-256 (lowercase hex) of the checkpoint manifest's exact bytes: the
    /// chain then vouches for the manifest, so one changed afterwards is
    /// detected. Absent in records written before cairn recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<String>,
}

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

impl Record {
    /// Parses one line (without its newline).
    ///
    /// Equivalent to deserialising [`Record`], but without serde's buffering
    /// of a flattened, internally tagged body: the header is read first, then
    /// the body struct its `kind` names is read from the same bytes (unknown
    /// fields, the header's among them, are ignored).
    ///
    /// # Errors
    /// The line is not UTF-8 (JSON text is, and serde refuses such a line
    /// even where the bytes are in a field this build ignores), or not a
    /// record of a known kind with its fields.
    pub fn from_line(line: &[u8]) -> Result<Record, serde_json::Error> {
        use serde_json::from_str as parse;
        let line = std::str::from_utf8(line).map_err(|e| {
            <serde_json::Error as serde::de::Error>::custom(format!("the line is not UTF-8: {e}"))
        })?;
        #[derive(Deserialize)]
        struct Head<'a> {
            v: u32,
            seq: u64,
            prev: ChainHash,
            ts: String,
            #[serde(borrow)]
            kind: std::borrow::Cow<'a, str>,
        }
        let h: Head = parse(line)?;
        let body = match &*h.kind {
            "meta" => RecordBody::Meta(Box::new(parse(line)?)),
            "user" => RecordBody::User(parse(line)?),
            "assistant" => RecordBody::Assistant(parse(line)?),
            "tool_start" => RecordBody::ToolStart(parse(line)?),
            "tool_result" => RecordBody::ToolResult(parse(line)?),
            "snapshot" => RecordBody::Snapshot(parse(line)?),
            "reconcile" => RecordBody::Reconcile(parse(line)?),
            "checkpoint" => RecordBody::Checkpoint(parse(line)?),
            "override" => RecordBody::Override(parse(line)?),
            "versioning" => RecordBody::Versioning(parse(line)?),
            "model_call" => RecordBody::ModelCall(parse(line)?),
            "machine" => RecordBody::Machine(parse(line)?),
            "terminal" => RecordBody::Terminal(parse(line)?),
            other => {
                return Err(serde::de::Error::custom(format!(
                    "unknown record kind `{other}`"
                )))
            }
        };
        Ok(Record {
            v: h.v,
            seq: h.seq,
            prev: h.prev,
            ts: h.ts,
            body,
        })
    }
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
