//! OpenAI Responses: typed events (`response.created`, `response.in_progress`,
//! `response.output_item.added` / `.done`, `response.content_part.added` /
//! `.done`, `response.output_text.delta` / `.done`,
//! `response.function_call_arguments.delta` / `.done`, the reasoning summary
//! events, …) ending with one of `response.completed`,
//! `response.incomplete` or `response.failed` (or an `error` event), each
//! carrying a `sequence_number`; the whole body is the `response` object.
//!
//! The stream has no `data: [DONE]` after the final event (the API reference
//! lists none; proxies that add one are tolerated: it is held with the final
//! event). The final event's `response` is the whole response, output and
//! usage included, so assembling is taking it; should its `output` be empty
//! while `response.output_item.done` events carried items (some compatible
//! servers do that), those items are the output, in `output_index` order.

use std::collections::BTreeMap;

use cairn_journal::{Choice, Usage};
use serde_json::{json, Map, Value};

use cairn_model::FramedEvent;

use super::{count, event_json, text, write_event, Api, FormError, Parsed};

const API: Api = Api::Responses;

/// The final events, and whether each ends a complete response.
const FINAL: [(&str, bool); 4] = [
    ("response.completed", true),
    ("response.incomplete", true),
    ("response.failed", false),
    ("error", false),
];

fn usage_of(u: &Value) -> Usage {
    Usage {
        input_tokens: count(u, "input_tokens"),
        output_tokens: count(u, "output_tokens"),
    }
}

/// The event's type: the data's `type`, else the `event:` name.
fn kind<'a>(ev: &'a FramedEvent, data: Option<&'a Value>) -> &'a str {
    data.and_then(|d| d.get("type"))
        .and_then(Value::as_str)
        .unwrap_or(&ev.name)
}

/// What the watcher keeps of a Responses stream.
#[derive(Debug, Default)]
pub(super) struct Track {
    model: Option<String>,
    usage: Option<Usage>,
    /// How the response ended so far: its `status` and `incomplete_details`.
    choice: Option<Choice>,
    ended: Option<bool>,
    pub(super) error: Option<String>,
}

impl Track {
    pub(super) fn event(&mut self, ev: &FramedEvent) -> bool {
        let data = serde_json::from_str::<Value>(&ev.data).ok();
        let kind = kind(ev, data.as_ref()).to_owned();
        if let Some(r) = data.as_ref().and_then(|d| d.get("response")) {
            if let Some(m) = text(r, "model") {
                self.model = Some(m.to_owned());
            }
            if let Some(u) = r.get("usage").filter(|u| u.is_object()) {
                self.usage = Some(usage_of(u));
            }
            self.choice = Some(ended(r));
        }
        let Some((_, whole)) = FINAL.iter().find(|(k, _)| *k == kind) else {
            return false;
        };
        if self.ended.is_none() {
            self.ended = Some(*whole);
        }
        if !whole {
            self.error = Some(failure(data.as_ref(), ev));
        }
        true
    }

    pub(super) fn parsed(&self) -> Parsed {
        Parsed {
            usage: self.usage,
            model: self.model.clone(),
            complete: self.error.is_none() && self.ended == Some(true),
            choices: self.choice.clone().into_iter().collect(),
        }
    }
}

/// How the `response` object `r` says it ended.
fn ended(r: &Value) -> Choice {
    Choice {
        index: 0,
        stop_reason: text(r, "status").map(str::to_owned),
        stop_details: r
            .get("incomplete_details")
            .filter(|d| !d.is_null())
            .cloned(),
        refusal: None,
    }
}

/// The message of an `error` or `response.failed` event.
fn failure(data: Option<&Value>, ev: &FramedEvent) -> String {
    let Some(d) = data else {
        return ev.data.clone();
    };
    let e = d.get("response").and_then(|r| r.get("error")).unwrap_or(d);
    super::error_text(e)
}

pub(super) fn parse_whole(v: &Value) -> Parsed {
    let status = v.get("status").and_then(Value::as_str);
    let response = v.get("object").and_then(Value::as_str) == Some("response");
    Parsed {
        usage: v.get("usage").filter(|u| u.is_object()).map(usage_of),
        model: text(v, "model").map(str::to_owned),
        complete: response && matches!(status, Some("completed" | "incomplete")),
        choices: response.then(|| ended(v)).into_iter().collect(),
    }
}

pub(super) fn assemble(events: &[FramedEvent]) -> Result<Value, FormError> {
    let mut done_items: BTreeMap<u64, Value> = BTreeMap::new();
    let mut whole = None;
    for ev in events {
        if ev.data.trim() == "[DONE]" {
            continue;
        }
        let data = event_json(API, ev)?;
        match kind(ev, Some(&data)) {
            "response.output_item.done" => {
                let i = data.get("output_index").and_then(Value::as_u64);
                if let (Some(i), Some(item)) = (i, data.get("item")) {
                    done_items.insert(i, item.clone());
                }
            }
            "response.completed" | "response.incomplete" if whole.is_none() => {
                whole = data.get("response").cloned();
            }
            _ => {}
        }
    }
    let mut whole = whole.ok_or(FormError::Incomplete { api: API })?;
    let empty = whole
        .get("output")
        .and_then(Value::as_array)
        .is_none_or(Vec::is_empty);
    if empty && !done_items.is_empty() {
        whole["output"] = Value::Array(done_items.into_values().collect());
    }
    Ok(whole)
}

/// Writes the events of a Responses stream, numbering them.
struct Writer<'a> {
    out: &'a mut Vec<u8>,
    seq: u64,
}

impl Writer<'_> {
    fn event(&mut self, kind: &str, mut fields: Map<String, Value>) {
        fields.insert("type".into(), Value::from(kind));
        fields.insert("sequence_number".into(), Value::from(self.seq));
        self.seq += 1;
        write_event(self.out, Some(kind), &Value::Object(fields));
    }
}

fn fields(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

pub(super) fn stream(whole: &Value, out: &mut Vec<u8>) -> Result<(), FormError> {
    let not = |reason: &str| FormError::NotAResponse {
        api: API,
        reason: reason.into(),
    };
    let obj = whole.as_object().ok_or_else(|| not("not a JSON object"))?;
    if obj.get("object").and_then(Value::as_str) != Some("response") {
        return Err(not("its `object` is not `response`"));
    }
    let output = obj.get("output").and_then(Value::as_array);
    let output = output.ok_or_else(|| not("no `output` array"))?;
    let final_kind = match obj.get("status").and_then(Value::as_str) {
        Some("incomplete") => "response.incomplete",
        Some("failed") => "response.failed",
        _ => "response.completed",
    };
    let mut w = Writer { out, seq: 0 };
    let mut created = obj.clone();
    created.insert("status".into(), Value::from("in_progress"));
    created.insert("output".into(), json!([]));
    created.insert("usage".into(), Value::Null);
    w.event("response.created", fields(json!({"response": created})));
    w.event("response.in_progress", fields(json!({"response": created})));
    for (i, item) in output.iter().enumerate() {
        stream_item(&mut w, i as u64, item);
    }
    w.event(final_kind, fields(json!({"response": whole})));
    Ok(())
}

fn stream_item(w: &mut Writer<'_>, index: u64, item: &Value) {
    let empty = Map::new();
    let it = item.as_object().unwrap_or(&empty);
    let id = it.get("id").cloned().unwrap_or(Value::from(""));
    let at = |extra: Value| {
        let mut m = fields(json!({"item_id": id, "output_index": index}));
        m.extend(fields(extra));
        m
    };
    let mut added = it.clone();
    if added.contains_key("status") {
        added.insert("status".into(), Value::from("in_progress"));
    }
    match it.get("type").and_then(Value::as_str) {
        Some("message") => {
            added.insert("content".into(), json!([]));
            w.event(
                "response.output_item.added",
                fields(json!({"output_index": index, "item": added})),
            );
            let parts = it.get("content").and_then(Value::as_array);
            for (j, part) in parts.into_iter().flatten().enumerate() {
                let j = j as u64;
                let (field, delta_kind, done_kind) = match part.get("type").and_then(Value::as_str)
                {
                    Some("output_text") => (
                        "text",
                        "response.output_text.delta",
                        "response.output_text.done",
                    ),
                    Some("refusal") => {
                        ("refusal", "response.refusal.delta", "response.refusal.done")
                    }
                    _ => ("", "", ""),
                };
                let mut first = part.as_object().cloned().unwrap_or_default();
                if !field.is_empty() {
                    first.insert(field.into(), Value::from(""));
                    if first.contains_key("annotations") {
                        first.insert("annotations".into(), json!([]));
                    }
                }
                w.event(
                    "response.content_part.added",
                    at(json!({"content_index": j, "part": first})),
                );
                if let Some(s) = part.get(field).and_then(Value::as_str) {
                    let mut delta = json!({"content_index": j, "delta": s});
                    let mut done = json!({"content_index": j, field: s});
                    if field == "text" {
                        delta["logprobs"] = json!([]);
                        done["logprobs"] = json!([]);
                    }
                    w.event(delta_kind, at(delta));
                    w.event(done_kind, at(done));
                }
                w.event(
                    "response.content_part.done",
                    at(json!({"content_index": j, "part": part})),
                );
            }
        }
        Some("function_call") => {
            added.insert("arguments".into(), Value::from(""));
            w.event(
                "response.output_item.added",
                fields(json!({"output_index": index, "item": added})),
            );
            if let Some(args) = it.get("arguments").and_then(Value::as_str) {
                w.event(
                    "response.function_call_arguments.delta",
                    at(json!({"delta": args})),
                );
                w.event(
                    "response.function_call_arguments.done",
                    at(json!({"arguments": args})),
                );
            }
        }
        Some("reasoning") => {
            added.insert("summary".into(), json!([]));
            w.event(
                "response.output_item.added",
                fields(json!({"output_index": index, "item": added})),
            );
            let summary = it.get("summary").and_then(Value::as_array);
            for (j, part) in summary.into_iter().flatten().enumerate() {
                let j = j as u64;
                let mut first = part.as_object().cloned().unwrap_or_default();
                first.insert("text".into(), Value::from(""));
                w.event(
                    "response.reasoning_summary_part.added",
                    at(json!({"summary_index": j, "part": first})),
                );
                if let Some(s) = part.get("text").and_then(Value::as_str) {
                    w.event(
                        "response.reasoning_summary_text.delta",
                        at(json!({"summary_index": j, "delta": s})),
                    );
                    w.event(
                        "response.reasoning_summary_text.done",
                        at(json!({"summary_index": j, "text": s})),
                    );
                }
                w.event(
                    "response.reasoning_summary_part.done",
                    at(json!({"summary_index": j, "part": part})),
                );
            }
        }
        _ => {
            w.event(
                "response.output_item.added",
                fields(json!({"output_index": index, "item": added})),
            );
        }
    }
    w.event(
        "response.output_item.done",
        fields(json!({"output_index": index, "item": item})),
    );
}
