//! The live stream's bounds (live.rs module doc): a stream nobody watches
//! lets go of its thread and journal, subscribers are capped, and a client
//! that stops reading is dropped within the send timeout.
//!
//! The server runs in this process, so its threads and open files are
//! this process's (`/proc/self/task`, `/proc/self/fd`). The tests of this
//! file take turns ([`SERIAL`]): one test's threads would blur another's
//! count.

use std::io::Write;
use std::time::{Duration, Instant};

use cairn_journal::*;
use cairn_server::{bind, LiveLimits, ServeConfig};
use cairn_store::{RunId, Store};

static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

struct Server {
    _dir: tempfile::TempDir,
    store: Store,
    addr: std::net::SocketAddr,
    base: String,
}

async fn start(live: LiveLimits) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store")).unwrap();
    let (addr, server) = bind(ServeConfig {
        store: store.clone(),
        listen: "127.0.0.1:0".parse().unwrap(),
        token: None,
        launcher: None,
        live,
        bounds: Default::default(),
    })
    .await
    .unwrap();
    tokio::spawn(server);
    Server {
        _dir: dir,
        store,
        addr,
        base: format!("http://{addr}"),
    }
}

fn user(t: &str) -> RecordBody {
    RecordBody::User(User {
        text: t.into(),
        origin: None,
    })
}

fn session(s: &Server, texts: &[&str]) -> (RunId, JournalWriter) {
    let id = RunId::new();
    let meta = Meta {
        run: String::new(),
        created: now_rfc3339(),
        workspace: "/work/ws".into(),
        name: None,
        fingerprint: None,
        fork: None,
        routing: None,
        system_file: None,
    };
    let mut w = JournalWriter::create(&s.store, &id, meta).unwrap();
    for t in texts {
        w.append(&user(t)).unwrap();
    }
    (id, w)
}

fn count(dir: &str) -> usize {
    std::fs::read_dir(dir).unwrap().count()
}

/// This process's threads and open files.
fn threads_and_files() -> (usize, usize) {
    (count("/proc/self/task"), count("/proc/self/fd"))
}

/// An SSE response being read, with what arrived past the last event.
struct Events {
    resp: reqwest::Response,
    buf: String,
}

impl Events {
    /// The next `want` events as `(event, id, data)` (or a panic after 30 s).
    async fn take(&mut self, want: usize) -> Vec<(String, Option<u64>, serde_json::Value)> {
        let mut out = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            while let Some(end) = self.buf.find("\n\n") {
                if out.len() == want {
                    return out;
                }
                let block: String = self.buf.drain(..end + 2).collect();
                let (mut event, mut id, mut data) = ("message".to_string(), None, String::new());
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        event = v.trim().into();
                    } else if let Some(v) = line.strip_prefix("id:") {
                        id = v.trim().parse().ok();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if !data.is_empty() {
                    out.push((event, id, serde_json::from_str(&data).unwrap()));
                }
            }
            if out.len() == want {
                return out;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            let chunk = tokio::time::timeout(left, self.resp.chunk())
                .await
                .expect("the events in time")
                .unwrap()
                .expect("the stream goes on");
            self.buf.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

/// Subscribes and waits for `subscribed`: the stream is awake by then.
async fn subscribe(c: &reqwest::Client, url: &str, last: Option<u64>) -> Events {
    let mut req = c.get(url);
    if let Some(n) = last {
        req = req.header("last-event-id", n.to_string());
    }
    let resp = req.send().await.unwrap();
    assert_eq!(resp.status().as_u16(), 200);
    let mut events = Events {
        resp,
        buf: String::new(),
    };
    let first = events.take(1).await;
    assert_eq!(first[0].0, "subscribed");
    events
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_nobody_watches_let_go_of_their_threads_and_journals_and_still_resume_exactly() {
    let _turn = SERIAL.lock().await;
    const N: usize = 24;
    let s = start(LiveLimits {
        linger: Duration::from_millis(500),
        ..LiveLimits::default()
    })
    .await;
    let (first, mut writer) = session(&s, &["before"]);
    let mut ids = vec![first];
    for i in 1..N {
        let (id, w) = session(&s, &[&format!("session {i}")]);
        drop(w);
        ids.push(id);
    }
    let c = reqwest::Client::new();
    let url = |id: &RunId| format!("{}/v1/sessions/{id}/events", s.base);
    // Warm up what stays whatever the streams do (the runtime's workers,
    // the client's resolver), then take the baseline.
    drop(subscribe(&c, &url(&ids[1]), None).await);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (threads0, files0) = threads_and_files();

    let mut open = Vec::new();
    for id in &ids {
        open.push(subscribe(&c, &url(id), None).await);
    }
    writer.append(&user("w0")).unwrap();
    writer.append(&user("w1")).unwrap();
    let got = open[0].take(2).await;
    let seqs: Vec<Option<u64>> = got.iter().map(|e| e.1).collect();
    assert_eq!(seqs, [Some(1), Some(2)]);
    let (threads, files) = threads_and_files();
    assert!(
        threads >= threads0 + N / 2 && files >= files0 + N,
        "a watched stream holds a thread and its journal: {threads} threads, {files} files, from {threads0} and {files0}"
    );

    drop(open);
    // Idle blocking threads of the runtime outlive their work by 10 s.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let (threads, files) = threads_and_files();
        if threads <= threads0 + 3 && files <= files0 + 3 {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "60 s after every subscriber left: {threads} threads, {files} open files (before: {threads0} and {files0})"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }

    // Asleep, session 0 goes on in the journal; a reconnect after live seq
    // 1 gets exactly the records after w0, and the live seqs go on.
    writer.append(&user("asleep 0")).unwrap();
    writer.append(&user("asleep 1")).unwrap();
    let mut again = subscribe(&c, &url(&ids[0]), Some(1)).await;
    writer.append(&user("awake")).unwrap();
    let got = again.take(4).await;
    let texts: Vec<&str> = got
        .iter()
        .map(|e| e.2["record"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["w1", "asleep 0", "asleep 1", "awake"]);
    let last = got.last().unwrap();
    assert!(
        last.1.is_some_and(|n| n > 2),
        "a frame after waking has a live seq past the ones before: {last:?}"
    );
    assert_eq!(
        last.2["journal_seq"], 7,
        "meta, before, w0, w1, asleep 0 and 1, awake"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_past_the_cap_is_answered_503_until_one_leaves() {
    let _turn = SERIAL.lock().await;
    let s = start(LiveLimits {
        max_subscribers: 3,
        ..LiveLimits::default()
    })
    .await;
    let (a, _wa) = session(&s, &["a"]);
    let (b, _wb) = session(&s, &["b"]);
    let c = reqwest::Client::new();
    let url = |id: &RunId| format!("{}/v1/sessions/{id}/events", s.base);
    let mut open = vec![
        subscribe(&c, &url(&a), None).await,
        subscribe(&c, &url(&a), None).await,
        subscribe(&c, &url(&b), None).await,
    ];
    let over = c.get(url(&b)).send().await.unwrap();
    assert_eq!(over.status().as_u16(), 503);
    assert!(over.headers().contains_key("retry-after"));
    let body: serde_json::Value = over.json().await.unwrap();
    assert_eq!(body["error"]["code"], "busy");
    assert_eq!(body["error"]["class"], "failure");

    drop(open.pop());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = c.get(url(&b)).send().await.unwrap();
        if r.status().as_u16() == 200 {
            break;
        }
        assert_eq!(r.status().as_u16(), 503);
        assert!(
            Instant::now() < deadline,
            "30 s after a subscriber left, a new one is still refused"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_stops_reading_is_dropped_within_the_send_timeout() {
    let _turn = SERIAL.lock().await;
    // One subscriber at a time: the next is served only once the stalled
    // one's task has let go of everything it held.
    let s = start(LiveLimits {
        max_subscribers: 1,
        send_timeout: Duration::from_millis(500),
        ..LiveLimits::default()
    })
    .await;
    let (id, mut w) = session(&s, &["before"]);
    let path = format!("/v1/sessions/{id}/events");
    // A client that asks and never reads a byte (nor closes).
    let mut stalled = std::net::TcpStream::connect(s.addr).unwrap();
    write!(
        stalled,
        "GET {path} HTTP/1.1\r\nHost: {}\r\nAccept: text/event-stream\r\n\r\n",
        s.addr
    )
    .unwrap();
    tokio::time::sleep(Duration::from_millis(500)).await;
    // Far more than the socket buffers, the 256 queued events and the
    // stream's 1,024 buffered frames hold: ~38 MB in 1,200 records.
    let text = "x".repeat(32 << 10);
    for _ in 0..12 {
        let batch: Vec<RecordBody> = (0..100).map(|_| user(&text)).collect();
        w.append_batch(&batch).unwrap();
    }
    let c = reqwest::Client::new();
    let since = Instant::now();
    loop {
        let r = c.get(format!("{}{path}", s.base)).send().await.unwrap();
        if r.status().as_u16() == 200 {
            break;
        }
        assert_eq!(r.status().as_u16(), 503);
        assert!(
            since.elapsed() < Duration::from_secs(30),
            "the stalled client still holds its place 30 s after the records were written"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    drop(stalled);
}
