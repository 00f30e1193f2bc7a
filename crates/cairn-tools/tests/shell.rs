//! The shell tool: exit status, combined output, caps, timeouts and process groups.

use std::fs;
use std::time::{Duration, Instant};

use cairn_tools::{Outcome, ToolConfig, ToolOutput, Toolbox, Workspace};
use serde_json::{json, Value};

struct Env {
    dir: tempfile::TempDir,
    ws: Workspace,
    tools: Toolbox,
}

fn env_with(config: ToolConfig) -> Env {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = Workspace::new(dir.path()).expect("workspace");
    Env {
        dir,
        ws,
        tools: Toolbox::builtin(config),
    }
}

fn env() -> Env {
    env_with(ToolConfig::default())
}

impl Env {
    async fn shell(&self, args: Value) -> ToolOutput {
        self.tools.call(&self.ws, "shell", &args).await
    }

    fn pid(&self, file: &str) -> i32 {
        let text = fs::read_to_string(self.dir.path().join(file)).expect("pid file");
        text.trim().parse().expect("pid")
    }
}

/// Whether a process is gone: no longer exists, or is a zombie waiting for a reaper
/// (in a container, pid 1 may never reap it).
fn gone(pid: i32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with(['Z', 'X'])),
    }
}

fn wait_gone(pid: i32) -> bool {
    let until = Instant::now() + Duration::from_secs(3);
    while Instant::now() < until {
        if gone(pid) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    gone(pid)
}

#[tokio::test]
async fn success_reports_output_and_exit_status() {
    let e = env();
    let out = e.shell(json!({"command": "echo hello"})).await;
    assert_eq!(out, ToolOutput::ok("hello\nexit status: 0"));
}

#[tokio::test]
async fn runs_in_the_workspace_root_with_stdin_closed() {
    let e = env();
    let out = e.shell(json!({"command": "pwd; cat; echo done"})).await;
    assert_eq!(out.outcome, Outcome::Ok, "{}", out.output);
    let root = e.ws.root().display().to_string();
    assert_eq!(out.output, format!("{root}\ndone\nexit status: 0"));
}

#[tokio::test]
async fn stdout_and_stderr_are_combined_in_order() {
    let e = env();
    let out = e
        .shell(json!({"command": "echo one; echo two >&2; echo three"}))
        .await;
    assert_eq!(out.output, "one\ntwo\nthree\nexit status: 0");
}

#[tokio::test]
async fn nonzero_exit_is_an_error() {
    let e = env();
    let out = e.shell(json!({"command": "printf partial; exit 3"})).await;
    assert_eq!(out, ToolOutput::error("partial\nexit status: 3"));
}

#[tokio::test]
async fn death_by_signal_is_reported() {
    let e = env();
    let out = e.shell(json!({"command": "kill -TERM $$"})).await;
    assert_eq!(out, ToolOutput::error("killed by signal 15"));
}

#[tokio::test]
async fn timeout_kills_the_whole_process_group() {
    let e = env();
    let started = Instant::now();
    let out = e
        .shell(json!({"command": "sleep 30 & echo $! > bg.pid; echo started; sleep 30", "timeout_s": 1}))
        .await;
    let took = started.elapsed();
    assert!(took < Duration::from_secs(4), "took {took:?}");
    assert!(took >= Duration::from_secs(1), "took {took:?}");
    assert_eq!(out.outcome, Outcome::Error);
    assert!(
        out.output.starts_with("started\ntimed out after 1 s"),
        "{}",
        out.output
    );
    assert!(out.output.ends_with("killed by signal 9"), "{}", out.output);
    assert!(wait_gone(e.pid("bg.pid")), "the background child survived");
}

#[tokio::test]
async fn fractional_timeouts_and_clamping() {
    let e = env_with(ToolConfig {
        max_shell_timeout: Duration::from_millis(500),
        ..ToolConfig::default()
    });
    let started = Instant::now();
    let out = e
        .shell(json!({"command": "sleep 30", "timeout_s": 1000}))
        .await;
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(
        out.output.starts_with("timed out after 0.5 s"),
        "{}",
        out.output
    );
    let started = Instant::now();
    let out = e.shell(json!({"command": "sleep 30"})).await;
    assert!(started.elapsed() < Duration::from_secs(3));
    assert!(
        out.output.starts_with("timed out after 0.5 s"),
        "{}",
        out.output
    );
}

#[tokio::test]
async fn background_processes_do_not_outlive_the_command() {
    let e = env();
    let started = Instant::now();
    let out = e
        .shell(json!({"command": "sleep 30 & echo $! > bg.pid"}))
        .await;
    assert!(started.elapsed() < Duration::from_secs(3));
    assert_eq!(out, ToolOutput::ok("exit status: 0"));
    assert!(wait_gone(e.pid("bg.pid")), "the background child survived");
}

#[tokio::test]
async fn cancelling_the_call_kills_the_process_group() {
    let e = env();
    let call = e.shell(json!({"command": "echo $$ > sh.pid; sleep 30 & echo $! > bg.pid; wait"}));
    let cancelled = tokio::time::timeout(Duration::from_millis(500), call).await;
    assert!(cancelled.is_err());
    assert!(wait_gone(e.pid("bg.pid")), "the background child survived");
    assert!(wait_gone(e.pid("sh.pid")), "the shell survived");
}

#[tokio::test]
async fn output_is_capped_keeping_head_and_tail() {
    let e = env_with(ToolConfig {
        max_output_bytes: 20,
        ..ToolConfig::default()
    });
    // 1000 lines "0\n" … "999\n": 3890 bytes; 10 kept at each end.
    let out = e.shell(json!({"command": "seq 0 999"})).await;
    assert_eq!(out.outcome, Outcome::Ok);
    assert_eq!(
        out.output,
        "0\n1\n2\n3\n4\n[… 3870 bytes omitted …]\n7\n998\n999\nexit status: 0"
    );
}

#[tokio::test]
async fn bad_arguments_are_errors() {
    let e = env();
    for (args, want) in [
        (json!({}), "missing field `command`"),
        (json!({"command": "  "}), "`command` is empty"),
        (
            json!({"command": "true", "timeout_s": 0}),
            "`timeout_s` must be a positive number",
        ),
        (
            json!({"command": "true", "timeout_s": -1}),
            "`timeout_s` must be a positive number",
        ),
        (
            json!({"command": "true", "timeout_s": "10"}),
            "invalid type",
        ),
        (json!(["true"]), "must be a JSON object, got an array"),
    ] {
        let out = e.shell(args.clone()).await;
        assert_eq!(out.outcome, Outcome::Error, "{args}");
        assert!(out.output.contains(want), "{args}: {}", out.output);
    }
}
