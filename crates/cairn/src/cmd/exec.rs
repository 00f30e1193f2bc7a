//! `cairn exec [--run ID] [--node NAME] [--json] -- COMMAND [ARG…]`: any
//! command as a node of a session (DESIGN §5.5).
//!
//! The records and their order are the node protocol of
//! [`cairn_sessions::Node`]; this file runs the command, passes its output
//! through and keeps its tail. cairn exits with the command's own status
//! (128+N for a signal), 126/127 when it cannot be run, and 125 for its own
//! failures.

use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cairn_sessions::{Node, NodeExit, NodeOutcome, Session};
use cairn_store::Store;
use cairn_workspace::NodeName;

use crate::cli::ExecArgs;
use crate::cmd::progress::Bars;
use crate::cmd::run::RunSummary;
use crate::cmd::workspace::{new_session, tracker};
use crate::cmd::Context;
use crate::exit::{coded, Code};
use crate::output;

/// The output tail kept in the journal.
const TAIL_BYTES: usize = 8 * 1024;

/// Runs `cairn exec`; returns the process exit code.
pub fn run(ctx: &Context, args: ExecArgs) -> anyhow::Result<Code> {
    match exec(ctx, &args) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            output::error("cairn exec", &e);
            std::process::exit(125)
        }
    }
}

fn exec(ctx: &Context, args: &ExecArgs) -> anyhow::Result<i32> {
    let name = NodeName::parse(&args.node).map_err(|e| coded(Code::Usage, e.to_string()))?;
    if args.run.is_none() {
        ctx.refuse_store_inside(&ctx.cwd)?;
    }
    let store = Store::open(ctx.store.root())?;
    let line: Vec<String> = args
        .command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let command = line.join(" ");
    let mut session = match &args.run {
        Some(id) => Session::open(&store, &ctx.existing_run(id)?)?,
        None => new_session(ctx, &store, &command)?,
    };
    let root = session.state().workspace.clone();
    ctx.refuse_store_inside(Path::new(&root))?;
    let ws = tracker(&store, session.id(), Path::new(&root))?;
    let bars = Bars::new(args.json);
    let node = Node::start(&mut session, &ws, &name, &bars)?;
    let at = node.at().clone();
    if !args.json {
        output::note(format!(
            "cairn: {command} in session {} ({at})",
            session.id()
        ));
    }

    let started = Instant::now();
    let ran = spawn_and_wait(args, &root);
    let seconds = started.elapsed().as_secs_f64();
    let (code, exit, output_tail) = match ran {
        Ok((status, tail)) => match (status.code(), status.signal()) {
            (Some(c), _) => (c, NodeExit::Code(c), tail),
            (None, Some(s)) => (128 + s, NodeExit::Signal(s), tail),
            (None, None) => (125, NodeExit::NotRun(format!("{status}")), tail),
        },
        Err(e) => {
            let code = match e.kind() {
                std::io::ErrorKind::NotFound => 127,
                std::io::ErrorKind::PermissionDenied => 126,
                _ => 125,
            };
            output::note(format!("cairn exec: cannot run {}: {e}", line[0]));
            (code, NodeExit::NotRun(e.to_string()), String::new())
        }
    };
    let outcome = NodeOutcome {
        command,
        exit,
        seconds,
        output_tail,
    };
    let report = node.finish(&mut session, &ws, &outcome, &bars)?;
    if args.json {
        output::json(&RunSummary {
            id: session.id().to_string(),
            status: report.reason.as_str().into(),
            records: session.writer().seq(),
            tail: session.writer().tail().to_hex(),
        })?;
    } else {
        let changed = match &report.changed {
            Ok(paths) => format!("{} file(s) changed by this node", paths.len()),
            Err(why) => format!("what this node changed is unknown ({why})"),
        };
        output::note(format!(
            "cairn: {} after {seconds:.1} s; {changed}; undo with `cairn rewind {} --to {at}`",
            outcome.exit.describe(),
            session.id()
        ));
    }
    Ok(code)
}

/// Runs the command in the workspace, passing its output through (to stderr
/// with `--json`) and keeping its tail.
fn spawn_and_wait(
    args: &ExecArgs,
    dir: &str,
) -> std::io::Result<(std::process::ExitStatus, String)> {
    let mut child = Command::new(&args.command[0])
        .args(&args.command[1..])
        .current_dir(dir)
        .stdin(Stdio::inherit())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    // The terminal's Ctrl-C reaches the command too; cairn outlives it to
    // record how it ended. (Ignored only now, so the command does not
    // inherit the ignoring.)
    unsafe {
        libc::signal(libc::SIGINT, libc::SIG_IGN);
        libc::signal(libc::SIGQUIT, libc::SIG_IGN);
    }
    let tail = Arc::new(Mutex::new(Vec::<u8>::new()));
    let mut pumps = Vec::new();
    if let Some(out) = child.stdout.take() {
        let json = args.json;
        pumps.push(pump(out, tail.clone(), move |b| {
            if json {
                let _ = std::io::stderr().write_all(b);
            } else {
                let mut o = std::io::stdout().lock();
                let _ = o.write_all(b).and_then(|_| o.flush());
            }
        }));
    }
    if let Some(err) = child.stderr.take() {
        pumps.push(pump(err, tail.clone(), |b| {
            let _ = std::io::stderr().write_all(b);
        }));
    }
    let status = child.wait()?;
    for p in pumps {
        let _ = p.join();
    }
    let bytes = tail.lock().map(|t| t.clone()).unwrap_or_default();
    Ok((status, String::from_utf8_lossy(&bytes).into_owned()))
}

fn pump(
    mut from: impl Read + Send + 'static,
    tail: Arc<Mutex<Vec<u8>>>,
    to: impl Fn(&[u8]) + Send + 'static,
) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let mut buf = [0u8; 8192];
        while let Ok(n) = from.read(&mut buf) {
            if n == 0 {
                break;
            }
            to(&buf[..n]);
            if let Ok(mut t) = tail.lock() {
                t.extend_from_slice(&buf[..n]);
                let excess = t.len().saturating_sub(TAIL_BYTES);
                t.drain(..excess);
            }
        }
    })
}
