//! The shell tool's environment, seen by a real `sh -c env`: secrets inherited by cairn
//! are not passed to the command unless the user passes them through by name.
//!
//! One test in this file: it sets variables in the process environment, which no other
//! thread of this test binary reads meanwhile.

use cairn_tools::{Outcome, ShellEnv, ToolConfig, Toolbox, Workspace};
use serde_json::json;

const INHERITED: &[(&str, &str)] = &[
    ("OPENAI_API_KEY", "sk-openai-value-1"),
    ("ANTHROPIC_API_KEY", "sk-ant-value-2"),
    ("GH_TOKEN", "ghp-value-3"),
    ("AWS_SECRET_ACCESS_KEY", "aws-value-4"),
    ("DEPLOY_PASSWORD", "hunter2-value-5"),
    ("DATABASE_URL", "postgres://app:pw-value-6@db/app"),
    ("CAIRN_SHELL_ENV_TEST_PLAIN", "cairn-value-7"),
    ("SHELL_ENV_TEST_PLAIN", "visible-value-8"),
];

fn env_output(env: ShellEnv) -> String {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = Workspace::new(dir.path()).expect("workspace");
    let tools = Toolbox::builtin(ToolConfig {
        shell_env: env,
        ..ToolConfig::default()
    });
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let out = rt.block_on(tools.call(&ws, "shell", &json!({"command": "env"})));
    assert_eq!(out.outcome, Outcome::Ok, "{}", out.output);
    out.output
}

#[test]
fn secrets_in_cairns_environment_do_not_reach_the_shell_unless_passed_through() {
    for (name, value) in INHERITED {
        std::env::set_var(name, value);
    }

    let out = env_output(ShellEnv::default());
    for (name, value) in &INHERITED[..7] {
        assert!(!out.contains(value), "{name} reached the shell:\n{out}");
    }
    assert!(
        out.contains("SHELL_ENV_TEST_PLAIN=visible-value-8"),
        "{out}"
    );
    assert!(out.contains("PATH="), "PATH was dropped:\n{out}");

    let out = env_output(ShellEnv::default().pass_through(["GH_TOKEN", "DATABASE_URL"]));
    assert!(out.contains("GH_TOKEN=ghp-value-3"), "{out}");
    assert!(
        out.contains("DATABASE_URL=postgres://app:pw-value-6@db/app"),
        "{out}"
    );
    assert!(!out.contains("sk-openai-value-1"), "{out}");
    assert!(!out.contains("hunter2-value-5"), "{out}");
}
