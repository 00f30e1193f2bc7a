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
//! 1. A server is either a `command` (with `args`, `env` and `cwd`), started
//!    with its standard input and output as the protocol's pipes (`"type"`
//!    `"stdio"` or left out), or a `url` of a streamable HTTP endpoint
//!    (`"type": "http"` or `"streamable-http"`, with `headers`).
//! 2. The legacy SSE transport (`"type": "sse"`) is refused with a clear
//!    error: starting the run without a configured server would change what
//!    the model is offered.
//! 3. `${NAME}` and `${NAME:-default}` in `command`, `args`, `env` values,
//!    `cwd`, `url` and `headers` values are replaced by the environment's
//!    value, so a token stays out of the file; a variable that is not set and
//!    has no default is an error naming it.
//! 4. A server's name is 1–32 letters, digits, `_` or `-`: it becomes part
//!    of its tools' names (`mcp__NAME__TOOL`).
//! 5. Servers are kept in name order, so the tools offered and the resume
//!    guard's fingerprint do not depend on how the file was written.
//! 6. `timeout` (seconds) bounds each call of a server's tools
//!    ([`DEFAULT_CALL_TIMEOUT`] without it).
//! 7. The file is read whole but bounded ([`MAX_CONFIG_BYTES`]); fields other
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

/// One server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerConfig {
    /// Its name in the file.
    pub name: String,
    /// How it is reached.
    pub transport: Transport,
    /// How long one call may take before it is given up (its outcome then
    /// unknown, the server restarted): `timeout` in seconds, default
    /// [`DEFAULT_CALL_TIMEOUT`].
    pub call_timeout: std::time::Duration,
}

/// A call's time limit when the configuration gives none.
pub const DEFAULT_CALL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(600);

/// How a server is reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Transport {
    /// A process cairn starts, speaking on its standard input and output.
    Stdio {
        /// The program.
        command: String,
        /// Its arguments.
        args: Vec<String>,
        /// Variables set for it, beyond the scrubbed environment it
        /// inherits.
        env: BTreeMap<String, String>,
        /// Its working directory: absolute, or relative to the configuration
        /// file's directory; `None` runs it in the session's workspace.
        cwd: Option<PathBuf>,
    },
    /// A streamable HTTP endpoint.
    Http {
        /// Its URL.
        url: String,
        /// Headers sent with every request (an `Authorization`, say).
        headers: BTreeMap<String, String>,
    },
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
    cwd: Option<String>,
    url: Option<String>,
    #[serde(default)]
    headers: BTreeMap<String, String>,
    timeout: Option<f64>,
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
            let x = |v: &str| {
                expand(v, &|n| std::env::var(n).ok()).map_err(|e| format!("server `{name}`: {e}"))
            };
            let kind = e.kind.as_deref().unwrap_or("");
            let transport = match (kind, &e.url, &e.command) {
                ("sse", _, _) => {
                    return Err(format!(
                        "server `{name}` uses the legacy SSE transport, which cairn does not speak: use its streamable HTTP endpoint (`\"type\": \"http\"`) or run it over stdio"
                    ))
                }
                ("http" | "streamable-http" | "", Some(url), _) => Transport::Http {
                    url: x(url)?,
                    headers: e
                        .headers
                        .iter()
                        .map(|(k, v)| Ok((k.clone(), x(v)?)))
                        .collect::<Result<_, String>>()?,
                },
                ("http" | "streamable-http", None, _) => {
                    return Err(format!("server `{name}` is an HTTP server without a `url`"))
                }
                ("stdio" | "", None, Some(command)) if !command.is_empty() => Transport::Stdio {
                    command: x(command)?,
                    args: e.args.iter().map(|a| x(a)).collect::<Result<_, _>>()?,
                    env: e
                        .env
                        .iter()
                        .map(|(k, v)| Ok((k.clone(), x(v)?)))
                        .collect::<Result<_, String>>()?,
                    cwd: e
                        .cwd
                        .as_deref()
                        .map(|c| x(c).map(PathBuf::from))
                        .transpose()?
                        .map(|c| if c.is_absolute() { c } else { dir.join(c) }),
                },
                ("stdio" | "", _, _) => return Err(format!("server `{name}` has no `command`")),
                (other, _, _) => {
                    return Err(format!(
                        "server `{name}` has the unknown type {other:?}: use \"stdio\" or \"http\""
                    ))
                }
            };
            let call_timeout = match e.timeout {
                None => DEFAULT_CALL_TIMEOUT,
                Some(t) if t.is_finite() && t > 0.0 && t <= 86_400.0 => {
                    std::time::Duration::from_secs_f64(t)
                }
                Some(t) => {
                    return Err(format!(
                        "server `{name}`: `timeout` is {t}; give seconds, more than 0 and at most 86400"
                    ))
                }
            };
            servers.push(ServerConfig {
                name,
                transport,
                call_timeout,
            });
        }
        Ok(McpConfig { servers })
    }
}

/// Rule 3: `${NAME}` and `${NAME:-default}` replaced by `var(NAME)`.
fn expand(text: &str, var: &dyn Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("${") {
        out.push_str(&rest[..at]);
        let after = &rest[at + 2..];
        let Some(end) = after.find('}') else {
            return Err(format!("`${{` without a closing `}}` in {text:?}"));
        };
        let inner = &after[..end];
        let (name, default) = match inner.split_once(":-") {
            Some((n, d)) => (n, Some(d)),
            None => (inner, None),
        };
        match (var(name), default) {
            (Some(v), _) => out.push_str(&v),
            (None, Some(d)) => out.push_str(d),
            (None, None) => {
                return Err(format!(
                    "the environment variable {name} is not set (write ${{{name}:-DEFAULT}} for a default)"
                ))
            }
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
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
        let Transport::Stdio { args, env, cwd, .. } = &c.servers[1].transport else {
            panic!("{c:?}")
        };
        assert_eq!(args, &["-v"]);
        assert_eq!(env.get("A").map(String::as_str), Some("1"));
        assert_eq!(cwd.as_deref(), Some(Path::new("/cfg/sub")));
        assert!(matches!(
            &c.servers[0].transport,
            Transport::Stdio { cwd: None, .. }
        ));
    }

    #[test]
    fn http_servers_are_read_with_their_headers() {
        let c = McpConfig::parse(
            r#"{"mcpServers": {
                "a": {"type": "http", "url": "http://127.0.0.1:7880/mcp", "headers": {"x-cairn-token": "t"}},
                "b": {"url": "https://example.com/mcp"}
            }}"#,
            Path::new("/"),
        )
        .unwrap();
        assert_eq!(
            c.servers[0].transport,
            Transport::Http {
                url: "http://127.0.0.1:7880/mcp".into(),
                headers: [("x-cairn-token".to_string(), "t".to_string())].into()
            }
        );
        assert!(matches!(&c.servers[1].transport, Transport::Http { .. }));
    }

    #[test]
    fn variables_are_expanded_and_a_missing_one_is_named() {
        let var = |n: &str| (n == "TOKEN").then(|| "s3cret".to_string());
        assert_eq!(expand("Bearer ${TOKEN}", &var).unwrap(), "Bearer s3cret");
        assert_eq!(expand("${NOPE:-x}/${TOKEN}", &var).unwrap(), "x/s3cret");
        assert_eq!(expand("plain $HOME", &var).unwrap(), "plain $HOME");
        assert!(expand("${NOPE}", &var)
            .unwrap_err()
            .contains("NOPE is not set"));
        assert!(expand("${TOKEN", &var).is_err());
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
                r#"{"mcpServers": {"web": {"type": "sse", "url": "http://localhost:1/sse"}}}"#,
                "legacy SSE",
            ),
            (
                r#"{"mcpServers": {"web": {"type": "http", "command": "x"}}}"#,
                "without a `url`",
            ),
            (
                r#"{"mcpServers": {"web": {"type": "ws", "url": "ws://x"}}}"#,
                "unknown type",
            ),
            (
                r#"{"mcpServers": {"n": {"command": "${CAIRN_TEST_SURELY_UNSET}"}}}"#,
                "CAIRN_TEST_SURELY_UNSET is not set",
            ),
            (r#"{"mcpServers": {"n": {"args": []}}}"#, "no `command`"),
            (
                r#"{"mcpServers": {"n": {"command": "x", "timeout": 0}}}"#,
                "`timeout` is 0",
            ),
        ];
        for (text, said) in cases {
            let err = McpConfig::parse(text, Path::new("/")).unwrap_err();
            assert!(err.contains(said), "{text}: {err}");
        }
    }
}
