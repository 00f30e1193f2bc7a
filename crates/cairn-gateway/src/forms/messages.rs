//! Anthropic Messages: `message_start`, `content_block_start` / `_delta` /
//! `_stop`, `message_delta`, `message_stop` (and `ping`, `error`), and the
//! whole `message`.
//!
//! Assembling a whole body from events:
//!
//! 1. `message_start.message` is the message (its `content` replaced).
//! 2. `content_block_start` opens block `index` with its `content_block`.
//! 3. `content_block_delta`: `text_delta` text, `thinking_delta` thinking and
//!    `signature_delta` signature are appended to the block's field;
//!    `input_json_delta` pieces are concatenated and, at the end, parsed into
//!    the block's `input` (a piece cut by `max_tokens` is read the way the
//!    Anthropic SDK reads it from a stream, jiter's partial mode: a string,
//!    number or literal cut short is dropped with its key, open arrays and
//!    objects are closed);
//!    `citations_delta` citations are appended to `citations`; any other
//!    delta's fields are appended when strings and set otherwise.
//! 4. `message_delta.delta` fields (`stop_reason`, `stop_sequence`) are set
//!    on the message; `message_delta.usage` fields replace the message's
//!    usage fields one by one (they are cumulative).
//! 5. The blocks are the message's `content`, in `index` order.

use std::collections::{BTreeMap, VecDeque};

use cairn_journal::{Choice, Usage};
use serde_json::{json, Map, Value};

use cairn_model::FramedEvent;

use super::{count, event_json, text, write_event, Api, FormError, Parsed};

const API: Api = Api::Messages;

/// The input tokens of a usage object, cache writes and reads included.
fn input_of(u: &Value) -> u64 {
    count(u, "input_tokens")
        .saturating_add(count(u, "cache_creation_input_tokens"))
        .saturating_add(count(u, "cache_read_input_tokens"))
}

/// The event's type: the data's `type`, else the `event:` name.
fn kind(ev: &FramedEvent, data: Option<&Value>) -> String {
    data.and_then(|d| d.get("type"))
        .and_then(Value::as_str)
        .unwrap_or(&ev.name)
        .to_owned()
}

/// What the watcher keeps of a Messages stream.
#[derive(Debug, Default)]
pub(super) struct Track {
    started: bool,
    model: Option<String>,
    /// input_tokens, cache_creation_input_tokens, cache_read_input_tokens,
    /// output_tokens: the latest value of each.
    usage: BTreeMap<&'static str, u64>,
    stop_reason: Option<String>,
    /// `message_delta.delta.stop_details`, verbatim.
    stop_details: Option<Value>,
    stopped: bool,
    pub(super) error: Option<String>,
}

const USAGE_FIELDS: [&str; 4] = [
    "input_tokens",
    "cache_creation_input_tokens",
    "cache_read_input_tokens",
    "output_tokens",
];

impl Track {
    fn take_usage(&mut self, u: &Value) {
        for f in USAGE_FIELDS {
            if let Some(n) = u.get(f).and_then(Value::as_u64) {
                self.usage.insert(f, n);
            }
        }
    }

    pub(super) fn event(&mut self, ev: &FramedEvent) -> bool {
        let data = serde_json::from_str::<Value>(&ev.data).ok();
        match kind(ev, data.as_ref()).as_str() {
            "message_start" => {
                self.started = true;
                let message = data.as_ref().and_then(|d| d.get("message"));
                if let Some(m) = message {
                    self.model = text(m, "model").map(str::to_owned).or(self.model.take());
                    if let Some(u) = m.get("usage") {
                        self.take_usage(u);
                    }
                }
            }
            "message_delta" => {
                let d = data.as_ref();
                let delta = d.and_then(|d| d.get("delta"));
                if let Some(r) = delta
                    .and_then(|x| x.get("stop_reason"))
                    .and_then(Value::as_str)
                {
                    self.stop_reason = Some(r.to_owned());
                }
                if let Some(details) = delta
                    .and_then(|x| x.get("stop_details"))
                    .filter(|x| !x.is_null())
                {
                    self.stop_details = Some(details.clone());
                }
                if let Some(u) = d.and_then(|d| d.get("usage")) {
                    self.take_usage(u);
                }
            }
            "message_stop" => {
                self.stopped = true;
                return true;
            }
            "error" => {
                let e = data.as_ref().and_then(|d| d.get("error"));
                self.error = Some(e.map_or_else(|| ev.data.clone(), super::error_text));
                return true;
            }
            _ => {}
        }
        false
    }

    pub(super) fn parsed(&self) -> Parsed {
        let n = |f: &str| self.usage.get(f).copied().unwrap_or(0);
        let usage = (!self.usage.is_empty()).then(|| Usage {
            input_tokens: n("input_tokens")
                .saturating_add(n("cache_creation_input_tokens"))
                .saturating_add(n("cache_read_input_tokens")),
            output_tokens: n("output_tokens"),
        });
        let ended = self.stopped || self.stop_reason.is_some();
        let choices = self
            .started
            .then(|| Choice {
                index: 0,
                stop_reason: self.stop_reason.clone(),
                stop_details: self.stop_details.clone(),
                refusal: None,
            })
            .into_iter()
            .collect();
        Parsed {
            usage,
            model: self.model.clone(),
            complete: self.error.is_none() && self.started && ended,
            choices,
        }
    }
}

pub(super) fn parse_whole(v: &Value) -> Parsed {
    let usage = v.get("usage").filter(|u| u.is_object()).map(|u| Usage {
        input_tokens: input_of(u),
        output_tokens: count(u, "output_tokens"),
    });
    let message = v.get("type").and_then(Value::as_str) == Some("message");
    let choices = message
        .then(|| Choice {
            index: 0,
            stop_reason: text(v, "stop_reason").map(str::to_owned),
            stop_details: v.get("stop_details").filter(|d| !d.is_null()).cloned(),
            refusal: None,
        })
        .into_iter()
        .collect();
    Parsed {
        usage,
        model: text(v, "model").map(str::to_owned),
        complete: message && v.get("stop_reason").is_some_and(|r| !r.is_null()),
        choices,
    }
}

/// A block being assembled.
struct Block {
    value: Map<String, Value>,
    partial_json: Option<String>,
}

pub(super) fn assemble(events: &[FramedEvent]) -> Result<Value, FormError> {
    let mut message = Map::new();
    let mut blocks: BTreeMap<u64, Block> = BTreeMap::new();
    for ev in events {
        if matches!(ev.name.as_str(), "ping" | "message_stop") && ev.data.trim().is_empty() {
            continue;
        }
        let data = event_json(API, ev)?;
        let index = data.get("index").and_then(Value::as_u64).unwrap_or(0);
        match kind(ev, Some(&data)).as_str() {
            "message_start" => {
                if let Some(m) = data.get("message").and_then(Value::as_object) {
                    message = m.clone();
                }
            }
            "content_block_start" => {
                let start = data.get("content_block").and_then(Value::as_object);
                let value = start.cloned().unwrap_or_default();
                blocks.insert(
                    index,
                    Block {
                        value,
                        partial_json: None,
                    },
                );
            }
            "content_block_delta" => {
                let Some(delta) = data.get("delta").and_then(Value::as_object) else {
                    continue;
                };
                let block = blocks.entry(index).or_insert_with(|| Block {
                    value: Map::new(),
                    partial_json: None,
                });
                apply_delta(block, delta);
            }
            "message_delta" => {
                for (k, v) in data
                    .get("delta")
                    .and_then(Value::as_object)
                    .into_iter()
                    .flatten()
                {
                    message.insert(k.clone(), v.clone());
                }
                if let Some(u) = data.get("usage").and_then(Value::as_object) {
                    let usage = message.entry("usage").or_insert_with(|| json!({}));
                    if let Some(into) = usage.as_object_mut() {
                        for (k, v) in u.iter().filter(|(_, v)| !v.is_null()) {
                            into.insert(k.clone(), v.clone());
                        }
                    }
                }
            }
            _ => {}
        }
    }
    let content = blocks.into_values().map(|mut b| {
        if let Some(piece) = b.partial_json.take() {
            if !piece.trim().is_empty() {
                b.value.insert("input".into(), read_partial_json(&piece));
            }
        }
        Value::Object(b.value)
    });
    message.insert("content".into(), Value::Array(content.collect()));
    Ok(Value::Object(message))
}

fn apply_delta(block: &mut Block, delta: &Map<String, Value>) {
    let kind = delta.get("type").and_then(Value::as_str).unwrap_or("");
    let append = |block: &mut Block, field: &str, piece: Option<&Value>| {
        if let Some(piece) = piece.and_then(Value::as_str) {
            match block.value.get_mut(field) {
                Some(Value::String(s)) => s.push_str(piece),
                _ => {
                    block.value.insert(field.into(), Value::from(piece));
                }
            }
        }
    };
    match kind {
        "text_delta" => append(block, "text", delta.get("text")),
        "thinking_delta" => append(block, "thinking", delta.get("thinking")),
        "signature_delta" => append(block, "signature", delta.get("signature")),
        "input_json_delta" => {
            if let Some(piece) = delta.get("partial_json").and_then(Value::as_str) {
                block
                    .partial_json
                    .get_or_insert_with(String::new)
                    .push_str(piece);
            }
        }
        "citations_delta" => {
            if let Some(c) = delta.get("citation") {
                match block.value.get_mut("citations") {
                    Some(Value::Array(a)) => a.push(c.clone()),
                    _ => {
                        block.value.insert("citations".into(), json!([c]));
                    }
                }
            }
        }
        _ => {
            for (k, v) in delta.iter().filter(|(k, _)| k.as_str() != "type") {
                if v.is_string() {
                    append(block, k, Some(v));
                } else {
                    block.value.insert(k.clone(), v.clone());
                }
            }
        }
    }
}

/// How many cut points [`read_partial_json`] tries, from the end.
const PARTIAL_CUTS: usize = 256;

/// Parses a tool input that may be cut short (module doc, rule 3), as
/// jiter's partial mode (the Anthropic SDK's reader) does: the longest prefix
/// that ends after a whole string, number, literal or container, or right
/// after an opening bracket, and reads once its open containers are closed
/// (so a value cut short is dropped with its key). Only the last [`PARTIAL_CUTS`] places are tried;
/// when none reads, the text itself is kept, as a string, so nothing received
/// is lost.
pub(super) fn read_partial_json(s: &str) -> Value {
    if let Ok(v) = serde_json::from_str(s) {
        return v;
    }
    // Candidate cut points, each with the closers of the containers open
    // there (only the last ones are kept: the longest prefix that reads is
    // near the end).
    let mut cuts: VecDeque<(usize, String)> = VecDeque::with_capacity(PARTIAL_CUTS);
    let mut push = |cut: (usize, String)| {
        if cuts.len() == PARTIAL_CUTS {
            cuts.pop_front();
        }
        cuts.push_back(cut);
    };
    let token = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '+' | '-');
    let mut closers = String::new();
    let (mut in_string, mut escape) = (false, false);
    let mut chars = s.char_indices().peekable();
    while let Some((i, c)) = chars.next() {
        let after = i + c.len_utf8();
        if in_string {
            if escape {
                escape = false;
            } else if c == '\\' {
                escape = true;
            } else if c == '"' {
                in_string = false;
                push((after, closers.clone()));
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => {
                closers.push(if c == '{' { '}' } else { ']' });
                push((after, closers.clone()));
            }
            '}' | ']' => {
                closers.pop();
                push((after, closers.clone()));
            }
            // A number or literal counts once whole: at its last character.
            c if token(c) && !chars.peek().is_some_and(|&(_, n)| token(n)) => {
                push((after, closers.clone()));
            }
            _ => {}
        }
    }
    for (at, open) in cuts.into_iter().rev() {
        // A cut after a key string does not read; the one before it does.
        let mut candidate = s[..at].to_owned();
        candidate.extend(open.chars().rev());
        if let Ok(v) = serde_json::from_str(&candidate) {
            return v;
        }
    }
    Value::from(s)
}

pub(super) fn stream(whole: &Value, out: &mut Vec<u8>) -> Result<(), FormError> {
    let not = |reason: &str| FormError::NotAResponse {
        api: API,
        reason: reason.into(),
    };
    let obj = whole.as_object().ok_or_else(|| not("not a JSON object"))?;
    if obj.get("type").and_then(Value::as_str) != Some("message") {
        return Err(not("its `type` is not `message`"));
    }
    let content = obj
        .get("content")
        .and_then(Value::as_array)
        .ok_or_else(|| not("no `content` array"))?;
    let usage = obj.get("usage").cloned();
    let mut start = obj.clone();
    start.insert("content".into(), json!([]));
    start.insert("stop_reason".into(), Value::Null);
    start.insert("stop_sequence".into(), Value::Null);
    write_event(
        out,
        Some("message_start"),
        &json!({"type": "message_start", "message": start}),
    );
    for (i, block) in content.iter().enumerate() {
        stream_block(out, i as u64, block);
    }
    let mut delta = json!({
        "type": "message_delta",
        "delta": {
            "stop_reason": obj.get("stop_reason").cloned().unwrap_or(Value::Null),
            "stop_sequence": obj.get("stop_sequence").cloned().unwrap_or(Value::Null),
        },
    });
    if let Some(u) = usage {
        delta["usage"] = u;
    }
    write_event(out, Some("message_delta"), &delta);
    write_event(out, Some("message_stop"), &json!({"type": "message_stop"}));
    Ok(())
}

fn stream_block(out: &mut Vec<u8>, index: u64, block: &Value) {
    let empty = Map::new();
    let b = block.as_object().unwrap_or(&empty);
    let kind = b.get("type").and_then(Value::as_str).unwrap_or("");
    let mut start = b.clone();
    let mut deltas: Vec<Value> = Vec::new();
    // Streamed string fields: empty in the start, whole in one delta.
    let strings: &[(&str, &str)] = match kind {
        "text" => &[("text", "text_delta")],
        "thinking" => &[
            ("thinking", "thinking_delta"),
            ("signature", "signature_delta"),
        ],
        _ => &[],
    };
    for (field, delta_kind) in strings {
        if let Some(s) = b.get(*field).and_then(Value::as_str) {
            start.insert((*field).into(), Value::from(""));
            if !s.is_empty() {
                deltas.push(json!({"type": delta_kind, *field: s}));
            }
        }
    }
    if kind == "text" {
        if let Some(citations) = b.get("citations").and_then(Value::as_array) {
            start.insert("citations".into(), json!([]));
            for c in citations {
                deltas.push(json!({"type": "citations_delta", "citation": c}));
            }
        }
    }
    if let Some(input) = b.get("input").filter(|_| kind.ends_with("tool_use")) {
        start.insert("input".into(), json!({}));
        if input.as_object().is_none_or(|m| !m.is_empty()) {
            deltas.push(json!({"type": "input_json_delta", "partial_json": input.to_string()}));
        }
    }
    write_event(
        out,
        Some("content_block_start"),
        &json!({"type": "content_block_start", "index": index, "content_block": start}),
    );
    for delta in deltas {
        write_event(
            out,
            Some("content_block_delta"),
            &json!({"type": "content_block_delta", "index": index, "delta": delta}),
        );
    }
    write_event(
        out,
        Some("content_block_stop"),
        &json!({"type": "content_block_stop", "index": index}),
    );
}

#[cfg(test)]
mod tests {
    use super::read_partial_json;
    use serde_json::json;

    #[test]
    fn a_cut_tool_input_reads_as_the_sdks_read_it() {
        // The right-hand sides are what jiter's partial mode gives.
        let rows = [
            (r#"{"path": "src/main.rs"}"#, json!({"path": "src/main.rs"})),
            (r#"{"path": "src/ma"#, json!({})),
            (
                r#"{"path": "src/main.rs", "con"#,
                json!({"path": "src/main.rs"}),
            ),
            (r#"{"path": "a", "content": "#, json!({"path": "a"})),
            (r#"{"path": "a", "n": 12"#, json!({"path": "a", "n": 12})),
            (r#"{"a": [1, 2, {"b": "x\"y"#, json!({"a": [1, 2, {}]})),
            (r#"{"a": ["x", "y"#, json!({"a": ["x"]})),
            (r#"{"a": tr"#, json!({})),
            (r#"{"a": true"#, json!({"a": true})),
            (r#"{"a": 1."#, json!({})),
            (r#"{"a": -"#, json!({})),
            (r#"{"#, json!({})),
            (r#"{"a": "é"#, json!({})),
            (r#"{"a": {"b": 1}, "c": ["#, json!({"a": {"b": 1}, "c": []})),
            ("[1, 2", json!([1, 2])),
            ("", json!("")),
            ("oops", json!("oops")),
        ];
        for (input, want) in rows {
            assert_eq!(read_partial_json(input), want, "{input}");
        }
    }
}
