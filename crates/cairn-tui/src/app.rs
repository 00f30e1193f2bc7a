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

use cairn_agent::{Decision, StopHandle, StopLevel};
use cairn_journal::{ToolCall, Totals};
use cairn_sessions::Summary;

use crate::composer::Composer;
use crate::protocol::{Preview, RewindAction, RewindPoint};
use crate::transcript::Cell;

mod event;
mod keys;

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

    /// The work in flight is asked to suspend after its step (Ctrl-C once,
    /// `/pause`, a quit or a hang-up while working): the stop is raised to
    /// its first level unless it is already raised.
    fn suspend_after_step(&mut self) {
        if let Some(h) = &self.stop {
            if h.level() == StopLevel::None {
                h.escalate();
            }
        }
        self.activity = Activity::Suspending;
    }
}
