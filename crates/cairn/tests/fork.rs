//! Forks (DESIGN §3.3): no copied history, a pinned and checkable prefix,
//! parent appends that keep the child valid, tampering and truncation that
//! invalidate it, chains of any depth, and `continue` scoping.

mod common;

use common::*;
use serde_json::{json, Value};

fn listing(s: &Scratch) -> Vec<Value> {
    let out = s.run(&["sessions", "--all", "--json"]);
    assert!(out.status.success());
    json(&out.stdout).as_array().unwrap().clone()
}

fn entry(list: &[Value], id: &str) -> Value {
    list.iter()
        .find(|e| e["id"] == id)
        .unwrap_or_else(|| panic!("{id} not listed"))
        .clone()
}

/// A finished parent session of 3 turns (records: meta, user, 3 assistant, 2 tool pairs, terminal).
fn parent(s: &Scratch, turns: usize) -> String {
    let mut t: Vec<Value> = (0..turns - 1)
        .map(|i| json!({"text": format!("turn {i}"), "tool_calls": [shell(&format!("c{i}"), &format!("echo {i} >> parent.log"))]}))
        .collect();
    t.push(json!({"text": "parent done"}));
    for i in 0..60 {
        t.push(json!({"text": format!("later {i}")}));
    }
    let script = s.script("parent.json", Value::Array(t));
    let out = s.run(&[
        "run",
        "--model",
        &format!("script:{}", script.display()),
        "--json",
        "task",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json(&out.stdout)["id"].as_str().unwrap().to_string()
}

fn fork(s: &Scratch, id: &str, at: Option<u64>) -> String {
    let mut args = vec!["fork".to_string(), id.to_string(), "--json".into()];
    if let Some(at) = at {
        args.push("--at".into());
        args.push(at.to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let out = s.run(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out.stdout);
    assert_eq!(v["status"], "suspended");
    v["id"].as_str().unwrap().to_string()
}

#[test]
fn a_fork_shares_the_past_without_copying_it_and_diverges() {
    let s = Scratch::new();
    let p = parent(&s, 3);
    let c = fork(&s, &p, Some(5));
    let recs = s.records(&c);
    assert_eq!(
        kinds(&recs),
        ["meta", "terminal"],
        "no parent records copied"
    );
    assert_eq!(recs[0]["fork"]["parent"], p.as_str());
    assert_eq!(recs[0]["fork"]["seq"], 5);
    let l = listing(&s);
    let e = entry(&l, &c);
    assert_eq!(e["parent"], json!({"id": p, "seq": 5}));
    assert_eq!(e["valid"], true);
    assert!(s.run(&["verify", &c]).status.success());
    // Resume folds the parent's prefix: the next model call is turn 2 of the
    // script (the prefix holds one assistant turn), and the conversation
    // carries the parent's user message.
    let out = s.run(&["resume", &c, "go on", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recs = s.records(&c);
    let texts: Vec<_> = recs
        .iter()
        .filter(|r| r["kind"] == "assistant")
        .map(|r| r["text"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(texts[0], "turn 1");
    let shown = s.run(&["session", "show", &c]);
    let shown = String::from_utf8_lossy(&shown.stdout);
    assert!(
        shown.contains("task") && shown.contains("turn 0"),
        "{shown}"
    );
}

#[test]
fn parent_appends_keep_the_child_valid() {
    let s = Scratch::new();
    let p = parent(&s, 2);
    let c = fork(&s, &p, None);
    let out = s.run(&["resume", &p, "more please", "--json"]);
    assert!(out.status.success());
    let l = listing(&s);
    assert_eq!(entry(&l, &c)["valid"], true);
    let out = s.run(&["resume", &c, "child goes on", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn a_tampered_parent_prefix_invalidates_the_child_and_resume_refuses() {
    let s = Scratch::new();
    let p = parent(&s, 3);
    let c = fork(&s, &p, Some(6));
    let path = s.store.join("runs").join(&p).join("journal.jsonl");
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replacen("turn 0", "turn X", 1);
    std::fs::write(&path, text).unwrap();
    let l = listing(&s);
    let e = entry(&l, &c);
    assert_eq!(e["valid"], false, "{e}");
    let out = s.run(&["session", "show", &c]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&p),
        "the reason names the parent"
    );
    let out = s.run(&["resume", &c, "x"]);
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("pinned prefix"));
}

#[test]
fn a_truncated_parent_prefix_invalidates_the_child_and_resume_refuses() {
    let s = Scratch::new();
    let p = parent(&s, 3);
    let c = fork(&s, &p, Some(7));
    let path = s.store.join("runs").join(&p).join("journal.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    let keep: String = text.lines().take(5).map(|l| format!("{l}\n")).collect();
    std::fs::write(&path, keep).unwrap();
    let l = listing(&s);
    assert_eq!(
        entry(&l, &p)["valid"],
        true,
        "the parent itself is a valid shorter journal"
    );
    let e = entry(&l, &c);
    assert_eq!(e["valid"], false, "{e}");
    assert!(e["problem"].as_str().unwrap().contains("truncated"), "{e}");
    assert_eq!(s.run(&["resume", &c]).status.code(), Some(4));
}

#[test]
fn a_fork_chain_fifty_deep_is_listed_verified_and_resumed() {
    let s = Scratch::new();
    let root = parent(&s, 2);
    let mut ids = vec![root.clone()];
    for _ in 0..50 {
        let last = ids.last().unwrap().clone();
        ids.push(fork(&s, &last, None));
    }
    let l = listing(&s);
    assert_eq!(l.len(), 51);
    assert!(l.iter().all(|e| e["valid"] == true));
    let out = s.run(&["verify", "--all", "--json"]);
    assert!(out.status.success());
    let deepest = ids.last().unwrap();
    let out = s.run(&["resume", deepest, "from the bottom", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recs = s.records(deepest);
    assert_eq!(recs.iter().filter(|r| r["kind"] == "assistant").count(), 1);
    // Its listing is checked from the receipt, without replaying ancestors.
    let meta: Value = serde_json::from_slice(
        &std::fs::read(s.store.join("runs").join(deepest).join("meta.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(meta["receipt"].as_array().unwrap().len(), 50);
    // Truncating the root breaks every descendant.
    let path = s.store.join("runs").join(&root).join("journal.jsonl");
    let text = std::fs::read_to_string(&path).unwrap();
    std::fs::write(
        &path,
        text.lines()
            .take(2)
            .map(|l| format!("{l}\n"))
            .collect::<String>(),
    )
    .unwrap();
    let l = listing(&s);
    assert!(ids[1..].iter().all(|id| entry(&l, id)["valid"] == false));
}

#[test]
fn fork_refuses_a_seq_the_parent_does_not_have() {
    let s = Scratch::new();
    let p = parent(&s, 2);
    assert_eq!(s.run(&["fork", &p, "--at", "999"]).status.code(), Some(2));
    assert_eq!(s.run(&["fork", &p, "--at", "zero"]).status.code(), Some(2));
    assert_eq!(
        s.run(&["--fork", &p, "--json"]).status.code(),
        Some(0),
        "the alias works"
    );
}

#[test]
fn continue_picks_the_newest_session_of_this_repository() {
    let s = Scratch::new();
    let repo_a = s.ws.join("a");
    let repo_b = s.ws.join("b");
    for r in [&repo_a, &repo_b] {
        std::fs::create_dir_all(r.join(".git")).unwrap();
        std::fs::create_dir_all(r.join("src/deep")).unwrap();
    }
    let script = s.script(
        "c.json",
        json!([{"text": "1"}, {"text": "2"}, {"text": "3"}]),
    );
    let model = format!("script:{}", script.display());
    let run_in = |dir: &std::path::Path| {
        let out = s
            .cmd()
            .current_dir(dir)
            .args(["run", "--model", &model, "--json", "t"])
            .output()
            .unwrap();
        assert!(out.status.success());
        json(&out.stdout)["id"].as_str().unwrap().to_string()
    };
    let a_old = run_in(&repo_a);
    let a_new = run_in(&repo_a.join("src"));
    let b = run_in(&repo_b);
    let out = s
        .cmd()
        .current_dir(repo_a.join("src/deep"))
        .args(["continue", "next", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json(&out.stdout)["id"], a_new.as_str());
    let out = s
        .cmd()
        .arg("-C")
        .arg(&repo_b)
        .args(["--continue", "next", "--json"])
        .output()
        .unwrap();
    assert_eq!(json(&out.stdout)["id"], b.as_str());
    let _ = a_old;
}

#[test]
fn continue_skips_sessions_without_a_model() {
    let s = Scratch::new();
    let script = s.script("c.json", json!([{"text": "1"}, {"text": "2"}]));
    let out = s.run(&[
        "run",
        "--model",
        &format!("script:{}", script.display()),
        "--json",
        "t",
    ]);
    let agent = json(&out.stdout)["id"].as_str().unwrap().to_string();
    assert!(s.run(&["exec", "--", "true"]).status.success());
    let out = s.run(&["continue", "next", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json(&out.stdout)["id"], agent.as_str());
}

#[test]
fn removing_a_parent_is_refused_while_forks_pin_it_and_names_them() {
    let s = Scratch::new();
    let p = parent(&s, 2);
    let child = fork(&s, &p, Some(3));
    let grandchild = fork(&s, &child, None);
    let out = s.run(&["session", "rm", &p]);
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&child) && err.contains("--with-forks"),
        "{err}"
    );
    assert!(s
        .store
        .join("runs")
        .join(&p)
        .join("journal.jsonl")
        .is_file());
    // Removing the middle one is refused too: the grandchild pins it.
    let out = s.run(&["session", "rm", &child]);
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&grandchild));
    // Every session still resumes-verifies.
    for id in [&p, &child, &grandchild] {
        assert_eq!(entry(&listing(&s), id)["valid"], true);
    }
}

#[test]
fn removing_with_forks_takes_the_whole_lineage_below_and_nothing_else() {
    let s = Scratch::new();
    let p = parent(&s, 2);
    let child = fork(&s, &p, Some(3));
    let grandchild = fork(&s, &child, None);
    let other = parent(&s, 2);
    let out = s.run(&["session", "rm", &p, "--with-forks"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&child) && text.contains(&grandchild),
        "{text}"
    );
    for id in [&p, &child, &grandchild] {
        assert!(!s.store.join("runs").join(id).exists(), "{id} still there");
    }
    assert_eq!(entry(&listing(&s), &other)["valid"], true);
}

#[test]
fn removal_is_refused_when_another_sessions_head_cannot_be_read() {
    let s = Scratch::new();
    let p = parent(&s, 2);
    let broken = parent(&s, 2);
    // A journal whose first record is garbage might be a fork of anything.
    let path = s.store.join("runs").join(&broken).join("journal.jsonl");
    std::fs::write(&path, b"not a record\n").unwrap();
    let out = s.run(&["session", "rm", &p]);
    assert_eq!(out.status.code(), Some(3));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&broken), "{err}");
    assert!(s
        .store
        .join("runs")
        .join(&p)
        .join("journal.jsonl")
        .is_file());
}

/// A session of two turns that each write `f.txt`.
fn two_writes(s: &Scratch) -> String {
    let script = s.script("two.json", json!([
        {"text": "t1", "tool_calls": [call("w1", "write_file", json!({"path": "f.txt", "content": "one\n"}))]},
        {"text": "t2", "tool_calls": [call("w2", "write_file", json!({"path": "f.txt", "content": "two\n"}))]},
        {"text": "done"}
    ]));
    let out = s.run(&[
        "run",
        "--model",
        &format!("script:{}", script.display()),
        "--json",
        "task",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json(&out.stdout)["id"].as_str().unwrap().to_string()
}

/// `rewind --fork` refuses what it cannot do before it changes a file: a
/// fork needs a node, and the workspace and journal stay as they were.
#[test]
fn rewind_fork_refuses_bad_usage_before_any_change() {
    let s = Scratch::new();
    let id = two_writes(&s);
    let snap = {
        let out = s.run(&["rewind", &id, "--list-snapshots", "--json"]);
        let list = json(&out.stdout);
        list.as_array().unwrap().last().unwrap()["id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let records = s.records(&id).len();
    let out = s.run(&["rewind", &id, "--restore-snapshot", &snap, "--fork"]);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains("--to NODE"));
    assert_eq!(s.read("f.txt"), "two\n", "the workspace was changed");
    assert_eq!(s.records(&id).len(), records, "a bank was journaled");
    assert_eq!(listing(&s).len(), 1, "a fork was made");
}

/// When the fork fails after the files were restored, the bank that undoes
/// the restore is printed (text and JSON), and the exit says it failed.
#[test]
fn rewind_fork_prints_the_bank_when_the_fork_fails_after_the_restore() {
    let s = Scratch::new();
    let id = two_writes(&s);
    for json_out in [false, true] {
        let mut args = vec!["rewind", id.as_str(), "--to", "turn:2", "--fork"];
        if json_out {
            args.push("--json");
        }
        let out = s
            .cmd()
            .env("CAIRN_FAULT", "fail-fork-after-rewind")
            .args(&args)
            .output()
            .unwrap();
        let (stdout, stderr) = (
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr),
        );
        assert_eq!(out.status.code(), Some(1), "{stdout}{stderr}");
        assert_eq!(s.read("f.txt"), "one\n", "the files are as before turn 2");
        let bank = s
            .records(&id)
            .iter()
            .rev()
            .find(|r| r["kind"] == "snapshot" && r["label"].as_str().unwrap().starts_with("bank:"))
            .unwrap()["snapshot"]
            .as_str()
            .unwrap()
            .to_string();
        let undo = format!("--restore-snapshot {bank}");
        assert!(stderr.contains(&undo), "{stderr}");
        assert!(
            stderr.contains("forking the conversation failed"),
            "{stderr}"
        );
        if json_out {
            let v = json(&out.stdout);
            assert_eq!(v["bank"]["snapshot"], bank.as_str(), "{v}");
            assert!(v["fork"].is_null(), "{v}");
            assert!(v["fork_error"]
                .as_str()
                .unwrap()
                .contains("fail-fork-after-rewind"));
        } else {
            assert!(stdout.contains(&undo), "{stdout}");
        }
        assert_eq!(listing(&s).len(), 1, "no fork was made");
        // The bank undoes it.
        let out = s.run(&["rewind", &id, "--restore-snapshot", &bank]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(s.read("f.txt"), "two\n");
    }
}
