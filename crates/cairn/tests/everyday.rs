//! Everyday use (DESIGN §16, issue 28): ids as people type them, crashed
//! sessions listed as such, listing filters, and messages that finish
//! their sentence — through the real binary.

mod common;

use common::*;
use serde_json::{json, Value};

fn script_path(s: &Scratch, name: &str, turns: Value) -> String {
    format!("script:{}", s.script(name, turns).display())
}

/// A completed session named `name` (one turn, no tools); its id.
fn finished(s: &Scratch, name: &str) -> String {
    let model = script_path(s, &format!("{name}.json"), json!([{"text": "done"}]));
    let out = s.run(&["run", "--model", &model, "--name", name, "--json", "task"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json(&out.stdout)["id"].as_str().unwrap().to_owned()
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn shown_id(s: &Scratch, reference: &str) -> Result<String, (Option<i32>, String)> {
    let out = s.run(&["session", "show", reference, "--json"]);
    if out.status.success() {
        Ok(json(&out.stdout)["id"].as_str().unwrap().to_owned())
    } else {
        Err((out.status.code(), stderr(&out)))
    }
}

#[test]
fn sessions_are_named_by_prefix_name_and_last_and_an_ambiguity_lists_them() {
    let s = Scratch::new();
    let a = finished(&s, "first");
    let b = finished(&s, "second");
    assert_eq!(shown_id(&s, "first").unwrap(), a);
    assert_eq!(shown_id(&s, "second").unwrap(), b);
    assert_eq!(shown_id(&s, "@last").unwrap(), b);
    // The shortest prefix that tells them apart, in lower case too.
    let n = (4..26).find(|&n| a[..n] != b[..n]).unwrap();
    assert_eq!(shown_id(&s, &a[..n]).unwrap(), a);
    assert_eq!(shown_id(&s, &a[..n].to_ascii_lowercase()).unwrap(), a);
    // A prefix both share: exit 2, naming both.
    let shared = &a[..4];
    assert_eq!(&b[..4], shared);
    let (code, err) = shown_id(&s, shared).unwrap_err();
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&a) && err.contains(&b) && err.contains("matches 2 sessions"),
        "{err}"
    );
    // Too short, or nothing: exit 2, saying how to find the id.
    let (code, err) = shown_id(&s, "abc").unwrap_err();
    assert_eq!(code, Some(2));
    assert!(
        err.contains("at least 4 characters") && err.contains("cairn sessions"),
        "{err}"
    );
    // Every command takes them: resume by name, verify by @last.
    let out = s.run(&["verify", "@last", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(json(&out.stdout)["id"], b.as_str());
    let out = s.run(&["fork", "first", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn a_bank_is_restored_by_its_label() {
    let s = Scratch::new();
    std::fs::write(s.ws.join("f.txt"), "before\n").unwrap();
    let model = script_path(
        &s,
        "w.json",
        json!([
            {"text": "w", "tool_calls": [call("w1", "write_file", json!({"path": "f.txt", "content": "by the run\n"}))]},
            {"text": "done"}
        ]),
    );
    let out = s.run(&["run", "--model", &model, "--name", "writer", "task"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = s.run(&["rewind", "writer", "--to", "turn:1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("bank:1"), "{text}");
    assert_eq!(s.read("f.txt"), "before\n");
    // The undo, by the label rewind printed.
    let out = s.run(&["rewind", "@last", "--restore-snapshot", "bank:1"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(s.read("f.txt"), "by the run\n");
    let out = s.run(&["rewind", "@last", "--restore-snapshot", "bank:9"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("--list-snapshots"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_killed_session_is_listed_interrupted_and_filters_find_it() {
    let s = Scratch::new();
    let done = finished(&s, "done");
    let model = script_path(
        &s,
        "slow.json",
        json!([
            {"text": "working", "tool_calls": [shell("c1", "echo effect >> effects.log; sleep 30")]},
            {"text": "done"}
        ]),
    );
    let mut child = s.spawn(&["run", "--model", &model, "--name", "slow", "task"]);
    wait_until(20, "the effect", || lines(&s.ws.join("effects.log")) == 1);
    let listed = |args: &[&str]| -> Vec<Value> {
        let mut all = vec!["sessions", "--json"];
        all.extend_from_slice(args);
        let out = s.run(&all);
        assert!(out.status.success(), "{}", stderr(&out));
        json(&out.stdout).as_array().unwrap().clone()
    };
    let status = |id: &str| -> String {
        let all = listed(&[]);
        let x = all.iter().find(|x| x["id"] == id).unwrap();
        x["status"].as_str().unwrap().to_owned()
    };
    let slow = listed(&["--limit", "1"])[0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_ne!(slow, done);
    assert_eq!(status(&slow), "running", "its writer is alive");
    kill(&mut child, libc::SIGKILL);
    child.wait().unwrap();
    assert_eq!(status(&slow), "interrupted", "no terminal and no writer");
    let out = s.run(&["session", "show", "slow"]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("status    interrupted"));
    let ids = |args: &[&str]| -> Vec<String> {
        listed(args)
            .iter()
            .map(|x| x["id"].as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(ids(&["--status", "interrupted"]), vec![slow.clone()]);
    assert_eq!(ids(&["--status", "completed"]), vec![done.clone()]);
    assert_eq!(
        ids(&["--status", "completed,interrupted"]),
        [slow.clone(), done.clone()]
    );
    assert_eq!(ids(&["--limit", "1"]), vec![slow.clone()]);
    assert!(ids(&["--status", "running"]).is_empty());
    // Another repository has none; --repo names one.
    let elsewhere = s.dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    assert!(ids(&["--repo", elsewhere.to_str().unwrap()]).is_empty());
    assert_eq!(ids(&["--repo", s.ws.to_str().unwrap()]).len(), 2);
    let out = s.run(&["sessions", "--status", "sleeping"]);
    assert_eq!(out.status.code(), Some(2));

    // The text shows sizes and times for people; JSON the exact values.
    let out = s.run(&["sessions"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("interrupted") && text.contains("SIZE"),
        "{text}"
    );
    assert!(text.contains(" ago") || text.contains("just now"), "{text}");
    assert!(text.contains(" KiB") || text.contains(" B "), "{text}");
    let bytes = listed(&[])[0]["bytes"].as_u64().unwrap();
    assert!(bytes > 0);

    // The unknown outcome's notice is shown whole, not cut at 100 characters.
    let out = s.run(&["resume", &slow, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let notice = s
        .records(&slow)
        .iter()
        .find(|r| r["kind"] == "tool_result" && r["outcome"] == "unknown")
        .unwrap()["output"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(notice.chars().count() > 120, "{notice}");
    let tail: String = notice
        .split_whitespace()
        .rev()
        .take(4)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect::<Vec<_>>()
        .join(" ");
    for args in [
        vec!["session", "show", &slow],
        vec!["session", "show", &slow, "--transcript"],
    ] {
        let out = s.run(&args);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            text.contains(&tail),
            "{args:?} cut the notice ({tail:?}):\n{text}"
        );
    }
}

#[test]
fn errors_under_json_are_one_json_value_on_stderr() {
    let s = Scratch::new();
    for (args, code, class) in [
        (
            vec!["session", "show", "nothing-here", "--json"],
            2,
            "usage",
        ),
        (vec!["sessions", "--limit", "many", "--json"], 2, "usage"),
        (vec!["prune", "--grace", "1h", "--json"], 2, "usage"),
    ] {
        let out = s.run(&args);
        assert_eq!(out.status.code(), Some(code), "{args:?}");
        assert!(out.stdout.is_empty(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        let v: Value = serde_json::from_str(&err).unwrap();
        assert_eq!(v["error"]["code"], code);
        assert_eq!(v["error"]["class"], class);
        assert!(!v["error"]["message"].as_str().unwrap().is_empty());
    }
    // Without --json, prose.
    let out = s.run(&["session", "show", "nothing-here"]);
    assert!(
        stderr(&out).starts_with("cairn: no session matches"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn prune_grace_on_a_store_directory_is_refused_not_ignored() {
    let s = Scratch::new();
    let out = s.run(&["prune", "--grace", "10m", "--dry-run"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("shared store"), "{}", stderr(&out));
    let out = s.run(&["prune", "--dry-run"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn run_dash_reads_the_task_from_standard_input() {
    let s = Scratch::new();
    let model = script_path(&s, "t.json", json!([{"text": "done"}]));
    let out = s
        .cmd()
        .args(["run", "--model", &model, "--json", "-"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(b"line one\nline two\n")?;
            c.wait_with_output()
        })
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let id = json(&out.stdout)["id"].as_str().unwrap().to_owned();
    let user = s
        .records(&id)
        .into_iter()
        .find(|r| r["kind"] == "user")
        .unwrap();
    assert_eq!(user["text"], "line one\nline two");
    // Nothing on standard input is bad usage.
    let out = s
        .cmd()
        .args(["run", "--model", &model, "-"])
        .stdin(std::process::Stdio::null())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("standard input"), "{}", stderr(&out));
}

#[test]
fn a_budget_stop_names_the_resume_that_raises_it() {
    let s = Scratch::new();
    let model = script_path(
        &s,
        "b.json",
        json!([
            {"text": "one", "tool_calls": [shell("s1", "echo 1 >> n.log")]},
            {"text": "two", "tool_calls": [shell("s2", "echo 2 >> n.log")]},
            {"text": "three"}
        ]),
    );
    let out = s.run(&["run", "--model", &model, "--max-turns", "1", "task"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let id = s.only_session();
    let text = String::from_utf8_lossy(&out.stdout);
    let hint = format!("cairn resume {id} --max-turns 2");
    assert!(text.contains(&hint), "{text}");
    assert!(
        !text.contains(&format!("resume with: cairn resume {id}\n")),
        "{text}"
    );
    // The hint works as printed: a raised budget needs no --force.
    let args: Vec<&str> = hint.split(' ').skip(1).collect();
    let out = s.run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let hint2 = format!("cairn resume {id} --max-turns 4");
    assert!(text.contains(&hint2), "{text}");
    let args: Vec<&str> = hint2.split(' ').skip(1).collect();
    let out = s.run(&args);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("completed"));
    assert_eq!(lines(&s.ws.join("n.log")), 2);
}

#[test]
fn an_approval_for_a_file_write_shows_the_diff() {
    let s = Scratch::new();
    std::fs::write(s.ws.join("notes.txt"), "alpha\nbeta\ngamma\n").unwrap();
    let model = script_path(
        &s,
        "a.json",
        json!([
            {"text": "w", "tool_calls": [call("w1", "write_file", json!({"path": "notes.txt", "content": "alpha\nBETA\ngamma\n"}))]},
            {"text": "e", "tool_calls": [call("e1", "edit_file", json!({"path": "notes.txt", "old": "gamma", "new": "delta"}))]},
            {"text": "done"}
        ]),
    );
    let out = s
        .cmd()
        .args(["run", "--model", &model, "--approve", "writes", "task"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .and_then(|mut c| {
            use std::io::Write;
            c.stdin.take().unwrap().write_all(b"n\nn\n")?;
            c.wait_with_output()
        })
        .unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains("--- a/notes.txt") && err.contains("+++ b/notes.txt"),
        "{err}"
    );
    assert!(err.contains("-beta") && err.contains("+BETA"), "{err}");
    assert!(err.contains("-gamma") && err.contains("+delta"), "{err}");
    assert!(!err.contains("\"content\""), "raw JSON shown: {err}");
    assert_eq!(
        s.read("notes.txt"),
        "alpha\nbeta\ngamma\n",
        "declined: nothing written"
    );
}
