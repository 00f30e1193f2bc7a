//! The bookkeeping records: workspace snapshots, reconciles, rollbacks, a VM guest's events, versioning, checkpoints.

use serde::{Deserialize, Serialize};

/// A workspace boundary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// Snapshot id.
    pub snapshot: String,
    /// Its label, e.g. `post:turn:3`.
    pub label: String,
}

/// Paths that changed while nothing of the run executed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reconcile {
    /// The changed paths (empty when none, or when `unknown` says why they
    /// could not be listed).
    pub changed: Vec<String>,
    /// The `resume:` snapshot that captured them.
    #[serde(default)]
    pub snapshot: Option<String>,
    /// Why the change list is unknown (a manifest that did not read): then
    /// `changed` is empty and means nothing. Schema version 2.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unknown: Option<String>,
    /// A VM session's guest restored from a checkpoint: what the host saw
    /// after the checkpoint that the restored guest has not. Schema version 4.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<Rollback>,
}

/// What a machine restore rolled back (DESIGN §13, the two ledgers): the
/// host's record after the checkpoint, which the guest, woken at the
/// checkpoint, does not remember.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rollback {
    /// The checkpoint the guest was restored from.
    pub checkpoint: String,
    /// The journal seq the checkpoint was taken at.
    pub at_seq: u64,
    /// Model calls journaled after the checkpoint (their seqs): paid for
    /// already, served again as replays when the guest retries them.
    #[serde(default)]
    pub model_calls: Vec<u64>,
    /// How many lines the guest wrote on its console after the checkpoint.
    #[serde(default)]
    pub console_lines: u64,
    /// The last of those lines (at most a few, each cut short): what the
    /// guest was doing when its work was rolled back.
    #[serde(default)]
    pub console_tail: Vec<String>,
}

/// One event of a VM session's guest (DESIGN §13). Schema version 4.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Machine {
    /// What happened.
    pub event: MachineEvent,
    /// The checkpoint restored from (`restored`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
    /// The qemu process (`started`, `restored`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pid: Option<u32>,
    /// More, for a person: the accelerator, why it died.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

/// What happened to a guest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MachineEvent {
    /// Booted.
    Started,
    /// Started from a checkpoint.
    Restored,
    /// Stopped by `cairn vm stop`.
    Stopped,
    /// Found gone without a stop.
    Died,
}

/// Workspace versioning of a stretch of work stopped: from here on its
/// file changes are not captured, so a rewind cannot undo them. Schema
/// version 2.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Versioning {
    /// What the state is now; only `off` is written.
    pub state: VersioningState,
    /// The boundary whose capture failed, e.g. `pre:turn:1`.
    #[serde(default)]
    pub at: Option<String>,
    /// Why, and what to do about it.
    pub reason: String,
}

/// Whether workspace versioning is on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VersioningState {
    /// Captures stopped.
    Off,
}

/// A checkpoint of this run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointRef {
    /// Checkpoint id.
    pub checkpoint: String,
    /// SHA-256 (lowercase hex) of the checkpoint manifest's exact bytes: the
    /// chain then vouches for the manifest, so one changed afterwards is
    /// detected. Absent in records written before cairn recorded it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest: Option<String>,
}
