//! The `Tool` trait and the types it speaks in.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::ToolError;
use crate::shell_env::ShellEnv;
use crate::workspace::Workspace;

/// What a tool tells the model about itself.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolInfo {
    /// The name the model calls the tool by, e.g. `read_file`.
    pub name: &'static str,
    /// One paragraph for the model: what the tool does and its limits.
    pub description: &'static str,
    /// A JSON schema of the arguments object.
    pub parameters: serde_json::Value,
    /// Whether running the tool twice has the same effect as running it once. The agent
    /// loop re-runs an interrupted idempotent call after a crash and records an
    /// `unknown` outcome for any other (DESIGN §4.1).
    pub idempotent: bool,
}

/// Whether a tool call succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The call did what was asked.
    Ok,
    /// The call failed; the output says why and what to do instead.
    Error,
}

/// The result of a tool call, as the model will read it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolOutput {
    /// Success or failure.
    pub outcome: Outcome,
    /// The text for the model.
    pub output: String,
}

impl ToolOutput {
    /// A successful result.
    pub fn ok(output: impl Into<String>) -> Self {
        Self {
            outcome: Outcome::Ok,
            output: output.into(),
        }
    }

    /// A failed result.
    pub fn error(output: impl Into<String>) -> Self {
        Self {
            outcome: Outcome::Error,
            output: output.into(),
        }
    }

    /// Whether the outcome is [`Outcome::Ok`].
    pub fn is_ok(&self) -> bool {
        self.outcome == Outcome::Ok
    }
}

impl From<ToolError> for ToolOutput {
    fn from(err: ToolError) -> Self {
        Self::error(err.to_string())
    }
}

impl From<Result<String, ToolError>> for ToolOutput {
    fn from(result: Result<String, ToolError>) -> Self {
        match result {
            Ok(text) => Self::ok(text),
            Err(err) => err.into(),
        }
    }
}

/// Limits the built-in tools apply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolConfig {
    /// The most bytes of output shell, list_dir and search return; shell keeps the head
    /// and the tail. Default 64 KiB.
    pub max_output_bytes: usize,
    /// The shell timeout when the call gives no `timeout_s`. Default 120 s.
    pub default_shell_timeout: Duration,
    /// The largest shell timeout a call may ask for; larger ones are clamped.
    /// Default 30 min.
    pub max_shell_timeout: Duration,
    /// The most bytes read_file returns. Default 1 MiB.
    pub max_read_bytes: usize,
    /// Which of cairn's environment variables the shell command gets. Default: the
    /// scrub of [`ShellEnv`] (no variable that looks like a secret, none of the model
    /// providers' or cairn's own), with nothing passed through.
    pub shell_env: ShellEnv,
}

impl Default for ToolConfig {
    fn default() -> Self {
        Self {
            max_output_bytes: 64 * 1024,
            default_shell_timeout: Duration::from_secs(120),
            max_shell_timeout: Duration::from_secs(30 * 60),
            max_read_bytes: 1024 * 1024,
            shell_env: ShellEnv::default(),
        }
    }
}

/// A tool the model can call.
///
/// Implementations never panic and never fail with a Rust error: bad arguments, missing
/// files and refused paths all come back as [`Outcome::Error`] with a message for the
/// model. Every path they touch goes through the workspace's path-safety check
/// ([`Workspace::resolve`] lists its rules) and its directory descriptor.
#[async_trait::async_trait]
pub trait Tool: Send + Sync {
    /// The tool's name, description, parameter schema and idempotency.
    fn info(&self) -> ToolInfo;

    /// Runs the tool in `ws` with the model's `arguments` (a JSON object).
    async fn call(&self, ws: &Workspace, arguments: &serde_json::Value) -> ToolOutput;
}
