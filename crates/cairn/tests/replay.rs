//! The response store in process (DESIGN §7): a response bought but not yet
//! journaled when the process died is served from the store on resume, and the
//! provider is never asked twice. Against a local mock of an OpenAI-compatible
//! server that counts requests, with a real SSE stream.

mod common;

use common::*;
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn sse(chunks: &[serde_json::Value]) -> String {
    let mut body = String::new();
    for c in chunks {
        body.push_str(&format!("data: {c}\n\n"));
    }
    body.push_str("data: [DONE]\n\n");
    body
}

fn answer(text: &str) -> String {
    sse(&[
        serde_json::json!({"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
        serde_json::json!({"choices": [{"index": 0, "delta": {"content": text}}]}),
        serde_json::json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        serde_json::json!({"choices": [], "usage": {"prompt_tokens": 1000, "completion_tokens": 100}}),
    ])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_after_the_response_is_stored_is_served_from_the_store_on_resume() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(
            ResponseTemplate::new(200).set_body_raw(answer("the answer"), "text/event-stream"),
        )
        .mount(&server)
        .await;
    let s = Scratch::new();
    let base = format!("{}/v1", server.uri());
    let prices = s.dir.path().join("prices.json");
    std::fs::write(
        &prices,
        r#"{"openai:test-model": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}}"#,
    )
    .unwrap();

    let out = s
        .cmd()
        .env("CAIRN_FAULT", "crash-after-response-stored")
        .env("OPENAI_API_KEY", "sk-test")
        .env("CAIRN_PRICES", &prices)
        .args([
            "run",
            "--model",
            "openai:test-model",
            "--base-url",
            &base,
            "task",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        None,
        "the injected crash should abort the process"
    );
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
    let id = s.only_session();
    assert!(
        !s.records(&id).iter().any(|r| r["kind"] == "assistant"),
        "the turn was not journaled"
    );

    let out = s
        .cmd()
        .env("OPENAI_API_KEY", "sk-test")
        .env("CAIRN_PRICES", &prices)
        .args(["resume", &id, "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json(&out.stdout)["status"], "completed");
    assert_eq!(
        server.received_requests().await.unwrap().len(),
        1,
        "the call was bought twice"
    );
    let recs = s.records(&id);
    let turn = recs.iter().find(|r| r["kind"] == "assistant").unwrap();
    assert_eq!(turn["replay"], true);
    assert_eq!(turn["text"], "the answer");
    assert_eq!(turn["usage"]["input_tokens"], 1000);
    assert_eq!(turn["cost"]["state"], "known");
    assert!((turn["cost"]["usd"].as_f64().unwrap() - 0.0012).abs() < 1e-12);
    // The key never reached the store.
    let all = walk(&s.store);
    assert!(!all.contains("sk-test"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn routing_is_restored_from_the_session_and_the_key_only_from_the_environment() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .and(path("/v1/chat/completions"))
        .respond_with(ResponseTemplate::new(200).set_body_raw(answer("hi"), "text/event-stream"))
        .mount(&server)
        .await;
    let s = Scratch::new();
    let base = format!("{}/v1", server.uri());
    let out = s
        .cmd()
        .env("OPENAI_API_KEY", "sk-secret-value")
        .args([
            "run",
            "--model",
            "openai:unpriced",
            "--base-url",
            &base,
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
    // Resume with no flags: provider, model and base URL come from the session.
    let out = s
        .cmd()
        .env("OPENAI_API_KEY", "sk-secret-value")
        .args(["resume", &id, "again", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let reqs = server.received_requests().await.unwrap();
    assert_eq!(reqs.len(), 2);
    let body: serde_json::Value = serde_json::from_slice(&reqs[1].body).unwrap();
    assert_eq!(body["model"], "unpriced");
    assert_eq!(
        reqs[1].headers.get("authorization").unwrap(),
        "Bearer sk-secret-value"
    );
    let recs = s.records(&id);
    // An unpriced model on this machine (like Ollama) is free.
    assert_eq!(recs.last().unwrap()["totals"]["cost"]["state"], "zero");
    assert!(!walk(&s.store).contains("sk-secret-value"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rejected_key_fails_at_once_and_is_journaled() {
    let server = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(401)
                .set_body_string(r#"{"error": {"message": "Incorrect API key"}}"#),
        )
        .mount(&server)
        .await;
    let s = Scratch::new();
    let out = s
        .cmd()
        .env("OPENAI_API_KEY", "sk-bad")
        .args([
            "run",
            "--model",
            "openai:m",
            "--base-url",
            &format!("{}/v1", server.uri()),
            "--json",
            "task",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(json(&out.stdout)["status"], "failed");
    assert_eq!(server.received_requests().await.unwrap().len(), 1);
    let id = s.only_session();
    let last = s.records(&id).last().unwrap().clone();
    assert!(
        last["detail"].as_str().unwrap().contains("OPENAI_API_KEY"),
        "{last}"
    );
}

/// Every file's bytes under `dir`, concatenated (to search for leaked keys).
fn walk(dir: &std::path::Path) -> String {
    let mut out = String::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.push_str(&walk(&p));
        } else {
            out.push_str(&String::from_utf8_lossy(&std::fs::read(&p).unwrap()));
        }
    }
    out
}
