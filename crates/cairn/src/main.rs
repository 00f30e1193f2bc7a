//! `cairn`: the command-line tool. Each subcommand lives in `cmd/`; typed errors
//! become exit codes in `exit.rs`; errors print once, with their causes.

mod cli;
mod cmd;
mod exit;
mod output;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command, SessionCommand};
use crate::exit::Code;

fn main() -> ExitCode {
    let args = cli::rewrite_aliases(std::env::args_os().collect());
    let cli = match Cli::try_parse_from(args) {
        Ok(c) => c,
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
        Ok(code) => ExitCode::from(code as u8),
        Err(e) if exit::is_broken_pipe(&e) => ExitCode::SUCCESS,
        Err(e) => {
            output::error("cairn", &e);
            ExitCode::from(exit::classify(&e) as u8)
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<Code> {
    if let Some(dir) = &cli.directory {
        std::env::set_current_dir(dir).map_err(|e| {
            exit::coded(
                Code::Usage,
                format!("cannot change to directory {}: {e}", dir.display()),
            )
        })?;
    }
    let Some(command) = cli.command else {
        // `cairn` alone: the terminal UI on a terminal (DESIGN §11), the
        // help and a usage error anywhere else.
        if cmd::tui::on_terminal() {
            let ctx = cmd::Context::new(cli.store, cli.objects)?;
            return cmd::tui::new_session(&ctx, cli.tui);
        }
        use clap::CommandFactory;
        let _ = Cli::command().write_help(&mut std::io::stderr());
        return Ok(Code::Usage);
    };
    let ctx = cmd::Context::new(cli.store, cli.objects)?;
    let tui = cmd::tui::on_terminal();
    let code = match command {
        Command::Run(a) => cmd::run::run(&ctx, a),
        // The aliases open the TUI on a terminal when no TEXT is given;
        // with TEXT, or off a terminal, they are the plain commands.
        Command::Resume(a) if a.tui && tui && a.text.is_empty() && !a.json => {
            cmd::tui::resume(&ctx, a)
        }
        Command::Resume(a) => cmd::run::resume(&ctx, a),
        Command::Continue(a) if a.tui && tui && a.text.is_empty() && !a.json => {
            cmd::tui::continue_(&ctx, a)
        }
        Command::Continue(a) => cmd::run::continue_(&ctx, a),
        Command::Fork(a)
            if a.tui
                && tui
                && !a.json
                && !a.at.as_deref().is_some_and(|x| x.starts_with("cp_")) =>
        {
            cmd::tui::fork(&ctx, &a)
        }
        Command::Exec(a) => cmd::exec::run(&ctx, a),
        Command::Snapshot(a) => cmd::workspace::snapshot(&ctx, &a),
        Command::Rewind(a) => cmd::rewind::run(&ctx, &a),
        Command::CheckIgnore(a) => cmd::workspace::check_ignore(&ctx, &a),
        Command::Prune(a) => cmd::workspace::prune(&ctx, &a),
        Command::Checkpoint(c) => cmd::checkpoint::run(&ctx, c),
        Command::Fork(a) => cmd::fork::run(&ctx, &a),
        Command::Reindex => cmd::fork::reindex(&ctx),
        Command::Sessions(a) => cmd::sessions::list(&ctx, &a),
        Command::Session(SessionCommand::Ls(a)) => cmd::sessions::list(&ctx, &a),
        Command::Session(SessionCommand::Show(a)) => cmd::sessions::show(&ctx, &a),
        Command::Session(SessionCommand::Rm(a)) => cmd::sessions::rm(&ctx, &a),
        Command::Verify(a) => cmd::verify::run(&ctx, &a),
        Command::Gateway(a) => cmd::gateway::run(&ctx, &a),
        Command::Serve(a) => cmd::serve::run(&ctx, a),
        Command::Push(a) => cmd::transfer::push(&ctx, &a),
        Command::Pull(a) => cmd::transfer::pull(&ctx, &a),
        Command::Vm(c) => cmd::vm::run(&ctx, c),
    };
    if let Some(shared) = &ctx.shared {
        shared.close();
    }
    code
}
