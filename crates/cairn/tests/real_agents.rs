//! `cairn wrap` with the real agents (DESIGN §7, §16): Claude Code and Codex
//! from npm, aider from PyPI, unmodified, each driven non-interactively
//! against a local mock upstream (`cairn_testkit::upstream`, speaking
//! Messages, Responses and Chat Completions), made to write a file through
//! its own tools, killed with SIGKILL while its first model call is at the
//! upstream, and run again in the same session. Checked each time: every
//! distinct call was bought once (the upstream counts), the calls are in the
//! session (`cairn session show --json --transcript`), the killed call's
//! answer was kept (`delivered: client_gone`), and `cairn rewind` puts the
//! files back.
//!
//! A re-run is served the killed call's answer from the store when the agent
//! sends that call again as it was: aider does; Claude Code does when its
//! session id is pinned (`--session-id`, with `--no-session-persistence`
//! so the pinned id can be used again), as here; Codex never does (each
//! process gives every input item a fresh id, so its re-run's calls are new
//! calls, each bought once).
//!
//! The README's Claude Code and Codex quick starts run here too, as written,
//! with the agents found on `PATH` as a user's are.
//!
//! `#[ignore]`d: they need the agents, which `.ci/run` installs (pinned) and
//! names in `CAIRN_CLAUDE`, `CAIRN_CODEX` and `CAIRN_AIDER`; run with
//! `cargo test -p cairn --test real_agents -- --ignored`. A missing agent
//! fails its test.

mod common;
#[path = "common/readme.rs"]
mod readme;

use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::Duration;

use cairn_testkit::upstream::{Reply, Script, Upstream};
use common::*;
use serde_json::{json, Value};

/// How long an agent may take to start and make its first call (Claude
/// Code's binary is 400 MB; Codex starts through node).
const START_SECS: u64 = 120;

/// The agent's program, from the variable `.ci/run` sets.
fn agent_bin(var: &str) -> PathBuf {
    let p = std::env::var_os(var).unwrap_or_else(|| {
        panic!(
            "{var} is not set: .ci/run installs Claude Code and Codex (npm) and aider (PyPI) and names them in CAIRN_CLAUDE, CAIRN_CODEX and CAIRN_AIDER"
        )
    });
    let p = PathBuf::from(p);
    assert!(p.is_file(), "{var}={} is not a file", p.display());
    p
}

/// One agent's case: how to start it and what its mock model says.
struct Case {
    agent: &'static str,
    bin: PathBuf,
    /// The agent's own arguments (after `--`).
    args: Vec<String>,
    /// Its environment besides cairn's (HOME, keys, quiet flags).
    env: Vec<(String, String)>,
    /// The route its model calls take.
    route: &'static str,
}

struct Run {
    s: Scratch,
    upstream: Upstream,
    case: Case,
}

impl Run {
    /// A scratch store and workspace, and the mock upstream answering as
    /// `script` (given the workspace) says.
    fn new(mut case: Case, script: impl FnOnce(&Path) -> Script) -> Run {
        let s = Scratch::new();
        let home = s.dir.path().join("home");
        std::fs::create_dir_all(home.join(".codex")).unwrap();
        case.env.extend([
            ("HOME".into(), home.display().to_string()),
            (
                "CODEX_HOME".into(),
                home.join(".codex").display().to_string(),
            ),
        ]);
        std::fs::write(s.ws.join("notes.txt"), "the operator's\n").unwrap();
        Run {
            upstream: Upstream::start(script(&s.ws)),
            s,
            case,
        }
    }

    /// `cairn wrap AGENT --bin BIN [EXTRA] -- ARGS`, cairn's own upstreams
    /// the mock, output to `log` in the scratch directory.
    fn spawn(&self, extra: &[&str], log: &str) -> Child {
        let out = std::fs::File::create(self.s.dir.path().join(log)).unwrap();
        let mut cmd = self.s.cmd();
        cmd.args(["wrap", self.case.agent, "--bin"])
            .arg(&self.case.bin)
            .args(extra)
            .arg("--")
            .args(&self.case.args)
            .env("OPENAI_BASE_URL", self.upstream.openai_base_url())
            .env("ANTHROPIC_BASE_URL", self.upstream.base_url())
            .env("OPENAI_API_KEY", "sk-cairn-test")
            .env("ANTHROPIC_API_KEY", "sk-ant-cairn-test")
            .envs(self.case.env.iter().map(|(k, v)| (k, v)))
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out);
        cmd.spawn().unwrap()
    }

    fn log(&self, name: &str) -> String {
        std::fs::read_to_string(self.s.dir.path().join(name)).unwrap_or_default()
    }

    /// The model calls the upstream was asked for.
    fn purchases(&self) -> Vec<cairn_testkit::upstream::RecordedRequest> {
        self.upstream
            .requests()
            .into_iter()
            .filter(|r| r.method == "POST" && r.path == self.case.route)
            .collect()
    }

    /// Run 1, killed while its first call is at the upstream; run 2 in the
    /// same session to the end. Returns the session's id.
    fn kill_then_again(&self) -> String {
        let mut first = self.spawn(&[], "run1.log");
        assert!(
            self.upstream
                .wait_for_requests(1, Duration::from_secs(START_SECS)),
            "{} made no call: {}",
            self.case.agent,
            self.log("run1.log")
        );
        let at_upstream = self.upstream.requests();
        assert_eq!(
            (at_upstream[0].method.as_str(), at_upstream[0].path.as_str()),
            ("POST", self.case.route),
            "the first request to reach the upstream"
        );
        kill_descendants(first.id() as i32);
        let status = exits_within(&mut first, 90, "cairn wrap after its agent was killed");
        assert_eq!(status.code(), Some(128 + 9), "{}", self.log("run1.log"));
        let id = self.s.only_session();
        let mut again = self.spawn(&["--run", &id], "run2.log");
        let status = exits_within(&mut again, 180, "cairn wrap, run again");
        assert_eq!(status.code(), Some(0), "{}", self.log("run2.log"));
        id
    }

    /// The session's `model_call` records, from `session show --json`.
    fn model_calls(&self, id: &str) -> Vec<Value> {
        let out = self
            .s
            .run(&["session", "show", id, "--json", "--transcript"]);
        assert!(out.status.success(), "{out:?}");
        json(&out.stdout)["records"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| r["kind"] == "model_call")
            .cloned()
            .collect()
    }

    /// Every distinct call bought once: the upstream answered as many model
    /// calls as the session holds purchases, no key twice; the killed
    /// call's answer kept. Returns the calls.
    fn check_bought_once(&self, id: &str) -> Vec<Value> {
        let calls = self.model_calls(id);
        // `replay` is left out when false.
        let bought: Vec<&Value> = calls.iter().filter(|c| c["replay"] != true).collect();
        let keys: HashSet<&str> = bought.iter().map(|c| c["key"].as_str().unwrap()).collect();
        assert_eq!(keys.len(), bought.len(), "a key bought twice: {calls:#?}");
        assert_eq!(
            self.purchases().len(),
            bought.len(),
            "the upstream's count against the session's purchases: {calls:#?}"
        );
        assert_eq!(calls[0]["delivered"], "client_gone", "{calls:#?}");
        assert_eq!(calls[0]["status"], 200, "{calls:#?}");
        for c in &calls {
            assert_eq!(c["endpoint"], self.case.route, "{c:#?}");
        }
        calls
    }

    /// `cairn rewind ID --to AGENT:1` puts back the workspace from before
    /// the first run: the agent's files gone, the operator's kept.
    fn check_rewind(&self, id: &str, made: &str) {
        assert!(self.s.ws.join(made).exists(), "{made} was not written");
        let out = self
            .s
            .run(&["rewind", id, "--to", &format!("{}:1", self.case.agent)]);
        assert!(out.status.success(), "{out:?}");
        assert!(!self.s.ws.join(made).exists(), "{made} is still there");
        assert_eq!(self.s.read("notes.txt"), "the operator's\n");
    }
}

/// SIGKILLs every process below `pid` (not `pid`): each is stopped first,
/// until no new one appears, so none can start another meanwhile.
fn kill_descendants(pid: i32) {
    let mut stopped: HashSet<i32> = HashSet::new();
    loop {
        let below = descendants(pid);
        let new: Vec<i32> = below.difference(&stopped).copied().collect();
        if new.is_empty() {
            break;
        }
        for p in new {
            unsafe { libc::kill(p, libc::SIGSTOP) };
            stopped.insert(p);
        }
    }
    assert!(
        !stopped.is_empty(),
        "cairn (pid {pid}) has no agent to kill"
    );
    for p in stopped {
        unsafe { libc::kill(p, libc::SIGKILL) };
    }
}

/// The processes below `pid`, from `/proc/*/stat`.
fn descendants(pid: i32) -> HashSet<i32> {
    let mut children: HashMap<i32, Vec<i32>> = HashMap::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(e.path().join("stat")) else {
            continue;
        };
        // `pid (comm) state ppid …`; comm may hold spaces and parentheses.
        let Some(ppid) = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        children.entry(ppid).or_default().push(p);
    }
    let mut out = HashSet::new();
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        for &c in children.get(&p).into_iter().flatten() {
            if out.insert(c) {
                todo.push(c);
            }
        }
    }
    out
}

/// The first answer is slow enough to be killed in the middle of: 100 ms
/// before each event.
const SLOW: Duration = Duration::from_millis(100);

/// Claude Code's `Write` takes an absolute path.
fn claude_script(ws: &Path) -> Script {
    let write = Reply::tool_call(
        "Write",
        json!({"file_path": ws.join("hello.txt"), "content": "hello from Claude Code\n"}),
    )
    .event_delay(SLOW);
    Script::by_turn(vec![write, Reply::text("Done.")])
}

fn claude() -> Case {
    Case {
        agent: "claude",
        bin: agent_bin("CAIRN_CLAUDE"),
        args: [
            "-p",
            "write hello.txt",
            "--permission-mode",
            "acceptEdits",
            // Its session id is in every request's body: pinned, the re-run
            // sends the killed call again as it was.
            "--session-id",
            "6f9c1f8e-3a1b-4c2d-9e8f-0a1b2c3d4e5f",
            "--no-session-persistence",
        ]
        .map(String::from)
        .to_vec(),
        env: [
            ("DISABLE_TELEMETRY", "1"),
            ("DISABLE_AUTOUPDATER", "1"),
            ("DISABLE_ERROR_REPORTING", "1"),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1"),
        ]
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .to_vec(),
        route: "/v1/messages",
    }
}

#[test]
#[ignore = "needs Claude Code, Codex and aider: .ci/run installs them"]
fn claude_code_killed_mid_call_is_served_its_answer_when_run_again() {
    let run = Run::new(claude(), claude_script);
    let id = run.kill_then_again();
    let calls = run.check_bought_once(&id);
    // Killed call, the same call served from the store, the turn after.
    assert_eq!(run.purchases().len(), 2, "{calls:#?}");
    assert_eq!(calls.len(), 3, "{calls:#?}");
    assert_eq!(calls[1]["replay"], true, "{calls:#?}");
    assert_eq!(calls[1]["key"], calls[0]["key"]);
    assert_eq!(run.s.read("hello.txt"), "hello from Claude Code\n");
    run.check_rewind(&id, "hello.txt");
}

fn codex() -> (Case, Script) {
    let write = Reply::tool_call(
        "exec_command",
        json!({"cmd": "printf 'hello from Codex\\n' > hello.txt"}),
    )
    .event_delay(SLOW);
    let case = Case {
        agent: "codex",
        bin: agent_bin("CAIRN_CODEX"),
        args: [
            "exec",
            "--skip-git-repo-check",
            "-s",
            "workspace-write",
            "write hello.txt",
        ]
        .map(String::from)
        .to_vec(),
        env: Vec::new(),
        route: "/v1/responses",
    };
    (case, Script::by_turn(vec![write, Reply::text("Done.")]))
}

#[test]
#[ignore = "needs Claude Code, Codex and aider: .ci/run installs them"]
fn codex_killed_mid_call_keeps_the_answer_and_buys_each_call_once() {
    let (case, script) = codex();
    let run = Run::new(case, |_| script);
    let id = run.kill_then_again();
    let calls = run.check_bought_once(&id);
    // Its re-run's calls are new calls (fresh item ids): the killed one,
    // then the re-run's two, each bought once.
    assert_eq!(run.purchases().len(), 3, "{calls:#?}");
    assert_eq!(calls.len(), 3, "{calls:#?}");
    assert_eq!(run.s.read("hello.txt"), "hello from Codex\n");
    run.check_rewind(&id, "hello.txt");
}

fn aider() -> (Case, Script) {
    // aider edits through its reply: a SEARCH/REPLACE block filling the
    // (empty) file it was given.
    let edit = Reply::text(
        "hello.txt\n```\n<<<<<<< SEARCH\n=======\nhello from aider\n>>>>>>> REPLACE\n```\n",
    )
    .event_delay(SLOW);
    let case = Case {
        agent: "aider",
        bin: agent_bin("CAIRN_AIDER"),
        args: [
            "--model",
            "openai/gpt-4o",
            "--yes",
            "--no-git",
            "--no-check-update",
            "--no-analytics",
            "--no-show-model-warnings",
            "--message",
            "write hello.txt",
            "hello.txt",
        ]
        .map(String::from)
        .to_vec(),
        // litellm's price list from the package, not the network.
        env: vec![("LITELLM_LOCAL_MODEL_COST_MAP".into(), "True".into())],
        route: "/v1/chat/completions",
    };
    (case, Script::always(edit))
}

#[test]
#[ignore = "needs Claude Code, Codex and aider: .ci/run installs them"]
fn aider_killed_mid_call_is_served_its_answer_when_run_again() {
    let (case, script) = aider();
    let run = Run::new(case, |_| script);
    let id = run.kill_then_again();
    let calls = run.check_bought_once(&id);
    assert_eq!(run.purchases().len(), 1, "{calls:#?}");
    assert_eq!(calls.len(), 2, "{calls:#?}");
    assert_eq!(calls[1]["replay"], true, "{calls:#?}");
    assert_eq!(calls[1]["key"], calls[0]["key"]);
    assert_eq!(run.s.read("hello.txt"), "hello from aider\n");
    run.check_rewind(&id, "hello.txt");
}

/// The README's quick start for `agent`, run as written in a scratch git
/// repository with the agent's directory on `PATH`; prints what it showed.
fn quick_start(
    agent: &str,
    bin: &Path,
    script: impl FnOnce(&Path) -> Script,
) -> (Scratch, Upstream) {
    let s = Scratch::new();
    let git = std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&s.ws)
        .status()
        .expect("git, to make the quick start's repository");
    assert!(git.success());
    let upstream = Upstream::start(script(&s.ws));
    let mut env = readme::quick_start_env(&s, &upstream);
    readme::with_path_first(&mut env, bin.parent().unwrap());
    env.extend(
        [
            (
                "CODEX_HOME",
                s.dir.path().join("home").display().to_string(),
            ),
            ("DISABLE_TELEMETRY", "1".into()),
            ("DISABLE_AUTOUPDATER", "1".into()),
            ("DISABLE_ERROR_REPORTING", "1".into()),
            ("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1".into()),
        ]
        .map(|(k, v)| (k.to_owned(), v)),
    );
    let mut console = readme::Console::new(s.ws.clone(), env);
    console.run(&readme::quick_start(agent));
    println!("{}", console.transcript);
    (s, upstream)
}

#[test]
#[ignore = "needs Claude Code, Codex and aider: .ci/run installs them"]
fn the_claude_code_quick_start_runs() {
    let (_s, upstream) = quick_start("claude", &agent_bin("CAIRN_CLAUDE"), |ws| {
        Script::by_turn(vec![
            Reply::tool_call(
                "Write",
                json!({"file_path": ws.join("VERBOSE.md"), "content": "--verbose\n"}),
            ),
            Reply::text("Added the flag."),
        ])
    });
    let model_calls = upstream
        .requests()
        .iter()
        .filter(|r| r.path == "/v1/messages")
        .count();
    assert_eq!(model_calls, 2);
}

#[test]
#[ignore = "needs Claude Code, Codex and aider: .ci/run installs them"]
fn the_codex_quick_start_runs() {
    let (s, upstream) = quick_start("codex", &agent_bin("CAIRN_CODEX"), |_| {
        Script::by_turn(vec![
            Reply::tool_call(
                "exec_command",
                json!({"cmd": "printf -- '--verbose\\n' > VERBOSE.md"}),
            ),
            Reply::text("Added the flag."),
        ])
    });
    let model_calls = upstream
        .requests()
        .iter()
        .filter(|r| r.path == "/v1/responses")
        .count();
    assert_eq!(model_calls, 2);
    assert_eq!(s.read("VERBOSE.md"), "--verbose\n");
}

/// The README's MCP set-up, as written there, with the real Claude Code:
/// `claude mcp add cairn -- cairn mcp`, then `claude mcp list`, whose
/// health check starts `cairn mcp`, speaks MCP to it and reports it
/// connected.
#[test]
#[ignore = "needs Claude Code, Codex and aider: .ci/run installs them"]
fn claude_code_connects_to_cairn_mcp() {
    let claude = agent_bin("CAIRN_CLAUDE");
    let s = Scratch::new();
    let home = s.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let cairn = assert_cmd::cargo::cargo_bin("cairn");
    let path = format!(
        "{}:{}",
        cairn.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let run = |args: &[&str]| {
        let out = std::process::Command::new(&claude)
            .args(args)
            .env("HOME", &home)
            .env("PATH", &path)
            .env("CAIRN_STORE", &s.store)
            .env_remove("ANTHROPIC_API_KEY")
            .current_dir(&s.ws)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "claude {args:?}: {text}");
        text
    };
    run(&["mcp", "add", "cairn", "--", "cairn", "mcp"]);
    let listed = run(&["mcp", "list"]);
    let line = listed
        .lines()
        .find(|l| l.starts_with("cairn:"))
        .unwrap_or_else(|| panic!("no cairn server listed: {listed}"));
    assert!(line.contains("Connected"), "{listed}");
}

/// The README's Codex set-up (its `config.toml` lines, read from the
/// README itself) is what the real Codex reads as a stdio MCP server
/// running `cairn mcp`.
#[test]
#[ignore = "needs Claude Code, Codex and aider: .ci/run installs them"]
fn codex_reads_the_readmes_mcp_config() {
    let codex = agent_bin("CAIRN_CODEX");
    let readme = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md"),
    )
    .unwrap();
    let start = readme
        .find("[mcp_servers.cairn]")
        .expect("the README configures Codex");
    let config: String = readme[start..]
        .lines()
        .take_while(|l| !l.starts_with("```"))
        .map(|l| format!("{l}\n"))
        .collect();
    let s = Scratch::new();
    let home = s.dir.path().join("codex-home");
    std::fs::create_dir_all(&home).unwrap();
    std::fs::write(home.join("config.toml"), &config).unwrap();
    let out = std::process::Command::new(&codex)
        .args(["mcp", "get", "cairn", "--json"])
        .env("CODEX_HOME", &home)
        .env("HOME", s.dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "codex mcp get: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let got = json(&out.stdout);
    assert_eq!(got["enabled"], true, "{got}");
    assert_eq!(got["transport"]["type"], "stdio", "{got}");
    assert_eq!(got["transport"]["command"], "cairn", "{got}");
    assert_eq!(
        got["transport"]["args"],
        serde_json::json!(["mcp"]),
        "{got}"
    );
}
