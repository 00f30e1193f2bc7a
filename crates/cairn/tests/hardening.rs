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

#[test]
fn model_and_tool_text_reaches_the_terminal_escaped_never_raw() {
    let s = Scratch::new();
    let evil = "hello \u{1b}]52;c;ZXZpbA==\u{7} \u{1b}[2J\u{1b}[H bye";
    let model = script_path(
        &s,
        json!([
            {"text": evil, "tool_calls": [shell("s1", "printf 'tool \\033[31mred\\033[0m\\n'")]},
            {"text": "done \u{9b}31m"}
        ]),
    );
    let out = s.run(&["run", "--model", &model, "--name", "n\u{1b}[31mame", "task"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for stream in [&out.stdout, &out.stderr] {
        assert!(
            !stream.contains(&0x1b),
            "{}",
            String::from_utf8_lossy(stream)
        );
        assert!(!stream.contains(&0x07));
        assert!(!contains(stream, "\u{9b}"));
    }
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(shown.contains("\\x1b]52;c;ZXZpbA==\\x07"), "{shown}");
    let id = s.only_session();
    // The journal keeps what the model said, byte for byte.
    assert!(s.records(&id).iter().any(|r| r["text"] == evil));
    for args in [
        vec!["session", "show", id.as_str()],
        vec!["session", "show", id.as_str(), "--transcript"],
        vec!["sessions"],
    ] {
        let out = s.run(&args);
        assert!(out.status.success());
        assert!(
            !out.stdout.contains(&0x1b),
            "{args:?}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

#[test]
fn a_name_from_a_record_cannot_forge_a_line_of_its_own() {
    let s = Scratch::new();
    // A tool the model names with a line of its own in it (refused as
    // unknown, and journaled as the model named it), and a session name
    // that would print as a status line.
    let forged = "nope\n  <- read_file ok: FORGED";
    let model = script_path(
        &s,
        json!([
            {"text": "one", "tool_calls": [call("c1", forged, json!({}))]},
            {"text": "done"}
        ]),
    );
    let out = s.run(&["run", "--model", &model, "--name", "n\nFORGED", "task"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = s.only_session();
    let mut printed = vec![("run", out.stdout)];
    for args in [
        vec!["session", "show", id.as_str()],
        vec!["session", "show", id.as_str(), "--transcript"],
    ] {
        let out = s.run(&args);
        assert!(out.status.success(), "{args:?}");
        printed.push((args.last().copied().unwrap_or(""), out.stdout));
    }
    for (what, stdout) in printed {
        let text = String::from_utf8_lossy(&stdout);
        for line in text.lines() {
            let line = line.trim_start();
            assert!(
                !line.starts_with("FORGED") && !line.starts_with("<- read_file"),
                "{what}: a record's text made a line of its own: {line:?}\n{text}"
            );
        }
        assert!(text.contains("FORGED"), "{what}: {text}");
    }
}

#[test]
fn a_closed_stderr_does_not_stop_a_run() {
    let s = Scratch::new();
    let model = script_path(
        &s,
        json!([
            {"text": "one", "tool_calls": [shell("s1", "echo 1 >> n.log")]},
            {"text": "done"}
        ]),
    );
    let mut child = s
        .cmd()
        .args(["run", "--model", &model, "task"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    drop(child.stderr.take());
    let status = child.wait().unwrap();
    assert!(status.success(), "{status:?}");
    let id = s.only_session();
    assert_eq!(s.records(&id).last().unwrap()["reason"], "completed");
}

#[test]
fn a_store_inside_the_workspace_is_refused_before_anything_runs() {
    let s = Scratch::new();
    let model = script_path(
        &s,
        json!([
            {"text": "edit the journal", "tool_calls": [shell("s1", "echo x >> ran.log")]},
            {"text": "done"}
        ]),
    );
    let inner = s.ws.join(".cairn-store");
    // (`cairn exec` reports its own failures with 125, as wrappers expect.)
    for (args, code) in [
        (vec!["run", "--model", model.as_str(), "task"], 2),
        (vec!["exec", "--", "sh", "-c", "echo x >> ran.log"], 125),
    ] {
        let out = s
            .cmd()
            .env("CAIRN_STORE", &inner)
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(code), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("inside the workspace"), "{err}");
        assert!(!s.ws.join("ran.log").exists(), "{args:?} ran");
    }
    assert!(!inner.join("runs").exists());
    // A store named by a relative path through a subdirectory is still inside.
    std::fs::create_dir(s.ws.join("sub")).unwrap();
    let out = s
        .cmd()
        .env_remove("CAIRN_STORE")
        .args([
            "--store",
            "sub/../.cairn-store",
            "run",
            "--model",
            &model,
            "task",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // One in a sibling of the workspace is not.
    let out = s
        .cmd()
        .env_remove("CAIRN_STORE")
        .current_dir(s.ws.join("sub"))
        .args([
            "--store",
            "../.cairn-store",
            "run",
            "--model",
            &model,
            "task",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_store_that_is_a_file_or_empty_is_bad_input() {
    let s = Scratch::new();
    let file = s.dir.path().join("afile");
    std::fs::write(&file, "x").unwrap();
    for store in [file.clone(), file.join("below")] {
        let out = s
            .cmd()
            .env("CAIRN_STORE", &store)
            .args(["sessions"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{store:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("is a file, not a directory"), "{err}");
    }
    let out = s
        .cmd()
        .env("CAIRN_STORE", "")
        .args(["sessions"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("CAIRN_STORE is set but empty"));
}

#[test]
fn forking_into_a_workspace_that_is_a_file_is_refused() {
    let s = Scratch::new();
    let model = script_path(&s, json!([{"text": "done"}]));
    assert!(s.run(&["run", "--model", &model, "task"]).status.success());
    let id = s.only_session();
    let file = s.dir.path().join("not-a-dir");
    std::fs::write(&file, "x").unwrap();
    let out = s.run(&["fork", &id, "--workspace", file.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a directory"));
    assert_eq!(std::fs::read_dir(s.store.join("runs")).unwrap().count(), 1);
}

#[test]
fn listing_snapshots_needs_no_lock_while_a_writer_holds_the_session() {
    let s = Scratch::new();
    std::fs::write(s.ws.join("a.txt"), "a\n").unwrap();
    let out = s.run(&["exec", "--", "sh", "-c", "echo b > b.txt"]);
    assert!(out.status.success());
    let id = s.only_session();
    let store = cairn_store::Store::open(&s.store).unwrap();
    let run = cairn_store::RunId::parse(&id).unwrap();
    let (_writer, _) = cairn_journal::JournalWriter::open(&store, &run).unwrap();
    let out = s.run(&["rewind", &id, "--list-snapshots", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json(&out.stdout).as_array().unwrap().len(), 2);
    // A restore still needs the lock.
    let out = s.run(&["rewind", &id, "--to", "exec"]);
    assert_eq!(out.status.code(), Some(4));
}

#[test]
fn check_ignore_reports_a_failure_as_bad_input_not_as_nothing_excluded() {
    let s = Scratch::new();
    std::fs::create_dir(s.ws.join(".cairnignore")).unwrap();
    std::fs::write(s.ws.join(".gitignore"), "*.log\n").unwrap();
    let out = s.run(&["check-ignore", "x.log"]);
    // A rule file that is a directory is treated as absent (as git does) or
    // is an error; never exit 1 for a failure.
    assert_ne!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn the_shell_tool_gets_no_secrets_from_cairns_environment_unless_passed_through() {
    let s = Scratch::new();
    let model = script_path(
        &s,
        json!([
            {"text": "look", "tool_calls": [shell("s1", "env")]},
            {"text": "done"}
        ]),
    );
    let out = s
        .cmd()
        .env("OPENAI_API_KEY", "sk-should-not-leak")
        .env("MY_SERVICE_TOKEN", "tok-passed-on-purpose")
        .env("DEPLOY_PASSWORD", "hunter2-never")
        .env("CAIRN_SHELL_PASS_ENV", "MY_SERVICE_TOKEN")
        .env("HARMLESS_SETTING", "visible-value")
        .args(["run", "--model", &model, "task"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = s.only_session();
    let result = results_for(&s.records(&id), "s1")[0]["output"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(result.contains("visible-value"), "{result}");
    assert!(result.contains("tok-passed-on-purpose"), "{result}");
    assert!(!result.contains("sk-should-not-leak"), "{result}");
    assert!(!result.contains("hunter2-never"), "{result}");
}
