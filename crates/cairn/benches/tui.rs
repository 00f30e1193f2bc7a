//! The terminal UI's speed, measured in a pseudo-terminal (run on demand:
//! `cargo bench -p cairn --bench tui`).
//!
//! 1. Time to first full frame: `cairn --resume ID` on a 100,000-record
//!    session, from spawn until the screen shows the session's last
//!    message and the idle status line. Target: ≤ 500 ms. Median of 5,
//!    with the same measure for a 50-record session as the peer.
//! 2. Keystroke to frame: a key is sent and timed until the composer on
//!    the screen shows it, while a response streams at 200 tokens/s, and
//!    with the session idle as the peer. Target: p99 ≤ 16 ms.
//!
//! Both are read through the same terminal emulator (vt100) a user's
//! terminal would stand in for, so they include its parsing: upper bounds.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cairn_journal::*;
use cairn_store::{RunId, Store};
use cairn_testkit::pty::{Pty, Spawn};

const WAIT: Duration = Duration::from_secs(60);

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn percentile(mut v: Vec<f64>, p: f64) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    let i = ((v.len() as f64 - 1.0) * p).round() as usize;
    v[i]
}

struct Bench {
    _dir: tempfile::TempDir,
    store: PathBuf,
    ws: PathBuf,
    bin: PathBuf,
    script: PathBuf,
}

impl Bench {
    fn spawn(&self, args: &[&str], env: &[(&str, &str)]) -> Pty {
        let mut vars = vec![
            ("CAIRN_STORE".to_string(), self.store.display().to_string()),
            ("CAIRN_MODEL".to_string(), String::new()),
        ];
        vars.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        Pty::spawn(Spawn {
            program: &self.bin,
            args: args.iter().map(|a| a.to_string()).collect(),
            cwd: self.ws.clone(),
            env: vars,
            cols: 100,
            rows: 30,
        })
        .expect("cairn starts")
    }
}

fn bin() -> PathBuf {
    // The binary of this build profile, next to the bench executable.
    let exe = std::env::current_exe().expect("bench path");
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let bin = dir.join("cairn");
    assert!(bin.exists(), "build cairn first: {}", bin.display());
    bin
}

/// A real session's `meta` (fingerprint, routing), so a synthetic session
/// resumes under the same configuration.
fn real_meta(b: &Bench) -> Meta {
    let out = std::process::Command::new(&b.bin)
        .args(["run", "--model"])
        .arg(format!("script:{}", b.script.display()))
        .arg("hello")
        .env("CAIRN_STORE", &b.store)
        .current_dir(&b.ws)
        .output()
        .expect("cairn run");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let store = Store::open(&b.store).unwrap();
    let id = std::fs::read_dir(b.store.join("runs"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .file_name();
    let id = RunId::parse(id.to_str().unwrap()).unwrap();
    match read_head_record(&store.journal_path(&id)).unwrap().body {
        RecordBody::Meta(m) => *m,
        _ => panic!("no meta"),
    }
}

/// A session of `n` records: user, then (assistant, tool_start,
/// tool_result) turns, a last answer and a terminal.
fn session(store: &Store, meta: &Meta, n: usize, last: &str) -> RunId {
    let id = RunId::new();
    let mut m = meta.clone();
    m.run = id.to_string();
    let mut w = JournalWriter::create(store, &id, m).unwrap();
    let mut bodies = vec![RecordBody::User(User {
        text: "read every file and summarise".into(),
        origin: None,
    })];
    let mut t = 0;
    while bodies.len() + 3 < n - 1 {
        let call = format!("call_{t}");
        bodies.push(RecordBody::Assistant(Assistant {
            text: format!("Step {t}: reading the next file."),
            tool_calls: vec![ToolCall {
                id: call.clone(),
                name: "read_file".into(),
                arguments: serde_json::json!({"path": "src/lib.rs"}),
                raw_arguments: None,
            }],
            usage: Usage {
                input_tokens: 1500,
                output_tokens: 60,
            },
            cost: Cost::known(0.0042),
            ..Assistant::default()
        }));
        bodies.push(RecordBody::ToolStart(ToolStart {
            call: call.clone(),
            name: "read_file".into(),
            mcp: None,
        }));
        bodies.push(RecordBody::ToolResult(ToolResult {
            call,
            outcome: Outcome::Ok,
            output: "pub fn add(a: i32, b: i32) -> i32 { a + b }\n".repeat(3),
        }));
        t += 1;
    }
    while bodies.len() < n - 3 {
        bodies.push(RecordBody::User(User {
            text: "and the next?".into(),
            origin: None,
        }));
    }
    bodies.push(RecordBody::Assistant(Assistant {
        text: last.into(),
        ..Assistant::default()
    }));
    for chunk in bodies.chunks(5000) {
        w.append_batch(chunk).unwrap();
    }
    drop(w);
    let scan = read_journal(&store.journal_path(&id), id.as_str()).unwrap();
    let totals = fold(&scan.records).unwrap().totals;
    let (mut w, _) = JournalWriter::open(store, &id).unwrap();
    w.append_record(RecordBody::Terminal(Terminal {
        reason: TerminalReason::Completed,
        totals,
        detail: None,
    }))
    .unwrap();
    id
}

fn first_frame_ms(b: &Bench, id: &RunId, last: &str) -> f64 {
    let t = Instant::now();
    let mut p = b.spawn(&["--resume", id.as_str()], &[]);
    p.wait_until(|s| s.contains(last) && s.contains(" idle ·"), WAIT)
        .unwrap_or_else(|e| panic!("{e}"));
    let ms = t.elapsed().as_secs_f64() * 1e3;
    p.send(b"\x04").unwrap();
    let _ = p.wait_exit(WAIT);
    ms
}

/// Sends `n` keys, each timed until the composer shows it.
fn keystrokes(p: &mut Pty, n: usize, gap: Duration) -> Vec<f64> {
    let mut typed = String::new();
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let c = (b'a' + (i % 26) as u8) as char;
        typed.push(c);
        // The composer wraps at the screen's width: keep it on one line.
        if typed.len() > 60 {
            p.send(b"\x15").unwrap();
            p.wait_until(|s| s.lines().any(|l| l.trim_end() == "›"), WAIT)
                .unwrap();
            typed.clear();
            typed.push(c);
        }
        let want = format!("› {typed}");
        let t = Instant::now();
        p.send(c.to_string().as_bytes()).unwrap();
        p.wait_until(|s| s.lines().any(|l| l.trim_end() == want), WAIT)
            .unwrap_or_else(|e| panic!("{e}"));
        out.push(t.elapsed().as_secs_f64() * 1e3);
        std::thread::sleep(gap);
    }
    out
}

/// With CAIRN_BENCH_KEEP, the store outlives the run (to profile it).
fn dir_keep(b: &Bench) -> PathBuf {
    let to = b.store.with_file_name("kept-store");
    let _ = std::fs::remove_dir_all(&to);
    let status = std::process::Command::new("cp")
        .arg("-a")
        .arg(&b.store)
        .arg(&to)
        .status();
    assert!(status.is_ok_and(|s| s.success()), "copying the store");
    let keep = std::env::temp_dir().join("cairn-tui-bench-store");
    let _ = std::fs::remove_dir_all(&keep);
    let _ = std::fs::rename(&to, &keep);
    keep
}

fn main() {
    let dir = tempfile::tempdir_in(cairn_testkit::bench_dir()).unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let words: Vec<String> = (0..4000).map(|i| format!("word{i}")).collect();
    let script = dir.path().join("script.json");
    std::fs::write(
        &script,
        serde_json::to_vec(&serde_json::json!({"turns": [
            {"text": "Hello."},
            {"text": words.join(" ")},
        ]}))
        .unwrap(),
    )
    .unwrap();
    let b = Bench {
        store: dir.path().join("store"),
        ws: std::fs::canonicalize(&ws).unwrap(),
        bin: bin(),
        script,
        _dir: dir,
    };
    let meta = real_meta(&b);
    let store = Store::open(&b.store).unwrap();

    let big = session(&store, &meta, 100_000, "THE-LAST-ANSWER-OF-THE-BIG-ONE");
    let small = session(&store, &meta, 50, "THE-LAST-ANSWER-OF-THE-SMALL-ONE");
    let size = std::fs::metadata(store.journal_path(&big)).unwrap().len() as f64 / 1e6;
    if std::env::var_os("CAIRN_BENCH_KEEP").is_some() {
        let kept = dir_keep(&b);
        println!("kept the store in {} (session {big})", kept.display());
    }
    let big_ms = median(
        (0..5)
            .map(|_| first_frame_ms(&b, &big, "THE-LAST-ANSWER-OF-THE-BIG-ONE"))
            .collect(),
    );
    let small_ms = median(
        (0..5)
            .map(|_| first_frame_ms(&b, &small, "THE-LAST-ANSWER-OF-THE-SMALL-ONE"))
            .collect(),
    );
    println!("time to first full frame, `cairn --resume ID` in a 100x30 pty (median of 5):");
    println!("  100,000-record session ({size:.1} MB)   {big_ms:>7.0} ms   target <= 500 ms");
    println!(
        "  50-record session (peer)            {small_ms:>7.0} ms   ratio {:.1}x",
        big_ms / small_ms
    );

    // Keystrokes while idle, then while 4,000 words stream at 200/s.
    let model = format!("script:{}", b.script.display());
    let mut p = b.spawn(&["--model", &model], &[("CAIRN_SCRIPT_DELAY_MS", "5")]);
    p.wait_until(|s| s.contains("new ·"), WAIT).unwrap();
    p.send(b"start\r").unwrap();
    p.wait_until(|s| s.contains("Hello.") && s.contains(" idle ·"), WAIT)
        .unwrap();
    let idle = keystrokes(&mut p, 100, Duration::from_millis(10));
    p.send(b"\x15stream please\r").unwrap();
    p.wait_until(|s| s.contains("word20 "), WAIT).unwrap();
    let streaming = keystrokes(&mut p, 300, Duration::from_millis(20));
    let still = p.screen().contains(" working ·");
    let (i50, i99) = (percentile(idle.clone(), 0.5), percentile(idle, 0.99));
    let (s50, s99) = (
        percentile(streaming.clone(), 0.5),
        percentile(streaming, 0.99),
    );
    println!("keystroke to frame (key sent until the pty's screen shows it):");
    println!("  idle (peer)                  p50 {i50:>6.2} ms   p99 {i99:>6.2} ms");
    println!(
        "  streaming at 200 tokens/s    p50 {s50:>6.2} ms   p99 {s99:>6.2} ms   target p99 <= 16 ms   p99 ratio {:.2}x",
        s99 / i99
    );
    if !still {
        println!("  (warning: the stream had ended before the last keystroke)");
    }
    p.send(b"\x03").unwrap();
    p.send(b"\x03").unwrap();
    let _ = p.wait_exit(WAIT);
}
