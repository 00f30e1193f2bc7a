//! The loop (DESIGN §4.1): journal order within a turn, and what a resume does
//! with a turn that was cut short.
//!
//! Order, which makes resume exact:
//! 1. the model's response is stored under its idempotency key (fsynced);
//! 2. the `assistant` record is journaled — before any tool runs;
//! 3. for each call: `tool_start` is journaled, then the tool is dispatched,
//!    then its `tool_result` is journaled the instant it completes;
//! 4. a turn without tool calls ends the run: `terminal: completed`.
//!
//! On resume, the last turn's calls are completed first: a journaled result is
//! reused; a call with no `tool_start` never ran and runs now; a call with a
//! `tool_start` but no result was in flight — a read-only (idempotent) tool is
//! run again, any other gets an `unknown` outcome and is never retried
//! automatically; the model reads that outcome and decides.
//!
//! Stopping: a first stop request lets the model call or tool in flight finish
//! and journals `terminal: suspended` (resume then repeats nothing); a second
//! abandons it at once: `terminal: interrupted`, an abandoned tool recorded as
//! `unknown`.
//!
//! Blocking work stays off the runtime's other tasks: workspace captures run
//! on a thread of their own (see `offload`), which an immediate stop
//! abandons, and journal appends (write, fdatasync, a shared store's
//! publish) hand the runtime's thread over while they block, on a
//! multi-thread runtime. Whoever watches for stop requests (a signal task)
//! therefore runs during either, and sees every request as it comes.
//!
//! Approvals (DESIGN §11): a call the [`ApprovePolicy`] names waits, before
//! its `tool_start`, for the [`Approver`]'s answer inside a `pause:turn:N`
//! window that `resume:turn:N` closes; a decline journals a `refused` result
//! and runs nothing.

use std::sync::Arc;

use cairn_journal::{
    Budgets, ChainHash, Fingerprint, McpCall, Outcome, Override, PendingCall, Reconcile,
    RecordBody, Snapshot, Terminal, TerminalReason, ToolCall, ToolHints, ToolResult, ToolStart,
    User, Versioning, VersioningState,
};
use cairn_model::{ModelRequest, ModelResponse, Provider};
use cairn_tools::{Toolbox, Workspace};
use cairn_workspace::Label;

use crate::approve::{ApprovePolicy, Approver, Decision};
use crate::boundaries::{self, Boundaries, Stopped, Taken};
use crate::convert;
use crate::events::{Events, Sink};
use crate::fingerprint::{compare, fingerprint, Verdict};
use crate::offload::{Offloaded, Work};
use crate::questions::Posted;
use crate::responses;
use crate::stop::{Stop, StopLevel};
use crate::{AgentError, Pricing, Session};
use cairn_calls::ResponseStore;
use reconcile::Gap;

/// What the model is asked with, besides the conversation.
#[derive(Clone, Debug, Default)]
pub struct Config {
    /// The model spec as the user wrote it (`openai:gpt-4o`), fingerprinted.
    pub spec: String,
    /// The system prompt text.
    pub system: Option<String>,
    /// The thinking mode.
    pub thinking: Option<String>,
    /// Budgets.
    pub budgets: Budgets,
    /// A cap on output tokens per call.
    pub max_output_tokens: Option<u32>,
}

/// Crash points for tests: the process aborts there, as if killed.
///
/// They exist only in builds with the `fault-injection` feature, which the
/// binary's tests turn on; a release build has no crash point, whatever
/// its environment says.
#[derive(Clone, Copy, Debug, Default)]
pub struct Faults {
    /// After a response is stored, before its `assistant` record is written.
    pub crash_after_response_stored: bool,
    /// After a call's `tool_start` is journaled, wait for ever instead of
    /// dispatching it: the call is in flight until the process is killed.
    pub stall_after_tool_start: bool,
    /// Every workspace capture stalls for good, after saying so on stderr
    /// (`cairn: fault: the capture at LABEL stalls`): only a stop ends it.
    pub stall_in_capture: bool,
}

impl Faults {
    /// The crash points named by `CAIRN_FAULT` (comma-separated:
    /// `crash-after-response-stored`, `stall-after-tool-start`,
    /// `stall-in-capture`) with the
    /// `fault-injection` feature; none without it.
    pub fn from_env() -> Faults {
        #[cfg(feature = "fault-injection")]
        {
            let named = std::env::var("CAIRN_FAULT").unwrap_or_default();
            let armed = |fault: &str| named.split(',').any(|f| f.trim() == fault);
            Faults {
                crash_after_response_stored: armed("crash-after-response-stored"),
                stall_after_tool_start: armed("stall-after-tool-start"),
                stall_in_capture: armed("stall-in-capture"),
            }
        }
        #[cfg(not(feature = "fault-injection"))]
        {
            Faults::default()
        }
    }
}

/// How a stretch of work ended; it is also the last record of the journal.
#[derive(Clone, Debug)]
pub struct Ending {
    /// The terminal reason.
    pub reason: TerminalReason,
    /// Why, for `failed`, `interrupted` and `budget_exhausted`.
    pub detail: Option<String>,
    /// Records in the journal.
    pub records: u64,
    /// Chain hash of the last record.
    pub tail: ChainHash,
}

mod reconcile;

/// The approval policy and who answers it.
struct Approval {
    policy: ApprovePolicy,
    approver: Box<dyn Approver>,
}

enum Called {
    Done(Box<ModelResponse>, bool),
    Interrupted,
    Failed(String),
}

/// The agent loop over one open session.
pub struct Agent {
    session: Session,
    provider: Box<dyn Provider>,
    tools: Toolbox,
    workspace: Workspace,
    config: Config,
    responses: ResponseStore,
    pricing: Arc<dyn Pricing>,
    stop: Stop,
    faults: Faults,
    boundaries: Offloaded,
    /// The turn whose `pre:` was taken and whose `post:` was not yet.
    open_turn: Option<u64>,
    /// What changed outside the run, to tell the model before its next turn.
    note: Option<String>,
    /// Which calls wait for a person, and who answers; none without it.
    approval: Option<Approval>,
}

impl Agent {
    /// Puts the parts together.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        session: Session,
        provider: Box<dyn Provider>,
        tools: Toolbox,
        workspace: Workspace,
        config: Config,
        responses: ResponseStore,
        pricing: Arc<dyn Pricing>,
        stop: Stop,
    ) -> Self {
        Agent {
            session,
            provider,
            tools,
            workspace,
            config,
            responses,
            pricing,
            stop,
            faults: Faults::default(),
            boundaries: Offloaded::new(Boundaries::new(None)),
            open_turn: None,
            note: None,
            approval: None,
        }
    }

    /// Versions the workspace at every turn boundary with `tracker`
    /// (DESIGN §5.3); without it the loop journals no `snapshot` records.
    pub fn with_tracker(mut self, tracker: cairn_workspace::Workspace) -> Self {
        self.boundaries = Offloaded::new(Boundaries::new(Some(tracker)));
        self.boundaries.stall(self.faults.stall_in_capture);
        self
    }

    /// Asks `approver` before each call that `policy` names (DESIGN §11).
    /// Default: no call waits.
    pub fn with_approval(mut self, policy: ApprovePolicy, approver: Box<dyn Approver>) -> Self {
        self.approval = Some(Approval { policy, approver });
        self
    }

    /// A fresh stop after a suspend, so that one `Agent` can be driven again
    /// (by an interactive front end) once a stop request ended its last
    /// stretch of work.
    pub fn set_stop(&mut self, stop: Stop) {
        self.stop = stop;
    }

    /// Arms crash points (tests only).
    pub fn with_faults(mut self, faults: Faults) -> Self {
        self.faults = faults;
        self.boundaries.stall(faults.stall_in_capture);
        self
    }

    /// The session.
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The session, for recording captures between stretches of work (a
    /// rewind's bank, say) while the agent holds its lock.
    pub fn session_mut(&mut self) -> &mut Session {
        &mut self.session
    }

    /// The fingerprint of the current configuration.
    pub fn fingerprint(&self) -> Fingerprint {
        fingerprint(
            &self.config.spec,
            self.config.system.as_deref(),
            &self.tools.infos(),
            self.config.thinking.as_deref(),
            &self.config.budgets,
        )
    }

    /// The resume guard (DESIGN §4.3): refuses a changed configuration unless
    /// `force`; records an `override` for a forced resume or raised budgets.
    ///
    /// # Errors
    /// [`AgentError::Guard`] naming every changed field; journal errors.
    pub fn guard(&mut self, force: bool, ev: &mut dyn Events) -> Result<(), AgentError> {
        let run = self.session.id().to_string();
        let Some(recorded) = self.session.state().fingerprint.clone() else {
            return Err(AgentError::NotResumable {
                run,
                reason: "it records no model configuration (was it made by `cairn exec`?)".into(),
            });
        };
        let current = self.fingerprint();
        let forced = match compare(&recorded, &current) {
            Verdict::Same => return Ok(()),
            Verdict::BudgetsRaised(f) => f,
            Verdict::Changed {
                mut needs_force,
                raised,
            } if force => {
                needs_force.extend(raised);
                needs_force
            }
            Verdict::Changed {
                needs_force,
                raised,
            } => {
                return Err(AgentError::Guard {
                    run,
                    changes: needs_force,
                    raised,
                })
            }
        };
        let fields: Vec<_> = forced
            .iter()
            .map(|f| format!("{}: {} -> {}", f.field, f.was, f.now))
            .collect();
        ev.notice(&format!("resuming with {}", fields.join(", ")));
        self.append(RecordBody::Override(Override {
            forced,
            fingerprint: current,
        }))?;
        Ok(())
    }

    /// Works until the run completes, fails, runs out of budget or is stopped;
    /// `text` is a follow-up from the user. Journals the ending.
    ///
    /// # Errors
    /// Only when the record cannot be kept (journal or store failures). Model
    /// and tool failures are journaled and returned as the [`Ending`].
    pub async fn drive(
        &mut self,
        text: Option<String>,
        ev: &mut dyn Events,
    ) -> Result<Ending, AgentError> {
        // Every way back in closes the window the last stop opened.
        if self.session.state().records > 1 {
            self.reconcile(ev).await?;
        }
        if let Some(end) = self.complete_last_turn(ev).await? {
            return Ok(end);
        }
        if let Some(text) = text {
            self.deliver_note()?;
            self.append(RecordBody::User(User::person(text)))?;
        }
        loop {
            if let Some(end) = self.stopped().await? {
                return Ok(end);
            }
            if !self.needs_model() {
                // An answer without tool calls ends the run: completed, unless
                // the model refused or was cut off, which the status shows.
                let state = self.session.state();
                return match convert::unfinished(
                    state.last_stop_reason.as_deref(),
                    state.last_refusal.as_deref(),
                ) {
                    Some(why) => self.end(TerminalReason::Failed, Some(why)).await,
                    None => self.end(TerminalReason::Completed, None).await,
                };
            }
            if let Some(why) = crate::budget::over_budget(
                &self.config.budgets,
                &self.session.state().totals,
                self.session.id().as_str(),
            ) {
                return self.end(TerminalReason::BudgetExhausted, Some(why)).await;
            }
            self.deliver_note()?;
            let turn = self.session.state().next_turn();
            self.boundary_pre(turn, ev).await?;
            // An immediate stop during the capture: the model is not asked.
            if self.stop.level() == StopLevel::Immediate {
                return self.interrupted().await;
            }
            let request = self.request(turn);
            let (response, replay) = match self.call_model(turn, &request, ev).await? {
                Called::Done(r, replay) => (*r, replay),
                Called::Interrupted => {
                    return self
                        .end(
                            TerminalReason::Interrupted,
                            Some(format!(
                                "stopped during model turn {turn}; nothing of it was recorded"
                            )),
                        )
                        .await
                }
                Called::Failed(msg) => return self.end(TerminalReason::Failed, Some(msg)).await,
            };
            // Priced by the model that answered (a dated or smaller model
            // than the one asked for costs what it costs).
            let requested = self.provider.model().to_owned();
            let answered = Some(response.model.as_str())
                .filter(|m| !m.is_empty())
                .unwrap_or(&requested);
            let cost = self.pricing.price_reported(
                self.provider.vendor(),
                answered,
                self.provider.base_url(),
                convert::usage(response.usage),
            );
            if let Some(refusal) = &response.refusal {
                ev.refusal(refusal);
            }
            self.session
                .append(RecordBody::Assistant(convert::assistant_record(
                    response, &requested, cost, replay,
                )))?;
            ev.turn_finished(turn);
            if let Some(end) = self.dispatch_pending(ev).await? {
                return Ok(end);
            }
            self.boundary(Label::Post, turn, ev).await?;
            self.open_turn = None;
        }
    }

    /// Journals `body` (DESIGN §2: written whole, fdatasynced, on a shared
    /// store published) without holding up the runtime's other tasks, where
    /// the runtime can move them to another thread. An append is never
    /// abandoned: the loop goes on only once the record is kept.
    fn append(&mut self, body: RecordBody) -> Result<cairn_journal::Record, AgentError> {
        let session = &mut self.session;
        Ok(blocking(move || session.append(body))?)
    }

    fn deliver_note(&mut self) -> Result<(), AgentError> {
        if let Some(text) = self.note.take() {
            self.append(RecordBody::User(User::note(text)))?;
        }
        Ok(())
    }

    async fn boundary_pre(&mut self, turn: u64, ev: &mut dyn Events) -> Result<(), AgentError> {
        self.open_turn = Some(turn);
        let Some(taken) = self.boundaries.take(Work::Pre(turn), &mut self.stop).await else {
            return Ok(());
        };
        if let Some(t) = self.take(taken, ev)? {
            self.append(RecordBody::Snapshot(Snapshot {
                snapshot: t.snapshot.to_string(),
                label: format!("pre:turn:{turn}"),
            }))?;
        }
        Ok(())
    }

    /// A capture at a turn boundary, journaled; nothing when an immediate
    /// stop abandons it.
    async fn boundary(
        &mut self,
        make: fn(cairn_workspace::NodeIter) -> Label,
        turn: u64,
        ev: &mut dyn Events,
    ) -> Result<(), AgentError> {
        let Some(at) = boundaries::turn(turn) else {
            return Ok(());
        };
        let label = make(at);
        let work = Work::Capture(label.clone(), Ok(None));
        let Some(taken) = self.boundaries.take(work, &mut self.stop).await else {
            return Ok(());
        };
        if let Some(t) = self.take(taken, ev)? {
            self.append(RecordBody::Snapshot(Snapshot {
                snapshot: t.snapshot.to_string(),
                label: label.to_string(),
            }))?;
        }
        Ok(())
    }

    /// Finishes the in-flight batch of the last turn (after a crash, a
    /// suspend, or an interruption), by the rules of DESIGN §4.1.
    async fn complete_last_turn(
        &mut self,
        ev: &mut dyn Events,
    ) -> Result<Option<Ending>, AgentError> {
        let pending: Vec<PendingCall> = self.session.state().pending.clone();
        if pending.is_empty() {
            return Ok(None);
        }
        let turn = self.session.state().totals.turns;
        self.open_turn = Some(turn);
        for p in pending {
            if let Some(end) = self.stopped().await? {
                return Ok(Some(end));
            }
            if !p.started {
                if self.dispatch(&p.call, ev).await? {
                    return self.interrupted().await.map(Some);
                }
            } else if self.rerun_safe(&p) {
                ev.notice(&format!(
                    "{} ({}) was in flight when the last process stopped; it is read-only or idempotent, so it runs again",
                    p.call.name, p.call.id
                ));
                if self.dispatch(&p.call, ev).await? {
                    return self.interrupted().await.map(Some);
                }
            } else {
                let output = format!(
                    "cairn: this {} call was in flight when the previous process stopped. Whether it took effect is unknown, and it was NOT run again. Check the workspace before repeating it.",
                    p.call.name
                );
                ev.notice(&format!(
                    "{} ({}) was in flight when the last process stopped; its outcome is recorded as unknown and it was not re-run",
                    p.call.name, p.call.id
                ));
                self.append(RecordBody::ToolResult(ToolResult {
                    call: p.call.id.clone(),
                    outcome: Outcome::Unknown,
                    output: output.clone(),
                }))?;
                ev.tool_finished(&p.call, Outcome::Unknown, &output);
            }
        }
        self.boundary(Label::Post, turn, ev).await?;
        self.open_turn = None;
        Ok(None)
    }

    /// Whether a call in flight at a crash may run again: by the hints its
    /// MCP tool declared when it was made (journaled in its `tool_start`),
    /// else by the built-in tool's own declaration.
    fn rerun_safe(&self, p: &PendingCall) -> bool {
        match &p.mcp {
            Some(m) => cairn_tools::McpHints {
                read_only: m.hints.read_only,
                destructive: m.hints.destructive,
                idempotent: m.hints.idempotent,
                open_world: m.hints.open_world,
            }
            .rerun_safe(),
            None => self.tools.is_idempotent(&p.call.name),
        }
    }

    /// Dispatches the last turn's calls in order, stopping early on request.
    async fn dispatch_pending(
        &mut self,
        ev: &mut dyn Events,
    ) -> Result<Option<Ending>, AgentError> {
        let pending: Vec<PendingCall> = self.session.state().pending.clone();
        for p in pending {
            if let Some(end) = self.stopped().await? {
                return Ok(Some(end));
            }
            if self.dispatch(&p.call, ev).await? {
                return self.interrupted().await.map(Some);
            }
        }
        Ok(None)
    }

    /// `tool_start`, the call, `tool_result` — after a person's yes when the
    /// approval policy names the call. Returns true when an immediate stop
    /// abandoned the call (its outcome is then recorded as unknown) or the
    /// question about it (nothing is recorded for the call).
    async fn dispatch(&mut self, call: &ToolCall, ev: &mut dyn Events) -> Result<bool, AgentError> {
        // Arguments cut off at the output limit, or not an object, are an
        // input the model never completed: never run, the model is told.
        if !convert::runnable(call) {
            let output =
                convert::not_run_message(call, self.session.state().last_stop_reason.as_deref());
            ev.tool_started(call);
            self.append(RecordBody::ToolResult(ToolResult {
                call: call.id.clone(),
                outcome: Outcome::Error,
                output: output.clone(),
            }))?;
            ev.tool_finished(call, Outcome::Error, &output);
            return Ok(false);
        }
        let info = self.tools.info(&call.name);
        let waits = self.approval.as_ref().is_some_and(|a| {
            a.policy
                .needs(&call.name, info.as_ref().is_some_and(|i| i.read_only))
        });
        if waits {
            match self.ask(call, ev).await? {
                // Nothing is journaled for the call: without a `tool_start`
                // it was never dispatched, and a resume asks again.
                None => return Ok(true),
                Some(Decision::Decline) => {
                    let output = format!(
                        "cairn: the user declined this {} call; it was not run.",
                        call.name
                    );
                    self.append(RecordBody::ToolResult(ToolResult {
                        call: call.id.clone(),
                        outcome: Outcome::Refused,
                        output: output.clone(),
                    }))?;
                    ev.tool_finished(call, Outcome::Refused, &output);
                    return Ok(false);
                }
                Some(Decision::Run) => {}
            }
        }
        self.append(RecordBody::ToolStart(ToolStart {
            call: call.id.clone(),
            name: call.name.clone(),
            mcp: info.and_then(|i| i.mcp).map(|o| McpCall {
                server: o.server,
                tool: o.tool,
                hints: ToolHints {
                    read_only: o.hints.read_only,
                    destructive: o.hints.destructive,
                    idempotent: o.hints.idempotent,
                    open_world: o.hints.open_world,
                },
            }),
        }))?;
        ev.tool_started(call);
        #[cfg(feature = "fault-injection")]
        if self.faults.stall_after_tool_start {
            std::future::pending::<()>().await;
        }
        let (tools, ws, stop) = (&self.tools, &self.workspace, &mut self.stop);
        let out = tokio::select! {
            out = tools.call(ws, &call.name, &call.arguments) => Some(out),
            _ = stop.immediate() => None,
        };
        let (outcome, output, abandoned) = match out {
            Some(o) => {
                let outcome = match o.outcome {
                    cairn_tools::Outcome::Ok => Outcome::Ok,
                    cairn_tools::Outcome::Error => Outcome::Error,
                    cairn_tools::Outcome::Unknown => Outcome::Unknown,
                };
                (outcome, o.output, false)
            }
            None => (
                Outcome::Unknown,
                "cairn: stopped by the user while this call was running; it was killed, and whether it took effect is unknown".to_string(),
                true,
            ),
        };
        self.append(RecordBody::ToolResult(ToolResult {
            call: call.id.clone(),
            outcome,
            output: output.clone(),
        }))?;
        ev.tool_finished(call, outcome, &output);
        Ok(abandoned)
    }

    /// Asks the approver whether `call` may run, inside a `pause:turn:N`
    /// window (N the turn in flight) that `resume:turn:N` closes once the
    /// answer is in: what changed meanwhile was the person's doing, not the
    /// run's. `None` when an immediate stop abandoned the question.
    async fn ask(
        &mut self,
        call: &ToolCall,
        ev: &mut dyn Events,
    ) -> Result<Option<Decision>, AgentError> {
        let turn = self.open_turn.unwrap_or(self.session.state().totals.turns);
        self.boundary(Label::Pause, turn, ev).await?;
        ev.approval_needed(call);
        let preview = cairn_tools::preview(&self.workspace, &call.name, &call.arguments);
        let (store, run) = (self.session.store(), self.session.id());
        let posted = match Posted::post(store, run, call, preview.as_deref()) {
            Ok(p) => Some(p),
            Err(e) => {
                ev.notice(&format!(
                    "cairn: the question cannot be posted for the viewer ({e}); answer it here"
                ));
                None
            }
        };
        let decision = {
            let (approval, stop) = (&mut self.approval, &mut self.stop);
            match approval {
                Some(a) => {
                    let asked = tokio::select! {
                        d = a.approver.ask_previewed(call, preview) => Some((d, false)),
                        d = Posted::answered(posted.as_ref()) => Some((d, true)),
                        _ = stop.immediate() => None,
                    };
                    if let Some((d, true)) = asked {
                        a.approver.answered_elsewhere(call, d);
                    }
                    asked.map(|(d, _)| d)
                }
                None => Some(Decision::Run),
            }
        };
        // Withdrawn however the wait ended (rule 3 of `questions`).
        drop(posted);
        // Closed on every way out, an abandoned question included, so that
        // the `fail:` the interruption writes holds no edit of the person's.
        self.close_window(turn, Gap::Approval(call), ev).await?;
        Ok(decision)
    }

    async fn call_model(
        &mut self,
        turn: u64,
        request: &ModelRequest,
        ev: &mut dyn Events,
    ) -> Result<Called, AgentError> {
        let run = self.session.id().to_string();
        let key = responses::key(
            &run,
            turn,
            self.provider.kind(),
            self.provider.model(),
            self.provider.base_url(),
            request,
        )?;
        if let Some(stored) = responses::get(&self.responses, &key)? {
            ev.turn_started(turn, true);
            ev.text(&stored.text);
            return Ok(Called::Done(Box::new(stored), true));
        }
        ev.turn_started(turn, false);
        let result = {
            let (provider, stop) = (&self.provider, &mut self.stop);
            let mut sink = Sink(ev);
            tokio::select! {
                r = provider.complete(request, &mut sink) => Some(r),
                _ = stop.immediate() => None,
            }
        };
        match result {
            None => Ok(Called::Interrupted),
            Some(Err(e)) => Ok(Called::Failed(e.to_string())),
            Some(Ok(response)) => {
                responses::put(&self.responses, &key, &run, self.provider.kind(), &response)?;
                #[cfg(feature = "fault-injection")]
                if self.faults.crash_after_response_stored {
                    std::process::abort();
                }
                Ok(Called::Done(Box::new(response), false))
            }
        }
    }

    fn request(&self, turn: u64) -> ModelRequest {
        ModelRequest {
            turn,
            system: self.config.system.clone(),
            messages: crate::convert::messages(&self.session.state().conversation),
            tools: crate::convert::tool_specs(&self.tools.infos()),
            max_output_tokens: self.config.max_output_tokens,
            thinking: self.config.thinking.clone(),
        }
    }

    /// The model speaks next when the conversation ends with the user or a
    /// tool result; an answer without tool calls ends the run.
    fn needs_model(&self) -> bool {
        matches!(
            self.session.state().conversation.last(),
            Some(cairn_journal::Entry::User { .. } | cairn_journal::Entry::ToolResult { .. })
        )
    }

    async fn stopped(&mut self) -> Result<Option<Ending>, AgentError> {
        match self.stop.level() {
            StopLevel::None => Ok(None),
            StopLevel::Graceful => self.end(TerminalReason::Suspended, None).await.map(Some),
            StopLevel::Immediate => self.interrupted().await.map(Some),
        }
    }

    async fn interrupted(&mut self) -> Result<Ending, AgentError> {
        self.end(
            TerminalReason::Interrupted,
            Some("stopped at once by the user".into()),
        )
        .await
    }

    async fn end(
        &mut self,
        mut reason: TerminalReason,
        mut detail: Option<String>,
    ) -> Result<Ending, AgentError> {
        // A turn cut short opens a window with `fail:`; a run that stops
        // between turns waits for a human: `pause:`. Closed by `resume:`.
        let mut quiet = crate::events::Silent;
        match self.open_turn.take() {
            Some(n) => self.boundary(Label::Fail, n, &mut quiet).await?,
            None => {
                let last = self.session.state().totals.turns;
                if last > 0 {
                    self.boundary(Label::Pause, last, &mut quiet).await?;
                }
            }
        }
        // A suspend asked to stop at once while its capture ran: the
        // capture was abandoned, and the stop is what the user asked for.
        if reason == TerminalReason::Suspended && self.stop.level() == StopLevel::Immediate {
            reason = TerminalReason::Interrupted;
            detail = Some("stopped at once by the user".into());
        }
        let totals = self.session.state().totals;
        self.append(RecordBody::Terminal(Terminal {
            reason,
            totals,
            detail: detail.clone(),
        }))?;
        Ok(Ending {
            reason,
            detail,
            records: self.session.writer().seq(),
            tail: self.session.writer().tail(),
        })
    }
}

/// Runs `f`, which blocks, handing the runtime's thread over first on a
/// multi-thread runtime (its other tasks, a signal watcher among them, go
/// on meanwhile); on a current-thread runtime, or outside one, it just runs.
fn blocking<R>(f: impl FnOnce() -> R) -> R {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current().map(|h| h.runtime_flavor()) {
        Ok(RuntimeFlavor::MultiThread) => tokio::task::block_in_place(f),
        _ => f(),
    }
}
