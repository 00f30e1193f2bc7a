//! Bad input and hostile input at the command line: refused with a clear
//! message and exit 2 (or 4), and nothing secret or wrong reaches the store.

mod common;

use common::*;
use serde_json::json;

fn script_path(s: &Scratch, turns: serde_json::Value) -> String {
    format!("script:{}", s.script("script.json", turns).display())
}

/// Every byte of every file under `dir`.
fn all_bytes(dir: &std::path::Path) -> Vec<u8> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(all_bytes(&p));
        } else if let Ok(b) = std::fs::read(&p) {
            out.extend(b);
        }
    }
    out
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}

#[test]
fn a_base_url_carrying_a_key_is_refused_and_never_stored_or_echoed() {
    let s = Scratch::new();
    for url in [
        "https://:sk-test-secret-1@127.0.0.1:9/v1",
        "https://user:sk-test-secret-1@127.0.0.1:9/v1",
        "http://127.0.0.1:9/v1?api_key=sk-test-secret-1",
    ] {
        let out = s
            .cmd()
            .env("OPENAI_API_KEY", "sk-from-env")
            .args(["run", "--model", "openai:gpt-4o", "--base-url", url, "task"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{url}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("base URL"), "{err}");
        if url.contains('@') {
            assert!(!err.contains("sk-test-secret-1"), "{err}");
        }
    }
    assert!(!contains(&all_bytes(&s.store), "sk-test-secret-1"));
}

#[test]
fn an_unknown_thinking_mode_is_refused() {
    let s = Scratch::new();
    let model = script_path(&s, json!([{"text": "done"}]));
    let out = s.run(&["run", "--model", &model, "--thinking", "banana", "task"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("banana") && err.contains("high"), "{err}");
    assert!(
        !s.store.join("runs").exists()
            || s.run(&["sessions", "--all", "--json"])
                .stdout
                .starts_with(b"[]")
    );
    let out = s.run(&["run", "--model", &model, "--thinking", "high", "task"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_raised_budget_is_not_listed_as_needing_force_beside_a_real_change() {
    let s = Scratch::new();
    let model = script_path(
        &s,
        json!([
            {"text": "one", "tool_calls": [shell("s1", "true")]},
            {"text": "two"}
        ]),
    );
    let out = s.run(&[
        "run",
        "--model",
        &model,
        "--max-turns",
        "1",
        "--json",
        "task",
    ]);
    assert!(out.status.success());
    let id = s.only_session();
    let other = format!(
        "script:{}",
        s.script("other.json", json!([{"text": "x"}])).display()
    );
    let out = s.run(&["resume", &id, "--model", &other, "--max-turns", "5"]);
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    let (needs, note) = err
        .split_once("Raising a budget needs no --force")
        .unwrap_or((&err, ""));
    assert!(
        needs.contains("model was") && !needs.contains("max_turns"),
        "{err}"
    );
    assert!(note.contains("max_turns"), "{err}");
}
