//! History goes back byte for byte (DESIGN §4): every earlier turn is sent
//! again exactly as the provider produced it — a tool call's arguments with
//! the model's own spacing and key order, a Responses reasoning item with
//! its `encrypted_content` — by an uninterrupted run and by a run killed
//! with SIGKILL mid-conversation and resumed alike, so a provider's prompt
//! cache, which matches on exact prefixes, is never broken by cairn, and a
//! reasoning model keeps its reasoning across tool calls. Real HTTP against
//! the mock upstream, the real binary, for Chat Completions, Messages and
//! the Responses API (`--model openai-responses:…`).

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use cairn_testkit::upstream::{RecordedRequest, Reply, Script, Upstream};
use common::*;
use serde_json::{json, Value};

/// The arguments as the model writes them: spaced, keys not sorted.
const FIRST: &str = r#"{"path": "a.txt",  "content": "one\n"}"#;
const SECOND: &str = "{ \"path\" : \"b.txt\", \"content\" : \"two\" }";

/// The reasoning each turn carries (the Responses API only), as
/// `(summary, encrypted_content)`.
const REASONING: [(&str, &str); 3] = [
    ("Write a first", "gAAAAABpRmlyc3Q-opaque_1=="),
    ("Then b", "gAAAAABpU2Vjb25k-opaque_2=="),
    ("Both are there", "gAAAAABpVGhpcmQ-opaque_3=="),
];

/// Which API, and how cairn is pointed at the mock.
#[derive(Clone, Copy, Debug)]
enum Api {
    Chat,
    Messages,
    Responses,
}

impl Api {
    fn path(self) -> &'static str {
        match self {
            Api::Chat => "/v1/chat/completions",
            Api::Messages => "/v1/messages",
            Api::Responses => "/v1/responses",
        }
    }

    fn args(self, upstream: &Upstream) -> Vec<String> {
        let (model, base) = match self {
            Api::Chat => ("openai:gpt-test", upstream.openai_base_url()),
            Api::Messages => ("anthropic:claude-test", upstream.base_url()),
            Api::Responses => ("openai-responses:gpt-test", upstream.openai_base_url()),
        };
        [
            "run",
            "--model",
            model,
            "--base-url",
            &base,
            "write two files",
        ]
        .map(str::to_owned)
        .to_vec()
    }

    /// How `raw` appears in a request body when sent back as produced.
    fn sent(self, raw: &str) -> String {
        match self {
            // A JSON string: the text, escaped.
            Api::Chat | Api::Responses => serde_json::to_string(raw).unwrap(),
            // The `input` object: the text itself.
            Api::Messages => format!("\"input\":{raw}"),
        }
    }
}

/// Two turns that each write a file, then a text answer. When `hang` is
/// armed, the first request of turn 3 is held (the test kills cairn then).
fn script(hang: Arc<AtomicBool>) -> Script {
    let turns = [
        Reply::text("Writing a.")
            .with_raw_tool_call("write_file", FIRST)
            .with_call_ids("call_a"),
        Reply::text("")
            .with_raw_tool_call("write_file", SECOND)
            .with_call_ids("call_b"),
        Reply::text("Both files are written."),
    ]
    .into_iter()
    .zip(REASONING)
    .map(|(reply, (summary, payload))| reply.with_reasoning(summary, payload))
    .collect::<Vec<_>>();
    Script::from_fn(move |req| {
        let t = req.turn().min(turns.len() - 1);
        let reply = turns[t].clone();
        if t == 2 && hang.swap(false, Ordering::SeqCst) {
            reply.sleep_first(Duration::from_secs(120))
        } else {
            reply
        }
    })
}

fn model_requests(upstream: &Upstream, api: Api) -> Vec<RecordedRequest> {
    upstream
        .requests()
        .into_iter()
        .filter(|r| r.path == api.path())
        .collect()
}

fn body(r: &RecordedRequest) -> String {
    String::from_utf8(r.body.clone()).unwrap()
}

fn uninterrupted(api: Api) -> Vec<RecordedRequest> {
    let upstream = Upstream::start(script(Arc::new(AtomicBool::new(false))));
    let s = Scratch::new();
    let out = s
        .cmd()
        .env("OPENAI_API_KEY", "sk-test")
        .env("ANTHROPIC_API_KEY", "sk-test")
        .args(api.args(&upstream))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{api:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(s.read("a.txt"), "one\n");
    model_requests(&upstream, api)
}

/// Killed with SIGKILL while turn 3's request is in flight, then resumed.
fn killed_and_resumed(api: Api) -> Vec<RecordedRequest> {
    let upstream = Upstream::start(script(Arc::new(AtomicBool::new(true))));
    let s = Scratch::new();
    let mut child = s
        .cmd()
        .env("OPENAI_API_KEY", "sk-test")
        .env("ANTHROPIC_API_KEY", "sk-test")
        .args(api.args(&upstream))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    assert!(
        upstream.wait_for_requests(3, Duration::from_secs(60)),
        "{api:?}: turn 3 was never asked"
    );
    kill(&mut child, libc::SIGKILL);
    child.wait().unwrap();
    let id = s.only_session();
    let out = s
        .cmd()
        .env("OPENAI_API_KEY", "sk-test")
        .env("ANTHROPIC_API_KEY", "sk-test")
        .args(["resume", &id])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{api:?}: resume: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(s.read("b.txt"), "two");
    model_requests(&upstream, api)
}

fn check(api: Api) {
    let whole = uninterrupted(api);
    assert_eq!(whole.len(), 3, "{api:?}: one request per turn");
    for (turn, raw) in [(2, FIRST), (3, FIRST), (3, SECOND)] {
        let sent = api.sent(raw);
        assert!(
            body(&whole[turn - 1]).contains(&sent),
            "{api:?}: turn {turn}'s request does not carry {sent} as the model wrote it:\n{}",
            body(&whole[turn - 1])
        );
    }
    if let Api::Responses = api {
        responses_items(&whole);
    }
    let resumed = killed_and_resumed(api);
    assert_eq!(resumed.len(), 4, "{api:?}: turn 3 asked twice");
    for (i, j) in [(0, 0), (1, 1), (2, 2), (2, 3)] {
        assert_eq!(
            body(&whole[i]),
            body(&resumed[j]),
            "{api:?}: request {} of the resumed run differs from the uninterrupted run's",
            j + 1
        );
    }
}

#[test]
fn chat_history_goes_back_byte_for_byte_across_a_sigkill_and_resume() {
    check(Api::Chat);
}

#[test]
fn messages_history_goes_back_byte_for_byte_across_a_sigkill_and_resume() {
    check(Api::Messages);
}

#[test]
fn responses_reasoning_and_call_outputs_go_back_byte_for_byte_across_a_sigkill_and_resume() {
    check(Api::Responses);
}

/// What the model made in turn `t` (0-based), as a Responses request
/// carries it back: its reasoning item (summary and `encrypted_content` as
/// produced, no `id`), its message, its call (the arguments as written).
fn made(t: usize) -> Vec<Value> {
    let (summary, payload) = REASONING[t];
    let mut items = vec![json!({
        "type": "reasoning",
        "encrypted_content": payload,
        "summary": [{"type": "summary_text", "text": summary}],
    })];
    let (id, raw) = match t {
        0 => {
            items.push(json!({
                "type": "message", "role": "assistant", "status": "completed",
                "content": [{"type": "output_text", "text": "Writing a.", "annotations": [], "logprobs": []}],
            }));
            ("call_a1", FIRST)
        }
        _ => ("call_b1", SECOND),
    };
    items.push(json!({
        "type": "function_call", "status": "completed", "call_id": id,
        "name": "write_file", "arguments": raw,
    }));
    items
}

/// The Responses requests: stateless, asking for encrypted reasoning, and
/// carrying each earlier turn's items as the model made them, each call's
/// output right after it, paired by `call_id`.
fn responses_items(requests: &[RecordedRequest]) {
    let user = json!({"type": "message", "role": "user", "content": [{"type": "input_text", "text": "write two files"}]});
    let output = |id: &str, file: &str, bytes: usize| {
        json!({"type": "function_call_output", "call_id": id,
               "output": format!("wrote {bytes} bytes to `{file}`")})
    };
    let mut want = vec![user];
    for (t, request) in requests.iter().enumerate() {
        let sent = request.json().unwrap();
        assert_eq!(sent["store"], false);
        assert_eq!(sent["include"], json!(["reasoning.encrypted_content"]));
        assert_eq!(sent["input"], json!(want), "request {}", t + 1);
        if t < 2 {
            want.extend(made(t));
            want.push(match t {
                0 => output("call_a1", "a.txt", 4),
                _ => output("call_b1", "b.txt", 3),
            });
        }
    }
    // The opaque payloads travel as the exact bytes received.
    let last = body(&requests[2]);
    for (_, payload) in &REASONING[..2] {
        assert!(last.contains(&format!("\"encrypted_content\":\"{payload}\"")));
    }
}
