//! The agent's error type. Failures of the model or of a tool while working are
//! not errors here: they are journaled (`terminal: failed`, an `error` tool
//! outcome) and reported in the [`Ending`](crate::Ending). An error is what
//! stops the loop from keeping its record.

use std::path::PathBuf;

use cairn_journal::ForcedField;
use cairn_store::ErrorKind;

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
    /// The store is inside the session's workspace.
    #[error("the store {} is inside the workspace {}: the session's tools and commands could rewrite the journal that records them, and a rewind could not undo it. Put the store outside the workspace (--store DIR or CAIRN_STORE), or work in another directory", store.display(), workspace.display())]
    StoreInsideWorkspace {
        /// The store, resolved.
        store: PathBuf,
        /// The workspace, resolved.
        workspace: PathBuf,
    },
    /// The workspace cannot be worked in (missing, not a directory).
    #[error("{reason}")]
    BadWorkspace {
        /// The directory.
        dir: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// The workspace versioning failed.
    #[error(transparent)]
    Workspace(#[from] cairn_workspace::WorkspaceError),
    /// The MCP servers could not be set up.
    #[error(transparent)]
    Mcp(#[from] cairn_tools::mcp::McpError),
}

impl AgentError {
    /// What kind of failure this is ([`ErrorKind`]).
    pub fn kind(&self) -> ErrorKind {
        match self {
            AgentError::Journal(j) => j.kind(),
            AgentError::Session(s) => s.kind(),
            AgentError::Guard { .. } => ErrorKind::Refused,
            AgentError::StoredResponse { .. }
            | AgentError::Calls(cairn_calls::CallsError::StoredResponse { .. })
            | AgentError::RecordedRouting { .. } => ErrorKind::Integrity,
            AgentError::NotResumable { .. }
            | AgentError::SystemPrompt { .. }
            | AgentError::Plan { .. }
            | AgentError::StoreInsideWorkspace { .. }
            | AgentError::BadWorkspace { .. }
            | AgentError::Mcp(cairn_tools::mcp::McpError::Config { .. }) => ErrorKind::Usage,
            AgentError::Model(m) => model_error_kind(m),
            AgentError::Workspace(w) => {
                ErrorKind::from_flags(w.is_integrity(), w.is_refusal(), w.is_usage())
            }
            _ => ErrorKind::Failure,
        }
    }
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

/// What kind of failure a model error is: a spec, key, base URL or script
/// that cannot work is bad usage; everything else happened while working.
/// (`cairn-model` knows no store, so its errors' kinds are said here.)
pub fn model_error_kind(m: &cairn_model::ModelError) -> ErrorKind {
    use cairn_model::ModelError;
    match m {
        ModelError::InvalidSpec { .. }
        | ModelError::MissingApiKey { .. }
        | ModelError::InvalidBaseUrl { .. }
        | ModelError::ScriptRead { .. }
        | ModelError::ScriptParse { .. } => ErrorKind::Usage,
        _ => ErrorKind::Failure,
    }
}
