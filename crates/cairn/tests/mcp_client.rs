//! `cairn run --mcp CONFIG` black-box (DESIGN §17): MCP servers' tools in
//! cairn's own agent loop. The server here is a real one built on the
//! official Rust SDK — `cairn mcp`, serving a second store — so these run
//! in the README's test command; `mcp_client_python.rs` uses a server built
//! with the official Python SDK and kills cairn with calls in flight.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use serde_json::{json, Value};

/// Another scratch with one finished session, whose store `cairn mcp`
/// serves (kept alive: its workspace is the session's).
fn served() -> (Scratch, String) {
    let other = Scratch::new();
    let id = other.scripted(
        json!([
            {"text": "writing", "tool_calls": [call("w", "write_file", json!({"path": "a.txt", "content": "v1\n"}))]},
            {"text": "done"}
        ]),
        "write a.txt",
    );
    (other, id)
}

/// An `mcpServers` file starting `cairn mcp` on `store`, its command wrapped
/// in `sh -c` so it can write on standard error first.
fn config(s: &Scratch, store: &Path) -> PathBuf {
    let cairn = assert_cmd::cargo::cargo_bin("cairn");
    let path = s.dir.path().join("mcp.json");
    let script = format!(
        "printf 'from the server \\033[31mred\\n' >&2; exec '{}' mcp",
        cairn.display()
    );
    std::fs::write(
        &path,
        serde_json::to_vec(&json!({"mcpServers": {"cairn": {
            "command": "sh",
            "args": ["-c", script],
            // cairn's own variables are scrubbed from a server's
            // environment: the store is named here.
            "env": {"CAIRN_STORE": store}
        }}}))
        .unwrap(),
    )
    .unwrap();
    path
}

#[test]
fn a_servers_tools_are_offered_called_and_journaled_with_their_hints() {
    let s = Scratch::new();
    let (other, served) = served();
    let store = other.store.clone();
    let cfg = config(&s, &store);
    let script = s.script(
        "script.json",
        json!([
            {"text": "listing", "tool_calls": [call("l", "mcp__cairn__list_sessions", json!({}))]},
            {"text": "showing", "tool_calls": [call("t", "mcp__cairn__show_session", json!({"id": served}))]},
            {"text": "bad", "tool_calls": [call("b", "mcp__cairn__show_session", json!({"id": "nope-nope"}))]},
            {"text": "done"}
        ]),
    );
    let out = s.run(&[
        "run",
        "--model",
        &format!("script:{}", script.display()),
        "--mcp",
        cfg.to_str().unwrap(),
        "task",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // Its standard error was kept out of the terminal.
    assert!(!stderr.contains("from the server"), "{stderr}");
    let id = s.only_session();
    let recs = s.records(&id);
    let start = recs
        .iter()
        .find(|r| r["kind"] == "tool_start" && r["call"] == "l")
        .unwrap();
    assert_eq!(start["name"], "mcp__cairn__list_sessions");
    assert_eq!(start["mcp"]["server"], "cairn");
    assert_eq!(start["mcp"]["tool"], "list_sessions");
    assert_eq!(start["mcp"]["hints"]["read_only"], true);
    let listed = results_for(&recs, "l");
    assert_eq!(listed[0]["outcome"], "ok");
    assert!(
        listed[0]["output"].as_str().unwrap().contains(&served),
        "{}",
        listed[0]["output"]
    );
    let shown = results_for(&recs, "t");
    assert_eq!(shown[0]["outcome"], "ok", "{}", shown[0]);
    // A tool error is the call's error, and the run goes on.
    let bad = results_for(&recs, "b");
    assert_eq!(bad[0]["outcome"], "error", "{}", bad[0]);
    // The fingerprint names the server, and only it.
    let meta = &recs[0];
    let mcp = meta["fingerprint"]["mcp"].as_object().unwrap();
    assert_eq!(mcp.keys().collect::<Vec<_>>(), ["cairn"]);
}

#[test]
fn destructive_tools_wait_for_approval_and_a_no_runs_nothing() {
    let s = Scratch::new();
    let (other, served) = served();
    let store = other.store.clone();
    let cfg = config(&s, &store);
    let script = s.script(
        "script.json",
        json!([
            {"text": "rewinding", "tool_calls": [
                call("r", "mcp__cairn__rewind", json!({"id": served, "to": "turn:1"})),
                call("p", "mcp__cairn__rewind_points", json!({"id": served}))
            ]},
            {"text": "done"}
        ]),
    );
    let mut child = s
        .cmd()
        .args([
            "run",
            "--approve",
            "writes",
            "--mcp",
            cfg.to_str().unwrap(),
            "--mcp-stderr",
            "--model",
            &format!("script:{}", script.display()),
            "task",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"n\n").unwrap();
    }
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    // Asked about the destructive call only; the read-only one ran.
    assert_eq!(stderr.matches("[y/N]").count(), 1, "{stderr}");
    assert!(stderr.contains("mcp__cairn__rewind"), "{stderr}");
    // Asked for, the server's standard error is shown, made safe.
    assert!(stderr.contains("mcp cairn: from the server"), "{stderr}");
    assert!(!stderr.contains('\u{1b}'), "{stderr}");
    let recs = s.records(&s.only_session());
    let refused = results_for(&recs, "r");
    assert_eq!(refused[0]["outcome"], "refused");
    assert!(!recs
        .iter()
        .any(|r| r["kind"] == "tool_start" && r["call"] == "r"));
    let points = results_for(&recs, "p");
    assert_eq!(points[0]["outcome"], "ok", "{}", points[0]);
    // Nothing was rewound in the served store.
    let after =
        std::fs::read_to_string(store.join("runs").join(&served).join("journal.jsonl")).unwrap();
    assert!(!after.contains("\"rollback\""), "the refused rewind ran");
}

#[test]
fn a_resume_without_the_same_servers_is_refused_naming_the_server() {
    let s = Scratch::new();
    let (other, _) = served();
    let cfg = config(&s, &other.store);
    let script = s.script(
        "script.json",
        json!([
            {"text": "listing", "tool_calls": [call("l", "mcp__cairn__list_sessions", json!({}))]},
            {"text": "done"},
            {"text": "again"}
        ]),
    );
    let model = format!("script:{}", script.display());
    let out = s.run(&[
        "run",
        "--model",
        &model,
        "--mcp",
        cfg.to_str().unwrap(),
        "task",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = s.only_session();
    let out = s.run(&["resume", &id, "more"]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("MCP server `cairn` tools"), "{stderr}");
    let out = s.run(&["resume", &id, "--mcp", cfg.to_str().unwrap(), "more"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_bad_configuration_or_a_server_that_does_not_start_is_a_clear_error() {
    let s = Scratch::new();
    let script = s.script("script.json", json!([{"text": "done"}]));
    let model = format!("script:{}", script.display());
    let cases: Vec<(Value, i32, &str)> = vec![
        (json!({"servers": {}}), 2, "no `mcpServers` object"),
        (
            json!({"mcpServers": {"web": {"type": "sse", "url": "http://127.0.0.1:9/sse"}}}),
            2,
            "legacy SSE transport",
        ),
        (
            json!({"mcpServers": {"web": {"type": "http", "url": "http://127.0.0.1:9/mcp"}}}),
            1,
            "MCP server `web` did not start",
        ),
        (
            json!({"mcpServers": {"gone": {"command": "/nonexistent/server"}}}),
            1,
            "MCP server `gone` did not start: cannot run `/nonexistent/server`",
        ),
        (
            json!({"mcpServers": {"mute": {"command": "sh", "args": ["-c", "echo 'cannot start: reason here' >&2; exit 7"]}}}),
            1,
            "cannot start: reason here",
        ),
    ];
    for (cfg, code, said) in cases {
        let path = s.dir.path().join("bad.json");
        std::fs::write(&path, cfg.to_string()).unwrap();
        let out = s.run(&[
            "run",
            "--model",
            &model,
            "--mcp",
            path.to_str().unwrap(),
            "t",
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{cfg}: {stderr}");
        assert!(stderr.contains(said), "{cfg}: {stderr}");
        // Nothing was started: no session.
        assert!(
            !s.store.join("runs").exists()
                || std::fs::read_dir(s.store.join("runs"))
                    .unwrap()
                    .next()
                    .is_none()
        );
    }
    let out = s.run(&["run", "--model", &model, "--mcp", "/nonexistent.json", "t"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("MCP configuration /nonexistent.json"));
}

#[test]
fn a_streamable_http_server_is_reached_with_its_headers_from_the_environment() {
    let s = Scratch::new();
    let (other, served) = served();
    let token = "tok-3b9f0c1e-not-in-any-file";
    let server = Served::start_command(
        &other,
        "mcp",
        &["--listen", "127.0.0.1:0"],
        &[("CAIRN_MCP_TOKEN", token)],
    );
    let cfg = s.dir.path().join("http.json");
    std::fs::write(
        &cfg,
        serde_json::to_vec(&json!({"mcpServers": {"remote": {
            "type": "http",
            "url": format!("{}/mcp", server.base()),
            "headers": {"Authorization": "Bearer ${CAIRN_TEST_MCP_TOKEN}"}
        }}}))
        .unwrap(),
    )
    .unwrap();
    let script = s.script(
        "script.json",
        json!([
            {"text": "listing", "tool_calls": [call("l", "mcp__remote__list_sessions", json!({}))]},
            {"text": "done"}
        ]),
    );
    let model = format!("script:{}", script.display());
    let out = s
        .cmd()
        .env("CAIRN_TEST_MCP_TOKEN", token)
        .args([
            "run",
            "--model",
            &model,
            "--mcp",
            cfg.to_str().unwrap(),
            "task",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = s.only_session();
    let recs = s.records(&id);
    let listed = results_for(&recs, "l");
    assert_eq!(listed[0]["outcome"], "ok", "{}", listed[0]);
    assert!(listed[0]["output"].as_str().unwrap().contains(&served));
    // The token is sent, never stored.
    let journal =
        std::fs::read_to_string(s.store.join("runs").join(&id).join("journal.jsonl")).unwrap();
    assert!(!journal.contains(token));
    // A wrong token: the server refuses, the run does not start, and the
    // error does not show the header.
    let out = s
        .cmd()
        .env("CAIRN_TEST_MCP_TOKEN", "wrong-token-value")
        .args([
            "run",
            "--model",
            &model,
            "--mcp",
            cfg.to_str().unwrap(),
            "task",
        ])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("MCP server `remote` did not start"),
        "{stderr}"
    );
    assert!(!stderr.contains("wrong-token-value"), "{stderr}");
    // Without the variable, the file names what is missing.
    let out = s
        .cmd()
        .env_remove("CAIRN_TEST_MCP_TOKEN")
        .args([
            "run",
            "--model",
            &model,
            "--mcp",
            cfg.to_str().unwrap(),
            "task",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("CAIRN_TEST_MCP_TOKEN is not set"));
}
