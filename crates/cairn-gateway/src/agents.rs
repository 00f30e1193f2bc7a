//! The agents `cairn wrap` knows (DESIGN §16): for each, its program, how it
//! is pointed at a gateway without touching its user's configuration, and the
//! header it names its own sessions by.
//!
//! | agent | program | pointed at the gateway by | its session header |
//! |---|---|---|---|
//! | Claude Code | `claude` | `ANTHROPIC_BASE_URL=http://ADDR` | `X-Claude-Code-Session-Id` |
//! | Codex | `codex` | `-c` overrides naming a `model_providers.cairn` (`base_url = "http://ADDR/v1"`, `wire_api = "responses"`, `env_key = "OPENAI_API_KEY"`) and `model_provider = "cairn"`; it ignores `OPENAI_BASE_URL` | `session-id` (`thread-id`) |
//! | aider | `aider` | `OPENAI_BASE_URL` / `OPENAI_API_BASE` (`…/v1`) and `ANTHROPIC_BASE_URL` / `ANTHROPIC_API_BASE` | none |
//!
//! The rules [`Agent::launch`] keeps:
//! 1. nothing is written anywhere: what points the agent at the gateway is
//!    its environment and, for Codex, `-c` flags, which Codex applies over
//!    its `config.toml` for this process only;
//! 2. the agent's own arguments follow cairn's, unchanged, so an argument of
//!    the user's that names another provider still wins (their choice);
//! 3. the key stays where the user keeps it: each agent reads its usual
//!    variable (`ANTHROPIC_API_KEY`, `OPENAI_API_KEY`), and the gateway passes
//!    the client's credential upstream without storing it.
//!
//! ```
//! use cairn_gateway::Agent;
//!
//! let codex: Agent = "codex".parse()?;
//! let launch = codex.launch("127.0.0.1:4000".parse()?, &["exec".into(), "fix it".into()]);
//! let args: Vec<_> = launch.args.iter().map(|a| a.to_string_lossy()).collect();
//! assert!(args.contains(&r#"model_providers.cairn.base_url="http://127.0.0.1:4000/v1""#.into()));
//! assert_eq!(args[args.len() - 2..], ["exec", "fix it"]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::ffi::OsString;
use std::fmt;
use std::net::SocketAddr;
use std::path::Path;
use std::str::FromStr;

use crate::key::SessionHeader;

/// The provider name cairn gives Codex (`model_providers.cairn`).
const CODEX_PROVIDER: &str = "cairn";

/// An agent CLI that `cairn wrap` can start.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Agent {
    /// Anthropic's Claude Code (`claude`).
    ClaudeCode,
    /// OpenAI's Codex CLI (`codex`).
    Codex,
    /// aider (`aider`).
    Aider,
}

/// How to start an agent against a gateway: its arguments and the variables
/// to set in its environment (everything else it inherits).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentLaunch {
    /// The arguments after the program's name: cairn's first, then the
    /// user's.
    pub args: Vec<OsString>,
    /// Variables to set, in this order.
    pub env: Vec<(&'static str, String)>,
}

/// A name that is not one of [`Agent::ALL`].
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("no agent called {given:?}: cairn wraps claude (Claude Code), codex (Codex) and aider")]
pub struct UnknownAgent {
    /// What was given.
    pub given: String,
}

impl Agent {
    /// Every agent, in the order help lists them.
    pub const ALL: [Agent; 3] = [Agent::ClaudeCode, Agent::Codex, Agent::Aider];

    /// The name `cairn wrap` takes, which also names the session's nodes:
    /// `claude`, `codex`, `aider`.
    pub fn name(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "claude",
            Agent::Codex => "codex",
            Agent::Aider => "aider",
        }
    }

    /// What people call it: `Claude Code`, `Codex`, `aider`.
    pub fn title(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "Claude Code",
            Agent::Codex => "Codex",
            Agent::Aider => "aider",
        }
    }

    /// The program looked up on `PATH`.
    pub fn program(self) -> &'static str {
        self.name()
    }

    /// Its program: the first executable file called [`Agent::program`] in a
    /// directory of `path` (a `PATH` value), as a shell would find it.
    pub fn find_in(self, path: &std::ffi::OsStr) -> Option<std::path::PathBuf> {
        use std::os::unix::fs::PermissionsExt;
        std::env::split_paths(path)
            .filter(|dir| !dir.as_os_str().is_empty())
            .map(|dir| dir.join(self.program()))
            .find(|p| {
                std::fs::metadata(p)
                    .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
            })
    }

    /// How to install it, for a message when it is missing.
    pub fn install_hint(self) -> &'static str {
        match self {
            Agent::ClaudeCode => "npm install -g @anthropic-ai/claude-code",
            Agent::Codex => "npm install -g @openai/codex",
            Agent::Aider => "python3 -m pip install aider-chat",
        }
    }

    /// The header its requests name its own session by, if any.
    pub fn session_header(self) -> Option<SessionHeader> {
        match self {
            Agent::ClaudeCode => Some(SessionHeader::ClaudeCode),
            Agent::Codex => Some(SessionHeader::CodexSession),
            Agent::Aider => None,
        }
    }

    /// What to run it with so that its model calls go to the gateway
    /// listening at `gateway`, `args` being the user's own arguments (the
    /// rules are in the module doc).
    pub fn launch(self, gateway: SocketAddr, args: &[OsString]) -> AgentLaunch {
        let root = format!("http://{gateway}");
        let v1 = format!("{root}/v1");
        let (mut cairn_args, env): (Vec<OsString>, Vec<(&'static str, String)>) = match self {
            Agent::ClaudeCode => (Vec::new(), vec![("ANTHROPIC_BASE_URL", root)]),
            Agent::Codex => {
                let p = CODEX_PROVIDER;
                let settings = [
                    format!("model_provider={}", toml_string(p)),
                    format!("model_providers.{p}.name={}", toml_string("cairn gateway")),
                    format!("model_providers.{p}.base_url={}", toml_string(&v1)),
                    format!("model_providers.{p}.wire_api={}", toml_string("responses")),
                    format!(
                        "model_providers.{p}.env_key={}",
                        toml_string("OPENAI_API_KEY")
                    ),
                ];
                let args = settings
                    .into_iter()
                    .flat_map(|s| [OsString::from("-c"), OsString::from(s)])
                    .collect();
                (args, Vec::new())
            }
            // aider reads either spelling (through litellm), so both are set:
            // a stale one of the user's would otherwise win.
            Agent::Aider => (
                Vec::new(),
                vec![
                    ("OPENAI_BASE_URL", v1.clone()),
                    ("OPENAI_API_BASE", v1),
                    ("ANTHROPIC_BASE_URL", root.clone()),
                    ("ANTHROPIC_API_BASE", root),
                ],
            ),
        };
        cairn_args.extend(args.iter().cloned());
        AgentLaunch {
            args: cairn_args,
            env,
        }
    }

    /// The name of a new session of this agent working in `workspace`: the
    /// agent's name, `@`, and the repository's directory name
    /// (`claude@myapp`; the git top-level when inside a work tree).
    pub fn session_name(self, workspace: &Path) -> String {
        let root = cairn_sessions::repository_root(workspace);
        match root.file_name() {
            Some(repo) => format!("{}@{}", self.name(), repo.to_string_lossy()),
            None => self.name().to_owned(),
        }
    }
}

impl fmt::Display for Agent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl FromStr for Agent {
    type Err = UnknownAgent;

    fn from_str(s: &str) -> Result<Agent, UnknownAgent> {
        Agent::ALL
            .into_iter()
            .find(|a| a.name() == s)
            .ok_or_else(|| UnknownAgent {
                given: s.to_owned(),
            })
    }
}

/// `s` as a TOML basic string (Codex reads each `-c` value as TOML).
fn toml_string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strings(v: &[OsString]) -> Vec<String> {
        v.iter().map(|s| s.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn each_agent_is_pointed_at_the_gateway_its_own_way() {
        let addr: SocketAddr = "127.0.0.1:4321".parse().unwrap();
        let user = [OsString::from("-p"), OsString::from("fix it")];
        type Row<'a> = (Agent, &'a [&'a str], &'a [(&'a str, &'a str)]);
        let rows: &[Row] = &[
            (
                Agent::ClaudeCode,
                &["-p", "fix it"],
                &[("ANTHROPIC_BASE_URL", "http://127.0.0.1:4321")],
            ),
            (
                Agent::Codex,
                &[
                    "-c",
                    "model_provider=\"cairn\"",
                    "-c",
                    "model_providers.cairn.name=\"cairn gateway\"",
                    "-c",
                    "model_providers.cairn.base_url=\"http://127.0.0.1:4321/v1\"",
                    "-c",
                    "model_providers.cairn.wire_api=\"responses\"",
                    "-c",
                    "model_providers.cairn.env_key=\"OPENAI_API_KEY\"",
                    "-p",
                    "fix it",
                ],
                &[],
            ),
            (
                Agent::Aider,
                &["-p", "fix it"],
                &[
                    ("OPENAI_BASE_URL", "http://127.0.0.1:4321/v1"),
                    ("OPENAI_API_BASE", "http://127.0.0.1:4321/v1"),
                    ("ANTHROPIC_BASE_URL", "http://127.0.0.1:4321"),
                    ("ANTHROPIC_API_BASE", "http://127.0.0.1:4321"),
                ],
            ),
        ];
        for (agent, args, env) in rows {
            let launch = agent.launch(addr, &user);
            assert_eq!(strings(&launch.args), *args, "{agent}");
            let got: Vec<(&str, &str)> = launch.env.iter().map(|(k, v)| (*k, v.as_str())).collect();
            assert_eq!(got, *env, "{agent}");
        }
    }

    #[test]
    fn an_ipv6_gateway_is_bracketed() {
        let launch = Agent::ClaudeCode.launch("[::1]:80".parse().unwrap(), &[]);
        assert_eq!(
            launch.env,
            [("ANTHROPIC_BASE_URL", "http://[::1]:80".to_owned())]
        );
    }

    #[test]
    fn names_parse_back_and_nothing_else_does() {
        for agent in Agent::ALL {
            assert_eq!(agent.name().parse::<Agent>(), Ok(agent));
        }
        for bad in ["", "Claude", "claude-code", "gpt", "codex "] {
            let err = bad.parse::<Agent>().unwrap_err();
            assert!(err.to_string().contains("claude"), "{err}");
        }
    }

    #[test]
    fn toml_strings_are_quoted_and_escaped() {
        let rows = [
            ("cairn", "\"cairn\""),
            ("a\"b", "\"a\\\"b\""),
            ("a\\b", "\"a\\\\b\""),
            ("a\nb", "\"a\\u000Ab\""),
        ];
        for (s, want) in rows {
            assert_eq!(toml_string(s), want);
        }
    }

    #[test]
    fn the_program_is_the_first_executable_of_its_name_on_the_path() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let (a, b, c) = (d.path().join("a"), d.path().join("b"), d.path().join("c"));
        for dir in [&a, &b, &c] {
            std::fs::create_dir_all(dir).unwrap();
        }
        // Not executable, then a directory, then the one.
        std::fs::write(a.join("codex"), "").unwrap();
        std::fs::create_dir_all(b.join("codex")).unwrap();
        std::fs::write(c.join("codex"), "").unwrap();
        std::fs::set_permissions(c.join("codex"), std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = std::env::join_paths([&a, &b, &c]).unwrap();
        assert_eq!(Agent::Codex.find_in(&path), Some(c.join("codex")));
        assert_eq!(Agent::ClaudeCode.find_in(&path), None);
        assert_eq!(Agent::Codex.find_in(std::ffi::OsStr::new("")), None);
    }

    #[test]
    fn a_session_is_named_for_the_agent_and_the_repository() {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        std::fs::create_dir_all(root.join("myapp/.git")).unwrap();
        std::fs::create_dir_all(root.join("myapp/src")).unwrap();
        std::fs::create_dir_all(root.join("plain")).unwrap();
        assert_eq!(
            Agent::Codex.session_name(&root.join("myapp/src")),
            "codex@myapp"
        );
        assert_eq!(
            Agent::ClaudeCode.session_name(&root.join("plain")),
            "claude@plain"
        );
        assert_eq!(Agent::Aider.session_name(Path::new("/")), "aider");
    }
}
