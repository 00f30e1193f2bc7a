//! The terminal UI of cairn (DESIGN §11): the agent loop with a person at
//! the keyboard — streamed model text, each tool call with its arguments
//! and outcome, a status line, a multi-line composer with history, and the
//! slash commands (`/rewind`, `/undo`, `/fork`, `/tree`, `/diff`,
//! `/checkpoint`, `/sessions`, `/pause`, `/cost` ...).
//!
//! Three threads: the screen ([`App`]'s state — pure, table-tested — drawn
//! by [`draw`]), the keys, and the worker, which owns the session and runs
//! every command ([`Cmd`]) with the same library calls as the CLI,
//! answering with events ([`Ev`]). The screen never waits on the model, the
//! disk or the network.
#![deny(missing_docs)]

mod app;
mod composer;
mod protocol;
mod slash;
mod term;
mod text;
mod transcript;
mod view;
mod worker;

pub use app::{Activity, App, Mode};
pub use protocol::{Cmd, Ev, Opened, Preview, RewindAction, RewindPoint};
pub use slash::{parse as parse_slash, Slash};
pub use term::{run, Options};
pub use transcript::{cells_of, cost, cost_lines, Cell};
pub use view::draw;
pub use worker::{BoxError, Sessions, Start};

/// Why the TUI could not run.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TuiError {
    /// The terminal could not be set up or a thread not started.
    #[error("the terminal could not be used: {0}")]
    Terminal(#[source] std::io::Error),
    /// The session it was started on could not be opened.
    #[error(transparent)]
    Open(cairn_agent::AgentError),
}
