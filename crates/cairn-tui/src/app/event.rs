//! What the worker, the terminal and signals do to the screen's state:
//! a turn's text streaming in, tool cells, approvals asked, the end of a
//! stretch of work, a hang-up.

use cairn_agent::Decision;
use cairn_journal::{TerminalReason, ToolCall};
use crossterm::event::Event;

use super::{Activity, App, Mode};
use crate::protocol::{Cmd, Ev, Opened};
use crate::transcript::{cells_of, Cell};

impl App {
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
            Ev::AnsweredElsewhere { call, decision } => {
                if self.approval.as_ref().is_some_and(|(c, _)| c.id == call) {
                    self.approval = None;
                    self.approval_preview = None;
                    self.activity = Activity::Working;
                }
                self.cells.push(Cell::Notice(format!(
                    "answered from the viewer: {}",
                    match decision {
                        Decision::Run => "run",
                        Decision::Decline => "declined",
                    }
                )));
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
            self.suspend_after_step();
            self.quit_after_stop = true;
            Vec::new()
        } else {
            self.quit = true;
            vec![Cmd::Quit]
        }
    }
}
