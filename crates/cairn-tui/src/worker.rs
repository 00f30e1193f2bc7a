//! The worker: owns the session and runs every command the screen sends,
//! through the same library calls as the CLI commands (the agent loop,
//! `cairn_sessions::{rewind, preview, fork, save_checkpoint, ...}`).
//!
//! Invariants:
//! - at most one session is open here at a time, and it is held (with its
//!   journal lock) from the moment it opens until the worker switches to
//!   another session or stops;
//! - nothing here draws: every outcome goes to the screen as an [`Ev`];
//! - a failure of one command is reported and the worker goes on: the
//!   session stays as the journal says it is.

use std::path::Path;
use std::sync::mpsc::{Receiver, Sender};

use cairn_agent::{
    stop_pair, Agent, AgentError, ApprovePolicy, Approver, Decision, Events, Launcher, NewSession,
    Request,
};
use cairn_journal::{Entry, Outcome, ToolCall};
use cairn_store::RunId;
use cairn_workspace::{NodeRef, RestoreScope, SnapshotId};

use crate::protocol::{Cmd, Ev, Opened, Preview, RewindAction, RewindPoint};
use crate::text::one_line;
use cairn_store::text::with_causes;

/// An error to show, with its causes.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// How the worker opens sessions: with the library's launcher, exactly as
/// `cairn run` and `cairn resume` do (the plan, the provider, the tools,
/// the resume guard).
pub struct Sessions {
    /// The launcher of the store.
    pub launcher: Launcher,
    /// What a new session is made with (its task is the first message).
    pub new: NewSession,
    /// What an opened session is resumed with (overrides of its record).
    pub request: Request,
    /// Override the resume guard, once: a forced resume is recorded once,
    /// and switching back later needs no force.
    pub force: bool,
}

/// Collects the notices of opening a session, to show on the screen.
struct Notices<'a>(&'a mut Vec<String>);

impl Events for Notices<'_> {
    fn text(&mut self, _delta: &str) {}
    fn notice(&mut self, message: &str) {
        self.0.push(message.to_owned());
    }
}

/// Where the worker starts.
#[derive(Clone, Debug)]
pub enum Start {
    /// No session yet: the first message creates one.
    New,
    /// An existing session.
    Open(RunId),
}

mod rewind;

/// The worker's state.
pub struct Worker {
    sessions: Sessions,
    tx: Sender<Ev>,
    agent: Option<Agent>,
    policy: ApprovePolicy,
    /// The last bank a rewind of this TUI took, with its run (a rewind of
    /// code and conversation banks in the parent and moves to a fork).
    last_bank: Option<(RunId, SnapshotId)>,
    points: Vec<RewindPoint>,
    rt: tokio::runtime::Runtime,
}

/// Forwards the loop's progress to the screen.
struct Forward(Sender<Ev>);

impl Events for Forward {
    fn text(&mut self, delta: &str) {
        if !delta.is_empty() {
            let _ = self.0.send(Ev::Text(delta.to_owned()));
        }
    }
    fn text_restart(&mut self) {
        let _ = self.0.send(Ev::TextRestart);
    }
    fn turn_started(&mut self, turn: u64, replay: bool) {
        let _ = self.0.send(Ev::TurnStarted { turn, replay });
    }
    fn refusal(&mut self, text: &str) {
        let _ = self.0.send(Ev::Refusal(text.to_owned()));
    }
    fn turn_finished(&mut self, _turn: u64) {
        let _ = self.0.send(Ev::TurnFinished);
    }
    fn tool_started(&mut self, call: &ToolCall) {
        let _ = self.0.send(Ev::ToolStarted(call.clone()));
    }
    fn tool_finished(&mut self, call: &ToolCall, outcome: Outcome, output: &str) {
        let _ = self.0.send(Ev::ToolFinished {
            call: call.clone(),
            outcome,
            output: output.to_owned(),
        });
    }
    fn notice(&mut self, message: &str) {
        let _ = self.0.send(Ev::Notice(message.to_owned()));
    }
}

/// Asks the person at the screen.
struct AskScreen(Sender<Ev>);

#[async_trait::async_trait]
impl Approver for AskScreen {
    async fn ask(&mut self, call: &ToolCall) -> Decision {
        self.ask_previewed(call, None).await
    }

    async fn ask_previewed(&mut self, call: &ToolCall, preview: Option<String>) -> Decision {
        let (reply, answer) = tokio::sync::oneshot::channel();
        let sent = self.0.send(Ev::Approval {
            call: call.clone(),
            reply,
            preview,
        });
        if sent.is_err() {
            return Decision::Decline;
        }
        // A screen that went away without answering declined.
        answer.await.unwrap_or(Decision::Decline)
    }

    fn answered_elsewhere(&mut self, call: &ToolCall, decision: Decision) {
        let _ = self.0.send(Ev::AnsweredElsewhere {
            call: call.id.clone(),
            decision,
        });
    }
}

impl Worker {
    /// A worker that reports to `tx`.
    ///
    /// # Errors
    /// The async runtime cannot be built.
    pub fn new(
        sessions: Sessions,
        tx: Sender<Ev>,
        policy: ApprovePolicy,
    ) -> std::io::Result<Worker> {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        Ok(Worker {
            sessions,
            tx,
            agent: None,
            policy,
            last_bank: None,
            points: Vec::new(),
            rt,
        })
    }

    fn send(&self, ev: Ev) {
        let _ = self.tx.send(ev);
    }

    fn fail(&self, what: &str, e: &(dyn std::error::Error + 'static)) {
        self.send(Ev::Failed(format!("{what}: {}", with_causes(e))));
    }

    /// Runs commands until [`Cmd::Quit`] or the screen goes away; returns
    /// why the session it was started on did not open, if it did not.
    pub fn run(mut self, start: Start, rx: Receiver<Cmd>) -> Option<AgentError> {
        let _guard = self.rt.enter();
        if let Start::Open(id) = start {
            if let Err(e) = self.switch(&id, None) {
                self.send(Ev::OpenFailed);
                return Some(e);
            }
        }
        for cmd in rx {
            match cmd {
                Cmd::Quit => break,
                cmd => self.handle(cmd),
            }
        }
        self.agent = None;
        self.send(Ev::Closed);
        None
    }

    fn handle(&mut self, cmd: Cmd) {
        match cmd {
            Cmd::Send { text, stop } => self.drive(Some(text), stop),
            Cmd::Continue { stop } => self.drive(None, stop),
            Cmd::Fork => self.fork_here(),
            Cmd::Tree => self.tree(),
            Cmd::Diff(n) => self.diff(n),
            Cmd::CheckpointSave => self.checkpoint_save(),
            Cmd::CheckpointList => self.checkpoint_list(),
            Cmd::CheckpointRestore(id) => self.checkpoint_restore(&id),
            Cmd::RewindPoints => match self.rewind_points() {
                Ok(points) => {
                    self.points = points.clone();
                    self.send(Ev::Points(points));
                }
                Err(e) => self.fail("rewind", e.as_ref()),
            },
            Cmd::Preview { point, action } => self.preview(point, action),
            Cmd::Rewind { point, action } => self.rewind(point, action),
            Cmd::Undo => self.undo(),
            Cmd::Sessions => self.sessions(),
            // An id, a unique prefix, a name or @last, as on the command line.
            Cmd::Resume(id) => {
                match cairn_sessions::resolve_session(
                    self.sessions.launcher.store(),
                    &id,
                    &self.repository(),
                ) {
                    Ok(id) => drop(self.switch(&id, None)),
                    Err(e) => self.fail(&format!("resume {id}"), &e),
                }
            }
            Cmd::Quit => {}
        }
    }

    /// Closes the session held (releasing its lock) and opens `id`; on
    /// failure the screen is told and the reason returned.
    fn switch(&mut self, id: &RunId, prefill: Option<String>) -> Result<(), AgentError> {
        self.agent = None;
        let mut notices = Vec::new();
        // The stop is replaced before every stretch of work.
        let (_, stop) = stop_pair();
        let s = &mut self.sessions;
        let opened = s
            .launcher
            .open(id, &s.request, s.force, stop, &mut Notices(&mut notices));
        if opened.is_ok() {
            s.force = false;
        }
        match opened {
            Ok(agent) => {
                let agent = agent.with_approval(self.policy, Box::new(AskScreen(self.tx.clone())));
                self.announce(&agent, prefill);
                for n in notices {
                    self.send(Ev::Notice(n));
                }
                self.agent = Some(agent);
                self.count_snapshots();
                Ok(())
            }
            Err(e) => {
                self.fail(&format!("opening session {id}"), &e);
                Err(e)
            }
        }
    }

    fn announce(&self, agent: &Agent, prefill: Option<String>) {
        let s = agent.session().state();
        // The model speaks next, or calls are unresolved: the session
        // stopped mid-turn (a crash, a suspend, an interruption).
        let cut_short = !s.pending.is_empty()
            || matches!(
                s.conversation.last(),
                Some(Entry::User { .. } | Entry::ToolResult { .. })
            );
        self.send(Ev::Opened(Box::new(Opened {
            id: agent.session().id().to_string(),
            name: s.name.clone(),
            model: s
                .fingerprint
                .as_ref()
                .map(|f| f.model.clone())
                .unwrap_or_default(),
            workspace: s.workspace.clone(),
            conversation: s.conversation.clone(),
            pending: s.pending.clone(),
            totals: s.totals,
            cut_short,
            prefill,
        })));
    }

    fn count_snapshots(&self) {
        let Some(agent) = &self.agent else { return };
        let s = agent.session();
        let n = self
            .sessions
            .launcher
            .tracker(s.id(), Path::new(&s.state().workspace))
            .ok()
            .and_then(|t| t.list_snapshots().ok())
            .map(|l| l.len());
        if let Some(n) = n {
            self.send(Ev::Snapshots(n));
        }
    }

    fn drive(&mut self, text: Option<String>, stop: cairn_agent::Stop) {
        if self.agent.is_none() {
            let Some(first) = text.as_deref() else {
                return;
            };
            let (_, first_stop) = stop_pair();
            let created = self
                .sessions
                .launcher
                .create(&self.sessions.new, first, first_stop);
            match created {
                Ok(agent) => {
                    let agent =
                        agent.with_approval(self.policy, Box::new(AskScreen(self.tx.clone())));
                    self.announce(&agent, None);
                    self.agent = Some(agent);
                }
                Err(e) => {
                    self.fail("starting the session", &e);
                    return;
                }
            }
        }
        let Some(agent) = self.agent.as_mut() else {
            return;
        };
        agent.set_stop(stop);
        let mut forward = Forward(self.tx.clone());
        let result = self.rt.block_on(agent.drive(text, &mut forward));
        let totals = agent.session().state().totals;
        match result {
            Ok(ending) => self.send(Ev::Ended {
                reason: ending.reason,
                detail: ending.detail,
                totals,
            }),
            Err(e) => {
                self.fail("the session could not be kept", &e);
                self.send(Ev::Ended {
                    reason: cairn_journal::TerminalReason::Failed,
                    detail: Some(with_causes(&e)),
                    totals,
                });
            }
        }
        self.count_snapshots();
    }

    fn current(&self) -> Option<(RunId, String)> {
        self.agent.as_ref().map(|a| {
            (
                a.session().id().clone(),
                a.session().state().workspace.clone(),
            )
        })
    }

    fn no_session(&self) {
        self.send(Ev::Failed(
            "there is no session yet: send a message to start one".into(),
        ));
    }

    fn fork_here(&mut self) {
        let Some((id, _)) = self.current() else {
            return self.no_session();
        };
        // The parent is released first: a fork only reads it.
        self.agent = None;
        let store = self.sessions.launcher.store().clone();
        // The fork's writer (its lock) is let go before the fork is opened.
        let forked = cairn_sessions::fork(&store, &id, None, None).map(|(child, _, _)| child);
        match forked {
            Ok(child) => {
                if self.switch(&child, None).is_err() {
                    return;
                }
                self.send(Ev::Notice(format!(
                    "forked {id} as {child}; this screen now works in the fork (the parent is unchanged: cairn resume {id})"
                )));
            }
            Err(e) => {
                self.fail("fork", &e);
                let _ = self.switch(&id, None);
            }
        }
    }

    fn tree(&self) {
        let Some((id, _)) = self.current() else {
            return self.no_session();
        };
        let store = self.sessions.launcher.store();
        let all = match cairn_sessions::list(store) {
            Ok(l) => l,
            Err(e) => return self.fail("tree", &e),
        };
        let by_id: std::collections::HashMap<&str, &cairn_sessions::Summary> =
            all.iter().map(|s| (s.id.as_str(), s)).collect();
        // Up to the root of the lineage.
        let mut root = id.to_string();
        let mut guard = 0;
        while let Some(p) = by_id.get(root.as_str()).and_then(|s| s.parent.as_ref()) {
            root = p.id.clone();
            guard += 1;
            if guard > cairn_sessions::MAX_DEPTH {
                break;
            }
        }
        let mut lines = Vec::new();
        let mut stack = vec![(root, 0usize, None::<u64>)];
        while let Some((node, depth, at)) = stack.pop() {
            let s = by_id.get(node.as_str());
            let name = s.and_then(|s| s.name.clone()).unwrap_or_default();
            let status = s.map(|s| s.status.clone()).unwrap_or_else(|| "?".into());
            let here = if node == id.as_str() {
                "  ← this session"
            } else {
                ""
            };
            let fork = at
                .map(|a| format!(" (forked at seq {a})"))
                .unwrap_or_default();
            let indent = if depth == 0 {
                String::new()
            } else {
                format!("{}└─ ", "   ".repeat(depth - 1))
            };
            lines.push(format!(
                "{indent}{node} {status}{fork} {}{here}",
                one_line(&name, 40)
            ));
            let mut children: Vec<_> = all
                .iter()
                .filter(|c| c.parent.as_ref().is_some_and(|p| p.id == node))
                .collect();
            children.sort_by(|a, b| b.created.cmp(&a.created));
            for c in children {
                stack.push((c.id.clone(), depth + 1, c.parent.as_ref().map(|p| p.seq)));
            }
        }
        self.send(Ev::Info {
            title: "lineage".into(),
            lines,
        });
    }

    fn checkpoint_save(&mut self) {
        let Some((id, root)) = self.current() else {
            return self.no_session();
        };
        let result = (|| -> Result<cairn_checkpoint::SaveReport, BoxError> {
            let tracker = self.sessions.launcher.tracker(&id, Path::new(&root))?;
            let agent = self.agent.as_mut().ok_or("no session")?;
            Ok(cairn_sessions::save_checkpoint(
                agent.session_mut(),
                Some(&tracker),
                Vec::new(),
                &cairn_workspace::NoProgress,
            )?)
        })();
        match result {
            Ok(r) => self.send(Ev::Info {
                title: format!("checkpoint {} saved", r.id),
                lines: vec![format!(
                    "at seq {}: {} logical bytes, {} new bytes stored; /checkpoint restore {} puts it back",
                    r.seq, r.logical_bytes, r.stored_bytes, r.id
                )],
            }),
            Err(e) => self.fail("checkpoint save", e.as_ref()),
        }
        self.count_snapshots();
    }

    fn checkpoint_list(&self) {
        let Some((id, _)) = self.current() else {
            return self.no_session();
        };
        match cairn_checkpoint::list(self.sessions.launcher.store(), &id) {
            Ok(list) => {
                let mut lines: Vec<String> = list
                    .iter()
                    .map(|c| {
                        format!(
                            "{}  {}  seq {}  {} bytes",
                            c.id,
                            c.created.get(..19).unwrap_or(&c.created).replace('T', " "),
                            c.seq,
                            c.logical_bytes
                        )
                    })
                    .collect();
                if lines.is_empty() {
                    lines.push("no checkpoints yet: /checkpoint save".into());
                }
                self.send(Ev::Info {
                    title: "checkpoints".into(),
                    lines,
                });
            }
            Err(e) => self.fail("checkpoint list", &e),
        }
    }

    fn checkpoint_restore(&mut self, cp: &str) {
        let Some((id, root)) = self.current() else {
            return self.no_session();
        };
        let result = (|| -> Result<cairn_checkpoint::RestoreReport, BoxError> {
            let cpid = cairn_sessions::resolve_checkpoint(self.sessions.launcher.store(), cp)?;
            let cp = cairn_checkpoint::show(self.sessions.launcher.store(), &cpid)?;
            if cp.run_id()? != id {
                return Err(format!(
                    "checkpoint {cpid} belongs to session {}, not this one",
                    cp.run
                )
                .into());
            }
            let tracker = self.sessions.launcher.tracker(&id, Path::new(&root))?;
            let agent = self.agent.as_mut().ok_or("no session")?;
            Ok(cairn_sessions::restore_checkpoint(
                agent.session_mut(),
                &cpid,
                &tracker,
                &cairn_workspace::NoProgress,
            )?)
        })();
        match result {
            Ok(r) => {
                let mut lines = Vec::new();
                if let Some(w) = &r.workspace {
                    lines.push(format!(
                        "workspace: {} written, {} deleted",
                        w.written.len(),
                        w.deleted.len()
                    ));
                    self.last_bank = Some((id.clone(), w.bank.snapshot.clone()));
                    lines.push(format!(
                        "the state before is banked as {}; /undo puts it back",
                        w.bank.label
                    ));
                }
                self.send(Ev::Info {
                    title: format!("checkpoint {cp} restored"),
                    lines,
                });
            }
            Err(e) => self.fail("checkpoint restore", e.as_ref()),
        }
        self.count_snapshots();
    }

    /// The repository this screen works in: the open session's, else the
    /// current directory's.
    fn repository(&self) -> std::path::PathBuf {
        let here = self
            .current()
            .map(|(_, root)| std::path::PathBuf::from(root))
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_default();
        cairn_sessions::repository_root(&here)
    }

    fn sessions(&self) {
        let store = self.sessions.launcher.store();
        let repo = self.repository();
        match cairn_sessions::list(store) {
            Ok(list) => {
                let mut list: Vec<_> = list
                    .into_iter()
                    .filter(|s| cairn_sessions::in_repository(&s.workspace, &repo))
                    .collect();
                list.sort_by(|a, b| b.updated.cmp(&a.updated));
                self.send(Ev::Sessions(list));
            }
            Err(e) => self.fail("sessions", &e),
        }
    }
}

/// One line of a diff stat: `path  +3 -1`.
pub fn stat_line(c: &cairn_workspace::FileChange) -> String {
    use cairn_workspace::ChangeKind;
    let what = match c.change {
        ChangeKind::Added => "created",
        ChangeKind::Modified => "changed",
        ChangeKind::Deleted => "deleted",
        ChangeKind::Mode => "mode",
    };
    if c.binary {
        format!("{}  {what} (binary)", c.path)
    } else if c.change == ChangeKind::Mode {
        format!("{}  {what}", c.path)
    } else {
        format!("{}  {what} +{} -{}", c.path, c.added, c.removed)
    }
}
