//! The `Tool` trait and the types it speaks in.

use std::borrow::Cow;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::ToolError;
use crate::shell_env::ShellEnv;
use crate::workspace::Workspace;

/// What a tool tells the model about itself.
///
/// Serialised (into the resume guard's tool-set hash) as name, description,
/// parameters and idempotency only: `read_only` and `mcp` are left out, so a
/// run of the built-in tools keeps the fingerprint it was started with. An
/// MCP server's tools are hashed per server, hints included
/// ([`McpOrigin`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolInfo {
    /// The name the model calls the tool by, e.g. `read_file`.
    pub name: Cow<'static, str>,
    /// One paragraph for the model: what the tool does and its limits.
    pub description: Cow<'static, str>,
    /// A JSON schema of the arguments object.
    pub parameters: serde_json::Value,
    /// Whether running the tool twice has the same effect as running it once. The agent
    /// loop re-runs an interrupted idempotent call after a crash and records an
    /// `unknown` outcome for any other (DESIGN §4.1).
    pub idempotent: bool,
    /// Whether the tool changes nothing. `--approve writes` asks before every
    /// call of a tool that is not read-only.
    #[serde(skip)]
    pub read_only: bool,
    /// For a tool of an MCP server: which server and tool, and its hints.
    #[serde(skip)]
    pub mcp: Option<McpOrigin>,
}

/// Where an MCP tool comes from, and what it declared (DESIGN §17).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct McpOrigin {
    /// The server's name in the `mcpServers` configuration.
    pub server: String,
    /// The tool's own name on that server.
    pub tool: String,
    /// Its annotations, with the protocol's defaults for any left out.
    pub hints: McpHints,
}

/// An MCP tool's annotations. The protocol's defaults for a hint a server
/// leaves out are the cautious ones: not read-only, destructive, not
/// idempotent, open world.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct McpHints {
    /// `readOnlyHint`: it changes nothing.
    pub read_only: bool,
    /// `destructiveHint`: it may destroy or overwrite.
    pub destructive: bool,
    /// `idempotentHint`: calling it again with the same arguments changes
    /// nothing more.
    pub idempotent: bool,
    /// `openWorldHint`: it reaches beyond a closed world.
    pub open_world: bool,
}

impl Default for McpHints {
    fn default() -> Self {
        McpHints {
            read_only: false,
            destructive: true,
            idempotent: false,
            open_world: true,
        }
    }
}

impl McpHints {
    /// Whether a call in flight at a crash may run again (DESIGN §4.4,
    /// §17): only a read-only or idempotent tool's. Anything else is
    /// recorded `unknown` and never re-run.
    pub fn rerun_safe(&self) -> bool {
        self.read_only || self.idempotent
    }
}

/// Whether a tool call succeeded.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Outcome {
    /// The call did what was asked.
    Ok,
    /// The call failed; the output says why and what to do instead.
    Error,
    /// Whether the call took effect cannot be known: its MCP server died
    /// while it ran. The output says so; it was not repeated.
    Unknown,
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
