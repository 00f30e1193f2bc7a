//! Model providers for cairn's agent loop.
//!
//! This crate turns a provider-neutral conversation ([`ModelRequest`]: a system
//! prompt, [`Message`]s, [`ToolSpec`]s) into one model turn ([`ModelResponse`]: text,
//! [`ToolCall`]s, [`Usage`]) through a [`Provider`]. There are three:
//!
//! - `script:PATH` ([`ScriptProvider`]) replays a file of turns, for tests, demos
//!   and offline runs (a turn may also carry a stop reason, a refusal, thinking
//!   blocks and reasoning, to test what an agent does with them);
//! - `openai:MODEL` ([`OpenAiProvider`]) speaks streamed Chat Completions to OpenAI or
//!   any compatible server (OpenRouter, Ollama, llama.cpp, vLLM);
//! - `openai-responses:MODEL` ([`OpenAiResponsesProvider`]) speaks OpenAI's
//!   streamed Responses API (reasoning models, Codex models), statelessly:
//!   reasoning comes back encrypted and goes back with each request;
//! - `anthropic:MODEL` ([`AnthropicProvider`]) speaks the streamed Messages API.
//!
//! # Guarantees
//!
//! - Text reaches the [`StreamSink`] in order as it arrives, and
//!   [`ModelResponse::text`] is exactly what was streamed. If a stream breaks and
//!   the request is retried, the sink is told ([`StreamSink::restart`]) before the
//!   text is sent again.
//! - A response is what the model said. A refusal is kept
//!   ([`ModelResponse::refusal`], [`Stop::Refused`]); a response cut off by the
//!   output limit says so ([`Stop::Truncated`]) and keeps a cut tool call's
//!   arguments exactly as received, never as a JSON object to run; Anthropic
//!   thinking blocks ([`Thinking`]), the reasoning of OpenAI-compatible
//!   servers ([`Reasoning`]) and the Responses API's output items
//!   ([`ModelResponse::items`]) are kept byte for byte and passed back on
//!   later requests as each API requires, and so is a tool call's arguments'
//!   own text ([`ToolCall::raw_arguments`]) (the rules are in
//!   [`AnthropicProvider`], [`OpenAiProvider`] and [`OpenAiResponsesProvider`]);
//!   the provider's stop details ([`ModelResponse::stop_details`]: a
//!   refusal's category and explanation) are kept verbatim.
//! - Transient failures (HTTP 408, 409, 429, 5xx, connection errors, a stream cut
//!   short) are retried with exponential backoff and jitter per [`RetryPolicy`],
//!   honouring `Retry-After`. Refusals (400, 401, 403, 404, ...) fail at once.
//! - A stream that ends, or breaks, before its end marker is accepted when its
//!   response is complete — Anthropic: a stop reason arrived (a block the
//!   output limit left open does not count against it); OpenAI: a finish
//!   reason arrived; Responses: its final event, `response.completed` or
//!   `response.incomplete`, arrived — and is requested again only when the
//!   model had not finished: a whole answer, cut off by the output limit or
//!   not, is not
//!   bought twice.
//! - The usage is read wherever the provider puts it (OpenAI-compatible
//!   servers: [`chat_completion_usage`]); when none arrived,
//!   [`ModelResponse::usage`] is `None`, never a zero that would look free.
//! - A chat completion answering several choices (`n` above 1) is refused
//!   ([`ModelError::SeveralChoices`]): cairn asks for one answer a turn and
//!   keeps all of what it is given.
//! - API keys come only from `OPENAI_API_KEY` / `ANTHROPIC_API_KEY` (or an explicit
//!   constructor argument), read once when the provider is built; they never
//!   appear in logs, errors or `Debug` output.
//! - Tool-call arguments that are not valid JSON are kept as a JSON string rather
//!   than failing the turn.
//! - Every [`ModelError`] says what went wrong and what to do about it.
//!
//! It does not know about journals, prices or terminals: it neither stores
//! responses, nor prices usage, nor draws anything. Streaming output is drawn by
//! whoever implements [`StreamSink`]; logging goes through `tracing`.
//!
//! # Example
//!
//! ```
//! use cairn_model::{provider_from_spec, Message, ModelRequest, ModelSpec, ProviderConfig};
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let path = dir.path().join("turns.json");
//! std::fs::write(&path, r#"{"turns": [{"text": "Hello there", "usage": {"input_tokens": 3, "output_tokens": 2}}]}"#)?;
//!
//! let spec: ModelSpec = format!("script:{}", path.display()).parse()?;
//! let provider = provider_from_spec(&spec, None, &ProviderConfig::default())?;
//! let request = ModelRequest {
//!     turn: 1,
//!     messages: vec![Message::user("Say hello")],
//!     ..ModelRequest::default()
//! };
//! let mut streamed = String::new();
//! let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
//! let response = runtime.block_on(provider.complete(&request, &mut streamed))?;
//! assert_eq!(streamed, "Hello there");
//! assert_eq!(response.text, "Hello there");
//! assert_eq!(response.usage.map(|u| u.total()), Some(5));
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod anthropic;
#[doc(hidden)]
pub mod decode;
mod error;
mod http;
mod message;
mod openai;
mod provider;
mod responses;
mod script;
#[cfg(test)]
mod split_tests;
mod sse;
mod usage;

pub use crate::anthropic::{
    AnthropicProvider, ANTHROPIC_DEFAULT_BASE_URL, ANTHROPIC_DEFAULT_MAX_TOKENS, ANTHROPIC_VERSION,
};
pub use crate::error::ModelError;
pub use crate::http::parse_base_url;
pub use crate::message::{
    Message, ModelRequest, ModelResponse, NullSink, Reasoning, Stop, StreamSink, Thinking,
    ToolCall, ToolSpec, Usage, REFUSAL_WITHOUT_TEXT,
};
pub use crate::openai::{OpenAiProvider, OPENAI_DEFAULT_BASE_URL};
pub use crate::provider::{
    provider_from_spec, ModelSpec, Provider, ProviderConfig, ProviderKind, RetryPolicy,
};
pub use crate::responses::{OpenAiResponsesProvider, RESPONSES_INCLUDE};
pub use crate::script::ScriptProvider;
pub use crate::sse::{FramedEvent, SseEvent, SseFramer, SseParser, SSE_MAX_EVENT};
pub use crate::usage::chat_completion_usage;
