//! What the screen and the worker say to each other.
//!
//! The screen thread never touches the disk, the model or the network: it
//! sends a [`Cmd`] and draws the [`Ev`]s that come back, so typing never
//! waits on any of them. The worker thread owns the session (its journal
//! lock) and runs every command with the same library calls as the CLI.

use cairn_agent::{Decision, Stop};
use cairn_journal::{Entry, Outcome, PendingCall, TerminalReason, ToolCall, Totals};
use cairn_sessions::Summary;
use cairn_workspace::{FileChange, LeftAlone};

/// A request to the worker.
#[derive(Debug)]
pub enum Cmd {
    /// Send a message (a new session starts with the first one).
    Send {
        /// The message.
        text: String,
        /// Stops this stretch of work.
        stop: Stop,
    },
    /// Continue a session that stopped mid-turn, with no new message.
    Continue {
        /// Stops this stretch of work.
        stop: Stop,
    },
    /// Fork this session at its last record and switch to the fork.
    Fork,
    /// Show the lineage.
    Tree,
    /// What the session changed since user turn `N` began (default: the
    /// last one).
    Diff(Option<usize>),
    /// Save a checkpoint.
    CheckpointSave,
    /// List checkpoints.
    CheckpointList,
    /// Restore a checkpoint.
    CheckpointRestore(String),
    /// List the points a rewind can go back to.
    RewindPoints,
    /// Preview a rewind (banks first).
    Preview {
        /// Index into the points.
        point: usize,
        /// What to rewind.
        action: RewindAction,
    },
    /// Rewind.
    Rewind {
        /// Index into the points.
        point: usize,
        /// What to rewind.
        action: RewindAction,
    },
    /// Put back the last bank.
    Undo,
    /// List this repository's sessions.
    Sessions,
    /// Switch to another session.
    Resume(String),
    /// Stop the worker.
    Quit,
}

pub use cairn_sessions::{RewindAction, RewindPoint};

/// What a rewind would do.
#[derive(Clone, Debug, PartialEq)]
pub struct Preview {
    /// The boundary restored (`pre:turn:N`).
    pub target: String,
    /// Per-file changes the restore makes.
    pub changes: Vec<FileChange>,
    /// Paths left as they are, with why (the operator's own edits).
    pub left_alone: Vec<LeftAlone>,
    /// The bank taken first.
    pub bank: String,
}

/// A session as the screen shows it.
#[derive(Clone, Debug)]
pub struct Opened {
    /// Session id.
    pub id: String,
    /// Its name.
    pub name: Option<String>,
    /// The model spec.
    pub model: String,
    /// The workspace root.
    pub workspace: String,
    /// The conversation so far.
    pub conversation: Vec<Entry>,
    /// Calls of the last turn with no result yet.
    pub pending: Vec<PendingCall>,
    /// Totals.
    pub totals: Totals,
    /// True when the session stopped mid-turn (the model speaks next, or
    /// calls are unresolved).
    pub cut_short: bool,
    /// What to put in the composer (a rewind's message, to edit and send).
    pub prefill: Option<String>,
}

/// Something for the screen.
#[derive(Debug)]
pub enum Ev {
    /// A key, a paste or a resize.
    Input(crossterm::event::Event),
    /// The terminal went away (input could not be read).
    InputClosed,
    /// A signal (SIGHUP, SIGTERM).
    Signal(i32),
    /// A session is open.
    Opened(Box<Opened>),
    /// Model text streamed.
    Text(String),
    /// The stream broke and is retried: drop the partial text.
    TextRestart,
    /// A model turn started.
    TurnStarted {
        /// The turn.
        turn: u64,
        /// Served from the response store.
        replay: bool,
    },
    /// The model refused.
    Refusal(String),
    /// A model turn was journaled.
    TurnFinished,
    /// A tool call is dispatched.
    ToolStarted(ToolCall),
    /// A tool call's outcome was journaled.
    ToolFinished {
        /// The call.
        call: ToolCall,
        /// Its outcome.
        outcome: Outcome,
        /// Its output.
        output: String,
    },
    /// A call waits for a yes or no.
    Approval {
        /// The call.
        call: ToolCall,
        /// Where the answer goes.
        reply: tokio::sync::oneshot::Sender<Decision>,
        /// What a file write or edit would change, as a unified diff
        /// (`cairn_tools::preview`), shown instead of the arguments.
        preview: Option<String>,
    },
    /// The waiting call was answered elsewhere (the viewer): its prompt
    /// goes.
    AnsweredElsewhere {
        /// The call's id.
        call: String,
        /// The answer given.
        decision: Decision,
    },
    /// Something to know.
    Notice(String),
    /// A stretch of work ended.
    Ended {
        /// Why.
        reason: TerminalReason,
        /// Detail.
        detail: Option<String>,
        /// Totals now.
        totals: Totals,
    },
    /// The snapshot count changed.
    Snapshots(usize),
    /// A command's answer, to show as a cell.
    Info {
        /// Its title.
        title: String,
        /// Its lines.
        lines: Vec<String>,
    },
    /// The rewind points.
    Points(Vec<RewindPoint>),
    /// A rewind preview.
    Preview {
        /// The point.
        point: usize,
        /// The action.
        action: RewindAction,
        /// What it would do.
        preview: Preview,
    },
    /// This repository's sessions.
    Sessions(Vec<Summary>),
    /// A command failed.
    Failed(String),
    /// The session the TUI was started on could not be opened: it closes,
    /// and the worker returns the error to the command.
    OpenFailed,
    /// The worker is done.
    Closed,
}
