//! The HTTP API end to end: a real server on loopback, a real client.

use std::time::Duration;

use cairn_journal::*;
use cairn_server::{bind, ServeConfig};
use cairn_store::{RunId, Store};

struct Server {
    _dir: tempfile::TempDir,
    store: Store,
    ws: std::path::PathBuf,
    base: String,
}

fn meta(ws: &str) -> Meta {
    Meta {
        run: String::new(),
        created: now_rfc3339(),
        workspace: ws.into(),
        name: Some("served".into()),
        fingerprint: None,
        fork: None,
        routing: None,
        system_file: None,
    }
}

/// A GET's JSON body.
async fn get_json(c: &reqwest::Client, url: impl reqwest::IntoUrl) -> serde_json::Value {
    c.get(url).send().await.unwrap().json().await.unwrap()
}

fn user(t: &str) -> RecordBody {
    RecordBody::User(User {
        text: t.into(),
        origin: None,
    })
}

async fn start(token: Option<&str>) -> Server {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store")).unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let (addr, server) = bind(ServeConfig {
        store: store.clone(),
        listen: "127.0.0.1:0".parse().unwrap(),
        token: token.map(str::to_owned),
        launcher: None,
        live: Default::default(),
        bounds: Default::default(),
    })
    .await
    .unwrap();
    tokio::spawn(server);
    Server {
        _dir: dir,
        store,
        ws,
        base: format!("http://{addr}"),
    }
}

fn session(s: &Server, texts: &[&str]) -> (RunId, JournalWriter) {
    let id = RunId::new();
    let mut w = JournalWriter::create(&s.store, &id, meta(&s.ws.display().to_string())).unwrap();
    for t in texts {
        w.append(&user(t)).unwrap();
    }
    (id, w)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_show_records_and_errors() {
    let s = start(None).await;
    let (id, _w) = session(&s, &["one", "two", "three"]);
    let c = reqwest::Client::new();
    let list = get_json(&c, format!("{}/v1/sessions", s.base)).await;
    assert_eq!(list[0]["id"], id.as_str());
    assert_eq!(list[0]["records"], 4);
    let repo = get_json(&c, format!("{}/v1/sessions?repo=/nowhere/else", s.base)).await;
    assert_eq!(repo.as_array().unwrap().len(), 0, "filtered by repository");

    let show = get_json(&c, format!("{}/v1/sessions/{id}", s.base)).await;
    assert_eq!(show["id"], id.as_str());

    let page = get_json(
        &c,
        format!("{}/v1/sessions/{id}/records?after=1&limit=2", s.base),
    )
    .await;
    let seqs: Vec<u64> = page["records"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, [2, 3]);
    assert_eq!(page["next_after"], 3);
    assert_eq!(page["prev_before"], 2, "record 1 comes before this page");
    assert_eq!(page["records"][0]["text"], "one");
    assert!(
        page["records"][0].get("html").is_none(),
        "html only when asked"
    );

    // Backwards: the tail, then the page before it, to the first record.
    let seqs_of = |page: &serde_json::Value| -> Vec<u64> {
        page["records"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["seq"].as_u64().unwrap())
            .collect()
    };
    let tail = get_json(
        &c,
        format!("{}/v1/sessions/{id}/records?tail=true&limit=3", s.base),
    )
    .await;
    assert_eq!(seqs_of(&tail), [2, 3, 4]);
    assert_eq!(tail["next_after"], serde_json::Value::Null);
    assert_eq!(tail["prev_before"], 2);
    let before = get_json(
        &c,
        format!("{}/v1/sessions/{id}/records?before=2&limit=3", s.base),
    )
    .await;
    assert_eq!(seqs_of(&before), [1]);
    assert_eq!(before["prev_before"], serde_json::Value::Null);
    assert_eq!(before["next_after"], 1);
    let between = get_json(
        &c,
        format!(
            "{}/v1/sessions/{id}/records?after=1&before=4&limit=1",
            s.base
        ),
    )
    .await;
    assert_eq!(seqs_of(&between), [3], "the last one of (1, 4)");
    assert_eq!(between["prev_before"], 3);

    // Rendered: the user's text as HTML beside the text.
    let shown = get_json(
        &c,
        format!(
            "{}/v1/sessions/{id}/records?after=1&limit=1&render=html",
            s.base
        ),
    )
    .await;
    assert_eq!(shown["records"][0]["html"], "<p>one</p>\n");
    assert_eq!(shown["records"][0]["text"], "one");

    for (path, status, code) in [
        ("/v1/sessions/not.an.id", 400, "bad_request"),
        ("/v1/sessions/01J00000000000000000000000", 404, "not_found"),
        (
            &*format!("/v1/sessions/{id}/records?limit=0"),
            400,
            "bad_request",
        ),
        (
            &*format!("/v1/sessions/{id}/records?tail=true&before=3"),
            400,
            "bad_request",
        ),
        (
            &*format!("/v1/sessions/{id}/records?render=svg"),
            400,
            "bad_request",
        ),
        ("/v1/nothing", 404, "not_found"),
    ] {
        let r = c.get(format!("{}{path}", s.base)).send().await.unwrap();
        assert_eq!(r.status().as_u16(), status, "{path}");
        let body: serde_json::Value = r.json().await.unwrap();
        assert_eq!(body["error"]["code"], code, "{path}");
        assert_eq!(body["error"]["class"], "usage", "{path}");
    }

    let doc = get_json(&c, format!("{}/openapi.json", s.base)).await;
    assert_eq!(doc["openapi"], "3.0.3");
    assert!(doc["paths"]["/v1/sessions/{id}/events"].is_object());

    let page = c.get(format!("{}/", s.base)).send().await.unwrap();
    assert!(page.text().await.unwrap().contains("cairn sessions"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_token_guards_every_route_and_a_foreign_host_is_refused() {
    let s = start(Some("sekrit")).await;
    let (id, _w) = session(&s, &["x"]);
    let c = reqwest::Client::new();
    for path in [
        "/".to_string(),
        "/openapi.json".into(),
        "/v1/sessions".into(),
        format!("/v1/sessions/{id}"),
        format!("/v1/sessions/{id}/records"),
        format!("/v1/sessions/{id}/events"),
        "/v1/none".into(),
    ] {
        let r = c.get(format!("{}{path}", s.base)).send().await.unwrap();
        assert_eq!(r.status().as_u16(), 401, "{path}");
        let r = c
            .get(format!("{}{path}", s.base))
            .bearer_auth("wrong")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 401, "{path}");
    }
    let r = c
        .get(format!("{}/v1/sessions", s.base))
        .bearer_auth("sekrit")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200);

    let open = start(None).await;
    let r = c
        .get(format!("{}/v1/sessions", open.base))
        .header("host", "evil.example:7878")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 403);
    let body: serde_json::Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], "cairn_host");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_non_loopback_address_needs_a_token() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let r = bind(ServeConfig {
        store,
        listen: "0.0.0.0:0".parse().unwrap(),
        token: None,
        launcher: None,
        live: Default::default(),
        bounds: Default::default(),
    })
    .await;
    assert!(matches!(r, Err(cairn_server::ServeError::NeedsToken(_))));
}

/// Reads SSE events until `n` `record` events arrived; returns (id, data).
async fn read_records(
    resp: reqwest::Response,
    n: usize,
) -> (Vec<(Option<u64>, serde_json::Value)>, Option<u64>) {
    use futures_util::StreamExt;
    let mut body = resp.bytes_stream();
    let mut buf = String::new();
    let mut out = Vec::new();
    let mut watermark = None;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
    while out.len() < n {
        let chunk = tokio::time::timeout_at(deadline, body.next())
            .await
            .expect("events in time")
            .expect("the stream goes on")
            .unwrap();
        buf.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buf.find("\n\n") {
            let block: String = buf.drain(..end + 2).collect();
            let (mut id, mut event, mut data) = (None, String::new(), String::new());
            for line in block.lines() {
                if let Some(v) = line.strip_prefix("id:") {
                    id = v.trim().parse().ok();
                } else if let Some(v) = line.strip_prefix("event:") {
                    event = v.trim().to_string();
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push_str(v.trim_start());
                }
            }
            match event.as_str() {
                "subscribed" => {
                    let v: serde_json::Value = serde_json::from_str(&data).unwrap();
                    watermark = v["watermark"].as_u64();
                }
                "record" => out.push((id, serde_json::from_str(&data).unwrap())),
                "error" => panic!("stream error: {data}"),
                _ => {}
            }
        }
    }
    (out, watermark)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_written_by_another_process_streams_and_a_reconnect_misses_nothing() {
    let s = start(None).await;
    let (id, mut w) = session(&s, &["before"]);
    let c = reqwest::Client::new();
    let url = format!("{}/v1/sessions/{id}/events", s.base);
    let first = c.get(&url).send().await.unwrap();
    assert_eq!(first.status().as_u16(), 200);
    // Give the subscription a moment to register, then write as a CLI would.
    tokio::time::sleep(Duration::from_millis(100)).await;
    for i in 0..5 {
        w.append(&user(&format!("live {i}"))).unwrap();
    }
    let (got, watermark) = read_records(first, 5).await;
    assert_eq!(
        watermark,
        Some(2),
        "the journal held 2 records at subscription"
    );
    let texts: Vec<&str> = got
        .iter()
        .map(|(_, d)| d["record"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(texts, ["live 0", "live 1", "live 2", "live 3", "live 4"]);
    let ids: Vec<u64> = got.iter().map(|(i, _)| i.unwrap()).collect();
    assert_eq!(ids, [1, 2, 3, 4, 5], "dense live seqs");
    assert_eq!(got[0].1["journal_seq"], 3);

    // Dropped after live seq 2; three more records are written meanwhile.
    for i in 5..8 {
        w.append(&user(&format!("live {i}"))).unwrap();
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let again = c
        .get(&url)
        .header("last-event-id", "2")
        .send()
        .await
        .unwrap();
    let (got, _) = read_records(again, 6).await;
    let texts: Vec<&str> = got
        .iter()
        .map(|(_, d)| d["record"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(
        texts,
        ["live 2", "live 3", "live 4", "live 5", "live 6", "live 7"],
        "exactly the frames after 2"
    );

    // A cursor ahead of the head is refused.
    let ahead = c
        .get(format!("{url}?resume_from=999"))
        .send()
        .await
        .unwrap();
    assert_eq!(ahead.status().as_u16(), 400);
    let body: serde_json::Value = ahead.json().await.unwrap();
    assert_eq!(body["error"]["code"], "cursor_ahead");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_a_cursor_a_client_starts_at_the_head_and_cursor_0_replays_every_frame() {
    let s = start(None).await;
    let (id, mut w) = session(&s, &["before"]);
    let c = reqwest::Client::new();
    let url = format!("{}/v1/sessions/{id}/events", s.base);
    let steady = c.get(&url).send().await.unwrap();
    for i in 0..3 {
        w.append(&user(&format!("early {i}"))).unwrap();
    }
    // Once the steady client has them, frames 1..=3 are published.
    let (got, _) = read_records(steady, 3).await;
    assert_eq!(got.last().unwrap().0, Some(3));

    // From now: the frames already published are not sent again; the
    // watermark says which records to fetch with `GET …/records` instead.
    let now = c.get(&url).send().await.unwrap();
    let zero = c.get(format!("{url}?resume_from=0")).send().await.unwrap();
    w.append(&user("late")).unwrap();
    let (got, watermark) = read_records(now, 1).await;
    assert_eq!(watermark, Some(5), "meta, before and three early records");
    assert_eq!(got[0].0, Some(4), "only the frame published after it");
    assert_eq!(got[0].1["record"]["text"], "late");

    // After live seq 0: every frame, from the first.
    let (got, _) = read_records(zero, 4).await;
    let ids: Vec<Option<u64>> = got.iter().map(|(i, _)| *i).collect();
    assert_eq!(ids, [Some(1), Some(2), Some(3), Some(4)]);
}

/// What a client keeps of a record event: its live seq, journal seq and
/// record.
fn kept(events: Vec<(Option<u64>, serde_json::Value)>) -> Vec<(u64, u64, serde_json::Value)> {
    events
        .into_iter()
        .map(|(id, d)| {
            let id = id.expect("inside the ring every record has a live seq");
            (id, d["journal_seq"].as_u64().unwrap(), d["record"].clone())
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_dropped_at_random_during_a_run_gets_what_a_connected_one_got() {
    use rand::{Rng, SeedableRng};
    const RECORDS: usize = 1_500;
    let s = start(None).await;
    let (id, mut w) = session(&s, &["before"]);
    let c = reqwest::Client::new();
    let url = format!("{}/v1/sessions/{id}/events", s.base);
    let steady = c.get(&url).send().await.unwrap();
    assert_eq!(steady.status().as_u16(), 200);
    tokio::time::sleep(Duration::from_millis(100)).await;

    // The run: records appended in small bursts, as turns land.
    let writer = std::thread::spawn(move || {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let mut i = 0;
        while i < RECORDS {
            let burst = rng.random_range(1..40).min(RECORDS - i);
            for _ in 0..burst {
                w.append(&user(&format!("turn text {i}"))).unwrap();
                i += 1;
            }
            std::thread::sleep(Duration::from_millis(rng.random_range(0..4)));
        }
        w
    });

    // A client that drops after a random number of records, sometimes
    // waits, and reconnects with the last id it saw. Its first connection
    // asks for the frames after live seq 0, where the steady client
    // subscribed: without a cursor it would start at whatever head the
    // writer had already reached (the stream's "from now").
    let mut rng = rand::rngs::StdRng::seed_from_u64(11);
    let mut dropping: Vec<(u64, u64, serde_json::Value)> = Vec::new();
    let mut reconnects = 0;
    while dropping.len() < RECORDS {
        let last = dropping.last().map_or(0, |(last, _, _)| *last);
        let resp = c
            .get(&url)
            .header("last-event-id", last.to_string())
            .send()
            .await
            .unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        let want = rng.random_range(1..120).min(RECORDS - dropping.len());
        let (got, _) = read_records(resp, want).await;
        dropping.extend(kept(got));
        reconnects += 1;
        if rng.random_bool(0.3) {
            tokio::time::sleep(Duration::from_millis(rng.random_range(0..30))).await;
        }
    }
    let (got, watermark) = read_records(steady, RECORDS).await;
    assert_eq!(watermark, Some(2), "the steady client subscribed at head 0");
    let connected = kept(got);
    writer.join().unwrap();

    assert!(
        reconnects > 10,
        "the client really dropped ({reconnects} connections)"
    );
    assert_eq!(
        dropping.len(),
        connected.len(),
        "nothing missing, nothing twice"
    );
    assert_eq!(dropping, connected, "the same frames in the same order");
    let ids: Vec<u64> = connected.iter().map(|(i, _, _)| *i).collect();
    assert_eq!(
        ids,
        (1..=RECORDS as u64).collect::<Vec<_>>(),
        "dense live seqs"
    );
    assert_eq!(connected.last().unwrap().1, RECORDS as u64 + 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_burst_appended_at_once_reaches_every_reader() {
    const BURST: usize = 5_000;
    let s = start(None).await;
    let (id, mut w) = session(&s, &["before"]);
    let c = reqwest::Client::new();
    let url = format!("{}/v1/sessions/{id}/events", s.base);
    let mut readers = Vec::new();
    for _ in 0..6 {
        let resp = c.get(&url).send().await.unwrap();
        assert_eq!(resp.status().as_u16(), 200);
        readers.push(resp);
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    // One batch: the follower reads all of it in one poll, five times a
    // reader's buffer.
    let burst: Vec<RecordBody> = (0..BURST).map(|i| user(&format!("burst {i}"))).collect();
    w.append_batch(&burst).unwrap();
    let all =
        futures_util::future::join_all(readers.into_iter().map(|r| read_records(r, BURST))).await;
    for (got, _) in all {
        // `read_records` fails on a `slow_client` error event.
        let seqs: Vec<u64> = got
            .iter()
            .map(|(_, d)| d["journal_seq"].as_u64().unwrap())
            .collect();
        assert_eq!(seqs, (3..BURST as u64 + 3).collect::<Vec<_>>());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fork_snapshots_and_a_diff_with_its_lines() {
    let s = start(None).await;
    let (id, w) = session(&s, &["a", "b"]);
    drop(w);
    let tracker = cairn_workspace::Workspace::open(
        &s.store,
        &id,
        &s.ws,
        cairn_workspace::CaptureConfig::default(),
    )
    .unwrap();
    std::fs::write(s.ws.join("f.txt"), "one\ntwo\n").unwrap();
    let a = tracker
        .snapshot(None, &cairn_workspace::NoProgress)
        .unwrap()
        .snapshot;
    std::fs::write(s.ws.join("f.txt"), "one\nTWO\nthree\n").unwrap();
    let b = tracker
        .snapshot(None, &cairn_workspace::NoProgress)
        .unwrap()
        .snapshot;
    let c = reqwest::Client::new();
    let snaps: serde_json::Value =
        get_json(&c, format!("{}/v1/sessions/{id}/snapshots", s.base)).await;
    assert_eq!(snaps.as_array().unwrap().len(), 2);
    let diff = get_json(
        &c,
        format!("{}/v1/sessions/{id}/diff?from={a}&to={b}", s.base),
    )
    .await;
    assert_eq!(diff[0]["path"], "f.txt");
    assert_eq!(diff[0]["added"], 2);
    assert_eq!(diff[0]["removed"], 1);
    let unified = diff[0]["unified"].as_str().unwrap();
    assert!(
        unified.contains("-two\n") && unified.contains("+TWO\n"),
        "{unified}"
    );

    let r = c
        .post(format!("{}/v1/sessions/{id}/fork", s.base))
        .json(&serde_json::json!({"at": 2}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 201);
    let forked: serde_json::Value = r.json().await.unwrap();
    assert_eq!(forked["parent"], id.as_str());
    assert_eq!(forked["seq"], 2);
    let bad = c
        .post(format!("{}/v1/sessions/{id}/fork", s.base))
        .json(&serde_json::json!({"at": 99}))
        .send()
        .await
        .unwrap();
    assert_eq!(bad.status().as_u16(), 400);
}
