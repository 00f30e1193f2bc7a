//! Everyday use, the first ten minutes (DESIGN §16, issue 28): the
//! version names its commit, completions and the man page come from the
//! command line's definition, the configuration file and its precedence,
//! a first run with only a key set, and the two servers side by side.

mod common;

use std::io::{BufRead, BufReader};
use std::process::Stdio;

use cairn_testkit::upstream::{Reply, Script, Upstream};
use common::*;
use serde_json::{json, Value};

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Writes `config.toml` where the scratch's cairn looks for it.
fn config(s: &Scratch, body: &str) -> std::path::PathBuf {
    let dir = s.dir.path().join("config/cairn");
    std::fs::create_dir_all(&dir).unwrap();
    let p = dir.join("config.toml");
    std::fs::write(&p, body).unwrap();
    p
}

const COMMANDS: &[&str] = &[
    "run",
    "resume",
    "continue",
    "exec",
    "snapshot",
    "rewind",
    "check-ignore",
    "prune",
    "checkpoint",
    "fork",
    "reindex",
    "sessions",
    "session",
    "verify",
    "gateway",
    "serve",
    "push",
    "pull",
    "vm",
    "config",
    "completions",
    "man",
];

#[test]
fn the_version_names_the_commit() {
    let s = Scratch::new();
    let out = s.run(&["--version"]);
    assert!(out.status.success());
    let v = text(&out.stdout);
    assert!(v.starts_with("cairn 0.") && v.contains("(commit "), "{v}");
    let head = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output();
    if let Some(h) = head.ok().filter(|h| h.status.success()) {
        // Built from this checkout: its commit (the build reruns when HEAD moves).
        let h = text(&h.stdout);
        assert!(v.contains(h.trim()), "{v} does not name {h}");
    }
}

#[test]
fn completions_parse_and_know_the_commands() {
    let s = Scratch::new();
    for shell in ["bash", "zsh", "fish", "powershell", "elvish"] {
        let out = s.run(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {}", text(&out.stderr));
        let script = text(&out.stdout);
        for c in ["sessions", "rewind", "completions"] {
            assert!(script.contains(c), "{shell} lacks {c}");
        }
    }
    // bash reads the script without a syntax error.
    let path = s.dir.path().join("cairn.bash");
    std::fs::write(&path, s.run(&["completions", "bash"]).stdout).unwrap();
    let out = std::process::Command::new("bash")
        .arg("-n")
        .arg(&path)
        .output()
        .unwrap();
    assert!(out.status.success(), "bash -n: {}", text(&out.stderr));
    // And in a shell that loads it, `cairn` completes.
    let out = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!("source {}; complete -p cairn", path.display()))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = s.run(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn the_man_page_names_every_command() {
    let s = Scratch::new();
    let out = s.run(&["man"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let page = text(&out.stdout);
    assert!(
        page.starts_with(".ie") || page.contains(".TH cairn"),
        "{}",
        &page[..200.min(page.len())]
    );
    for c in COMMANDS {
        assert!(
            page.contains(&format!("cairn\\-{}", c.replace('-', "\\-"))) || page.contains(c),
            "man lacks {c}"
        );
    }
    let dir = s.dir.path().join("man");
    let out = s.run(&["man", "--dir", dir.to_str().unwrap()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    for c in COMMANDS {
        let p = dir.join(format!("cairn-{c}.1"));
        assert!(p.is_file(), "no {}", p.display());
    }
    assert!(dir.join("cairn.1").is_file());
    assert!(dir.join("cairn-session-show.1").is_file());
}

#[test]
fn config_values_come_from_flag_env_file_or_default_and_say_so() {
    let s = Scratch::new();
    let script = s.script("t.json", json!([{"text": "done"}]));
    let path = config(
        &s,
        &format!(
            "model = \"script:{}\"\napprove = \"shell\"\n[serve]\nlisten = \"127.0.0.1:9\"\n",
            script.display()
        ),
    );
    let out = s.run(&["config", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let c: Value = json(&out.stdout);
    assert_eq!(c["file"], path.to_str().unwrap());
    assert_eq!(c["file_found"], true);
    assert_eq!(c["model"]["origin"]["from"], "file");
    assert_eq!(c["approve"]["value"], "shell");
    assert_eq!(c["serve_listen"]["value"], "127.0.0.1:9");
    assert_eq!(c["gateway_listen"]["value"], "127.0.0.1:7879");
    assert_eq!(c["gateway_listen"]["origin"]["from"], "default");
    // The environment beats the file, a flag beats both.
    let out = s
        .cmd()
        .args(["config", "--json"])
        .env("CAIRN_MODEL", "openai:m")
        .output()
        .unwrap();
    let c: Value = json(&out.stdout);
    assert_eq!(c["model"]["value"], "openai:m");
    assert_eq!(
        c["model"]["origin"],
        json!({"from": "env", "name": "CAIRN_MODEL"})
    );
    let out = s.run(&["config"]);
    let t = text(&out.stdout);
    assert!(t.contains(&format!("(file {})", path.display())), "{t}");
    assert!(
        t.contains("127.0.0.1:7878") || t.contains("127.0.0.1:9"),
        "{t}"
    );

    // The file's model runs a session with no --model.
    let out = s.run(&["run", "--json", "task"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(json(&out.stdout)["status"], "completed");
    // ... and a flag beats it.
    let out = s.run(&["run", "--model", "nonsense", "task"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_key_or_a_bad_line_in_the_config_file_is_refused_with_exit_2() {
    let s = Scratch::new();
    for (body, needle) in [
        (
            "openai_api_key = \"sk-abc\"\n",
            "set OPENAI_API_KEY in the environment",
        ),
        (
            "[gateway]\ntoken = \"t\"\n",
            "set CAIRN_GATEWAY_TOKEN in the environment",
        ),
        ("model = \"m\"\nmodel = \"n\"\n", "line 2, column"),
        ("model = \"m\"\nlisten = \"x\"\n", "line 2, column"),
    ] {
        config(&s, body);
        for args in [vec!["sessions"], vec!["config"]] {
            let out = s.run(&args);
            assert_eq!(out.status.code(), Some(2), "{body:?} {args:?}");
            let err = text(&out.stderr);
            assert!(
                err.contains(needle) && err.contains("config.toml"),
                "{body:?}: {err}"
            );
            assert!(!err.contains("sk-abc"), "the key was echoed: {err}");
        }
    }
}

#[test]
fn with_only_a_key_set_a_first_run_picks_that_providers_model_and_says_so() {
    let s = Scratch::new();
    // Nothing: what to set.
    let out = s.run(&["run", "task"]);
    assert_eq!(out.status.code(), Some(2));
    let err = text(&out.stderr);
    assert!(
        err.contains("OPENAI_API_KEY") && err.contains("ANTHROPIC_API_KEY"),
        "{err}"
    );
    assert!(
        !s.store.join("runs").exists() || s.store.join("runs").read_dir().unwrap().next().is_none()
    );

    let upstream = Upstream::start(Script::sequence(
        vec![Reply::text("hello").with_usage(3, 1)],
    ));
    for (keys, want) in [
        (vec!["OPENAI_API_KEY"], "openai:gpt-4.1"),
        (vec!["ANTHROPIC_API_KEY"], "anthropic:claude-sonnet-4-5"),
        (
            vec!["OPENAI_API_KEY", "ANTHROPIC_API_KEY"],
            "openai:gpt-4.1",
        ),
    ] {
        let mut c = s.cmd();
        c.args(["config", "--json"]);
        for k in &keys {
            c.env(k, "sk-test");
        }
        let v: Value = json(&c.output().unwrap().stdout);
        assert_eq!(v["model"]["value"], want, "{keys:?}");
        assert_eq!(v["model"]["origin"]["from"], "key");
    }
    // A real first run with only OPENAI_API_KEY set, against a local upstream.
    let out = s
        .cmd()
        .env("OPENAI_API_KEY", "sk-test")
        .env("OPENAI_BASE_URL", upstream.openai_base_url())
        .args(["run", "--json", "say hello"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let err = text(&out.stderr);
    assert!(
        err.contains("using openai:gpt-4.1") && err.contains("OPENAI_API_KEY"),
        "{err}"
    );
    let id = json(&out.stdout)["id"].as_str().unwrap().to_owned();
    let meta = &s.records(&id)[0];
    assert_eq!(meta["routing"]["model"], "gpt-4.1");
    assert_eq!(upstream.count(), 1);
}

/// `cairn gateway` with `args`; the child, its address and its stderr.
fn gateway(
    s: &Scratch,
    args: &[&str],
    env: &[(&str, &str)],
) -> (std::process::Child, String, Stderr) {
    let mut c = s.cmd();
    c.arg("gateway").args(args);
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let err = Stderr::of(&mut child);
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let addr = line
        .trim()
        .strip_prefix("cairn gateway listening on http://")
        .unwrap_or_else(|| panic!("no address in {line:?}: {}", err.text()))
        .to_owned();
    (child, addr, err)
}

fn post(addr: &str, body: &str) -> u16 {
    use std::io::{Read, Write};
    let mut conn = std::net::TcpStream::connect(addr).unwrap();
    let head = format!(
        "POST /v1/chat/completions HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\nauthorization: Bearer sk-secret-never-logged\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    conn.write_all(head.as_bytes()).unwrap();
    conn.write_all(body.as_bytes()).unwrap();
    let mut reply = String::new();
    let _ = conn.read_to_string(&mut reply);
    reply
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

#[test]
fn serve_and_gateway_listen_on_different_ports_by_default() {
    let s = Scratch::new();
    let c: Value = json(&s.run(&["config", "--json"]).stdout);
    assert_eq!(c["serve_listen"]["value"], "127.0.0.1:7878");
    assert_eq!(c["gateway_listen"]["value"], "127.0.0.1:7879");
    // The configured address is the one used (here an ephemeral port).
    config(&s, "[gateway]\nlisten = \"127.0.0.1:0\"\n");
    let (mut gw, addr, _) = gateway(&s, &["--name", "g"], &[]);
    assert!(
        addr.starts_with("127.0.0.1:") && !addr.ends_with(":7879"),
        "{addr}"
    );
    kill(&mut gw, libc::SIGTERM);
    gw.wait().unwrap();
}

#[test]
fn the_gateway_logs_one_line_per_call_without_prompt_or_key_unless_quiet() {
    let upstream = Upstream::start(Script::sequence(vec![
        Reply::text("one").with_usage(7, 2),
        Reply::text("two").with_usage(7, 2),
    ]));
    let s = Scratch::new();
    let base = upstream.openai_base_url();
    let env = [("OPENAI_BASE_URL", base.as_str())];
    let body =
        r#"{"model":"gpt-logged","messages":[{"role":"user","content":"a very private prompt"}]}"#;

    let (mut gw, addr, err) = gateway(&s, &["--listen", "127.0.0.1:0", "--name", "logged"], &env);
    err.wait_for(20, "$OPENAI_BASE_URL");
    assert_eq!(post(&addr, body), 200);
    err.wait_for(20, "bought");
    kill(&mut gw, libc::SIGTERM);
    gw.wait().unwrap();
    let log = err.finish();
    let line = log.lines().find(|l| l.contains("bought")).unwrap();
    for want in ["/v1/chat/completions", "gpt-logged", "200", "7 in / 2 out"] {
        assert!(line.contains(want), "{want:?} not in {line:?}");
    }
    assert!(
        log.contains(&format!("{base} from environment $OPENAI_BASE_URL")),
        "{log}"
    );
    assert!(
        !log.contains("private prompt") && !log.contains("sk-secret"),
        "{log}"
    );

    let (mut gw, addr, err) = gateway(
        &s,
        &["--listen", "127.0.0.1:0", "--name", "quiet", "--quiet"],
        &env,
    );
    assert_eq!(post(&addr, body), 200);
    wait_until(20, "the second call", || upstream.count() == 2);
    kill(&mut gw, libc::SIGTERM);
    gw.wait().unwrap();
    let log = err.finish();
    assert!(!log.contains("bought"), "--quiet printed calls: {log}");
}
