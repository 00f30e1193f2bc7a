//! `cairn exec [--run ID] [--node NAME] [--json] -- COMMAND [ARG…]`: any
//! command as a node of a session (DESIGN §5.5), run by [`crate::job`].
//! cairn exits with the command's own status (128+N for a signal), 126/127
//! when it cannot be run, and 125 for its own failures.

use crate::cli::ExecArgs;
use crate::cmd::Context;
use crate::job::{run_job, Job};

/// Runs `cairn exec`; returns the process's exit status, for `main` to exit
/// with once every destructor has run (the session's journal lock, a
/// shared store's writer lease).
pub fn run(ctx: &Context, args: ExecArgs) -> u8 {
    let line: Vec<String> = args
        .command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let command = args.command.clone();
    run_job(
        ctx,
        Job {
            run: args.run.as_deref(),
            node: &args.node,
            json: args.json,
            gateway: args.gateway.then_some(&args.upstream),
            name: None,
            shown: line.join(" "),
            give_terminal: false,
            launch: Box::new(move |_| {
                let mut command = command.into_iter();
                let program = command.next().unwrap_or_default();
                (program, command.collect(), Vec::new())
            }),
        },
        "cairn exec",
    )
}
