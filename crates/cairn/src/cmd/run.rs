//! `cairn run`, `cairn resume`, `cairn continue`: the agent loop from the CLI.
//!
//! Streams the model's text to stdout as it arrives and shows each tool call
//! and its outcome; `--json` prints only the summary object. The first
//! SIGINT/SIGTERM lets the step in flight finish and suspends; a second stops
//! at once.

use std::io::Write;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cairn_agent::{
    stop_pair, Agent, Ending, Events, Faults, Plan, Request, ResponseStore, Session, StopHandle,
    StopLevel,
};
use cairn_journal::{Outcome, TerminalReason, ToolCall};
use cairn_model::{provider_from_spec, ProviderConfig, ProviderKind};
use cairn_store::{RunId, Store};
use cairn_tools::{ShellEnv, ToolConfig, Toolbox, Workspace};
use serde::Serialize;

use crate::cli::{ContinueArgs, ModelArgs, ResumeArgs, RunArgs};
use crate::cmd::{prices, sessions, Context};
use crate::exit::{coded, Code};
use crate::output;

/// What `run`, `resume` and `continue` print with `--json`.
#[derive(Serialize)]
pub struct RunSummary {
    pub id: String,
    pub status: String,
    pub records: u64,
    pub tail: String,
}

fn request(m: &ModelArgs) -> Request {
    Request {
        model: m.model.clone(),
        base_url: m.base_url.clone(),
        max_turns: m.max_turns,
        max_tokens: m.max_tokens,
        max_cost: m.max_cost,
        thinking: m.thinking.clone(),
    }
}

fn provider_config() -> ProviderConfig {
    let mut c = ProviderConfig::default();
    if let Some(ms) = std::env::var("CAIRN_RETRY_BASE_MS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        c.retry.base_delay = Duration::from_millis(ms);
    }
    c
}

/// The tools' view of `dir`, with the store protected: no tool may reach
/// it, whatever path or mount leads there.
fn workspace(dir: &Path, store: &Store) -> anyhow::Result<Workspace> {
    Workspace::new(dir)
        .and_then(|ws| ws.protect(store.root()))
        .map_err(|e| coded(Code::Usage, e.to_string()))
}

/// The built-in tools, the shell's environment scrubbed but for the names
/// in `CAIRN_SHELL_PASS_ENV`.
fn toolbox() -> Toolbox {
    let pass = std::env::var(ShellEnv::PASS_THROUGH_VAR).unwrap_or_default();
    Toolbox::builtin(ToolConfig {
        shell_env: ShellEnv::default().pass_through_list(&pass),
        ..ToolConfig::default()
    })
}

/// `cairn run`.
pub fn run(ctx: &Context, args: RunArgs) -> anyhow::Result<Code> {
    let default_model = std::env::var("CAIRN_MODEL").ok();
    let plan = Plan::for_run(
        &request(&args.model),
        default_model.as_deref(),
        args.system.as_deref(),
    )?;
    ctx.refuse_store_inside(&ctx.cwd)?;
    let store = Store::open(ctx.store.root())?;
    let ws = workspace(&ctx.cwd, &store)?;
    let (handle, stop) = stop_pair();
    let rt = runtime()?;
    rt.block_on(async {
        let provider =
            provider_from_spec(&plan.spec, plan.base_url.as_deref(), &provider_config())?;
        let tools = toolbox();
        let name = args
            .name
            .clone()
            .or_else(|| Some(output::one_line(&args.task.join(" "), 60)));
        let meta = plan.meta(ws.root(), name, &tools.infos(), provider.base_url());
        let id = RunId::new();
        let session = Session::create(&store, &id, meta)?;
        if !args.json {
            output::note(format!("cairn: session {id} in {}", ws.root().display()));
        }
        let versions = crate::cmd::workspace::tracker(&store, &id, ws.root())?;
        let agent =
            assemble(&store, session, provider, tools, ws, &plan, stop)?.with_tracker(versions);
        drive(agent, Some(args.task.join(" ")), args.json, handle).await
    })
}

fn assemble(
    store: &Store,
    session: Session,
    provider: Box<dyn cairn_model::Provider>,
    tools: Toolbox,
    ws: Workspace,
    plan: &Plan,
    stop: cairn_agent::Stop,
) -> anyhow::Result<Agent> {
    let pricing = Arc::new(prices::load()?);
    Ok(Agent::new(
        session,
        provider,
        tools,
        ws,
        plan.config(),
        ResponseStore::new(store),
        pricing,
        stop,
    )
    .with_faults(Faults::from_env()))
}

/// `cairn resume ID [TEXT]`.
pub fn resume(ctx: &Context, args: ResumeArgs) -> anyhow::Result<Code> {
    let id = ctx.existing_run(&args.id)?;
    resume_id(ctx, id, args.text, args.force, args.json, &args.model)
}

/// `cairn continue [TEXT]`: the most recent valid session of this repository.
pub fn continue_(ctx: &Context, args: ContinueArgs) -> anyhow::Result<Code> {
    let list = sessions::visible(ctx, false)?;
    // The newest valid session that has a model to continue with (sessions
    // made by `cairn exec` or `cairn snapshot` have none).
    let has_model = |id: &str| {
        RunId::parse(id)
            .ok()
            .and_then(|id| cairn_journal::read_head_record(&ctx.store.journal_path(&id)).ok())
            .is_some_and(
                |r| matches!(r.body, cairn_journal::RecordBody::Meta(m) if m.fingerprint.is_some()),
            )
    };
    let Some(pick) = list.iter().find(|s| s.valid && has_model(&s.id)) else {
        return Err(coded(
            Code::Usage,
            format!(
                "no session to continue for {}: start one with `cairn run`, or see `cairn sessions --all`",
                cairn_sessions::repository_root(&ctx.cwd).display()
            ),
        ));
    };
    let id = RunId::parse(&pick.id)?;
    if !args.json {
        output::note(format!("cairn: continuing session {id}"));
    }
    resume_id(ctx, id, args.text, args.force, args.json, &args.model)
}

fn resume_id(
    ctx: &Context,
    id: RunId,
    text: Vec<String>,
    force: bool,
    json: bool,
    m: &ModelArgs,
) -> anyhow::Result<Code> {
    let store = Store::open(ctx.store.root())?;
    // Lock first, then rebuild state and routing from the record.
    let session = Session::open(&store, &id)?;
    let plan = Plan::for_resume(session.state(), &request(m), &|kind: ProviderKind| {
        kind.base_url_from_env()
    })?;
    for notice in &plan.notices {
        output::note(format!("cairn: {notice}"));
    }
    ctx.refuse_store_inside(Path::new(&session.state().workspace))?;
    let ws = workspace(Path::new(&session.state().workspace), &store)?;
    let text = if text.is_empty() {
        None
    } else {
        Some(text.join(" "))
    };
    let (handle, stop) = stop_pair();
    let rt = runtime()?;
    rt.block_on(async {
        let provider =
            provider_from_spec(&plan.spec, plan.base_url.as_deref(), &provider_config())?;
        let tools = toolbox();
        let versions = crate::cmd::workspace::tracker(&store, &id, ws.root())?;
        let mut agent =
            assemble(&store, session, provider, tools, ws, &plan, stop)?.with_tracker(versions);
        let mut printer = Printer::new(json);
        agent.guard(force, &mut printer)?;
        drive(agent, text, json, handle).await
    })
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    Ok(tokio::runtime::Builder::new_current_thread()
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
        t.input_tokens + t.output_tokens,
        output::cost(&t.cost)
    );
    if let Some(d) = &e.detail {
        s.push_str(&format!("  {d}\n"));
    }
    if e.reason != TerminalReason::Completed {
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
    fn tool_started(&mut self, call: &ToolCall) {
        self.finish_line();
        self.out(&format!(
            "  → {} {}\n",
            call.name,
            output::one_line(&call.arguments.to_string(), 100)
        ));
    }
    fn tool_finished(&mut self, _call: &ToolCall, outcome: Outcome, out: &str) {
        let first = out.lines().next().unwrap_or("");
        let label = match outcome {
            Outcome::Ok => "ok",
            Outcome::Error => "error",
            Outcome::Unknown => "UNKNOWN",
        };
        self.out(&format!("  ← {label}: {}\n", output::one_line(first, 100)));
    }
    fn notice(&mut self, message: &str) {
        self.finish_line();
        output::note(format!("cairn: {message}"));
    }
}
