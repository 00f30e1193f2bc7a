//! Anchoring a checkpoint manifest in its run's journal.
//!
//! A manifest is a file that anyone with write access to the store can
//! change; the run's journal is hash-chained. So the `checkpoint` record the
//! caller appends after a save holds the SHA-256 of the manifest's exact
//! bytes (`CheckpointRef::manifest`, from [`crate::SaveReport::manifest`]),
//! and every use of a checkpoint — verify, restore, materialise — first
//! looks for that record in the run's journal, read and chain-checked by
//! cairn-journal's reader, and compares:
//!
//! 1. the record is the first `checkpoint` record after the manifest's
//!    journal position that names the checkpoint's id (it is always appended
//!    after the save, so one at or before that position is not its);
//! 2. it holds the digest of the bytes read: **anchored**, the only state in
//!    which a checkpoint is restored or materialised;
//! 3. it holds another digest: **changed** — the manifest was altered;
//! 4. it holds none (a cairn older than this rule wrote it): **unanchored**;
//!    nothing says whether the manifest was altered, so it is reported as
//!    not verified and not used (the error says how to take its parts back
//!    through commands that do not trust it);
//! 5. there is no such record: **unjournaled** — a save killed before its
//!    record was appended (never acknowledged), or a file put there by
//!    hand; likewise not verified and not used.
//!
//! The manifest's run, journal position and workspace are only believed once
//! it is anchored; the journal (its `meta` record) is what names the
//! session's workspace.

use cairn_journal::{Record, RecordBody};

use crate::manifest::Loaded;
use crate::CheckpointError;

/// How the journal vouches for a manifest (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Anchor {
    /// The record at `seq` holds the manifest's digest.
    Anchored {
        /// The record.
        seq: u64,
    },
    /// The record at `seq` holds another digest.
    Changed {
        /// The record.
        seq: u64,
        /// The digest it holds.
        recorded: String,
    },
    /// The record at `seq` holds no digest.
    Unanchored {
        /// The record.
        seq: u64,
    },
    /// No record names the checkpoint.
    Unjournaled,
}

impl Anchor {
    /// Finds the record of `loaded` in its run's verified journal `records`.
    pub(crate) fn find(records: &[Record], loaded: &Loaded) -> Anchor {
        let cp = &loaded.cp;
        let record = records
            .iter()
            .filter(|r| r.seq > cp.journal.seq)
            .find_map(|r| match &r.body {
                RecordBody::Checkpoint(c) if c.checkpoint == cp.id.as_str() => Some((r.seq, c)),
                _ => None,
            });
        match record {
            None => Anchor::Unjournaled,
            Some((seq, c)) => match &c.manifest {
                None => Anchor::Unanchored { seq },
                Some(h) if h.eq_ignore_ascii_case(&loaded.digest) => Anchor::Anchored { seq },
                Some(h) => Anchor::Changed {
                    seq,
                    recorded: h.clone(),
                },
            },
        }
    }

    /// True when the journal vouches for the manifest.
    pub(crate) fn is_anchored(&self) -> bool {
        matches!(self, Anchor::Anchored { .. })
    }

    /// What is wrong, in words, for a verify report; `None` when anchored.
    pub(crate) fn problem(&self, loaded: &Loaded) -> Option<String> {
        match self {
            Anchor::Anchored { .. } => None,
            Anchor::Changed { seq, recorded } => Some(format!(
                "changed after it was saved: its SHA-256 is {}, the journal's `checkpoint` record (seq {seq}) holds {recorded}",
                loaded.digest
            )),
            Anchor::Unanchored { seq } => Some(format!(
                "unanchored: its journal record (seq {seq}) was written by an older cairn without the manifest's hash, so whether the manifest was changed since cannot be told; restore and fork refuse it"
            )),
            Anchor::Unjournaled => Some(format!(
                "no `checkpoint` record in the journal after seq {} names it, so nothing vouches for the manifest; restore and fork refuse it",
                loaded.cp.journal.seq
            )),
        }
    }

    /// The refusal to use the checkpoint; `None` when anchored.
    pub(crate) fn error(&self, loaded: &Loaded) -> Option<CheckpointError> {
        let cp = &loaded.cp;
        match self {
            Anchor::Anchored { .. } => None,
            Anchor::Changed { seq, recorded } => Some(CheckpointError::ManifestChanged {
                id: cp.id.to_string(),
                run: cp.run.clone(),
                seq: *seq,
                recorded: recorded.clone(),
                actual: loaded.digest.clone(),
            }),
            Anchor::Unanchored { seq } => Some(CheckpointError::Unanchored {
                id: cp.id.to_string(),
                run: cp.run.clone(),
                seq: *seq,
                snapshot: cp.workspace.as_ref().map(|w| w.snapshot.to_string()),
            }),
            Anchor::Unjournaled => Some(CheckpointError::Unjournaled {
                id: cp.id.to_string(),
                run: cp.run.clone(),
                seq: cp.journal.seq,
                path: loaded.path.clone(),
            }),
        }
    }
}
