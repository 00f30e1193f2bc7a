//! End-to-end crash and resume semantics (DESIGN §4.1) with real processes:
//! SIGKILL mid-tool, SIGINT suspend, and the exactly-once effects that follow.

mod common;

use common::*;
use serde_json::json;

fn script_path(s: &Scratch, turns: serde_json::Value) -> String {
    format!("script:{}", s.script("script.json", turns).display())
}

#[test]
fn sigkill_during_an_effectful_tool_records_unknown_and_never_repeats_it() {
    let s = Scratch::new();
    let model = script_path(
        &s,
        json!([
            {"text": "writing", "tool_calls": [shell("c1", "echo effect >> effects.log; sleep 30")]},
            {"text": "done"}
        ]),
    );
    let mut child = s.spawn(&["run", "--model", &model, "task"]);
    wait_until(20, "the effect", || lines(&s.ws.join("effects.log")) == 1);
    kill(&mut child, libc::SIGKILL);
    child.wait().unwrap();
    let id = s.only_session();
    let recs = s.records(&id);
    assert_eq!(
        kinds(&recs).last().unwrap(),
        "tool_start",
        "{:?}",
        kinds(&recs)
    );

    let out = s.run(&["resume", &id, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json(&out.stdout)["status"], "completed");
    assert!(String::from_utf8_lossy(&out.stderr).contains("unknown"));
    assert_eq!(
        lines(&s.ws.join("effects.log")),
        1,
        "the effect was repeated"
    );
    let recs = s.records(&id);
    let results = results_for(&recs, "c1");
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["outcome"], "unknown");
    assert!(results[0]["output"]
        .as_str()
        .unwrap()
        .contains("NOT run again"));
    // One tool_start only: it was not dispatched again.
    assert_eq!(recs.iter().filter(|r| r["kind"] == "tool_start").count(), 1);
    let out = s.run(&["verify", &id]);
    assert!(out.status.success());
}

#[test]
fn sigkill_during_a_read_only_tool_reruns_it() {
    let s = Scratch::new();
    std::fs::write(s.ws.join("notes.txt"), "contents before the crash\n").unwrap();
    let model = script_path(
        &s,
        json!([
            {"text": "reading", "tool_calls": [call("r1", "read_file", json!({"path": "notes.txt"}))]},
            {"text": "done"}
        ]),
    );
    // The test build's crash point holds the call in flight after its
    // `tool_start` until the process is killed.
    let mut child = s
        .cmd()
        .env("CAIRN_FAULT", "stall-after-tool-start")
        .args(["run", "--model", &model, "task"])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let id_dir = s.store.join("runs");
    wait_until(20, "the tool_start", || {
        std::fs::read_dir(&id_dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(false)
            && s.records_so_far(&s.only_session())
                .iter()
                .any(|r| r["kind"] == "tool_start")
    });
    std::thread::sleep(std::time::Duration::from_millis(100));
    kill(&mut child, libc::SIGKILL);
    child.wait().unwrap();
    std::fs::write(s.ws.join("notes.txt"), "contents after the crash\n").unwrap();
    let id = s.only_session();
    let out = s.run(&["resume", &id, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recs = s.records(&id);
    let results = results_for(&recs, "r1");
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["outcome"], "ok");
    assert!(results[0]["output"]
        .as_str()
        .unwrap()
        .contains("contents after the crash"));
    assert_eq!(
        recs.iter().filter(|r| r["kind"] == "tool_start").count(),
        2,
        "re-run journals a second tool_start"
    );
}

#[test]
fn a_crash_between_calls_reuses_results_and_runs_the_undispatched_call_once() {
    let s = Scratch::new();
    // Call 2 kills cairn itself (its parent) with SIGKILL: call 1's result is
    // journaled, call 2 is in flight, call 3 was never dispatched.
    let model = script_path(
        &s,
        json!([
            {"text": "three calls", "tool_calls": [
                shell("a", "echo a >> a.log"),
                shell("b", "echo b >> b.log; kill -9 $PPID; sleep 5"),
                shell("c", "echo c >> c.log")
            ]},
            {"text": "done"}
        ]),
    );
    let out = s.run(&["run", "--model", &model, "task"]);
    assert_eq!(out.status.code(), None, "cairn should have been killed");
    let id = s.only_session();
    let out = s.run(&["resume", &id, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        (
            lines(&s.ws.join("a.log")),
            lines(&s.ws.join("b.log")),
            lines(&s.ws.join("c.log"))
        ),
        (1, 1, 1)
    );
    let recs = s.records(&id);
    assert_eq!(results_for(&recs, "a")[0]["outcome"], "ok");
    assert_eq!(results_for(&recs, "b")[0]["outcome"], "unknown");
    assert_eq!(results_for(&recs, "c")[0]["outcome"], "ok");
    for c in ["a", "b", "c"] {
        assert_eq!(results_for(&recs, c).len(), 1, "{c}");
    }
    // The model was told: its next request saw the unknown outcome.
    assert_eq!(json(&out.stdout)["status"], "completed");
}

#[test]
fn sigint_suspends_after_the_tool_in_flight_and_resume_repeats_nothing() {
    let s = Scratch::new();
    let model = script_path(
        &s,
        json!([
            {"text": "two calls", "tool_calls": [
                shell("one", "echo start >> one.log; sleep 1; echo end >> one.log"),
                shell("two", "echo two >> two.log")
            ]},
            {"text": "finished"}
        ]),
    );
    let mut child = s.spawn(&["run", "--model", &model, "task"]);
    wait_until(20, "the first call", || lines(&s.ws.join("one.log")) == 1);
    kill(&mut child, libc::SIGINT);
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        lines(&s.ws.join("one.log")),
        2,
        "the tool in flight was finished"
    );
    assert_eq!(
        lines(&s.ws.join("two.log")),
        0,
        "the next call was not dispatched"
    );
    let id = s.only_session();
    let recs = s.records(&id);
    assert_eq!(recs.last().unwrap()["reason"], "suspended");

    let out = s.run(&["resume", &id, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json(&out.stdout)["status"], "completed");
    assert_eq!(
        (lines(&s.ws.join("one.log")), lines(&s.ws.join("two.log"))),
        (2, 1)
    );
    let recs = s.records(&id);
    assert_eq!(
        recs.iter().filter(|r| r["kind"] == "assistant").count(),
        2,
        "no model call repeated"
    );
    assert_eq!(
        recs.iter().filter(|r| r["kind"] == "tool_start").count(),
        2,
        "no tool call repeated"
    );
}

#[test]
fn a_second_sigint_stops_at_once_and_records_the_call_as_unknown() {
    let s = Scratch::new();
    let model = script_path(
        &s,
        json!([
            {"text": "slow", "tool_calls": [shell("slow", "echo x >> x.log; sleep 30")]},
            {"text": "done"}
        ]),
    );
    let mut child = s.spawn(&["run", "--model", &model, "task"]);
    let err = Stderr::of(&mut child);
    wait_until(20, "the call", || lines(&s.ws.join("x.log")) == 1);
    kill(&mut child, libc::SIGINT);
    err.wait_for(20, "stopping after the step in flight");
    kill(&mut child, libc::SIGINT);
    let status = exits_within(&mut child, 10, "a second SIGINT");
    assert_eq!(status.code(), Some(1), "{}", err.finish());
    let id = s.only_session();
    let recs = s.records(&id);
    assert_eq!(results_for(&recs, "slow")[0]["outcome"], "unknown");
    assert_eq!(recs.last().unwrap()["reason"], "interrupted");
}

#[test]
fn the_guard_names_what_changed_and_force_records_an_override() {
    let s = Scratch::new();
    let model = script_path(
        &s,
        json!([{"text": "first answer"}, {"text": "second answer"}]),
    );
    let out = s.run(&["run", "--model", &model, "--thinking", "low", "task"]);
    assert!(out.status.success());
    let id = s.only_session();
    let other = format!(
        "script:{}",
        s.script(
            "other.json",
            json!([{"text": "x"}, {"text": "y"}, {"text": "z"}])
        )
        .display()
    );
    let recorded = s.records(&id).len();
    let out = s.run(&[
        "resume",
        &id,
        "more",
        "--model",
        &other,
        "--thinking",
        "high",
    ]);
    assert_eq!(out.status.code(), Some(4));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("model was")
            && err.contains("thinking was low and is now high")
            && err.contains("--force"),
        "{err}"
    );
    assert_eq!(
        s.records(&id).len(),
        recorded,
        "a refused resume writes nothing"
    );

    let out = s.run(&[
        "resume",
        &id,
        "more",
        "--model",
        &other,
        "--thinking",
        "high",
        "--force",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let recs = s.records(&id);
    let ov = recs.iter().find(|r| r["kind"] == "override").unwrap();
    let fields: Vec<_> = ov["forced"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["model", "thinking"]);
    // The same settings again pass the guard without --force.
    let out = s.run(&[
        "resume",
        &id,
        "again",
        "--model",
        &other,
        "--thinking",
        "high",
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn budget_exhaustion_stops_the_run_and_a_raised_budget_resumes_it() {
    let s = Scratch::new();
    let model = script_path(
        &s,
        json!([
            {"text": "one", "tool_calls": [shell("s1", "echo 1 >> n.log")], "usage": {"input_tokens": 10, "output_tokens": 5}},
            {"text": "two", "tool_calls": [shell("s2", "echo 2 >> n.log")], "usage": {"input_tokens": 10, "output_tokens": 5}},
            {"text": "three", "usage": {"input_tokens": 10, "output_tokens": 5}}
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
    assert_eq!(json(&out.stdout)["status"], "budget_exhausted");
    let id = s.only_session();
    assert_eq!(lines(&s.ws.join("n.log")), 1);
    let last = s.records(&id).last().unwrap().clone();
    assert_eq!(last["totals"]["turns"], 1);
    assert!(last["detail"].as_str().unwrap().contains("--max-turns"));

    let out = s.run(&["resume", &id, "--max-turns", "5", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json(&out.stdout)["status"], "completed");
    assert_eq!(lines(&s.ws.join("n.log")), 2);
    let recs = s.records(&id);
    let ov = recs
        .iter()
        .find(|r| r["kind"] == "override")
        .expect("raised budget recorded");
    assert_eq!(ov["forced"][0]["field"], "max_turns");
    assert_eq!(recs.last().unwrap()["totals"]["turns"], 3);
    assert_eq!(recs.last().unwrap()["totals"]["cost"]["state"], "zero");

    // Lowering a budget is a change that needs --force.
    let out = s.run(&["resume", &id, "more", "--max-turns", "2"]);
    assert_eq!(out.status.code(), Some(4));
}

#[test]
fn resume_by_id_works_from_any_directory_and_continue_picks_this_repository() {
    let s = Scratch::new();
    let model = script_path(&s, json!([{"text": "a"}, {"text": "b"}, {"text": "c"}]));
    assert!(s.run(&["run", "--model", &model, "task"]).status.success());
    let id = s.only_session();
    let out = s
        .cmd()
        .current_dir(s.dir.path())
        .args(["resume", &id, "follow-up", "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = s.run(&["--continue", "and more", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(json(&out.stdout)["id"], id.as_str());
    let recs = s.records(&id);
    assert_eq!(recs.iter().filter(|r| r["kind"] == "user").count(), 3);
    // From a directory with no sessions, continue has nothing to pick.
    let elsewhere = s.dir.path().join("elsewhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let out = s
        .cmd()
        .current_dir(&elsewhere)
        .args(["continue"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_locked_session_is_refused_with_exit_4() {
    let s = Scratch::new();
    let model = script_path(
        &s,
        json!([
            {"text": "slow", "tool_calls": [shell("s", "echo go >> go.log; sleep 30")]},
            {"text": "done"}
        ]),
    );
    let mut child = s.spawn(&["run", "--model", &model, "task"]);
    wait_until(20, "the call", || lines(&s.ws.join("go.log")) == 1);
    let id = s.only_session();
    let out = s.run(&["resume", &id]);
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("pid {}", child.id())));
    kill(&mut child, libc::SIGKILL);
    child.wait().unwrap();
}

#[test]
fn bad_usage_is_exit_2() {
    let s = Scratch::new();
    assert_eq!(s.run(&["run", "task"]).status.code(), Some(2));
    assert_eq!(
        s.run(&["run", "--model", "gemini:pro", "task"])
            .status
            .code(),
        Some(2)
    );
    assert_eq!(
        s.run(&["run", "--model", "script:/nonexistent.json", "task"])
            .status
            .code(),
        Some(2)
    );
    let out = s
        .cmd()
        .env_remove("OPENAI_API_KEY")
        .args(["run", "--model", "openai:gpt-4o", "task"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("OPENAI_API_KEY"));
}

/// A workspace capture (here one that stalls for good, a test-only fault
/// point) does not hold up a stop: the first SIGINT is seen and said while
/// it runs, the second stops the run at once, and nothing of the abandoned
/// capture is journaled.
#[test]
fn a_second_sigint_during_a_slow_capture_stops_at_once() {
    let s = Scratch::new();
    std::fs::write(s.ws.join("a.txt"), "a\n").unwrap();
    let model = script_path(&s, json!([{"text": "never asked"}]));
    let mut child = s
        .cmd()
        .env("CAIRN_FAULT", "stall-in-capture")
        .args(["run", "--model", &model, "task"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let err = Stderr::of(&mut child);
    err.wait_for(20, "cairn: fault: the capture at pre:turn:1 stalls");
    kill(&mut child, libc::SIGINT);
    err.wait_for(20, "stopping after the step in flight");
    kill(&mut child, libc::SIGINT);
    err.wait_for(20, "stopping now");
    let status = exits_within(&mut child, 10, "a second SIGINT during a capture");
    assert_eq!(status.code(), Some(1), "{}", err.finish());
    let id = s.only_session();
    let recs = s.records(&id);
    assert_eq!(recs.last().unwrap()["reason"], "interrupted");
    assert!(!kinds(&recs).contains(&"assistant".to_string()), "{recs:?}");
    assert!(!kinds(&recs).contains(&"snapshot".to_string()), "{recs:?}");
    let out = s.run(&["verify", &id]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
