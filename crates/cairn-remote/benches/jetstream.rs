//! Durable appends to JetStream against the file store (run on demand:
//! `cargo bench -p cairn-remote --bench jetstream`; needs `nats-server` on
//! PATH or in `CAIRN_NATS_SERVER`).
//!
//! Records of one real journal (user turns of ~300 bytes), each appended
//! and acknowledged before the next, as a session writes them:
//!   - the file store: `JournalWriter::append` (write + fdatasync) in a
//!     directory on the disk (CAIRN_BENCH_DIR, else the system temp dir);
//!   - JetStream, one server, and a 3-node cluster with a stream of 3
//!     replicas, all on loopback: `JetStreamJournals::append` (fenced, with
//!     a message id, waiting for the acknowledgement);
//!   - with 1 record an append, the server's own figure: the same lines
//!     published by async-nats alone to a stream of their own on the one
//!     server, with message ids and the same fence, no cairn code between;
//!   - the floor under both: the same lines published with core NATS to
//!     the one server (nothing stored) and a flush, a round trip per append
//!     made the same way (a thread and a connection per writer, a blocking
//!     call per append), so its ratio says how much of the file store's
//!     speed any acknowledged append could reach on this machine;
//!
//! each with 1 writer and with 16 sessions written at once (one thread and
//! one connection each); then the same with group commits of 8 records
//! (`JournalWriter::append_batch`: one write and one fdatasync; on
//! JetStream one append of 8 lines, an atomic batch where the server is
//! 2.12 or later). Records per second summed over writers, medians of 3
//! rounds, and each JetStream figure as a ratio of the file store's (and
//! cairn's one-server figure of async-nats alone's).
//! CAIRN_BENCH_RECORDS sets the records per writer (default 400).
//!
//! The servers are `nats-server` on PATH or CAIRN_NATS_SERVER; its version
//! is printed. One of 2.10 or later runs with `sync_interval: always`
//! (every acknowledged record fsynced there), as `cairn_testkit::nats`
//! starts it; 2.9 syncs its file store every two minutes. Run it once per
//! server to compare.

use std::path::Path;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use cairn_journal::{JournalWriter, Meta, RecordBody, RemoteJournals, User};
use cairn_remote::{JetStreamConfig, JetStreamJournals};
use cairn_store::{RunId, Store};
use cairn_testkit::nats::Nats;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

/// The median of three runs of `rate`.
fn median_of_3(mut rate: impl FnMut() -> f64) -> f64 {
    median((0..3).map(|_| rate()).collect())
}

fn meta() -> Meta {
    Meta {
        run: String::new(),
        created: "2026-01-01T00:00:00Z".into(),
        workspace: "/tmp/ws".into(),
        name: Some("bench".into()),
        fingerprint: None,
        fork: None,
        routing: None,
        system_file: None,
    }
}

fn body(i: usize) -> RecordBody {
    RecordBody::User(User {
        text: format!("turn {i}: {}", "x".repeat(200)),
        origin: None,
    })
}

/// The lines of a journal of `n` records after its meta, made in `dir`.
fn journal_lines(dir: &Path, n: usize) -> Lines {
    let store = Store::open(dir).unwrap();
    let id = RunId::new();
    let mut w = JournalWriter::create(&store, &id, meta()).unwrap();
    for i in 0..n {
        w.append(&body(i)).unwrap();
    }
    drop(w);
    let bytes = std::fs::read(store.journal_path(&id)).unwrap();
    let end = bytes.iter().rposition(|&b| b == b'\n').unwrap() + 1;
    let mut lines = bytes[..end].split_inclusive(|&b| b == b'\n');
    let meta = lines.next().unwrap().to_vec();
    (meta, lines.map(<[u8]>::to_vec).collect())
}

/// Records per second of `writers` threads writing `records` records in
/// all: each thread runs `setup` (connections, a session: not timed), then
/// the work it returns, all of them started together once every one is set
/// up.
fn timed<W: FnOnce()>(
    writers: usize,
    records: usize,
    setup: impl Fn(usize) -> W + Send + Sync + 'static,
) -> f64 {
    let setup = Arc::new(setup);
    let barrier = Arc::new(Barrier::new(writers + 1));
    let handles: Vec<_> = (0..writers)
        .map(|w| {
            let (setup, barrier) = (setup.clone(), barrier.clone());
            std::thread::spawn(move || {
                let work = setup(w);
                barrier.wait();
                work();
            })
        })
        .collect();
    barrier.wait();
    let t = Instant::now();
    for h in handles {
        h.join().unwrap();
    }
    records as f64 / t.elapsed().as_secs_f64()
}

/// File store: `writers` sessions, `n` durable records each in appends of
/// `group`, at once.
fn file_rate(dir: &Path, writers: usize, n: usize, group: usize) -> f64 {
    let store = Store::open(dir.join(format!("file-{}", RunId::new()))).unwrap();
    timed(writers, writers * n, move |_| {
        let mut w = JournalWriter::create(&store, &RunId::new(), meta()).unwrap();
        let bodies: Vec<RecordBody> = (0..n).map(body).collect();
        move || {
            for g in bodies.chunks(group) {
                w.append_batch(g).unwrap();
            }
        }
    })
}

/// JetStream: `writers` sessions, each its own connection, fenced appends
/// of `group` records each (a real journal's lines), at once.
fn jetstream_rate(url: &str, lines: &Lines, writers: usize, group: usize) -> f64 {
    let config = JetStreamConfig {
        ack_timeout: Duration::from_secs(10),
        ..JetStreamConfig::default()
    };
    let (url, lines) = (url.to_owned(), lines.clone());
    timed(writers, writers * lines.1.len(), move |_| {
        let remote = JetStreamJournals::open(&url, config.clone()).unwrap();
        // Each writer its own session: the same lines under a fresh
        // subject (the stream does not read them).
        let run = RunId::new();
        remote.append(run.as_str(), 0, &lines.0).unwrap();
        let lines = lines.clone();
        move || {
            for (g, lines) in lines.1.chunks(group).enumerate() {
                let after = (g * group) as u64 + 1;
                remote.append(run.as_str(), after, &lines.concat()).unwrap();
            }
        }
    })
}

/// The floor under any acknowledged append on this machine: the same
/// writers, each its own connection and a blocking call per append from its
/// own thread as cairn makes them, publishing the same lines with core NATS
/// (nothing stored, nothing fenced) and waiting for the server's answer to a
/// PING after them (a flush). An append to JetStream needs at least this
/// round trip, and the server's storing on top.
fn round_trip_rate(addr: &str, lines: &Lines, writers: usize, group: usize) -> f64 {
    let rt = Arc::new(runtime());
    let (addr, lines) = (addr.to_owned(), payloads(lines));
    let n = writers * lines.len();
    timed(writers, n, move |w| {
        let (rt, lines) = (rt.clone(), lines.clone());
        let client = rt.block_on(async_nats::connect(addr.as_str())).unwrap();
        let subject = format!("cairn-bench.floor.{w}");
        move || {
            for g in lines.chunks(group) {
                rt.block_on(async {
                    for line in g {
                        client.publish(subject.clone(), line.clone()).await.unwrap();
                    }
                    client.flush().await.unwrap();
                });
            }
        }
    })
}

/// What the server's JetStream gives any client for the same append: the
/// same writers and lines, one record an append, published by async-nats
/// alone to one stream of its own on the one server, each with a message id
/// and fenced on the subject's last sequence as cairn's are, each
/// acknowledged before the next; no cairn code in the path.
fn bare_jetstream_rate(addr: &str, lines: &Lines, writers: usize) -> f64 {
    let rt = Arc::new(runtime());
    let addr = addr.to_owned();
    let stream = format!("BARE{}", RunId::new());
    rt.block_on(async {
        let js = async_nats::jetstream::new(async_nats::connect(addr.as_str()).await.unwrap());
        js.create_stream(async_nats::jetstream::stream::Config {
            name: stream.clone(),
            subjects: vec![format!("{stream}.>")],
            duplicate_window: Duration::from_secs(120),
            ..Default::default()
        })
        .await
        .unwrap();
    });
    let lines = payloads(lines);
    timed(writers, writers * lines.len(), move |w| {
        let (rt, lines) = (rt.clone(), lines.clone());
        let subject = format!("{stream}.{w}");
        let js = rt.block_on(async {
            async_nats::jetstream::new(async_nats::connect(addr.as_str()).await.unwrap())
        });
        move || {
            let mut last = 0;
            for (i, line) in lines.iter().enumerate() {
                let msg = async_nats::jetstream::message::PublishMessage::build()
                    .payload(line.clone())
                    .message_id(format!("{subject}.{i}"))
                    .expected_last_subject_sequence(last);
                let ack = rt
                    .block_on(async { js.send_publish(subject.clone(), msg).await.unwrap().await });
                last = ack.unwrap().sequence;
            }
        }
    })
}

/// A journal's meta line and the lines after it.
type Lines = (Vec<u8>, Vec<Vec<u8>>);

/// The lines after the meta, as payloads.
fn payloads(lines: &Lines) -> Arc<Vec<bytes::Bytes>> {
    Arc::new(lines.1.iter().cloned().map(bytes::Bytes::from).collect())
}

/// A runtime for the peers that use async-nats directly, as cairn's own:
/// two workers.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

fn open_when_ready(url: &str) {
    for _ in 0..120 {
        if JetStreamJournals::open(url, JetStreamConfig::default()).is_ok() {
            return;
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    panic!("{url} did not come up");
}

fn main() {
    let n: usize = std::env::var("CAIRN_BENCH_RECORDS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(400);
    let base = std::env::var_os("CAIRN_BENCH_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::tempdir_in(&base).unwrap();
    let lines = journal_lines(&dir.path().join("source"), n);
    let single = Nats::single();
    let cluster = Nats::cluster();
    let single_url = single.url("bench");
    // The peers that use async-nats directly connect to it by address.
    let single_addr = single.servers();
    let cluster_url = format!("{}?replicas=3", cluster.url("bench"));
    open_when_ready(&single_url);
    open_when_ready(&cluster_url);

    let batches = JetStreamJournals::open(&single_url, JetStreamConfig::default())
        .map(|j| j.atomic_batches())
        .unwrap_or(false);
    println!(
        "nats-server {}{}; atomic batches: {}",
        cairn_testkit::nats::version(),
        if cairn_testkit::nats::at_least(2, 10) {
            " with sync_interval: always"
        } else {
            " (file store synced every two minutes)"
        },
        if batches { "yes" } else { "no" }
    );
    println!(
        "durable appends of {}-byte records, {n} per writer, median of 3 (file store in {}):",
        lines.1[0].len(),
        base.display()
    );
    for group in [1usize, 8] {
        for writers in [1usize, 16] {
            let file = median_of_3(|| file_rate(dir.path(), writers, n, group));
            let one = median_of_3(|| jetstream_rate(&single_url, &lines, writers, group));
            let r3 = median_of_3(|| jetstream_rate(&cluster_url, &lines, writers, group));
            let floor = median_of_3(|| round_trip_rate(&single_addr, &lines, writers, group));
            println!("  {writers:>2} writer(s), {group} record(s) per append:");
            println!("    file store (write + fdatasync)   {file:>9.0} records/s");
            println!(
                "    core NATS round trip, no storing {floor:>9.0} records/s   {:.2}x the file store: the most an acknowledged append can reach here",
                floor / file
            );
            let mut against_bare = String::new();
            if group == 1 {
                let bare = median_of_3(|| bare_jetstream_rate(&single_addr, &lines, writers));
                println!(
                    "    JetStream, async-nats alone      {bare:>9.0} records/s   {:.2}x the file store: what the server gives a fenced append",
                    bare / file
                );
                against_bare = format!(", {:.2}x async-nats alone", one / bare);
            }
            println!(
                "    JetStream, one server            {one:>9.0} records/s   {:.2}x the file store{against_bare}",
                one / file
            );
            println!(
                "    JetStream, 3 nodes, R3           {r3:>9.0} records/s   {:.2}x the file store",
                r3 / file
            );
        }
    }
}
