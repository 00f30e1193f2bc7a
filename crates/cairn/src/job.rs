//! A command run as a node of a session (DESIGN §5.5) — not a command
//! module: what `cairn exec` runs, and `cairn wrap` runs an agent through.
//!
//! The records and their order are the node protocol of
//! [`cairn_sessions::Node`]; this file runs the command, passes its output
//! through and keeps its tail. cairn exits with the command's own status
//! (128+N for a signal), 126/127 when it cannot be run, and 125 for its own
//! failures.

use std::ffi::OsString;
use std::io::{IsTerminal, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Instant;

use cairn_gateway::{Filing, Gateway, SharedSession};
use cairn_sessions::{Node, NodeExit, NodeOutcome, Session};
use cairn_store::Store;
use cairn_workspace::NodeName;

use crate::cli::UpstreamArgs;
use crate::cmd::progress::Bars;
use crate::cmd::Context;
use crate::exit::{coded, Code};
use crate::output;
use crate::setup::RunSummary;
use crate::setup::{session_without_model, tracker};

/// The output tail kept in the journal.
const TAIL_BYTES: usize = 8 * 1024;

/// cairn's own failure: the command's status could not be had.
const OWN_FAILURE: u8 = 125;

/// The program, its arguments and the variables to set for it, given the
/// gateway's address when there is one.
pub type Launch<'a> = Box<
    dyn FnOnce(Option<std::net::SocketAddr>) -> (OsString, Vec<OsString>, Vec<(String, String)>)
        + 'a,
>;

/// A command to run as a node: what `cairn exec` runs, and what `cairn
/// wrap` runs through it (an agent, started once the gateway listens).
pub struct Job<'a> {
    /// The session to record into; a new one when `None`.
    pub run: Option<&'a str>,
    /// The node's name.
    pub node: &'a str,
    /// The summary as JSON on stdout, the command's output on stderr.
    pub json: bool,
    /// Run a gateway with these upstreams for the command.
    pub gateway: Option<&'a UpstreamArgs>,
    /// A new session's name [default: the command line as shown].
    pub name: Option<String>,
    /// The command line as shown to the user and kept in the record.
    pub shown: String,
    /// When cairn's stdout is a terminal (and not `--json`), the command
    /// gets it as its own stdout and stderr instead of pipes, and no output
    /// tail is kept: for programs that are interactive there.
    pub give_terminal: bool,
    /// The command itself.
    pub launch: Launch<'a>,
}

/// Runs `job`; `who` names cairn in its messages (`cairn exec`). Returns
/// the exit status, as [`run`].
pub fn run_job(ctx: &Context, job: Job<'_>, who: &str) -> u8 {
    match exec(ctx, job, who) {
        Ok(code) => u8::try_from(code).unwrap_or(OWN_FAILURE),
        Err(e) => {
            output::error(who, &e);
            OWN_FAILURE
        }
    }
}

fn exec(ctx: &Context, job: Job<'_>, who: &str) -> anyhow::Result<i32> {
    let name = NodeName::parse(job.node).map_err(|e| coded(Code::Usage, e.to_string()))?;
    if let Some(upstream) = job.gateway {
        // Refused before anything is journaled or run (a secret in a URL
        // would reach the record and the agent's errors).
        gateway_config(upstream)
            .check_upstreams()
            .map_err(|e| coded(Code::Usage, e.to_string()))?;
    }
    if job.run.is_none() {
        ctx.refuse_store_inside(&ctx.cwd)?;
    }
    let store = Store::open(ctx.store.root())?;
    let command = job.shown;
    let session = match job.run {
        Some(id) => Session::open(&store, &ctx.existing_run(id)?)?,
        None => session_without_model(ctx, &store, job.name.as_deref().unwrap_or(&command))?,
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
    let bars = Bars::new(job.json);
    let node = Node::start(&mut *lock(&session)?, &ws, &name, &bars)?;
    let at = node.at().clone();
    if !job.json {
        output::note(format!("cairn: {command} in session {id} ({at})"));
    }
    let gateway = match job.gateway {
        Some(upstream) => Some(GatewayThread::start(
            &store,
            upstream,
            session.clone(),
            who,
        )?),
        None => None,
    };
    let addr = gateway.as_ref().map(|g| g.addr);
    let (program, program_args, own_env) = (job.launch)(addr);
    let mut child_env: Vec<(String, String)> = addr
        .map(|addr| {
            vec![
                ("OPENAI_BASE_URL".into(), format!("http://{addr}/v1")),
                ("ANTHROPIC_BASE_URL".into(), format!("http://{addr}")),
            ]
        })
        .unwrap_or_default();
    child_env.extend(own_env);

    let started = Instant::now();
    // An interactive program needs the terminal itself, not a pipe (Claude
    // Code behind a pipe turns into its print mode and wants a prompt).
    let output = if job.give_terminal && !job.json && std::io::stdout().is_terminal() {
        Output::Terminal
    } else if job.json {
        Output::Tee { to_stderr: true }
    } else {
        Output::Tee { to_stderr: false }
    };
    let ran = spawn_and_wait(&program, &program_args, output, &root, &child_env);
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
            output::note(format!(
                "{who}: cannot run {}: {e}",
                program.to_string_lossy()
            ));
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
    if job.json {
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

/// Where the command's output goes.
#[derive(Clone, Copy)]
enum Output {
    /// Through cairn, which keeps its tail: to stdout and stderr as the
    /// command wrote it, or all to stderr (`--json`).
    Tee { to_stderr: bool },
    /// Straight to cairn's terminal; no tail is kept.
    Terminal,
}

/// Runs the command in the workspace, passing its output through (to stderr
/// with `--json`) and keeping its tail, or giving it the terminal.
fn spawn_and_wait(
    program: &OsString,
    args: &[OsString],
    output: Output,
    dir: &str,
    env: &[(String, String)],
) -> std::io::Result<(std::process::ExitStatus, String)> {
    let (out, err) = match output {
        Output::Terminal => (Stdio::inherit(), Stdio::inherit()),
        Output::Tee { .. } => (Stdio::piped(), Stdio::piped()),
    };
    let json = matches!(output, Output::Tee { to_stderr: true });
    let mut child = Command::new(program)
        .args(args)
        .envs(env.iter().map(|(k, v)| (k, v)))
        .current_dir(dir)
        .stdin(Stdio::inherit())
        .stdout(out)
        .stderr(err)
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

/// The configuration of `exec --gateway`'s gateway: an ephemeral loopback
/// port, no token.
fn gateway_config(upstream: &UpstreamArgs) -> cairn_gateway::GatewayConfig {
    crate::serving::config(
        upstream,
        std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
        None,
    )
}

/// The gateway of `exec --gateway`: its own runtime on a thread, on an
/// ephemeral loopback port, for the command's lifetime.
struct GatewayThread {
    addr: std::net::SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl GatewayThread {
    fn start(
        store: &Store,
        upstream: &UpstreamArgs,
        session: SharedSession,
        who: &str,
    ) -> anyhow::Result<Self> {
        let config = gateway_config(upstream);
        let pricing = Arc::new(crate::prices::load()?);
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
        let grace = upstream.stop_grace;
        let (what, failed) = (
            format!("{who}: the gateway"),
            format!("{who}: the gateway failed"),
        );
        let thread = std::thread::spawn(move || {
            let served = rt.block_on(crate::serving::serve_until_stopped(
                gateway,
                &what,
                async {
                    let _ = stopped.await;
                },
                None::<(std::future::Pending<()>, &str)>,
                grace,
            ));
            // Calls still reading a stalled upstream are not waited for.
            rt.shutdown_background();
            if let Err(e) = served {
                output::note(format!("{failed}: {e}"));
            }
        });
        Ok(GatewayThread {
            addr,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    /// Stops it once the calls in flight are done, or its stop grace is
    /// over.
    fn stop(mut self) {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
