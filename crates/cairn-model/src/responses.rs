//! OpenAI's Responses API, streamed: `POST {base}/responses`, what OpenAI's
//! reasoning models and Codex speak.
//!
//! This file maps requests; `stream.rs` decodes the response stream.

mod stream;

use reqwest::header::{HeaderMap, AUTHORIZATION};
use serde_json::{json, Map, Value};

use crate::error::ModelError;
use crate::http::{is_host, trimmed, ApiKey, Http};
use crate::message::{Message, ModelRequest, ModelResponse, StreamSink, ToolCall};
use crate::provider::{env_var, Provider, ProviderConfig};

pub(crate) use self::stream::ResponsesDecoder;

const PROVIDER: &str = "openai-responses";
const KEY_VAR: &str = "OPENAI_API_KEY";
const OFFICIAL_HOST: &str = "api.openai.com";

/// What the request asks to get back beside the output: each reasoning
/// item's `encrypted_content`, which is how reasoning survives a tool call
/// when nothing is stored on OpenAI's side.
pub const RESPONSES_INCLUDE: &str = "reasoning.encrypted_content";

/// A provider speaking OpenAI's Responses API with `stream: true`,
/// statelessly: `store: false`, the whole conversation sent each time.
///
/// The mapping, in order:
///
/// 1. The system prompt becomes `instructions`.
/// 2. User text becomes an `input_text` message of role `user`.
/// 3. An assistant turn made by this API goes back as its output items,
///    exactly as the final event of its stream listed them
///    ([`ModelResponse::items`]: reasoning items with their summary and
///    `encrypted_content`, messages, function calls with the arguments as
///    the model wrote them), each without its `id`: with `store: false`
///    nothing is kept under those ids, and the API refuses an item that
///    names one it does not have. A function call that was not run (cut off
///    by the output limit, or not a JSON object) is left out, as the
///    conversation's rules leave it out of every API's history.
/// 4. An assistant turn made by another API (a session that changed
///    provider) goes back as an `output_text` message and `function_call`
///    items (`call_id`, `name`, the arguments' text).
/// 5. A tool result becomes a `function_call_output` paired to its call by
///    `call_id`, its output the tool's text (the API has no error flag: the
///    text says what failed).
/// 6. Tools become `{"type": "function", "name", "description",
///    "parameters", "strict": false}` (strict mode would require every
///    schema to list all properties as required).
/// 7. Every request says `store: false` and `include:
///    ["reasoning.encrypted_content"]` ([`RESPONSES_INCLUDE`]), so reasoning
///    comes back encrypted and goes back with the next request.
/// 8. `max_output_tokens` is sent as `max_output_tokens`; `thinking` other
///    than `off` as `reasoning: {"effort", "summary": "auto"}` (`on` means
///    `medium`).
///
/// What the response holds is the decoder's business: see [`ModelResponse`]
/// and the rules in the `stream` module. The base URL is used as for
/// [`OpenAiProvider`](crate::OpenAiProvider): requests go to
/// `{base}/responses`, `/v1` added to a base URL with no path; the key is
/// `OPENAI_API_KEY`.
#[derive(Debug)]
pub struct OpenAiResponsesProvider {
    http: Http,
    model: String,
    base_url: String,
    endpoint: String,
    key: Option<ApiKey>,
}

impl OpenAiResponsesProvider {
    /// Builds the provider from the environment: the base URL is `base_url`,
    /// else `OPENAI_BASE_URL`, else [`OPENAI_DEFAULT_BASE_URL`](crate::OPENAI_DEFAULT_BASE_URL);
    /// the key is `OPENAI_API_KEY`.
    ///
    /// # Errors
    ///
    /// As [`OpenAiResponsesProvider::new`].
    pub fn from_env(
        model: &str,
        base_url: Option<&str>,
        config: &ProviderConfig,
    ) -> Result<OpenAiResponsesProvider, ModelError> {
        let base_url = crate::ProviderKind::OpenAiResponses.base_url_or_env(base_url);
        OpenAiResponsesProvider::new(model, base_url.as_deref(), env_var(KEY_VAR), config)
    }

    /// Builds the provider with an explicit key, reading no environment
    /// variable.
    ///
    /// # Errors
    ///
    /// [`ModelError::MissingApiKey`] when the key is `None` and the host is
    /// api.openai.com; [`ModelError::InvalidBaseUrl`];
    /// [`ModelError::InvalidApiKey`].
    pub fn new(
        model: impl Into<String>,
        base_url: Option<&str>,
        api_key: Option<String>,
        config: &ProviderConfig,
    ) -> Result<OpenAiResponsesProvider, ModelError> {
        let url = crate::openai::openai_base_url(base_url)?;
        let base_url = trimmed(&url);
        let key = ApiKey::resolve(KEY_VAR, "Bearer ", api_key, is_host(&url, OFFICIAL_HOST))?;
        Ok(OpenAiResponsesProvider {
            http: Http::new(config, PROVIDER, KEY_VAR)?,
            model: model.into(),
            endpoint: format!("{base_url}/responses"),
            base_url,
            key,
        })
    }
}

#[async_trait::async_trait]
impl Provider for OpenAiResponsesProvider {
    fn kind(&self) -> &'static str {
        PROVIDER
    }

    fn vendor(&self) -> &'static str {
        "openai"
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
        let body = responses_body(&self.model, request);
        let mut headers = HeaderMap::new();
        if let Some(key) = &self.key {
            headers.insert(AUTHORIZATION, key.header());
        }
        self.http
            .stream(
                || self.http.post(&self.endpoint, &headers, &body),
                || ResponsesDecoder::new(&self.model),
                sink,
            )
            .await
    }
}

/// The Responses request body for `request`.
fn responses_body(model: &str, request: &ModelRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    if let Some(system) = request.system.as_deref().filter(|s| !s.is_empty()) {
        body.insert("instructions".into(), json!(system));
    }
    body.insert("input".into(), Value::Array(input_items(&request.messages)));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|tool| {
                json!({
                    "type": "function",
                    "name": tool.name,
                    "description": tool.description,
                    "parameters": tool.parameters,
                    "strict": false,
                })
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert("stream".into(), json!(true));
    body.insert("store".into(), json!(false));
    body.insert("include".into(), json!([RESPONSES_INCLUDE]));
    if let Some(max) = request.max_output_tokens {
        body.insert("max_output_tokens".into(), json!(max));
    }
    if let Some(effort) = crate::openai::reasoning_effort(request.thinking.as_deref()) {
        body.insert(
            "reasoning".into(),
            json!({"effort": effort, "summary": "auto"}),
        );
    }
    Value::Object(body)
}

/// The conversation as Responses input items (rules 2–5 of
/// [`OpenAiResponsesProvider`]).
fn input_items(messages: &[Message]) -> Vec<Value> {
    let mut out = Vec::with_capacity(messages.len());
    for message in messages {
        match message {
            Message::User { text } => out.push(json!({
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": text}],
            })),
            Message::Assistant {
                items, tool_calls, ..
            } if !items.is_empty() => {
                out.extend(items.iter().filter_map(|item| sent_back(item, tool_calls)));
            }
            Message::Assistant {
                text, tool_calls, ..
            } => {
                if !text.is_empty() {
                    out.push(json!({
                        "type": "message",
                        "role": "assistant",
                        "content": [{"type": "output_text", "text": text}],
                    }));
                }
                out.extend(tool_calls.iter().map(function_call));
            }
            Message::ToolResult {
                call_id, output, ..
            } => out.push(json!({
                "type": "function_call_output",
                "call_id": call_id,
                "output": output,
            })),
        }
    }
    out
}

/// An output item as it goes back: as received, without its `id`; `None`
/// for a function call that is not among the turn's calls to send (one that
/// was not run).
fn sent_back(item: &Value, calls: &[ToolCall]) -> Option<Value> {
    let Value::Object(fields) = item else {
        return Some(item.clone());
    };
    if fields.get("type").and_then(Value::as_str) == Some("function_call") {
        let call_id = fields.get("call_id").and_then(Value::as_str);
        if !calls.iter().any(|c| Some(c.id.as_str()) == call_id) {
            return None;
        }
    }
    let mut fields = fields.clone();
    fields.remove("id");
    Some(Value::Object(fields))
}

fn function_call(call: &ToolCall) -> Value {
    json!({
        "type": "function_call",
        "call_id": call.id,
        "name": call.name,
        "arguments": call.arguments_text(),
    })
}

#[cfg(test)]
mod tests;
