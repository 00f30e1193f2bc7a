//! `cairn sessions` over a shared store of many sessions (run on demand:
//! `cargo bench -p cairn --bench shared_sessions`; needs `nats-server` on
//! PATH or in CAIRN_NATS_SERVER, and CAIRN_MOTO_SERVER naming moto's
//! server, as `.ci/run` installs them).
//!
//! N sessions (CAIRN_BENCH_SESSIONS, default 10,000), each a meta, two
//! turns and a suspend (CAIRN_BENCH_UNENDED=1: no suspend), are published
//! to JetStream on loopback. Then, with
//! `--store nats://…`:
//!   - the first `cairn sessions --all`, from an empty cache: it brings
//!     every session into the cache (once);
//!   - `cairn sessions --all` again, the cache current (median of 5): the
//!     listing read from the cache's projections (each checked against its
//!     journal), and one request for every session's record count, compared
//!     with the listing's;
//!
//! against `cairn sessions --all` of the cache directory itself as a local
//! store (median of 5): the price of asking the shared store.

use std::path::Path;
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use cairn_journal::{
    fold, scan_journal_bytes, JournalWriter, Meta, RecordBody, RemoteJournals, Terminal,
    TerminalReason, User,
};
use cairn_remote::{JetStreamConfig, JetStreamJournals};
use cairn_store::{RunId, Store};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn meta(ws: &Path, i: usize) -> Meta {
    Meta {
        run: String::new(),
        created: "2026-01-01T00:00:00Z".into(),
        workspace: ws.display().to_string(),
        name: Some(format!("session {i}")),
        fingerprint: None,
        fork: None,
        routing: None,
        system_file: None,
    }
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let nats = cairn_testkit::nats::version();
    if nats.is_empty() || std::env::var_os("CAIRN_MOTO_SERVER").is_none() {
        println!("no nats-server or CAIRN_MOTO_SERVER: nothing measured");
        return;
    }
    let n: usize = std::env::var("CAIRN_BENCH_SESSIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    // Sessions at rest end with a terminal record, whose totals the
    // listing shows; CAIRN_BENCH_UNENDED=1 leaves it off (sessions running
    // or cut off), which the listing must replay for their cost.
    let unended = std::env::var_os("CAIRN_BENCH_UNENDED").is_some_and(|v| v == "1");
    let bin = env!("CARGO_BIN_EXE_cairn");
    let base = cairn_testkit::bench_dir();
    let tmp = tempfile::tempdir_in(&base).unwrap();
    let ws = tmp.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let server = cairn_testkit::nats::Nats::single();
    let moto = cairn_testkit::s3::Moto::start();
    moto.create_bucket("team");
    let url = server.url("team");

    // The sessions, written where fsyncs are cheap, then published.
    let gen_dir = tempfile::tempdir_in("/dev/shm").unwrap_or_else(|_| tempfile::tempdir().unwrap());
    let gen = Store::open(gen_dir.path()).unwrap();
    let t = Instant::now();
    let ids: Vec<RunId> = (0..n)
        .map(|i| {
            let id = RunId::new();
            let mut w = JournalWriter::create(&gen, &id, meta(&ws, i)).unwrap();
            for text in ["task", "go on"] {
                w.append(&RecordBody::User(User {
                    text: text.into(),
                    origin: None,
                }))
                .unwrap();
            }
            if !unended {
                let path = gen.journal_path(&id);
                let bytes = std::fs::read(&path).unwrap();
                let scan = scan_journal_bytes(&path, &bytes, id.as_str()).unwrap();
                let totals = fold(&scan.records).unwrap().totals;
                w.append(&RecordBody::Terminal(Terminal {
                    reason: TerminalReason::Suspended,
                    totals,
                    detail: None,
                }))
                .unwrap();
            }
            id
        })
        .collect();
    let ids = Arc::new(ids);
    let next = Arc::new(AtomicUsize::new(0));
    let handles: Vec<_> = (0..16)
        .map(|_| {
            let (ids, next, url, gen) = (ids.clone(), next.clone(), url.clone(), gen.clone());
            std::thread::spawn(move || {
                let remote = JetStreamJournals::open(&url, JetStreamConfig::default()).unwrap();
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(id) = ids.get(i) else { break };
                    let bytes = std::fs::read(gen.journal_path(id)).unwrap();
                    let end = bytes.iter().rposition(|&b| b == b'\n').unwrap() + 1;
                    remote.append(id.as_str(), 0, &bytes[..end]).unwrap();
                }
            })
        })
        .collect();
    for h in handles {
        h.join().unwrap();
    }
    println!(
        "{n} sessions published to JetStream in {:.1} s (cache in {})",
        t.elapsed().as_secs_f64(),
        base.display()
    );

    let cache_home = tmp.path().join("cache");
    // Times the command alone; its output is checked after the clock stops.
    let list = |store: &str| {
        let t = Instant::now();
        let out = Command::new(bin)
            .args(["sessions", "--all", "--json"])
            .env("CAIRN_STORE", store)
            .env("CAIRN_OBJECTS", "s3://team/cairn")
            .env("XDG_CACHE_HOME", &cache_home)
            .envs(moto.env())
            .current_dir(&ws)
            .output()
            .unwrap();
        let ms = t.elapsed().as_secs_f64() * 1e3;
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(v.as_array().unwrap().len(), n);
        ms
    };
    let cold = list(&url);
    let warm = median((0..5).map(|_| list(&url)).collect());
    let cache = std::fs::read_dir(cache_home.join("cairn/shared"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let cache = cache.to_str().unwrap().to_owned();
    let local = median((0..5).map(|_| list(&cache)).collect());
    println!("nats-server {nats}");
    println!(
        "cairn sessions --all, first, from an empty cache     {cold:>9.0} ms   target <= 10000 ms ({})",
        if cold <= 10_000.0 { "ok" } else { "MISSED" }
    );
    println!(
        "cairn sessions --all, the cache current (median of 5) {warm:>8.0} ms   target <= 300 ms"
    );
    println!("cairn sessions --all of the cache as a local store    {local:>8.0} ms   shared/local = {:.2}", warm / local);
}
