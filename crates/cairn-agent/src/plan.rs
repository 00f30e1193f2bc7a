//! What a run or a resume works with: the model and where it is served, the
//! system prompt, the thinking mode and the budgets — decided from what the
//! user asked for and, on resume, from what the session recorded.
//!
//! The rules, in one place (DESIGN §4.3, §4.4):
//! 1. A `script:` path is made absolute, so a resume from any directory finds
//!    it; a system prompt file likewise.
//! 2. On resume, the recorded provider and model are used unless a model is
//!    given; the base URL is the one given, else the environment's for that
//!    provider, else — only when the model was not changed — the recorded one.
//! 3. Budgets start from the recorded ones; each one given replaces its
//!    value. A cost budget must be a finite, non-negative number of dollars.
//! 4. The thinking mode is the one given, else the recorded one; it must be
//!    `off`, `on`, `minimal`, `low`, `medium`, `high` or a token budget (a
//!    whole number of at least 1024).
//! 5. A recorded system prompt file that can no longer be read is dropped
//!    with a notice: the resume guard then names the change.
//!
//! The plan reads files (the script, the system prompt) but no environment
//! variable: the caller passes what the environment says.

use std::path::{Path, PathBuf};

use cairn_journal::{Budgets, Meta, Routing, RunState};
use cairn_model::{ModelSpec, ProviderKind};
use cairn_tools::ToolInfo;

use crate::{AgentError, Config};

/// What the user asked for on the command line (every field optional).
#[derive(Clone, Debug, Default)]
pub struct Request {
    /// `script:PATH | openai:MODEL | openai-responses:MODEL | anthropic:MODEL`.
    pub model: Option<String>,
    /// A base URL.
    pub base_url: Option<String>,
    /// Budget: most model turns.
    pub max_turns: Option<u64>,
    /// Budget: most tokens.
    pub max_tokens: Option<u64>,
    /// Budget: most US dollars.
    pub max_cost: Option<f64>,
    /// Thinking mode.
    pub thinking: Option<String>,
    /// The MCP servers whose tools are offered beside the built-ins, started
    /// by [`crate::Launcher::start_mcp`] (DESIGN §17).
    pub mcp: Option<cairn_tools::mcp::McpServers>,
}

/// A system prompt: the file it came from (absolute) and its text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SystemPrompt {
    /// The file, absolute.
    pub path: PathBuf,
    /// Its text.
    pub text: String,
}

/// Everything needed to build the agent for a session.
#[derive(Clone, Debug)]
pub struct Plan {
    /// The model.
    pub spec: ModelSpec,
    /// Where it is served, when not the provider's default.
    pub base_url: Option<String>,
    /// The system prompt.
    pub system: Option<SystemPrompt>,
    /// The thinking mode.
    pub thinking: Option<String>,
    /// The budgets.
    pub budgets: Budgets,
    /// What the user should be told about the plan (a dropped prompt file).
    pub notices: Vec<String>,
}

impl Plan {
    /// The plan of a new run: `request.model`, else `default_model` (the
    /// caller's `CAIRN_MODEL`); `system` is the `--system` file.
    ///
    /// # Errors
    /// [`AgentError::Plan`] when no model is chosen or a value is invalid;
    /// [`AgentError::SystemPrompt`] when the prompt file cannot be read;
    /// [`cairn_model::ModelError::InvalidSpec`] for a malformed spec.
    pub fn for_run(
        request: &Request,
        default_model: Option<&str>,
        system: Option<&Path>,
    ) -> Result<Plan, AgentError> {
        let text = request
            .model
            .as_deref()
            .or(default_model)
            .filter(|m| !m.trim().is_empty())
            .ok_or_else(|| {
                plan_error(
                    "no model named and no key set: set OPENAI_API_KEY or ANTHROPIC_API_KEY (a default model of that provider is then used), or choose one with --model script:PATH | openai:MODEL | openai-responses:MODEL | anthropic:MODEL, CAIRN_MODEL, or `model` in ~/.config/cairn/config.toml",
                )
            })?;
        let system = match system {
            Some(p) => Some(read_system(p)?),
            None => None,
        };
        Ok(Plan {
            spec: parse_spec(text)?,
            base_url: request.base_url.clone(),
            system,
            thinking: thinking(request.thinking.as_deref())?,
            budgets: budgets(request, None)?,
            notices: Vec::new(),
        })
    }

    /// The plan of a resume of the session whose folded state is `state`;
    /// `env_base_url` gives the environment's base URL for a provider (the
    /// caller's `OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL`).
    ///
    /// # Errors
    /// [`AgentError::NotResumable`] when the session records no model;
    /// [`AgentError::RecordedRouting`] when what it records cannot be used;
    /// otherwise as [`Plan::for_run`].
    pub fn for_resume(
        state: &RunState,
        request: &Request,
        env_base_url: &dyn Fn(ProviderKind) -> Option<String>,
    ) -> Result<Plan, AgentError> {
        let (Some(routing), Some(recorded)) = (&state.routing, &state.fingerprint) else {
            return Err(AgentError::NotResumable {
                run: state.run.clone(),
                reason: "it records no model (it was made by `cairn exec`, `cairn snapshot` or another tool)".into(),
            });
        };
        let spec = match &request.model {
            Some(s) => parse_spec(s)?,
            None => format!("{}:{}", routing.provider, routing.model)
                .parse()
                .map_err(|e: cairn_model::ModelError| AgentError::RecordedRouting {
                    run: state.run.clone(),
                    reason: e.to_string(),
                })?,
        };
        let base_url = request
            .base_url
            .clone()
            .or_else(|| env_base_url(spec.kind))
            .or_else(|| {
                request
                    .model
                    .is_none()
                    .then(|| routing.base_url.clone())
                    .flatten()
            });
        let mut notices = Vec::new();
        let system = match &state.system_file {
            Some(p) => match read_system(Path::new(p)) {
                Ok(s) => Some(s),
                Err(e) => {
                    notices.push(format!(
                        "{e}; continuing without it changes the configuration"
                    ));
                    None
                }
            },
            None => None,
        };
        let thinking = match &request.thinking {
            Some(t) => thinking(Some(t))?,
            None => recorded.thinking.clone(),
        };
        Ok(Plan {
            spec,
            base_url,
            system,
            thinking,
            budgets: budgets(request, Some(&recorded.budgets))?,
            notices,
        })
    }

    /// The agent's configuration.
    pub fn config(&self) -> Config {
        Config {
            spec: self.spec.to_string(),
            system: self.system.as_ref().map(|s| s.text.clone()),
            thinking: self.thinking.clone(),
            budgets: self.budgets.clone(),
            max_output_tokens: None,
        }
    }

    /// The fingerprint of this plan with the tool set `tools` (DESIGN §4.3).
    pub fn fingerprint(&self, tools: &[ToolInfo]) -> cairn_journal::Fingerprint {
        crate::fingerprint(
            &self.spec.to_string(),
            self.system.as_ref().map(|s| s.text.as_str()),
            tools,
            self.thinking.as_deref(),
            &self.budgets,
        )
    }

    /// The `meta` record of a new session run by this plan in `workspace`,
    /// served from `base_url` (the provider's, as it normalised it).
    pub fn meta(
        &self,
        workspace: &Path,
        name: Option<String>,
        tools: &[ToolInfo],
        base_url: Option<&str>,
    ) -> Meta {
        Meta {
            run: String::new(),
            created: cairn_journal::now_rfc3339(),
            workspace: workspace.to_string_lossy().into_owned(),
            name,
            fingerprint: Some(self.fingerprint(tools)),
            fork: None,
            routing: Some(Routing {
                provider: self.spec.kind.as_str().into(),
                model: self.spec.model.clone(),
                base_url: base_url.map(str::to_owned),
            }),
            system_file: self
                .system
                .as_ref()
                .map(|s| s.path.to_string_lossy().into_owned()),
        }
    }
}

fn plan_error(reason: impl Into<String>) -> AgentError {
    AgentError::Plan {
        reason: reason.into(),
    }
}

fn parse_spec(text: &str) -> Result<ModelSpec, AgentError> {
    let mut spec: ModelSpec = text.parse()?;
    if spec.kind == ProviderKind::Script {
        let p = Path::new(&spec.model);
        let abs = std::fs::canonicalize(p).map_err(|e| {
            plan_error(format!(
                "cannot read the script {}: {e}; give the path of a script file",
                p.display()
            ))
        })?;
        spec.model = abs.to_string_lossy().into_owned();
    }
    Ok(spec)
}

fn read_system(path: &Path) -> Result<SystemPrompt, AgentError> {
    let fail = |source| AgentError::SystemPrompt {
        path: path.to_owned(),
        source,
    };
    let path = std::fs::canonicalize(path).map_err(fail)?;
    let text = std::fs::read_to_string(&path).map_err(|source| AgentError::SystemPrompt {
        path: path.clone(),
        source,
    })?;
    Ok(SystemPrompt { path, text })
}

fn budgets(request: &Request, recorded: Option<&Budgets>) -> Result<Budgets, AgentError> {
    let mut b = recorded.cloned().unwrap_or_default();
    if let Some(x) = request.max_turns {
        b.max_turns = Some(x);
    }
    if let Some(x) = request.max_tokens {
        b.max_tokens = Some(x);
    }
    if let Some(x) = request.max_cost {
        if !(x.is_finite() && x >= 0.0) {
            return Err(plan_error(
                "--max-cost must be a non-negative number of US dollars",
            ));
        }
        b.max_cost_usd = Some(x);
    }
    Ok(b)
}

/// The smallest thinking budget, in tokens, that Anthropic accepts.
const MIN_THINKING_TOKENS: u64 = 1024;

fn thinking(mode: Option<&str>) -> Result<Option<String>, AgentError> {
    let Some(mode) = mode else {
        return Ok(None);
    };
    let m = mode.trim().to_ascii_lowercase();
    let ok = matches!(
        m.as_str(),
        "off" | "on" | "minimal" | "low" | "medium" | "high"
    ) || m.parse::<u64>().is_ok_and(|n| n >= MIN_THINKING_TOKENS);
    if ok {
        Ok(Some(m))
    } else {
        Err(plan_error(format!(
            "--thinking {mode:?} is not a thinking mode: give off, on, minimal, low, medium, high, or a token budget of at least {MIN_THINKING_TOKENS}"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinking_modes() {
        let rows = [
            ("off", Some("off")),
            ("High", Some("high")),
            (" medium ", Some("medium")),
            ("on", Some("on")),
            ("minimal", Some("minimal")),
            ("2048", Some("2048")),
            ("1024", Some("1024")),
            ("1023", None),
            ("0", None),
            ("-5", None),
            ("banana", None),
            ("", None),
        ];
        for (mode, want) in rows {
            let got = thinking(Some(mode)).ok().flatten();
            assert_eq!(got.as_deref(), want, "{mode:?}");
        }
        assert_eq!(thinking(None).ok().flatten(), None);
    }

    #[test]
    fn cost_budgets_must_be_finite_and_not_negative() {
        for (cost, ok) in [(0.0, true), (2.5, true), (-1.0, false), (f64::NAN, false)] {
            let r = Request {
                max_cost: Some(cost),
                ..Request::default()
            };
            assert_eq!(budgets(&r, None).is_ok(), ok, "{cost}");
        }
    }

    #[test]
    fn recorded_budgets_are_kept_unless_given() {
        let recorded = Budgets {
            max_turns: Some(3),
            max_tokens: Some(100),
            max_cost_usd: None,
        };
        let r = Request {
            max_turns: Some(5),
            ..Request::default()
        };
        let b = budgets(&r, Some(&recorded)).unwrap();
        assert_eq!(b.max_turns, Some(5));
        assert_eq!(b.max_tokens, Some(100));
    }
}
