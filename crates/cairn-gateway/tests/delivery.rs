//! When a whole (non-streamed) response counts as delivered (DESIGN §7): by
//! what the client's connection does after it — another request, or a
//! clean close with nothing unread, says the client took it; a reset (a
//! close with unread data sends one) says it did not, and the retry is then
//! served from the store instead of being bought again. Raw TCP clients,
//! so the test decides exactly how much is read and how the socket closes.

mod rig;

use cairn_testkit::upstream::{Reply, Script};
use rig::Rig;
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

const SIZES: [usize; 2] = [1 << 10, 1 << 20];

fn request() -> Vec<u8> {
    json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "Tell me everything."}]})
        .to_string()
        .into_bytes()
}

/// An answer whose whole body is a little over `size` bytes.
fn answer(size: usize) -> Reply {
    Reply::text(&"word ".repeat(size / 5)).with_usage(10, 20)
}

/// Connects and sends the request (HTTP/1.1, kept alive unless `close`).
async fn send(rig: &Rig, close: bool) -> TcpStream {
    let mut conn = TcpStream::connect(rig.addr()).await.unwrap();
    send_on(rig, &mut conn, close).await;
    conn
}

/// Sends the request on `conn`.
async fn send_on(rig: &Rig, conn: &mut TcpStream, close: bool) {
    let body = request();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {}\r\ncontent-type: application/json\r\nauthorization: Bearer sk-test\r\ncontent-length: {}\r\n{}\r\n",
        rig.addr(),
        body.len(),
        if close { "connection: close\r\n" } else { "" }
    );
    conn.write_all(head.as_bytes()).await.unwrap();
    conn.write_all(&body).await.unwrap();
}

/// Reads the whole chunked response, through its last chunk.
async fn read_all(conn: &mut TcpStream) -> Vec<u8> {
    let mut got = Vec::new();
    let mut buf = vec![0u8; 64 << 10];
    while !got.ends_with(b"\r\n0\r\n\r\n") {
        let n = conn.read(&mut buf).await.unwrap();
        assert!(n > 0, "the gateway closed before the end of the response");
        got.extend_from_slice(&buf[..n]);
    }
    got
}

/// A fresh request (no retry marker) for the same call: whether it was
/// served from the store. Returns once its connection is closed.
async fn fresh_request_is_replayed(rig: &Rig) -> bool {
    let resp = reqwest::Client::new()
        .post(format!("{}/v1/chat/completions", rig.base))
        .header("authorization", "Bearer sk-test")
        .header("content-type", "application/json")
        .body(request())
        .send()
        .await
        .unwrap();
    let replayed = resp.headers().get("cairn-replay").is_some();
    let body: serde_json::Value = resp.json().await.unwrap();
    assert!(body["choices"][0]["message"]["content"]
        .as_str()
        .is_some_and(|t| t.starts_with("word word")));
    // Until its connection is closed, what the client took is not known.
    rig.wait_for_no_connection().await;
    replayed
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_dies_after_reading_part_of_a_whole_response_gets_its_retry_from_the_store() {
    for size in SIZES {
        let mut rig = Rig::start(Script::always(answer(size))).await;
        let mut conn = send(&rig, false).await;
        // 40% of the body, then a close that resets the connection.
        let mut part = vec![0u8; size * 2 / 5];
        conn.read_exact(&mut part).await.unwrap();
        conn.set_zero_linger().unwrap();
        drop(conn);
        rig.wait_for_no_connection().await;
        assert!(
            fresh_request_is_replayed(&rig).await,
            "{size} B: the retry of a response the client never took is served from the store"
        );
        assert_eq!(rig.upstream.count(), 1, "{size} B: bought once");
        let calls = rig.calls();
        assert_eq!(calls.len(), 2, "{size} B");
        assert!(!calls[0].replay && calls[1].replay, "{size} B");
        rig.stop().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_took_a_whole_response_gets_a_new_sample_next_time() {
    for size in SIZES {
        // Read to the end, then closed: nothing unread, so a clean close.
        let mut rig = Rig::start(Script::always(answer(size))).await;
        let mut conn = send(&rig, false).await;
        let got = read_all(&mut conn).await;
        assert!(got.starts_with(b"HTTP/1.1 200"), "{size} B");
        drop(conn);
        rig.wait_for_no_connection().await;
        assert!(
            !fresh_request_is_replayed(&rig).await,
            "{size} B: a fresh request after a delivered response is a new sample"
        );
        assert_eq!(rig.upstream.count(), 2, "{size} B");

        // The client asked the gateway to close after the response.
        let mut conn = send(&rig, true).await;
        read_all(&mut conn).await;
        drop(conn);
        rig.wait_for_no_connection().await;
        assert!(!fresh_request_is_replayed(&rig).await, "{size} B, close");
        assert_eq!(rig.upstream.count(), 4, "{size} B, close");
        rig.stop().await;
    }
    // Another request on the same kept-alive connection says the first
    // response was taken: the same request again is a new sample.
    let mut rig = Rig::start(Script::always(answer(1 << 10))).await;
    let mut conn = send(&rig, false).await;
    read_all(&mut conn).await;
    send_on(&rig, &mut conn, false).await;
    let again = String::from_utf8(read_all(&mut conn).await).unwrap();
    assert!(again.starts_with("HTTP/1.1 200"), "{again}");
    assert!(
        !again.to_ascii_lowercase().contains("cairn-replay"),
        "{again}"
    );
    assert_eq!(rig.upstream.count(), 2);
    drop(conn);
    rig.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_the_gateway_closes_is_judged_by_how_the_client_closes_it() {
    // A client that took the whole response and holds its connection idle;
    // stopping the gateway closes it, and the client closes in turn.
    let mut rig = Rig::start(Script::always(answer(1 << 10))).await;
    let mut conn = send(&rig, false).await;
    read_all(&mut conn).await;
    rig.begin_stop();
    let mut rest = [0u8; 64];
    assert_eq!(conn.read(&mut rest).await.unwrap(), 0, "the gateway closed");
    drop(conn);
    rig.stop().await;
    let key = rig.calls()[0].key.clone();
    let stored = rig.responses().get(&key).unwrap().unwrap();
    assert!(
        stored.entry.delivered,
        "a clean close after the whole response"
    );

    // One that read part of it resets the connection instead.
    let mut rig = Rig::start(Script::always(answer(1 << 10))).await;
    let mut conn = send(&rig, false).await;
    let mut part = vec![0u8; 400];
    conn.read_exact(&mut part).await.unwrap();
    rig.begin_stop();
    conn.set_zero_linger().unwrap();
    drop(conn);
    rig.stop().await;
    let key = rig.calls()[0].key.clone();
    let stored = rig.responses().get(&key).unwrap().unwrap();
    assert!(!stored.entry.delivered, "a reset with the response unread");
}
