//! The terminal UI end to end (DESIGN §11): the real binary in a
//! pseudo-terminal, driven by keys, its screen read through a terminal
//! emulator, with the scripted provider.

mod common;

use std::path::Path;
use std::time::Duration;

use cairn_testkit::pty::{Pty, Spawn};
use common::{call, kinds, shell, Scratch};
use serde_json::json;

const WAIT: Duration = Duration::from_secs(30);

fn open(s: &Scratch, args: &[&str], env: &[(&str, &str)], cols: u16, rows: u16) -> Pty {
    let bin = assert_cmd::cargo::cargo_bin("cairn");
    let mut vars = vec![
        ("CAIRN_STORE".to_string(), s.store.display().to_string()),
        (
            "CAIRN_PRICES".to_string(),
            s.dir.path().join("no-prices.json").display().to_string(),
        ),
        ("CAIRN_FAULT".to_string(), String::new()),
        ("CAIRN_MODEL".to_string(), String::new()),
    ];
    vars.extend(env.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    Pty::spawn(Spawn {
        program: Path::new(&bin),
        args: args.iter().map(|a| a.to_string()).collect(),
        cwd: s.ws.clone(),
        env: vars,
        cols,
        rows,
    })
    .expect("cairn starts on a pty")
}

fn wait(p: &Pty, needle: &str) -> String {
    p.wait_for(needle, WAIT)
        .unwrap_or_else(|e| panic!("waiting for {needle:?}: {e}"))
}

fn send(p: &mut Pty, keys: &str) {
    p.send(keys.as_bytes()).expect("keys reach cairn");
}

/// Types a message and waits until the session is idle again.
fn say(p: &mut Pty, text: &str, until: &str) -> String {
    send(p, text);
    send(p, "\r");
    wait(p, until);
    p.wait_until(|s| s.contains(" idle ·"), WAIT)
        .unwrap_or_else(|e| panic!("idle after {text:?}: {e}"))
}

fn esc_esc(p: &mut Pty) {
    send(p, "\x1b");
    std::thread::sleep(Duration::from_millis(150));
    send(p, "\x1b");
}

fn session_id(s: &Scratch, not: &[&str]) -> Vec<String> {
    let mut runs: Vec<String> = std::fs::read_dir(s.store.join("runs"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|r| !not.contains(&r.as_str()))
        .collect();
    runs.sort();
    runs
}

#[test]
fn rewind_undoes_a_shell_edit_undo_puts_it_back_and_the_operators_edit_is_left_alone() {
    let s = Scratch::new();
    std::fs::write(s.ws.join("g"), "gone soon\n").unwrap();
    let script = s.script(
        "three.json",
        json!([
            {"text": "Writing f.", "tool_calls": [call("w1", "write_file", json!({"path": "f", "content": "one\n"}))]},
            {"text": "f holds one."},
            {"text": "Running the shell.", "tool_calls": [shell("s1", "sh -c 'echo x > f; rm g'")]},
            {"text": "The shell ran."},
            {"text": "You are welcome."}
        ]),
    );
    let model = format!("script:{}", script.display());
    let mut p = open(&s, &["--model", &model], &[], 80, 24);
    wait(&p, "new ·");
    say(&mut p, "write f", "f holds one.");
    say(&mut p, "run the shell", "The shell ran.");
    assert_eq!(s.read("f"), "x\n");
    assert!(!s.ws.join("g").exists());
    // The operator edits a file by hand between two turns.
    std::fs::write(s.ws.join("notes.md"), "mine\n").unwrap();
    let screen = say(&mut p, "thanks", "You are welcome.");
    assert!(screen.contains("● shell"), "{screen}");
    let parent = session_id(&s, &[]);
    assert_eq!(parent.len(), 1);
    let parent = parent[0].clone();

    // Esc Esc opens the rewind picker, focus on "now": a stray Enter does nothing.
    esc_esc(&mut p);
    let screen = wait(&p, "go back to before which turn?");
    assert!(screen.contains("› now (change nothing)"), "{screen}");
    assert!(
        screen.contains("2. run the shell · 2 file(s): f, g"),
        "{screen}"
    );
    send(&mut p, "\r");
    p.wait_until(|s| !s.contains("go back to before which turn?"), WAIT)
        .unwrap();
    assert_eq!(s.read("f"), "x\n", "a stray Enter changed nothing");

    // /rewind to before the shell's turn: code and conversation.
    send(&mut p, "/rewind\r");
    wait(&p, "go back to before which turn?");
    send(&mut p, "\x1b[A\x1b[A\r");
    wait(&p, "› code and conversation");
    send(&mut p, "\r");
    let confirm = wait(&p, "Enter rewinds");
    assert!(confirm.contains("f  changed +1 -1"), "{confirm}");
    assert!(confirm.contains("g  created +1 -0"), "{confirm}");
    assert!(
        confirm.contains("notes.md") && confirm.contains("yours"),
        "the operator's edit is listed as left alone: {confirm}"
    );
    send(&mut p, "\r");
    let screen = wait(&p, "files put back to before turn:3");
    assert_eq!(s.read("f"), "one\n", "f is as it was before the turn");
    assert_eq!(s.read("g"), "gone soon\n", "g is back, exactly");
    assert_eq!(
        s.read("notes.md"),
        "mine\n",
        "the operator's edit is left alone"
    );
    // The conversation went back too: this is a fork, the message put back.
    assert!(
        screen.contains("› run the shell"),
        "composer prefilled: {screen}"
    );
    let child = session_id(&s, &[&parent]);
    assert_eq!(child.len(), 1, "one fork");
    let child = child[0].clone();

    // /undo puts the rewound state back.
    send(&mut p, "\x15/undo\r");
    wait(&p, "undone: the files are as they were");
    assert_eq!(s.read("f"), "x\n");
    assert!(!s.ws.join("g").exists());
    assert_eq!(s.read("notes.md"), "mine\n");

    // /fork, then /tree shows the lineage.
    send(&mut p, "/fork\r");
    wait(&p, "; this screen");
    send(&mut p, "/tree\r");
    let tree = wait(&p, "lineage");
    let tree = p
        .wait_until(|t| t.contains("← this session"), WAIT)
        .unwrap_or(tree);
    assert!(tree.contains(&parent), "the parent: {tree}");
    assert!(tree.contains(&child), "the child: {tree}");
    assert!(tree.contains("└─"), "{tree}");

    // A narrow terminal re-lays the screen.
    p.resize(40, 12).unwrap();
    let narrow = p
        .wait_until(
            |t| {
                t.lines()
                    .any(|l| l.starts_with(" idle · ") && l.chars().count() <= 40)
            },
            WAIT,
        )
        .unwrap();
    assert!(narrow.lines().all(|l| l.chars().count() <= 40), "{narrow}");

    // Ctrl-D on the empty composer quits; the sessions verify.
    send(&mut p, "\x04");
    assert_eq!(p.wait_exit(WAIT), Some(Some(0)));
    for id in [&parent, &child] {
        let out = s.run(&["verify", id]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

#[test]
fn a_tui_killed_mid_turn_resumes_with_the_same_transcript_and_the_call_unknown() {
    let s = Scratch::new();
    let script = s.script(
        "slow.json",
        json!([
            {"text": "Starting the long job.", "tool_calls": [shell("long", "touch started; sleep 60; touch finished")]},
            {"text": "I see the job's outcome is unknown; I will not rerun it blindly."}
        ]),
    );
    let model = format!("script:{}", script.display());
    let mut p = open(&s, &["--model", &model], &[], 80, 24);
    wait(&p, "new ·");
    send(&mut p, "run the long job\r");
    let before = wait(&p, "running…");
    common::wait_until(20, "the shell started", || s.ws.join("started").exists());
    p.signal(libc::SIGKILL).unwrap();
    assert_eq!(p.wait_exit(WAIT), Some(None));
    drop(p);
    assert!(before.contains("Starting the long job."), "{before}");

    let id = session_id(&s, &[]).remove(0);
    let mut p = open(&s, &["--resume", &id], &[], 80, 24);
    let screen = wait(&p, "stopped mid-turn");
    assert!(screen.contains("› run the long job"), "{screen}");
    assert!(screen.contains("Starting the long job."), "{screen}");
    assert!(screen.contains("● shell"), "{screen}");
    assert!(
        screen.contains("in flight when the last process stopped"),
        "{screen}"
    );
    // Enter continues: the in-flight call is recorded unknown, never re-run.
    send(&mut p, "\r");
    let screen = wait(&p, "I will not rerun it blindly.");
    assert!(screen.contains("⎿ unknown"), "{screen}");
    assert!(!s.ws.join("finished").exists());
    let records = s.records(&id);
    let results = common::results_for(&records, "long");
    assert_eq!(results.len(), 1);
    assert_eq!(results[0]["outcome"], "unknown");
    send(&mut p, "\x04");
    assert_eq!(p.wait_exit(WAIT), Some(Some(0)));
}

#[test]
fn declining_an_approval_records_it_refused_and_runs_nothing() {
    let s = Scratch::new();
    let script = s.script(
        "ask.json",
        json!([
            {"text": "May I?", "tool_calls": [shell("t1", "touch ran")]},
            {"text": "Understood, I did not run it."}
        ]),
    );
    let model = format!("script:{}", script.display());
    let mut p = open(
        &s,
        &["--model", &model, "--approve", "shell"],
        &[("NO_COLOR", "1")],
        80,
        24,
    );
    wait(&p, "new ·");
    send(&mut p, "touch a file\r");
    let screen = wait(&p, "y runs it · n declines");
    assert!(screen.contains("allow shell"), "{screen}");
    assert!(screen.contains("approve?"), "{screen}");
    send(&mut p, "n");
    let screen = wait(&p, "Understood, I did not run it.");
    assert!(screen.contains("⎿ refused"), "{screen}");
    assert!(!s.ws.join("ran").exists(), "nothing ran");
    let id = session_id(&s, &[]).remove(0);
    let records = s.records(&id);
    let results = common::results_for(&records, "t1");
    assert_eq!(results[0]["outcome"], "refused");
    assert!(
        !records.iter().any(|r| r["kind"] == "tool_start"),
        "{:?}",
        kinds(&records)
    );
    // The wait was a pause: window.
    assert!(records
        .iter()
        .any(|r| r["kind"] == "snapshot" && r["label"] == "pause:turn:1"));
    send(&mut p, "\x04");
    assert_eq!(p.wait_exit(WAIT), Some(Some(0)));
}

#[test]
fn a_hangup_suspends_after_the_step_in_flight() {
    let s = Scratch::new();
    let script = s.script(
        "hup.json",
        json!([
            {"text": "Working.", "tool_calls": [shell("w", "sleep 1; touch done")]},
            {"text": "never reached"}
        ]),
    );
    let model = format!("script:{}", script.display());
    let mut p = open(&s, &["--model", &model], &[], 80, 24);
    wait(&p, "new ·");
    send(&mut p, "work\r");
    wait(&p, "running…");
    p.signal(libc::SIGHUP).unwrap();
    assert_eq!(p.wait_exit(WAIT), Some(Some(0)), "it closes once suspended");
    assert!(s.ws.join("done").exists(), "the step in flight finished");
    let id = session_id(&s, &[]).remove(0);
    let records = s.records(&id);
    let last = records.last().unwrap();
    assert_eq!(last["kind"], "terminal");
    assert_eq!(last["reason"], "suspended");
}

#[test]
fn off_a_terminal_bare_cairn_prints_help_and_exits_2() {
    let s = Scratch::new();
    let out = s.run(&[]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Usage"));
}

#[test]
fn diff_cost_checkpoints_sessions_help_and_the_other_rewinds() {
    let s = Scratch::new();
    let script = s.script(
        "more.json",
        json!([
            {"text": "Writing.", "tool_calls": [call("w1", "write_file", json!({"path": "a.txt", "content": "1\n2\n"}))], "usage": {"input_tokens": 100, "output_tokens": 7}},
            {"text": "Wrote a.txt."},
            {"text": "Editing.", "tool_calls": [call("e1", "edit_file", json!({"path": "a.txt", "old": "2\n", "new": "two\nthree\n"}))]},
            {"text": "Edited a.txt."}
        ]),
    );
    let model = format!("script:{}", script.display());
    let mut p = open(&s, &["--model", &model], &[], 80, 24);
    wait(&p, "new ·");
    say(&mut p, "make a.txt", "Wrote a.txt.");
    say(&mut p, "edit a.txt", "Edited a.txt.");
    let edited = s.read("a.txt");
    assert!(edited.contains("three"), "{edited}");

    send(&mut p, "/diff\r");
    let screen = wait(
        &p,
        "what the session changed since turn:3 began (your message 2)",
    );
    assert!(screen.contains("a.txt  changed +2 -1"), "{screen}");
    send(&mut p, "/diff 1\r");
    let screen = wait(&p, "since turn:1 began (your message 1)");
    assert!(screen.contains("a.txt  created +3 -0"), "{screen}");

    send(&mut p, "/cost\r");
    let screen = wait(&p, "input + ");
    assert!(
        screen.contains("100 input + 7 output = 107 tokens"),
        "{screen}"
    );

    send(&mut p, "/checkpoint save\r");
    let screen = wait(&p, "saved");
    let cp = screen
        .split_whitespace()
        .find(|w| w.starts_with("cp_"))
        .expect("a checkpoint id")
        .to_string();
    send(&mut p, "/checkpoint list\r");
    wait(&p, "checkpoints");
    std::fs::write(s.ws.join("a.txt"), "changed by hand\n").unwrap();
    send(&mut p, &format!("/checkpoint restore {cp}\r"));
    wait(&p, "restored");
    assert_eq!(s.read("a.txt"), edited, "the checkpoint put a.txt back");

    send(&mut p, "/help\r");
    wait(&p, "keys and commands");
    send(&mut p, "x");
    p.wait_until(|t| !t.contains("keys and commands"), WAIT)
        .unwrap();

    send(&mut p, "/nonsense\r");
    wait(&p, "not a command here");

    let id = session_id(&s, &[]).remove(0);
    send(&mut p, "/sessions\r");
    let screen = wait(&p, "sessions of this repository");
    assert!(screen.contains(&id), "{screen}");
    send(&mut p, "\x1b");
    p.wait_until(|t| !t.contains("sessions of this repository"), WAIT)
        .unwrap();

    // Code only: the files go back, the conversation stays.
    send(&mut p, "/rewind\r");
    wait(&p, "go back to before which turn?");
    send(&mut p, "\x1b[A\r");
    wait(&p, "› code and conversation");
    send(&mut p, "\x1b[B\x1b[B\r");
    wait(&p, "Enter rewinds");
    send(&mut p, "\r");
    wait(&p, "files put back to before turn:3");
    assert_eq!(s.read("a.txt"), "1\n2\n");
    assert_eq!(session_id(&s, &[]).len(), 1, "no fork for code only");

    // Conversation only: a fork before turn:3 (the second message); the files stay.
    send(&mut p, "/rewind\r");
    wait(&p, "go back to before which turn?");
    send(&mut p, "\x1b[A\r");
    wait(&p, "› code and conversation");
    send(&mut p, "\x1b[B\r");
    let screen = wait(&p, "the conversation goes back to before turn:3");
    assert!(
        screen.contains("› edit a.txt"),
        "the message is put back: {screen}"
    );
    assert_eq!(s.read("a.txt"), "1\n2\n");
    assert_eq!(session_id(&s, &[]).len(), 2, "a fork");
    // The fork goes on from there: its turn 3 is the script's turn 3 again.
    send(&mut p, "\r");
    common::wait_until(20, "the fork's edit", || s.read("a.txt").contains("three"));
    p.wait_until(
        |t| t.contains(" idle ·") && t.matches("Edited a.txt.").count() == 1,
        WAIT,
    )
    .unwrap();

    // /pause with nothing running says so; /quit leaves.
    send(&mut p, "/pause\r");
    wait(&p, "nothing is running");
    send(&mut p, "/quit\r");
    assert_eq!(p.wait_exit(WAIT), Some(Some(0)));
}

#[test]
fn a_session_that_cannot_be_resumed_is_refused_as_resume_refuses_it() {
    let s = Scratch::new();
    let script = s.script("one.json", json!([{"text": "hi"}]));
    let other = s.script("other.json", json!([{"text": "hi"}]));
    let out = s.run(&[
        "run",
        "--model",
        &format!("script:{}", script.display()),
        "hello",
    ]);
    assert!(out.status.success());
    let id = s.only_session();
    let changed = format!("script:{}", other.display());
    let mut p = open(&s, &["--resume", &id, "--model", &changed], &[], 80, 24);
    // The terminal is given back, and the guard's refusal is the exit code.
    assert_eq!(p.wait_exit(WAIT), Some(Some(4)));
    let screen = p.screen();
    assert!(
        screen.contains("model"),
        "the changed field is named: {screen}"
    );
    assert!(screen.contains("--force"), "{screen}");
}

#[test]
fn mcp_servers_are_refused_in_the_tui_not_ignored() {
    let s = Scratch::new();
    let script = s.script("one.json", json!([{"text": "hi"}]));
    let out = s.run(&[
        "run",
        "--model",
        &format!("script:{}", script.display()),
        "hello",
    ]);
    assert!(out.status.success());
    let id = s.only_session();
    let cfg = s.dir.path().join("mcp.json");
    std::fs::write(&cfg, r#"{"mcpServers": {}}"#).unwrap();
    for args in [
        vec!["--resume", id.as_str(), "--mcp", cfg.to_str().unwrap()],
        vec!["--continue", "--mcp", cfg.to_str().unwrap()],
    ] {
        let mut p = open(&s, &args, &[], 100, 24);
        assert_eq!(p.wait_exit(WAIT), Some(Some(2)), "{args:?}");
        let screen = p.screen();
        assert!(
            screen.contains("--mcp is not available in the terminal UI"),
            "{screen}"
        );
    }
}

/// A person's message is theirs whatever it starts with: one that starts
/// with `cairn: ` is a rewind point that takes the files back to before its
/// own turn, and cairn's own note to the model (what the operator changed
/// between turns) is journaled as cairn's and is no point.
#[test]
fn a_persons_message_starting_with_cairn_is_a_rewind_point_and_cairns_notes_are_not() {
    let s = Scratch::new();
    let script = s.script(
        "two.json",
        json!([
            {"text": "Writing f.", "tool_calls": [call("w1", "write_file", json!({"path": "f", "content": "one\n"}))]},
            {"text": "f holds one."},
            {"text": "Writing g.", "tool_calls": [call("w2", "write_file", json!({"path": "g", "content": "two\n"}))]},
            {"text": "g holds two."}
        ]),
    );
    let model = format!("script:{}", script.display());
    let mut p = open(&s, &["--model", &model], &[], 80, 24);
    wait(&p, "new ·");
    say(&mut p, "cairn: write f", "f holds one.");
    // The operator edits a file between two turns: cairn tells the model.
    std::fs::write(s.ws.join("notes.md"), "mine\n").unwrap();
    say(&mut p, "write g", "g holds two.");
    let id = session_id(&s, &[]).remove(0);
    let users: Vec<serde_json::Value> = s
        .records(&id)
        .into_iter()
        .filter(|r| r["kind"] == "user")
        .collect();
    assert_eq!(users.len(), 3, "{users:?}");
    assert_eq!(users[0]["text"], "cairn: write f");
    assert_eq!(
        users[0]["v"], 5,
        "an older cairn must not take it for a note"
    );
    assert!(users[0].get("origin").is_none(), "{}", users[0]);
    assert_eq!(users[1]["origin"], "cairn", "{}", users[1]);
    assert!(users[2].get("origin").is_none(), "{}", users[2]);

    esc_esc(&mut p);
    let screen = wait(&p, "go back to before which turn?");
    assert!(
        screen.contains("1. cairn: write f · 1 file(s): f"),
        "{screen}"
    );
    assert!(screen.contains("2. write g · 1 file(s): g"), "{screen}");
    assert!(
        !screen.contains("3. "),
        "cairn's note is no point: {screen}"
    );
    // Up to the person's `cairn: ` message: back to before its own turn.
    send(&mut p, "\x1b[A\x1b[A\r");
    wait(&p, "› code and conversation");
    send(&mut p, "\r");
    wait(&p, "Enter rewinds");
    send(&mut p, "\r");
    wait(&p, "files put back to before turn:1");
    assert!(!s.ws.join("f").exists(), "f was made in turn 1");
    assert!(!s.ws.join("g").exists());
    assert_eq!(s.read("notes.md"), "mine\n", "the operator's file stays");
}

/// `/resume` takes what the command line takes: a name, a unique prefix,
/// `@last`; a reference that names nothing says so and opens nothing.
#[test]
fn resume_in_the_tui_takes_a_name_a_prefix_or_last() {
    let s = Scratch::new();
    let script = s.script("one.json", json!([{"text": "hi"}, {"text": "again"}]));
    let model = format!("script:{}", script.display());
    let mut ids = Vec::new();
    for (name, task) in [
        ("greeter", "first task here"),
        ("other", "second task here"),
    ] {
        let out = s.run(&["run", "--model", &model, "--name", name, "--json", task]);
        assert!(out.status.success());
        ids.push(json_of(&out.stdout)["id"].as_str().unwrap().to_owned());
    }
    let n = (4..26).find(|&n| ids[0][..n] != ids[1][..n]).unwrap();
    let second_prefix = ids[1][..n].to_ascii_lowercase();
    let mut p = open(&s, &["--model", &model], &[], 100, 24);
    wait(&p, "new ·");
    send(&mut p, "/resume nothing-like-it\r");
    wait(&p, "no session matches `nothing-like-it`");
    // Each session's transcript shows its own task: the one opened.
    for (reference, task, not) in [
        ("greeter", "first task here", "second task here"),
        (
            second_prefix.as_str(),
            "second task here",
            "first task here",
        ),
        ("greeter", "first task here", "second task here"),
        ("@last", "second task here", "first task here"),
    ] {
        send(&mut p, &format!("/resume {reference}\r"));
        let screen = p
            .wait_until(|s| s.contains(task) && !s.contains(not), WAIT)
            .unwrap_or_else(|e| panic!("/resume {reference}: {e}"));
        assert!(
            !screen.contains("no session matches"),
            "{reference}: {screen}"
        );
    }
}

fn json_of(b: &[u8]) -> serde_json::Value {
    serde_json::from_slice(b).unwrap()
}
