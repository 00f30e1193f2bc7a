//! cairn's run journal: an append-only, fsynced, hash-chained stream of records,
//! and the pure fold that turns it back into a resumable run.
//!
//! # Guarantees
//! - A record is acknowledged ([`Appended`]) only after its whole line was
//!   written and `fdatasync` returned. A new run's directory is fsynced.
//! - Every record is chained to the one before it (see [`ChainHash`] and
//!   `DESIGN.md` beside this crate); [`verify_journal`] names the first seq
//!   that does not verify.
//! - After a crash only the end can be incomplete. Readers tolerate exactly one
//!   such torn tail and report it; the next [`JournalWriter`], holding the lock,
//!   cuts it. An invalid record followed by valid ones is damage, never skipped.
//! - Every `terminal` carries the fold's totals ([`TotalsMismatch`] otherwise,
//!   reported as damage at its seq); counters saturate; a cost obeys its
//!   state's rules ([`Cost`]) or its record is a schema error.
//! - One writer per run: a second is refused without waiting for the holder,
//!   with the holder named (see [`RunLock`]).
//! - A failed write or fsync poisons the writer; it never retries.
//! - [`fold`] is pure: counters come from records only and never drift.
//!
//! # Not guaranteed
//! The chain makes later modification detectable; it is not encryption, not a
//! backup, and proves nothing about effects outside the machine. A changed last
//! record is detectable only against a tail hash kept elsewhere.
//!
//! This crate does no networking and starts no async runtime.
//!
//! # Example
//! ```
//! use cairn_journal::{fold, read_journal, JournalWriter, Meta, RecordBody, User};
//! use cairn_store::{RunId, Store};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::open(dir.path()).unwrap();
//! let id = RunId::new();
//! let meta = Meta {
//!     run: String::new(), created: "2026-01-01T00:00:00Z".into(),
//!     workspace: "/tmp/ws".into(), name: Some("demo".into()),
//!     fingerprint: None, fork: None, routing: None, system_file: None,
//! };
//! let mut w = JournalWriter::create(&store, &id, meta).unwrap();
//! w.append(&RecordBody::User(User::person("hello"))).unwrap();
//! drop(w);
//!
//! let scan = read_journal(&store.journal_path(&id), id.as_str()).unwrap();
//! let state = fold(&scan.records).unwrap();
//! assert_eq!(state.records, 2);
//! ```
#![deny(missing_docs)]

mod ahead;
mod chain;
mod ends;
mod error;
mod fold;
mod follower;
mod incremental;
mod lock;
mod mirror;
mod reader;
mod record;
mod remote;
mod writer;

pub use chain::{ChainHash, ChainHashParseError};
pub use ends::{
    mtime_ns, read_ends, read_ends_of, read_head, read_head_record, read_tail_record, Ends, Head,
    Tail, TailRecord, MAX_END_BYTES,
};
pub use error::{JournalError, LockHolder};
pub use fold::{fold, Entry, FoldError, PendingCall, RunState, Status, TotalsMismatch};
pub use follower::JournalFollower;
pub use incremental::IncrementalReader;
pub use lock::{writer_alive, RunLock, HOLDER_WAIT};
pub use mirror::{install_mirror, mirror_of, JournalMirror};
pub use reader::{
    check_bytes, read_journal, scan_journal_bytes, verify_bytes, verify_journal, verify_keeping,
    Scan, TornTail, VerifyReport,
};
pub use record::{
    now_rfc3339, Assistant, Budgets, CheckpointRef, Choice, Cost, CostState, Delivered,
    Fingerprint, ForcedField, ForkPin, Machine, MachineEvent, McpCall, Meta, ModelCall, Origin,
    Outcome, Override, Reasoning, Reconcile, Record, RecordBody, Rollback, Routing, Snapshot,
    Terminal, TerminalReason, Thinking, ToolCall, ToolHints, ToolResult, ToolStart, Totals, Usage,
    User, Versioning, VersioningState, NOTE_PREFIX, SCHEMA_VERSION,
};
pub use remote::{RemoteAppended, RemoteJournalError, RemoteJournals};
pub use writer::{Appended, JournalIo, JournalWriter, PREALLOCATE_STEP};
