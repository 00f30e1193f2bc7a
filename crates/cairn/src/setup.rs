//! What the commands share to open sessions and name what they work on —
//! not a command: the launcher with this machine's settings, the capture
//! settings and a session's tracker, the session a workspace command
//! records into, a checkpoint id, a fork at a record, the sessions this
//! repository sees, the JSON summary of a run. Every command module uses
//! these, and no command module calls another.

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cairn_agent::{Faults, Launch, Launcher, NewSession, Request};
use cairn_checkpoint::CheckpointId;
use cairn_model::{ProviderConfig, ProviderKind};
use cairn_sessions::{repository_root, ListFilter, Session, Summary};
use cairn_store::{RunId, Store};
use cairn_tools::ShellEnv;
use cairn_workspace::{CaptureConfig, Workspace};
use serde::Serialize;

use crate::cli::{ForkArgs, ModelArgs};
use crate::cmd::Context;
use crate::exit::{coded, Code};
use crate::output;

/// What `run`, `resume` and `continue` print with `--json`.
#[derive(Serialize)]
pub struct RunSummary {
    pub id: String,
    pub status: String,
    pub records: u64,
    pub tail: String,
}

/// What `--model`, `--base-url`, the budgets and `--thinking` ask for.
pub fn request(m: &ModelArgs) -> Request {
    Request {
        model: m.model.clone(),
        base_url: m.base_url.clone(),
        max_turns: m.max_turns,
        max_tokens: m.max_tokens,
        max_cost: m.max_cost,
        thinking: m.thinking.clone(),
        mcp: None,
    }
}

fn provider_config() -> ProviderConfig {
    let mut c = ProviderConfig::default();
    if let Some(ms) = std::env::var("CAIRN_RETRY_BASE_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        c.retry.base_delay = Duration::from_millis(ms);
    }
    c
}

/// The launcher of this store (`cairn_agent::Launcher`) with this
/// machine's settings: the price table, the capture limits, the names the
/// shell passes through (`CAIRN_SHELL_PASS_ENV`), the base URLs of the
/// environment and the configuration file, test faults. Every front end
/// of the binary (run, resume, the TUI, serve) opens sessions with it.
pub fn launcher(ctx: &Context) -> anyhow::Result<Launcher> {
    Ok(Launcher::new(
        ctx.store.clone(),
        Launch {
            pricing: Arc::new(crate::prices::load()?),
            provider: provider_config(),
            capture: capture_config()?,
            shell_pass_env: std::env::var(ShellEnv::PASS_THROUGH_VAR).unwrap_or_default(),
            openai_base_url: ctx.base_url(ProviderKind::OpenAi),
            anthropic_base_url: ctx.base_url(ProviderKind::Anthropic),
            default_model: ctx.model(None).map(|m| m.value),
            faults: Faults::from_env(),
        },
    ))
}

/// A new session in the current directory from `run`'s flags.
pub fn new_session(
    ctx: &Context,
    model: &ModelArgs,
    system: Option<&Path>,
    name: Option<String>,
) -> NewSession {
    NewSession {
        request: request(model),
        system: system.map(Path::to_path_buf),
        name,
        workspace: ctx.cwd.clone(),
    }
}

/// The session `cairn continue` picks: the newest valid session of this
/// repository that has a model to continue with (sessions made by
/// `cairn exec` or `cairn snapshot` have none).
pub fn continue_target(ctx: &Context) -> anyhow::Result<RunId> {
    let list = visible(ctx, false)?;
    let has_model = |id: &str| {
        RunId::parse(id)
            .ok()
            .and_then(|id| cairn_journal::read_head_record(&ctx.store.journal_path(&id)).ok())
            .is_some_and(
                |r| matches!(r.body, cairn_journal::RecordBody::Meta(m) if m.fingerprint.is_some()),
            )
    };
    let Some(pick) = list.iter().find(|s| s.valid && has_model(&s.id)) else {
        return Err(coded(
            Code::Usage,
            format!(
                "no session to continue for {}: start one with `cairn run`, or see `cairn sessions --all`",
                cairn_sessions::repository_root(&ctx.cwd).display()
            ),
        ));
    };
    Ok(RunId::parse(&pick.id)?)
}

/// Capture settings from the environment (`CAIRN_WORKSPACE_MAX_FILE_MB`,
/// `CAIRN_WORKSPACE_MAX_FILES`).
pub fn capture_config() -> anyhow::Result<CaptureConfig> {
    let mut c = CaptureConfig::default();
    if let Some(mb) = env_number("CAIRN_WORKSPACE_MAX_FILE_MB", "a whole number of MiB")? {
        c = c.max_file_mb(mb);
    }
    if let Some(n) = env_number("CAIRN_WORKSPACE_MAX_FILES", "a whole number of files")? {
        c = c.max_files(usize::try_from(n).unwrap_or(usize::MAX));
    }
    Ok(c)
}

/// A whole number from the environment variable `name`, if set.
fn env_number(name: &str, what: &str) -> anyhow::Result<Option<u64>> {
    match std::env::var(name) {
        Ok(v) => v
            .trim()
            .parse()
            .map(Some)
            .map_err(|_| coded(Code::Usage, format!("{name}={v:?} is not {what}"))),
        Err(_) => Ok(None),
    }
}

/// The workspace tracker of session `id` rooted at `root`.
pub fn tracker(store: &Store, id: &RunId, root: &Path) -> anyhow::Result<Workspace> {
    Ok(Workspace::open(store, id, root, capture_config()?)?)
}

/// Opens `--run ID`, or the newest session of this repository that is not
/// running, or creates a session (no model) for the current directory.
pub fn session_for(
    ctx: &Context,
    store: &Store,
    run: Option<&str>,
    name: &str,
) -> anyhow::Result<Session> {
    let id = match run {
        Some(id) => Some(ctx.existing_run(id)?),
        None => cairn_sessions::newest_idle(store, &cairn_sessions::repository_root(&ctx.cwd))?,
    };
    match id {
        Some(id) => Ok(Session::open(store, &id)?),
        None => session_without_model(ctx, store, name),
    }
}

/// A new session without a model, for the current directory.
pub fn session_without_model(ctx: &Context, store: &Store, name: &str) -> anyhow::Result<Session> {
    Ok(Session::create_without_model(
        store,
        &ctx.cwd,
        &crate::output::one_line(name, 80),
    )?)
}

/// The checkpoint a reference names: its id or a unique prefix of it.
pub fn checkpoint_id(ctx: &Context, s: &str) -> anyhow::Result<CheckpointId> {
    Ok(cairn_sessions::resolve_checkpoint(&ctx.store, s)?)
}

/// `cairn fork ID [--at SEQ] [--workspace DIR]` without a checkpoint: the
/// fork made (and what `report` prints of it). The TUI's `--fork ID` opens
/// on a fork made here.
pub fn fork_at_record(
    ctx: &Context,
    args: &ForkArgs,
    parent: &cairn_store::RunId,
) -> anyhow::Result<(
    cairn_store::RunId,
    cairn_journal::JournalWriter,
    cairn_journal::RunState,
)> {
    let at = match &args.at {
        None => None,
        Some(s) => Some(s.parse::<u64>().map_err(|_| {
            coded(Code::Usage, format!("--at {s}: give the seq of the last record to share (see `cairn session show {parent} --transcript`) or a checkpoint id (see `cairn checkpoint ls {parent}`)"))
        })?),
    };
    let workspace = match &args.workspace {
        Some(d) => {
            let dir = std::fs::canonicalize(d)
                .map_err(|e| coded(Code::Usage, format!("--workspace {}: {e}", d.display())))?;
            if !dir.is_dir() {
                return Err(coded(
                    Code::Usage,
                    format!(
                        "--workspace {}: it is not a directory; give the directory the fork works in",
                        d.display()
                    ),
                ));
            }
            ctx.refuse_store_inside(&dir)?;
            Some(dir.to_string_lossy().into_owned())
        }
        None => None,
    };
    let store = cairn_store::Store::open(ctx.store.root())?;
    let (id, writer, state) = cairn_sessions::fork(&store, parent, at, workspace)?;
    Ok((id, writer, state))
}

/// Every session of the store, newest first; on a shared store, with the
/// cache brought to the shared store's sessions first.
pub fn everything(ctx: &Context) -> anyhow::Result<Vec<Summary>> {
    let mut list = cairn_sessions::list(&ctx.store)?;
    if let Some(shared) = &ctx.shared {
        // The listing's record counts (each checked against its journal's
        // tail) say which differ; listed again only if one was brought in.
        if shared.sync_listed(&list)? > 0 {
            list = cairn_sessions::list(&ctx.store)?;
        }
    }
    Ok(list)
}

/// The sessions of this repository (or all), newest first.
pub fn visible(ctx: &Context, all: bool) -> anyhow::Result<Vec<Summary>> {
    let filter = ListFilter {
        repository: (!all).then(|| repository_root(&ctx.cwd)),
        ..ListFilter::default()
    };
    Ok(filter.apply(everything(ctx)?))
}

/// Refuses what would stop a new session before anything is created (the
/// store included): a bad approval policy, what [`Launcher::check_new`]
/// refuses. A model chosen because a key is set is said, once.
pub fn check_new(
    ctx: &Context,
    launcher: &Launcher,
    spec: &NewSession,
    approve: Option<cairn_agent::ApprovePolicy>,
) -> anyhow::Result<()> {
    ctx.approve(approve)?;
    launcher.check_new(spec)?;
    let model = ctx.model(spec.request.model.as_deref());
    if let Some(m) = model.filter(|m| matches!(m.origin, cairn_config::Origin::Key { .. })) {
        output::note(format!(
            "cairn: no model named, so using {} ({}); choose one with --model, CAIRN_MODEL or `model` in {}",
            m.value,
            m.origin,
            ctx.config
                .path
                .as_ref()
                .map_or_else(|| "config.toml".to_owned(), |p| p.display().to_string())
        ));
    }
    Ok(())
}
