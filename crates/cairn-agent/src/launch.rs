//! Opening and starting sessions (DESIGN §15's session service): the one
//! way an agent is built, for every front end — `cairn run` and `resume`,
//! the terminal UI, `cairn serve`, and whatever comes next.
//!
//! A front end turns what it was given (flags, a form, a request body) into
//! a [`NewSession`] or a [`Request`], and the [`Launcher`] does the rest,
//! the same way for all of them:
//! 1. the plan: the model spec, base URL, budgets, thinking and system
//!    prompt, checked before anything is created ([`Launcher::check_new`]);
//! 2. the store is never inside the workspace: the session's tools could
//!    rewrite the journal that records them, and a rewind could not undo it
//!    ([`AgentError::StoreInsideWorkspace`]);
//! 3. the tools' workspace, with the store protected whatever path leads to
//!    it, and the shell's environment scrubbed but for the names the
//!    launcher was given; beside the built-in tools, the tools of the MCP
//!    servers the request carries ([`Launcher::start_mcp`], DESIGN §17),
//!    which the resume guard fingerprints server by server;
//! 4. the provider, with the launcher's retry settings; the response store
//!    and the price table; the workspace versioning of the session;
//! 5. for a resume: the journal locked first, state and routing rebuilt
//!    from the record, then the resume guard ([`Agent::guard`]).
//!
//! What differs between deployments — prices, retry timing, capture
//! limits, which environment names the shell sees, a new session's default
//! base URLs, test faults — is a [`Launch`] value the binary fills in once
//! from its configuration; the launcher never reads the environment for
//! them.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn_calls::{Pricing, ResponseStore};
use cairn_model::{provider_from_spec, ProviderConfig, ProviderKind};
use cairn_sessions::Session;
use cairn_store::{RunId, Store};
use cairn_tools::{ShellEnv, ToolConfig, Toolbox};
use cairn_workspace::CaptureConfig;

use crate::{Agent, AgentError, Events, Faults, Plan, Request, Stop};

/// What every session a launcher makes shares (module doc).
#[derive(Clone)]
pub struct Launch {
    /// The price table.
    pub pricing: Arc<dyn Pricing>,
    /// The model client's settings (retries and their timing).
    pub provider: ProviderConfig,
    /// What a workspace capture takes.
    pub capture: CaptureConfig,
    /// The environment names the shell tool passes through, comma-separated
    /// (`CAIRN_SHELL_PASS_ENV`); every other name is scrubbed.
    pub shell_pass_env: String,
    /// A new OpenAI-compatible session's base URL when its request names
    /// none.
    pub openai_base_url: Option<String>,
    /// A new Anthropic session's base URL when its request names none.
    pub anthropic_base_url: Option<String>,
    /// The model of a new session whose request names none: the
    /// configuration's, or the default of the provider whose key is set.
    pub default_model: Option<String>,
    /// Crash points for tests; none in a release build.
    pub faults: Faults,
}

/// A new session: what to run, where, and under what name.
#[derive(Clone, Debug, Default)]
pub struct NewSession {
    /// The model, base URL, budgets and thinking asked for; the model
    /// defaults to the launcher's ([`Launch::default_model`]).
    pub request: Request,
    /// The system prompt file.
    pub system: Option<PathBuf>,
    /// The session's name; `None` names it after its task.
    pub name: Option<String>,
    /// The directory it works in.
    pub workspace: PathBuf,
}

/// Opens and starts sessions of one store (module doc).
#[derive(Clone)]
pub struct Launcher {
    store: Store,
    launch: Launch,
}

impl Launcher {
    /// A launcher for `store`, which need not exist yet: it is made with
    /// the first session ([`Launcher::create`]).
    pub fn new(store: Store, launch: Launch) -> Launcher {
        Launcher { store, launch }
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// Refuses what would stop `spec` from starting, before anything is
    /// created: a bad model spec or budget, no model at all, an unreadable
    /// system prompt, a workspace that is not a directory or holds the
    /// store.
    ///
    /// # Errors
    /// As [`Plan::for_run`]; [`AgentError::BadWorkspace`],
    /// [`AgentError::StoreInsideWorkspace`].
    pub fn check_new(&self, spec: &NewSession) -> Result<(), AgentError> {
        self.plan(spec)?;
        self.tools_workspace(&spec.workspace).map(drop)
    }

    /// Creates session `spec` and its agent; `task` names it unless the
    /// spec gives a name (its first line, cut to 60 characters). No
    /// approver is set.
    ///
    /// # Errors
    /// As [`Launcher::check_new`]; a provider that cannot be made (a
    /// missing key); the session cannot be created.
    pub fn create(&self, spec: &NewSession, task: &str, stop: Stop) -> Result<Agent, AgentError> {
        let plan = self.plan(spec)?;
        let ws = self.tools_workspace(&spec.workspace)?;
        let provider =
            provider_from_spec(&plan.spec, plan.base_url.as_deref(), &self.launch.provider)?;
        let tools = self.toolbox(&spec.request);
        let name = spec
            .name
            .clone()
            .or_else(|| Some(cairn_store::text::one_line(task, 60)));
        let meta = plan.meta(ws.root(), name, &tools.infos(), provider.base_url());
        let id = RunId::new();
        // The store is made with its first session, not before.
        let store = Store::open(self.store.root())?;
        let session = Session::create(&store, &id, meta)?;
        let versions = self.tracker(&id, ws.root())?;
        Ok(self
            .assemble(session, provider, tools, ws, &plan, stop)
            .with_tracker(versions))
    }

    /// Opens session `id` to continue it (module doc, step 5), `request`
    /// overriding what it recorded; `force` overrides the resume guard
    /// (journaled). Notices — routing overrides, forced fields — go to
    /// `ev`. No approver is set.
    ///
    /// # Errors
    /// The session is locked by another writer or does not verify; its
    /// workspace is not usable; the guard refuses.
    pub fn open(
        &self,
        id: &RunId,
        request: &Request,
        force: bool,
        stop: Stop,
        ev: &mut dyn Events,
    ) -> Result<Agent, AgentError> {
        let session = Session::open(&self.store, id)?;
        let plan = Plan::for_resume(session.state(), request, &|kind: ProviderKind| {
            kind.base_url_from_env()
        })?;
        for notice in &plan.notices {
            ev.notice(notice);
        }
        let ws = self.tools_workspace(Path::new(&session.state().workspace))?;
        let provider =
            provider_from_spec(&plan.spec, plan.base_url.as_deref(), &self.launch.provider)?;
        let tools = self.toolbox(request);
        let versions = self.tracker(id, ws.root())?;
        let mut agent = self
            .assemble(session, provider, tools, ws, &plan, stop)
            .with_tracker(versions);
        agent.guard(force, ev)?;
        Ok(agent)
    }

    /// The workspace versioning of session `id`, whose files are in `root`.
    ///
    /// # Errors
    /// The workspace index cannot be opened.
    pub fn tracker(
        &self,
        id: &RunId,
        root: &Path,
    ) -> Result<cairn_workspace::Workspace, AgentError> {
        Ok(cairn_workspace::Workspace::open(
            &self.store,
            id,
            root,
            self.launch.capture.clone(),
        )?)
    }

    fn plan(&self, spec: &NewSession) -> Result<Plan, AgentError> {
        let mut plan = Plan::for_run(
            &spec.request,
            self.launch.default_model.as_deref(),
            spec.system.as_deref(),
        )?;
        if plan.base_url.is_none() {
            plan.base_url = match plan.spec.kind {
                ProviderKind::OpenAi => self.launch.openai_base_url.clone(),
                ProviderKind::Anthropic => self.launch.anthropic_base_url.clone(),
                _ => None,
            };
        }
        Ok(plan)
    }

    /// The tools' view of `dir` (step 3), refused when it holds the store.
    fn tools_workspace(&self, dir: &Path) -> Result<cairn_tools::Workspace, AgentError> {
        refuse_store_inside(&self.store, dir)?;
        cairn_tools::Workspace::new(dir)
            .and_then(|ws| ws.protect(self.store.root()))
            .map_err(|e| AgentError::BadWorkspace {
                dir: dir.to_path_buf(),
                reason: e.to_string(),
            })
    }

    fn tool_config(&self) -> ToolConfig {
        ToolConfig {
            shell_env: ShellEnv::default().pass_through_list(&self.launch.shell_pass_env),
            ..ToolConfig::default()
        }
    }

    /// The built-in tools, then the MCP servers' of `request`.
    fn toolbox(&self, request: &Request) -> Toolbox {
        let mut tools = Toolbox::builtin(self.tool_config());
        for t in request.mcp.iter().flat_map(|m| m.tools()) {
            tools = tools.with_boxed(t);
        }
        tools
    }

    /// Starts the MCP servers configured in `config` for a session working
    /// in `workspace` (DESIGN §17), with the shell's scrubbed environment;
    /// their standard error goes to `stderr`, or nowhere. Put the result in
    /// the [`Request`] the session is created or opened with, and stop it
    /// when the run ends ([`cairn_tools::mcp::McpServers::stop`]).
    ///
    /// # Errors
    /// The configuration does not read, or a server does not start.
    pub async fn start_mcp(
        &self,
        config: &Path,
        workspace: &Path,
        stderr: Option<cairn_tools::mcp::StderrSink>,
    ) -> Result<cairn_tools::mcp::McpServers, AgentError> {
        let config = cairn_tools::mcp::McpConfig::load(config)?;
        let tc = self.tool_config();
        let options = cairn_tools::mcp::McpOptions {
            workspace: workspace.to_path_buf(),
            env: tc.shell_env,
            stderr,
            max_output_bytes: tc.max_output_bytes,
        };
        Ok(cairn_tools::mcp::McpServers::start(&config, options).await?)
    }

    fn assemble(
        &self,
        session: Session,
        provider: Box<dyn cairn_model::Provider>,
        tools: Toolbox,
        ws: cairn_tools::Workspace,
        plan: &Plan,
        stop: Stop,
    ) -> Agent {
        Agent::new(
            session,
            provider,
            tools,
            ws,
            plan.config(),
            ResponseStore::new(&self.store),
            Arc::clone(&self.launch.pricing),
            stop,
        )
        .with_faults(self.launch.faults)
    }
}

/// Rule 2 of the module doc: [`AgentError::StoreInsideWorkspace`] when the
/// store `store` is `workspace` or beneath it (both resolved as far as they
/// exist, so a link or `..` cannot hide it).
///
/// # Errors
/// That refusal.
pub fn refuse_store_inside(store: &Store, workspace: &Path) -> Result<(), AgentError> {
    let ws = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
    let inside = cairn_store::canonical_prefix(store.root());
    if inside.starts_with(&ws) {
        return Err(AgentError::StoreInsideWorkspace {
            store: inside,
            workspace: ws,
        });
    }
    Ok(())
}
