//! agent.py, the small agent loop on the openai SDK, against the mock
//! upstream: it carries out write_file calls in its working directory, and a
//! run killed mid-way and started again sends the same requests.
//!
//! These tests are `#[ignore]`d: they need the pinned SDKs
//! (`crates/cairn-testkit/python/requirements.txt`), which `.ci/run`
//! installs and names in `CAIRN_TEST_PYTHON`; `cargo test -- --ignored`
//! runs them (building `target/cairn-test-venv` from PyPI when
//! `CAIRN_TEST_PYTHON` is unset).

mod common;

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::sync::mpsc;
use std::time::Duration;

use cairn_testkit::python::{self, ScriptCommand};
use cairn_testkit::upstream::{Reply, Script, Upstream};
use serde_json::{json, Value};

fn agent(upstream: &Upstream, dir: &Path) -> ScriptCommand {
    python::interpreter()
        .unwrap_or_else(|e| panic!("{e}"))
        .script("agent.py")
        .env("OPENAI_BASE_URL", upstream.openai_base_url())
        .current_dir(dir)
}

/// Three turns: two files, then the answer.
fn two_files() -> Script {
    Script::by_turn(vec![
        Reply::tool_call(
            "write_file",
            json!({"path": "hello.txt", "content": "hello\n"}),
        ),
        Reply::tool_call(
            "write_file",
            json!({"path": "notes/todo.txt", "content": "- test\n"}),
        ),
        Reply::text("Both files are written."),
    ])
}

fn lines(stdout: &str) -> Vec<Value> {
    stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect()
}

fn read(dir: &Path, path: &str) -> String {
    std::fs::read_to_string(dir.join(path)).unwrap_or_else(|e| panic!("{path}: {e}"))
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn the_agent_writes_what_the_model_asks_and_stops_at_its_answer() {
    for stream in [false, true] {
        let upstream = Upstream::start(two_files());
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let mut cmd = agent(&upstream, dir.path());
        if stream {
            cmd = cmd.arg("--stream");
        }
        let out = cmd.run().unwrap_or_else(|e| panic!("{e}"));
        assert!(
            out.success(),
            "stream={stream}: {}\n{}",
            out.stdout,
            out.stderr
        );
        assert_eq!(
            lines(&out.stdout),
            [
                json!({"event": "turn", "turn": 0, "wrote": ["hello.txt"]}),
                json!({"event": "turn", "turn": 1, "wrote": ["notes/todo.txt"]}),
                json!({"event": "done", "turn": 2, "text": "Both files are written."}),
            ]
        );
        assert_eq!(read(dir.path(), "hello.txt"), "hello\n");
        assert_eq!(read(dir.path(), "notes/todo.txt"), "- test\n");
        let requests = upstream.requests();
        assert_eq!(requests.len(), 3);
        // The last request carries the whole conversation: both calls and
        // both results.
        let last = requests[2].json().unwrap_or_default();
        let roles: Vec<_> = last["messages"]
            .as_array()
            .map(|m| m.iter().map(|m| m["role"].clone()).collect())
            .unwrap_or_default();
        assert_eq!(
            roles,
            ["system", "user", "assistant", "tool", "assistant", "tool"].map(Value::from)
        );
        assert_eq!(last["messages"][3]["content"], "wrote 6 bytes to hello.txt");
        assert_eq!(requests[2].is_stream(), stream);
    }
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn a_run_killed_mid_way_and_started_again_sends_the_same_requests() {
    let upstream = Upstream::start(two_files());
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    // The first run pauses after each turn's tools: it is killed in the pause
    // after turn 0.
    let mut child = agent(&upstream, dir.path())
        .args(["--pause-after-tools", "60"])
        .command()
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap_or_else(|e| panic!("{e}"));
    let stdout = child
        .stdout
        .take()
        .unwrap_or_else(|| panic!("piped stdout"));
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let first = rx
        .recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("no turn from the first run: {e}"));
    assert_eq!(
        lines(&first),
        [json!({"event": "turn", "turn": 0, "wrote": ["hello.txt"]})]
    );
    child.kill().unwrap_or_else(|e| panic!("{e}"));
    child.wait().unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(upstream.count(), 1);
    assert_eq!(read(dir.path(), "hello.txt"), "hello\n");

    let out = agent(&upstream, dir.path())
        .run()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    assert_eq!(lines(&out.stdout).len(), 3);
    let requests = upstream.requests();
    assert_eq!(requests.len(), 4);
    // The re-run's first request is the killed run's, byte for byte.
    assert_eq!(requests[1].body, requests[0].body);
    assert_eq!(read(dir.path(), "notes/todo.txt"), "- test\n");
    // No temporary file is left behind.
    let names: Vec<_> = std::fs::read_dir(dir.path())
        .unwrap_or_else(|e| panic!("{e}"))
        .map(|e| e.map(|e| e.file_name()).unwrap_or_default())
        .collect();
    assert_eq!(names.len(), 2, "{names:?}");
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn the_agent_refuses_paths_outside_its_directory() {
    let parent = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let absolute = parent.path().join("absolute.txt");
    let upstream = Upstream::start(Script::by_turn(vec![
        Reply::tool_call(
            "write_file",
            json!({"path": "../escaped.txt", "content": "no"}),
        )
        .with_tool_call("write_file", json!({"path": absolute, "content": "no"})),
        Reply::text("ok"),
    ]));
    let dir = parent.path().join("work");
    std::fs::create_dir(&dir).unwrap_or_else(|e| panic!("{e}"));
    let out = agent(&upstream, &dir)
        .run()
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(out.success(), "{}\n{}", out.stdout, out.stderr);
    assert_eq!(
        lines(&out.stdout)[0],
        json!({"event": "turn", "turn": 0, "wrote": []})
    );
    assert!(!parent.path().join("escaped.txt").exists());
    assert!(!absolute.exists());
    let last = upstream.requests()[1].json().unwrap_or_default();
    let answer = last["messages"][3]["content"].as_str().unwrap_or("");
    assert!(answer.starts_with("bad arguments:"), "{answer}");
}
