//! `cairn mcp` black-box (DESIGN §17): the protocol spoken over the
//! process's stdin and stdout, line by line, as any MCP client speaks it —
//! tools listed with their schemas and honest annotations, a session
//! listed and read, its files rewound and the rewind undone by its bank, a
//! bad argument answered as a tool error. `mcp_python_sdk.rs` drives the
//! same server with the official Python SDK.

mod common;

use std::io::{BufRead, BufReader, Write};
use std::process::{ChildStdin, ChildStdout, Stdio};

use common::*;
use serde_json::{json, Value};

/// A client on the server's pipes.
struct Client {
    child: std::process::Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
    next: u64,
}

impl Client {
    fn start(s: &Scratch) -> Client {
        let mut child = s
            .cmd()
            .arg("mcp")
            // A token for --listen in the environment changes nothing on stdio.
            .env("CAIRN_MCP_TOKEN", "unused-on-stdio")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let input = child.stdin.take().unwrap();
        let output = BufReader::new(child.stdout.take().unwrap());
        let mut c = Client {
            child,
            input,
            output,
            next: 1,
        };
        let init = c.request(
            "initialize",
            json!({
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "cairn-test", "version": "1"}
            }),
        );
        assert_eq!(init["serverInfo"]["name"], "cairn", "{init}");
        assert!(init["capabilities"]["tools"].is_object(), "{init}");
        c.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        c
    }

    fn send(&mut self, v: &Value) {
        writeln!(self.input, "{v}").unwrap();
        self.input.flush().unwrap();
    }

    /// Sends a request and returns its result (panics on a protocol error).
    fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next;
        self.next += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        loop {
            let mut line = String::new();
            assert!(
                self.output.read_line(&mut line).unwrap() > 0,
                "the server closed stdout"
            );
            let v: Value = serde_json::from_str(&line)
                .unwrap_or_else(|e| panic!("stdout carried a line that is not JSON ({e}): {line}"));
            if v["id"] == json!(id) {
                assert!(v.get("error").is_none(), "{method}: {v}");
                return v["result"].clone();
            }
        }
    }

    /// Calls a tool: (is it an error, its text).
    fn call(&mut self, tool: &str, args: Value) -> (bool, String) {
        let r = self.request("tools/call", json!({"name": tool, "arguments": args}));
        let text = r["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        (r["isError"] == json!(true), text)
    }

    fn ok(&mut self, tool: &str, args: Value) -> Value {
        let (error, text) = self.call(tool, args.clone());
        assert!(!error, "{tool} {args}: {text}");
        serde_json::from_str(&text).unwrap_or_else(|e| panic!("{tool}: {e}: {text}"))
    }

    fn close(mut self) -> std::process::ExitStatus {
        drop(self.input);
        exits_within(&mut self.child, 10, "cairn mcp after its stdin closed")
    }
}

const READ_ONLY: [&str; 7] = [
    "list_sessions",
    "show_session",
    "transcript",
    "list_snapshots",
    "diff",
    "rewind_points",
    "list_checkpoints",
];
const DESTRUCTIVE: [&str; 2] = ["rewind", "restore_checkpoint"];
const WRITING: [&str; 3] = ["rewind_preview", "save_checkpoint", "fork"];

/// A session whose first turn wrote a.txt.
fn session(s: &Scratch) -> String {
    s.scripted(
        json!([
            {"text": "writing", "tool_calls": [call("w", "write_file", json!({"path": "a.txt", "content": "v1\n"}))]},
            {"text": "done"}
        ]),
        "write a.txt",
    )
}

#[test]
fn tools_are_listed_with_honest_annotations() {
    let s = Scratch::new();
    let mut c = Client::start(&s);
    let tools = c.request("tools/list", json!({}));
    let tools = tools["tools"].as_array().unwrap();
    let mut names: Vec<&str> = tools.iter().map(|t| t["name"].as_str().unwrap()).collect();
    names.sort_unstable();
    let mut want: Vec<&str> = READ_ONLY
        .iter()
        .chain(DESTRUCTIVE.iter())
        .chain(WRITING.iter())
        .copied()
        .collect();
    want.sort_unstable();
    assert_eq!(names, want);
    for t in tools {
        let name = t["name"].as_str().unwrap();
        let a = &t["annotations"];
        assert_eq!(a["openWorldHint"], false, "{name}");
        assert!(
            t["description"].as_str().is_some_and(|d| d.len() > 40),
            "{name}"
        );
        assert_eq!(t["inputSchema"]["type"], "object", "{name}");
        if READ_ONLY.contains(&name) {
            assert_eq!(a["readOnlyHint"], true, "{name}: {a}");
        } else {
            assert_eq!(a["readOnlyHint"], false, "{name}: {a}");
            let destructive = DESTRUCTIVE.contains(&name);
            assert_eq!(a["destructiveHint"], destructive, "{name}: {a}");
        }
    }
    assert!(c.close().success());
}

#[test]
fn an_agent_lists_reads_rewinds_and_undoes_over_mcp() {
    let s = Scratch::new();
    let id = session(&s);
    assert_eq!(s.read("a.txt"), "v1\n");
    let mut c = Client::start(&s);

    let listed = c.ok("list_sessions", json!({}));
    assert_eq!(listed[0]["id"], id.as_str(), "{listed}");
    assert_eq!(listed[0]["status"], "completed", "{listed}");
    let page = c.ok("transcript", json!({"id": id, "limit": 3}));
    assert_eq!(page["records"].as_array().unwrap().len(), 3, "{page}");
    assert_eq!(page["records"][0]["kind"], "meta", "{page}");
    assert_eq!(page["next_after"], 3, "{page}");
    let points = c.ok("rewind_points", json!({"id": id}));
    assert_eq!(points[0]["name"], "turn:1", "{points}");
    assert_eq!(points[0]["files"], json!(["a.txt"]), "{points}");

    // The turn's file goes; the bank brings it back.
    let done = c.ok("rewind", json!({"id": id, "to": "turn:1"}));
    assert!(!s.ws.join("a.txt").exists(), "{done}");
    assert_eq!(done["deleted"], json!(["a.txt"]), "{done}");
    assert_eq!(done["target_label"], "pre:turn:1", "{done}");
    let bank = done["bank"]["snapshot"]
        .as_str()
        .unwrap_or_else(|| panic!("{done}"))
        .to_owned();
    let snaps = c.ok("list_snapshots", json!({"id": id}));
    assert!(snaps.to_string().contains(&bank), "{snaps}");
    c.ok("rewind", json!({"id": id, "snapshot": bank}));
    assert_eq!(s.read("a.txt"), "v1\n");

    // The turn's diff, from the snapshots' labels; a preview changes no file.
    let snaps = c.ok("list_snapshots", json!({"id": id}));
    let labelled = |label: &str| {
        snaps
            .as_array()
            .unwrap()
            .iter()
            .find(|x| x["label"] == label)
            .unwrap_or_else(|| panic!("no {label}: {snaps}"))["id"]
            .as_str()
            .unwrap()
            .to_owned()
    };
    let (pre, post) = (labelled("pre:turn:1"), labelled("post:turn:1"));
    let diff = c.ok("diff", json!({"id": id, "from": pre, "to": post}));
    assert_eq!(diff[0]["path"], "a.txt", "{diff}");
    assert!(
        diff[0]["unified"].as_str().unwrap().contains("+v1"),
        "{diff}"
    );
    let preview = c.ok("rewind_preview", json!({"id": id, "to": "turn:1"}));
    assert!(preview.to_string().contains("a.txt"), "{preview}");
    assert_eq!(s.read("a.txt"), "v1\n");

    // A checkpoint saved, the file changed, the checkpoint restored.
    let saved = c.ok("save_checkpoint", json!({"id": id}));
    let cp = saved["id"].as_str().unwrap().to_owned();
    let listed = c.ok("list_checkpoints", json!({"id": id}));
    assert!(listed.to_string().contains(&cp), "{listed}");
    std::fs::write(s.ws.join("a.txt"), "changed\n").unwrap();
    c.ok("restore_checkpoint", json!({"checkpoint": cp}));
    assert_eq!(s.read("a.txt"), "v1\n");

    // Bad input is a tool error the agent reads, and the server goes on.
    let (error, text) = c.call("show_session", json!({"id": "nope"}));
    assert!(error && text.contains("no session nope"), "{text}");
    let (error, text) = c.call("rewind", json!({"id": id}));
    assert!(error && text.contains("exactly one of"), "{text}");
    let (error, text) = c.call("rewind", json!({"id": id, "to": "turn:1", "scope": "most"}));
    assert!(error && text.contains("scope `most`"), "{text}");
    assert_eq!(s.read("a.txt"), "v1\n");
    let forked = c.ok("fork", json!({"id": id}));
    assert_eq!(forked["parent"], id.as_str(), "{forked}");
    assert_eq!(
        c.ok("list_sessions", json!({})).as_array().unwrap().len(),
        2
    );
    assert!(c.close().success());
}

/// One HTTP/1.1 request to `addr` with `extra` header lines and `body`:
/// (status, body).
fn http(addr: &str, host: &str, extra: &str, body: &str) -> (u16, String) {
    use std::io::Read;
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    write!(
        s,
        "POST /mcp HTTP/1.1\r\nHost: {host}\r\n{extra}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    let status = out[9..12].parse().unwrap();
    (status, out)
}

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
const MCP_TYPES: &str =
    "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n";

/// `cairn mcp --listen` keeps `cairn serve`'s rule: loopback names only
/// without a token, no other site's page, JSON only, the token when there
/// is one; a non-loopback address or an empty token is refused at start.
#[test]
fn over_http_mcp_keeps_the_rule_of_cairn_serve() {
    let s = Scratch::new();
    let served = Served::start_command(&s, "mcp", &["--listen", "127.0.0.1:0"], &[]);
    let addr = served.addr.clone();
    let (status, out) = http(&addr, &addr, MCP_TYPES, INITIALIZE);
    assert_eq!(status, 200, "{out}");
    assert!(
        out.contains("\"serverInfo\"") && out.contains("cairn"),
        "{out}"
    );
    // Stateless: plain JSON, and no session for the server to keep.
    let lower = out.to_ascii_lowercase();
    assert!(lower.contains("content-type: application/json"), "{out}");
    assert!(!lower.contains("mcp-session-id"), "{out}");
    // A page's rebound name, another site, a form's type: refused before MCP.
    let (status, out) = http(&addr, "rebound.example", MCP_TYPES, INITIALIZE);
    assert_eq!(status, 403, "{out}");
    assert!(out.contains("cairn_host"), "{out}");
    let from_page = format!("{MCP_TYPES}Origin: http://evil.example\r\n");
    let (status, out) = http(&addr, &addr, &from_page, INITIALIZE);
    assert_eq!(status, 403, "{out}");
    assert!(out.contains("cairn_cross_site"), "{out}");
    let form = "Content-Type: text/plain\r\nAccept: application/json, text/event-stream\r\n";
    let (status, out) = http(&addr, &addr, form, INITIALIZE);
    assert_eq!(status, 415, "{out}");
    assert!(served.stop().success());

    let token = "s3cret-token";
    let served = Served::start_command(
        &s,
        "mcp",
        &["--listen", "127.0.0.1:0"],
        &[("CAIRN_MCP_TOKEN", token)],
    );
    let addr = served.addr.clone();
    let (status, out) = http(&addr, &addr, MCP_TYPES, INITIALIZE);
    assert_eq!(status, 401, "{out}");
    assert!(out.contains("cairn_token") && !out.contains(token), "{out}");
    let wrong = format!("{MCP_TYPES}Authorization: Bearer s3cret-tokeN\r\n");
    assert_eq!(http(&addr, &addr, &wrong, INITIALIZE).0, 401);
    let bearer = format!("{MCP_TYPES}Authorization: Bearer {token}\r\n");
    let (status, out) = http(&addr, "any.name.example", &bearer, INITIALIZE);
    assert_eq!(status, 200, "{out}");
    drop(served);

    for (args, env, says) in [
        (&["--listen", "0.0.0.0:0"][..], None, "needs --token"),
        (
            &["--listen", "127.0.0.1:0"][..],
            Some(" "),
            "token is empty",
        ),
    ] {
        let mut cmd = s.cmd();
        cmd.arg("mcp").args(args);
        if let Some(t) = env {
            cmd.env("CAIRN_MCP_TOKEN", t);
        }
        let out = cmd.output().unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(says), "{args:?}: {err}");
    }
}
