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
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use cairn_gateway::{Filing, Gateway, SharedSession};
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
    let session = match &args.run {
        Some(id) => Session::open(&store, &ctx.existing_run(id)?)?,
        None => new_session(ctx, &store, &command)?,
    };
    // Shared with the gateway, which journals model calls while the command
    // runs; the node protocol locks it around its own records.
    let session: SharedSession = Arc::new(Mutex::new(session));
    let (id, root) = {
        let s = lock(&session)?;
        (s.id().clone(), s.state().workspace.clone())
    };
    ctx.refuse_store_inside(Path::new(&root))?;
    let ws = tracker(&store, &id, Path::new(&root))?;
    let bars = Bars::new(args.json);
    let node = Node::start(&mut *lock(&session)?, &ws, &name, &bars)?;
    let at = node.at().clone();
    if !args.json {
        output::note(format!("cairn: {command} in session {id} ({at})"));
    }
    let gateway = if args.gateway {
        Some(GatewayThread::start(&store, args, session.clone())?)
    } else {
        None
    };
    let child_env: Vec<(String, String)> = gateway
        .as_ref()
        .map(|g| {
            vec![
                ("OPENAI_BASE_URL".into(), format!("http://{}/v1", g.addr)),
                ("ANTHROPIC_BASE_URL".into(), format!("http://{}", g.addr)),
            ]
        })
        .unwrap_or_default();

    let started = Instant::now();
    let ran = spawn_and_wait(args, &root, &child_env);
    if let Some(g) = gateway {
        g.stop();
    }
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
    let mut session = lock(&session)?;
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
    env: &[(String, String)],
) -> std::io::Result<(std::process::ExitStatus, String)> {
    let mut child = Command::new(&args.command[0])
        .args(&args.command[1..])
        .envs(env.iter().map(|(k, v)| (k, v)))
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

fn lock(s: &SharedSession) -> anyhow::Result<MutexGuard<'_, Session>> {
    s.lock()
        .map_err(|_| anyhow::anyhow!("the session lock was poisoned by a panic"))
}

/// The gateway of `exec --gateway`: its own runtime on a thread, on an
/// ephemeral loopback port, for the command's lifetime.
struct GatewayThread {
    addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl GatewayThread {
    fn start(store: &Store, args: &ExecArgs, session: SharedSession) -> anyhow::Result<Self> {
        let config = crate::cmd::gateway::config(
            &args.upstream,
            std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            None,
        );
        let pricing = Arc::new(crate::cmd::prices::load()?);
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let gateway = rt.block_on(Gateway::bind(
            config,
            store,
            Filing::Fixed(session),
            pricing,
        ))?;
        let addr = gateway.local_addr();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = std::thread::spawn(move || {
            let served = rt.block_on(gateway.serve(async {
                let _ = stopped.await;
            }));
            if let Err(e) = served {
                output::note(format!("cairn exec: the gateway failed: {e}"));
            }
        });
        Ok(GatewayThread {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Stops it once the calls in flight are done.
    fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
