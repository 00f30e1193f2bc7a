//! The `mcpServers` configuration (the JSON format Claude Code's `.mcp.json`
//! and other clients share): which MCP servers a run starts, and how.
//!
//! ```json
//! {"mcpServers": {
//!   "notes": {"command": "python3", "args": ["notes_server.py"], "env": {"NOTES_DIR": "notes"}}
//! }}
//! ```
//!
//! Rules:
//! 1. A server is a `command` (with `args`, `env` and `cwd`), started with
//!    its standard input and output as the protocol's pipes. `"type"` may
//!    say `"stdio"` or be left out.
//! 2. A server named by `url` (`"type": "http"`, `"sse"`) is refused with a
//!    clear error: this build speaks to stdio servers only, and starting the
//!    run without a configured server would change what the model is
//!    offered.
//! 3. A server's name is 1–32 letters, digits, `_` or `-`: it becomes part
//!    of its tools' names (`mcp__NAME__TOOL`).
//! 4. Servers are kept in name order, so the tools offered and the resume
//!    guard's fingerprint do not depend on how the file was written.
//! 5. The file is read whole but bounded ([`MAX_CONFIG_BYTES`]); fields other
//!    clients use and cairn does not are ignored.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Deserialize;

use super::McpError;

/// The largest configuration file read.
pub const MAX_CONFIG_BYTES: u64 = 1024 * 1024;

/// The servers of one configuration file, in name order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct McpConfig {
    /// Each server.
    pub servers: Vec<ServerConfig>,
}

/// One stdio server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// Its name in the file.
    pub name: String,
    /// The program.
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Variables set for it, beyond the scrubbed environment it inherits.
    pub env: BTreeMap<String, String>,
    /// Its working directory: absolute, or relative to the configuration
    /// file's directory; `None` runs it in the session's workspace.
    pub cwd: Option<PathBuf>,
}

#[derive(Deserialize)]
struct File {
    #[serde(rename = "mcpServers")]
    servers: Option<BTreeMap<String, Entry>>,
}

#[derive(Deserialize)]
struct Entry {
    #[serde(rename = "type")]
    kind: Option<String>,
    command: Option<String>,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: BTreeMap<String, String>,
    cwd: Option<PathBuf>,
    url: Option<String>,
}

impl McpConfig {
    /// Reads the configuration file at `path`.
    ///
    /// # Errors
    /// [`McpError::Config`]: the file cannot be read, is too large, or breaks
    /// a rule of the module doc.
    pub fn load(path: &Path) -> Result<McpConfig, McpError> {
        use std::io::Read;
        let bad = |reason: String| McpError::Config {
            path: path.to_path_buf(),
            reason,
        };
        let file = std::fs::File::open(path).map_err(|e| bad(e.to_string()))?;
        let mut text = String::new();
        file.take(MAX_CONFIG_BYTES + 1)
            .read_to_string(&mut text)
            .map_err(|e| bad(e.to_string()))?;
        if text.len() as u64 > MAX_CONFIG_BYTES {
            return Err(bad(format!("it is larger than {MAX_CONFIG_BYTES} bytes")));
        }
        let dir = path.parent().unwrap_or(Path::new("."));
        Self::parse(&text, dir).map_err(bad)
    }

    /// Parses a configuration's text; relative `cwd`s are taken from `dir`.
    ///
    /// # Errors
    /// What is wrong, for [`McpError::Config`].
    pub fn parse(text: &str, dir: &Path) -> Result<McpConfig, String> {
        let file: File = serde_json::from_str(text).map_err(|e| {
            format!("it is not an `mcpServers` configuration ({e}); write {{\"mcpServers\": {{\"NAME\": {{\"command\": \"PROGRAM\", \"args\": []}}}}}}")
        })?;
        let Some(entries) = file.servers else {
            return Err("it has no `mcpServers` object".into());
        };
        let mut servers = Vec::with_capacity(entries.len());
        for (name, e) in entries {
            if name.is_empty()
                || name.len() > 32
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            {
                return Err(format!(
                    "the server name {name:?} is not 1-32 letters, digits, `_` or `-` (it becomes part of its tools' names)"
                ));
            }
            let remote = e.url.is_some()
                || e.kind
                    .as_deref()
                    .is_some_and(|k| k != "stdio" && !k.is_empty());
            if remote {
                return Err(format!(
                    "server `{name}` is reached over HTTP ({}); this cairn starts stdio servers only: give it a `command`",
                    e.url.as_deref().or(e.kind.as_deref()).unwrap_or("url")
                ));
            }
            let Some(command) = e.command.filter(|c| !c.is_empty()) else {
                return Err(format!("server `{name}` has no `command`"));
            };
            servers.push(ServerConfig {
                cwd: e.cwd.map(|c| if c.is_absolute() { c } else { dir.join(c) }),
                name,
                command,
                args: e.args,
                env: e.env,
            });
        }
        Ok(McpConfig { servers })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_are_read_in_name_order_with_their_fields() {
        let c = McpConfig::parse(
            r#"{"mcpServers": {
                "zeta": {"command": "z", "args": ["-v"], "env": {"A": "1"}, "cwd": "sub", "alwaysAllow": []},
                "alpha": {"type": "stdio", "command": "a"}
            }, "other": 1}"#,
            Path::new("/cfg"),
        )
        .unwrap();
        let names: Vec<_> = c.servers.iter().map(|s| s.name.as_str()).collect();
        assert_eq!(names, ["alpha", "zeta"]);
        assert_eq!(c.servers[1].args, ["-v"]);
        assert_eq!(c.servers[1].env.get("A").map(String::as_str), Some("1"));
        assert_eq!(c.servers[1].cwd.as_deref(), Some(Path::new("/cfg/sub")));
        assert_eq!(c.servers[0].cwd, None);
    }

    #[test]
    fn what_cannot_be_started_is_refused_with_the_reason() {
        let cases = [
            ("[]", "not an `mcpServers` configuration"),
            ("{}", "no `mcpServers`"),
            (
                r#"{"mcpServers": {"a b": {"command": "x"}}}"#,
                "server name",
            ),
            (
                r#"{"mcpServers": {"web": {"url": "http://localhost:1/mcp"}}}"#,
                "over HTTP",
            ),
            (
                r#"{"mcpServers": {"web": {"type": "http", "command": "x"}}}"#,
                "over HTTP",
            ),
            (r#"{"mcpServers": {"n": {"args": []}}}"#, "no `command`"),
        ];
        for (text, said) in cases {
            let err = McpConfig::parse(text, Path::new("/")).unwrap_err();
            assert!(err.contains(said), "{text}: {err}");
        }
    }
}
