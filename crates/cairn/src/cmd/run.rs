//! `cairn run`, `cairn resume`, `cairn continue`: the agent loop from the CLI.
//!
//! Streams the model's text to stdout as it arrives and shows each tool call
//! and its outcome; `--json` prints only the summary object. The first
//! SIGINT/SIGTERM lets the step in flight finish and suspends; a second stops
//! at once. With `--approve`, the calls it names wait for a yes on the
//! terminal ([`CliApprover`]).

use std::io::{BufRead, IsTerminal, Write};

use cairn_agent::{stop_pair, Agent, Approver, Decision, Ending, Events, StopHandle, StopLevel};
use cairn_journal::{Outcome, TerminalReason, ToolCall};
use cairn_store::RunId;

use crate::cli::{ContinueArgs, McpClientArgs, ModelArgs, ResumeArgs, RunArgs};
use crate::cmd::Context;
use crate::exit::{coded, Code};
use crate::output;
use crate::setup::{check_new, continue_target, launcher, new_session, request, RunSummary};

/// The task of `cairn run`: its words, or standard input for `-` (all of
/// it, so a task can span lines; approvals then read no answer and decline).
fn task_text(words: &[String]) -> anyhow::Result<String> {
    if words != ["-"] {
        return Ok(words.join(" "));
    }
    let mut text = String::new();
    std::io::Read::read_to_string(&mut std::io::stdin().lock(), &mut text).map_err(|e| {
        coded(
            Code::Usage,
            format!("cannot read the task from standard input (`cairn run -`): {e}"),
        )
    })?;
    if text.trim().is_empty() {
        return Err(coded(
            Code::Usage,
            "`cairn run -` reads the task from standard input, and it was empty: pipe the task in (`echo TASK | cairn run -`) or give it as arguments",
        ));
    }
    Ok(text.trim_end().to_owned())
}

/// `cairn run`.
pub fn run(ctx: &Context, args: RunArgs) -> anyhow::Result<Code> {
    let task = task_text(&args.task)?;
    let launcher = launcher(ctx)?;
    let spec = new_session(ctx, &args.model, args.system.as_deref(), args.name.clone());
    check_new(ctx, &launcher, &spec, args.model.approve)?;
    let (handle, stop) = stop_pair();
    let rt = runtime()?;
    rt.block_on(async {
        let mut spec = spec;
        spec.request.mcp = start_mcp(&launcher, &args.mcp, &spec.workspace).await?;
        let servers = spec.request.mcp.clone();
        let code = async {
            let agent = launcher.create(&spec, &task, stop)?.with_approval(
                ctx.approve(args.model.approve)?,
                Box::new(CliApprover::default()),
            );
            if !args.json {
                output::note(format!(
                    "cairn: session {} in {}",
                    agent.session().id(),
                    agent.session().state().workspace
                ));
            }
            drive(agent, Some(task), args.json, handle).await
        }
        .await;
        stop_mcp(servers).await;
        code
    })
}

/// Starts the servers of `--mcp`, if given, for a session in `workspace`;
/// their standard error is shown (made terminal-safe) with `--mcp-stderr`.
async fn start_mcp(
    launcher: &cairn_agent::Launcher,
    args: &McpClientArgs,
    workspace: &std::path::Path,
) -> anyhow::Result<Option<cairn_tools::mcp::McpServers>> {
    let Some(config) = &args.mcp else {
        return Ok(None);
    };
    let sink: Option<cairn_tools::mcp::StderrSink> = args.mcp_stderr.then(|| {
        std::sync::Arc::new(|server: &str, line: &str| {
            output::note(format!("mcp {server}: {line}"));
        }) as cairn_tools::mcp::StderrSink
    });
    Ok(Some(launcher.start_mcp(config, workspace, sink).await?))
}

async fn stop_mcp(servers: Option<cairn_tools::mcp::McpServers>) {
    if let Some(s) = servers {
        s.stop().await;
    }
}

/// Asks on the terminal whether a call may run: the call on stderr (shown,
/// never obeyed: no raw escapes), one line from stdin. `y` or `yes` runs
/// it; anything else, or the end of input, declines. The question is also
/// posted for the viewer (`cairn_agent::questions`); when it is answered
/// there first, the prompt says so and the line typed next answers the next
/// question.
#[derive(Default)]
struct CliApprover {
    lines: Option<Lines>,
}

/// Standard input read one line at a time, on request, by a thread of its
/// own — not the runtime's blocking pool, which the runtime waits for on
/// shutdown: a read abandoned by an immediate stop must not hold up the
/// exit. A read outlives an ask that was answered elsewhere: the line it
/// brings goes to whoever asks next (the person answers the prompt in
/// front of them), or nowhere when no one is asking.
struct Lines {
    wants: std::sync::mpsc::Sender<()>,
    answer: std::sync::Arc<std::sync::Mutex<Option<Reply>>>,
}

type Reply = tokio::sync::oneshot::Sender<Option<String>>;

impl Lines {
    fn start() -> std::io::Result<Lines> {
        let (wants, wanted) = std::sync::mpsc::channel::<()>();
        let answer: std::sync::Arc<std::sync::Mutex<Option<Reply>>> = Default::default();
        let slot = answer.clone();
        std::thread::Builder::new()
            .name("cairn-approve".into())
            .spawn(move || {
                let mut at_end = false;
                while wanted.recv().is_ok() {
                    let line = if at_end {
                        None
                    } else {
                        let mut line = String::new();
                        match std::io::stdin().lock().read_line(&mut line) {
                            Ok(n) if n > 0 => Some(line),
                            // The end of input (or an unreadable stdin) is
                            // a no, now and for every later question.
                            _ => {
                                at_end = true;
                                None
                            }
                        }
                    };
                    let reply = slot.lock().unwrap_or_else(|p| p.into_inner()).take();
                    if let Some(reply) = reply {
                        let _ = reply.send(line);
                    }
                }
            })?;
        Ok(Lines { wants, answer })
    }

    /// The next line, for this ask.
    async fn next(&self) -> Option<String> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        // A read still under way for an ask answered elsewhere brings its
        // line here; otherwise a new read is asked for.
        let reading = self
            .answer
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .replace(tx)
            .is_some_and(|old| old.is_closed());
        if !reading && self.wants.send(()).is_err() {
            return None;
        }
        rx.await.ok().flatten()
    }
}

#[async_trait::async_trait]
impl Approver for CliApprover {
    async fn ask(&mut self, call: &ToolCall) -> Decision {
        self.ask_previewed(call, None).await
    }

    /// A file write or edit is shown as the diff it would make, not as its
    /// JSON arguments.
    async fn ask_previewed(&mut self, call: &ToolCall, preview: Option<String>) -> Decision {
        let path = call.arguments.get("path").and_then(|p| p.as_str());
        let question = match (&preview, path) {
            (Some(diff), Some(path)) => format!(
                "cairn: {} {}:\n{}{}cairn: run it? [y/N] ",
                output::one_line(&call.name, 40),
                output::one_line(path, 200),
                diff,
                if diff.ends_with('\n') { "" } else { "\n" }
            ),
            _ => format!(
                "cairn: run {} {}? [y/N] ",
                output::one_line(&call.name, 40),
                output::one_line(&call.arguments.to_string(), 200)
            ),
        };
        {
            let mut err = std::io::stderr().lock();
            let _ = err
                .write_all(output::visible(&question).as_bytes())
                .and_then(|_| err.flush());
        }
        if self.lines.is_none() {
            match Lines::start() {
                Ok(l) => self.lines = Some(l),
                Err(_) => {
                    output::note("\ncairn: cannot read an answer; declined");
                    return Decision::Decline;
                }
            }
        }
        let answer = match &self.lines {
            Some(lines) => lines.next().await.map(|l| l.trim().to_owned()),
            None => None,
        };
        // A terminal echoed the answer and its newline; anything else
        // did not, so the log says what was answered.
        if answer.is_none() || !std::io::stdin().is_terminal() {
            output::note(output::one_line(answer.as_deref().unwrap_or(""), 40));
        }
        match answer.map(|a| a.to_ascii_lowercase()).as_deref() {
            Some("y" | "yes") => Decision::Run,
            _ => Decision::Decline,
        }
    }

    fn answered_elsewhere(&mut self, _call: &ToolCall, decision: Decision) {
        output::note(match decision {
            Decision::Run => "\ncairn: answered from the viewer: run",
            Decision::Decline => "\ncairn: answered from the viewer: declined",
        });
    }
}

/// `cairn resume ID [TEXT]`.
pub fn resume(ctx: &Context, args: ResumeArgs) -> anyhow::Result<Code> {
    let id = ctx.existing_run(&args.id)?;
    resume_id(
        ctx,
        id,
        args.text,
        args.force,
        args.json,
        &args.model,
        &args.mcp,
    )
}

/// `cairn continue [TEXT]`: the most recent valid session of this repository.
pub fn continue_(ctx: &Context, args: ContinueArgs) -> anyhow::Result<Code> {
    let id = continue_target(ctx)?;
    if !args.json {
        output::note(format!("cairn: continuing session {id}"));
    }
    resume_id(
        ctx,
        id,
        args.text,
        args.force,
        args.json,
        &args.model,
        &args.mcp,
    )
}

fn resume_id(
    ctx: &Context,
    id: RunId,
    text: Vec<String>,
    force: bool,
    json: bool,
    m: &ModelArgs,
    mcp: &McpClientArgs,
) -> anyhow::Result<Code> {
    let launcher = launcher(ctx)?;
    let text = if text.is_empty() {
        None
    } else {
        Some(text.join(" "))
    };
    let (handle, stop) = stop_pair();
    let rt = runtime()?;
    rt.block_on(async {
        let mut printer = Printer::new(json);
        let mut request = request(m);
        if mcp.mcp.is_some() {
            let workspace = cairn_sessions::summarize(launcher.store(), &id).workspace;
            request.mcp = start_mcp(&launcher, mcp, std::path::Path::new(&workspace)).await?;
        }
        let servers = request.mcp.clone();
        let code = async {
            let agent = launcher
                .open(&id, &request, force, stop, &mut printer)?
                .with_approval(ctx.approve(m.approve)?, Box::new(CliApprover::default()));
            drive(agent, text, json, handle).await
        }
        .await;
        stop_mcp(servers).await;
        code
    })
}

/// The loop runs on the calling thread (`block_on`); the signal watcher
/// on the one worker, so that a stop request is seen, and said, the moment
/// it comes, whatever the loop is blocked on (a journal append's fdatasync
/// or publish), and two requests are never folded into one.
fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .thread_name("cairn-runtime")
        .enable_all()
        .build()?)
}

async fn drive(
    mut agent: Agent,
    text: Option<String>,
    json: bool,
    handle: StopHandle,
) -> anyhow::Result<Code> {
    use tokio::signal::unix::{signal, SignalKind};
    // Installed before the first step, so no signal can take the default
    // action (death) while the loop is working.
    let int = signal(SignalKind::interrupt())?;
    let term = signal(SignalKind::terminate())?;
    let signals = tokio::spawn(watch_signals(handle, int, term));
    let mut printer = Printer::new(json);
    let result = agent.drive(text, &mut printer).await;
    signals.abort();
    let ending = result?;
    printer.finish_line();
    let id = agent.session().id().to_string();
    report(&id, &ending, agent.session().state(), json)
}

async fn watch_signals(
    handle: StopHandle,
    mut int: tokio::signal::unix::Signal,
    mut term: tokio::signal::unix::Signal,
) {
    loop {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        match handle.escalate() {
            StopLevel::Graceful => output::note(
                "\ncairn: stopping after the step in flight, then suspending (interrupt again to stop at once)",
            ),
            _ => output::note("\ncairn: stopping now"),
        }
    }
}

fn report(
    id: &str,
    e: &Ending,
    state: &cairn_journal::RunState,
    json: bool,
) -> anyhow::Result<Code> {
    let code = match e.reason {
        TerminalReason::Failed | TerminalReason::Interrupted => Code::Failure,
        _ => Code::Ok,
    };
    if json {
        output::json(&RunSummary {
            id: id.to_owned(),
            status: e.reason.as_str().into(),
            records: e.records,
            tail: e.tail.to_hex(),
        })?;
        return Ok(code);
    }
    let t = &state.totals;
    let mut s = format!(
        "\nsession {id}: {} · {} turn(s), {} tool call(s), {} tokens, cost {}\n",
        e.reason.as_str(),
        t.turns,
        t.tool_calls,
        t.tokens(),
        t.cost.for_people()
    );
    if let Some(d) = &e.detail {
        s.push_str(&format!("  {d}\n"));
    }
    // A budget stop's detail names the resume that raises the limit; a
    // plain resume would stop again at once.
    if !matches!(
        e.reason,
        TerminalReason::Completed | TerminalReason::BudgetExhausted
    ) {
        s.push_str(&format!("  resume with: cairn resume {id}\n"));
    }
    output::text(&s)?;
    Ok(code)
}

/// Draws the loop's progress for people; silent but for notices with `--json`.
struct Printer {
    json: bool,
    mid_line: bool,
}

impl Printer {
    fn new(json: bool) -> Self {
        Printer {
            json,
            mid_line: false,
        }
    }

    fn out(&mut self, s: &str) {
        if self.json {
            return;
        }
        let mut o = std::io::stdout().lock();
        // A closed stdout must not stop the run: the journal is the record.
        // Model and tool text is shown, never obeyed (no raw escapes).
        let _ = o
            .write_all(output::visible(s).as_bytes())
            .and_then(|_| o.flush());
        self.mid_line = !s.ends_with('\n');
    }

    fn finish_line(&mut self) {
        if self.mid_line {
            self.out("\n");
        }
    }
}

impl Events for Printer {
    fn text(&mut self, delta: &str) {
        if !delta.is_empty() {
            self.out(delta);
        }
    }
    fn text_restart(&mut self) {
        self.finish_line();
        self.out("[the stream broke; retrying]\n");
    }
    fn turn_started(&mut self, turn: u64, replay: bool) {
        self.finish_line();
        if replay {
            self.out(&format!(
                "[turn {turn}: served from the response store, not bought again]\n"
            ));
        }
    }
    fn refusal(&mut self, text: &str) {
        self.finish_line();
        self.out(&format!("[the model refused] {text}\n"));
    }
    fn turn_finished(&mut self, _turn: u64) {
        self.finish_line();
    }
    fn approval_needed(&mut self, _call: &ToolCall) {
        // The question goes to stderr; start it on a line of its own.
        self.finish_line();
    }
    fn tool_started(&mut self, call: &ToolCall) {
        self.finish_line();
        self.out(&format!(
            "  → {} {}\n",
            output::one_line(&call.name, 60),
            output::one_line(&call.arguments.to_string(), 100)
        ));
    }
    fn tool_finished(&mut self, _call: &ToolCall, outcome: Outcome, out: &str) {
        // An unknown outcome's notice is shown whole: it says what to check.
        let (first, width) = match outcome {
            Outcome::Unknown => (out, usize::MAX),
            _ => (out.lines().next().unwrap_or(""), 100),
        };
        let label = match outcome {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::Unknown => "UNKNOWN",
            Outcome::Refused => "refused",
        };
        self.out(&format!(
            "  ← {label}: {}\n",
            output::one_line(first, width)
        ));
    }
    fn notice(&mut self, message: &str) {
        self.finish_line();
        output::note(format!("cairn: {message}"));
    }
}
