//! The web viewer in a real browser: headless Chromium driven by
//! Playwright (`tests/browser/viewer.mjs`) against a real `cairn serve`.
//!
//! Needs `/usr/bin/chromium`, `node` and `playwright-core` (the directory
//! holding its `node_modules` in `CAIRN_PLAYWRIGHT_DIR`); `.ci/run` installs
//! them. The test is `#[ignore]`d (`--ignored` runs it) and fails when any
//! of them is missing.

mod common;

use std::path::PathBuf;
use std::process::Command;

use common::{call, Scratch};
use serde_json::json;

/// Panics, naming what to install, unless Chromium, node and
/// playwright-core (`CAIRN_PLAYWRIGHT_DIR`) are here.
fn require_browser() -> PathBuf {
    let pw = std::env::var_os("CAIRN_PLAYWRIGHT_DIR").map(PathBuf::from);
    let ready = std::path::Path::new("/usr/bin/chromium").exists()
        && pw.as_ref().is_some_and(|d| {
            d.join("node_modules/playwright-core").exists()
                && d.join("node_modules/axe-core").exists()
        })
        && Command::new("node").arg("--version").output().is_ok();
    assert!(
        ready,
        "this test needs /usr/bin/chromium (apt-get install chromium), node, and \
         playwright-core and axe-core installed in the directory CAIRN_PLAYWRIGHT_DIR \
         names (npm install playwright-core axe-core); .ci/run installs them"
    );
    pw.unwrap_or_default()
}

#[test]
#[ignore = "needs Chromium and playwright-core: .ci/run installs them"]
fn the_viewer_lists_shows_streams_forks_and_diffs() {
    let pw = require_browser();
    let s = Scratch::new();
    // Markdown, a tool call, and what a hostile model might write.
    let md = s.script(
        "md.json",
        json!([
            {"text": "## Plan\n\nI will **write** `notes.md`:\n\n```rust\nfn main() {}\n```\n\n<img src=x onerror=\"window.pwned=1\"><script>window.pwned=2</script> [click](javascript:window.pwned=3)",
             "tool_calls": [call("n", "write_file", json!({"path": "notes.md", "content": "notes\n"}))]},
            {"text": "Done.\n\n| file | lines |\n|---|---|\n| notes.md | 1 |"},
            {"text": "Resumed after your edit."}
        ]),
    );
    let out = s.run(&[
        "run",
        "--name",
        "markdown",
        "--json",
        "--model",
        &format!("script:{}", md.display()),
        "write notes",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let md_id = common::json(&out.stdout)["id"]
        .as_str()
        .unwrap()
        .to_string();
    // The operator edits a file while the session is paused, then resumes it.
    std::fs::write(s.ws.join("operator.txt"), "edited by hand\n").unwrap();
    let out = s.run(&["resume", &md_id, "and now?"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let script = s.script(
        "hello.json",
        json!([
            {"text": "Writing hello.txt.", "tool_calls": [call("w", "write_file", json!({"path": "hello.txt", "content": "hello, world\n"}))]},
            {"text": "Wrote it."}
        ]),
    );
    let out = s.run(&[
        "run",
        "--model",
        &format!("script:{}", script.display()),
        "write hello.txt",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let slow = s.script(
        "slow.json",
        json!([
            {"text": "step one", "tool_calls": [common::shell("a", "sleep 0.7")]},
            {"text": "step two of the count, streamed to the page word by word as the model writes it", "tool_calls": [common::shell("b", "sleep 0.7")]},
            {"text": "step three"}
        ]),
    );

    // A run that asks before each write: one answered yes, one declined.
    let asks = s.script(
        "asks.json",
        json!([
            {"text": "first write", "tool_calls": [call("y", "write_file", json!({"path": "approved.txt", "content": "yes\n"}))]},
            {"text": "second write", "tool_calls": [call("n", "write_file", json!({"path": "declined.txt", "content": "no\n"}))]},
            {"text": "finished"}
        ]),
    );
    // Runs this server starts stream their words 40 ms apart.
    let served = common::Served::start(&s, &[("CAIRN_SCRIPT_DELAY_MS", "40")]);
    let base = served.base();

    let target = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target");
    std::fs::create_dir_all(&target).unwrap();
    let shot = target.join("viewer.png");
    let script_path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/browser/viewer.mjs");
    let out = Command::new("node")
        .arg(&script_path)
        .arg(&base)
        .arg(&s.ws)
        .arg(&slow)
        .arg(&shot)
        .arg(&md_id)
        .arg(&asks)
        .env("CAIRN_PLAYWRIGHT_DIR", &pw)
        .output()
        .unwrap();
    drop(served);
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(shot.exists(), "the screenshot was saved");
    // The rewind from the page was undone; the operator's edit was never
    // touched.
    assert_eq!(
        std::fs::read_to_string(s.ws.join("notes.md")).unwrap(),
        "notes\n"
    );
    assert_eq!(
        std::fs::read_to_string(s.ws.join("operator.txt")).unwrap(),
        "edited by hand\n"
    );
    // Approved from the page: written; declined: never run.
    assert_eq!(
        std::fs::read_to_string(s.ws.join("approved.txt")).unwrap(),
        "yes\n"
    );
    assert!(!s.ws.join("declined.txt").exists());
}

/// Writes a session of `n` records (meta, a task, then model turns each
/// with one tool call), its last assistant text `last`; its id.
fn long_session(store: &cairn_store::Store, ws: &str, name: &str, n: usize, last: &str) -> String {
    use cairn_journal::{
        Assistant, JournalWriter, Meta, Outcome, RecordBody, ToolCall, ToolResult, ToolStart, User,
    };
    let id = cairn_store::RunId::new();
    let meta = Meta {
        run: id.to_string(),
        created: cairn_journal::now_rfc3339(),
        workspace: ws.into(),
        name: Some(name.into()),
        fingerprint: None,
        fork: None,
        routing: None,
        system_file: None,
    };
    let mut w = JournalWriter::create(store, &id, meta).unwrap();
    let mut bodies = vec![RecordBody::User(User {
        text: "read every file".into(),
        origin: None,
    })];
    let mut t = 0;
    while bodies.len() + 2 < n {
        let call = format!("call_{t}");
        bodies.push(RecordBody::Assistant(Assistant {
            text: format!("Step **{t}**: reading the next file."),
            tool_calls: vec![ToolCall {
                id: call.clone(),
                name: "read_file".into(),
                arguments: json!({"path": "src/lib.rs"}),
                raw_arguments: None,
            }],
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
            output: "pub fn add(a: i32, b: i32) -> i32 { a + b }\n".into(),
        }));
        t += 1;
    }
    bodies.truncate(n - 2);
    bodies.push(RecordBody::Assistant(Assistant {
        text: last.into(),
        ..Assistant::default()
    }));
    for chunk in bodies.chunks(4096) {
        w.append_batch(chunk).unwrap();
    }
    id.to_string()
}

#[test]
#[ignore = "needs Chromium and playwright-core: .ci/run installs them"]
fn a_long_session_opens_at_its_end_and_thousands_of_sessions_list_a_page_at_a_time() {
    let pw = require_browser();
    let s = Scratch::new();
    let store = cairn_store::Store::open(&s.store).unwrap();
    let ws = s.ws.to_string_lossy().into_owned();
    let sessions: usize = std::env::var("CAIRN_VIEWER_SESSIONS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(10_000);
    let started = std::time::Instant::now();
    for i in 0..sessions {
        long_session(&store, &ws, &format!("small session {i}"), 3, "done");
    }
    let big = long_session(&store, &ws, "the long one", 100_000, "THE-LAST-ANSWER");
    // Projections, as a store that has been used has them.
    let out = s.run(&["reindex"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    eprintln!(
        "{sessions} sessions and one of 100,000 records written in {:?}",
        started.elapsed()
    );

    let served = common::Served::start(&s, &[]);
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/browser/scale.mjs");
    let out = Command::new("node")
        .arg(&script)
        .arg(served.base())
        .arg(&big)
        .arg((sessions + 1).to_string())
        .env("CAIRN_PLAYWRIGHT_DIR", &pw)
        .output()
        .unwrap();
    drop(served);
    println!("{}", String::from_utf8_lossy(&out.stdout));
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
