//! `cairn` on a terminal (DESIGN §11): the terminal UI, opened on a new
//! session, on `--resume ID`, `--continue` or `--fork ID`.
//!
//! The TUI opens sessions through [`CliOpener`], which makes and opens
//! them with exactly the code `cairn run` and `cairn resume` use
//! ([`run::new_agent`], [`run::open_agent`]): the same plan, routing,
//! tools, resume guard and workspace versioning.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use cairn_agent::{stop_pair, Agent, ApprovePolicy, Events};
use cairn_store::{RunId, Store};
use cairn_tui::{BoxError, Opener, Options, Start};

use crate::cli::{ContinueArgs, ForkArgs, ModelArgs, ResumeArgs, TuiArgs};
use crate::cmd::run::{self, NewSession};
use crate::cmd::Context;
use crate::exit::Code;
use crate::output;

/// True when stdin and stdout are a terminal: the TUI can run.
pub fn on_terminal() -> bool {
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

/// Opens sessions for the TUI as the CLI commands do.
struct CliOpener {
    ctx: Context,
    store: Store,
    model: ModelArgs,
    name: Option<String>,
    system: Option<PathBuf>,
    force: bool,
    /// The last error opening a session, typed, so a TUI that could not
    /// open the session it was started on exits as `cairn resume` would.
    last_error: std::sync::Arc<std::sync::Mutex<Option<anyhow::Error>>>,
}

/// Collects the notices of opening a session, to show on the screen.
struct Notices<'a>(&'a mut Vec<String>);

impl Events for Notices<'_> {
    fn text(&mut self, _delta: &str) {}
    fn notice(&mut self, message: &str) {
        self.0.push(message.to_owned());
    }
}

impl Opener for CliOpener {
    fn store(&self) -> &Store {
        &self.store
    }

    fn create(&mut self, first: &str) -> Result<Agent, BoxError> {
        let spec = NewSession {
            model: &self.model,
            system: self.system.as_deref(),
            name: self.name.clone(),
        };
        // The stop is replaced before every stretch of work.
        let (_, stop) = stop_pair();
        Ok(run::new_agent(&self.ctx, &self.store, &spec, first, stop)?)
    }

    fn open(&mut self, id: &RunId, notices: &mut Vec<String>) -> Result<Agent, BoxError> {
        let (_, stop) = stop_pair();
        let opened = run::open_agent(
            &self.ctx,
            &self.store,
            id,
            &self.model,
            self.force,
            stop,
            &mut Notices(notices),
        );
        let agent = match opened {
            Ok(a) => a,
            Err(e) => {
                let shown: BoxError = format!("{e:#}").into();
                if let Ok(mut slot) = self.last_error.lock() {
                    *slot = Some(e);
                }
                return Err(shown);
            }
        };
        // A forced resume is recorded once; switching back later needs no force.
        self.force = false;
        Ok(agent)
    }

    fn tracker(&self, id: &RunId, root: &Path) -> Result<cairn_workspace::Workspace, BoxError> {
        Ok(crate::cmd::workspace::tracker(&self.store, id, root)?)
    }
}

fn color() -> bool {
    std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

fn launch(
    ctx: &Context,
    start: Start,
    model: ModelArgs,
    name: Option<String>,
    system: Option<PathBuf>,
    force: bool,
) -> anyhow::Result<Code> {
    let store = Store::open(ctx.store.root())?;
    let approve: ApprovePolicy = ctx.approve(model.approve)?;
    let shown = ctx
        .model(model.model.as_deref())
        .map(|m| m.value)
        .unwrap_or_default();
    let last_error = std::sync::Arc::new(std::sync::Mutex::new(None));
    let opener = CliOpener {
        ctx: ctx.clone(),
        store,
        model,
        name,
        system,
        force,
        last_error: last_error.clone(),
    };
    let options = Options {
        start,
        approve,
        model: shown,
        workspace: ctx.cwd.display().to_string(),
        color: color(),
    };
    let last = match cairn_tui::run(Box::new(opener), options) {
        Ok(last) => last,
        // The session it was started on did not open: that error, with
        // its exit code, as `cairn resume` reports it.
        Err(cairn_tui::TuiError::Open(why)) => {
            let typed = last_error.lock().ok().and_then(|mut e| e.take());
            return Err(typed.unwrap_or_else(|| crate::exit::coded(Code::Failure, why)));
        }
        Err(e) => return Err(e.into()),
    };
    if let Some(id) = last {
        output::note(format!(
            "cairn: session {id}; continue it with: cairn --resume {id}"
        ));
    }
    Ok(Code::Ok)
}

/// `cairn` with no command, on a terminal: a new session in this directory.
pub fn new_session(ctx: &Context, args: TuiArgs) -> anyhow::Result<Code> {
    run::check_new(
        ctx,
        &NewSession {
            model: &args.model,
            system: args.system.as_deref(),
            name: None,
        },
    )?;
    launch(ctx, Start::New, args.model, args.name, args.system, false)
}

/// `cairn --resume ID` on a terminal.
pub fn resume(ctx: &Context, args: ResumeArgs) -> anyhow::Result<Code> {
    let id = ctx.existing_run(&args.id)?;
    launch(ctx, Start::Open(id), args.model, None, None, args.force)
}

/// `cairn --continue` on a terminal: the session `cairn continue` picks.
pub fn continue_(ctx: &Context, args: ContinueArgs) -> anyhow::Result<Code> {
    let id = run::continue_target(ctx)?;
    launch(ctx, Start::Open(id), args.model, None, None, args.force)
}

/// `cairn --fork ID` on a terminal: the fork `cairn fork` makes, opened.
pub fn fork(ctx: &Context, args: &ForkArgs) -> anyhow::Result<Code> {
    let parent = ctx.existing_run(&args.id)?;
    let (id, _, _) = crate::cmd::fork::fork_at_record(ctx, args, &parent)?;
    let model = ModelArgs {
        approve: args.approve,
        ..ModelArgs::default()
    };
    launch(ctx, Start::Open(id), model, None, None, false)
}
