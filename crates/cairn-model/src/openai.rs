//! OpenAI-compatible Chat Completions, streamed: OpenAI, OpenRouter, Ollama,
//! llama.cpp, vLLM and anything else that speaks `POST {base}/chat/completions`.
//!
//! This file maps requests; `stream.rs` decodes the response stream.

mod stream;

use reqwest::header::{HeaderMap, AUTHORIZATION};
use serde_json::{json, Map, Value};

use crate::error::ModelError;
use crate::http::{is_host, parse_base_url, trimmed, ApiKey, Http};
use crate::message::{Message, ModelRequest, ModelResponse, Reasoning, StreamSink};
use crate::provider::{env_var, Provider, ProviderConfig};

pub(crate) use self::stream::ChatDecoder;

/// The official endpoint, used when no base URL is given.
pub const OPENAI_DEFAULT_BASE_URL: &str = "https://api.openai.com/v1";

const PROVIDER: &str = "openai";
const KEY_VAR: &str = "OPENAI_API_KEY";
const OFFICIAL_HOST: &str = "api.openai.com";

/// A provider speaking the OpenAI Chat Completions API with `stream: true`.
///
/// The mapping, in order:
///
/// 1. The system prompt becomes the first `system` message.
/// 2. User text becomes a `user` message; an assistant turn becomes an `assistant`
///    message whose tool calls are `{"id", "type": "function", "function": {"name",
///    "arguments"}}` with the arguments as a JSON string, exactly as the model
///    wrote them ([`ToolCall::arguments_text`](crate::ToolCall::arguments_text));
///    a tool result becomes a
///    `tool` message with its `tool_call_id` (Chat Completions has no error flag, so
///    `is_error` is not sent; the output should say what failed).
/// 3. Tools become `{"type": "function", "function": {"name", "description",
///    "parameters"}}`.
/// 4. `max_output_tokens` is sent as `max_completion_tokens` to api.openai.com and as
///    `max_tokens` to other servers, which mostly know only the older name.
/// 5. `thinking` other than `off` is sent as `reasoning_effort` (`on` means `medium`).
/// 6. An assistant turn's [`Reasoning`] is passed back on its message:
///    - its `reasoning_details`, when it has them, exactly as received, on every
///      assistant message: OpenRouter keeps reasoning across tool calls this
///      way and wants the items unmodified and in order;
///    - otherwise its reasoning text, under the field it came in
///      (`reasoning_content` or `reasoning`; any other name is not sent),
///      on the assistant messages of
///      every round (the messages between two user messages) in which the
///      model called a tool, the current tool loop included. DeepSeek's and
///      Moonshot's thinking modes refuse (HTTP 400) a later request that lacks
///      a tool-calling round's `reasoning_content`, and gpt-oss servers want
///      the current tool loop's reasoning back. Rounds without tool calls get
///      none: DeepSeek ignores it there, and `deepseek-reasoner` refuses it;
///    - a tool-calling assistant message of such a round whose turn streamed
///      no reasoning gets `"reasoning_content": ""` when the conversation's
///      reasoning came as `reasoning_content`, since those servers refuse a
///      tool call without the field.
///
/// What the response holds is the decoder's business: see
/// [`ModelResponse`] and the rules in the `stream` module (refusals, finish
/// reasons, reasoning fields, the completeness rule).
///
/// The base URL is used as the official SDK uses it: requests go to
/// `{base}/chat/completions`, so it normally ends in `/v1`. A base URL with no path
/// at all (`http://localhost:11434`) gets `/v1` added.
#[derive(Debug)]
pub struct OpenAiProvider {
    http: Http,
    model: String,
    base_url: String,
    endpoint: String,
    official: bool,
    key: Option<ApiKey>,
}

/// An OpenAI-compatible base URL: `base_url`, else api.openai.com's; a
/// bare host gets the `/v1` path every such server serves under (Chat
/// Completions and Responses alike).
///
/// # Errors
/// [`ModelError::InvalidBaseUrl`].
pub(crate) fn openai_base_url(base_url: Option<&str>) -> Result<reqwest::Url, ModelError> {
    let mut url = parse_base_url(base_url.unwrap_or(OPENAI_DEFAULT_BASE_URL))?;
    if url.path().trim_end_matches('/').is_empty() {
        url.set_path("/v1");
    }
    Ok(url)
}

impl OpenAiProvider {
    /// Builds the provider from the environment: the base URL is `base_url`, else
    /// `OPENAI_BASE_URL`, else [`OPENAI_DEFAULT_BASE_URL`]; the key is
    /// `OPENAI_API_KEY`.
    ///
    /// # Errors
    ///
    /// As [`OpenAiProvider::new`].
    pub fn from_env(
        model: &str,
        base_url: Option<&str>,
        config: &ProviderConfig,
    ) -> Result<OpenAiProvider, ModelError> {
        let base_url = crate::ProviderKind::OpenAi.base_url_or_env(base_url);
        OpenAiProvider::new(model, base_url.as_deref(), env_var(KEY_VAR), config)
    }

    /// Builds the provider with an explicit key, reading no environment variable.
    /// With `base_url` `None`, requests go to [`OPENAI_DEFAULT_BASE_URL`].
    ///
    /// # Errors
    ///
    /// [`ModelError::MissingApiKey`] when the key is `None` and the host is
    /// api.openai.com (local servers need no key, and then no `Authorization` header
    /// is sent); [`ModelError::InvalidBaseUrl`]; [`ModelError::InvalidApiKey`].
    pub fn new(
        model: impl Into<String>,
        base_url: Option<&str>,
        api_key: Option<String>,
        config: &ProviderConfig,
    ) -> Result<OpenAiProvider, ModelError> {
        let url = openai_base_url(base_url)?;
        let base_url = trimmed(&url);
        let official = is_host(&url, OFFICIAL_HOST);
        let key = ApiKey::resolve(KEY_VAR, "Bearer ", api_key, official)?;
        Ok(OpenAiProvider {
            http: Http::new(config, PROVIDER, KEY_VAR)?,
            model: model.into(),
            endpoint: format!("{base_url}/chat/completions"),
            base_url,
            official,
            key,
        })
    }
}

#[async_trait::async_trait]
impl Provider for OpenAiProvider {
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
        let body = chat_body(&self.model, request, self.official);
        let mut headers = HeaderMap::new();
        if let Some(key) = &self.key {
            headers.insert(AUTHORIZATION, key.header());
        }
        self.http
            .stream(
                || self.http.post(&self.endpoint, &headers, &body),
                || ChatDecoder::new(&self.model),
                sink,
            )
            .await
    }
}

/// The Chat Completions request body for `request`.
fn chat_body(model: &str, request: &ModelRequest, official: bool) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = &request.system {
        messages.push(json!({"role": "system", "content": system}));
    }
    messages.extend(chat_messages(&request.messages));
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("messages".into(), Value::Array(messages));
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "function": {
                        "name": tool.name,
                        "description": tool.description,
                        "parameters": tool.parameters,
                    },
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    if let Some(max) = request.max_output_tokens {
        let field = if official {
            "max_completion_tokens"
        } else {
            "max_tokens"
        };
        body.insert(field.into(), json!(max));
    }
    if let Some(effort) = reasoning_effort(request.thinking.as_deref()) {
        body.insert("reasoning_effort".into(), json!(effort));
    }
    Value::Object(body)
}

/// The `reasoning_effort` a thinking mode asks for (rule 5); shared with the
/// Responses API's `reasoning.effort`.
pub(crate) fn reasoning_effort(thinking: Option<&str>) -> Option<String> {
    let thinking = thinking?.trim().to_ascii_lowercase();
    match thinking.as_str() {
        "" | "off" => None,
        "on" => Some("medium".to_owned()),
        _ => Some(thinking),
    }
}

/// The field DeepSeek and Moonshot stream reasoning in, and require back.
const REASONING_CONTENT: &str = "reasoning_content";

/// The conversation as Chat Completions messages, reasoning passed back per
/// rule 6 of [`OpenAiProvider`].
fn chat_messages(messages: &[Message]) -> Vec<Value> {
    let tool_rounds = tool_rounds(messages);
    let field = messages.iter().rev().find_map(|message| match message {
        Message::Assistant {
            reasoning: Some(reasoning),
            ..
        } => reasoning.field.as_deref(),
        _ => None,
    });
    messages
        .iter()
        .zip(tool_rounds)
        .map(|(message, in_tool_round)| chat_message(message, in_tool_round, field))
        .collect()
}

/// For each message, whether it belongs to a round — the messages between two
/// user messages — in which the model called a tool.
fn tool_rounds(messages: &[Message]) -> Vec<bool> {
    let mut rounds = vec![false; messages.len()];
    let mut start = 0;
    for end in 0..=messages.len() {
        if end < messages.len() && !matches!(messages[end], Message::User { .. }) {
            continue;
        }
        let called = messages[start..end].iter().any(|message| {
            matches!(message, Message::Assistant { tool_calls, .. } if !tool_calls.is_empty())
        });
        rounds[start..end].fill(called);
        start = end + 1;
    }
    rounds
}

fn chat_message(message: &Message, in_tool_round: bool, field: Option<&str>) -> Value {
    match message {
        Message::User { text } => json!({"role": "user", "content": text}),
        Message::Assistant {
            text,
            tool_calls,
            reasoning,
            ..
        } => {
            let mut out = Map::new();
            out.insert("role".into(), json!("assistant"));
            let content = if text.is_empty() && !tool_calls.is_empty() {
                Value::Null
            } else {
                json!(text)
            };
            out.insert("content".into(), content);
            if !tool_calls.is_empty() {
                let calls = tool_calls
                    .iter()
                    .map(|call| {
                        json!({
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": call.arguments_text()},
                        })
                    })
                    .collect();
                out.insert("tool_calls".into(), Value::Array(calls));
            }
            let calls_tools = !tool_calls.is_empty();
            pass_back_reasoning(
                &mut out,
                reasoning.as_ref(),
                in_tool_round,
                calls_tools,
                field,
            );
            Value::Object(out)
        }
        Message::ToolResult {
            call_id, output, ..
        } => json!({"role": "tool", "tool_call_id": call_id, "content": output}),
    }
}

/// Puts an assistant turn's reasoning back on its message (rule 6 of
/// [`OpenAiProvider`]); `field` is the conversation's reasoning field.
fn pass_back_reasoning(
    out: &mut Map<String, Value>,
    reasoning: Option<&Reasoning>,
    in_tool_round: bool,
    calls_tools: bool,
    field: Option<&str>,
) {
    let Some(reasoning) = reasoning.filter(|r| !r.is_empty()) else {
        if in_tool_round && calls_tools && field == Some(REASONING_CONTENT) {
            out.insert(REASONING_CONTENT.into(), json!(""));
        }
        return;
    };
    if !reasoning.details.is_empty() {
        out.insert(
            "reasoning_details".into(),
            Value::Array(reasoning.details.clone()),
        );
        return;
    }
    if !in_tool_round || reasoning.text.is_empty() {
        return;
    }
    // The name is recorded data: only a reasoning field may be set by it.
    let known = |f: &&str| stream::REASONING_FIELDS.contains(f);
    if let Some(field) = reasoning.field.as_deref().filter(known) {
        out.insert(field.to_owned(), json!(reasoning.text));
    }
}

#[cfg(test)]
mod tests;
