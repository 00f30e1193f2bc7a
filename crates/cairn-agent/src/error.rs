//! The agent's error type. Failures of the model or of a tool while working are
//! not errors here: they are journaled (`terminal: failed`, an `error` tool
//! outcome) and reported in the [`Ending`](crate::Ending). An error is what
//! stops the loop from keeping its record.

use std::path::PathBuf;

use cairn_journal::ForcedField;

/// What stopped the agent from working or recording.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AgentError {
    /// The journal failed.
    #[error(transparent)]
    Journal(#[from] cairn_journal::JournalError),
    /// The session (or a fork's ancestry) does not load.
    #[error(transparent)]
    Session(#[from] cairn_sessions::SessionError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] cairn_store::StoreError),
    /// The model provider could not be set up.
    #[error(transparent)]
    Model(#[from] cairn_model::ModelError),
    /// The workspace could not be opened.
    #[error(transparent)]
    Tools(#[from] cairn_tools::ToolError),
    /// The resume guard refused.
    #[error("session {run} was started with a different configuration: {}. Resume with the original settings, or pass --force to continue anyway (an `override` record will say what was forced){}", describe(changes), raised_note(raised))]
    Guard {
        /// The run.
        run: String,
        /// Every field that differs and needs `--force`.
        changes: Vec<ForcedField>,
        /// Budgets raised or lifted at the same time (these alone need no
        /// force).
        raised: Vec<ForcedField>,
    },
    /// A stored response does not read.
    #[error("the stored model response {path} does not read ({reason}); move it aside to buy the call again")]
    StoredResponse {
        /// The file.
        path: PathBuf,
        /// Why.
        reason: String,
    },
    /// The response store failed.
    #[error(transparent)]
    Calls(#[from] cairn_calls::CallsError),
    /// The system prompt file could not be read.
    #[error("cannot read the system prompt {path}: {source}")]
    SystemPrompt {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// What was asked for cannot make a plan (no model, a bad budget, a bad
    /// thinking mode, an unreadable script).
    #[error("{reason}")]
    Plan {
        /// What is wrong and what to do.
        reason: String,
    },
    /// The routing a session recorded cannot be used.
    #[error("session {run} records a model that cannot be used ({reason}); resume with --model SPEC to choose one")]
    RecordedRouting {
        /// The run.
        run: String,
        /// Why.
        reason: String,
    },
    /// The run has no configuration to resume with (e.g. it was made by `cairn exec`).
    #[error("session {run} has no model configuration to resume with: {reason}")]
    NotResumable {
        /// The run.
        run: String,
        /// Why.
        reason: String,
    },
}

fn describe(changes: &[ForcedField]) -> String {
    changes
        .iter()
        .map(|c| format!("{} was {} and is now {}", c.field, c.was, c.now))
        .collect::<Vec<_>>()
        .join("; ")
}

fn raised_note(raised: &[ForcedField]) -> String {
    if raised.is_empty() {
        String::new()
    } else {
        format!(". Raising a budget needs no --force: {}", describe(raised))
    }
}
