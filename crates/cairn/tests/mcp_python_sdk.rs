//! `cairn mcp` driven by the official MCP Python SDK (`mcp` from PyPI,
//! pinned in `tests/mcp/requirements.txt`): a real client lists the tools
//! with their annotations, reads a session, rewinds a turn's files and
//! undoes it by the bank, and reads a tool error (`tests/mcp/client.py`).
//!
//! `#[ignore]`d: run with `--ignored` and CAIRN_MCP_PYTHON naming a python
//! with the SDK (`.ci/run` installs it in `target/ci-mcp-venv`); it fails
//! when that is missing.

mod common;

use std::path::Path;

use common::*;
use serde_json::json;

#[test]
#[ignore = "needs the MCP Python SDK: .ci/run installs it (CAIRN_MCP_PYTHON)"]
fn the_python_sdk_lists_reads_rewinds_and_undoes() {
    let python = std::env::var("CAIRN_MCP_PYTHON").unwrap_or_else(|_| {
        panic!("set CAIRN_MCP_PYTHON to a python with the MCP SDK (tests/mcp/requirements.txt)")
    });
    let s = Scratch::new();
    let id = s.scripted(
        json!([
            {"text": "writing", "tool_calls": [call("w", "write_file", json!({"path": "a.txt", "content": "v1\n"}))]},
            {"text": "done"}
        ]),
        "write a.txt",
    );
    let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/client.py");
    let cairn = assert_cmd::cargo::cargo_bin("cairn");
    let out = std::process::Command::new(python)
        .arg(&client)
        .arg(&cairn)
        .arg(&id)
        .env("CAIRN_STORE", &s.store)
        .env("XDG_CONFIG_HOME", s.dir.path().join("config"))
        .current_dir(&s.ws)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "client.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = json(&out.stdout);
    assert_eq!(seen["server"], "cairn", "{seen}");
    let tools = &seen["tools"];
    assert_eq!(tools.as_object().unwrap().len(), 12, "{tools}");
    for read_only in ["list_sessions", "transcript", "diff", "list_checkpoints"] {
        assert_eq!(tools[read_only]["read_only"], true, "{read_only}: {tools}");
    }
    for destructive in ["rewind", "restore_checkpoint"] {
        assert_eq!(tools[destructive]["destructive"], true, "{destructive}");
        assert_eq!(tools[destructive]["read_only"], false, "{destructive}");
    }
    assert_eq!(tools["fork"]["destructive"], false, "{tools}");
    assert_eq!(tools["diff"]["required"], json!(["id", "from", "to"]));
    assert!(tools
        .as_object()
        .unwrap()
        .values()
        .all(|t| t["open_world"] == false));
    assert_eq!(seen["listed"][0]["id"], id.as_str(), "{seen}");
    assert_eq!(seen["points"][0]["files"], json!(["a.txt"]), "{seen}");
    assert_eq!(seen["rewound"]["deleted"], json!(["a.txt"]), "{seen}");
    assert_eq!(seen["after_rewind"], false, "{seen}");
    assert_eq!(seen["undone_error"], false, "{seen}");
    assert_eq!(seen["after_undo"], "v1\n", "{seen}");
    assert_eq!(s.read("a.txt"), "v1\n");
    assert_eq!(seen["missing"]["is_error"], true, "{seen}");
    assert!(
        seen["missing"]["text"]
            .as_str()
            .unwrap()
            .contains("list_sessions gives"),
        "{seen}"
    );
}

/// The SDK's streamable HTTP client against `cairn mcp --listen` with a
/// token: it connects with the token, lists the tools and the sessions.
#[test]
#[ignore = "needs the MCP Python SDK: .ci/run installs it (CAIRN_MCP_PYTHON)"]
fn the_python_sdk_speaks_streamable_http_with_the_token() {
    let python = std::env::var("CAIRN_MCP_PYTHON").unwrap_or_else(|_| {
        panic!("set CAIRN_MCP_PYTHON to a python with the MCP SDK (tests/mcp/requirements.txt)")
    });
    let s = Scratch::new();
    let out = s.run(&["exec", "--json", "--", "sh", "-c", "echo made > a.txt"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = json(&out.stdout)["id"].as_str().unwrap().to_owned();
    let token = "the-token-of-this-test";
    let served = Served::start_command(
        &s,
        "mcp",
        &["--listen", "127.0.0.1:0"],
        &[("CAIRN_MCP_TOKEN", token)],
    );
    let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/mcp/http_client.py");
    let url = format!("{}/mcp", served.base());
    let out = std::process::Command::new(&python)
        .arg(&client)
        .arg(&url)
        .arg(token)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "http_client.py: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let seen = json(&out.stdout);
    assert_eq!(seen["server"], "cairn", "{seen}");
    assert_eq!(seen["tools"].as_array().unwrap().len(), 12, "{seen}");
    assert_eq!(seen["listed"][0]["id"], id.as_str(), "{seen}");
    // Without the token the same client is turned away.
    let out = std::process::Command::new(&python)
        .arg(&client)
        .arg(&url)
        .arg("not-the-token")
        .output()
        .unwrap();
    assert!(!out.status.success(), "a wrong token was let in");
    assert!(served.stop().success());
}
