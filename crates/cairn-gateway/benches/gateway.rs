//! The gateway's cost (run on demand: `cargo bench -p cairn-gateway --bench
//! gateway`), measured against calling the same upstream directly, in the
//! same run, on loopback:
//! 1. streaming responses of 200 events: the time added to the first byte
//!    (p50, p99) and to the whole response (p50, p99);
//! 2. calls per second with 16 concurrent clients, every call through the
//!    gateway made durable (bodies in the pool, a stored entry, a journaled
//!    `model_call`), its ratio to direct calls and to a bare reverse proxy
//!    on the same stack that records nothing (what forwarding alone costs),
//!    and the files the store gained per call;
//! 3. the bytes stored for a 50-turn conversation re-sent whole each turn,
//!    against the final request's size and the sum of all requests.
//!
//! `CAIRN_BENCH_DIR` picks the disk the store is on; `CAIRN_BENCH_CALLS`
//! (default 300) the calls per latency series.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_calls::PriceTable;
use cairn_gateway::{Filing, Gateway, GatewayConfig, SharedSession};
use cairn_sessions::Session;
use cairn_store::Store;
use cairn_testkit::upstream::{Reply, Script, Upstream};
use futures_util::StreamExt;
use serde_json::json;

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let calls: usize = std::env::var("CAIRN_BENCH_CALLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(300);
    let base = cairn_testkit::bench_dir();
    let tmp = tempfile::tempdir_in(&base).unwrap_or_else(|e| panic!("{e}"));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(4)
        .enable_all()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    rt.block_on(run(tmp.path(), calls));
}

async fn start(dir: &std::path::Path, upstream: &Upstream, name: &str) -> (String, Store) {
    let store = Store::open(dir.join(name)).unwrap_or_else(|e| panic!("{e}"));
    let session: SharedSession = Arc::new(Mutex::new(
        Session::create_without_model(&store, dir, name).unwrap_or_else(|e| panic!("{e}")),
    ));
    let config = GatewayConfig {
        openai_upstream: upstream.openai_base_url(),
        anthropic_upstream: upstream.base_url(),
        ..GatewayConfig::default()
    };
    let gateway = Gateway::bind(
        config,
        &store,
        Filing::Fixed(session),
        Arc::new(PriceTable::default()),
    )
    .await
    .unwrap_or_else(|e| panic!("{e}"));
    let addr = gateway.local_addr();
    tokio::spawn(gateway.serve(std::future::pending()));
    (format!("http://{addr}/v1"), store)
}

/// The least any gateway must do, as a peer for the throughput figure: a
/// bare reverse proxy on the same stack (axum in, reqwest out), which
/// forwards a call and streams its answer back, and records nothing.
async fn bare_proxy(upstream: String) -> String {
    use axum::body::{Body, Bytes};
    let client = reqwest::Client::new();
    let forward = move |body: Bytes| {
        let (client, url) = (client.clone(), format!("{upstream}/chat/completions"));
        async move {
            let resp = client
                .post(url)
                .header("content-type", "application/json")
                .body(body)
                .send()
                .await
                .unwrap_or_else(|e| panic!("{e}"));
            let mut out = axum::response::Response::builder().status(resp.status().as_u16());
            if let Some(t) = resp.headers().get("content-type") {
                out = out.header("content-type", t.as_bytes());
            }
            out.body(Body::from_stream(resp.bytes_stream()))
                .unwrap_or_else(|e| panic!("{e}"))
        }
    };
    let app = axum::Router::new().route("/v1/chat/completions", axum::routing::post(forward));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let addr = listener.local_addr().unwrap_or_else(|e| panic!("{e}"));
    // Small streamed writes: without TCP_NODELAY, Nagle's algorithm and the
    // peer's delayed ACK hold each one back (the gateway sets it too).
    let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
        let _ = tcp.set_nodelay(true);
    });
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}/v1")
}

/// One streamed call: (time to the first body byte, time to the end).
async fn call(client: &reqwest::Client, base: &str, n: usize) -> (Duration, Duration) {
    let body = json!({
        "model": "gpt-4o-mini",
        "stream": true,
        "stream_options": {"include_usage": true},
        "messages": [{"role": "user", "content": format!("question {n}")}],
    });
    let t = Instant::now();
    let resp = client
        .post(format!("{base}/chat/completions"))
        .json(&body)
        .send()
        .await
        .unwrap_or_else(|e| panic!("{e}"));
    let mut stream = resp.bytes_stream();
    let mut first = None;
    while let Some(chunk) = stream.next().await {
        chunk.unwrap_or_else(|e| panic!("{e}"));
        first.get_or_insert_with(|| t.elapsed());
    }
    (first.unwrap_or_default(), t.elapsed())
}

fn pct(v: &mut [Duration], p: f64) -> Duration {
    v.sort();
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i.min(v.len() - 1)]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

async fn run(dir: &std::path::Path, calls: usize) {
    let upstream = Upstream::start(Script::always(
        Reply::text(&"word ".repeat(200))
            .in_deltas(200)
            .with_usage(50, 200),
    ));
    let direct = upstream.openai_base_url();
    let (through, _store) = start(dir, &upstream, "latency").await;
    let client = reqwest::Client::new();
    // Warm both paths, then alternate so both see the same machine.
    for i in 0..20 {
        call(&client, &direct, i).await;
        call(&client, &through, i).await;
    }
    let (mut d_first, mut d_total, mut g_first, mut g_total) = (vec![], vec![], vec![], vec![]);
    for i in 0..calls {
        let (f, t) = call(&client, &direct, 1000 + i).await;
        d_first.push(f);
        d_total.push(t);
        let (f, t) = call(&client, &through, 1000 + i).await;
        g_first.push(f);
        g_total.push(t);
    }
    println!("streaming responses of 200 events, {calls} calls each way (ms):");
    println!("                       direct    gateway    added");
    for (name, d, g) in [
        (
            "first byte p50",
            pct(&mut d_first, 0.5),
            pct(&mut g_first, 0.5),
        ),
        (
            "first byte p99",
            pct(&mut d_first, 0.99),
            pct(&mut g_first, 0.99),
        ),
        (
            "whole      p50",
            pct(&mut d_total, 0.5),
            pct(&mut g_total, 0.5),
        ),
        (
            "whole      p99",
            pct(&mut d_total, 0.99),
            pct(&mut g_total, 0.99),
        ),
    ] {
        println!(
            "  {name}    {:>8.3}   {:>8.3}   {:>7.3}",
            ms(d),
            ms(g),
            ms(g) - ms(d)
        );
    }
    let added = ms(pct(&mut g_first, 0.5)) - ms(pct(&mut d_first, 0.5));
    println!(
        "  target: added first byte p50 <= 1 ms: {}",
        if added <= 1.0 { "ok" } else { "MISSED" }
    );

    // Throughput: 16 clients at once, short answers, so the upstream is not
    // what is measured.
    let upstream = Upstream::start(Script::always(
        Reply::text("short answer").in_deltas(4).with_usage(50, 4),
    ));
    let direct = upstream.openai_base_url();
    let (through, store) = start(dir, &upstream, "throughput").await;
    let proxy = bare_proxy(direct.clone()).await;
    let per_client = (calls / 4).max(25);
    // From a disk at rest: the group commits take the file-system barrier
    // only while little else is dirty.
    cairn_testkit::quiet_disk();
    let (mut direct_rate, mut proxy_rate) = (0.0, 0.0);
    for (name, base) in [
        ("direct", direct.clone()),
        ("bare proxy", proxy.clone()),
        ("gateway", through.clone()),
    ] {
        let files_before = files(store.root());
        let t = Instant::now();
        let mut tasks = Vec::new();
        for c in 0..16 {
            let (client, base) = (client.clone(), base.clone());
            tasks.push(tokio::spawn(async move {
                for i in 0..per_client {
                    call(&client, &base, 100_000 + c * 10_000 + i).await;
                }
            }));
        }
        for t in tasks {
            t.await.unwrap_or_else(|e| panic!("{e}"));
        }
        let n = 16 * per_client;
        let rate = n as f64 / t.elapsed().as_secs_f64();
        println!("16 concurrent clients, {n} calls, {name}: {rate:.0} calls/s");
        match name {
            "direct" => direct_rate = rate,
            "bare proxy" => {
                proxy_rate = rate;
                println!(
                    "  bare proxy/direct = {:.2}x: what forwarding alone costs on this machine",
                    rate / direct_rate
                );
            }
            _ => {}
        }
        if name == "gateway" {
            // What DESIGN §2's one-file-per-object layout costs a call: the
            // files (inodes) the store gained, per call.
            let created = files(store.root()).saturating_sub(files_before);
            println!(
                "  gateway/direct = {:.2}x (target >= 0.5x), gateway/bare proxy = {:.2}x; files created in the store: {created}, {:.2} a call (target <= 1)",
                rate / direct_rate,
                rate / proxy_rate,
                created as f64 / n as f64
            );
            let journal = std::fs::read_to_string(
                store
                    .runs_dir()
                    .read_dir()
                    .ok()
                    .and_then(|mut d| d.next())
                    .and_then(|e| e.ok())
                    .map(|e| e.path().join("journal.jsonl"))
                    .unwrap_or_default(),
            )
            .unwrap_or_default();
            let recorded = journal
                .lines()
                .filter(|l| l.contains("\"model_call\""))
                .count();
            println!(
                "  {recorded} model_call records journaled; target >= 1000 recorded calls/s: {}",
                if rate >= 1000.0 { "ok" } else { "MISSED" }
            );
        }
    }

    // Storage: a conversation re-sent whole each turn.
    let (through, store) = start(dir, &upstream, "storage").await;
    let objects = store.root().join("objects");
    let before = du(&objects);
    let mut messages =
        vec![json!({"role": "system", "content": "You are a careful coding agent. ".repeat(40)})];
    let (mut sum, mut last) = (0usize, 0usize);
    for turn in 0..50 {
        messages.push(json!({"role": "user", "content": format!("turn {turn}: please change the function `f{turn}` so that it handles the empty case, and explain why. {}", "context ".repeat(60))}));
        let body = json!({"model": "gpt-4o-mini", "messages": messages});
        let bytes = serde_json::to_vec(&body).unwrap_or_default();
        sum += bytes.len();
        last = bytes.len();
        let resp = client
            .post(format!("{through}/chat/completions"))
            .header("content-type", "application/json")
            .body(bytes)
            .send()
            .await
            .unwrap_or_else(|e| panic!("{e}"));
        let answer: serde_json::Value = resp.json().await.unwrap_or_default();
        let text = answer["choices"][0]["message"]["content"]
            .as_str()
            .unwrap_or("")
            .to_owned();
        messages.push(json!({"role": "assistant", "content": text}));
    }
    let stored = du(&objects) - before;
    println!(
        "50-turn conversation re-sent whole: requests {sum} bytes in all, the last {last}; stored {stored} bytes"
    );
    println!(
        "  stored / last request {:.2}x (target <= 1.5x), stored / all requests {:.3}x",
        stored as f64 / last as f64,
        stored as f64 / sum as f64
    );
}

/// The bytes of every file below `dir`.
/// Regular files under `dir`, at any depth.
fn files(dir: &std::path::Path) -> usize {
    let mut n = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        match e.file_type() {
            Ok(t) if t.is_dir() => n += files(&e.path()),
            Ok(t) if t.is_file() => n += 1,
            _ => {}
        }
    }
    n
}

fn du(dir: &std::path::Path) -> u64 {
    let mut n = 0;
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        match e.metadata() {
            Ok(m) if m.is_dir() => n += du(&p),
            Ok(m) => n += m.len(),
            Err(_) => {}
        }
    }
    n
}
