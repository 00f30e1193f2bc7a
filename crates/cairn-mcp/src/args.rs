//! The tools' arguments, as clients send them; their JSON Schemas (from
//! these types and their docs) are what `tools/list` shows.

use schemars::JsonSchema;
use serde::Deserialize;

/// Filters of `list_sessions`.
#[derive(Debug, Default, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {
    /// Only the sessions of this repository (a directory; its git
    /// top-level when inside a work tree).
    #[serde(default)]
    pub repo: Option<String>,
    /// Only sessions with this status: running, interrupted, completed,
    /// failed, suspended, … or invalid (a journal that does not verify).
    #[serde(default)]
    pub status: Option<String>,
    /// At most this many, the newest first.
    #[serde(default)]
    pub limit: Option<usize>,
}

/// A session.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionArgs {
    /// The session's id (list_sessions gives them).
    pub id: String,
}

/// A page of a transcript.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PageArgs {
    /// The session's id.
    pub id: String,
    /// Records after this journal seq (default 0: from the first).
    #[serde(default)]
    pub after: Option<u64>,
    /// At most this many records (default 50, at most 200).
    #[serde(default)]
    pub limit: Option<usize>,
}

/// Two snapshots of a session.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiffArgs {
    /// The session's id.
    pub id: String,
    /// The snapshot to compare from (list_snapshots gives them).
    pub from: String,
    /// The snapshot to compare to.
    pub to: String,
}

/// A point to preview a rewind to.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PreviewArgs {
    /// The session's id.
    pub id: String,
    /// The point whose state before it the files would go back to: turn:N
    /// (rewind_points gives them).
    pub to: String,
    /// `run` (default: only what the session changed) or `full`.
    #[serde(default)]
    pub scope: Option<String>,
}

/// What to rewind to.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct RewindArgs {
    /// The session's id.
    pub id: String,
    /// The point whose state before it the files go back to: turn:N.
    #[serde(default)]
    pub to: Option<String>,
    /// A snapshot to put back whole instead (a rewind's bank, to undo it).
    #[serde(default)]
    pub snapshot: Option<String>,
    /// `run` (default: only what the session changed) or `full`.
    #[serde(default)]
    pub scope: Option<String>,
    /// Also fork the conversation at that point (with `to` only).
    #[serde(default)]
    pub fork: bool,
}

/// A checkpoint.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckpointArgs {
    /// The checkpoint's id (list_checkpoints gives them).
    pub checkpoint: String,
}

/// What to fork.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ForkArgs {
    /// The session to fork.
    pub id: String,
    /// The last record the fork shares (default: the session's last).
    #[serde(default)]
    pub at: Option<u64>,
}
