//! The Messages request body as it goes on the wire: the body's JSON,
//! except that each `tool_use` block's `input` is the model's own text of it
//! when the conversation kept one ([`ToolCall::raw_arguments`]), with the
//! spacing and key order a re-serialisation would lose.
//!
//! Invariant this relies on: the mapping (`api_messages`) emits exactly one
//! `tool_use` block per tool call of the conversation, in the order of the
//! calls — merging messages of one role and moving thinking blocks and tool
//! results first keep the order of the rest — so the k-th `tool_use` block
//! of the body is the k-th call. A raw text that is not a JSON object is
//! never spliced in: the parsed `input` goes instead.

use std::cell::Cell;

use serde::ser::{SerializeMap, SerializeSeq};
use serde::{Serialize, Serializer};
use serde_json::value::RawValue;
use serde_json::Value;

use crate::message::{Message, ToolCall};

/// The raw `input` of each tool call of `messages`, in order (`None` where
/// there is none to splice).
pub(super) fn raw_inputs(messages: &[Message]) -> Vec<Option<&RawValue>> {
    messages
        .iter()
        .flat_map(|message| match message {
            Message::Assistant { tool_calls, .. } => tool_calls.as_slice(),
            _ => &[],
        })
        .map(raw_input)
        .collect()
}

fn raw_input(call: &ToolCall) -> Option<&RawValue> {
    let raw = call
        .raw_arguments
        .as_deref()
        .filter(|_| call.arguments.is_object())?;
    let value: &RawValue = serde_json::from_str(raw).ok()?;
    value.get().trim_start().starts_with('{').then_some(value)
}

/// `body` serialised with `inputs` spliced in (see the module doc).
pub(super) struct Wire<'a> {
    body: &'a Value,
    inputs: &'a [Option<&'a RawValue>],
}

impl<'a> Wire<'a> {
    pub(super) fn new(body: &'a Value, inputs: &'a [Option<&'a RawValue>]) -> Wire<'a> {
        Wire { body, inputs }
    }
}

/// What the nested serialisers share: the inputs and the next one's index.
struct Splice<'a> {
    inputs: &'a [Option<&'a RawValue>],
    next: Cell<usize>,
}

/// A value, its `level` saying where in the body it is.
struct At<'a> {
    value: &'a Value,
    level: Level,
    splice: &'a Splice<'a>,
}

#[derive(Clone, Copy, PartialEq)]
enum Level {
    /// The `messages` array.
    Messages,
    /// One message.
    Message,
    /// A message's `content` array.
    Content,
}

impl Serialize for Wire<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Value::Object(body) = self.body else {
            return self.body.serialize(s);
        };
        let splice = Splice {
            inputs: self.inputs,
            next: Cell::new(0),
        };
        let mut map = s.serialize_map(Some(body.len()))?;
        for (key, value) in body {
            if key == "messages" {
                let at = At {
                    value,
                    level: Level::Messages,
                    splice: &splice,
                };
                map.serialize_entry(key, &at)?;
            } else {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

impl Serialize for At<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let inner = |value, level| At {
            value,
            level,
            splice: self.splice,
        };
        match (self.level, self.value) {
            (Level::Messages | Level::Content, Value::Array(items)) => {
                let level = match self.level {
                    Level::Messages => Level::Message,
                    _ => Level::Content,
                };
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    if level == Level::Content {
                        seq.serialize_element(&Block {
                            block: item,
                            splice: self.splice,
                        })?;
                    } else {
                        seq.serialize_element(&inner(item, level))?;
                    }
                }
                seq.end()
            }
            (Level::Message, Value::Object(message)) => {
                let mut map = s.serialize_map(Some(message.len()))?;
                for (key, value) in message {
                    if key == "content" {
                        map.serialize_entry(key, &inner(value, Level::Content))?;
                    } else {
                        map.serialize_entry(key, value)?;
                    }
                }
                map.end()
            }
            (_, value) => value.serialize(s),
        }
    }
}

/// One content block: a `tool_use` block takes the next input.
struct Block<'a> {
    block: &'a Value,
    splice: &'a Splice<'a>,
}

impl Serialize for Block<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let Value::Object(block) = self.block else {
            return self.block.serialize(s);
        };
        if block.get("type").and_then(Value::as_str) != Some("tool_use") {
            return self.block.serialize(s);
        }
        let index = self.splice.next.get();
        self.splice.next.set(index + 1);
        let Some(Some(raw)) = self.splice.inputs.get(index) else {
            return self.block.serialize(s);
        };
        let mut map = s.serialize_map(Some(block.len()))?;
        for (key, value) in block {
            if key == "input" {
                map.serialize_entry(key, raw)?;
            } else {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::anthropic::api_messages;
    use serde_json::json;

    fn call(id: &str, text: &str) -> ToolCall {
        let arguments = serde_json::from_str(text).unwrap_or(Value::String(text.into()));
        ToolCall::new(id, "write_file", arguments).with_text(text)
    }

    fn assistant(text: &str, calls: Vec<ToolCall>) -> Message {
        Message::Assistant {
            text: text.into(),
            tool_calls: calls,
            thinking: Vec::new(),
            reasoning: None,
            items: Vec::new(),
        }
    }

    fn result(id: &str) -> Message {
        Message::ToolResult {
            call_id: id.into(),
            name: "write_file".into(),
            output: "ok".into(),
            is_error: false,
        }
    }

    #[test]
    fn each_tool_use_input_goes_out_as_the_model_wrote_it() {
        let a = r#"{"path": "a",  "content": "x"}"#;
        let c = "{\n  \"z\": [1, 2],\n  \"a\": {\"y\": 1, \"b\": 2}\n}";
        let messages = vec![
            Message::user("go"),
            // Two calls in one turn, the second already compact.
            assistant("", vec![call("t1", a), call("t2", r#"{"a":1}"#)]),
            result("t1"),
            result("t2"),
            // A cut call, not an object: goes as `{"value": …}`.
            assistant("more", vec![call("t3", c), call("t4", r#"{"path": "#)]),
            result("t3"),
            result("t4"),
        ];
        let body = json!({"model": "m", "messages": api_messages(&messages)});
        let inputs = raw_inputs(&messages);
        let sent = serde_json::to_string(&Wire::new(&body, &inputs)).unwrap();
        assert!(sent.contains(&format!(r#""input":{a}"#)), "{sent}");
        assert!(sent.contains(r#""input":{"a":1}"#), "{sent}");
        assert!(sent.contains(&format!(r#""input":{c}"#)), "{sent}");
        assert!(
            sent.contains(r#""input":{"value":"{\"path\": "}"#),
            "{sent}"
        );
        // Only the inputs differ from the body written plainly.
        let back: Value = serde_json::from_str(&sent).unwrap();
        assert_eq!(back, body);
        let plain = body.to_string();
        let compact = |t: &str| serde_json::from_str::<Value>(t).unwrap().to_string();
        assert_eq!(sent.replace(a, &compact(a)).replace(c, &compact(c)), plain);
    }

    #[test]
    fn without_raw_text_the_body_is_written_plainly() {
        let messages = vec![
            Message::user("go"),
            assistant("", vec![ToolCall::new("t1", "x", json!({"b": 1, "a": 2}))]),
            result("t1"),
        ];
        let body = json!({"messages": api_messages(&messages), "stream": true});
        let inputs = raw_inputs(&messages);
        assert_eq!(
            serde_json::to_string(&Wire::new(&body, &inputs)).unwrap(),
            body.to_string()
        );
    }
}
