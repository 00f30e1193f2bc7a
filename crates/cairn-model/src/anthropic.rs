//! The Anthropic Messages API, streamed.
//!
//! This file maps requests; `stream.rs` decodes the response stream.

mod stream;
mod wire;

use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{json, Map, Value};

use crate::error::ModelError;
use crate::http::{is_host, parse_base_url, trimmed, ApiKey, Http};
use crate::message::{Message, ModelRequest, ModelResponse, StreamSink, Thinking};
use crate::provider::{env_var, Provider, ProviderConfig};

pub(crate) use self::stream::MessagesDecoder;

/// The official endpoint, used when no base URL is given.
pub const ANTHROPIC_DEFAULT_BASE_URL: &str = "https://api.anthropic.com";

/// The `anthropic-version` header sent with every request.
pub const ANTHROPIC_VERSION: &str = "2023-06-01";

/// `max_tokens` when the request sets no `max_output_tokens` (the API requires one).
pub const ANTHROPIC_DEFAULT_MAX_TOKENS: u32 = 8192;

const PROVIDER: &str = "anthropic";
const KEY_VAR: &str = "ANTHROPIC_API_KEY";
const OFFICIAL_HOST: &str = "api.anthropic.com";
const MIN_THINKING_BUDGET: u32 = 1024;

/// A provider speaking the Anthropic Messages API with `stream: true`.
///
/// The mapping, in order:
///
/// 1. The system prompt becomes the top-level `system` field.
/// 2. User text becomes a `text` block, an assistant turn its thinking blocks
///    (`thinking` with its `signature`, `redacted_thinking` with its `data`),
///    exactly as received and in order, then `text` and `tool_use` blocks
///    whose `input` is the model's own text of it, byte for byte, when the
///    call kept one ([`ToolCall::raw_arguments`](crate::ToolCall::raw_arguments);
///    non-object arguments are wrapped as `{"value": ...}`), a tool result a
///    `tool_result` block in a user message. Messages of the same role in a row
///    are merged into one, with `tool_result` blocks first in a user message and
///    thinking blocks first in an assistant message; empty text is dropped.
/// 3. Tools become `{"name", "description", "input_schema"}`.
/// 4. `max_tokens` is `max_output_tokens`, else [`ANTHROPIC_DEFAULT_MAX_TOKENS`] (plus
///    the thinking budget when thinking is on).
/// 5. `thinking` of `low`, `medium`/`on`, `high` or a number sends a thinking budget of
///    2048, 4096, 8192 or that many tokens, kept below `max_tokens`, as
///    `{"type": "enabled", "budget_tokens": N}`: the same parameter on every
///    request, tool loops included, as the API requires (a tool loop is one
///    assistant turn, with one thinking configuration). One exception: when the
///    request continues a tool loop (its last message carries tool results)
///    whose first assistant message has no thinking block — a turn made with
///    thinking off, as in a session resumed with thinking on — the API would
///    refuse `thinking`, so the requests of that loop are sent without it (and
///    without the budget in `max_tokens`); thinking resumes with the next user
///    turn.
///
/// The base URL is used as the official SDK uses it: requests go to
/// `{base}/v1/messages`; a base that already ends in `/v1` has it removed first.
/// Input usage counts every prompt token: `input_tokens` plus the cache creation and
/// cache read tokens.
#[derive(Debug)]
pub struct AnthropicProvider {
    http: Http,
    model: String,
    base_url: String,
    endpoint: String,
    key: Option<ApiKey>,
}

impl AnthropicProvider {
    /// Builds the provider from the environment: the base URL is `base_url`, else
    /// `ANTHROPIC_BASE_URL`, else [`ANTHROPIC_DEFAULT_BASE_URL`]; the key is
    /// `ANTHROPIC_API_KEY`.
    ///
    /// # Errors
    ///
    /// As [`AnthropicProvider::new`].
    pub fn from_env(
        model: &str,
        base_url: Option<&str>,
        config: &ProviderConfig,
    ) -> Result<AnthropicProvider, ModelError> {
        let base_url = crate::ProviderKind::Anthropic.base_url_or_env(base_url);
        AnthropicProvider::new(model, base_url.as_deref(), env_var(KEY_VAR), config)
    }

    /// Builds the provider with an explicit key, reading no environment variable.
    ///
    /// # Errors
    ///
    /// [`ModelError::MissingApiKey`] when the key is `None` and the host is
    /// api.anthropic.com (a proxy or compatible server may do without, and then no
    /// `x-api-key` header is sent); [`ModelError::InvalidBaseUrl`];
    /// [`ModelError::InvalidApiKey`].
    pub fn new(
        model: impl Into<String>,
        base_url: Option<&str>,
        api_key: Option<String>,
        config: &ProviderConfig,
    ) -> Result<AnthropicProvider, ModelError> {
        let mut url = parse_base_url(base_url.unwrap_or(ANTHROPIC_DEFAULT_BASE_URL))?;
        let path = url.path().trim_end_matches('/');
        let path = path.strip_suffix("/v1").unwrap_or(path).to_owned();
        url.set_path(&path);
        let base_url = trimmed(&url);
        let key = ApiKey::resolve(KEY_VAR, "", api_key, is_host(&url, OFFICIAL_HOST))?;
        Ok(AnthropicProvider {
            http: Http::new(config, PROVIDER, KEY_VAR)?,
            model: model.into(),
            endpoint: format!("{base_url}/v1/messages"),
            base_url,
            key,
        })
    }
}

#[async_trait::async_trait]
impl Provider for AnthropicProvider {
    fn kind(&self) -> &'static str {
        PROVIDER
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn base_url(&self) -> Option<&str> {
        Some(&self.base_url)
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        sink: &mut dyn StreamSink,
    ) -> Result<ModelResponse, ModelError> {
        let body = messages_body(&self.model, request);
        let inputs = wire::raw_inputs(&request.messages);
        let body = wire::Wire::new(&body, &inputs);
        let mut headers = HeaderMap::new();
        headers.insert(
            "anthropic-version",
            HeaderValue::from_static(ANTHROPIC_VERSION),
        );
        if let Some(key) = &self.key {
            headers.insert("x-api-key", key.header());
        }
        self.http
            .stream(
                || self.http.post(&self.endpoint, &headers, &body),
                || MessagesDecoder::new(&self.model),
                sink,
            )
            .await
    }
}

/// The Messages request body for `request`.
fn messages_body(model: &str, request: &ModelRequest) -> Value {
    let messages = api_messages(&request.messages);
    let budget = thinking_budget(request.thinking.as_deref())
        .filter(|_| !turn_started_without_thinking(&messages));
    let (max_tokens, budget) = match (request.max_output_tokens, budget) {
        (None, None) => (ANTHROPIC_DEFAULT_MAX_TOKENS, None),
        (None, Some(budget)) => (
            ANTHROPIC_DEFAULT_MAX_TOKENS.saturating_add(budget),
            Some(budget),
        ),
        (Some(max), budget) => {
            let room = max.saturating_sub(MIN_THINKING_BUDGET);
            let budget = budget
                .map(|b| b.min(room))
                .filter(|&b| b >= MIN_THINKING_BUDGET);
            (max, budget)
        }
    };
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("max_tokens".into(), json!(max_tokens));
    body.insert("stream".into(), json!(true));
    if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
        body.insert("system".into(), json!(system));
    }
    body.insert("messages".into(), Value::Array(messages));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "name": tool.name,
                    "description": tool.description,
                    "input_schema": tool.parameters,
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(budget) = budget {
        body.insert(
            "thinking".into(),
            json!({"type": "enabled", "budget_tokens": budget}),
        );
    }
    Value::Object(body)
}

/// Whether the request continues an assistant turn — a tool loop: the last
/// message carries tool results — whose first assistant message has no
/// thinking block. That turn was made with thinking off, and the API refuses a
/// change of thinking configuration within a turn. (Later messages of a turn
/// made with thinking on may lack thinking blocks: without interleaved
/// thinking the model thinks once, at the start of the turn.)
fn turn_started_without_thinking(messages: &[Value]) -> bool {
    let has = |message: &Value, kinds: &[&str]| {
        message["content"]
            .as_array()
            .is_some_and(|blocks| blocks.iter().any(|b| kinds.iter().any(|k| b["type"] == *k)))
    };
    let continues_turn = messages
        .last()
        .is_some_and(|last| last["role"] == "user" && has(last, &["tool_result"]));
    if !continues_turn {
        return false;
    }
    let mut first = None;
    for message in messages.iter().rev() {
        if message["role"] == "assistant" {
            first = Some(message);
        } else if !has(message, &["tool_result"]) {
            break;
        }
    }
    first.is_some_and(|m| !has(m, &["thinking", "redacted_thinking"]))
}

fn thinking_budget(thinking: Option<&str>) -> Option<u32> {
    let thinking = thinking?.trim().to_ascii_lowercase();
    match thinking.as_str() {
        "" | "off" | "none" => None,
        "low" | "minimal" => Some(2048),
        "medium" | "on" => Some(4096),
        "high" => Some(8192),
        other => other.parse::<u32>().ok().filter(|&n| n > 0),
    }
}

/// Maps the conversation to Messages API messages, merging same-role runs.
fn api_messages(messages: &[Message]) -> Vec<Value> {
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in messages {
        let (role, blocks) = content_blocks(message);
        if blocks.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => out.push((role, blocks)),
        }
    }
    out.into_iter()
        .map(|(role, mut blocks)| {
            // Stable: the order within each kind is kept.
            let first = if role == "user" {
                &["tool_result"][..]
            } else {
                &["thinking", "redacted_thinking"][..]
            };
            blocks.sort_by_key(|b| !first.iter().any(|kind| b["type"] == *kind));
            json!({"role": role, "content": blocks})
        })
        .collect()
}

fn content_blocks(message: &Message) -> (&'static str, Vec<Value>) {
    let text_block = |text: &str| (!text.is_empty()).then(|| json!({"type": "text", "text": text}));
    match message {
        Message::User { text } => ("user", text_block(text).into_iter().collect()),
        Message::Assistant {
            text,
            tool_calls,
            thinking,
            ..
        } => {
            let mut blocks: Vec<Value> = thinking.iter().map(thinking_block).collect();
            blocks.extend(text_block(text));
            blocks.extend(tool_calls.iter().map(|call| {
                let input = match &call.arguments {
                    Value::Object(_) => call.arguments.clone(),
                    other => json!({"value": other}),
                };
                json!({"type": "tool_use", "id": call.id, "name": call.name, "input": input})
            }));
            ("assistant", blocks)
        }
        Message::ToolResult {
            call_id,
            output,
            is_error,
            ..
        } => {
            let mut block = Map::new();
            block.insert("type".into(), json!("tool_result"));
            block.insert("tool_use_id".into(), json!(call_id));
            if !output.is_empty() {
                block.insert("content".into(), json!(output));
            }
            if *is_error {
                block.insert("is_error".into(), json!(true));
            }
            ("user", vec![Value::Object(block)])
        }
    }
}

/// A thinking block as the API sent it: `{"type": "thinking", "thinking",
/// "signature"}` or `{"type": "redacted_thinking", "data"}`.
fn thinking_block(block: &Thinking) -> Value {
    match block {
        Thinking::Thinking {
            thinking,
            signature,
        } => json!({"type": "thinking", "thinking": thinking, "signature": signature}),
        Thinking::RedactedThinking { data } => json!({"type": "redacted_thinking", "data": data}),
    }
}

#[cfg(test)]
mod tests;
