//! The terminal UI of cairn (DESIGN §11): the agent loop with a person at
//! the keyboard — streamed model text, each tool call with its arguments
//! and outcome, a status line, a multi-line composer with history, and the
//! slash commands (`/rewind`, `/undo`, `/fork`, `/tree`, `/diff`,
//! `/checkpoint`, `/sessions`, `/pause`, `/cost` ...).
//!
//! Three threads: the screen ([`app`] state, drawn by [`view`]), the keys,
//! and the [`worker`], which owns the session and runs every command with
//! the same library calls as the CLI. The screen never waits on the model,
//! the disk or the network.

pub mod app;
pub mod composer;
pub mod protocol;
mod term;
pub mod text;
pub mod view;
pub mod worker;

pub use term::{run, Options};
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
