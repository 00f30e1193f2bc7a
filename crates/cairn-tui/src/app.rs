//! The screen's state and what keys do to it: pure, so the rules of §11
//! (focus on "now", Esc Esc, Ctrl-C once and twice, Ctrl-D) are tested
//! without a terminal.
//!
//! Invariants:
//! - [`App::key`] and [`App::event`] never block and never do IO: they
//!   change the state and return the [`Cmd`]s for the worker;
//! - while a stretch of work runs, only commands that cannot race it are
//!   sent (stop, quit, cost, help); the rest are refused with a reason;
//! - a stray Enter in the rewind picker does nothing: focus starts on
//!   "now".

use std::time::{Duration, Instant};

use cairn_agent::{stop_pair, Decision, StopHandle, StopLevel};
use cairn_journal::{TerminalReason, ToolCall, Totals};
use cairn_sessions::Summary;
use crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use crate::composer::Composer;
use crate::protocol::{Cmd, Ev, Opened, Preview, RewindAction, RewindPoint};
use crate::slash::Slash;
use crate::transcript::{cells_of, cost_lines, Cell};

/// Two Escs closer than this open the rewind picker.
const DOUBLE_ESC: Duration = Duration::from_millis(600);

/// What the session is doing.
#[derive(Clone, Debug, PartialEq)]
pub enum Activity {
    /// No session yet.
    New,
    /// Opening a session.
    Opening,
    /// Waiting for the user.
    Idle,
    /// Stopped mid-turn; Enter continues.
    CutShort,
    /// The model or a tool is working.
    Working,
    /// Finishing the step in flight, then suspending.
    Suspending,
    /// Stopping at once.
    Interrupting,
    /// A tool call waits for a yes or no.
    Approving,
    /// A command runs in the worker (rewind, fork, checkpoint ...).
    Busy(String),
}

/// What fills the transcript area.
#[derive(Debug)]
pub enum Mode {
    /// The transcript.
    Transcript,
    /// The help screen.
    Help,
    /// The rewind picker; `selected == points.len()` is "now".
    Rewind {
        /// The points.
        points: Vec<RewindPoint>,
        /// Focus.
        selected: usize,
    },
    /// The actions for one point.
    Actions {
        /// The points.
        points: Vec<RewindPoint>,
        /// The point chosen.
        point: usize,
        /// Focus: 0..3 actions, 3 cancel.
        selected: usize,
    },
    /// The confirm screen.
    Confirm {
        /// The point.
        point: RewindPoint,
        /// Its index.
        index: usize,
        /// The action.
        action: RewindAction,
        /// What it does.
        preview: Preview,
        /// Lines scrolled.
        scroll: usize,
    },
    /// The session picker.
    Sessions {
        /// The sessions.
        list: Vec<Summary>,
        /// Focus.
        selected: usize,
    },
}

/// The screen's whole state.
#[derive(Debug)]
pub struct App {
    /// The transcript.
    pub cells: Vec<Cell>,
    /// The composer.
    pub composer: Composer,
    /// What fills the transcript area.
    pub mode: Mode,
    /// What the session is doing.
    pub activity: Activity,
    /// Session id, once there is one.
    pub session: Option<String>,
    /// Session name.
    pub name: Option<String>,
    /// Model spec.
    pub model: String,
    /// Workspace root.
    pub workspace: String,
    /// Totals.
    pub totals: Totals,
    /// Snapshots of the session's workspace.
    pub snapshots: Option<usize>,
    /// Lines scrolled up from the bottom of the transcript.
    pub scroll: usize,
    /// Tool output shown whole, not folded.
    pub expand: bool,
    /// Colours allowed (NO_COLOR unset).
    pub color: bool,
    /// The call waiting for approval, and where its answer goes.
    pub approval: Option<(ToolCall, tokio::sync::oneshot::Sender<Decision>)>,
    /// The diff the call waiting for approval would make, when it writes a file.
    pub approval_preview: Option<String>,
    /// Set when the screen should close.
    pub quit: bool,
    /// Quit once the work in flight has stopped.
    quit_after_stop: bool,
    stop: Option<StopHandle>,
    last_esc: Option<Instant>,
    hint: Option<String>,
}

impl App {
    /// A screen for a session in `workspace`, with the model `model`.
    pub fn new(workspace: &str, model: &str, color: bool) -> App {
        App {
            cells: Vec::new(),
            composer: Composer::default(),
            mode: Mode::Transcript,
            activity: Activity::New,
            session: None,
            name: None,
            model: model.to_owned(),
            workspace: workspace.to_owned(),
            totals: Totals::default(),
            snapshots: None,
            scroll: 0,
            expand: false,
            color,
            approval: None,
            approval_preview: None,
            quit: false,
            quit_after_stop: false,
            stop: None,
            last_esc: None,
            hint: None,
        }
    }

    /// The one-line hint above the composer, if any.
    pub fn hint(&self) -> Option<&str> {
        self.hint.as_deref()
    }

    /// True while a stretch of work runs.
    pub fn working(&self) -> bool {
        matches!(
            self.activity,
            Activity::Working | Activity::Suspending | Activity::Interrupting | Activity::Approving
        )
    }

    /// Takes in something from the worker, the terminal or a signal.
    pub fn event(&mut self, ev: Ev) -> Vec<Cmd> {
        match ev {
            Ev::Input(Event::Key(k)) => return self.key(k),
            Ev::Input(Event::Paste(s)) => {
                if matches!(self.mode, Mode::Transcript) && self.approval.is_none() {
                    self.composer.insert(&s);
                }
            }
            Ev::Input(_) => {}
            Ev::Signal(signal_hook::consts::SIGINT) => return self.ctrl_c(),
            Ev::InputClosed | Ev::Signal(_) => return self.hang_up(),
            Ev::Opened(o) => self.opened(*o),
            Ev::Text(t) => match self.cells.last_mut() {
                Some(Cell::Assistant {
                    text,
                    streaming: true,
                }) => text.push_str(&t),
                _ => self.cells.push(Cell::Assistant {
                    text: t,
                    streaming: true,
                }),
            },
            Ev::TextRestart => {
                if let Some(Cell::Assistant {
                    streaming: true, ..
                }) = self.cells.last()
                {
                    self.cells.pop();
                }
                self.cells
                    .push(Cell::Notice("the stream broke; retrying".into()));
            }
            Ev::TurnStarted { turn, replay } => {
                self.end_stream();
                if replay {
                    self.cells.push(Cell::Notice(format!(
                        "turn {turn}: served from the response store, not bought again"
                    )));
                }
            }
            Ev::Refusal(t) => self
                .cells
                .push(Cell::Notice(format!("the model refused: {t}"))),
            Ev::TurnFinished => self.end_stream(),
            Ev::ToolStarted(call) => {
                self.end_stream();
                self.tool_cell(&call);
            }
            Ev::ToolFinished {
                call,
                outcome,
                output,
            } => {
                if !self
                    .cells
                    .iter()
                    .rev()
                    .any(|c| matches!(c, Cell::Tool { id, .. } if *id == call.id))
                {
                    self.tool_cell(&call);
                }
                for c in self.cells.iter_mut().rev() {
                    if let Cell::Tool {
                        id,
                        outcome: o,
                        output: out,
                        ..
                    } = c
                    {
                        if *id == call.id {
                            *o = Some(outcome);
                            *out = output;
                            break;
                        }
                    }
                }
            }
            Ev::Approval {
                call,
                reply,
                preview,
            } => {
                self.end_stream();
                self.activity = Activity::Approving;
                self.approval = Some((call, reply));
                self.approval_preview = preview;
                self.mode = Mode::Transcript;
            }
            Ev::Notice(n) => self.cells.push(Cell::Notice(n)),
            Ev::Ended {
                reason,
                detail,
                totals,
            } => {
                self.end_stream();
                self.totals = totals;
                self.stop = None;
                self.approval = None;
                self.activity = match reason {
                    TerminalReason::Completed => Activity::Idle,
                    _ => Activity::CutShort,
                };
                let why = detail.map(|d| format!(": {d}")).unwrap_or_default();
                match reason {
                    TerminalReason::Completed => {}
                    TerminalReason::Suspended => self.cells.push(Cell::Notice(format!(
                        "suspended after the step in flight{why}; Enter continues, or type a message"
                    ))),
                    other => self.cells.push(Cell::Notice(format!(
                        "{}{why}; Enter continues, or type a message",
                        other.as_str()
                    ))),
                }
                if self.quit_after_stop {
                    self.quit = true;
                    return vec![Cmd::Quit];
                }
            }
            Ev::Snapshots(n) => self.snapshots = Some(n),
            Ev::Info { title, lines } => {
                self.idle_again();
                self.cells.push(Cell::Info { title, lines });
                self.scroll = 0;
            }
            Ev::Points(points) => {
                self.idle_again();
                let selected = points.len();
                self.mode = Mode::Rewind { points, selected };
            }
            Ev::Preview {
                point,
                action,
                preview,
            } => {
                self.idle_again();
                if let Mode::Actions { points, .. } = &self.mode {
                    if let Some(p) = points.get(point).cloned() {
                        self.mode = Mode::Confirm {
                            point: p,
                            index: point,
                            action,
                            preview,
                            scroll: 0,
                        };
                    }
                }
            }
            Ev::Sessions(list) => {
                self.idle_again();
                self.mode = Mode::Sessions { list, selected: 0 };
            }
            Ev::Failed(e) => {
                self.idle_again();
                self.mode = Mode::Transcript;
                self.cells.push(Cell::Error(e));
            }
            Ev::OpenFailed => {
                self.quit = true;
                return vec![Cmd::Quit];
            }
            Ev::Closed => self.quit = true,
        }
        Vec::new()
    }

    fn idle_again(&mut self) {
        if matches!(self.activity, Activity::Busy(_) | Activity::Opening) {
            self.activity = if self.session.is_some() {
                Activity::Idle
            } else {
                Activity::New
            };
        }
    }

    fn opened(&mut self, o: Opened) {
        // A new session opened by the first message keeps the screen as it
        // is (that message is on it); any other replaces the transcript.
        if !matches!(self.activity, Activity::Working) {
            self.cells = cells_of(&o.conversation, &o.pending);
        }
        self.session = Some(o.id);
        self.name = o.name;
        if !o.model.is_empty() {
            self.model = o.model;
        }
        self.workspace = o.workspace;
        self.totals = o.totals;
        self.scroll = 0;
        self.mode = Mode::Transcript;
        if matches!(self.activity, Activity::Working) {
            // A new session opened by the first message: the work goes on.
            return;
        }
        self.activity = if o.cut_short {
            self.cells.push(Cell::Notice(
                "this session stopped mid-turn: Enter continues it (calls that were in flight are resolved by the rules of resume), or type a message".into(),
            ));
            Activity::CutShort
        } else {
            Activity::Idle
        };
        if let Some(p) = o.prefill {
            self.composer.set(&p);
        }
    }

    fn end_stream(&mut self) {
        if let Some(Cell::Assistant { streaming, .. }) = self.cells.last_mut() {
            *streaming = false;
        }
    }

    fn tool_cell(&mut self, call: &ToolCall) {
        self.cells.push(Cell::Tool {
            id: call.id.clone(),
            name: call.name.clone(),
            args: call.arguments.to_string(),
            outcome: None,
            output: String::new(),
        });
    }

    /// SIGHUP, SIGTERM, or a terminal that went away: suspend as Ctrl-C
    /// once does, then close.
    fn hang_up(&mut self) -> Vec<Cmd> {
        if let Some((_, reply)) = self.approval.take() {
            let _ = reply.send(Decision::Decline);
        }
        if self.working() {
            if let Some(h) = &self.stop {
                if h.level() == StopLevel::None {
                    h.escalate();
                }
            }
            self.activity = Activity::Suspending;
            self.quit_after_stop = true;
            Vec::new()
        } else {
            self.quit = true;
            vec![Cmd::Quit]
        }
    }

    /// A key.
    pub fn key(&mut self, k: KeyEvent) -> Vec<Cmd> {
        if k.kind == KeyEventKind::Release {
            return Vec::new();
        }
        let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
        self.hint = None;
        if ctrl && k.code == KeyCode::Char('c') {
            return self.ctrl_c();
        }
        if self.approval.is_some() {
            return self.approval_key(k);
        }
        match &mut self.mode {
            Mode::Transcript => self.composer_key(k),
            Mode::Help => {
                self.mode = Mode::Transcript;
                Vec::new()
            }
            Mode::Rewind { points, selected } => match k.code {
                KeyCode::Up | KeyCode::Char('k') => {
                    *selected = selected.saturating_sub(1);
                    Vec::new()
                }
                KeyCode::Down | KeyCode::Char('j') => {
                    *selected = (*selected + 1).min(points.len());
                    Vec::new()
                }
                KeyCode::Enter if *selected == points.len() => {
                    self.mode = Mode::Transcript;
                    Vec::new()
                }
                KeyCode::Enter => {
                    let points = std::mem::take(points);
                    let point = *selected;
                    self.mode = Mode::Actions {
                        points,
                        point,
                        selected: 0,
                    };
                    Vec::new()
                }
                KeyCode::Esc | KeyCode::Char('q') => {
                    self.mode = Mode::Transcript;
                    Vec::new()
                }
                _ => Vec::new(),
            },
            Mode::Actions {
                points,
                point,
                selected,
            } => match k.code {
                KeyCode::Up | KeyCode::Char('k') => {
                    *selected = selected.saturating_sub(1);
                    Vec::new()
                }
                KeyCode::Down | KeyCode::Char('j') => {
                    *selected = (*selected + 1).min(3);
                    Vec::new()
                }
                KeyCode::Enter => {
                    let action = match *selected {
                        0 => RewindAction::Both,
                        1 => RewindAction::Conversation,
                        2 => RewindAction::Code,
                        _ => {
                            self.mode = Mode::Transcript;
                            return Vec::new();
                        }
                    };
                    let point = *point;
                    if points.get(point).is_some_and(|p| p.turn.is_none()) && action.touches_files()
                    {
                        self.hint = Some(
                            "no model turn ran after that message: only the conversation can go back".into(),
                        );
                        return Vec::new();
                    }
                    if action.touches_files() {
                        self.activity = Activity::Busy("previewing the rewind".into());
                        vec![Cmd::Preview { point, action }]
                    } else {
                        self.mode = Mode::Transcript;
                        self.activity = Activity::Busy("forking".into());
                        vec![Cmd::Rewind { point, action }]
                    }
                }
                KeyCode::Esc => {
                    let points = std::mem::take(points);
                    let selected = *point;
                    self.mode = Mode::Rewind { points, selected };
                    Vec::new()
                }
                _ => Vec::new(),
            },
            Mode::Confirm {
                index,
                action,
                scroll,
                ..
            } => match k.code {
                KeyCode::Up | KeyCode::Char('k') => {
                    *scroll = scroll.saturating_sub(1);
                    Vec::new()
                }
                KeyCode::Down | KeyCode::Char('j') => {
                    *scroll = scroll.saturating_add(1);
                    Vec::new()
                }
                KeyCode::Enter | KeyCode::Char('y') => {
                    let (point, action) = (*index, *action);
                    self.mode = Mode::Transcript;
                    self.activity = Activity::Busy("rewinding".into());
                    vec![Cmd::Rewind { point, action }]
                }
                KeyCode::Esc | KeyCode::Char('n') | KeyCode::Char('q') => {
                    self.mode = Mode::Transcript;
                    self.cells.push(Cell::Notice(
                        "rewind cancelled: nothing was changed (the bank it took is kept)".into(),
                    ));
                    Vec::new()
                }
                _ => Vec::new(),
            },
            Mode::Sessions { list, selected } => match k.code {
                KeyCode::Up | KeyCode::Char('k') => {
                    *selected = selected.saturating_sub(1);
                    Vec::new()
                }
                KeyCode::Down | KeyCode::Char('j') => {
                    *selected = (*selected + 1).min(list.len().saturating_sub(1));
                    Vec::new()
                }
                KeyCode::Enter => {
                    let Some(s) = list.get(*selected) else {
                        self.mode = Mode::Transcript;
                        return Vec::new();
                    };
                    let id = s.id.clone();
                    self.mode = Mode::Transcript;
                    self.activity = Activity::Opening;
                    vec![Cmd::Resume(id)]
                }
                KeyCode::Esc | KeyCode::Char('q') => {
                    self.mode = Mode::Transcript;
                    Vec::new()
                }
                _ => Vec::new(),
            },
        }
    }

    fn approval_key(&mut self, k: KeyEvent) -> Vec<Cmd> {
        let decision = match k.code {
            KeyCode::Char('y') | KeyCode::Char('Y') => Decision::Run,
            KeyCode::Char('n') | KeyCode::Char('N') | KeyCode::Esc => Decision::Decline,
            _ => {
                self.hint = Some("y runs the call, n declines it (the model is told)".into());
                return Vec::new();
            }
        };
        if let Some((_, reply)) = self.approval.take() {
            let _ = reply.send(decision);
        }
        self.activity = Activity::Working;
        Vec::new()
    }

    /// Ctrl-C: once suspends after the step in flight, twice stops at once;
    /// with nothing running it clears the composer.
    fn ctrl_c(&mut self) -> Vec<Cmd> {
        if self.working() {
            let Some(h) = &self.stop else {
                return Vec::new();
            };
            match h.escalate() {
                StopLevel::Graceful => {
                    self.activity = Activity::Suspending;
                    self.hint = Some(
                        "suspending after the step in flight; Ctrl-C again stops at once".into(),
                    );
                }
                _ => {
                    self.activity = Activity::Interrupting;
                    if let Some((_, reply)) = self.approval.take() {
                        let _ = reply.send(Decision::Decline);
                    }
                }
            }
            return Vec::new();
        }
        if !matches!(self.mode, Mode::Transcript) {
            self.mode = Mode::Transcript;
        } else if !self.composer.is_empty() {
            self.composer.clear();
        } else {
            self.hint = Some("Ctrl-D quits (the session stays resumable)".into());
        }
        Vec::new()
    }

    fn composer_key(&mut self, k: KeyEvent) -> Vec<Cmd> {
        let ctrl = k.modifiers.contains(KeyModifiers::CONTROL);
        let alt = k.modifiers.contains(KeyModifiers::ALT);
        if k.code != KeyCode::Esc {
            self.last_esc = None;
        }
        match k.code {
            KeyCode::Char('d') if ctrl => {
                if self.composer.is_empty() {
                    return self.quit_cmds();
                }
                self.composer.delete();
            }
            KeyCode::Char('j') if ctrl => self.composer.insert("\n"),
            KeyCode::Char('o') if ctrl => self.expand = !self.expand,
            KeyCode::Char('w') if ctrl => self.composer.delete_word(),
            KeyCode::Char('u') if ctrl => self.composer.clear(),
            KeyCode::Char('a') if ctrl => self.composer.home(),
            KeyCode::Char('e') if ctrl => self.composer.end(),
            KeyCode::Char(c) if !ctrl => {
                let mut b = [0u8; 4];
                self.composer.insert(c.encode_utf8(&mut b));
            }
            KeyCode::Enter if alt || k.modifiers.contains(KeyModifiers::SHIFT) => {
                self.composer.insert("\n")
            }
            KeyCode::Enter => {
                // A line ending in a backslash continues on the next.
                if self.composer.text().ends_with('\\')
                    && self.composer.cursor() == self.composer.text().len()
                {
                    self.composer.backspace();
                    self.composer.insert("\n");
                    return Vec::new();
                }
                return self.submit();
            }
            KeyCode::Backspace => self.composer.backspace(),
            KeyCode::Delete => self.composer.delete(),
            KeyCode::Left => self.composer.left(),
            KeyCode::Right => self.composer.right(),
            KeyCode::Home => self.composer.home(),
            KeyCode::End => self.composer.end(),
            KeyCode::Up => {
                self.composer.up();
            }
            KeyCode::Down => {
                self.composer.down();
            }
            KeyCode::PageUp => self.scroll = self.scroll.saturating_add(10),
            KeyCode::PageDown => self.scroll = self.scroll.saturating_sub(10),
            KeyCode::Tab => self.composer.insert("\t"),
            KeyCode::Esc => {
                if !self.composer.is_empty() {
                    self.last_esc = None;
                    return Vec::new();
                }
                let now = Instant::now();
                match self.last_esc {
                    Some(t) if now.duration_since(t) < DOUBLE_ESC => {
                        self.last_esc = None;
                        return self.command("/rewind");
                    }
                    _ => {
                        self.last_esc = Some(now);
                        self.hint = Some("Esc again opens /rewind".into());
                    }
                }
            }
            _ => {}
        }
        Vec::new()
    }

    fn quit_cmds(&mut self) -> Vec<Cmd> {
        if self.working() {
            if let Some(h) = &self.stop {
                if h.level() == StopLevel::None {
                    h.escalate();
                }
            }
            self.activity = Activity::Suspending;
            self.quit_after_stop = true;
            self.hint = Some("quitting once the step in flight is done".into());
            return Vec::new();
        }
        self.quit = true;
        vec![Cmd::Quit]
    }

    fn submit(&mut self) -> Vec<Cmd> {
        let text = self.composer.text().trim().to_owned();
        if text.starts_with('/') {
            self.composer.take();
            return self.command(&text);
        }
        if self.working() {
            self.hint = Some("the session is working: wait for it, or /pause".into());
            return Vec::new();
        }
        if matches!(self.activity, Activity::Busy(_) | Activity::Opening) {
            self.hint = Some("wait for the command to finish".into());
            return Vec::new();
        }
        if text.is_empty() {
            if self.activity == Activity::CutShort {
                let (handle, stop) = stop_pair();
                self.stop = Some(handle);
                self.activity = Activity::Working;
                return vec![Cmd::Continue { stop }];
            }
            return Vec::new();
        }
        let text = self.composer.take();
        self.cells.push(Cell::User(text.clone()));
        self.scroll = 0;
        let (handle, stop) = stop_pair();
        self.stop = Some(handle);
        self.activity = Activity::Working;
        vec![Cmd::Send { text, stop }]
    }

    /// A slash command ([`crate::slash`]).
    pub fn command(&mut self, line: &str) -> Vec<Cmd> {
        let slash = match crate::slash::parse(line) {
            Ok(s) => s,
            Err(e) => {
                self.cells.push(Cell::Error(e));
                return Vec::new();
            }
        };
        let busy = self.working() || matches!(self.activity, Activity::Busy(_) | Activity::Opening);
        if busy && !slash.runs_while_working() {
            let name = line.split_whitespace().next().unwrap_or("");
            self.hint = Some(format!(
                "{name} waits until the session is not working (/pause suspends it)"
            ));
            return Vec::new();
        }
        if let Some(what) = slash.busy_with() {
            self.activity = Activity::Busy(what.into());
        }
        match slash {
            Slash::Help => self.mode = Mode::Help,
            Slash::Quit => return self.quit_cmds(),
            Slash::Cost => self.cells.push(Cell::Info {
                title: "cost".into(),
                lines: cost_lines(&self.totals),
            }),
            Slash::Pause => self.pause(),
            Slash::Rewind => return vec![Cmd::RewindPoints],
            Slash::Undo => return vec![Cmd::Undo],
            Slash::Fork => return vec![Cmd::Fork],
            Slash::Tree => return vec![Cmd::Tree],
            Slash::Diff(n) => return vec![Cmd::Diff(n)],
            Slash::CheckpointSave => return vec![Cmd::CheckpointSave],
            Slash::CheckpointList => return vec![Cmd::CheckpointList],
            Slash::CheckpointRestore(id) => return vec![Cmd::CheckpointRestore(id)],
            Slash::Sessions => return vec![Cmd::Sessions],
            Slash::Resume(id) => {
                self.activity = Activity::Opening;
                return vec![Cmd::Resume(id)];
            }
        }
        Vec::new()
    }

    /// `/pause`: the work in flight is asked to suspend after its step.
    fn pause(&mut self) {
        if self.working() {
            if let Some(h) = &self.stop {
                if h.level() == StopLevel::None {
                    h.escalate();
                }
            }
            self.activity = Activity::Suspending;
            self.hint = Some("suspending after the step in flight".into());
        } else {
            self.hint = Some(
                "nothing is running: the session is already paused (a pause: window is open)"
                    .into(),
            );
        }
    }
}
