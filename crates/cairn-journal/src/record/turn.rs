//! The records of a turn: the person's message, the model's answer with its tool calls, thinking and reasoning, and each call's start and result.

use serde::{Deserialize, Serialize};

use super::Cost;

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
    pub(super) fn version(&self) -> u32 {
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
    /// For a tool of an MCP server (DESIGN §17): the server, the tool's own
    /// name there, and the hints it declared when the call was made, which
    /// decide what a resume does with the call if it was in flight.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp: Option<McpCall>,
}

/// Which MCP server tool a call went to, and what the tool declared then.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpCall {
    /// The server's name in the run's `mcpServers` configuration.
    pub server: String,
    /// The tool's name on that server.
    pub tool: String,
    /// The tool's annotations at call time.
    pub hints: ToolHints,
}

/// An MCP tool's annotations (`readOnlyHint`, `destructiveHint`,
/// `idempotentHint`, `openWorldHint`), with the protocol's defaults filled
/// in for any it left out: not read-only, destructive, not idempotent, open
/// world.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolHints {
    /// It changes nothing.
    pub read_only: bool,
    /// It may destroy or overwrite (meaningful only when not read-only).
    pub destructive: bool,
    /// Calling it again with the same arguments changes nothing more.
    pub idempotent: bool,
    /// It reaches beyond a closed world (the network, other people).
    pub open_world: bool,
}

impl ToolHints {
    /// Whether a call in flight at a crash may run again on resume
    /// (DESIGN §4.4, §17): only a read-only or idempotent tool's.
    pub fn rerun_safe(&self) -> bool {
        self.read_only || self.idempotent
    }
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
