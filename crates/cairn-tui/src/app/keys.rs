//! What keys and slash commands do to the screen's state (DESIGN §11):
//! Ctrl-C once and twice, Ctrl-D, Esc Esc and the rewind picker, the
//! approval prompt, the composer, `/pause` and the other commands.

use std::time::Instant;

use cairn_agent::{stop_pair, Decision, StopLevel};
use crossterm::event::{KeyCode, KeyEvent, KeyEventKind, KeyModifiers};

use super::{Activity, App, Mode, DOUBLE_ESC};
use crate::protocol::{Cmd, RewindAction};
use crate::slash::Slash;
use crate::transcript::{cost_lines, Cell};

impl App {
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
    pub(super) fn ctrl_c(&mut self) -> Vec<Cmd> {
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
            self.suspend_after_step();
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
            self.suspend_after_step();
            self.hint = Some("suspending after the step in flight".into());
        } else {
            self.hint = Some(
                "nothing is running: the session is already paused (a pause: window is open)"
                    .into(),
            );
        }
    }
}
