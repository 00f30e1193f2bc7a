//! OpenAI Chat Completions: `chat.completion.chunk` events ending with
//! `data: [DONE]`, and the whole `chat.completion`.
//!
//! Assembling a whole body from chunks, choice by choice (by `index`):
//!
//! 1. `delta.role` sets the role (default `assistant`); `delta.content` and
//!    `delta.refusal` strings are concatenated (`null` until one arrives).
//! 2. `delta.tool_calls[]` fragments are merged by their `index`: the first
//!    non-empty `id`, `type` and `function.name` win, `function.arguments`
//!    pieces are concatenated; the legacy `delta.function_call` likewise.
//! 3. Any other delta field (`reasoning_content`, `reasoning`,
//!    `reasoning_details`, `annotations`, …): strings are concatenated,
//!    arrays extended, anything else replaced; `null` only fills a gap.
//! 4. The last non-null `finish_reason` wins; `logprobs` arrays are extended;
//!    other choice fields keep their last non-null value.
//! 5. Top-level fields (`id`, `created`, `model`, `system_fingerprint`,
//!    `service_tier`, …) keep their last non-empty value; `usage` is the last
//!    usage object; `object` becomes `chat.completion`.

use std::collections::BTreeMap;

use cairn_journal::{Choice as Ended, Usage};
use serde_json::{json, Map, Value};

use cairn_model::FramedEvent;

use super::{event_json, text, write_event, Api, FormError, Parsed};

const API: Api = Api::ChatCompletions;

/// The usage `v` (a chunk or a whole body) reports, wherever the server put
/// it: the one reading of it is `cairn_model`'s.
fn usage_of(v: &Value) -> Option<Usage> {
    cairn_model::chat_completion_usage(v).map(|u| Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
    })
}

/// What the watcher keeps of a chat stream.
#[derive(Debug, Default)]
pub(super) struct Track {
    model: Option<String>,
    usage: Option<Usage>,
    /// Every choice seen, by index: how it ended so far.
    choices: BTreeMap<u64, Ended>,
    done: bool,
    pub(super) error: Option<String>,
}

impl Track {
    pub(super) fn event(&mut self, ev: &FramedEvent) -> bool {
        if ev.data.trim() == "[DONE]" {
            self.done = true;
            return true;
        }
        let Ok(chunk) = serde_json::from_str::<Value>(&ev.data) else {
            return false;
        };
        if let Some(e) = chunk.get("error").filter(|e| !e.is_null()) {
            self.error = Some(error_message(e));
            return true;
        }
        if self.model.is_none() {
            self.model = text(&chunk, "model").map(str::to_owned);
        }
        if let Some(u) = usage_of(&chunk) {
            self.usage = Some(u);
        }
        for (i, choice) in choices(&chunk) {
            let ended = self.choices.entry(i).or_insert_with(|| Ended {
                index: i,
                ..Ended::default()
            });
            if let Some(reason) = choice.get("finish_reason").and_then(Value::as_str) {
                ended.stop_reason = Some(reason.to_owned());
            }
            let refusal = choice.pointer("/delta/refusal").and_then(Value::as_str);
            if let Some(piece) = refusal.filter(|r| !r.is_empty()) {
                ended
                    .refusal
                    .get_or_insert_with(String::new)
                    .push_str(piece);
            }
        }
        false
    }

    pub(super) fn parsed(&self) -> Parsed {
        let finished =
            !self.choices.is_empty() && self.choices.values().all(|c| c.stop_reason.is_some());
        Parsed {
            usage: self.usage,
            model: self.model.clone(),
            complete: self.error.is_none() && (self.done || finished),
            choices: self.choices.values().cloned().collect(),
        }
    }
}

fn error_message(e: &Value) -> String {
    super::error_text(e)
}

/// The choices of a chunk or body with their indexes (position when absent).
fn choices(v: &Value) -> impl Iterator<Item = (u64, &Value)> {
    v.get("choices")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
        .map(|(pos, c)| {
            (
                c.get("index").and_then(Value::as_u64).unwrap_or(pos as u64),
                c,
            )
        })
}

pub(super) fn parse_whole(v: &Value) -> Parsed {
    let mut ended: Vec<Ended> = choices(v)
        .map(|(index, c)| Ended {
            index,
            stop_reason: c
                .get("finish_reason")
                .and_then(Value::as_str)
                .map(str::to_owned),
            refusal: c
                .pointer("/message/refusal")
                .and_then(Value::as_str)
                .filter(|r| !r.is_empty())
                .map(str::to_owned),
            stop_details: None,
        })
        .collect();
    ended.sort_by_key(|c| c.index);
    Parsed {
        usage: usage_of(v),
        model: text(v, "model").map(str::to_owned),
        complete: v.get("choices").is_some_and(Value::is_array) && v.get("error").is_none(),
        choices: ended,
    }
}

/// Merges `v` into `into[k]` (rule 3 of the module doc).
fn merge_field(into: &mut Map<String, Value>, k: &str, v: &Value) {
    match (into.get_mut(k), v) {
        (_, Value::Null) => {
            into.entry(k).or_insert(Value::Null);
        }
        (Some(Value::String(s)), Value::String(piece)) => s.push_str(piece),
        (Some(Value::Array(a)), Value::Array(more)) => a.extend(more.iter().cloned()),
        _ => {
            into.insert(k.to_owned(), v.clone());
        }
    }
}

/// Fills `slot` with `v` when it is empty and `v` is a non-empty string.
fn first(slot: &mut Option<String>, v: Option<&Value>) {
    if slot.is_none() {
        if let Some(s) = v.and_then(Value::as_str).filter(|s| !s.is_empty()) {
            *slot = Some(s.to_owned());
        }
    }
}

#[derive(Default)]
struct Call {
    id: Option<String>,
    kind: Option<String>,
    name: Option<String>,
    arguments: String,
}

impl Call {
    fn merge(&mut self, fragment: &Value) {
        first(&mut self.id, fragment.get("id"));
        first(&mut self.kind, fragment.get("type"));
        let function = fragment.get("function").unwrap_or(fragment);
        first(&mut self.name, function.get("name"));
        if let Some(piece) = function.get("arguments").and_then(Value::as_str) {
            self.arguments.push_str(piece);
        }
    }

    fn function(&self) -> Value {
        json!({"name": self.name.clone().unwrap_or_default(), "arguments": self.arguments})
    }
}

#[derive(Default)]
struct Choice {
    role: Option<String>,
    content: Option<String>,
    refusal: Option<String>,
    calls: BTreeMap<u64, Call>,
    function_call: Option<Call>,
    message: Map<String, Value>,
    finish_reason: Option<Value>,
    logprobs: Option<Map<String, Value>>,
    rest: Map<String, Value>,
}

impl Choice {
    fn merge(&mut self, c: &Value) {
        if let Some(delta) = c.get("delta").and_then(Value::as_object) {
            for (k, v) in delta {
                match k.as_str() {
                    "role" => first(&mut self.role, Some(v)),
                    "content" => append(&mut self.content, v),
                    "refusal" => append(&mut self.refusal, v),
                    "tool_calls" => {
                        for (pos, frag) in v.as_array().into_iter().flatten().enumerate() {
                            let i = frag.get("index").and_then(Value::as_u64);
                            let i = i.unwrap_or(pos as u64);
                            self.calls.entry(i).or_default().merge(frag);
                        }
                    }
                    "function_call" if v.is_object() => {
                        self.function_call
                            .get_or_insert_with(Call::default)
                            .merge(v);
                    }
                    _ => merge_field(&mut self.message, k, v),
                }
            }
        }
        for (k, v) in c.as_object().into_iter().flatten() {
            match k.as_str() {
                "delta" | "index" => {}
                "finish_reason" if !v.is_null() => self.finish_reason = Some(v.clone()),
                "logprobs" => {
                    if let Some(lp) = v.as_object() {
                        let into = self.logprobs.get_or_insert_with(Map::new);
                        for (k, v) in lp {
                            merge_field(into, k, v);
                        }
                    }
                }
                _ if !v.is_null() => {
                    self.rest.insert(k.clone(), v.clone());
                }
                _ => {}
            }
        }
    }

    fn whole(self, index: u64) -> Value {
        let mut message = self.message;
        message.insert(
            "role".into(),
            Value::from(self.role.unwrap_or_else(|| "assistant".into())),
        );
        message.insert(
            "content".into(),
            self.content.map_or(Value::Null, Value::from),
        );
        message.insert(
            "refusal".into(),
            self.refusal.map_or(Value::Null, Value::from),
        );
        if !self.calls.is_empty() {
            let calls = self.calls.values().map(|c| {
                json!({
                    "id": c.id.clone().unwrap_or_default(),
                    "type": c.kind.clone().unwrap_or_else(|| "function".into()),
                    "function": c.function(),
                })
            });
            message.insert("tool_calls".into(), Value::Array(calls.collect()));
        }
        if let Some(f) = &self.function_call {
            message.insert("function_call".into(), f.function());
        }
        let mut choice = self.rest;
        choice.insert("index".into(), Value::from(index));
        choice.insert("message".into(), Value::Object(message));
        choice.insert(
            "logprobs".into(),
            self.logprobs.map_or(Value::Null, Value::Object),
        );
        choice.insert(
            "finish_reason".into(),
            self.finish_reason.unwrap_or(Value::Null),
        );
        Value::Object(choice)
    }
}

fn append(slot: &mut Option<String>, v: &Value) {
    if let Some(piece) = v.as_str() {
        slot.get_or_insert_with(String::new).push_str(piece);
    }
}

pub(super) fn assemble(events: &[FramedEvent]) -> Result<Value, FormError> {
    let mut top = Map::new();
    let mut usage = None;
    let mut by_index: BTreeMap<u64, Choice> = BTreeMap::new();
    for ev in events {
        if ev.data.trim() == "[DONE]" {
            continue;
        }
        let chunk = event_json(API, ev)?;
        for (k, v) in chunk.as_object().into_iter().flatten() {
            match k.as_str() {
                "choices" | "object" => {}
                "usage" => {
                    if v.is_object() {
                        usage = Some(v.clone());
                    }
                }
                _ if v.is_null() || v.as_str() == Some("") => {
                    top.entry(k.clone()).or_insert_with(|| v.clone());
                }
                _ => {
                    top.insert(k.clone(), v.clone());
                }
            }
        }
        for (i, c) in choices(&chunk) {
            by_index.entry(i).or_default().merge(c);
        }
    }
    top.insert("object".into(), Value::from("chat.completion"));
    let choices = by_index.into_iter().map(|(i, c)| c.whole(i));
    top.insert("choices".into(), Value::Array(choices.collect()));
    if let Some(u) = usage {
        top.insert("usage".into(), u);
    }
    Ok(Value::Object(top))
}

pub(super) fn stream(whole: &Value, out: &mut Vec<u8>) -> Result<(), FormError> {
    let not = |reason: &str| FormError::NotAResponse {
        api: API,
        reason: reason.into(),
    };
    let obj = whole.as_object().ok_or_else(|| not("not a JSON object"))?;
    if obj.get("error").is_some_and(|e| !e.is_null()) {
        return Err(not("it is an error body"));
    }
    let list = obj
        .get("choices")
        .and_then(Value::as_array)
        .ok_or_else(|| not("no `choices` array"))?;
    let mut top = obj.clone();
    for k in ["choices", "usage", "object"] {
        top.remove(k);
    }
    top.insert("object".into(), Value::from("chat.completion.chunk"));
    let chunk = |index: u64, delta: Value, extra: Map<String, Value>| {
        let mut choice = extra;
        choice.insert("index".into(), Value::from(index));
        choice.insert("delta".into(), delta);
        choice.entry("logprobs").or_insert(Value::Null);
        choice.entry("finish_reason").or_insert(Value::Null);
        let mut c = top.clone();
        c.insert("choices".into(), Value::Array(vec![Value::Object(choice)]));
        Value::Object(c)
    };
    for (pos, choice) in list.iter().enumerate() {
        let index = choice
            .get("index")
            .and_then(Value::as_u64)
            .unwrap_or(pos as u64);
        let empty = Map::new();
        let message = choice
            .get("message")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let role = message
            .get("role")
            .cloned()
            .unwrap_or(Value::from("assistant"));
        write_event(out, None, &chunk(index, json!({"role": role}), Map::new()));
        for (k, v) in message {
            if !matches!(
                k.as_str(),
                "role" | "content" | "refusal" | "tool_calls" | "function_call"
            ) {
                write_event(
                    out,
                    None,
                    &chunk(index, json!({ k.as_str(): v }), Map::new()),
                );
            }
        }
        if let Some(r) = message.get("refusal").filter(|r| r.is_string()) {
            write_event(out, None, &chunk(index, json!({"refusal": r}), Map::new()));
        }
        let mut with_logprobs = Map::new();
        if let Some(lp) = choice.get("logprobs").filter(|l| l.is_object()) {
            with_logprobs.insert("logprobs".into(), lp.clone());
        }
        match message.get("content").filter(|c| c.is_string()) {
            Some(c) => write_event(
                out,
                None,
                &chunk(index, json!({"content": c}), with_logprobs),
            ),
            None if !with_logprobs.is_empty() => {
                write_event(out, None, &chunk(index, json!({}), with_logprobs));
            }
            None => {}
        }
        let calls = message.get("tool_calls").and_then(Value::as_array);
        for (k, call) in calls.into_iter().flatten().enumerate() {
            let mut frag = call.as_object().cloned().unwrap_or_default();
            frag.insert("index".into(), Value::from(k as u64));
            let delta = json!({"tool_calls": [frag]});
            write_event(out, None, &chunk(index, delta, Map::new()));
        }
        if let Some(f) = message.get("function_call").filter(|f| f.is_object()) {
            let delta = json!({"function_call": f});
            write_event(out, None, &chunk(index, delta, Map::new()));
        }
        let mut last = Map::new();
        for (k, v) in choice.as_object().into_iter().flatten() {
            if !matches!(k.as_str(), "index" | "message" | "logprobs") {
                last.insert(k.clone(), v.clone());
            }
        }
        write_event(out, None, &chunk(index, json!({}), last));
    }
    if let Some(u) = obj.get("usage").filter(|u| u.is_object()) {
        let mut c = top.clone();
        c.insert("choices".into(), json!([]));
        c.insert("usage".into(), u.clone());
        write_event(out, None, &Value::Object(c));
    }
    out.extend_from_slice(b"data: [DONE]\n\n");
    Ok(())
}
