//! The Anthropic Messages API, streamed.

use std::collections::BTreeMap;

use reqwest::header::{HeaderMap, HeaderValue};
use serde_json::{json, Map, Value};

use crate::error::{excerpt, ModelError};
use crate::http::{is_host, parse_base_url, trimmed, ApiKey, Decoder, Failure, Http, Step};
use crate::message::{
    parse_arguments, Message, ModelRequest, ModelResponse, StreamSink, ToolCall, Usage,
};
use crate::provider::{env_var, Provider, ProviderConfig};
use crate::sse::SseEvent;

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
/// 2. User text becomes a `text` block, an assistant turn `text` and `tool_use`
///    blocks (non-object arguments are wrapped as `{"value": ...}`), a tool result a
///    `tool_result` block in a user message. Messages of the same role in a row are
///    merged into one, with `tool_result` blocks first; empty text is dropped.
/// 3. Tools become `{"name", "description", "input_schema"}`.
/// 4. `max_tokens` is `max_output_tokens`, else [`ANTHROPIC_DEFAULT_MAX_TOKENS`] (plus
///    the thinking budget when thinking is on).
/// 5. `thinking` of `low`, `medium`/`on`, `high` or a number sends a thinking budget of
///    2048, 4096, 8192 or that many tokens, kept below `max_tokens`. Thinking blocks
///    are not part of the conversation model, and the API refuses a tool-use loop
///    whose assistant turns lack them, so thinking is sent only when the last
///    assistant message made no tool calls.
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
    let budget = thinking_budget(request.thinking.as_deref()).filter(|_| {
        let last_assistant = request.messages.iter().rev().find_map(|m| match m {
            Message::Assistant { tool_calls, .. } => Some(tool_calls.is_empty()),
            _ => None,
        });
        last_assistant.unwrap_or(true)
    });
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
    body.insert(
        "messages".into(),
        Value::Array(api_messages(&request.messages)),
    );
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
            blocks.sort_by_key(|b| b["type"] != "tool_result");
            json!({"role": role, "content": blocks})
        })
        .collect()
}

fn content_blocks(message: &Message) -> (&'static str, Vec<Value>) {
    let text_block = |text: &str| (!text.is_empty()).then(|| json!({"type": "text", "text": text}));
    match message {
        Message::User { text } => ("user", text_block(text).into_iter().collect()),
        Message::Assistant {
            text, tool_calls, ..
        } => {
            let mut blocks: Vec<Value> = text_block(text).into_iter().collect();
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

/// One content block being assembled.
enum Block {
    Text,
    ToolUse {
        id: String,
        name: String,
        initial: Value,
        json: String,
    },
    Other,
}

/// Assembles a streamed Messages response.
struct MessagesDecoder {
    text: String,
    blocks: BTreeMap<u64, Block>,
    usage: Usage,
    model: String,
    stop_reason: Option<String>,
}

impl MessagesDecoder {
    fn new(model: &str) -> MessagesDecoder {
        MessagesDecoder {
            text: String::new(),
            blocks: BTreeMap::new(),
            usage: Usage::default(),
            model: model.to_owned(),
            stop_reason: None,
        }
    }

    fn emit(&mut self, text: &str, sink: &mut dyn StreamSink) {
        if !text.is_empty() {
            sink.text(text);
            self.text.push_str(text);
        }
    }
}

/// Every prompt token of a `usage` object: plain, cache creation and cache read.
fn input_tokens(usage: &Value) -> Option<u64> {
    let count = |field: &str| usage.get(field).and_then(Value::as_u64);
    let plain = count("input_tokens")?;
    let cached = count("cache_creation_input_tokens").unwrap_or(0)
        + count("cache_read_input_tokens").unwrap_or(0);
    Some(plain + cached)
}

impl Decoder for MessagesDecoder {
    type Output = ModelResponse;

    const END_MARKER: &'static str = "`message_stop`";

    fn event(&mut self, event: SseEvent, sink: &mut dyn StreamSink) -> Result<Step, Failure> {
        let data: Value = serde_json::from_str(&event.data).map_err(|e| ModelError::Protocol {
            provider: PROVIDER,
            message: format!("a stream event is not JSON ({e}): {}", excerpt(&event.data)),
        })?;
        let kind = data
            .get("type")
            .and_then(Value::as_str)
            .unwrap_or(&event.event);
        let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
        match kind {
            "message_start" => {
                let message = &data["message"];
                if let Some(model) = message.get("model").and_then(Value::as_str) {
                    self.model = model.to_owned();
                }
                let usage = &message["usage"];
                self.usage.input_tokens = input_tokens(usage).unwrap_or(0);
                self.usage.output_tokens = usage["output_tokens"].as_u64().unwrap_or(0);
            }
            "content_block_start" => {
                let block = &data["content_block"];
                let started = match block.get("type").and_then(Value::as_str) {
                    Some("text") => {
                        let text = block.get("text").and_then(Value::as_str).unwrap_or("");
                        self.emit(text, sink);
                        Block::Text
                    }
                    Some("tool_use") => Block::ToolUse {
                        id: block["id"].as_str().unwrap_or("").to_owned(),
                        name: block["name"].as_str().unwrap_or("").to_owned(),
                        initial: block.get("input").cloned().unwrap_or(Value::Null),
                        json: String::new(),
                    },
                    _ => Block::Other,
                };
                self.blocks.insert(index, started);
            }
            "content_block_delta" => {
                let delta = &data["delta"];
                match delta.get("type").and_then(Value::as_str) {
                    Some("text_delta") => {
                        let text = delta["text"].as_str().unwrap_or("");
                        self.emit(text, sink);
                    }
                    Some("input_json_delta") => {
                        if let Some(Block::ToolUse { json, .. }) = self.blocks.get_mut(&index) {
                            json.push_str(delta["partial_json"].as_str().unwrap_or(""));
                        }
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = data["delta"]["stop_reason"].as_str() {
                    self.stop_reason = Some(reason.to_owned());
                }
                let usage = &data["usage"];
                if let Some(output) = usage["output_tokens"].as_u64() {
                    self.usage.output_tokens = output;
                }
                if let Some(input) = input_tokens(usage) {
                    self.usage.input_tokens = input;
                }
            }
            "message_stop" => return Ok(Step::Done),
            "error" => return Err(stream_error(&data["error"])),
            _ => {}
        }
        Ok(Step::Continue)
    }

    fn finish(self) -> ModelResponse {
        let tool_calls = self
            .blocks
            .into_values()
            .filter_map(|block| match block {
                Block::ToolUse {
                    id,
                    name,
                    initial,
                    json,
                } => {
                    let arguments = if json.is_empty() && initial.is_object() {
                        initial
                    } else {
                        parse_arguments(&json)
                    };
                    Some(ToolCall {
                        id,
                        name,
                        arguments,
                    })
                }
                Block::Text | Block::Other => None,
            })
            .collect();
        ModelResponse {
            text: self.text,
            tool_calls,
            usage: self.usage,
            model: self.model,
            stop: crate::Stop::from_reason(self.stop_reason.as_deref()),
            stop_reason: self.stop_reason,
            ..ModelResponse::default()
        }
    }
}

/// An `error` event. Overload, rate-limit and server errors are retried.
fn stream_error(error: &Value) -> Failure {
    let kind = error["type"].as_str().unwrap_or("error").to_owned();
    let message = excerpt(error["message"].as_str().unwrap_or(""));
    match kind.as_str() {
        "overloaded_error" | "api_error" | "rate_limit_error" => Failure::Retry {
            detail: format!("error in stream ({kind}): {message}"),
            retry_after: None,
        },
        _ => Failure::Fatal(ModelError::Api {
            provider: PROVIDER,
            kind,
            message,
        }),
    }
}

#[cfg(test)]
mod tests;
