//! `cairn run --mcp` with the reference filesystem server from npm
//! (`@modelcontextprotocol/server-filesystem`, pinned in `.ci/run`; the
//! TypeScript SDK's server): its tools are offered with the hints it
//! declares, `--approve writes` asks before its writing tools, and what it
//! wrote in the workspace is versioned like any change of the run, so a
//! rewind undoes it.
//!
//! `#[ignore]`d: run with `--ignored` and CAIRN_MCP_FILESYSTEM naming its
//! `mcp-server-filesystem` (`.ci/run` installs it in `target/ci-agents`); it
//! fails when that is missing.

mod common;

use std::io::Write;

use common::*;
use serde_json::json;

#[test]
#[ignore = "needs the reference MCP filesystem server from npm: .ci/run installs it (CAIRN_MCP_FILESYSTEM)"]
fn the_reference_filesystem_server_writes_under_approval_and_a_rewind_undoes_it() {
    let server = std::env::var("CAIRN_MCP_FILESYSTEM").unwrap_or_else(|_| {
        panic!("set CAIRN_MCP_FILESYSTEM to @modelcontextprotocol/server-filesystem's mcp-server-filesystem")
    });
    let s = Scratch::new();
    std::fs::write(s.ws.join("keep.txt"), "kept\n").unwrap();
    let cfg = s.dir.path().join("mcp.json");
    std::fs::write(
        &cfg,
        serde_json::to_vec(&json!({"mcpServers": {"fs": {"command": server, "args": [s.ws]}}}))
            .unwrap(),
    )
    .unwrap();
    let new = s.ws.join("made-by-mcp.txt");
    let script = s.script(
        "script.json",
        json!([
            {"text": "writing", "tool_calls": [call("w", "mcp__fs__write_file", json!({"path": new, "content": "from the server\n"}))]},
            {"text": "reading", "tool_calls": [call("r", "mcp__fs__read_text_file", json!({"path": new}))]},
            {"text": "moving", "tool_calls": [call("m", "mcp__fs__move_file", json!({"source": s.ws.join("keep.txt"), "destination": s.ws.join("moved.txt")}))]},
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
            "--model",
            &format!("script:{}", script.display()),
            "--json",
            "task",
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Yes to the write, no to the move; the read asks nothing.
    child.stdin.take().unwrap().write_all(b"y\nn\n").unwrap();
    let out = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert_eq!(stderr.matches("[y/N]").count(), 2, "{stderr}");
    let id = json(&out.stdout)["id"].as_str().unwrap().to_owned();
    let recs = s.records(&id);
    let start = |call: &str| {
        recs.iter()
            .find(|r| r["kind"] == "tool_start" && r["call"] == call)
            .cloned()
    };
    let w = start("w").expect("the approved write ran");
    assert_eq!(
        w["mcp"],
        json!({"server": "fs", "tool": "write_file", "hints": {
            "read_only": false, "destructive": true, "idempotent": true, "open_world": false
        }})
    );
    assert_eq!(start("r").unwrap()["mcp"]["hints"]["read_only"], true);
    assert_eq!(results_for(&recs, "w")[0]["outcome"], "ok");
    let r = results_for(&recs, "r")[0];
    assert!(
        r["output"].as_str().unwrap().contains("from the server"),
        "{r}"
    );
    assert!(start("m").is_none(), "the declined move ran");
    assert_eq!(results_for(&recs, "m")[0]["outcome"], "refused");
    assert_eq!(s.read("made-by-mcp.txt"), "from the server\n");
    assert!(s.ws.join("keep.txt").exists());
    // The server's write is the run's change: a rewind to before the first
    // turn takes it back.
    let out = s.run(&["rewind", &id, "--to", "turn:1", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!new.exists(), "the rewind left the server's file");
    assert_eq!(s.read("keep.txt"), "kept\n");
}
