//! `cairn` on a terminal (DESIGN §11): the terminal UI, opened on a new
//! session, on `--resume ID`, `--continue` or `--fork ID`.
//!
//! The TUI opens sessions with the launcher `cairn run` and `cairn resume`
//! use ([`run::launcher`]): the same plan, routing, tools, resume guard and
//! workspace versioning.

use std::io::IsTerminal;
use std::path::PathBuf;

use cairn_agent::ApprovePolicy;
use cairn_tui::{Options, Sessions, Start};

use crate::cli::{ContinueArgs, ForkArgs, McpClientArgs, ModelArgs, ResumeArgs, TuiArgs};
use crate::cmd::Context;
use crate::exit::Code;
use crate::output;

/// True when stdin and stdout are a terminal: the TUI can run.
pub fn on_terminal() -> bool {
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
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
    let approve: ApprovePolicy = ctx.approve(model.approve)?;
    let shown = ctx
        .model(model.model.as_deref())
        .map(|m| m.value)
        .unwrap_or_default();
    let options = Options {
        start,
        sessions: Sessions {
            launcher: crate::setup::launcher(ctx)?,
            new: crate::setup::new_session(ctx, &model, system.as_deref(), name),
            request: crate::setup::request(&model),
            force,
        },
        approve,
        model: shown,
        workspace: ctx.cwd.display().to_string(),
        color: color(),
    };
    let last = match cairn_tui::run(options) {
        Ok(last) => last,
        // The session it was started on did not open: that error, with
        // its exit code, as `cairn resume` reports it.
        Err(cairn_tui::TuiError::Open(e)) => return Err(e.into()),
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
    crate::setup::check_new(
        ctx,
        &crate::setup::launcher(ctx)?,
        &crate::setup::new_session(ctx, &args.model, args.system.as_deref(), None),
        args.model.approve,
    )?;
    launch(ctx, Start::New, args.model, args.name, args.system, false)
}

/// `--mcp` asks for MCP servers, which only `cairn run`, `resume` and
/// `continue` start (DESIGN §17): refused here rather than ignored.
fn refuse_mcp(mcp: &McpClientArgs, command: &str) -> anyhow::Result<()> {
    match &mcp.mcp {
        None => Ok(()),
        Some(_) => Err(crate::exit::coded(
            Code::Usage,
            format!(
                "--mcp is not available in the terminal UI: run `cairn {command} … --mcp CONFIG` without the UI (give a TEXT, or call the subcommand directly)"
            ),
        )),
    }
}

/// `cairn --resume ID` on a terminal.
pub fn resume(ctx: &Context, args: ResumeArgs) -> anyhow::Result<Code> {
    refuse_mcp(&args.mcp, "resume ID")?;
    let id = ctx.existing_run(&args.id)?;
    launch(ctx, Start::Open(id), args.model, None, None, args.force)
}

/// `cairn --continue` on a terminal: the session `cairn continue` picks.
pub fn continue_(ctx: &Context, args: ContinueArgs) -> anyhow::Result<Code> {
    refuse_mcp(&args.mcp, "continue")?;
    let id = crate::setup::continue_target(ctx)?;
    launch(ctx, Start::Open(id), args.model, None, None, args.force)
}

/// `cairn --fork ID` on a terminal: the fork `cairn fork` makes, opened.
pub fn fork(ctx: &Context, args: &ForkArgs) -> anyhow::Result<Code> {
    let parent = ctx.existing_run(&args.id)?;
    let (id, _, _) = crate::setup::fork_at_record(ctx, args, &parent)?;
    let model = ModelArgs {
        approve: args.approve,
        ..ModelArgs::default()
    };
    launch(ctx, Start::Open(id), model, None, None, false)
}
