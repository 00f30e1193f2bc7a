//! What the model really said, end to end (DESIGN §4): refusals, stops,
//! cut-off tool calls, thinking and the model that answered — journaled,
//! shown, priced, and sent back on the next request exactly as a continuous
//! run sends it. Real SSE streams from a local mock server.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};

use common::*;
use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

/// Answers the n-th request with the n-th body; the last one repeats.
struct Bodies(Vec<String>, AtomicUsize);

impl Respond for Bodies {
    fn respond(&self, _: &Request) -> ResponseTemplate {
        let n = self.1.fetch_add(1, Ordering::SeqCst).min(self.0.len() - 1);
        ResponseTemplate::new(200).set_body_raw(self.0[n].clone().into_bytes(), "text/event-stream")
    }
}

async fn serve(route: &str, bodies: Vec<String>) -> MockServer {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path(route))
        .respond_with(Bodies(bodies, AtomicUsize::new(0)))
        .mount(&server)
        .await;
    server
}

/// OpenAI chat-completion chunks, then `[DONE]`.
fn openai(chunks: &[Value]) -> String {
    let mut body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    body
}

fn usage_chunk(model: &str) -> Value {
    json!({"model": model, "choices": [], "usage": {"prompt_tokens": 1000, "completion_tokens": 100}})
}

/// Anthropic events, named by their `type`.
fn anthropic(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap()))
        .collect()
}

async fn bodies(server: &MockServer) -> Vec<Value> {
    server
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| serde_json::from_slice(&r.body).unwrap())
        .collect()
}

fn run_openai(s: &Scratch, base: &str, model: &str) -> std::process::Output {
    s.cmd()
        .env("OPENAI_API_KEY", "sk-test")
        .args([
            "run",
            "--model",
            model,
            "--base-url",
            base,
            "--json",
            "task",
        ])
        .output()
        .unwrap()
}

fn assistants(records: &[Value]) -> Vec<&Value> {
    records
        .iter()
        .filter(|r| r["kind"] == "assistant")
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openai_refusal_is_journaled_shown_and_ends_the_run_failed() {
    let stream = openai(&[
        json!({"model": "gpt-4o", "choices": [{"index": 0, "delta": {"role": "assistant", "content": null, "refusal": ""}}]}),
        json!({"choices": [{"index": 0, "delta": {"refusal": "I can't help "}}]}),
        json!({"choices": [{"index": 0, "delta": {"refusal": "with that."}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        usage_chunk("gpt-4o"),
    ]);
    let server = serve("/v1/chat/completions", vec![stream]).await;
    let s = Scratch::new();
    let base = format!("{}/v1", server.uri());
    let out = s
        .cmd()
        .env("OPENAI_API_KEY", "sk-test")
        .args([
            "run",
            "--model",
            "openai:gpt-4o",
            "--base-url",
            &base,
            "task",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "a refusal does not complete the task"
    );
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains("[the model refused] I can't help with that."),
        "{shown}"
    );
    let id = s.only_session();
    let recs = s.records(&id);
    let turn = assistants(&recs)[0];
    assert_eq!(turn["refusal"], "I can't help with that.");
    assert_eq!(turn["text"], "");
    assert_eq!(turn["stop_reason"], "stop");
    let last = recs.last().unwrap();
    assert_eq!(last["reason"], "failed");
    assert!(
        last["detail"].as_str().unwrap().contains("refused"),
        "{last}"
    );
    // Listed as failed, and shown as refused in the transcript.
    let list = json(&s.run(&["sessions", "--json"]).stdout);
    assert_eq!(list[0]["status"], "failed");
    let t = s.run(&["session", "show", &id, "--transcript"]);
    assert!(String::from_utf8_lossy(&t.stdout).contains("REFUSED: I can't help"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_cut_off_at_the_output_limit_is_never_run_and_the_model_is_told() {
    let cut = openai(&[
        json!({"model": "gpt-4o", "choices": [{"index": 0, "delta": {"role": "assistant", "content": null}}]}),
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "shell", "arguments": ""}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "function": {"arguments": "{\"command\": \"echo ran > ran.txt\"}"}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "id": "call_b", "type": "function", "function": {"name": "write_file", "arguments": ""}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 1, "function": {"arguments": "{\"path\": \"big.txt\", \"content\": \"aaaa"}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}),
        usage_chunk("gpt-4o"),
    ]);
    let done = openai(&[
        json!({"model": "gpt-4o", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "I will write it in parts."}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        usage_chunk("gpt-4o"),
    ]);
    let server = serve("/v1/chat/completions", vec![cut, done]).await;
    let s = Scratch::new();
    let out = run_openai(&s, &format!("{}/v1", server.uri()), "openai:gpt-4o");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json(&out.stdout)["status"], "completed");
    // The complete call ran; the cut one did not.
    assert_eq!(s.read("ran.txt"), "ran\n");
    assert!(!s.ws.join("big.txt").exists());
    let id = s.only_session();
    let recs = s.records(&id);
    let turn = assistants(&recs)[0];
    assert_eq!(turn["stop_reason"], "length");
    // What the model said is on the record, cut as it was.
    assert_eq!(
        turn["tool_calls"][1]["arguments"],
        "{\"path\": \"big.txt\", \"content\": \"aaaa"
    );
    let starts: Vec<&Value> = recs.iter().filter(|r| r["kind"] == "tool_start").collect();
    assert_eq!(starts.len(), 1, "only the complete call was dispatched");
    let b = results_for(&recs, "call_b");
    assert_eq!(b.len(), 1);
    assert_eq!(b[0]["outcome"], "error");
    assert!(b[0]["output"].as_str().unwrap().contains("cut off"));
    // The next request never shows the model an input it did not produce:
    // the cut call is left out, and why it was not run comes as a user turn.
    let sent = bodies(&server).await;
    assert_eq!(sent.len(), 2);
    let messages = sent[1]["messages"].as_array().unwrap();
    let assistant = messages.iter().find(|m| m["role"] == "assistant").unwrap();
    let calls = assistant["tool_calls"].as_array().unwrap();
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0]["id"], "call_a");
    let last = messages.last().unwrap();
    assert_eq!(last["role"], "user");
    assert!(last["content"].as_str().unwrap().contains("NOT run"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_cut_off_without_tool_calls_ends_the_run_failed_not_completed() {
    let cut = openai(&[
        json!({"model": "gpt-4o", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "The first half of"}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]}),
        usage_chunk("gpt-4o"),
    ]);
    let server = serve("/v1/chat/completions", vec![cut]).await;
    let s = Scratch::new();
    let out = run_openai(&s, &format!("{}/v1", server.uri()), "openai:gpt-4o");
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json(&out.stdout)["status"], "failed");
    let id = s.only_session();
    let last = s.records(&id).last().unwrap().clone();
    assert!(
        last["detail"].as_str().unwrap().contains("cut off"),
        "{last}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_is_priced_by_the_model_that_answered() {
    let answer = openai(&[
        json!({"model": "gpt-4o-mini-2024-07-18", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        usage_chunk("gpt-4o-mini-2024-07-18"),
    ]);
    let server = serve("/v1/chat/completions", vec![answer]).await;
    let s = Scratch::new();
    let prices = s.dir.path().join("prices.json");
    std::fs::write(
        &prices,
        r#"{"openai:gpt-4o": {"input_per_mtok": 2.5, "output_per_mtok": 10.0},
            "openai:gpt-4o-mini": {"input_per_mtok": 0.15, "output_per_mtok": 0.6}}"#,
    )
    .unwrap();
    let out = s
        .cmd()
        .env("OPENAI_API_KEY", "sk-test")
        .env("CAIRN_PRICES", &prices)
        .args([
            "run",
            "--model",
            "openai:gpt-4o",
            "--base-url",
            &format!("{}/v1", server.uri()),
            "--json",
            "task",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = s.only_session();
    let recs = s.records(&id);
    let turn = assistants(&recs)[0];
    assert_eq!(turn["model"], "gpt-4o-mini-2024-07-18");
    assert_eq!(turn["requested_model"], "gpt-4o");
    // 1000 in, 100 out at the mini's price, not the 4o's.
    let usd = turn["cost"]["usd"].as_f64().unwrap();
    assert!(
        (usd - (1000.0 * 0.15 + 100.0 * 0.6) / 1e6).abs() < 1e-12,
        "{usd}"
    );
}

/// Turn 1: thinking (signed), a redacted block, a read_file call; turn 2: done.
fn thinking_loop() -> Vec<String> {
    let turn1 = anthropic(&[
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": [], "stop_reason": null, "usage": {"input_tokens": 50, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": "", "signature": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "I should read "}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "the notes first."}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxSig=="}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"}}),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "content_block_start", "index": 2, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}}),
        json!({"type": "content_block_delta", "index": 2, "delta": {"type": "input_json_delta", "partial_json": "{\"path\": \"notes.txt\"}"}}),
        json!({"type": "content_block_stop", "index": 2}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 60}}),
        json!({"type": "message_stop"}),
    ]);
    let turn2 = anthropic(&[
        json!({"type": "message_start", "message": {"id": "msg_2", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": [], "stop_reason": null, "usage": {"input_tokens": 80, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "The notes say hello."}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn", "stop_sequence": null}, "usage": {"output_tokens": 10}}),
        json!({"type": "message_stop"}),
    ]);
    vec![turn1, turn2]
}

fn anthropic_cmd(s: &Scratch, base: &str) -> std::process::Command {
    let mut c = s.cmd();
    c.env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("ANTHROPIC_BASE_URL", base);
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thinking_tool_loop_resumed_after_a_kill_sends_what_a_continuous_run_sends() {
    // A continuous run.
    let server = serve("/v1/messages", thinking_loop()).await;
    let s = Scratch::new();
    std::fs::write(s.ws.join("notes.txt"), "hello\n").unwrap();
    let out = anthropic_cmd(&s, &server.uri())
        .args([
            "run",
            "--model",
            "anthropic:claude-sonnet-4-5",
            "--thinking",
            "low",
            "--json",
            "task",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let continuous = bodies(&server).await;
    assert_eq!(continuous.len(), 2);
    let second = &continuous[1];
    // The same thinking configuration across the loop, and the blocks sent
    // back first and unmodified.
    assert_eq!(second["thinking"], continuous[0]["thinking"]);
    assert_eq!(second["thinking"]["type"], "enabled");
    let turn = second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap()
        .clone();
    assert_eq!(
        turn["content"][0],
        json!({"type": "thinking", "thinking": "I should read the notes first.", "signature": "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxSig=="})
    );
    assert_eq!(
        turn["content"][1],
        json!({"type": "redacted_thinking", "data": "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT"})
    );
    assert_eq!(turn["content"][2]["type"], "tool_use");
    let id = s.only_session();
    let journaled = assistants(&s.records(&id))[0].clone();
    assert_eq!(journaled["thinking"].as_array().unwrap().len(), 2);
    assert_eq!(journaled["v"], 2);

    // The same run killed while its read-only call is in flight, then resumed.
    let server = serve("/v1/messages", thinking_loop()).await;
    let k = Scratch::new();
    std::fs::write(k.ws.join("notes.txt"), "hello\n").unwrap();
    let mut child = anthropic_cmd(&k, &server.uri())
        .env("CAIRN_FAULT", "stall-after-tool-start")
        .args([
            "run",
            "--model",
            "anthropic:claude-sonnet-4-5",
            "--thinking",
            "low",
            "--json",
            "task",
        ])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    wait_until(20, "the tool_start", || {
        std::fs::read_dir(k.store.join("runs")).is_ok_and(|mut d| d.next().is_some())
            && k.records_so_far(&k.only_session())
                .iter()
                .any(|r| r["kind"] == "tool_start")
    });
    kill(&mut child, libc::SIGKILL);
    child.wait().unwrap();
    let kid = k.only_session();
    let out = anthropic_cmd(&k, &server.uri())
        .args(["resume", &kid, "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json(&out.stdout)["status"], "completed");
    let resumed = bodies(&server).await;
    assert_eq!(resumed.len(), 2, "turn 1 was not bought again");
    assert_eq!(resumed[1], continuous[1], "the resumed request differs");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_is_journaled_folded_in_the_transcript_and_sent_back_in_its_tool_round() {
    let turn1 = openai(&[
        json!({"model": "deepseek-chat", "choices": [{"index": 0, "delta": {"role": "assistant", "content": null, "reasoning_content": "The user wants "}}]}),
        json!({"choices": [{"index": 0, "delta": {"reasoning_content": "a listing."}}]}),
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_1", "type": "function", "function": {"name": "list_dir", "arguments": "{\"path\": \".\"}"}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        usage_chunk("deepseek-chat"),
    ]);
    let turn2 = openai(&[
        json!({"model": "deepseek-chat", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "Empty."}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        usage_chunk("deepseek-chat"),
    ]);
    let server = serve("/v1/chat/completions", vec![turn1, turn2]).await;
    let s = Scratch::new();
    let out = run_openai(&s, &format!("{}/v1", server.uri()), "openai:deepseek-chat");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = s.only_session();
    let recs = s.records(&id);
    let turn = assistants(&recs)[0];
    assert_eq!(turn["reasoning"]["text"], "The user wants a listing.");
    assert_eq!(turn["reasoning"]["field"], "reasoning_content");
    let sent = bodies(&server).await;
    let assistant = sent[1]["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "assistant")
        .unwrap()
        .clone();
    assert_eq!(assistant["reasoning_content"], "The user wants a listing.");
    let show = s.run(&["session", "show", &id]);
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(text.contains("(reasoning: 25 chars, folded)"), "{text}");
    assert!(
        !text.contains("The user wants"),
        "reasoning is folded: {text}"
    );
}

/// What a run whose first turn reported `usage` must show: the budget
/// tripped before a second request (not a panic, not a total that wrapped
/// to a budget barely touched), every count saturated at `u64::MAX`, and a
/// journal whose terminal totals verify.
fn assert_budget_tripped_at_u64_max(
    s: &Scratch,
    out: &std::process::Output,
    requests: usize,
    input_tokens: u64,
) {
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(requests, 1, "no second turn was bought");
    let id = s.only_session();
    let recs = s.records(&id);
    let last = recs.last().unwrap();
    assert_eq!(last["reason"], "budget_exhausted", "{last}");
    let totals = &last["totals"];
    assert_eq!(totals["input_tokens"], input_tokens, "{totals}");
    let verify = s.run(&["verify", &id]);
    assert!(
        verify.status.success(),
        "{}",
        String::from_utf8_lossy(&verify.stderr)
    );
    // The people's summary and listing add the counts up saturating too.
    let text = String::from_utf8_lossy(&out.stdout);
    if !text.trim_start().starts_with('{') {
        assert!(text.contains(&format!("{} tokens", u64::MAX)), "{text}");
        assert!(text.contains("budget_exhausted"), "{text}");
    }
    let shown = s.run(&["session", "show", &id]);
    assert!(
        shown.status.success(),
        "{}",
        String::from_utf8_lossy(&shown.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_anthropic_usage_near_u64_max_exhausts_the_budget_without_wrapping() {
    let max = u64::MAX;
    let turn = anthropic(&[
        json!({"type": "message_start", "message": {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5", "content": [], "stop_reason": null,
            "usage": {"input_tokens": max - 1, "cache_read_input_tokens": 5, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": {}}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "{\"path\": \"notes.txt\"}"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use", "stop_sequence": null}, "usage": {"output_tokens": 60}}),
        json!({"type": "message_stop"}),
    ]);
    let server = serve("/v1/messages", vec![turn]).await;
    let s = Scratch::new();
    std::fs::write(s.ws.join("notes.txt"), "hello\n").unwrap();
    let out = anthropic_cmd(&s, &server.uri())
        .args([
            "run",
            "--model",
            "anthropic:claude-sonnet-4-5",
            "--max-tokens",
            "1000",
            "task",
        ])
        .output()
        .unwrap();
    let requests = bodies(&server).await.len();
    assert_budget_tripped_at_u64_max(&s, &out, requests, u64::MAX);
    let recs = s.records(&s.only_session());
    assert_eq!(assistants(&recs)[0]["usage"]["input_tokens"], u64::MAX);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openai_usage_near_u64_max_exhausts_the_budget_without_wrapping() {
    let turn = openai(&[
        json!({"model": "gpt-4o", "choices": [{"index": 0, "delta": {"role": "assistant", "content": null}}]}),
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": "call_a", "type": "function", "function": {"name": "read_file", "arguments": "{\"path\": \"notes.txt\"}"}}]}}]}),
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]}),
        json!({"model": "gpt-4o", "choices": [], "usage": {"prompt_tokens": u64::MAX - 10, "completion_tokens": 100}}),
    ]);
    let server = serve("/v1/chat/completions", vec![turn]).await;
    let s = Scratch::new();
    std::fs::write(s.ws.join("notes.txt"), "hello\n").unwrap();
    let out = s
        .cmd()
        .env("OPENAI_API_KEY", "sk-test")
        .args([
            "run",
            "--model",
            "openai:gpt-4o",
            "--base-url",
            &format!("{}/v1", server.uri()),
            "--max-tokens",
            "1000",
            "--json",
            "task",
        ])
        .output()
        .unwrap();
    let requests = bodies(&server).await.len();
    assert_budget_tripped_at_u64_max(&s, &out, requests, u64::MAX - 10);
    assert_eq!(json(&out.stdout)["status"], "budget_exhausted");
    let recs = s.records(&s.only_session());
    assert_eq!(assistants(&recs)[0]["usage"]["output_tokens"], 100);
}
