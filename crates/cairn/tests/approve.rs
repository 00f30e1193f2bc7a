//! `--approve never|shell|writes` (DESIGN §11): the calls it names wait for
//! a yes on stdin; a no runs nothing and is journaled `refused`.

mod common;

use std::io::Write;
use std::process::{Output, Stdio};

use common::*;
use serde_json::json;

fn script_path(s: &Scratch, turns: serde_json::Value) -> String {
    format!("script:{}", s.script("script.json", turns).display())
}

/// Runs cairn with `answers` on stdin.
fn answering(s: &Scratch, args: &[&str], answers: &str) -> Output {
    let mut child = s
        .cmd()
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(answers.as_bytes()).unwrap();
    drop(stdin);
    child.wait_with_output().unwrap()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn make_f() -> serde_json::Value {
    json!([
        {"text": "making f", "tool_calls": [shell("c1", "sh -c 'echo x > f'")]},
        {"text": "done"}
    ])
}

#[test]
fn a_no_runs_nothing_and_the_transcript_shows_the_call_refused() {
    let s = Scratch::new();
    let model = script_path(&s, make_f());
    let out = answering(
        &s,
        &["run", "--approve", "shell", "--model", &model, "task"],
        "n\n",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!s.ws.join("f").exists(), "the declined command ran");
    let err = stderr(&out);
    assert!(
        err.contains(r#"cairn: run shell {"command":"sh -c 'echo x > f'""#)
            && err.contains("? [y/N] "),
        "{err}"
    );
    let id = s.only_session();
    let recs = s.records(&id);
    assert!(!kinds(&recs).contains(&"tool_start".to_string()));
    let results = results_for(&recs, "c1");
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["outcome"], "refused");
    assert!(results[0]["output"].as_str().unwrap().contains("declined"));

    let show = s.run(&["session", "show", &id, "--transcript"]);
    assert!(show.status.success(), "{}", stderr(&show));
    let text = String::from_utf8_lossy(&show.stdout);
    assert!(text.contains("refused (c1)"), "{text}");
    let show = s.run(&["session", "show", &id, "--transcript", "--json"]);
    let shown = json(&show.stdout);
    let records = shown["records"].as_array().unwrap();
    assert!(
        records
            .iter()
            .any(|r| r["kind"] == "tool_result" && r["outcome"] == "refused"),
        "{shown}"
    );
    // The chain holds its v3 record like any other.
    let verify = s.run(&["verify", &id]);
    assert!(verify.status.success(), "{}", stderr(&verify));
}

#[test]
fn a_yes_runs_the_call() {
    let s = Scratch::new();
    let model = script_path(&s, make_f());
    for answer in ["y\n", "yes\n", "  Y \n"] {
        std::fs::remove_file(s.ws.join("f")).ok();
        let out = answering(
            &s,
            &[
                "run",
                "--approve",
                "shell",
                "--model",
                &model,
                "--json",
                "task",
            ],
            answer,
        );
        assert!(out.status.success(), "{answer:?}: {}", stderr(&out));
        assert_eq!(json(&out.stdout)["status"], "completed");
        assert_eq!(s.read("f"), "x\n", "{answer:?}");
    }
}

#[test]
fn the_end_of_input_is_a_no() {
    let s = Scratch::new();
    let model = script_path(&s, make_f());
    let out = answering(
        &s,
        &["run", "--approve", "shell", "--model", &model, "task"],
        "",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!s.ws.join("f").exists());
    let id = s.only_session();
    assert_eq!(results_for(&s.records(&id), "c1")[0]["outcome"], "refused");
}

#[test]
fn writes_asks_for_write_file_but_not_for_read_file() {
    let s = Scratch::new();
    std::fs::write(s.ws.join("seed.txt"), "seed\n").unwrap();
    let model = script_path(
        &s,
        json!([
            {"text": "working", "tool_calls": [
                call("r1", "read_file", json!({"path": "seed.txt"})),
                call("w1", "write_file", json!({"path": "w.txt", "content": "w\n"}))
            ]},
            {"text": "done"}
        ]),
    );
    let out = answering(
        &s,
        &["run", "--approve", "writes", "--model", &model, "task"],
        "y\n",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert_eq!(err.matches("? [y/N] ").count(), 1, "{err}");
    // A file write is asked as the diff it would make.
    assert!(
        err.contains("cairn: write_file w.txt:\n--- /dev/null\n+++ b/w.txt"),
        "{err}"
    );
    assert!(
        err.contains("+w\n") && err.contains("cairn: run it? [y/N] "),
        "{err}"
    );
    assert!(!err.contains("read_file"), "{err}");
    assert_eq!(s.read("w.txt"), "w\n");
    let recs = s.records(&s.only_session());
    assert_eq!(results_for(&recs, "r1")[0]["outcome"], "ok");
    assert_eq!(results_for(&recs, "w1")[0]["outcome"], "ok");
}

#[test]
fn without_approve_nothing_is_asked() {
    let s = Scratch::new();
    let model = script_path(&s, make_f());
    let out = answering(&s, &["run", "--model", &model, "task"], "");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(!stderr(&out).contains("[y/N]"));
    assert_eq!(s.read("f"), "x\n");
}

#[test]
fn resume_and_continue_ask_too() {
    let s = Scratch::new();
    let model = script_path(
        &s,
        json!([
            {"text": "hello"},
            {"text": "making f", "tool_calls": [shell("c1", "echo x > f")]},
            {"text": "done"},
            {"text": "making g", "tool_calls": [shell("c2", "echo y > g")]},
            {"text": "done again"}
        ]),
    );
    let out = s.run(&["run", "--model", &model, "task"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let id = s.only_session();
    let out = answering(&s, &["resume", &id, "--approve", "shell", "more"], "n\n");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("cairn: run shell "));
    assert!(!s.ws.join("f").exists());
    let out = answering(&s, &["continue", "--approve", "shell", "again"], "y\n");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("cairn: run shell "));
    assert_eq!(s.read("g"), "y\n");
}

#[test]
fn what_the_model_wrote_reaches_the_terminal_shown_not_obeyed() {
    let s = Scratch::new();
    let model = script_path(
        &s,
        json!([
            {"text": "x", "tool_calls": [shell("c1", "echo \u{202e}gnp.exe")]},
            {"text": "done"}
        ]),
    );
    let out = answering(
        &s,
        &["run", "--approve", "shell", "--model", &model, "task"],
        "n\n",
    );
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(!err.contains('\u{202e}'), "{err:?}");
    assert!(err.contains(r"\u{202e}gnp.exe"), "{err}");
}

#[test]
fn an_unknown_policy_is_bad_usage() {
    let s = Scratch::new();
    let out = s.run(&["run", "--approve", "bogus", "--model", "script:x", "task"]);
    assert_eq!(out.status.code(), Some(2));
    let err = stderr(&out);
    assert!(
        err.contains("unknown approval policy `bogus`: use never, shell or writes"),
        "{err}"
    );
    assert!(!s.store.join("runs").exists(), "no session was started");
}

#[test]
fn interrupting_twice_while_it_waits_stops_and_a_resume_asks_again() {
    let s = Scratch::new();
    let model = script_path(&s, make_f());
    let mut child = s
        .cmd()
        .args(["run", "--approve", "shell", "--model", &model, "task"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Stdin stays open: nobody answers.
    let stdin = child.stdin.take().unwrap();
    wait_until(20, "the question", || {
        std::fs::read_dir(s.store.join("runs"))
            .map(|mut d| d.next().is_some())
            .unwrap_or(false)
            && s.records_so_far(&s.only_session())
                .iter()
                .any(|r| r["label"] == "pause:turn:1")
    });
    let err = Stderr::of(&mut child);
    kill(&mut child, libc::SIGINT);
    err.wait_for(20, "stopping after the step in flight");
    kill(&mut child, libc::SIGINT);
    // It exits though its question was never answered.
    let status = exits_within(&mut child, 10, "a second SIGINT while it waits");
    drop(stdin);
    assert_eq!(status.code(), Some(1), "{}", err.finish());
    let id = s.only_session();
    let recs = s.records(&id);
    assert_eq!(recs.last().unwrap()["reason"], "interrupted");
    assert!(results_for(&recs, "c1").is_empty());
    assert!(!kinds(&recs).contains(&"tool_start".to_string()));

    let out = answering(&s, &["resume", &id, "--approve", "shell"], "y\n");
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("cairn: run shell "));
    assert_eq!(s.read("f"), "x\n");
}
