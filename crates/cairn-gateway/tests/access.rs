//! Who may call the gateway (DESIGN §7 "Listening", §8 "What a web page
//! can do: nothing"), over real HTTP against a mock upstream: the loopback
//! Host rule, the guest's name only for a VM's gateway, another site's
//! page refused, the token's carriers and what goes upstream in its place.

use std::sync::{Arc, Mutex};

use cairn_calls::PriceTable;
use cairn_gateway::{Filing, Gateway, GatewayConfig, SharedSession};
use cairn_sessions::Session;
use cairn_store::Store;
use serde_json::{json, Value};
use wiremock::matchers::path;
use wiremock::{Mock, MockServer, ResponseTemplate};

struct Rig {
    _dir: tempfile::TempDir,
    store: Store,
    upstream: MockServer,
    base: String,
    port: u16,
}

const CHAT: &str = r#"{"id":"c1","object":"chat.completion","model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"hi"},"finish_reason":"stop"}],"usage":{"prompt_tokens":3,"completion_tokens":1,"total_tokens":4}}"#;
const MESSAGE: &str = r#"{"id":"msg_1","type":"message","role":"assistant","model":"claude-haiku-4-5","content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}"#;

/// A gateway of `config` (its upstreams pointed at a mock answering chat
/// completions, messages and models) in a fresh store.
async fn rig(config: GatewayConfig) -> Rig {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store")).unwrap();
    let upstream = MockServer::start().await;
    for (p, body) in [
        ("/v1/chat/completions", CHAT),
        ("/v1/messages", MESSAGE),
        ("/v1/models", r#"{"data":[]}"#),
    ] {
        Mock::given(path(p))
            .respond_with(ResponseTemplate::new(200).set_body_raw(body, "application/json"))
            .mount(&upstream)
            .await;
    }
    let config = GatewayConfig {
        openai_upstream: format!("{}/v1", upstream.uri()),
        anthropic_upstream: upstream.uri(),
        ..config
    };
    let addr = serve(dir.path(), &store, config).await;
    Rig {
        _dir: dir,
        store,
        upstream,
        base: format!("http://{addr}"),
        port: addr.port(),
    }
}

/// A gateway of `config` filing into a new session of `store`, served in
/// the background; its address.
async fn serve(
    dir: &std::path::Path,
    store: &Store,
    config: GatewayConfig,
) -> std::net::SocketAddr {
    let session: SharedSession = Arc::new(Mutex::new(
        Session::create_without_model(store, dir, "access").unwrap(),
    ));
    let gateway = Gateway::bind(
        config,
        store,
        Filing::Fixed(session),
        Arc::new(PriceTable::default()),
    )
    .await
    .unwrap();
    let addr = gateway.local_addr();
    tokio::spawn(gateway.serve(std::future::pending()));
    addr
}

fn chat() -> Value {
    json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]})
}

/// The status of a chat completion sent with `headers` (an SDK's JSON body).
async fn call(rig: &Rig, headers: &[(&str, &str)]) -> u16 {
    let mut req = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", rig.base))
        .json(&chat());
    for (k, v) in headers {
        req = req.header(*k, *v);
    }
    req.send().await.unwrap().status().as_u16()
}

async fn bought(rig: &Rig) -> usize {
    rig.upstream.received_requests().await.unwrap().len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_host_that_only_starts_with_127_is_refused() {
    let rig = rig(GatewayConfig::default()).await;
    let port = rig.port;
    for host in [
        format!("127.0.0.1.evil.example:{port}"),
        format!("127.evil:{port}"),
        format!("localhost.evil.example:{port}"),
        format!("0x7f.1:{port}"),
        format!("2130706433:{port}"),
        format!("localhost.:{port}"),
        format!("{}:{port}", cairn_store::access::GUEST_HOST),
    ] {
        assert_eq!(call(&rig, &[("host", &host)]).await, 403, "Host {host}");
        let r = reqwest::Client::new()
            .get(format!("{}/v1/models", rig.base))
            .header("host", &host)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 403, "GET /v1/models with Host {host}");
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["error"]["type"], "cairn_host");
    }
    assert_eq!(bought(&rig).await, 0, "nothing reached the upstream");
    for host in [
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
    ] {
        assert_eq!(call(&rig, &[("host", &host)]).await, 200, "Host {host}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guest_name_is_admitted_only_by_a_gateway_started_for_a_vm() {
    let guest = format!("{}:8787", cairn_store::access::GUEST_HOST);
    let plain = rig(GatewayConfig::default()).await;
    assert_eq!(call(&plain, &[("host", &guest)]).await, 403);
    let vm = rig(GatewayConfig {
        admit_guest_host: true,
        ..GatewayConfig::default()
    })
    .await;
    assert_eq!(call(&vm, &[("host", &guest)]).await, 200);
    assert_eq!(
        call(&vm, &[("host", "10.0.2.2.evil.example:8787")]).await,
        403
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_sites_page_cannot_spend_through_the_gateway() {
    let rig = rig(GatewayConfig::default()).await;
    #[rustfmt::skip]
    let hostile: &[&[(&str, &str)]] = &[
        &[("origin", "http://evil.example")],
        &[("origin", "null")],
        &[("origin", "http://127.0.0.1:1"), ("sec-fetch-site", "same-site")],
        &[("sec-fetch-site", "cross-site"), ("sec-fetch-mode", "no-cors")],
        &[("sec-fetch-site", "cross-site"), ("sec-fetch-mode", "navigate"), ("sec-fetch-dest", "document")],
    ];
    for headers in hostile {
        assert_eq!(call(&rig, headers).await, 403, "{headers:?}");
        // A form's body, as a page sends it without asking first.
        let mut req = reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", rig.base))
            .header("content-type", "text/plain")
            .body(chat().to_string());
        for (k, v) in *headers {
            req = req.header(*k, *v);
        }
        assert_eq!(req.send().await.unwrap().status().as_u16(), 403);
    }
    assert_eq!(bought(&rig).await, 0, "nothing was bought");
    // An SDK sends no Origin: it is served.
    assert_eq!(call(&rig, &[]).await, 200);
    assert_eq!(bought(&rig).await, 1);
}

#[tokio::test]
async fn an_empty_token_is_refused_at_start() {
    for token in ["", " "] {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path().join("store")).unwrap();
        let config = GatewayConfig {
            listen: "0.0.0.0:0".parse().unwrap(),
            token: Some(token.into()),
            ..GatewayConfig::default()
        };
        let filing = Filing::ByClient {
            default_name: "x".into(),
            workspace: dir.path().to_owned(),
        };
        let err = Gateway::bind(config, &store, filing, Arc::new(PriceTable::default()))
            .await
            .err()
            .expect("an empty token is refused");
        assert!(err.to_string().contains("--token is empty"), "{err}");
    }
}

/// Every header of every request the upstream received, as `name: value`.
async fn upstream_headers(rig: &Rig) -> Vec<Vec<String>> {
    rig.upstream
        .received_requests()
        .await
        .unwrap()
        .iter()
        .map(|r| {
            r.headers
                .iter()
                .map(|(k, v)| format!("{k}: {}", v.to_str().unwrap_or("?")))
                .collect()
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_token_is_taken_as_an_anthropic_key_and_never_forwarded() {
    const TOKEN: &str = "cairn-gw-token-5d1e";
    let rig = rig(GatewayConfig {
        token: Some(TOKEN.into()),
        openai_key: Some("sk-openai-real".into()),
        anthropic_key: Some("sk-ant-real".into()),
        ..GatewayConfig::default()
    })
    .await;
    let c = reqwest::Client::new();
    let message = json!({"model": "claude-haiku-4-5", "max_tokens": 8, "messages": [{"role": "user", "content": "hi"}]});
    // An Anthropic client whose key is the token.
    let r = c
        .post(format!("{}/v1/messages", rig.base))
        .header("x-api-key", TOKEN)
        .header("anthropic-version", "2023-06-01")
        .json(&message)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{}", r.text().await.unwrap());
    // An OpenAI client whose key is the token.
    assert_eq!(
        call(&rig, &[("authorization", &format!("Bearer {TOKEN}"))]).await,
        200
    );
    // A client with a key of its own and the token beside it.
    assert_eq!(
        call(
            &rig,
            &[
                ("authorization", "Bearer sk-client-own"),
                ("x-cairn-token", TOKEN)
            ]
        )
        .await,
        200
    );
    // Wrong or missing: refused before anything is bought.
    for headers in [
        vec![("x-api-key", "sk-ant-other")],
        vec![("authorization", "Bearer nope")],
        vec![("x-cairn-token", "")],
        vec![],
    ] {
        assert_eq!(call(&rig, &headers).await, 401, "{headers:?}");
    }
    let sent = upstream_headers(&rig).await;
    assert_eq!(sent.len(), 3, "three calls went upstream: {sent:?}");
    for h in &sent {
        assert!(
            !h.iter().any(|l| l.contains(TOKEN)),
            "the token went upstream: {h:?}"
        );
        assert!(!h.iter().any(|l| l.starts_with("x-cairn-token")), "{h:?}");
    }
    assert!(
        sent[0].contains(&"x-api-key: sk-ant-real".to_string()),
        "{:?}",
        sent[0]
    );
    assert!(
        sent[1].contains(&"authorization: Bearer sk-openai-real".to_string()),
        "{:?}",
        sent[1]
    );
    assert!(
        sent[2].contains(&"authorization: Bearer sk-client-own".to_string()),
        "{:?}",
        sent[2]
    );
    // Nor is it kept.
    let mut stack = vec![rig.store.root().to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                stack.push(p);
            } else {
                let bytes = std::fs::read(&p).unwrap();
                assert!(
                    !String::from_utf8_lossy(&bytes).contains(TOKEN),
                    "{} holds the token",
                    p.display()
                );
            }
        }
    }
}

/// Every file under `dir`, read whole.
fn every_file(dir: &std::path::Path, out: &mut Vec<(std::path::PathBuf, Vec<u8>)>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            every_file(&p, out);
        } else {
            out.push((p.clone(), std::fs::read(&p).unwrap()));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_key_in_the_query_string_is_not_kept_when_the_upstream_is_unreachable() {
    // An upstream that refuses connections: a port bound, then closed.
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let gone = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store")).unwrap();
    let config = GatewayConfig {
        openai_upstream: format!("{gone}/v1"),
        anthropic_upstream: gone,
        ..GatewayConfig::default()
    };
    let addr = serve(dir.path(), &store, config).await;
    const SECRET: &str = "sk-query-0123456789abcdef";
    let resp = reqwest::Client::new()
        .post(format!(
            "http://{addr}/v1/chat/completions?api_key={SECRET}"
        ))
        .json(&chat())
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 502);
    let body = resp.text().await.unwrap();
    assert!(body.contains("could not reach"), "{body}");
    assert!(!body.contains(SECRET), "the reply repeats the key: {body}");
    // The failed call is journaled (its error, its request body): without
    // the key.
    let mut files = Vec::new();
    every_file(dir.path(), &mut files);
    let journaled = files.iter().any(|(p, b)| {
        p.ends_with("journal.jsonl") && String::from_utf8_lossy(b).contains("could not be reached")
    });
    assert!(journaled, "the failed call was not journaled");
    for (p, bytes) in files {
        let text = String::from_utf8_lossy(&bytes);
        assert!(!text.contains(SECRET), "{} holds the key", p.display());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_recorded_route_takes_json_only_even_without_an_origin() {
    let rig = rig(GatewayConfig::default()).await;
    let body = serde_json::to_vec(&chat()).unwrap();
    // What a page's form can send without a preflight, from a browser that
    // names no Origin.
    for content_type in [
        Some("text/plain"),
        Some("application/x-www-form-urlencoded"),
        Some("multipart/form-data; boundary=x"),
        Some("application/json-patch+json"),
        None,
    ] {
        let mut req = reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", rig.base))
            .body(body.clone());
        if let Some(t) = content_type {
            req = req.header("content-type", t);
        }
        let resp = req.send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 415, "{content_type:?}");
    }
    assert_eq!(bought(&rig).await, 0, "a call was bought");
    // An SDK's JSON, its charset named or not, is served.
    for content_type in ["application/json", "application/json; charset=utf-8"] {
        let resp = reqwest::Client::new()
            .post(format!("{}/v1/chat/completions", rig.base))
            .header("content-type", content_type)
            .body(body.clone())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200, "{content_type}");
    }
    // A route passed through is not recorded: an SDK's upload is multipart.
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/models", rig.base))
        .header("content-type", "multipart/form-data; boundary=x")
        .body("--x--\r\n")
        .send()
        .await
        .unwrap();
    assert_ne!(resp.status().as_u16(), 415);
}
