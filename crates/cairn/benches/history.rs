//! History benchmark (run on demand: `cargo bench -p cairn --bench history`):
//! how much of each request a provider's prompt cache can reuse.
//!
//! A provider caches what it has seen: the previous request and the answer
//! it generated to it. Turn N's request can be served from that cache up to
//! its first byte that differs, so every earlier byte a client changes —
//! tool-call arguments re-serialised (keys sorted, spaces dropped), a
//! reasoning item dropped or rewritten — re-bills the rest of the
//! conversation at the uncached price.
//!
//! For each API (OpenAI chat completions, Anthropic messages, OpenAI
//! responses), `cairn run` holds a 10-turn conversation with the mock
//! upstream: turns 1–9 each write a note with `write_file`, the model
//! writing its arguments spaced and with the keys out of order
//! (`{"path": "notes/3.txt",  "content": "…"}`), as real models do; turn
//! 10 answers in text. For Responses each turn also carries a reasoning
//! item with `encrypted_content`.
//!
//! What is compared is what the model sees: each conversation item's
//! strings in order (roles, texts, call ids, names, the arguments' text —
//! for Anthropic the `input` object's bytes as sent —, outputs, reasoning
//! payloads). For turn N:
//!
//! - earlier = what turn N−1's request held, then turn N−1's answer as the
//!   model produced it;
//! - cached = the bytes of turn N's request that match earlier from the
//!   start (its longest common prefix with it);
//! - the line printed is `cached / earlier`: 1.000 when every earlier byte
//!   went back unchanged.

use std::path::Path;
use std::process::Command;

use cairn_testkit::upstream::{RecordedRequest, Reply, Script, Upstream};
use serde::Deserialize;
use serde_json::value::RawValue;
use serde_json::{json, Value};

const TURNS: usize = 10;

/// What the mock model says at turn `k` (0-based).
struct Said {
    text: String,
    call: Option<(String, String)>,
    reasoning: Option<(String, String)>,
}

fn said(k: usize, reasoning: bool) -> Said {
    if k + 1 == TURNS {
        return Said {
            text: "All notes are written.".into(),
            call: None,
            reasoning: reasoning.then(|| (format!("Done after {k} notes"), encrypted(k))),
        };
    }
    Said {
        text: format!("Writing note {k}."),
        call: Some((
            format!("call_t{k}_1"),
            format!(
                r#"{{"path": "notes/{k}.txt",  "content": "note {k}: {}"}}"#,
                "x".repeat(40)
            ),
        )),
        reasoning: reasoning.then(|| (format!("Note {k} comes next"), encrypted(k))),
    }
}

fn encrypted(k: usize) -> String {
    format!("gAAAAB{}{k}==", "Qm9yaW5n".repeat(24))
}

fn reply(s: &Said, k: usize) -> Reply {
    let mut r = Reply::text(&s.text);
    if let Some((_, args)) = &s.call {
        r = r
            .with_raw_tool_call("write_file", args)
            .with_call_ids(&format!("call_t{k}_"));
    }
    if let Some((summary, payload)) = &s.reasoning {
        r = r.with_reasoning(summary, payload);
    }
    r
}

#[derive(Clone, Copy, PartialEq)]
enum Api {
    Chat,
    Messages,
    Responses,
}

impl Api {
    fn name(self) -> &'static str {
        match self {
            Api::Chat => "openai chat",
            Api::Messages => "anthropic messages",
            Api::Responses => "openai responses",
        }
    }
}

/// The strings the model sees, in order, separated by U+001F.
fn render(api: Api, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut put = |s: &str| {
        out.extend_from_slice(s.as_bytes());
        out.push(0x1f);
    };
    match api {
        Api::Chat => {
            let body: Value = serde_json::from_slice(body).expect("a JSON request");
            for m in body["messages"].as_array().expect("messages") {
                chat_item(m, &mut put);
            }
        }
        Api::Responses => {
            let body: Value = serde_json::from_slice(body).expect("a JSON request");
            for item in body["input"].as_array().expect("input items") {
                responses_item(item, &mut put);
            }
        }
        Api::Messages => {
            let body: MessagesBody = serde_json::from_slice(body).expect("a messages request");
            for m in &body.messages {
                put(&m.role);
                for b in &m.content {
                    messages_block(b, &mut put);
                }
            }
        }
    }
    out
}

fn text_of(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn chat_item(m: &Value, put: &mut impl FnMut(&str)) {
    put(&text_of(&m["role"]));
    put(&text_of(&m["content"]));
    for c in m["tool_calls"].as_array().into_iter().flatten() {
        put(&text_of(&c["id"]));
        put(&text_of(&c["function"]["name"]));
        put(&text_of(&c["function"]["arguments"]));
    }
    if let Some(id) = m["tool_call_id"].as_str() {
        put(id);
    }
}

fn responses_item(item: &Value, put: &mut impl FnMut(&str)) {
    for field in ["type", "role", "call_id", "name", "arguments", "output"] {
        if let Some(s) = item[field].as_str() {
            put(s);
        }
    }
    for part in item["content"].as_array().into_iter().flatten() {
        put(&text_of(&part["text"]));
    }
    if let Some(s) = item["content"].as_str() {
        put(s);
    }
    for part in item["summary"].as_array().into_iter().flatten() {
        put(&text_of(&part["text"]));
    }
    if let Some(s) = item["encrypted_content"].as_str() {
        put(s);
    }
}

#[derive(Deserialize)]
struct MessagesBody {
    messages: Vec<ApiMessage>,
}

#[derive(Deserialize)]
struct ApiMessage {
    role: String,
    content: Vec<Block>,
}

#[derive(Deserialize)]
struct Block {
    #[serde(rename = "type")]
    kind: String,
    #[serde(default)]
    text: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    name: Option<String>,
    #[serde(default)]
    input: Option<Box<RawValue>>,
    #[serde(default)]
    tool_use_id: Option<String>,
    #[serde(default)]
    content: Option<Value>,
}

fn messages_block(b: &Block, put: &mut impl FnMut(&str)) {
    put(&b.kind);
    for s in [&b.text, &b.id, &b.name, &b.tool_use_id]
        .into_iter()
        .flatten()
    {
        put(s);
    }
    if let Some(input) = &b.input {
        put(input.get());
    }
    if let Some(c) = &b.content {
        put(&text_of(c));
    }
}

/// Turn `k`'s answer as the model produced it, rendered as a request
/// carries it.
fn answer(api: Api, s: &Said) -> Vec<u8> {
    let mut out = Vec::new();
    let mut put = |x: &str| {
        out.extend_from_slice(x.as_bytes());
        out.push(0x1f);
    };
    match api {
        Api::Chat => {
            let mut m = json!({"role": "assistant", "content": s.text});
            if let Some((id, args)) = &s.call {
                m["tool_calls"] =
                    json!([{"id": id, "function": {"name": "write_file", "arguments": args}}]);
            }
            chat_item(&m, &mut put);
        }
        Api::Messages => {
            put("assistant");
            put("text");
            put(&s.text);
            if let Some((id, args)) = &s.call {
                for x in ["tool_use", id, "write_file", args] {
                    put(x);
                }
            }
        }
        Api::Responses => {
            if let Some((summary, payload)) = &s.reasoning {
                let item = json!({"type": "reasoning", "summary": [{"type": "summary_text", "text": summary}], "encrypted_content": payload});
                responses_item(&item, &mut put);
            }
            let message = json!({"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": s.text}]});
            responses_item(&message, &mut put);
            if let Some((id, args)) = &s.call {
                let call = json!({"type": "function_call", "call_id": id, "name": "write_file", "arguments": args});
                responses_item(&call, &mut put);
            }
        }
    }
    out
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

fn run(bin: &str, api: Api) -> Option<Vec<RecordedRequest>> {
    let said: Vec<Said> = (0..TURNS).map(|k| said(k, api == Api::Responses)).collect();
    let replies = said.iter().enumerate().map(|(k, s)| reply(s, k)).collect();
    let upstream = Upstream::start(Script::by_turn(replies));
    let dir = tempfile::tempdir().expect("a temp dir");
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(ws.join("notes")).expect("the workspace");
    let (model, base) = match api {
        Api::Chat => ("openai:gpt-bench", upstream.openai_base_url()),
        Api::Messages => ("anthropic:claude-bench", upstream.base_url()),
        Api::Responses => ("openai-responses:gpt-bench", upstream.openai_base_url()),
    };
    let out = Command::new(bin)
        .args([
            "run",
            "--model",
            model,
            "--base-url",
            &base,
            "write the notes",
        ])
        .env("CAIRN_STORE", dir.path().join("store"))
        .env("CAIRN_PRICES", dir.path().join("no-prices.json"))
        .env("OPENAI_API_KEY", "sk-bench")
        .env("ANTHROPIC_API_KEY", "sk-bench")
        .env_remove("CAIRN_FAULT")
        .env_remove("CAIRN_MODEL")
        .current_dir(&ws)
        .output()
        .expect("cairn runs");
    if !out.status.success() {
        eprintln!(
            "{}: cairn run failed: {}",
            api.name(),
            String::from_utf8_lossy(&out.stderr).trim()
        );
        return None;
    }
    Some(upstream.requests())
}

fn report(api: Api, requests: &[RecordedRequest]) {
    let said: Vec<Said> = (0..TURNS).map(|k| said(k, api == Api::Responses)).collect();
    let rendered: Vec<Vec<u8>> = requests.iter().map(|r| render(api, &r.body)).collect();
    assert_eq!(
        rendered.len(),
        TURNS,
        "{}: one request per turn",
        api.name()
    );
    for n in 2..=TURNS {
        let mut earlier = rendered[n - 2].clone();
        earlier.extend(answer(api, &said[n - 2]));
        let now = &rendered[n - 1];
        let cached = common_prefix(now, &earlier);
        println!(
            "{:<19} turn {n:>2}: cached prefix {cached:>6} B of {:>6} earlier B = {:.3}  (request body {} B)",
            api.name(),
            earlier.len(),
            cached as f64 / earlier.len() as f64,
            requests[n - 1].body.len(),
        );
    }
}

fn main() {
    let bin = env!("CARGO_BIN_EXE_cairn");
    assert!(Path::new(bin).exists(), "the cairn binary is built");
    for api in [Api::Chat, Api::Messages, Api::Responses] {
        if let Some(requests) = run(bin, api) {
            report(api, &requests);
        }
    }
}
