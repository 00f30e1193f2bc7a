//! `cairn mcp` as the MCP Inspector's CLI mode sees it
//! (`@modelcontextprotocol/inspector` from npm, pinned in `.ci/run`): it
//! starts `cairn mcp` itself, lists the tools with their schemas and
//! annotations, and calls one.
//!
//! `#[ignore]`d: run with `--ignored` and CAIRN_MCP_INSPECTOR naming its
//! `mcp-inspector` (`.ci/run` installs it in `target/ci-agents`); it fails
//! when that is missing.

mod common;

use common::*;
use serde_json::{json, Value};

fn inspector() -> String {
    let p = std::env::var("CAIRN_MCP_INSPECTOR").unwrap_or_else(|_| {
        panic!("set CAIRN_MCP_INSPECTOR to the MCP Inspector's mcp-inspector (.ci/run installs it)")
    });
    assert!(
        std::path::Path::new(&p).is_file(),
        "CAIRN_MCP_INSPECTOR={p} is not a file"
    );
    p
}

/// `mcp-inspector --cli -e CAIRN_STORE=… cairn mcp ARGS…`, its JSON.
fn inspect(s: &Scratch, args: &[&str]) -> Value {
    let cairn = assert_cmd::cargo::cargo_bin("cairn");
    let out = std::process::Command::new(inspector())
        .arg("--cli")
        .arg("-e")
        .arg(format!("CAIRN_STORE={}", s.store.display()))
        .arg(&cairn)
        .arg("mcp")
        .args(args)
        .current_dir(&s.ws)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "mcp-inspector {args:?}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    json(&out.stdout)
}

#[test]
#[ignore = "needs the MCP Inspector: .ci/run installs it (CAIRN_MCP_INSPECTOR)"]
fn the_inspector_lists_the_tools_with_their_schemas_and_calls_one() {
    let s = Scratch::new();
    let out = s.run(&["exec", "--json", "--", "sh", "-c", "echo made > a.txt"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = json(&out.stdout)["id"].as_str().unwrap().to_owned();

    let listed = inspect(&s, &["--method", "tools/list"]);
    let tools = listed["tools"].as_array().unwrap();
    assert_eq!(tools.len(), 12, "{listed}");
    let tool = |name: &str| {
        tools
            .iter()
            .find(|t| t["name"] == name)
            .unwrap_or_else(|| panic!("no tool {name}: {listed}"))
            .clone()
    };
    let rewind = tool("rewind");
    assert_eq!(rewind["annotations"]["destructiveHint"], true, "{rewind}");
    assert_eq!(rewind["inputSchema"]["required"], json!(["id"]), "{rewind}");
    for p in ["to", "snapshot", "scope", "fork"] {
        assert!(
            rewind["inputSchema"]["properties"][p]["description"].is_string(),
            "{p}: {rewind}"
        );
    }
    assert_eq!(tool("list_sessions")["annotations"]["readOnlyHint"], true);

    let called = inspect(
        &s,
        &[
            "--method",
            "tools/call",
            "--tool-name",
            "show_session",
            "--tool-arg",
            &format!("id={id}"),
        ],
    );
    assert_eq!(called["isError"], false, "{called}");
    let shown: Value =
        serde_json::from_str(called["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(shown["id"], id.as_str(), "{shown}");
    assert_eq!(shown["status"], "completed", "{shown}");
}
