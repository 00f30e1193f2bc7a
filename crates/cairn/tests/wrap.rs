//! `cairn wrap AGENT [-- ARGS]` with stand-in agents (shell scripts named
//! `claude`, `codex`, `aider` that write down what they were given): each is
//! pointed at a live gateway its own way, the user's configuration is left
//! alone, the session is named for the agent and repository, its files are
//! rewindable, and a missing agent makes no session. The real agents run in
//! `real_agents.rs`.

mod common;

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cairn_testkit::pty::{Pty, Spawn};

use common::*;

/// A stand-in for `name` in `dir`: writes its arguments (one a line) and the
/// variables cairn sets to `seen.txt`, writes `made.txt`, exits `status`.
fn stand_in(dir: &Path, name: &str, status: i32) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let p = dir.join(name);
    let script = format!(
        r#"#!/bin/sh
{{
  for a in "$@"; do printf 'arg=%s\n' "$a"; done
  printf 'OPENAI_BASE_URL=%s\n' "$OPENAI_BASE_URL"
  printf 'OPENAI_API_BASE=%s\n' "$OPENAI_API_BASE"
  printf 'ANTHROPIC_BASE_URL=%s\n' "$ANTHROPIC_BASE_URL"
  printf 'ANTHROPIC_API_BASE=%s\n' "$ANTHROPIC_API_BASE"
  printf 'pwd=%s\n' "$(pwd)"
}} > seen.txt
echo made > made.txt
exit {status}
"#
    );
    std::fs::write(&p, script).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn seen(s: &Scratch) -> Vec<(String, String)> {
    s.read("seen.txt")
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect()
}

fn value<'a>(seen: &'a [(String, String)], key: &str) -> &'a str {
    seen.iter()
        .find(|(k, _)| k == key)
        .map(|(_, v)| v.as_str())
        .unwrap_or_else(|| panic!("{key} not in {seen:?}"))
}

fn args(seen: &[(String, String)]) -> Vec<&str> {
    seen.iter()
        .filter(|(k, _)| k == "arg")
        .map(|(_, v)| v.as_str())
        .collect()
}

/// `PATH` with `bin` first.
fn path_with(bin: &Path) -> String {
    let rest = std::env::var("PATH").unwrap_or_default();
    format!("{}:{rest}", bin.display())
}

fn sessions(s: &Scratch) -> Vec<serde_json::Value> {
    let out = s.run(&["sessions", "--all", "--json"]);
    assert!(out.status.success(), "{out:?}");
    json(&out.stdout).as_array().unwrap().clone()
}

#[test]
fn claude_gets_the_gateway_as_its_anthropic_base_url_and_its_files_rewind() {
    let s = Scratch::new();
    let bin = s.dir.path().join("bin");
    stand_in(&bin, "claude", 0);
    let out = s
        .cmd()
        .env("PATH", path_with(&bin))
        .args([
            "wrap",
            "claude",
            "--",
            "-p",
            "fix it",
            "--permission-mode",
            "acceptEdits",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{err}");
    let seen = seen(&s);
    assert_eq!(
        args(&seen),
        ["-p", "fix it", "--permission-mode", "acceptEdits"]
    );
    let base = value(&seen, "ANTHROPIC_BASE_URL");
    let addr = base.strip_prefix("http://127.0.0.1:").expect(base);
    assert!(addr.parse::<u16>().is_ok(), "{base}");
    // exec's own variables are there too, at the same gateway.
    assert_eq!(value(&seen, "OPENAI_BASE_URL"), format!("{base}/v1"));
    assert_eq!(value(&seen, "pwd"), s.ws.to_str().unwrap());

    let listed = sessions(&s);
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0]["name"], "claude@ws", "{listed:?}");
    let id = listed[0]["id"].as_str().unwrap().to_owned();
    assert!(
        err.contains(&format!(
            "cairn: claude -p fix it --permission-mode acceptEdits in session {id} (claude:1)"
        )),
        "{err}"
    );
    assert!(
        err.contains(&format!("undo with `cairn rewind {id} --to claude:1`")),
        "{err}"
    );

    let out = s.run(&["rewind", &id, "--to", "claude:1"]);
    assert!(out.status.success(), "{out:?}");
    assert!(!s.ws.join("made.txt").exists());
    assert!(!s.ws.join("seen.txt").exists());
}

#[test]
fn codex_gets_its_provider_as_overrides_and_its_own_config_is_untouched() {
    let s = Scratch::new();
    let bin = s.dir.path().join("bin");
    stand_in(&bin, "codex", 0);
    let codex_home = s.dir.path().join("codex-home");
    std::fs::create_dir_all(&codex_home).unwrap();
    let config = "model_provider = \"openai\"\nmodel = \"gpt-5\"\n";
    std::fs::write(codex_home.join("config.toml"), config).unwrap();
    let out = s
        .cmd()
        .env("PATH", path_with(&bin))
        .env("CODEX_HOME", &codex_home)
        .args(["wrap", "codex", "--", "exec", "fix it"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let seen = seen(&s);
    let base = value(&seen, "OPENAI_BASE_URL").to_owned();
    assert!(
        base.starts_with("http://127.0.0.1:") && base.ends_with("/v1"),
        "{base}"
    );
    let want = [
        "-c".to_owned(),
        "model_provider=\"cairn\"".into(),
        "-c".into(),
        "model_providers.cairn.name=\"cairn gateway\"".into(),
        "-c".into(),
        format!("model_providers.cairn.base_url=\"{base}\""),
        "-c".into(),
        "model_providers.cairn.wire_api=\"responses\"".into(),
        "-c".into(),
        "model_providers.cairn.env_key=\"OPENAI_API_KEY\"".into(),
        "exec".into(),
        "fix it".into(),
    ];
    assert_eq!(args(&seen), want);
    assert_eq!(
        std::fs::read_to_string(codex_home.join("config.toml")).unwrap(),
        config
    );
    assert_eq!(std::fs::read_dir(&codex_home).unwrap().count(), 1);
    assert_eq!(sessions(&s)[0]["name"], "codex@ws");
}

#[test]
fn aider_gets_both_spellings_of_both_base_urls() {
    let s = Scratch::new();
    let bin = s.dir.path().join("bin");
    stand_in(&bin, "aider", 0);
    let out = s
        .cmd()
        .env("PATH", path_with(&bin))
        // A stale one of the user's is overridden.
        .env("OPENAI_API_BASE", "http://127.0.0.1:9/v1")
        .args(["wrap", "aider", "--", "--message", "fix it", "x.py"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let seen = seen(&s);
    let root = value(&seen, "ANTHROPIC_BASE_URL").to_owned();
    assert!(root.starts_with("http://127.0.0.1:"), "{root}");
    assert_eq!(value(&seen, "ANTHROPIC_API_BASE"), root);
    assert_eq!(value(&seen, "OPENAI_BASE_URL"), format!("{root}/v1"));
    assert_eq!(value(&seen, "OPENAI_API_BASE"), format!("{root}/v1"));
    assert_eq!(args(&seen), ["--message", "fix it", "x.py"]);
}

#[test]
fn the_agents_status_is_wraps_and_run_goes_on_in_the_same_session() {
    let s = Scratch::new();
    let bin = s.dir.path().join("bin");
    let claude = stand_in(&bin, "my-claude", 3);
    let out = s.run(&[
        "wrap",
        "claude",
        "--bin",
        claude.to_str().unwrap(),
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let first = json(&out.stdout);
    let id = first["id"].as_str().unwrap();
    let out = s.run(&[
        "wrap",
        "claude",
        "--bin",
        claude.to_str().unwrap(),
        "--run",
        id,
        "--json",
    ]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert_eq!(json(&out.stdout)["id"], id);
    assert_eq!(sessions(&s).len(), 1);
    // Two nodes named for the agent.
    let out = s.run(&["rewind", id, "--to", "claude:2"]);
    assert!(out.status.success(), "{out:?}");
}

#[test]
fn a_missing_agent_is_127_with_how_to_install_it_and_makes_no_session() {
    let s = Scratch::new();
    let empty = s.dir.path().join("empty-bin");
    std::fs::create_dir_all(&empty).unwrap();
    let rows: &[(&[&str], &str)] = &[
        (
            &["wrap", "claude"],
            "npm install -g @anthropic-ai/claude-code",
        ),
        (&["wrap", "codex"], "npm install -g @openai/codex"),
        (&["wrap", "aider"], "pip install aider-chat"),
        (
            &["wrap", "claude", "--bin", "/nonexistent/claude"],
            "--bin /nonexistent/claude is not a file",
        ),
    ];
    for (line, hint) in rows {
        let out = s
            .cmd()
            .env("PATH", empty.display().to_string())
            .args(*line)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(127), "{line:?}: {err}");
        assert!(err.contains(hint), "{line:?}: {err}");
        assert!(!s.store.join("runs").exists(), "{line:?} made a session");
    }
}

#[test]
fn an_unknown_agent_is_a_usage_error_naming_the_known_ones() {
    let s = Scratch::new();
    let out = s.run(&["wrap", "cursor"]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("claude, codex, aider"), "{err}");
}

/// On a terminal the agent gets the terminal itself: Claude Code, Codex and
/// aider are interactive there, and Claude Code behind a pipe turns into its
/// print mode and wants a prompt.
#[test]
fn on_a_terminal_the_agent_gets_the_terminal() {
    let s = Scratch::new();
    let bin = s.dir.path().join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    let claude = bin.join("claude");
    std::fs::write(
        &claude,
        "#!/bin/sh\na=pipe; [ -t 0 ] && a=tty; b=pipe; [ -t 1 ] && b=tty; c=pipe; [ -t 2 ] && c=tty\necho \"$a $b $c\" > ttys.txt\necho agent says hi\n",
    )
    .unwrap();
    std::fs::set_permissions(&claude, std::fs::Permissions::from_mode(0o755)).unwrap();
    let mut pty = Pty::spawn(Spawn {
        program: &assert_cmd::cargo::cargo_bin("cairn"),
        args: vec!["wrap".into(), "claude".into()],
        cwd: s.ws.clone(),
        env: vec![
            ("CAIRN_STORE".into(), s.store.display().to_string()),
            ("PATH".into(), path_with(&bin)),
        ],
        cols: 120,
        rows: 30,
    })
    .unwrap();
    pty.wait_for("agent says hi", Duration::from_secs(30))
        .unwrap();
    assert_eq!(
        pty.wait_exit(Duration::from_secs(30)),
        Some(Some(0)),
        "{}",
        pty.screen()
    );
    assert_eq!(s.read("ttys.txt"), "tty tty tty\n");
}
