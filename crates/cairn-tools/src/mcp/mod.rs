//! MCP servers' tools in cairn's agent loop (DESIGN §17): each configured
//! server — a process on pipes, or a streamable HTTP endpoint — started (or
//! connected to) with the run, its tools offered beside the built-ins.
//!
//! Guarantees:
//! 1. **Names that cannot collide.** A server's tool `T` is offered as
//!    `mcp__SERVER__T` (the convention Claude Code uses), characters other
//!    than letters, digits, `_` and `-` replaced by `_`. Two tools that would
//!    get one name, or a name longer than 64 characters, stop the start with
//!    an error naming them: the model must be able to call every tool it is
//!    offered, and only that one.
//! 2. **Hints decide a crash.** Each tool's annotations, with the protocol's
//!    cautious defaults for any left out, are its [`McpHints`]. The agent
//!    journals them with each call; a call in flight at a crash runs again
//!    on resume only when the tool declared `readOnlyHint` or
//!    `idempotentHint` ([`McpHints::rerun_safe`]); any other gets `unknown`.
//!    The same rule holds within a run: a call whose server dies under it
//!    is made once more, on a restarted server, only for such a tool, and
//!    is otherwise [`Outcome::Unknown`](crate::Outcome::Unknown).
//! 3. **Bounded.** A server's description of a tool is cut at
//!    [`MAX_DESCRIPTION_BYTES`], a call's output at the toolbox's output
//!    limit (head and tail kept, what was left out said), a call's time at
//!    the server's `timeout` ([`DEFAULT_CALL_TIMEOUT`]): a call given up is
//!    `unknown`, and its server is stopped, so it cannot take effect later
//!    unseen, and started again for the next call.
//! 4. **Nothing of a server reaches a terminal raw or the journal unasked.**
//!    Its standard error goes to the sink given to [`McpServers::start`]
//!    (the CLI shows it only with `--mcp-stderr`, through the terminal-safe
//!    text filter) and is never part of a tool's output.
//! 5. **Stopped with the run** by [`McpServers::stop`], and killed when
//!    dropped, if not stopped before.

mod config;
mod server;

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

use rmcp::model::{CallToolResult, Tool as McpToolDef};

pub use config::{McpConfig, ServerConfig, Transport, DEFAULT_CALL_TIMEOUT, MAX_CONFIG_BYTES};
use server::{CallFailed, Server};

use crate::capture::OutputCap;
use crate::tool::{McpHints, McpOrigin, Outcome, Tool, ToolInfo, ToolOutput};
use crate::{ShellEnv, Workspace};

/// The longest tool description offered to the model.
pub const MAX_DESCRIPTION_BYTES: usize = 8 * 1024;
/// The longest name a tool may be offered under (the providers' limit).
const MAX_NAME: usize = 64;

/// Where a server's standard error lines go: `(server, line)`.
pub type StderrSink = Arc<dyn Fn(&str, &str) + Send + Sync>;

/// Why MCP servers could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// The configuration file is unreadable or wrong.
    #[error("MCP configuration {path}: {reason}")]
    Config {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A server did not start or list its tools.
    #[error("MCP server `{server}` did not start: {reason}{}", stderr_note(.stderr))]
    Start {
        /// The server.
        server: String,
        /// What went wrong.
        reason: String,
        /// The last lines it wrote to standard error.
        stderr: Vec<String>,
    },
    /// Its tools cannot be offered as they are.
    #[error("MCP server `{server}`: {reason}")]
    Tools {
        /// The server.
        server: String,
        /// What is wrong.
        reason: String,
    },
}

fn stderr_note(lines: &[String]) -> String {
    if lines.is_empty() {
        return String::new();
    }
    let shown: Vec<String> = lines
        .iter()
        .map(|l| format!("\n  | {}", cairn_store::text::visible(l)))
        .collect();
    format!("; it wrote on standard error:{}", shown.concat())
}

/// What [`McpServers::start`] needs besides the configuration.
#[derive(Clone)]
pub struct McpOptions {
    /// Where a server without a `cwd` runs: the session's workspace.
    pub workspace: PathBuf,
    /// The scrub applied to cairn's environment for the servers.
    pub env: ShellEnv,
    /// Where their standard error goes; `None` discards it.
    pub stderr: Option<StderrSink>,
    /// The most bytes of a call's output kept.
    pub max_output_bytes: usize,
}

/// The running servers of a run and the tools they offer.
#[derive(Clone)]
pub struct McpServers {
    servers: Vec<Arc<Server>>,
    tools: Vec<(Arc<Server>, ToolInfo)>,
    max_output_bytes: usize,
}

impl std::fmt::Debug for McpServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServers")
            .field(
                "servers",
                &self
                    .servers
                    .iter()
                    .map(|s| &s.config.name)
                    .collect::<Vec<_>>(),
            )
            .field("tools", &self.tools.len())
            .finish()
    }
}

impl McpServers {
    /// Starts every server of `config` and lists its tools.
    ///
    /// # Errors
    /// A server does not start, does not list its tools in time, or offers
    /// tools that cannot be named (module doc, rule 1). The servers started
    /// before it are stopped.
    pub async fn start(config: &McpConfig, options: McpOptions) -> Result<McpServers, McpError> {
        let env = options.env.filter(std::env::vars_os());
        let mut out = McpServers {
            servers: Vec::new(),
            tools: Vec::new(),
            max_output_bytes: options.max_output_bytes,
        };
        let mut names = BTreeMap::new();
        for c in &config.servers {
            let server = Arc::new(Server::new(
                c.clone(),
                env.clone(),
                options.workspace.clone(),
                options.stderr.clone(),
            ));
            out.servers.push(Arc::clone(&server));
            let listed = match server.start().await {
                Ok(l) => l,
                Err(e) => {
                    out.stop().await;
                    return Err(e);
                }
            };
            for def in listed {
                let info = match tool_info(&c.name, &def) {
                    Ok(i) => i,
                    Err(reason) => {
                        out.stop().await;
                        return Err(McpError::Tools {
                            server: c.name.clone(),
                            reason,
                        });
                    }
                };
                if let Some(other) = names.insert(info.name.to_string(), def.name.to_string()) {
                    out.stop().await;
                    return Err(McpError::Tools {
                        server: c.name.clone(),
                        reason: format!(
                            "its tools `{other}` and `{}` would both be offered as `{}`",
                            def.name, info.name
                        ),
                    });
                }
                out.tools.push((Arc::clone(&server), info));
            }
        }
        Ok(out)
    }

    /// The tools, in server then server's order, to add to a toolbox.
    pub fn tools(&self) -> Vec<Box<dyn Tool>> {
        self.tools
            .iter()
            .map(|(server, info)| {
                Box::new(McpTool {
                    server: Arc::clone(server),
                    info: info.clone(),
                    max_output_bytes: self.max_output_bytes,
                }) as Box<dyn Tool>
            })
            .collect()
    }

    /// The configured servers' names, in order.
    pub fn server_names(&self) -> Vec<String> {
        self.servers.iter().map(|s| s.config.name.clone()).collect()
    }

    /// Stops every server.
    pub async fn stop(&self) {
        for s in &self.servers {
            s.stop().await;
        }
    }
}

/// The name a server's tool is offered under (module doc, rule 1).
fn offered_name(server: &str, tool: &str) -> Result<String, String> {
    let clean: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let name = format!("mcp__{server}__{clean}");
    if tool.is_empty() || name.len() > MAX_NAME {
        return Err(format!(
            "its tool {tool:?} cannot be offered: `{name}` is empty or longer than {MAX_NAME} characters"
        ));
    }
    Ok(name)
}

fn tool_info(server: &str, def: &McpToolDef) -> Result<ToolInfo, String> {
    let hints = def
        .annotations
        .as_ref()
        .map_or_else(McpHints::default, |a| {
            let d = McpHints::default();
            McpHints {
                read_only: a.read_only_hint.unwrap_or(d.read_only),
                destructive: a.destructive_hint.unwrap_or(d.destructive),
                idempotent: a.idempotent_hint.unwrap_or(d.idempotent),
                open_world: a.open_world_hint.unwrap_or(d.open_world),
            }
        });
    let mut description = def
        .description
        .as_deref()
        .or(def.title.as_deref())
        .unwrap_or("")
        .to_owned();
    if description.len() > MAX_DESCRIPTION_BYTES {
        let mut end = MAX_DESCRIPTION_BYTES;
        while !description.is_char_boundary(end) {
            end -= 1;
        }
        description.truncate(end);
        description.push_str(" [cut by cairn]");
    }
    Ok(ToolInfo {
        name: offered_name(server, &def.name)?.into(),
        description: description.into(),
        parameters: serde_json::Value::Object((*def.input_schema).clone()),
        idempotent: hints.rerun_safe(),
        read_only: hints.read_only,
        mcp: Some(McpOrigin {
            server: server.to_owned(),
            tool: def.name.to_string(),
            hints,
        }),
    })
}

/// One server tool, as the toolbox sees it.
struct McpTool {
    server: Arc<Server>,
    info: ToolInfo,
    max_output_bytes: usize,
}

impl McpTool {
    fn origin(&self) -> (&str, &str, McpHints) {
        match &self.info.mcp {
            Some(o) => (&o.server, &o.tool, o.hints),
            None => ("", "", McpHints::default()),
        }
    }
}

#[async_trait::async_trait]
impl Tool for McpTool {
    fn info(&self) -> ToolInfo {
        self.info.clone()
    }

    async fn call(&self, _ws: &Workspace, arguments: &serde_json::Value) -> ToolOutput {
        let (server, tool, hints) = self.origin();
        let args = match arguments {
            serde_json::Value::Object(m) => Some(m.clone()),
            serde_json::Value::Null => None,
            other => {
                return ToolOutput::error(format!(
                    "the arguments of {} must be a JSON object, not {other}",
                    self.info.name
                ))
            }
        };
        let mut first = self.server.call(tool, args.clone()).await;
        // Rule 2: a call whose server died under it is made again only for
        // a tool that said doing so is safe.
        if matches!(first, Err(CallFailed::Died(_))) && hints.rerun_safe() {
            first = self.server.call(tool, args).await;
        }
        match first {
            Ok((result, _)) => render(&result, self.max_output_bytes),
            Err(CallFailed::Refused(msg)) => ToolOutput::error(format!(
                "MCP server `{server}` refused the call of `{tool}`: {msg}"
            )),
            Err(CallFailed::NotStarted(why)) => ToolOutput::error(format!(
                "MCP server `{server}` could not be started for this call, so `{tool}` was not run: {why}"
            )),
            // A read-only tool changed nothing either way: an error.
            Err(CallFailed::TimedOut(limit)) if hints.read_only => ToolOutput::error(format!(
                "MCP server `{server}` did not answer the call of `{tool}` within {} s (its `timeout`), so it was stopped; the server is restarted for the next call.",
                limit.as_secs_f64()
            )),
            Err(CallFailed::TimedOut(limit)) => ToolOutput {
                outcome: Outcome::Unknown,
                output: format!(
                    "cairn: MCP server `{server}` did not answer the call of `{tool}` within {} s (its `timeout`), so it was stopped. Whether the call took effect is unknown, and it was NOT run again; the server is restarted for the next call.",
                    limit.as_secs_f64()
                ),
            },
            Err(CallFailed::Died(why)) => ToolOutput {
                outcome: Outcome::Unknown,
                output: format!(
                    "cairn: MCP server `{server}` stopped while `{tool}` ran ({why}). Whether the call took effect is unknown, and it was NOT run again; the server is restarted for the next call."
                ),
            },
        }
    }
}

/// A call's result as the model reads it: text parts as they are, other
/// parts described, structured content when there is nothing else; bounded.
fn render(result: &CallToolResult, max: usize) -> ToolOutput {
    let mut cap = OutputCap::new(max);
    let mut first = true;
    let mut push = |s: &str| {
        if !first {
            cap.push(b"\n");
        }
        first = false;
        cap.push(s.as_bytes());
    };
    for block in &result.content {
        let v = serde_json::to_value(block).unwrap_or_default();
        let kind = v.get("type").and_then(|t| t.as_str()).unwrap_or("unknown");
        match kind {
            "text" => push(v.get("text").and_then(|t| t.as_str()).unwrap_or("")),
            "resource" => {
                let r = v.get("resource").cloned().unwrap_or_default();
                let uri = r.get("uri").and_then(|u| u.as_str()).unwrap_or("?");
                match r.get("text").and_then(|t| t.as_str()) {
                    Some(text) => push(&format!("[resource {uri}]\n{text}")),
                    None => push(&format!("[binary resource {uri} left out]")),
                }
            }
            "resource_link" => push(&format!(
                "[resource link {}]",
                v.get("uri").and_then(|u| u.as_str()).unwrap_or("?")
            )),
            other => push(&format!(
                "[{other} content ({}) left out]",
                v.get("mimeType")
                    .and_then(|m| m.as_str())
                    .unwrap_or("no type")
            )),
        }
    }
    if result.content.is_empty() {
        if let Some(s) = &result.structured_content {
            push(&s.to_string());
        }
    }
    let output = cap.finish();
    if result.is_error == Some(true) {
        ToolOutput::error(output)
    } else {
        ToolOutput::ok(output)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_prefixed_cleaned_and_bounded() {
        assert_eq!(
            offered_name("fs", "read_file").unwrap(),
            "mcp__fs__read_file"
        );
        assert_eq!(offered_name("fs", "a.b/c").unwrap(), "mcp__fs__a_b_c");
        assert!(offered_name("fs", &"x".repeat(60)).is_err());
        assert!(offered_name("fs", "").is_err());
    }

    #[test]
    fn missing_hints_take_the_cautious_defaults() {
        let def: McpToolDef = serde_json::from_value(serde_json::json!({
            "name": "t", "inputSchema": {"type": "object"},
            "annotations": {"readOnlyHint": true}
        }))
        .unwrap();
        let info = tool_info("s", &def).unwrap();
        let hints = info.mcp.unwrap().hints;
        assert!(hints.read_only && hints.destructive && !hints.idempotent && hints.open_world);
        assert!(info.idempotent && info.read_only);
        let bare: McpToolDef = serde_json::from_value(
            serde_json::json!({"name": "t", "inputSchema": {"type": "object"}}),
        )
        .unwrap();
        let info = tool_info("s", &bare).unwrap();
        assert_eq!(info.mcp.unwrap().hints, McpHints::default());
        assert!(!info.idempotent && !info.read_only);
    }

    #[test]
    fn results_are_rendered_and_bounded() {
        let r: CallToolResult = serde_json::from_value(serde_json::json!({
            "content": [
                {"type": "text", "text": "hello"},
                {"type": "image", "data": "AAAA", "mimeType": "image/png"}
            ],
            "isError": true
        }))
        .unwrap();
        let out = render(&r, 1024);
        assert_eq!(out.outcome, Outcome::Error);
        assert_eq!(out.output, "hello\n[image content (image/png) left out]");
        let long: CallToolResult = serde_json::from_value(serde_json::json!({
            "content": [{"type": "text", "text": "y".repeat(10_000)}]
        }))
        .unwrap();
        let out = render(&long, 100);
        assert!(out.is_ok());
        assert!(out.output.len() < 400, "{}", out.output.len());
        let structured: CallToolResult = serde_json::from_value(
            serde_json::json!({"content": [], "structuredContent": {"n": 1}}),
        )
        .unwrap();
        assert_eq!(render(&structured, 100).output, r#"{"n":1}"#);
    }
}
