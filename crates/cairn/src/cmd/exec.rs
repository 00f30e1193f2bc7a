//! `cairn exec [--run ID] [--node NAME] [--json] -- COMMAND [ARG…]`: any
//! command as a node of a session (DESIGN §5.5).
//!
//! Order: `resume:<node>:<i>` (a way back in: what moved since the last
//! invocation did not come from the run; deduped when nothing moved), then
//! `pre:<node>:<i>`, `tool_start`, the command, `tool_result` (exit status,
//! duration, output tail), `post:` or `fail:` by exit status or signal, and a
//! terminal record. cairn exits with the command's own status (128+N for a
//! signal), 126/127 when it cannot be run, and 125 for its own failures.

use std::io::{Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use cairn_journal::{
    Outcome, Reconcile, RecordBody, Snapshot, Terminal, TerminalReason, ToolResult, ToolStart,
};
use cairn_store::Store;
use cairn_workspace::{NodeEnd, NodeName};

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
            eprintln!("cairn exec: {e}");
            for cause in e.chain().skip(1) {
                eprintln!("  caused by: {cause}");
            }
            std::process::exit(125)
        }
    }
}

fn exec(ctx: &Context, args: &ExecArgs) -> anyhow::Result<i32> {
    let node = NodeName::parse(&args.node).map_err(|e| coded(Code::Usage, e.to_string()))?;
    let store = Store::open(ctx.store.root())?;
    let line: Vec<String> = args
        .command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let mut session = match &args.run {
        Some(id) => cairn_agent::Session::open(&store, &ctx.existing_run(id)?)?,
        None => new_session(ctx, &store, &line.join(" "))?,
    };
    let root = session.state().workspace.clone();
    let ws = tracker(&store, session.id(), Path::new(&root))?;
    let bars = Bars::new(args.json);
    let head_before = ws.head()?;
    let entry = ws.enter_node(&node, &bars)?;
    if let Some(r) = &entry.resume {
        session.append(RecordBody::Snapshot(Snapshot {
            snapshot: r.snapshot.to_string(),
            label: r.label.to_string(),
        }))?;
        let changed = match (&head_before, r.deduped) {
            (Some(before), false) => cairn_agent::changed_paths(&ws, before, &r.snapshot),
            _ => Vec::new(),
        };
        session.append(RecordBody::Reconcile(Reconcile {
            changed,
            snapshot: Some(r.snapshot.to_string()),
        }))?;
    }
    let at = entry.at.clone();
    session.append(RecordBody::Snapshot(Snapshot {
        snapshot: entry.pre.to_string(),
        label: format!("pre:{at}"),
    }))?;
    let call = format!("{at}");
    session.append(RecordBody::ToolStart(ToolStart {
        call: call.clone(),
        name: args.node.clone(),
    }))?;
    if !args.json {
        eprintln!(
            "cairn: {} in session {} ({})",
            line.join(" "),
            session.id(),
            at
        );
    }

    let started = Instant::now();
    let ran = spawn_and_wait(args, &root);
    let secs = started.elapsed().as_secs_f64();
    let (code, outcome, summary, tail) = match ran {
        Ok((status, tail)) => {
            let code = status
                .code()
                .unwrap_or_else(|| 128 + status.signal().unwrap_or(0));
            let how = match (status.code(), status.signal()) {
                (Some(c), _) => format!("exit status {c}"),
                (None, Some(s)) => format!("killed by signal {s}"),
                _ => "ended".into(),
            };
            let outcome = if status.success() {
                Outcome::Ok
            } else {
                Outcome::Error
            };
            (code, outcome, how, tail)
        }
        Err(e) => {
            let code = match e.kind() {
                std::io::ErrorKind::NotFound => 127,
                std::io::ErrorKind::PermissionDenied => 126,
                _ => 125,
            };
            eprintln!("cairn exec: cannot run {}: {e}", line[0]);
            (
                code,
                Outcome::Error,
                format!("could not be run: {e}"),
                String::new(),
            )
        }
    };
    let output_text = format!(
        "command: {}\n{summary}, after {secs:.3} s\n--- last {} bytes of output ---\n{tail}",
        line.join(" "),
        tail.len()
    );
    session.append(RecordBody::ToolResult(ToolResult {
        call,
        outcome,
        output: output_text,
    }))?;
    let end = if outcome == Outcome::Ok {
        NodeEnd::Completed
    } else {
        NodeEnd::Failed
    };
    let report = ws.leave_node(&at, end, &bars)?;
    session.append(RecordBody::Snapshot(Snapshot {
        snapshot: report.snapshot.to_string(),
        label: report.label.to_string(),
    }))?;
    let reason = if outcome == Outcome::Ok {
        TerminalReason::Completed
    } else {
        TerminalReason::Failed
    };
    let totals = session.state().totals;
    session.append(RecordBody::Terminal(Terminal {
        reason,
        totals,
        detail: (outcome != Outcome::Ok).then(|| format!("{} {summary}", line.join(" "))),
    }))?;
    if args.json {
        output::json(&RunSummary {
            id: session.id().to_string(),
            status: reason.as_str().into(),
            records: session.writer().seq(),
            tail: session.writer().tail().to_hex(),
        })?;
    } else {
        eprintln!(
            "cairn: {summary} after {secs:.1} s; {} file(s) changed by this node; undo with `cairn rewind {} --to {at}`",
            changed_count(&ws, &entry.pre, &report.snapshot),
            session.id()
        );
    }
    Ok(code)
}

fn changed_count(
    ws: &cairn_workspace::Workspace,
    a: &cairn_workspace::SnapshotId,
    b: &cairn_workspace::SnapshotId,
) -> usize {
    if a == b {
        0
    } else {
        cairn_agent::changed_paths(ws, a, b).len()
    }
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
