//! Sessions as users see them: listing from projections that are never
//! trusted over the record, forks that share a verified past, repository
//! scoping, and loading a run's state for a resume.
//!
//! # Guarantees
//! - A projection (`meta.json`, `sessions.index`) is used only while the
//!   journal still vouches for it (length, mtime, record count, tail hash);
//!   otherwise the summary is rebuilt from the verified record. A missing,
//!   stale, malformed or oversized projection never breaks or falsifies a
//!   listing, and concurrent writers never lose each other's index entries.
//! - Cost figures come from the record: a finished run's from its last
//!   (`terminal`) record, read from the end of the file; only an honestly
//!   unknown cost is served from a projection.
//! - A fork copies no history: it pins its parent's chain hash, folds the
//!   verified prefix on resume, and is listed invalid (and refused by
//!   resume) once that prefix changes or is truncated.
//! - A session that does not verify is listed with `valid: false` and the
//!   problem, never dropped.
//! - A removal ([`remove`]) and a fork exclude each other, so no fork ever
//!   pins a removed parent; a removal deletes what the session owns outside
//!   its directory (its stored model responses) first and its
//!   records last, and one that stopped part-way is finished by the next.
//! - A session copied to another store ([`transfer`]: `cairn push`, `cairn
//!   pull`) arrives with its ancestors, every object and manifest it names
//!   before its journal, and its journal byte for byte; copies that
//!   disagree are refused, and repeating a copy writes nothing.
//!
//! ```
//! let dir = tempfile::tempdir().unwrap();
//! let store = cairn_store::Store::open(dir.path()).unwrap();
//! assert!(cairn_sessions::list(&store).unwrap().is_empty());
//! ```
#![deny(missing_docs)]

mod error;
mod filter;
mod fork;
mod fork_checkpoint;
mod lineage_lock;
mod load;
mod node;
mod points;
mod projection;
mod prune;
mod remove;
mod repo;
mod resolve;
pub mod restore;
mod search;
mod session;
mod summary;
mod transfer;

pub use error::SessionError;
pub use filter::{ListFilter, STATUSES};
pub use fork::{check_receipt, fork, lineage, pin_at, Pin, MAX_DEPTH};
pub use fork_checkpoint::{fork_from_checkpoint, CheckpointFork};
pub use load::{load, state_for_resume, state_for_resume_owned, tracker, verify, Loaded};
pub use node::{Node, NodeExit, NodeOutcome, NodeReport};
pub use points::{
    points_in, points_of, rewind_points, rewind_to_point, PointRewound, RewindAction, RewindPoint,
};
pub use projection::{
    index_entries_of, index_line_of, read_index, read_meta, Binding, Bound, Projection, Vouched,
    MAX_INDEX_BYTES, MAX_META_BYTES,
};
pub use prune::prune;
pub use remove::{remove, RemoveOptions, Removed};
pub use repo::{in_repository, repository_root};
pub use resolve::{
    pick, resolve_checkpoint, resolve_session, resolve_snapshot, Candidate, Picked, LAST,
    MIN_PREFIX,
};
pub use restore::{
    boundary_seq, last_bank, preview, restore_checkpoint, rewind, rewind_and_fork, save_checkpoint,
    RewindTarget, RewoundFork,
};
pub use search::{search, Found, Hit};
pub use session::Session;
pub use summary::{
    list, newest_idle, refresh, reindex, reindex_workspaces, summarize, ParentRef, Summary,
    WorkspaceReindex,
};
pub use transfer::{
    pull_remote, push_remote, transfer, RemoteStore, SessionTransfer, Shared, Synced,
    TransferReport, TransferStatus,
};
