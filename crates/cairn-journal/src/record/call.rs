//! The `model_call` record: one call through the gateway.

use serde::{Deserialize, Serialize};

use super::{Cost, Usage};

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
