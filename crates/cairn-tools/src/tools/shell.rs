//! `shell {command, timeout_s}`: one `sh -c` command in the workspace, with a timeout.

use std::os::unix::process::ExitStatusExt;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use serde::Deserialize;
use serde_json::json;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::time::Instant;

use super::{object_schema, parse_args};
use crate::capture::OutputCap;
use crate::error::ToolError;
use crate::shell_env::ShellEnv;
use crate::sys;
use crate::tool::{Tool, ToolConfig, ToolInfo, ToolOutput};
use crate::workspace::Workspace;

const NAME: &str = "shell";
const EXPECTED: &str = r#"{"command": string, "timeout_s": number (optional)}"#;

/// How long output is still read after the command's process group is gone, in case a
/// process that left the group keeps the pipe open.
const DRAIN_GRACE: Duration = Duration::from_millis(500);

/// Runs `sh -c COMMAND` with the workspace root as working directory and standard
/// input closed, in a process group of its own. Not idempotent.
///
/// The command runs with the user's rights and is not sandboxed: it can read and write
/// anything the user can, inside the workspace or not.
///
/// 1. Standard output and standard error go to one pipe, so their order is kept.
/// 2. The output is capped at [`ToolConfig::max_output_bytes`], keeping the head and the
///    tail, with a line `[… N bytes omitted …]` between them.
/// 3. When the command times out (`timeout_s`, default
///    [`ToolConfig::default_shell_timeout`], at most
///    [`ToolConfig::max_shell_timeout`]) the whole process group is killed with SIGKILL
///    and the output says `timed out after N s`.
/// 4. When the command ends, whatever it left running in its process group is killed
///    too, and so is the group if the call is cancelled: nothing outlives the call
///    unless it left the group on purpose (`setsid`).
/// 5. The output ends with `exit status: N` or `killed by signal N`; anything but exit
///    status 0 is an [`Outcome::Error`](crate::Outcome::Error).
/// 6. The command starts from an empty environment plus the variables of cairn's own
///    that [`ToolConfig::shell_env`] keeps (by default no secret-looking ones, see
///    [`ShellEnv`]), read when the call starts.
///
/// Needs a tokio runtime with IO and time enabled.
#[derive(Debug, Clone)]
pub struct Shell {
    max_output_bytes: usize,
    default_timeout: Duration,
    max_timeout: Duration,
    env: ShellEnv,
}

#[derive(Deserialize)]
struct Args {
    command: String,
    #[serde(default)]
    timeout_s: Option<f64>,
}

impl Shell {
    /// A shell tool with the limits of `config`.
    pub fn new(config: &ToolConfig) -> Self {
        Self {
            max_output_bytes: config.max_output_bytes,
            default_timeout: config.default_shell_timeout,
            max_timeout: config.max_shell_timeout,
            env: config.shell_env.clone(),
        }
    }

    fn timeout(&self, asked: Option<f64>) -> Result<Duration, ToolError> {
        let Some(secs) = asked else {
            return Ok(self.default_timeout.min(self.max_timeout));
        };
        if !secs.is_finite() || secs <= 0.0 {
            return Err(ToolError::BadArguments {
                tool: NAME,
                reason: format!("`timeout_s` must be a positive number of seconds, got {secs}"),
                expected: EXPECTED,
            });
        }
        Ok(Duration::from_secs_f64(
            secs.min(self.max_timeout.as_secs_f64()),
        ))
    }
}

#[async_trait::async_trait]
impl Tool for Shell {
    fn info(&self) -> ToolInfo {
        ToolInfo {
            name: NAME.into(),
            description: "Run a command with `sh -c` in the workspace root, standard input \
                closed. Returns standard output and standard error together (long output \
                keeps its beginning and end) and the exit status. `timeout_s` is optional; \
                on timeout the command and everything it started is killed."
                .into(),
            parameters: object_schema(
                json!({
                    "command": {"type": "string", "description": "Shell command line for `sh -c`"},
                    "timeout_s": {"type": "number", "description": "Seconds before the command is killed (optional)"},
                }),
                &["command"],
            ),
            idempotent: false,
            read_only: false,
            mcp: None,
        }
    }

    async fn call(&self, ws: &Workspace, arguments: &serde_json::Value) -> ToolOutput {
        let args: Args = match parse_args(NAME, EXPECTED, arguments) {
            Ok(args) => args,
            Err(e) => return e.into(),
        };
        if args.command.trim().is_empty() {
            return ToolError::BadArguments {
                tool: NAME,
                reason: "`command` is empty".into(),
                expected: EXPECTED,
            }
            .into();
        }
        let timeout = match self.timeout(args.timeout_s) {
            Ok(timeout) => timeout,
            Err(e) => return e.into(),
        };
        let env = self.env.filter(std::env::vars_os());
        match run(ws, &args.command, &env, timeout, self.max_output_bytes).await {
            Ok(output) => output,
            Err(e) => e.into(),
        }
    }
}

/// Kills the process group when dropped, so a cancelled call leaves nothing running.
struct GroupGuard(libc::pid_t);

impl Drop for GroupGuard {
    fn drop(&mut self) {
        sys::kill_group(self.0);
    }
}

async fn run(
    ws: &Workspace,
    command: &str,
    env: &[(std::ffi::OsString, std::ffi::OsString)],
    timeout: Duration,
    cap: usize,
) -> Result<ToolOutput, ToolError> {
    let spawn_error = |source| ToolError::Spawn { source };
    let (read_end, write_end) = sys::pipe().map_err(spawn_error)?;
    let write_err = write_end.try_clone().map_err(spawn_error)?;
    let mut cmd = tokio::process::Command::new("sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(ws.root())
        .env_clear()
        .envs(env.iter().map(|(name, value)| (name, value)))
        .stdin(Stdio::null())
        .stdout(Stdio::from(write_end))
        .stderr(Stdio::from(write_err))
        .process_group(0)
        .kill_on_drop(true);
    let spawned = cmd.spawn();
    // Drop our copies of the write end, or the pipe would never reach end of file.
    drop(cmd);
    let mut child = spawned.map_err(spawn_error)?;
    let pgid = child
        .id()
        .and_then(|id| libc::pid_t::try_from(id).ok())
        .unwrap_or(0);
    let guard = GroupGuard(pgid);
    let mut reader = pipe::Receiver::from_owned_fd(read_end).map_err(spawn_error)?;

    let deadline = Instant::now() + timeout;
    let mut output = OutputCap::new(cap);
    let mut buf = vec![0u8; 16 * 1024];
    let mut status: Option<std::io::Result<ExitStatus>> = None;
    let mut eof = false;
    let mut timed_out = false;
    let mut drain_until: Option<Instant> = None;
    while !(eof && status.is_some()) {
        tokio::select! {
            read = reader.read(&mut buf), if !eof => match read {
                Ok(0) => eof = true,
                Ok(n) => output.push(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => eof = true,
            },
            waited = child.wait(), if status.is_none() => {
                status = Some(waited);
                // Whatever the command left running in its group goes with it.
                sys::kill_group(pgid);
                drain_until = Some(Instant::now() + DRAIN_GRACE);
            },
            () = tokio::time::sleep_until(deadline), if !timed_out && status.is_none() => {
                timed_out = true;
                sys::kill_group(pgid);
            },
            () = sleep_until_some(drain_until), if drain_until.is_some() => break,
        }
    }
    drop(guard);

    let mut text = output.finish();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    if drain_until.is_some() && !eof {
        text.push_str(
            "[output cut: a background process that left the command's process group \
             still holds it open]\n",
        );
    }
    if timed_out {
        text.push_str(&format!(
            "timed out after {} s: the command and its process group were killed; pass a \
             larger timeout_s if it needs longer\n",
            timeout.as_secs_f64()
        ));
    }
    let success = match status {
        Some(Ok(status)) => {
            text.push_str(&describe(status));
            status.success()
        }
        Some(Err(e)) => {
            text.push_str(&format!("exit status unknown: {e}"));
            false
        }
        None => {
            text.push_str("exit status unknown");
            false
        }
    };
    Ok(if success && !timed_out {
        ToolOutput::ok(text)
    } else {
        ToolOutput::error(text)
    })
}

fn describe(status: ExitStatus) -> String {
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status: {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        (None, None) => format!("exit status: {status}"),
    }
}

async fn sleep_until_some(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
