//! Black-box tests of workspace versioning from the CLI (DESIGN §5, §10):
//! exec nodes and their exit statuses, snapshots, rewinds with banks,
//! check-ignore, prune, and the agent loop's turn boundaries.

mod common;

use common::*;
use serde_json::{json, Value};

fn exec(s: &Scratch, run: Option<&str>, script: &str) -> std::process::Output {
    let mut args: Vec<&str> = vec!["exec", "--json"];
    if let Some(r) = run {
        args.extend(["--run", r]);
    }
    args.extend(["--", "sh", "-c", script]);
    s.run(&args)
}

fn labels_of(s: &Scratch, id: &str) -> Vec<String> {
    s.records(id)
        .iter()
        .filter(|r| r["kind"] == "snapshot")
        .map(|r| r["label"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn exec_nodes_count_iterations_and_pass_the_exit_status_through() {
    let s = Scratch::new();
    let out = exec(&s, None, "echo 1 > one.txt");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out.stdout);
    assert_eq!(v["status"], "completed");
    let id = v["id"].as_str().unwrap().to_string();
    assert_eq!(
        exec(&s, Some(&id), "echo 2 > two.txt; exit 3")
            .status
            .code(),
        Some(3)
    );
    assert_eq!(
        exec(&s, Some(&id), "kill -TERM $$").status.code(),
        Some(128 + 15)
    );
    let labels = labels_of(&s, &id);
    for l in [
        "pre:exec:1",
        "post:exec:1",
        "resume:exec:2",
        "pre:exec:2",
        "fail:exec:2",
        "pre:exec:3",
        "fail:exec:3",
    ] {
        assert!(
            labels.contains(&l.to_string()),
            "{l} missing from {labels:?}"
        );
    }
    let recs = s.records(&id);
    let results: Vec<&Value> = recs.iter().filter(|r| r["kind"] == "tool_result").collect();
    assert_eq!(results.len(), 3);
    assert!(results[1]["output"]
        .as_str()
        .unwrap()
        .contains("exit status 3"));
    assert!(results[2]["output"]
        .as_str()
        .unwrap()
        .contains("killed by signal 15"));
    assert_eq!(recs.last().unwrap()["reason"], "failed");
    // A command that cannot be run: 127, recorded; cairn's own failure: 125.
    let out = s.run(&["exec", "--run", &id, "--", "/nonexistent/tool"]);
    assert_eq!(out.status.code(), Some(127));
    let out = s.run(&["exec", "--run", "NOSUCHRUN", "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
    let out = s.run(&["exec", "--node", "bad name!", "--", "true"]);
    assert_eq!(out.status.code(), Some(125));
}

/// `cairn exec` returns its command's status through `main`, so what it
/// held is let go by its destructors, not left to the kernel or a lapse:
/// the journal lock's holder is unnamed and the journal's preallocated
/// tail is cut (both done on drop), and a second exec of the session is
/// not refused.
#[test]
fn exec_keeps_its_commands_status_and_lets_go_of_what_it_held() {
    let s = Scratch::new();
    let out = exec(&s, None, "exit 7");
    assert_eq!(
        out.status.code(),
        Some(7),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let id = json(&out.stdout)["id"].as_str().unwrap().to_string();
    let dir = s.store.join("runs").join(&id);
    let lock = std::fs::read(dir.join("journal.lock")).unwrap();
    assert!(
        lock.is_empty(),
        "the lock file still names its holder: {}",
        String::from_utf8_lossy(&lock)
    );
    let journal = std::fs::read(dir.join("journal.jsonl")).unwrap();
    assert!(
        journal.ends_with(b"\n"),
        "the journal keeps a preallocated tail of {} zero bytes",
        journal.iter().rev().take_while(|b| **b == 0).count()
    );
    let out = exec(&s, Some(&id), "exit 0");
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn rewind_undoes_the_run_not_the_operator_and_the_bank_undoes_the_rewind() {
    let s = Scratch::new();
    std::fs::write(s.ws.join("keep.txt"), "original\n").unwrap();
    let out = exec(&s, None, "echo bot > bot.txt; echo edited >> keep.txt");
    let id = json(&out.stdout)["id"].as_str().unwrap().to_string();
    // The operator edits between two invocations: a non-executing window.
    std::fs::write(s.ws.join("operator.txt"), "mine\n").unwrap();
    exec(&s, Some(&id), "echo again > bot2.txt");

    let out = s.run(&["rewind", &id, "--list-snapshots", "--json"]);
    assert!(out.status.success());
    let list = json(&out.stdout);
    let first = &list.as_array().unwrap()[0];
    for k in [
        "id", "parent", "label", "labels", "created", "files", "bytes",
    ] {
        assert!(first.get(k).is_some(), "{k}");
    }

    let out = s.run(&["rewind", &id, "--to", "exec:1", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report = json(&out.stdout);
    assert_eq!(s.read("keep.txt"), "original\n");
    assert!(!s.ws.join("bot.txt").exists() && !s.ws.join("bot2.txt").exists());
    assert_eq!(
        s.read("operator.txt"),
        "mine\n",
        "the operator's file is not the run's to undo"
    );
    let bank = report["bank"]["snapshot"].as_str().unwrap().to_string();

    // Undo the rewind.
    let out = s.run(&["rewind", &id, "--restore-snapshot", &bank, "--json"]);
    assert!(out.status.success());
    assert!(s.ws.join("bot.txt").exists() && s.ws.join("bot2.txt").exists());
    assert_eq!(s.read("keep.txt"), "original\nedited\n");

    // A full-scope rewind takes the operator's file too.
    let out = s.run(&[
        "rewind",
        &id,
        "--to",
        "exec:1",
        "--restore-scope",
        "full",
        "--json",
    ]);
    assert!(out.status.success());
    assert!(!s.ws.join("operator.txt").exists());
    assert!(
        labels_of(&s, &id)
            .iter()
            .filter(|l| l.starts_with("bank:"))
            .count()
            >= 3
    );
}

#[test]
fn snapshot_reports_files_hashed_and_gaps() {
    let s = Scratch::new();
    std::fs::write(s.ws.join("a.txt"), "a").unwrap();
    std::os::unix::fs::symlink("a.txt", s.ws.join("link")).unwrap();
    std::fs::create_dir_all(s.ws.join("node_modules/x")).unwrap();
    std::fs::write(s.ws.join("node_modules/x/i.js"), "x").unwrap();
    std::fs::write(s.ws.join("big.bin"), vec![7u8; 2 * 1024 * 1024]).unwrap();
    let out = s
        .cmd()
        .env("CAIRN_WORKSPACE_MAX_FILE_MB", "1")
        .args(["snapshot", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out.stdout);
    for k in ["run", "id", "files", "bytes", "hashed", "skipped"] {
        assert!(v.get(k).is_some(), "{k}");
    }
    assert_eq!(v["files"], 1);
    assert_eq!(v["hashed"], 1);
    let skipped = v["skipped"].to_string();
    assert!(
        skipped.contains("link") && skipped.contains("big.bin"),
        "{skipped}"
    );
    // Unchanged: nothing read again, same snapshot (once the files are older
    // than the racy guard's slack, the stat cache vouches for them).
    std::thread::sleep(std::time::Duration::from_millis(2_200));
    let out = s
        .cmd()
        .env("CAIRN_WORKSPACE_MAX_FILE_MB", "1")
        .args(["snapshot", "--json", "--label", "gate:1"])
        .output()
        .unwrap();
    let w = json(&out.stdout);
    assert_eq!(
        w["hashed"], 1,
        "a file newer than the last capture's start is read again"
    );
    let out = s
        .cmd()
        .env("CAIRN_WORKSPACE_MAX_FILE_MB", "1")
        .args(["snapshot", "--json"])
        .output()
        .unwrap();
    let w = json(&out.stdout);
    assert_eq!(
        w["id"], v["id"],
        "an unchanged tree dedupes onto the same snapshot"
    );
    assert_eq!(w["id"], v["id"]);
    assert_eq!(w["run"], v["run"]);
    assert_eq!(
        s.run(&["snapshot", "--label", "bogus label"]).status.code(),
        Some(2)
    );
}

#[test]
fn a_tree_over_the_file_limit_is_refused_with_exit_4_and_says_how_to_raise_it() {
    let s = Scratch::new();
    let dir = s.ws.join("many");
    std::fs::create_dir_all(&dir).unwrap();
    for i in 0..101 {
        std::fs::File::create(dir.join(i.to_string())).unwrap();
    }
    let snapshot = |limit: &str| {
        s.cmd()
            .env("CAIRN_WORKSPACE_MAX_FILES", limit)
            .args(["snapshot", "--json"])
            .output()
            .unwrap()
    };
    let out = snapshot("100");
    assert_eq!(
        out.status.code(),
        Some(4),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("CAIRN_WORKSPACE_MAX_FILES"), "{err}");
    assert_eq!(snapshot("many").status.code(), Some(2));
    let out = snapshot("1000");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json(&out.stdout)["files"], 101);
}

#[test]
fn reindex_rebuilds_a_damaged_workspace_index_from_the_journal() {
    let s = Scratch::new();
    std::fs::write(s.ws.join("a.txt"), "before\n").unwrap();
    assert!(exec(&s, None, "echo one > a.txt").status.success());
    let id = s.only_session();
    assert!(exec(&s, Some(&id), "echo two > a.txt").status.success());
    let index = s
        .store
        .join("runs")
        .join(&id)
        .join("workspace")
        .join("index.json");
    std::fs::write(&index, b"{ garbage").unwrap();
    let out = s.run(&["rewind", &id, "--to", "exec:1"]);
    assert!(!out.status.success(), "a damaged index must not be trusted");
    assert!(String::from_utf8_lossy(&out.stderr).contains("reindex"));
    let out = s.run(&["reindex"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("workspace index of"));
    let out = s.run(&["rewind", &id, "--to", "exec:1", "--restore-scope", "full"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(s.read("a.txt"), "before\n");
    // A deleted index is rebuilt the same way.
    std::fs::remove_file(&index).unwrap();
    assert!(s.run(&["reindex"]).status.success());
    let out = s.run(&["rewind", &id, "--to", "exec:2", "--restore-scope", "full"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(s.read("a.txt"), "one\n");
}

#[test]
fn a_crafted_manifest_is_refused_with_exit_3_and_nothing_changes() {
    let s = Scratch::new();
    std::fs::write(s.ws.join("a.txt"), "a").unwrap();
    let out = s.run(&["snapshot", "--json"]);
    let v = json(&out.stdout);
    let (run, snap) = (v["run"].as_str().unwrap(), v["id"].as_str().unwrap());
    let path = s
        .store
        .join("runs")
        .join(run)
        .join("workspace/snapshots")
        .join(format!("{snap}.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replace("\"a.txt\"", "\"../escaped.txt\"");
    std::fs::write(&path, text).unwrap();
    std::fs::write(s.ws.join("a.txt"), "changed").unwrap();
    let out = s.run(&["rewind", run, "--restore-snapshot", snap]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(s.read("a.txt"), "changed");
    assert!(!s.dir.path().join("escaped.txt").exists());
}

#[test]
fn check_ignore_answers_like_git_and_explains_with_v() {
    let s = Scratch::new();
    std::fs::create_dir_all(s.ws.join(".git")).unwrap();
    std::fs::write(
        s.ws.join(".cairnignore"),
        "runs/**\n!runs/**/exports/*.mp4\n*.log\n",
    )
    .unwrap();
    let out = s.run(&[
        "check-ignore",
        "runs/a/b.txt",
        "runs/x/exports/v.mp4",
        "main.rs",
        "debug.log",
    ]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "runs/a/b.txt\ndebug.log\n"
    );
    let out = s.run(&["check-ignore", "-v", "debug.log", "runs/x/exports/v.mp4"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains(".cairnignore:3:*.log\tdebug.log"), "{text}");
    assert!(
        text.contains(".cairnignore:2:!runs/**/exports/*.mp4\truns/x/exports/v.mp4"),
        "{text}"
    );
    assert_eq!(s.run(&["check-ignore", "main.rs"]).status.code(), Some(1));
    assert_eq!(
        s.run(&["check-ignore", "../outside"]).status.code(),
        Some(2)
    );
}

#[test]
fn check_ignore_reads_nested_rule_files_like_git() {
    let s = Scratch::new();
    std::fs::create_dir_all(s.ws.join(".git")).unwrap();
    std::fs::create_dir_all(s.ws.join("app/gen")).unwrap();
    std::fs::write(s.ws.join(".gitignore"), "*.log\n").unwrap();
    std::fs::write(s.ws.join("app/.gitignore"), "/gen/\n!keep.log\n").unwrap();
    let out = s.run(&[
        "check-ignore",
        "-v",
        "app/gen/x.js",
        "app/keep.log",
        "gen/x.js",
    ]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text,
        "app/.gitignore:1:/gen/\tapp/gen/x.js\napp/.gitignore:2:!keep.log\tapp/keep.log\n"
    );
    assert_eq!(out.status.code(), Some(0));
    // Run from the subdirectory: paths are relative to it.
    let out = s.run(&[
        "-C",
        "app",
        "check-ignore",
        "gen/y.js",
        "keep.log",
        "other.log",
    ]);
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "gen/y.js\nother.log\n"
    );
}

#[test]
fn prune_keeps_what_snapshots_name_and_sweeps_the_rest() {
    let s = Scratch::new();
    std::fs::write(s.ws.join("a.txt"), "first version").unwrap();
    let out = exec(&s, None, "echo bot > b.txt");
    let doomed = json(&out.stdout)["id"].as_str().unwrap().to_string();
    let out = s.run(&["prune", "--dry-run", "--json"]);
    let v = json(&out.stdout);
    assert_eq!(
        (v["objects"].as_u64(), v["dry_run"].as_bool()),
        (Some(0), Some(true))
    );
    assert!(s.run(&["session", "rm", &doomed]).status.success());
    let out = s.run(&["prune", "--dry-run", "--json"]);
    let v = json(&out.stdout);
    assert_eq!(v["objects"], 2);
    assert!(v["bytes"].as_u64().unwrap() > 0);
    let out = s.run(&["prune", "--json"]);
    assert_eq!(json(&out.stdout)["objects"], 2);
    assert_eq!(json(&s.run(&["prune", "--json"]).stdout)["objects"], 0);
}

#[test]
fn the_agent_loop_versions_every_turn_and_rewind_fork_continues_from_a_turn() {
    let s = Scratch::new();
    let script = s.script("t.json", json!([
        {"text": "t1", "tool_calls": [call("w1", "write_file", json!({"path": "f.txt", "content": "one\n"}))]},
        {"text": "t2", "tool_calls": [call("w2", "write_file", json!({"path": "f.txt", "content": "two\n"}))]},
        {"text": "done"},
        {"text": "after the fork", "tool_calls": [call("w3", "write_file", json!({"path": "g.txt", "content": "fork\n"}))]},
        {"text": "fork done"}
    ]));
    let out = s.run(&[
        "run",
        "--model",
        &format!("script:{}", script.display()),
        "--json",
        "task",
    ]);
    assert!(out.status.success());
    let id = json(&out.stdout)["id"].as_str().unwrap().to_string();
    let labels = labels_of(&s, &id);
    for l in [
        "pre:turn:1",
        "post:turn:1",
        "pre:turn:2",
        "post:turn:2",
        "pre:turn:3",
        "post:turn:3",
        "pause:turn:3",
    ] {
        assert!(
            labels.contains(&l.to_string()),
            "{l} missing from {labels:?}"
        );
    }
    assert_eq!(s.read("f.txt"), "two\n");

    // Operator edit while the session waits; the resume reconciles it.
    std::fs::write(s.ws.join("notes.md"), "mine\n").unwrap();
    let out = s.run(&["rewind", &id, "--to", "turn:2", "--fork", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v = json(&out.stdout);
    assert_eq!(s.read("f.txt"), "one\n", "the files are as before turn 2");
    assert_eq!(s.read("notes.md"), "mine\n");
    let child = v["fork"].as_str().unwrap().to_string();
    let out = s.run(&["resume", &child, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recs = s.records(&child);
    let rec = recs.iter().find(|r| r["kind"] == "reconcile").unwrap();
    assert!(
        rec["changed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p == "notes.md"),
        "{rec}"
    );
    let told = recs
        .iter()
        .any(|r| r["kind"] == "user" && r["text"].as_str().unwrap().contains("notes.md"));
    assert!(told, "the model is told what changed");
}

#[test]
fn a_suspended_turn_is_marked_fail_and_the_resume_closes_the_window() {
    let s = Scratch::new();
    let script = s.script("t.json", json!([
        {"text": "slow", "tool_calls": [shell("s1", "echo a > a.txt; sleep 1"), shell("s2", "echo b > b.txt")]},
        {"text": "done"}
    ]));
    let mut child = s.spawn(&[
        "run",
        "--model",
        &format!("script:{}", script.display()),
        "task",
    ]);
    wait_until(20, "the first call", || s.ws.join("a.txt").exists());
    kill(&mut child, libc::SIGINT);
    assert!(child.wait().unwrap().success());
    let id = s.only_session();
    let labels = labels_of(&s, &id);
    assert!(labels.contains(&"fail:turn:1".to_string()), "{labels:?}");
    std::fs::write(s.ws.join("between.txt"), "operator\n").unwrap();
    assert!(s.run(&["resume", &id, "--json"]).status.success());
    let labels = labels_of(&s, &id);
    assert!(labels.contains(&"resume:turn:2".to_string()), "{labels:?}");
    assert!(labels.contains(&"post:turn:1".to_string()), "{labels:?}");
    // Rewinding turn 1 in run scope leaves the operator's file alone.
    let out = s.run(&["rewind", &id, "--to", "turn:1", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!s.ws.join("a.txt").exists() && !s.ws.join("b.txt").exists());
    assert_eq!(s.read("between.txt"), "operator\n");
}

#[test]
fn after_a_crash_the_cut_turns_writes_are_the_runs_not_the_operators() {
    let s = Scratch::new();
    let script = s.script(
        "t.json",
        json!([
            {"text": "write then hang", "tool_calls": [
                call("w", "write_file", json!({"path": "made.txt", "content": "by the run\n"})),
                shell("h", "echo started > started.txt; sleep 30")
            ]},
            {"text": "done"}
        ]),
    );
    let mut child = s.spawn(&[
        "run",
        "--model",
        &format!("script:{}", script.display()),
        "task",
    ]);
    wait_until(20, "the hanging call", || s.ws.join("started.txt").exists());
    kill(&mut child, libc::SIGKILL);
    child.wait().unwrap();
    std::fs::write(s.ws.join("operator.txt"), "mine\n").unwrap();
    let id = s.only_session();
    assert!(s.run(&["resume", &id, "--json"]).status.success());
    let labels = labels_of(&s, &id);
    let fail = labels
        .iter()
        .position(|l| l == "fail:turn:1")
        .expect("fail:turn:1");
    let resume = labels
        .iter()
        .position(|l| l == "resume:turn:2")
        .expect("resume:turn:2");
    assert!(fail < resume, "{labels:?}");
    let recs = s.records(&id);
    let changed = recs.iter().find(|r| r["kind"] == "reconcile").unwrap()["changed"].clone();
    // The crash cannot tell the operator's edit from the cut turn's: both are
    // closed as the run's, and nothing is wrongly blamed on the operator.
    assert!(!changed.to_string().contains("made.txt"), "{changed}");
    let out = s.run(&["rewind", &id, "--to", "turn:1", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!s.ws.join("made.txt").exists(), "the run's write is undone");
}

#[test]
fn a_source_directory_named_target_is_captured_and_a_cargo_target_is_not() {
    let s = Scratch::new();
    let route = s.ws.join("src/routes/target");
    std::fs::create_dir_all(&route).unwrap();
    std::fs::write(route.join("+page.svelte"), "<h1>target</h1>\n").unwrap();
    let build = s.ws.join("target/debug");
    std::fs::create_dir_all(&build).unwrap();
    std::fs::write(
        s.ws.join("target/CACHEDIR.TAG"),
        "Signature: 8a477f597d28d172789f06886806bc55\n# cargo\n",
    )
    .unwrap();
    std::fs::write(build.join("app"), "binary").unwrap();
    let out = s.run(&[
        "check-ignore",
        "-v",
        "target/debug/app",
        "src/routes/target/+page.svelte",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("CACHEDIR.TAG") && text.contains("target/debug/app"),
        "{text}"
    );
    assert!(!text.contains("+page.svelte"), "{text}");
    let out = s.run(&["snapshot", "--json"]);
    assert!(out.status.success());
    let id = json(&out.stdout)["id"].as_str().unwrap().to_string();
    let run = json(&out.stdout)["run"].as_str().unwrap().to_string();
    let manifest = std::fs::read_to_string(
        s.store
            .join("runs")
            .join(&run)
            .join("workspace/snapshots")
            .join(format!("{id}.json")),
    )
    .unwrap();
    assert!(manifest.contains("src/routes/target/+page.svelte"));
    assert!(!manifest.contains("target/debug/app"));
}

#[test]
fn a_run_whose_captures_fail_journals_that_versioning_stopped_and_why() {
    let s = Scratch::new();
    for i in 0..3 {
        std::fs::write(s.ws.join(format!("f{i}.txt")), "x").unwrap();
    }
    std::os::unix::fs::symlink("f0.txt", s.ws.join("link")).unwrap();
    let model = format!(
        "script:{}",
        s.script(
            "t.json",
            json!([
                {"text": "one", "tool_calls": [shell("s1", "echo y > f1.txt")]},
                {"text": "done"}
            ])
        )
        .display()
    );
    let out = s
        .cmd()
        .env("CAIRN_WORKSPACE_MAX_FILES", "2")
        .args(["run", "--model", &model, "task"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("workspace versioning stopped at pre:turn:1"),
        "{err}"
    );
    let id = s.only_session();
    let recs = s.records(&id);
    let off: Vec<&Value> = recs.iter().filter(|r| r["kind"] == "versioning").collect();
    assert_eq!(off.len(), 1, "{:?}", kinds(&recs));
    assert_eq!(off[0]["state"], "off");
    assert_eq!(off[0]["v"], 2);
    assert!(off[0]["reason"]
        .as_str()
        .unwrap()
        .contains("CAIRN_WORKSPACE_MAX_FILES"));
    assert!(!recs.iter().any(|r| r["kind"] == "snapshot"));
    assert_eq!(recs.last().unwrap()["reason"], "completed");
    let show = s.run(&["session", "show", &id, "--transcript"]);
    assert!(String::from_utf8_lossy(&show.stdout).contains("workspace versioning stopped"));

    // With room to capture, what is not captured is said once.
    let s2 = Scratch::new();
    std::fs::write(s2.ws.join("a.txt"), "a").unwrap();
    std::os::unix::fs::symlink("a.txt", s2.ws.join("link")).unwrap();
    let model = format!(
        "script:{}",
        s2.script(
            "t.json",
            json!([
                {"text": "one", "tool_calls": [shell("s1", "echo y > a.txt")]},
                {"text": "done"}
            ])
        )
        .display()
    );
    let out = s2.run(&["run", "--model", &model, "task"]);
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.matches("not captured: link").count(), 1, "{err}");
}

#[test]
fn a_change_list_that_cannot_be_computed_is_journaled_as_unknown_not_empty() {
    let s = Scratch::new();
    std::fs::write(s.ws.join("a.txt"), "a\n").unwrap();
    assert!(exec(&s, None, "echo one > a.txt").status.success());
    let id = s.only_session();
    // The head's manifest goes missing; then the operator edits a file.
    let snaps = s.store.join("runs").join(&id).join("workspace/snapshots");
    let head = s
        .records(&id)
        .iter()
        .rev()
        .find(|r| r["kind"] == "snapshot")
        .unwrap()["snapshot"]
        .as_str()
        .unwrap()
        .to_string();
    std::fs::remove_file(snaps.join(format!("{head}.json"))).unwrap();
    std::fs::write(s.ws.join("a.txt"), "edited by hand\n").unwrap();
    let out = exec(&s, Some(&id), "echo two > b.txt");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recs = s.records(&id);
    let reconcile = recs
        .iter()
        .rev()
        .find(|r| r["kind"] == "reconcile")
        .unwrap();
    assert_eq!(reconcile["changed"], json!([]));
    assert!(
        reconcile["unknown"].as_str().is_some_and(|u| !u.is_empty()),
        "{reconcile}"
    );
    assert_eq!(reconcile["v"], 2);
}

#[test]
fn snapshots_are_listed_from_the_store_when_the_workspace_is_gone() {
    let s = Scratch::new();
    let out = exec(&s, None, "echo 1 > one.txt");
    let id = json(&out.stdout)["id"].as_str().unwrap().to_string();
    let before = json(&s.run(&["rewind", &id, "--list-snapshots", "--json"]).stdout);
    assert!(!before.as_array().unwrap().is_empty());
    // The session's workspace is on another machine, or deleted: listing
    // reads only the store.
    std::fs::remove_dir_all(&s.ws).unwrap();
    let out = s
        .cmd()
        .current_dir(s.dir.path())
        .args(["rewind", &id, "--list-snapshots", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json(&out.stdout), before);
}
