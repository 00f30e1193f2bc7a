//! The provider-neutral conversation model: messages, tools, requests, responses.

use serde::{Deserialize, Serialize};

/// A tool the model may call, described by a JSON Schema for its arguments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// The tool's name, e.g. `read_file`.
    pub name: String,
    /// What the tool does, shown to the model.
    pub description: String,
    /// A JSON Schema object describing the arguments.
    pub parameters: serde_json::Value,
}

/// One tool call made by the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The provider's id for the call; tool results refer to it.
    pub id: String,
    /// The tool called.
    pub name: String,
    /// The arguments. When a model emits arguments that are not valid JSON, the raw
    /// text is kept here as a JSON string rather than failing the turn; so are
    /// the arguments of a call the output limit cut off ([`Stop::Truncated`]),
    /// exactly as received, unless they form a whole JSON object. Anything but
    /// a JSON object is not a call to run.
    pub arguments: serde_json::Value,
    /// The arguments' text exactly as the model produced it, when it is a
    /// spelling of the object in [`arguments`](ToolCall::arguments) other
    /// than the compact one (spaces, key order, escapes, number forms);
    /// `None` when the compact spelling is the text, or when `arguments` is
    /// not an object (it then holds the text itself). Later requests send
    /// this text back ([`ToolCall::arguments_text`]): providers' prompt
    /// caches match on exact prefixes, and a re-serialised call would bill
    /// the rest of the conversation again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub raw_arguments: Option<String>,
}

impl ToolCall {
    /// A call with these arguments and no other spelling of them.
    pub fn new(
        id: impl Into<String>,
        name: impl Into<String>,
        arguments: serde_json::Value,
    ) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            arguments,
            raw_arguments: None,
        }
    }

    /// This call, noting that its arguments arrived as `text`: kept as
    /// [`raw_arguments`](ToolCall::raw_arguments) when `text` is JSON that
    /// means exactly the object in `arguments` and is not its compact
    /// spelling; dropped otherwise.
    pub fn with_text(mut self, text: &str) -> ToolCall {
        self.raw_arguments = None;
        if !self.arguments.is_object() {
            return self;
        }
        // The compact spelling, as a string: `Value == &str` would compare
        // with a JSON string value instead.
        let compact: String = self.arguments.to_string();
        if compact == text {
            return self;
        }
        if serde_json::from_str::<serde_json::Value>(text).is_ok_and(|v| v == self.arguments) {
            self.raw_arguments = Some(text.to_owned());
        }
        self
    }

    /// The arguments as text, as the model produced them: the raw text when
    /// there is one, the text itself when `arguments` is a string, else the
    /// compact JSON of `arguments`.
    pub fn arguments_text(&self) -> std::borrow::Cow<'_, str> {
        match (&self.raw_arguments, &self.arguments) {
            (Some(raw), _) => std::borrow::Cow::Borrowed(raw),
            (None, serde_json::Value::String(text)) => std::borrow::Cow::Borrowed(text),
            (None, other) => std::borrow::Cow::Owned(other.to_string()),
        }
    }
}

/// Token usage of one model call.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens, cached or not.
    #[serde(default)]
    pub input_tokens: u64,
    /// Generated tokens, reasoning included.
    #[serde(default)]
    pub output_tokens: u64,
}

impl Usage {
    /// Input plus output tokens.
    pub fn total(&self) -> u64 {
        self.input_tokens.saturating_add(self.output_tokens)
    }
}

impl std::ops::Add for Usage {
    type Output = Usage;

    fn add(self, other: Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens.saturating_add(other.input_tokens),
            output_tokens: self.output_tokens.saturating_add(other.output_tokens),
        }
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Usage) {
        *self = *self + other;
    }
}

/// One message of a conversation.
///
/// Serialised with a `role` tag: `{"role": "user", "text": ...}`,
/// `{"role": "assistant", "text": ..., "tool_calls": [...]}`,
/// `{"role": "tool_result", "call_id": ..., "name": ..., "output": ..., "is_error": ...}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    /// Text from the user (or from cairn speaking for the user).
    User {
        /// The text.
        text: String,
    },
    /// A model turn: its text and the tools it called, with the thinking and
    /// reasoning the provider needs passed back unmodified.
    Assistant {
        /// The text, possibly empty when the turn only calls tools.
        text: String,
        /// The tool calls, in the order the model made them.
        #[serde(default)]
        tool_calls: Vec<ToolCall>,
        /// Anthropic thinking blocks, complete and in order (signatures and
        /// redacted blocks included): sent back first in the turn's content.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        thinking: Vec<Thinking>,
        /// Reasoning from an OpenAI-compatible server, passed back where the
        /// server requires it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reasoning: Option<Reasoning>,
        /// The Responses API's output items of this turn, as received
        /// ([`ModelResponse::items`]); empty for the other APIs.
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        items: Vec<serde_json::Value>,
    },
    /// The result of one tool call.
    ToolResult {
        /// The [`ToolCall::id`] this answers.
        call_id: String,
        /// The tool's name.
        name: String,
        /// What the tool printed or returned.
        output: String,
        /// Whether the tool failed.
        #[serde(default)]
        is_error: bool,
    },
}

impl Message {
    /// A user message.
    pub fn user(text: impl Into<String>) -> Message {
        Message::User { text: text.into() }
    }

    /// An assistant message with text only.
    pub fn assistant(text: impl Into<String>) -> Message {
        Message::Assistant {
            text: text.into(),
            tool_calls: Vec::new(),
            thinking: Vec::new(),
            reasoning: None,
            items: Vec::new(),
        }
    }
}

/// One block of Anthropic extended thinking, kept byte for byte: the API
/// requires the blocks of a tool loop sent back complete and unmodified.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Thinking {
    /// Thinking text and the signature that vouches for it.
    Thinking {
        /// The thinking text.
        thinking: String,
        /// The signature (opaque; empty when none arrived).
        #[serde(default)]
        signature: String,
    },
    /// Thinking the provider encrypted: passed back as it came.
    RedactedThinking {
        /// The opaque payload.
        data: String,
    },
}

/// Reasoning an OpenAI-compatible server streamed beside the answer
/// (DeepSeek's `reasoning_content`, OpenRouter's and others' `reasoning` and
/// `reasoning_details`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reasoning {
    /// The reasoning text, concatenated in order.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub text: String,
    /// The delta field that carried the text (`reasoning_content` or
    /// `reasoning`), so it is passed back under the same name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub field: Option<String>,
    /// `reasoning_details` items, merged by their `index`, as the server
    /// sent them (encrypted items and signatures included).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub details: Vec<serde_json::Value>,
}

impl Reasoning {
    /// True when nothing was received.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty() && self.details.is_empty()
    }
}

/// Why generation stopped, across providers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Stop {
    /// The model finished its answer (`stop`, `end_turn`, `stop_sequence`,
    /// a Responses status `completed`).
    Done,
    /// The model asked for tools (`tool_calls`, `tool_use`).
    ToolUse,
    /// The output limit cut it off (`length`, `max_tokens`, a Responses
    /// answer incomplete for `max_output_tokens`): the text, or a
    /// tool call's arguments, may be incomplete.
    Truncated,
    /// The model refused (OpenAI's `refusal` content, Anthropic's `refusal`).
    Refused,
    /// The provider's content filter stopped it (`content_filter`).
    Filtered,
    /// The provider gave no reason, or one not known here.
    #[default]
    Unknown,
}

impl Stop {
    /// The stop a provider's reason means.
    pub fn from_reason(reason: Option<&str>) -> Stop {
        match reason {
            Some("stop" | "end_turn" | "stop_sequence" | "completed") => Stop::Done,
            Some("tool_calls" | "tool_use" | "function_call") => Stop::ToolUse,
            Some(
                "length" | "max_tokens" | "max_output_tokens" | "model_context_window_exceeded",
            ) => Stop::Truncated,
            Some("refusal") => Stop::Refused,
            Some("content_filter") => Stop::Filtered,
            _ => Stop::Unknown,
        }
    }
}

/// The [`ModelResponse::refusal`] recorded when the stop reason says
/// `refusal` but neither the model (a refusal text, any other text) nor the
/// provider (an `explanation` in its stop details) said anything.
pub const REFUSAL_WITHOUT_TEXT: &str = "the model refused (stop reason `refusal`) and gave no text";

/// The refusal of a response whose stop reason says `refusal`: its text;
/// without text, the provider's own explanation from its stop details
/// (verbatim); else [`REFUSAL_WITHOUT_TEXT`].
pub(crate) fn refusal_from_text(text: &str, stop_details: Option<&serde_json::Value>) -> String {
    if !text.is_empty() {
        return text.to_owned();
    }
    stop_details
        .and_then(|d| d.get("explanation"))
        .and_then(serde_json::Value::as_str)
        .filter(|e| !e.is_empty())
        .unwrap_or(REFUSAL_WITHOUT_TEXT)
        .to_owned()
}

/// One call to a model.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelRequest {
    /// The 1-based index of this model call within the run. The script provider
    /// answers with this turn of its file; the network providers ignore it.
    pub turn: u64,
    /// The system prompt.
    #[serde(default)]
    pub system: Option<String>,
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// The tools the model may call.
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// A cap on generated tokens. Anthropic requires one and uses 8192 when unset.
    #[serde(default)]
    pub max_output_tokens: Option<u32>,
    /// The thinking mode: `off`, `low`, `medium` or `high` (unset means off).
    /// OpenAI sends it as `reasoning_effort`; Anthropic turns it into a thinking
    /// budget. The script provider ignores it.
    #[serde(default)]
    pub thinking: Option<String>,
}

/// A model's complete answer to one [`ModelRequest`]: what the model said, as
/// the provider said it.
///
/// A response is returned only once it is whole: its end marker arrived, or
/// the stop (or finish) reason did, which the server sends once the model has
/// stopped. A response cut off by the output limit is whole too: its
/// [`stop`](ModelResponse::stop) says so, and a content block it left open
/// (a tool call's input) is kept as received.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ModelResponse {
    /// The whole text, exactly the concatenation of what was streamed to the
    /// sink. A refusal streamed apart from the text (OpenAI's `delta.refusal`)
    /// is not text: it is in [`refusal`](ModelResponse::refusal).
    pub text: String,
    /// The tool calls, in order. When the stop is [`Stop::Truncated`], the last
    /// one may be cut off: see [`ToolCall::arguments`].
    pub tool_calls: Vec<ToolCall>,
    /// Tokens used, as the server reported them (the standard field or one
    /// of the documented extensions: see the providers' stream rules);
    /// `None` when it reported none, so that the call is priced `unknown`
    /// rather than looking free.
    #[serde(default)]
    pub usage: Option<Usage>,
    /// The model that answered, as the provider named it.
    pub model: String,
    /// Why generation stopped, in the provider's words (`stop`, `tool_calls`,
    /// `length`, `content_filter`, `end_turn`, `max_tokens`, `refusal`, ...),
    /// when it said.
    pub stop_reason: Option<String>,
    /// What the stop reason means ([`Stop::from_reason`]), except that a
    /// response with a [`refusal`](ModelResponse::refusal) is always
    /// [`Stop::Refused`].
    #[serde(default)]
    pub stop: Stop,
    /// The model's refusal, when it refused: OpenAI's `delta.refusal` pieces
    /// concatenated (the text is then usually empty); for a stop reason
    /// `refusal` (Anthropic's) without such pieces, the turn's text, or
    /// [`REFUSAL_WITHOUT_TEXT`] when there is none. Set exactly when
    /// [`stop`](ModelResponse::stop) is [`Stop::Refused`].
    #[serde(default)]
    pub refusal: Option<String>,
    /// Anthropic thinking and redacted-thinking blocks, complete and in stream
    /// order, byte for byte (signatures included); empty when thinking was off.
    #[serde(default)]
    pub thinking: Vec<Thinking>,
    /// Reasoning an OpenAI-compatible server streamed; `None` when none came.
    /// For the Responses API, its reasoning summary text (for the record:
    /// what goes back is in [`items`](ModelResponse::items)).
    #[serde(default)]
    pub reasoning: Option<Reasoning>,
    /// What the provider said about the stop beyond its reason, verbatim:
    /// Anthropic's `stop_details` (for a refusal: `type`, `category`,
    /// `explanation`). `None` when it sent none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stop_details: Option<serde_json::Value>,
    /// The Responses API's output items, exactly as its final event listed
    /// them: reasoning items (with their `encrypted_content`), messages and
    /// function calls, in order. Sent back on later requests in place of
    /// the text and tool calls, so the model gets its reasoning back across
    /// tool calls. Empty for the other APIs.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<serde_json::Value>,
}

impl ModelResponse {
    /// This response as the assistant message to append to the conversation.
    pub fn to_message(&self) -> Message {
        Message::Assistant {
            text: self.text.clone(),
            tool_calls: self.tool_calls.clone(),
            thinking: self.thinking.clone(),
            reasoning: self.reasoning.clone(),
            items: self.items.clone(),
        }
    }
}

/// Receives text as the model produces it.
///
/// The library draws nothing: the binary implements this to show streaming output.
pub trait StreamSink: Send {
    /// A piece of the response text, in order.
    fn text(&mut self, delta: &str);

    /// A stream broke after text was delivered, and the request is being sent
    /// again: the text will be delivered again from the start, so a sink that shows
    /// it should discard what it has. The default does nothing.
    fn restart(&mut self) {}
}

/// A sink that discards everything.
#[derive(Clone, Copy, Debug, Default)]
pub struct NullSink;

impl StreamSink for NullSink {
    fn text(&mut self, _delta: &str) {}
}

impl StreamSink for String {
    fn text(&mut self, delta: &str) {
        self.push_str(delta);
    }

    fn restart(&mut self) {
        self.clear();
    }
}

impl StreamSink for Vec<String> {
    fn text(&mut self, delta: &str) {
        self.push(delta.to_owned());
    }

    fn restart(&mut self) {
        self.clear();
    }
}

/// Maps tool-call arguments accumulated as text to JSON.
///
/// Empty text means no arguments (`{}`); text that is not valid JSON is kept as a
/// JSON string so that the turn is not lost.
pub(crate) fn parse_arguments(raw: &str) -> serde_json::Value {
    if raw.trim().is_empty() {
        return serde_json::Value::Object(serde_json::Map::new());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| serde_json::Value::String(raw.to_owned()))
}

/// Maps the arguments of a call the output limit may have cut off: a whole
/// JSON object is kept as parsed; anything else — empty text included, which
/// for a finished call would mean `{}` — is kept exactly as received, as a
/// JSON string, so that it is journaled and never run.
pub(crate) fn parse_cut_arguments(raw: &str) -> serde_json::Value {
    match serde_json::from_str::<serde_json::Value>(raw) {
        Ok(object @ serde_json::Value::Object(_)) => object,
        _ => serde_json::Value::String(raw.to_owned()),
    }
}

/// A tool call whose arguments streamed in as `text`: parsed as a finished
/// call's ([`parse_arguments`]) or, when the output limit may have `cut` it,
/// as a cut one's ([`parse_cut_arguments`]), with the text kept as the model
/// wrote it. A call streamed without an id is named `call_INDEX`.
pub(crate) fn streamed_call(
    index: u64,
    id: String,
    name: String,
    text: &str,
    cut: bool,
) -> ToolCall {
    let arguments = if cut {
        parse_cut_arguments(text)
    } else {
        parse_arguments(text)
    };
    let id = if id.is_empty() {
        format!("call_{index}")
    } else {
        id
    };
    ToolCall::new(id, name, arguments).with_text(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_serialise_with_a_role_tag() {
        let rows = [
            (Message::user("hi"), json!({"role": "user", "text": "hi"})),
            (
                Message::assistant("ok"),
                json!({"role": "assistant", "text": "ok", "tool_calls": []}),
            ),
            (
                Message::ToolResult {
                    call_id: "c1".into(),
                    name: "shell".into(),
                    output: "done".into(),
                    is_error: true,
                },
                json!({"role": "tool_result", "call_id": "c1", "name": "shell", "output": "done", "is_error": true}),
            ),
        ];
        for (message, want) in rows {
            let value = serde_json::to_value(&message).unwrap();
            assert_eq!(value, want);
            let back: Message = serde_json::from_value(value).unwrap();
            assert_eq!(back, message);
        }
    }

    #[test]
    fn arguments_parse_leniently() {
        assert_eq!(parse_arguments(""), json!({}));
        assert_eq!(parse_arguments(r#"{"a":1}"#), json!({"a": 1}));
        assert_eq!(parse_arguments(r#"{"a":"#), json!(r#"{"a":"#));
    }

    #[test]
    fn a_call_keeps_its_text_when_it_is_another_spelling_of_its_object() {
        let rows: [(&str, Option<&str>); 8] = [
            (r#"{"a":1}"#, None),
            (r#"{"b":1,"a":2}"#, Some(r#"{"b":1,"a":2}"#)),
            (r#"{"a": 1}"#, Some(r#"{"a": 1}"#)),
            (" {\"a\":1}\n", Some(" {\"a\":1}\n")),
            (r#"{"a":"\u00e9"}"#, Some(r#"{"a":"\u00e9"}"#)),
            ("", None),
            (r#"{"a":"#, None),
            (r#"{"a": 2}"#, None),
        ];
        for (text, want) in rows {
            let arguments = match text {
                r#"{"a": 2}"# => json!({"a": 3}),
                _ => parse_arguments(text),
            };
            let call = ToolCall::new("c", "t", arguments).with_text(text);
            assert_eq!(call.raw_arguments.as_deref(), want, "{text:?}");
            if want.is_some() {
                assert_eq!(call.arguments_text(), text, "{text:?}");
            }
        }
        let cut = ToolCall::new("c", "t", json!(r#"{"a": "#)).with_text(r#"{"a": "#);
        assert_eq!(cut.arguments_text(), r#"{"a": "#);
        assert_eq!(
            ToolCall::new("c", "t", json!({"b": 1, "a": 2})).arguments_text(),
            r#"{"a":2,"b":1}"#
        );
    }

    #[test]
    fn cut_arguments_are_kept_as_received_unless_a_whole_object() {
        let rows = [
            ("", json!("")),
            ("  ", json!("  ")),
            (r#"{"path": "src/ma"#, json!(r#"{"path": "src/ma"#)),
            ("12", json!("12")),
            (r#"{"a": 1}"#, json!({"a": 1})),
        ];
        for (raw, want) in rows {
            assert_eq!(parse_cut_arguments(raw), want, "{raw:?}");
        }
    }

    #[test]
    fn usage_adds() {
        let mut usage = Usage {
            input_tokens: 1,
            output_tokens: 2,
        };
        usage += Usage {
            input_tokens: 10,
            output_tokens: 20,
        };
        assert_eq!(usage.total(), 33);
    }
}
