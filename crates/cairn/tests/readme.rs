//! The README is tested (the harness and its rules: `common/readme.rs`):
//! every `cairn` command it shows exists, and its quick starts run — cairn's
//! own agent's here against the mock model API, the SDK one with the
//! official Python SDK (`#[ignore]`d: `.ci/run` installs it), Claude Code's
//! and Codex's with the real agents (in `real_agents.rs`).

mod common;
#[path = "common/readme.rs"]
mod readme;

use std::collections::HashMap;

use cairn_testkit::upstream::{Reply, Script, Upstream};
use common::*;
use readme::{quick_start_env, Cli, Console};
use serde_json::json;

fn cli() -> Cli {
    Cli::new(assert_cmd::cargo::cargo_bin("cairn"))
}

#[test]
fn every_cairn_command_in_the_readme_exists() {
    let text = readme::text();
    let found = readme::cairn_commands(&text);
    let examples = found
        .iter()
        .filter(|f| f.mode == readme::Mode::Example)
        .count();
    // The synopsis alone names every command; the examples are many.
    assert!(found.len() > 100 && examples > 20, "{}", found.len());
    let mut cli = cli();
    let errors: Vec<String> = found
        .iter()
        .filter_map(|f| {
            cli.check(f)
                .err()
                .map(|e| format!("README.md line {}: {}\n    {e}", f.line, f.source))
        })
        .collect();
    assert!(errors.is_empty(), "{}", errors.join("\n"));
}

/// The checks would have caught what a newcomer hit (`cairn show`, which is
/// `cairn session show`), and the like, wherever it was written; and they
/// pass what is right.
#[test]
fn a_command_that_does_not_exist_fails_the_check() {
    let bad = [
        "```sh\ncairn show 01K4Z8M2X6Q9T3V7B1N5R0HJWD\n```",
        "```console\n$ cairn show ID\n```",
        "```sh\ncairn sessions --bogus\n```",
        "```sh\ncairn gateway --replay sometimes\n```",
        "```sh\nID=$(cairn sesions --json | head -1)\n```",
        "```sh\nlaptop$ cairn rewind ID --too turn:1\n```",
        "```\ncairn session shw ID [--json]\n```",
        "```\ncairn checkpoint (save ID [--pathz P…] | ls ID) [--json]\n```",
        "```\ncairn run [--model SPEC]\n          [--max-turnz N]\n```",
        "Then run `cairn show ID` to see it.",
        "Use `cairn wrap claude --binary PATH`.",
    ];
    let good = [
        "```sh\ncairn session show 01K4Z8M2X6Q9T3V7B1N5R0HJWD --json\n```",
        "```console\n$ cairn wrap claude -- -p \"fix it\" --bogus-for-claude\nout\n```",
        "```sh\nID=$(cairn sessions --json | head -1); cairn verify $ID  # why\n```",
        "```\ncairn checkpoint (save ID [--path P…] | ls ID) [--json]\ncairn --resume ID | --continue\n```",
        "Then run `cairn session show ID` or `cairn sessions | head`.",
    ];
    let mut cli = cli();
    for text in bad {
        let found = readme::cairn_commands(text);
        assert!(!found.is_empty(), "nothing found in {text:?}");
        assert!(
            found.iter().any(|f| cli.check(f).is_err()),
            "not caught: {text:?}"
        );
    }
    for text in good {
        let found = readme::cairn_commands(text);
        assert!(!found.is_empty(), "nothing found in {text:?}");
        for f in &found {
            assert_eq!(cli.check(f), Ok(()), "{text:?}");
        }
    }
}

#[test]
fn shell_lines_split_into_commands() {
    let rows: &[(&str, &[&[&str]])] = &[
        ("cairn sessions", &[&["cairn", "sessions"]]),
        (
            "cairn run \"fix it\" --json | jq .id",
            &[&["cairn", "run", "fix it", "--json"], &["jq", ".id"]],
        ),
        (
            "ID=$(cairn sessions --json | head -1)",
            &[
                &["cairn", "sessions", "--json"],
                &["head", "-1"],
                &["ID=$(…)"],
            ],
        ),
        (
            "cairn gateway --run $ID & # later",
            &[&["cairn", "gateway", "--run", "$ID"]],
        ),
        (
            "cairn verify --all > out.txt 2>&1; echo 'a | b'",
            &[&["cairn", "verify", "--all"], &["echo", "a | b"]],
        ),
    ];
    for (line, want) in rows {
        let got = readme::shell_commands(line);
        let want: Vec<Vec<String>> = want
            .iter()
            .map(|c| c.iter().map(|w| w.to_string()).collect())
            .collect();
        assert_eq!(got, want, "{line}");
    }
}

#[test]
fn output_is_matched_with_wildcards_and_ids_are_bound() {
    let none = HashMap::new();
    let id = "01M91EMTF6CNWZH7PCXVFNS41Y";
    let rows: &[(&[&str], &[String], bool)] = &[
        (&["a", "b"], &["a".into(), "b".into()], true),
        (&["a"], &["a".into(), "b".into()], false),
        (&["…"], &[], true),
        (&["…", "b"], &["a".into(), "x".into(), "b".into()], true),
        (&["a …"], &["a 1.5 s".into()], true),
        (&["a … s"], &["a 1.5 x".into()], false),
        (
            &["session 01K4Z8M2X6Q9T3V7B1N5R0HJWD (claude:1)"],
            &[format!("session {id} (claude:1)")],
            true,
        ),
        (
            &[
                "in 01K4Z8M2X6Q9T3V7B1N5R0HJWD",
                "undo 01K4Z8M2X6Q9T3V7B1N5R0HJWD",
            ],
            &[format!("in {id}"), "undo 01M91EMTGSDJY1D08VHQ3SE51T".into()],
            false,
        ),
        (
            &["session 01K4Z8M2X6Q9T3V7B1N5R0HJWD"],
            &["session 01M91EMTF6".into()],
            false,
        ),
    ];
    for (expected, actual, ok) in rows {
        let actual: Vec<&str> = actual.iter().map(String::as_str).collect();
        let got = readme::match_lines(expected, &actual, &none);
        assert_eq!(got.is_some(), *ok, "{expected:?} against {actual:?}");
    }
    let bound =
        readme::match_line("id 01K4Z8M2X6Q9T3V7B1N5R0HJWD", &format!("id {id}"), &none).unwrap();
    assert_eq!(bound["01K4Z8M2X6Q9T3V7B1N5R0HJWD"], id);
}

#[test]
fn the_quick_start_with_cairns_own_agent_runs() {
    let s = Scratch::new();
    let upstream = Upstream::start(Script::by_turn(vec![
        Reply::text("I'll add the flag.").with_tool_call(
            "write_file",
            json!({"path": "VERBOSE.md", "content": "--verbose prints each step\n"}),
        ),
        Reply::text("Added `--verbose`."),
    ]));
    let mut console = Console::new(s.ws.clone(), quick_start_env(&s, &upstream));
    console.run(&readme::quick_start("cairn"));
    println!("{}", console.transcript);
    // The rewind at its end put the workspace back.
    assert!(!s.ws.join("VERBOSE.md").exists());
    assert_eq!(upstream.count(), 2);
}

#[test]
#[ignore = "needs the official Python SDKs: .ci/run installs them"]
fn the_quick_start_with_an_sdk_script_runs() {
    let python = cairn_testkit::python::interpreter().unwrap_or_else(|e| panic!("{e}"));
    let s = Scratch::new();
    let upstream = Upstream::start(Script::always(Reply::text(
        "Stone, a journal, and a promise.",
    )));
    let mut env = quick_start_env(&s, &upstream);
    // `python3` is the SDK's interpreter.
    readme::with_path_first(&mut env, python.path().parent().unwrap());
    let mut console = Console::new(s.ws.clone(), env);
    console.run(&readme::quick_start("sdk"));
    println!("{}", console.transcript);
    assert_eq!(s.read("answer.txt"), "Stone, a journal, and a promise.");
    assert_eq!(upstream.count(), 1);
}
