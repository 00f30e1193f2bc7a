//! The gateway against a mock upstream, in process: what a client gets,
//! what is journaled and stored, and when a call is served from the store.

use std::sync::{Arc, Mutex};

use cairn_calls::PriceTable;
use cairn_gateway::{Filing, Gateway, GatewayConfig, SharedSession};
use cairn_journal::RecordBody;
use cairn_sessions::Session;
use cairn_store::Store;
use serde_json::{json, Value};
use wiremock::matchers::{method, path};
use wiremock::{Mock, MockServer, ResponseTemplate};

fn chat_stream(text: &str) -> String {
    let mut body = String::new();
    for c in [
        json!({"id": "c1", "object": "chat.completion.chunk", "model": "gpt-4o-mini", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}),
        json!({"id": "c1", "object": "chat.completion.chunk", "model": "gpt-4o-mini", "choices": [{"index": 0, "delta": {"content": text}}]}),
        json!({"id": "c1", "object": "chat.completion.chunk", "model": "gpt-4o-mini", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        json!({"id": "c1", "object": "chat.completion.chunk", "model": "gpt-4o-mini", "choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 3, "total_tokens": 15}}),
    ] {
        body.push_str(&format!("data: {c}\n\n"));
    }
    body.push_str("data: [DONE]\n\n");
    body
}

struct Rig {
    _dir: tempfile::TempDir,
    store: Store,
    session: SharedSession,
    upstream: MockServer,
    base: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    served: Option<tokio::task::JoinHandle<()>>,
}

impl Rig {
    async fn start(body: String) -> Rig {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("store")).unwrap();
        let session = Session::create_without_model(&store, dir.path(), "proxy test").unwrap();
        let session: SharedSession = Arc::new(Mutex::new(session));
        let upstream = MockServer::start().await;
        Mock::given(method("POST"))
            .and(path("/v1/chat/completions"))
            .respond_with(ResponseTemplate::new(200).set_body_raw(body, "text/event-stream"))
            .mount(&upstream)
            .await;
        let config = GatewayConfig {
            openai_upstream: format!("{}/v1", upstream.uri()),
            ..GatewayConfig::default()
        };
        let prices = PriceTable::from_json(
            r#"{"openai:gpt-4o-mini": {"input_per_mtok": 1.0, "output_per_mtok": 2.0}}"#,
        )
        .unwrap();
        let gateway = Gateway::bind(
            config,
            &store,
            Filing::Fixed(session.clone()),
            Arc::new(prices),
        )
        .await
        .unwrap();
        let base = format!("http://{}", gateway.local_addr());
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let served = tokio::spawn(async move {
            gateway
                .serve(async {
                    let _ = stopped.await;
                })
                .await
                .unwrap();
        });
        Rig {
            _dir: dir,
            store,
            session,
            upstream,
            base,
            stop: Some(stop),
            served: Some(served),
        }
    }

    async fn post(
        &self,
        body: &Value,
        headers: &[(&str, &str)],
    ) -> (u16, reqwest::header::HeaderMap, String) {
        let mut req = reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", self.base))
            .header("authorization", "Bearer sk-test-key-123")
            .json(body);
        for (k, v) in headers {
            req = req.header(*k, *v);
        }
        let resp = req.send().await.unwrap();
        let status = resp.status().as_u16();
        let h = resp.headers().clone();
        (status, h, resp.text().await.unwrap())
    }

    fn calls(&self) -> Vec<cairn_journal::ModelCall> {
        let s = self.session.lock().unwrap();
        let scan =
            cairn_journal::read_journal(&self.store.journal_path(s.id()), s.id().as_str()).unwrap();
        scan.records
            .into_iter()
            .filter_map(|r| match r.body {
                RecordBody::ModelCall(m) => Some(m),
                _ => None,
            })
            .collect()
    }

    async fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(h) = self.served.take() {
            h.await.unwrap();
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_call_is_forwarded_byte_for_byte_journaled_and_priced() {
    let stream = chat_stream("hello");
    let rig = Rig::start(stream.clone()).await;
    let req = json!({"model": "gpt-4o-mini", "stream": true, "stream_options": {"include_usage": true}, "messages": [{"role": "user", "content": "hi"}]});
    let (status, headers, body) = rig.post(&req, &[]).await;
    assert_eq!(status, 200);
    assert_eq!(body, stream, "the client gets the upstream's bytes");
    assert!(headers.get("cairn-replay").is_none());
    let calls = rig.calls();
    assert_eq!(calls.len(), 1);
    let c = &calls[0];
    assert_eq!(c.endpoint, "/v1/chat/completions");
    assert_eq!(c.model.as_deref(), Some("gpt-4o-mini"));
    assert_eq!(c.usage.input_tokens, 12);
    assert_eq!(c.usage.output_tokens, 3);
    assert!((c.cost.usd.unwrap() - (12.0 + 6.0) / 1e6).abs() < 1e-12);
    assert!(c.stream && !c.replay);
    assert_eq!(c.delivered, cairn_journal::Delivered::Complete);
    assert!(c.request.is_some() && c.response.is_some());
    // The key never reaches the store.
    let all = walk(rig.store.root());
    assert!(!all.contains("sk-test-key-123"));

    // A fresh identical request after a complete delivery is a new sample.
    let (_, h2, _) = rig.post(&req, &[]).await;
    assert!(h2.get("cairn-replay").is_none());
    assert_eq!(rig.upstream.received_requests().await.unwrap().len(), 2);
    // Marked as a retry, it is served from the store, byte for byte, free.
    let (_, h3, b3) = rig.post(&req, &[("x-stainless-retry-count", "1")]).await;
    assert_eq!(
        h3.get("cairn-replay").map(|v| v.to_str().unwrap()),
        Some("true")
    );
    assert_eq!(b3, stream);
    assert_eq!(rig.upstream.received_requests().await.unwrap().len(), 2);
    let calls = rig.calls();
    assert_eq!(calls.len(), 3);
    assert!(calls[2].replay);
    assert_eq!(calls[2].cost, cairn_journal::Cost::ZERO);
    // A retry that asks for the whole body gets the same answer whole.
    let whole = json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]});
    let (_, h4, b4) = rig.post(&whole, &[("x-stainless-retry-count", "1")]).await;
    assert_eq!(
        h4.get("cairn-replay").map(|v| v.to_str().unwrap()),
        Some("true")
    );
    let v: Value = serde_json::from_str(&b4).unwrap();
    assert_eq!(v["choices"][0]["message"]["content"], "hello");
    rig.stop().await;
}

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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_duplicates_share_one_purchase() {
    let stream = chat_stream("shared");
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store")).unwrap();
    let session: SharedSession = Arc::new(Mutex::new(
        Session::create_without_model(&store, dir.path(), "dupes").unwrap(),
    ));
    let upstream = MockServer::start().await;
    Mock::given(method("POST"))
        .respond_with(
            ResponseTemplate::new(200)
                .set_body_raw(stream.clone(), "text/event-stream")
                .set_delay(std::time::Duration::from_millis(400)),
        )
        .mount(&upstream)
        .await;
    let config = GatewayConfig {
        openai_upstream: format!("{}/v1", upstream.uri()),
        ..GatewayConfig::default()
    };
    let gateway = Gateway::bind(
        config,
        &store,
        Filing::Fixed(session.clone()),
        Arc::new(PriceTable::default()),
    )
    .await
    .unwrap();
    let base = format!("http://{}", gateway.local_addr());
    tokio::spawn(gateway.serve(std::future::pending()));
    let req = json!({"model": "gpt-4o-mini", "stream": true, "messages": [{"role": "user", "content": "same"}]});
    let mut handles = Vec::new();
    for _ in 0..3 {
        let (base, req) = (base.clone(), req.clone());
        handles.push(tokio::spawn(async move {
            let r = reqwest::Client::new()
                .post(format!("{base}/v1/chat/completions"))
                .json(&req)
                .send()
                .await
                .unwrap();
            r.text().await.unwrap()
        }));
    }
    for h in handles {
        assert_eq!(h.await.unwrap(), stream);
    }
    assert_eq!(
        upstream.received_requests().await.unwrap().len(),
        1,
        "bought once"
    );
    let s = session.lock().unwrap();
    let scan = cairn_journal::read_journal(&store.journal_path(s.id()), s.id().as_str()).unwrap();
    let calls: Vec<_> = scan
        .records
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::ModelCall(m) => Some(m.replay),
            _ => None,
        })
        .collect();
    assert_eq!(calls.iter().filter(|r| !**r).count(), 1);
    assert_eq!(calls.iter().filter(|r| **r).count(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_are_refused_clearly_and_a_dead_upstream_is_a_502_on_the_record() {
    let rig = Rig::start(chat_stream("x")).await;
    let client = reqwest::Client::new();
    // An Idempotency-Key reused with another body.
    let a = json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "a"}]});
    let b = json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "b"}]});
    let (s1, _, _) = rig.post(&a, &[("idempotency-key", "k-1")]).await;
    assert_eq!(s1, 200);
    let (s2, _, body) = rig.post(&b, &[("idempotency-key", "k-1")]).await;
    assert_eq!(s2, 422, "{body}");
    // A body over the limit is refused from its declared length, before it
    // is read (a raw client: an HTTP library would still be writing).
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let addr = rig.base.trim_start_matches("http://");
        let mut conn = tokio::net::TcpStream::connect(addr).await.unwrap();
        let head = format!(
            "POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{{",
            33u64 << 20
        );
        conn.write_all(head.as_bytes()).await.unwrap();
        let mut reply = vec![0u8; 512];
        let n = conn.read(&mut reply).await.unwrap();
        let reply = String::from_utf8_lossy(&reply[..n]);
        assert!(reply.starts_with("HTTP/1.1 413"), "{reply}");
    }
    // A Host that is not loopback.
    let r = client
        .post(format!("{}/v1/chat/completions", rig.base))
        .header("host", "evil.example:80")
        .json(&a)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    // Probes.
    let r = client.head(format!("{}/", rig.base)).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 200);
    let r = client
        .get(format!("{}/v1/responses", rig.base))
        .header("upgrade", "websocket")
        .header("connection", "upgrade")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 426);
    rig.stop().await;

    // An upstream that is down: 502 to the client, a failed call on the record.
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store")).unwrap();
    let session: SharedSession = Arc::new(Mutex::new(
        Session::create_without_model(&store, dir.path(), "down").unwrap(),
    ));
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = dead.local_addr().unwrap().port();
    drop(dead);
    let config = GatewayConfig {
        openai_upstream: format!("http://127.0.0.1:{port}/v1"),
        ..GatewayConfig::default()
    };
    let gateway = Gateway::bind(
        config,
        &store,
        Filing::Fixed(session.clone()),
        Arc::new(PriceTable::default()),
    )
    .await
    .unwrap();
    let base = format!("http://{}", gateway.local_addr());
    tokio::spawn(gateway.serve(std::future::pending()));
    let r = client
        .post(format!("{base}/v1/chat/completions"))
        .json(&a)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 502);
    let text = r.text().await.unwrap();
    assert!(text.contains("could not reach the upstream"), "{text}");
    let s = session.lock().unwrap();
    let scan = cairn_journal::read_journal(&store.journal_path(s.id()), s.id().as_str()).unwrap();
    let failed = scan.records.iter().find_map(|r| match &r.body {
        RecordBody::ModelCall(m) => Some(m.clone()),
        _ => None,
    });
    let failed = failed.expect("the failed call is journaled");
    assert_eq!(failed.status, 502);
    assert!(failed.error.is_some());
}

#[tokio::test]
async fn a_gateway_refuses_to_listen_openly_without_a_token_or_to_call_itself() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store")).unwrap();
    let filing = Filing::ByClient {
        default_name: "x".into(),
        workspace: dir.path().to_owned(),
    };
    let open = GatewayConfig {
        listen: "0.0.0.0:0".parse().unwrap(),
        ..GatewayConfig::default()
    };
    let err = Gateway::bind(
        open,
        &store,
        filing.clone(),
        Arc::new(PriceTable::default()),
    )
    .await
    .err()
    .expect("refused");
    assert!(err.to_string().contains("--token"), "{err}");
    let free = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = free.local_addr().unwrap().port();
    drop(free);
    let looped = GatewayConfig {
        listen: format!("127.0.0.1:{port}").parse().unwrap(),
        openai_upstream: format!("http://127.0.0.1:{port}/v1"),
        ..GatewayConfig::default()
    };
    let err = Gateway::bind(looped, &store, filing, Arc::new(PriceTable::default()))
        .await
        .err()
        .expect("refused");
    assert!(
        err.to_string().contains("points back at this gateway"),
        "{err}"
    );
}

/// A gateway on `store` filing into `session`, serving until dropped.
async fn serve_on(
    store: &Store,
    session: &SharedSession,
    config: GatewayConfig,
) -> (String, tokio::sync::oneshot::Sender<()>) {
    let gateway = Gateway::bind(
        config,
        store,
        Filing::Fixed(session.clone()),
        Arc::new(PriceTable::default()),
    )
    .await
    .unwrap();
    let base = format!("http://{}", gateway.local_addr());
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    tokio::spawn(gateway.serve(async {
        let _ = stopped.await;
    }));
    (base, stop)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn offline_never_buys_a_stored_response_it_cannot_convert() {
    // A complete stream with an event that is not JSON: it is kept, but it
    // has no whole form.
    let stream = format!(
        "{}data: not json\n\ndata: [DONE]\n\n",
        chat_stream("x").trim_end_matches("data: [DONE]\n\n")
    );
    let rig = Rig::start(stream.clone()).await;
    let req = json!({"model": "gpt-4o-mini", "stream": true, "messages": [{"role": "user", "content": "convert me"}]});
    let (status, _, body) = rig.post(&req, &[]).await;
    assert_eq!((status, body.as_str()), (200, stream.as_str()));
    let config = GatewayConfig {
        openai_upstream: format!("{}/v1", rig.upstream.uri()),
        replay: cairn_gateway::ReplayPolicy {
            offline: true,
            ..Default::default()
        },
        ..GatewayConfig::default()
    };
    let (base, stop) = serve_on(&rig.store, &rig.session, config).await;
    let whole =
        json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "convert me"}]});
    let r = reqwest::Client::new()
        .post(format!("{base}/v1/chat/completions"))
        .header("authorization", "Bearer sk-test-key-123")
        .json(&whole)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 503);
    assert_eq!(
        rig.upstream.received_requests().await.unwrap().len(),
        1,
        "bought under --offline"
    );
    let _ = stop.send(());
    rig.stop().await;
}
