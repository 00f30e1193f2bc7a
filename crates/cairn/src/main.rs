//! `cairn`: the command-line tool. Each subcommand lives in `cmd/`; typed errors
//! become exit codes in `exit.rs`; errors print once, with their causes.

mod cli;
mod cmd;
mod exit;
mod job;
mod output;
mod prices;
mod serving;
mod setup;

use std::process::ExitCode;

use clap::Parser;

/// Reading a journal builds hundreds of thousands of small values on every
/// core at once (`cairn_journal`'s read-ahead); the system allocator's
/// arenas make that scale poorly on two cores, mimalloc's per-thread heaps
/// do not.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use crate::cli::{Cli, Command, SessionCommand};
use crate::exit::Code;

fn main() -> ExitCode {
    let args = cli::rewrite_aliases(std::env::args_os().collect());
    // Under --json an error is one JSON value on stderr, whatever failed.
    let json = cli::wants_json(&args);
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
        Err(e) if e.use_stderr() && json => {
            output::error_json(Code::Usage, &e.to_string());
            return ExitCode::from(Code::Usage as u8);
        }
        Err(e) => {
            let code = if e.use_stderr() {
                Code::Usage
            } else {
                Code::Ok
            };
            let _ = e.print();
            return ExitCode::from(code as u8);
        }
    };
    match run(cli) {
        Ok(code) => ExitCode::from(code),
        Err(e) if exit::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            let code = exit::classify(&e);
            if json {
                output::error_json(code, &output::error_text(&e));
            } else {
                output::error("cairn", &e);
            }
            ExitCode::from(code as u8)
        }
    }
}

/// Runs a parsed command line; returns the process's exit status. Every
/// command returns here, `cairn exec` with its command's own status, so
/// that what a command held is let go by its destructors on the way out of
/// `main` (the journal lock's holder unnamed, the journal's preallocated
/// tail cut) and a shared store's writer leases are given up at once
/// rather than left to lapse.
fn run(cli: Cli) -> anyhow::Result<u8> {
    if let Some(dir) = &cli.directory {
        std::env::set_current_dir(dir).map_err(|e| {
            exit::coded(
                Code::Usage,
                format!("cannot change to directory {}: {e}", dir.display()),
            )
        })?;
    }
    // What needs neither the configuration nor a store.
    match &cli.command {
        Some(Command::Completions(a)) => return cmd::config::completions(a).map(|c| c as u8),
        Some(Command::Man(a)) => return cmd::config::man(a).map(|c| c as u8),
        _ => {}
    }
    let config = cmd::config::load()?;
    if let Some(Command::Config(a)) = &cli.command {
        return cmd::config::show(&config, a, cli.store.as_deref()).map(|c| c as u8);
    }
    let Some(command) = cli.command else {
        // `cairn` alone: the terminal UI on a terminal (DESIGN §11), the
        // help and a usage error anywhere else.
        if cmd::tui::on_terminal() {
            let ctx = cmd::Context::new(cli.store, cli.objects, config)?;
            return cmd::tui::new_session(&ctx, cli.tui).map(|c| c as u8);
        }
        use clap::CommandFactory;
        let _ = Cli::command().write_help(&mut std::io::stderr());
        return Ok(Code::Usage as u8);
    };
    let ctx = cmd::Context::new(cli.store, cli.objects, config)?;
    let code = dispatch(&ctx, command);
    if let Some(shared) = &ctx.shared {
        shared.close();
    }
    code
}

/// Runs `command`; returns its exit status.
fn dispatch(ctx: &cmd::Context, command: Command) -> anyhow::Result<u8> {
    let tui = cmd::tui::on_terminal();
    let code = match command {
        Command::Run(a) => cmd::run::run(ctx, a),
        // The aliases open the TUI on a terminal when no TEXT is given;
        // with TEXT, or off a terminal, they are the plain commands.
        Command::Resume(a) if a.tui && tui && a.text.is_empty() && !a.json => {
            cmd::tui::resume(ctx, a)
        }
        Command::Resume(a) => cmd::run::resume(ctx, a),
        Command::Continue(a) if a.tui && tui && a.text.is_empty() && !a.json => {
            cmd::tui::continue_(ctx, a)
        }
        Command::Continue(a) => cmd::run::continue_(ctx, a),
        Command::Fork(a)
            if a.tui
                && tui
                && !a.json
                && !a.at.as_deref().is_some_and(|x| x.starts_with("cp_")) =>
        {
            cmd::tui::fork(ctx, &a)
        }
        // Its command's status; its own failures are reported inside
        // (125), never classified here.
        Command::Exec(a) => return Ok(cmd::exec::run(ctx, a)),
        Command::Wrap(a) => return Ok(cmd::wrap::run(ctx, a)),
        Command::Snapshot(a) => cmd::workspace::snapshot(ctx, &a),
        Command::Rewind(a) => cmd::rewind::run(ctx, &a),
        Command::CheckIgnore(a) => cmd::workspace::check_ignore(ctx, &a),
        Command::Prune(a) => cmd::workspace::prune(ctx, &a),
        Command::Checkpoint(c) => cmd::checkpoint::run(ctx, c),
        Command::Fork(a) => cmd::fork::run(ctx, &a),
        Command::Reindex => cmd::fork::reindex(ctx),
        Command::Sessions(a) => cmd::sessions::list(ctx, &a),
        Command::Session(SessionCommand::Ls(a)) => cmd::sessions::list(ctx, &a),
        Command::Session(SessionCommand::Show(a)) => cmd::sessions::show(ctx, &a),
        Command::Session(SessionCommand::Rm(a)) => cmd::sessions::rm(ctx, &a),
        Command::Verify(a) => cmd::verify::run(ctx, &a),
        Command::Gateway(a) => cmd::gateway::run(ctx, &a),
        Command::Serve(a) => cmd::serve::run(ctx, a),
        Command::Mcp(a) => cmd::mcp::run(ctx, &a),
        Command::Push(a) => cmd::transfer::push(ctx, &a),
        Command::Pull(a) => cmd::transfer::pull(ctx, &a),
        Command::Vm(c) => cmd::vm::run(ctx, c),
        // Answered before a context is made (see `run`).
        Command::Config(_) | Command::Completions(_) | Command::Man(_) => Ok(Code::Ok),
    };
    code.map(|c| c as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `cairn exec` hands its command's status back to `main` rather than
    /// ending the process where it stands (which would end this test
    /// process too, with status 7); by then what it held is let go: the
    /// session opens again at once in this same process, which a journal
    /// lock still held here would refuse.
    #[test]
    fn exec_returns_its_commands_status_to_main() {
        let dir = tempfile::tempdir().unwrap();
        let (store, ws) = (dir.path().join("store"), dir.path().join("ws"));
        std::fs::create_dir_all(&ws).unwrap();
        let line = ["cairn", "--store", store.to_str().unwrap(), "-C"]
            .into_iter()
            .chain([
                ws.to_str().unwrap(),
                "exec",
                "--json",
                "--",
                "sh",
                "-c",
                "exit 7",
            ]);
        let cli = Cli::try_parse_from(line).unwrap();
        assert_eq!(run(cli).unwrap(), 7);
        let store = cairn_store::Store::open(&store).unwrap();
        let runs: Vec<_> = std::fs::read_dir(store.root().join("runs"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(runs.len(), 1, "{runs:?}");
        let id = cairn_store::RunId::parse(&runs[0]).unwrap();
        let session = cairn_sessions::Session::open(&store, &id).unwrap();
        assert_eq!(session.state().totals.tool_calls, 1);
    }
}
