//! OpenAI-compatible Chat Completions, streamed: OpenAI, OpenRouter, Ollama,
//! llama.cpp, vLLM and anything else that speaks `POST {base}/chat/completions`.

use std::collections::BTreeMap;

use reqwest::header::{HeaderMap, AUTHORIZATION};
use serde_json::{json, Map, Value};

use crate::error::{excerpt, ModelError};
use crate::http::{is_host, parse_base_url, trimmed, ApiKey, Decoder, Failure, Http, Step};
use crate::message::{parse_arguments, Message, ModelRequest, ModelResponse, StreamSink, Usage};
use crate::provider::{env_var, Provider, ProviderConfig};
use crate::sse::SseEvent;

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
///    "arguments"}}` with the arguments as a JSON string; a tool result becomes a
///    `tool` message with its `tool_call_id` (Chat Completions has no error flag, so
///    `is_error` is not sent; the output should say what failed).
/// 3. Tools become `{"type": "function", "function": {"name", "description",
///    "parameters"}}`.
/// 4. `max_output_tokens` is sent as `max_completion_tokens` to api.openai.com and as
///    `max_tokens` to other servers, which mostly know only the older name.
/// 5. `thinking` other than `off` is sent as `reasoning_effort` (`on` means `medium`).
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
        let mut url = parse_base_url(base_url.unwrap_or(OPENAI_DEFAULT_BASE_URL))?;
        if url.path().trim_end_matches('/').is_empty() {
            url.set_path("/v1");
        }
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
    messages.extend(request.messages.iter().map(chat_message));
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

fn reasoning_effort(thinking: Option<&str>) -> Option<String> {
    let thinking = thinking?.trim().to_ascii_lowercase();
    match thinking.as_str() {
        "" | "off" => None,
        "on" => Some("medium".to_owned()),
        _ => Some(thinking),
    }
}

fn chat_message(message: &Message) -> Value {
    match message {
        Message::User { text } => json!({"role": "user", "content": text}),
        Message::Assistant {
            text, tool_calls, ..
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
                        let arguments = match &call.arguments {
                            Value::String(raw) => raw.clone(),
                            other => other.to_string(),
                        };
                        json!({
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": arguments},
                        })
                    })
                    .collect();
                out.insert("tool_calls".into(), Value::Array(calls));
            }
            Value::Object(out)
        }
        Message::ToolResult {
            call_id, output, ..
        } => json!({"role": "tool", "tool_call_id": call_id, "content": output}),
    }
}

/// One tool call being assembled from `delta.tool_calls[]` fragments.
#[derive(Default)]
struct PartialCall {
    id: String,
    name: String,
    arguments: String,
}

/// Assembles a streamed chat completion.
struct ChatDecoder {
    text: String,
    calls: BTreeMap<u64, PartialCall>,
    usage: Usage,
    model: String,
    stop_reason: Option<String>,
}

impl ChatDecoder {
    fn new(model: &str) -> ChatDecoder {
        ChatDecoder {
            text: String::new(),
            calls: BTreeMap::new(),
            usage: Usage::default(),
            model: model.to_owned(),
            stop_reason: None,
        }
    }

    fn tool_fragment(&mut self, position: usize, fragment: &Value) {
        let index = fragment
            .get("index")
            .and_then(Value::as_u64)
            .unwrap_or(position as u64);
        let call = self.calls.entry(index).or_default();
        if let Some(id) = fragment.get("id").and_then(Value::as_str) {
            if call.id.is_empty() {
                call.id = id.to_owned();
            }
        }
        let Some(function) = fragment.get("function") else {
            return;
        };
        if let Some(name) = function.get("name").and_then(Value::as_str) {
            if call.name.is_empty() {
                call.name = name.to_owned();
            }
        }
        match function.get("arguments") {
            Some(Value::String(piece)) => call.arguments.push_str(piece),
            Some(Value::Null) | None => {}
            Some(whole) => call.arguments.push_str(&whole.to_string()),
        }
    }
}

impl Decoder for ChatDecoder {
    type Output = ModelResponse;

    const END_MARKER: &'static str = "`data: [DONE]`";

    fn event(&mut self, event: SseEvent, sink: &mut dyn StreamSink) -> Result<Step, Failure> {
        let data = event.data.trim();
        if data == "[DONE]" {
            return Ok(Step::Done);
        }
        if data.is_empty() {
            return Ok(Step::Continue);
        }
        let chunk: Value = serde_json::from_str(data).map_err(|e| ModelError::Protocol {
            provider: PROVIDER,
            message: format!("a stream event is not JSON ({e}): {}", excerpt(data)),
        })?;
        if let Some(error) = chunk.get("error").filter(|e| !e.is_null()) {
            return Err(stream_error(error));
        }
        if let Some(model) = chunk.get("model").and_then(Value::as_str) {
            if !model.is_empty() {
                self.model = model.to_owned();
            }
        }
        if let Some(usage) = chunk.get("usage").filter(|u| u.is_object()) {
            let count = |field: &str| usage.get(field).and_then(Value::as_u64).unwrap_or(0);
            self.usage = Usage {
                input_tokens: count("prompt_tokens"),
                output_tokens: count("completion_tokens"),
            };
        }
        let choices = chunk.get("choices").and_then(Value::as_array);
        for choice in choices.into_iter().flatten() {
            if choice.get("index").and_then(Value::as_u64).unwrap_or(0) != 0 {
                continue;
            }
            if let Some(delta) = choice.get("delta") {
                if let Some(content) = delta.get("content").and_then(Value::as_str) {
                    if !content.is_empty() {
                        sink.text(content);
                        self.text.push_str(content);
                    }
                }
                let fragments = delta.get("tool_calls").and_then(Value::as_array);
                for (position, fragment) in fragments.into_iter().flatten().enumerate() {
                    self.tool_fragment(position, fragment);
                }
            }
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                self.stop_reason = Some(reason.to_owned());
            }
        }
        Ok(Step::Continue)
    }

    fn finish(self) -> ModelResponse {
        let tool_calls = self
            .calls
            .into_iter()
            .map(|(index, call)| crate::message::ToolCall {
                id: if call.id.is_empty() {
                    format!("call_{index}")
                } else {
                    call.id
                },
                name: call.name,
                arguments: parse_arguments(&call.arguments),
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

/// An `{"error": ...}` object inside the stream. Overload and server errors are
/// retried; anything else is final.
fn stream_error(error: &Value) -> Failure {
    let field = |name: &str| -> String {
        match error.get(name) {
            Some(Value::String(s)) => s.clone(),
            Some(Value::Null) | None => String::new(),
            Some(other) => other.to_string(),
        }
    };
    let message = match error {
        Value::String(s) => s.clone(),
        _ => field("message"),
    };
    let kind = [field("type"), field("code")]
        .into_iter()
        .find(|k| !k.is_empty())
        .unwrap_or_else(|| "error".to_owned());
    let code = error.get("code").and_then(Value::as_u64).unwrap_or(0);
    let transient = matches!(code, 429 | 500..=599)
        || matches!(
            kind.as_str(),
            "server_error" | "overloaded" | "rate_limit_exceeded"
        );
    if transient {
        Failure::Retry {
            detail: format!("error in stream ({kind}): {}", excerpt(&message)),
            retry_after: None,
        }
    } else {
        Failure::Fatal(ModelError::Api {
            provider: PROVIDER,
            kind,
            message: excerpt(&message),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinking_maps_to_reasoning_effort() {
        let rows = [
            (None, None),
            (Some("off"), None),
            (Some("on"), Some("medium")),
            (Some("High"), Some("high")),
            (Some("low"), Some("low")),
        ];
        for (thinking, want) in rows {
            assert_eq!(reasoning_effort(thinking).as_deref(), want, "{thinking:?}");
        }
    }

    #[test]
    fn max_tokens_field_depends_on_the_host() {
        let request = ModelRequest {
            max_output_tokens: Some(100),
            ..ModelRequest::default()
        };
        let official = chat_body("m", &request, true);
        assert_eq!(official["max_completion_tokens"], json!(100));
        assert!(official.get("max_tokens").is_none());
        let local = chat_body("m", &request, false);
        assert_eq!(local["max_tokens"], json!(100));
    }

    #[test]
    fn base_urls_are_normalised() {
        let config = ProviderConfig::default();
        let rows = [
            (None, "https://api.openai.com/v1"),
            (Some("http://localhost:11434"), "http://localhost:11434/v1"),
            (Some("http://localhost:11434/"), "http://localhost:11434/v1"),
            (
                Some("http://localhost:8000/v1/"),
                "http://localhost:8000/v1",
            ),
            (
                Some("https://openrouter.ai/api/v1"),
                "https://openrouter.ai/api/v1",
            ),
        ];
        for (given, want) in rows {
            let provider = OpenAiProvider::new("m", given, Some("k".into()), &config).unwrap();
            assert_eq!(provider.base_url(), Some(want));
            assert_eq!(provider.endpoint, format!("{want}/chat/completions"));
        }
    }

    #[test]
    fn a_key_is_needed_only_for_the_official_host() {
        let config = ProviderConfig::default();
        let err = OpenAiProvider::new("m", None, None, &config).unwrap_err();
        assert!(err.to_string().starts_with("OPENAI_API_KEY is not set"));
        let local = OpenAiProvider::new("m", Some("http://127.0.0.1:1/v1"), None, &config);
        assert!(local.is_ok());
        let debug = format!(
            "{:?}",
            OpenAiProvider::new("m", None, Some("sk-secret".into()), &config).unwrap()
        );
        assert!(!debug.contains("sk-secret"), "{debug}");
    }
}
