//! `cairn wrap AGENT [-- ARGS]` (DESIGN §16): Claude Code, Codex or aider
//! run as `cairn exec --gateway` would run them, with the agent's own way of
//! naming a base URL set for it ([`cairn_gateway::Agent::launch`]). The
//! session is named `AGENT@REPO` and its nodes `AGENT`, so `cairn rewind ID
//! --to claude:1` undoes the first run.
//!
//! The exit status is the agent's, as `cairn exec`'s is its command's; an
//! agent that is not installed is 127 before any session is made. On a
//! terminal the agent gets the terminal itself (no output tail is kept),
//! since each is interactive there.

use crate::cli::WrapArgs;
use crate::cmd::Context;
use crate::job::{run_job, Job};
use crate::output;

/// The status of a command that was not found (as a shell and `cairn exec`
/// say it).
const NOT_FOUND: u8 = 127;

/// Runs `cairn wrap`; returns the process's exit status (see `cairn exec`).
pub fn run(ctx: &Context, args: WrapArgs) -> u8 {
    let agent = args.agent;
    let program = match &args.bin {
        // Made absolute: the agent runs in the session's workspace.
        Some(bin) if bin.is_file() => std::fs::canonicalize(bin)
            .unwrap_or_else(|_| bin.clone())
            .into_os_string(),
        Some(bin) => {
            output::note(format!(
                "cairn wrap: --bin {} is not a file: give the path of the {} program",
                bin.display(),
                agent.title()
            ));
            return NOT_FOUND;
        }
        None => match agent.find_in(&std::env::var_os("PATH").unwrap_or_default()) {
            Some(p) => p.into_os_string(),
            None => {
                output::note(format!(
                    "cairn wrap: {} ({}) is not on PATH: install it ({}) or give its path with --bin",
                    agent.program(),
                    agent.title(),
                    agent.install_hint()
                ));
                return NOT_FOUND;
            }
        },
    };
    let shown = std::iter::once(agent.name().to_owned())
        .chain(args.args.iter().map(|a| a.to_string_lossy().into_owned()))
        .collect::<Vec<_>>()
        .join(" ");
    let user_args = args.args.clone();
    let launch = move |gateway: Option<std::net::SocketAddr>| {
        let (args, env) = match gateway {
            Some(addr) => {
                let l = agent.launch(addr, &user_args);
                let env = l.env.into_iter().map(|(k, v)| (k.to_owned(), v)).collect();
                (l.args, env)
            }
            // A job of `wrap` always has a gateway; without one the agent
            // runs as given.
            None => (user_args, Vec::new()),
        };
        (program, args, env)
    };
    run_job(
        ctx,
        Job {
            run: args.run.as_deref(),
            node: agent.name(),
            json: args.json,
            gateway: Some(&args.upstream),
            name: Some(agent.session_name(&ctx.cwd)),
            shown,
            // The agents are interactive on a terminal (Claude Code behind a
            // pipe turns into its print mode).
            give_terminal: true,
            launch: Box::new(launch),
        },
        "cairn wrap",
    )
}
