//! Session listing and resume benchmark (run on demand:
//! `cargo bench -p cairn --bench sessions`).
//!
//! In one run, on a store of N sessions (CAIRN_BENCH_SESSIONS, default
//! 10,000) of ~45 records each:
//!   - `cairn sessions --all --json` with valid projections;
//!   - the same right after deleting every projection (rebuilt from the
//!     verified records and written back);
//!   - a head-of-every-file scan (open each journal, parse its first line),
//!     the way tools without projections list sessions.
//!
//! Then the resume latency of a 100,000-record session (lock, read, verify,
//! fold). Medians; ratios against the projection listing. The store is
//! synced before the listings, which alternate with the scan (11 of each).

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use cairn_journal::*;
use cairn_store::{RunId, Store};

// The allocator the `cairn` binary uses, so the in-process resume figure is
// the command's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn meta(ws: &str, i: usize) -> Meta {
    Meta {
        run: String::new(),
        created: now_rfc3339(),
        workspace: ws.into(),
        name: Some(format!("benchmark session {i}")),
        fingerprint: Some(Fingerprint {
            model: "openai:gpt-4.1".into(),
            system: None,
            tools: "0".repeat(64),
            thinking: None,
            budgets: Budgets::default(),
            mcp: Default::default(),
        }),
        fork: None,
        routing: None,
        system_file: None,
    }
}

/// meta + user + 14 × (assistant, tool_start, tool_result) + assistant + terminal = 46.
fn bodies(turns: usize) -> Vec<RecordBody> {
    let mut out = vec![RecordBody::User(User {
        text: "fix the failing test in src/lib.rs".into(),
        origin: None,
    })];
    for t in 0..turns {
        let id = format!("call_{t}");
        out.push(RecordBody::Assistant(Assistant {
            text: format!("Step {t}: reading the next file."),
            tool_calls: vec![ToolCall {
                id: id.clone(),
                name: "read_file".into(),
                arguments: serde_json::json!({"path": "src/lib.rs"}),
                raw_arguments: None,
            }],
            usage: Usage {
                input_tokens: 1500 + t as u64 * 100,
                output_tokens: 60,
            },
            cost: Cost::known(0.0042),
            replay: false,
            model: None,
            ..Assistant::default()
        }));
        out.push(RecordBody::ToolStart(ToolStart {
            call: id.clone(),
            name: "read_file".into(),
            mcp: None,
        }));
        out.push(RecordBody::ToolResult(ToolResult {
            call: id,
            outcome: Outcome::Ok,
            output: "pub fn add(a: i32, b: i32) -> i32 { a - b }\n".repeat(3),
        }));
    }
    out.push(RecordBody::Assistant(Assistant {
        text: "Done.".into(),
        tool_calls: vec![],
        usage: Usage {
            input_tokens: 3000,
            output_tokens: 20,
        },
        cost: Cost::known(0.0042),
        replay: false,
        model: None,
        ..Assistant::default()
    }));
    out
}

fn populate(store: &Store, n: usize) {
    let ws = "/home/dev/project";
    for i in 0..n {
        let id = RunId::new();
        let mut w = JournalWriter::create(store, &id, meta(ws, i)).unwrap();
        let mut b = bodies(14);
        let mut all = vec![RecordBody::Meta(Box::new(meta(ws, i)))];
        all.extend(b.iter().cloned());
        let mut full: Vec<Record> = all
            .into_iter()
            .enumerate()
            .map(|(k, body)| Record {
                v: 1,
                seq: k as u64 + 1,
                prev: ChainHash([0; 32]),
                ts: String::new(),
                body,
            })
            .collect();
        full[0].body = RecordBody::Meta(Box::new(meta(ws, i)));
        let totals = fold(&full).unwrap().totals;
        b.push(RecordBody::Terminal(Terminal {
            reason: TerminalReason::Completed,
            totals,
            detail: None,
        }));
        w.append_batch(&b).unwrap();
    }
}

fn list_ms(bin: &str, store: &Path) -> f64 {
    let t = Instant::now();
    let out = Command::new(bin)
        .args(["sessions", "--all", "--json"])
        .env("CAIRN_STORE", store)
        .output()
        .unwrap();
    let ms = t.elapsed().as_secs_f64() * 1e3;
    assert!(out.status.success());
    ms
}

fn drop_projections(store: &Store) {
    let _ = std::fs::remove_file(store.sessions_index());
    for id in store.run_ids().unwrap() {
        let _ = std::fs::remove_file(store.meta_path(&id));
    }
}

fn head_scan_ms(store: &Store) -> f64 {
    let t = Instant::now();
    let mut n = 0;
    for id in store.run_ids().unwrap() {
        let r = read_head_record(&store.journal_path(&id)).unwrap();
        if matches!(r.body, RecordBody::Meta(_)) {
            n += 1;
        }
    }
    assert!(n > 0);
    t.elapsed().as_secs_f64() * 1e3
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let n: usize = std::env::var("CAIRN_BENCH_SESSIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let base = cairn_testkit::bench_dir();
    let tmp = tempfile::tempdir_in(&base).unwrap();
    let store = Store::open(tmp.path().join("store")).unwrap();
    if std::env::var_os("CAIRN_BENCH_KEEP").is_some() {
        println!("keeping {}", tmp.path().display());
        let _ = tmp.keep();
    }
    let bin = env!("CARGO_BIN_EXE_cairn");
    let t = Instant::now();
    populate(&store, n);
    println!(
        "{n} sessions of 46 records written in {:.1} s",
        t.elapsed().as_secs_f64()
    );

    if std::env::var_os("CAIRN_BENCH_ONLY_POPULATE").is_some() {
        return;
    }
    let t = Instant::now();
    let out = Command::new(bin)
        .arg("reindex")
        .env("CAIRN_STORE", store.root())
        .output()
        .unwrap();
    assert!(out.status.success());
    println!("cairn reindex: {:.0} ms", t.elapsed().as_secs_f64() * 1e3);

    // The reindex left 10,000 files dirty: write them out first, so the
    // listing is measured against a store at rest, as the peer is.
    cairn_testkit::quiet_disk();
    // The listing and its peer alternate, so a busy moment of the machine
    // falls on both.
    let rounds = 11;
    let (mut lists, mut scans) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        lists.push(list_ms(bin, store.root()));
        scans.push(head_scan_ms(&store));
    }
    let valid = median(lists);
    let rebuild = median(
        (0..3)
            .map(|_| {
                drop_projections(&store);
                list_ms(bin, store.root())
            })
            .collect(),
    );
    let scan = median(scans);
    println!("listing {n} sessions (median):");
    println!("  cairn sessions --all --json, valid projections   {valid:>9.1} ms");
    println!(
        "  same, projections deleted (rebuild from record)  {rebuild:>9.1} ms   ratio {:.1}x",
        rebuild / valid
    );
    println!(
        "  head-of-every-file scan (first line of each)     {scan:>9.1} ms   ratio {:.2}x",
        scan / valid
    );
    println!(
        "  targets: valid <= 80 ms ({}); rebuild/valid >= 20x",
        if valid <= 80.0 { "ok" } else { "MISSED" }
    );

    // Resume latency: what `cairn resume` does before the model is called.
    let id = RunId::new();
    let mut w = JournalWriter::create(&store, &id, meta("/home/dev/big", 0)).unwrap();
    let mut written = 1;
    while written < 100_000 {
        let b = bodies(333);
        let take = b.len().min(100_000 - written);
        w.append_batch(&b[..take]).unwrap();
        written += take;
    }
    drop(w);
    let size = std::fs::metadata(store.journal_path(&id)).unwrap().len() as f64 / 1e6;
    let lat = median(
        (0..5)
            .map(|_| {
                let t = Instant::now();
                // What `cairn resume` does before the model is called.
                let session = cairn_sessions::Session::open(&store, &id).unwrap();
                assert_eq!(session.state().records, 100_000);
                drop(session);
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect(),
    );
    println!("resume latency, 100,000-record session ({size:.1} MB): {lat:.0} ms (lock + read + verify + fold, median of 5)");
    println!("  target: <= 150 ms");

    // Verify against the hash's own speed: `cairn verify ID` and
    // `sha256sum` of the same file, each a process, each warm in the cache.
    let journal = store.journal_path(&id);
    let verify = median(
        (0..5)
            .map(|_| {
                let t = Instant::now();
                let out = Command::new(bin)
                    .args(["verify", id.as_str()])
                    .env("CAIRN_STORE", store.root())
                    .output()
                    .unwrap();
                assert!(out.status.success(), "{out:?}");
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect(),
    );
    let sha = median(
        (0..5)
            .map(|_| {
                let t = Instant::now();
                let out = Command::new("sha256sum").arg(&journal).output().unwrap();
                assert!(out.status.success());
                t.elapsed().as_secs_f64() * 1e3
            })
            .collect(),
    );
    println!(
        "cairn verify of that journal: {verify:.0} ms; sha256sum of the file: {sha:.0} ms; \
         speed ratio {:.2}x sha256sum's (median of 5; target >= 0.5x)",
        sha / verify
    );
}
