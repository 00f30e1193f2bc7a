//! cairn's checkpoints: a whole session saved as one atomic, deduplicated
//! unit that can be verified, restored in place, or materialised as the
//! workspace of a new lineage (DESIGN §6).
//!
//! A checkpoint of a run is three things, recorded in one manifest
//! `<store>/checkpoints/<id>.json`:
//! 1. the **journal position**: the seq and chain hash of the run's last
//!    record when it was saved (a fork at the checkpoint pins exactly this);
//! 2. a **workspace snapshot** (cairn-workspace), captured by [`save`] under
//!    the named label equal to the checkpoint id;
//! 3. any further **named paths** (`--path`: files or directories anywhere,
//!    e.g. a disk image or a memory dump), each file stored in the
//!    store-global object pool, large ones as content-defined chunks.
//!
//! The caller owns the run's journal: the CLI opens the run's
//! `JournalWriter` (taking its lock, so nothing of the run executes), reads
//! [`JournalPosition::of`] it, calls [`save`], then appends the `checkpoint`
//! record naming [`SaveReport::id`] and holding [`SaveReport::manifest`],
//! the SHA-256 of the manifest's bytes. That record **anchors** the
//! manifest: the journal's hash chain then vouches for it, and a checkpoint
//! is verified, restored or materialised only while its manifest's bytes
//! still hash to what its record holds.
//!
//! # Guarantees
//! - **Atomic publication**: every chunk is written, fsynced and renamed,
//!   and its directory fsynced, before the manifest is written by temporary
//!   file, fsync, rename and directory fsync. A checkpoint exists only when
//!   complete; [`list`] never shows a partial one (stray temporary files are
//!   ignored), whenever the saving process is killed.
//! - **Deduplication**: identical chunks are stored once across all
//!   checkpoints, runs and snapshots; a small edit to a big file costs only
//!   the chunks it touched. [`stats`] reports logical against stored bytes.
//! - **Verification**: [`verify`] checks the manifest against its journal
//!   record, re-hashes every object and chunk the checkpoint needs,
//!   reassembles every chunked file against its hash, and checks the
//!   journal position against the journal, naming every problem.
//! - **A manifest changed behind cairn's back is never used**: restore and
//!   materialise refuse a checkpoint whose record does not hold its
//!   manifest's hash — changed since, not journaled, or journaled by a cairn
//!   that did not record the hash ("unanchored"; the error says how to take
//!   its workspace back with `cairn rewind`) — with nothing changed.
//! - **Restore checks before it changes**: [`restore`] verifies everything,
//!   writes only into the workspace the run's journal names and below the
//!   named paths of the anchored manifest, and checks every named path (and
//!   every directory below one that it writes into) is reachable without a
//!   symlink before it changes anything; it banks the workspace (a `bank:`
//!   capture) and the named paths (a `bank` checkpoint) and journals both
//!   through a [`RestoreJournal`] first, so it can be undone, and writes by
//!   temporary file and rename, never through a symlink. Failing part-way,
//!   it says exactly what it changed ([`CheckpointError::RestoreIncomplete`]).
//! - **One path rule, one mode rule**: every path taken from a manifest
//!   passes `cairn_store::safe::RelPath` (nothing inside `.git`), workspace
//!   snapshots are read only with `cairn_workspace::Manifest::read`, and
//!   only `cairn_store::safe::permission_bits` of a recorded mode are ever
//!   applied (no setuid, setgid or sticky bit).
//! - [`materialize`] writes a checkpoint's workspace into a new, separate,
//!   writable directory, refusing one that is not empty or not a directory.
//! - [`CheckpointManifests`] lets prune keep everything any checkpoint
//!   names; an unreadable checkpoint makes prune delete nothing, and
//!   [`naming_run`] (what deleting a run must ask) fails rather than answer
//!   without it.
//!
//! # Not guaranteed
//! - A checkpoint is one moment only if nothing writes the named paths
//!   while it is saved (pause the VM); a file that keeps changing while read
//!   fails the save ([`CheckpointError::Changing`]) rather than tearing it.
//! - Ownership, timestamps, symlinks, special files and empty directories
//!   are not saved (symlinks and special files below a named directory are
//!   reported as skipped); restore sets permission bits only.
//! - No encryption; the hashes prove integrity, not origin. Someone who can
//!   rewrite a whole journal (recomputing its chain) can anchor any
//!   manifest; that is only detectable against a tail hash kept elsewhere
//!   (DESIGN §2).
//!
//! No async, no networking. Progress goes to a [`Progress`] you pass in.
//!
//! # Example
//! ```
//! use cairn_checkpoint::{list, materialize, restore, save, verify, JournalPosition,
//!                        NoProgress, SaveRequest};
//! use cairn_journal::{CheckpointRef, JournalWriter, Meta, RecordBody};
//! use cairn_store::{RunId, Store};
//! use cairn_workspace::{CaptureConfig, Workspace};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let root = dir.path().join("project");
//! std::fs::create_dir(&root).unwrap();
//! std::fs::write(root.join("notes.md"), "draft\n").unwrap();
//! let image = dir.path().join("disk.img");
//! std::fs::write(&image, vec![7u8; 3 << 20]).unwrap();
//!
//! let store = Store::open(dir.path().join("store")).unwrap();
//! let run = RunId::new();
//! let meta = Meta { run: String::new(), created: "2026-01-01T00:00:00Z".into(),
//!     workspace: root.display().to_string(), name: None, fingerprint: None,
//!     fork: None, routing: None, system_file: None };
//! let mut writer = JournalWriter::create(&store, &run, meta).unwrap();
//! let ws = Workspace::open(&store, &run, &root, CaptureConfig::default()).unwrap();
//!
//! // Save: the caller holds the journal writer and passes its position.
//! let req = SaveRequest::new(run.clone(), JournalPosition::of(&writer))
//!     .capture(&ws)
//!     .paths([&image]);
//! let saved = save(&store, &req, &NoProgress).unwrap();
//! // Journal it, with its manifest's hash: until then it does not verify.
//! assert!(!verify(&store, &saved.id, &NoProgress).unwrap().ok);
//! writer.append(&RecordBody::Checkpoint(CheckpointRef {
//!     checkpoint: saved.id.to_string(),
//!     manifest: Some(saved.manifest.clone()),
//! })).unwrap();
//! assert_eq!(list(&store, &run).unwrap()[0].id, saved.id);
//! assert!(verify(&store, &saved.id, &NoProgress).unwrap().ok);
//!
//! // Change things, then restore.
//! std::fs::write(root.join("notes.md"), "rewritten\n").unwrap();
//! std::fs::write(&image, b"overwritten").unwrap();
//! // The writer journals the banks that undo the restore.
//! restore(&store, &saved.id, &ws, &mut writer, &NoProgress).unwrap();
//! assert_eq!(std::fs::read_to_string(root.join("notes.md")).unwrap(), "draft\n");
//! assert_eq!(std::fs::read(&image).unwrap(), vec![7u8; 3 << 20]);
//!
//! // Materialise the workspace for a fork.
//! let fork = dir.path().join("fork");
//! materialize(&store, &saved.id, &fork, &NoProgress).unwrap();
//! assert_eq!(std::fs::read_to_string(fork.join("notes.md")).unwrap(), "draft\n");
//! ```
#![deny(missing_docs)]

mod anchor;
mod error;
mod id;
mod manifest;
mod materialize;
mod prune_source;
mod query;
mod restore;
mod safe_fs;
mod save;
mod verify;

pub use cairn_objects::{NoProgress, Phase, Progress};
pub use error::CheckpointError;
pub use id::{CheckpointId, CheckpointIdError, JournalPosition};
pub use manifest::{
    Checkpoint, CheckpointKind, CheckpointSummary, FileEntry, PathKind, SavedPath, SkippedEntry,
    WorkspacePart, CHECKPOINT_VERSION,
};
pub use materialize::{materialize, materialize_path, MaterializeReport, PathReport};
pub use prune_source::CheckpointManifests;
pub use query::{ids, list, list_all, naming_run, show, stats, Stats};
pub use restore::{restore, RestoreJournal, RestoreReport};
pub use save::{save, SaveReport, SaveRequest, WorkspaceSource};
pub use verify::{verify, BadPart, VerifyReport};
