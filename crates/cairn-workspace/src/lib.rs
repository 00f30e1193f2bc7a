//! cairn's workspace versioning: every file a run writes, captured at every
//! node boundary, so a rewind can undo exactly what the run did and nothing
//! the operator did (DESIGN §5).
//!
//! A [`Workspace`] is one run's view of one directory. Each capture walks the
//! tree under the [`IgnoreRules`], hashes what the stat cache cannot vouch
//! for (in parallel), stores new content in the store-global object pool
//! (`cairn-objects`), and writes a snapshot manifest under a [`Label`] — or,
//! when nothing changed since the head, adds the label to the head. Restores
//! bank the current state first, so every restore can itself be undone.
//!
//! # Guarantees
//! - A snapshot names only objects that were durable before its manifest was
//!   written; the index is replaced atomically after the manifest. A crash
//!   loses at most the capture in progress.
//! - The stat cache never hides a change it could miss: an entry is trusted
//!   only when type, mode, size, mtime, ctime and inode are unchanged AND the
//!   file's times are older than the previous capture's start (on the store's
//!   clock) minus a slack, so a same-second rewrite of equal size is re-read.
//!   A file that changes while it is read is re-read, then reported.
//! - Files above `CaptureConfig::chunk_threshold` (1 MiB) are stored as
//!   content-defined chunks, so an edit to a big file costs only the chunks
//!   it touched; manifests still name the file by its SHA-256, and a restore
//!   reassembles and verifies it.
//! - Coverage gaps are never silent: symlinks, files over the size limit,
//!   special and unreadable files are listed in every [`CaptureReport`] and
//!   manifest; rule files and lines that are not used are its warnings. A
//!   tree over the file limit is refused before anything is read.
//! - No capture, `pre:` mark or label returns or records a snapshot whose
//!   manifest cannot be read back from this run: a head whose manifest is
//!   missing (or an index naming another run's snapshot) is captured afresh
//!   or refused ([`WorkspaceError::HeadMissing`]), and
//!   [`Workspace::rebuild_index`] rebuilds a damaged index from the
//!   journal's boundary records.
//! - Windows are judged from each snapshot's own label, written once at
//!   capture, never from the (re-pointable) label map.
//! - A restore checks every path and every object before it changes
//!   anything; writes through temporary files and renames; never follows a
//!   symlink, never writes outside the root or into `.git` or the store;
//!   never deletes a path it did not capture (skipped or excluded); applies
//!   only permission bits (`0o777`) of a recorded mode.
//! - A preview ([`Workspace::preview_rewind`]) plans through the restore's
//!   own code and changes no file of the workspace: with nothing changed in
//!   between, the rewind then writes, deletes and chmods exactly the paths
//!   the preview lists, and leaves alone exactly the ones it names (in
//!   scope `run`, the operator's edits, each with its window).
//! - Diff stats ([`Workspace::diff_stat`], [`Workspace::run_diff_stat`])
//!   compare content read back from the pool, verified; a file above
//!   [`MAX_COUNTED_BYTES`] (4 MiB) is reported binary-style, not counted.
//!
//! # Not guaranteed
//! - Authorship is decidable only at window boundaries: an edit the operator
//!   makes while a node runs is attributed to that node.
//! - Empty directories are not versioned; a restore removes the directories
//!   it empties and creates the ones it needs.
//! - Symlinks, files outside the workspace and effects outside the machine
//!   are out of scope.
//! - A cache or environment without its marker (a `target/` without
//!   `CACHEDIR.TAG`, a virtual environment without `pyvenv.cfg`) is captured
//!   like source: the defaults exclude by name only the names no project
//!   uses for source.
//!
//! No async, no networking, no environment: the binary turns
//! `CAIRN_WORKSPACE_MAX_FILE_MB` and `CAIRN_WORKSPACE_MAX_FILES` into a
//! [`CaptureConfig`]. Progress goes to
//! a [`Progress`] you pass in; nothing is drawn.
//!
//! # Example
//! ```
//! use cairn_store::{RunId, Store};
//! use cairn_workspace::{CaptureConfig, NoProgress, NodeEnd, NodeName, NodeRef,
//!                       RestoreScope, Workspace};
//!
//! let dir = tempfile::tempdir().unwrap();
//! let root = dir.path().join("project");
//! std::fs::create_dir(&root).unwrap();
//! std::fs::write(root.join("notes.md"), "draft\n").unwrap();
//!
//! let store = Store::open(dir.path().join("store")).unwrap();
//! let ws = Workspace::open(&store, &RunId::new(), &root, CaptureConfig::default()).unwrap();
//!
//! // One node of a run (what `cairn exec` does around a command).
//! let node = NodeName::parse("exec").unwrap();
//! let entry = ws.enter_node(&node, &NoProgress).unwrap();
//! std::fs::write(root.join("notes.md"), "rewritten by a bot\n").unwrap();
//! std::fs::write(root.join("new.txt"), "created by a bot\n").unwrap();
//! ws.leave_node(&entry.at, NodeEnd::Completed, &NoProgress).unwrap();
//!
//! // Undo what the node did.
//! let to = NodeRef::parse("exec:1").unwrap();
//! let report = ws.rewind_to(&to, RestoreScope::Run, &NoProgress).unwrap();
//! assert_eq!(std::fs::read_to_string(root.join("notes.md")).unwrap(), "draft\n");
//! assert!(!root.join("new.txt").exists());
//! // ... and the rewind itself can be undone from its bank.
//! ws.restore_snapshot(&report.bank.snapshot, &NoProgress).unwrap();
//! assert!(root.join("new.txt").exists());
//! ```
#![deny(missing_docs)]

mod apply;
mod attribution;
mod capture;
mod clock;
mod config;
mod diffstat;
mod error;
mod history;
mod ignore;
mod index;
mod label;
mod manifest;
mod preview;
mod prune_source;
mod rebuild;
mod restore;
mod safe_fs;
mod show;
mod statcache;
mod walk;
mod workspace;

pub use cairn_objects::{prune, NoProgress, Phase, Progress, PruneOptions, PruneReport};
pub use capture::CaptureReport;
pub use config::CaptureConfig;
pub use diffstat::{ChangeKind, FileChange, MAX_COUNTED_BYTES};
pub use error::WorkspaceError;
pub use history::{Interval, SnapshotInfo};
pub use ignore::{
    Evidence, IgnoreMatch, IgnoreOptions, IgnoreRules, IgnoreWarning, Marker, RuleSource,
    CACHEDIR_TAG_SIGNATURE, DEFAULT_EXCLUDES, DEFAULT_MARKERS, IGNORE_FILES,
};
pub use label::{Label, LabelError, LabelKind, NodeIter, NodeName, NodeRef};
pub use manifest::{
    Entry, Manifest, SkipReason, Skipped, SnapshotId, SnapshotIdError, MANIFEST_VERSION,
};
pub use preview::RewindPreview;
pub use prune_source::SnapshotManifests;
pub use rebuild::{NotRebuilt, RebuildReport};
pub use restore::{LeftAlone, RestoreReport, RestoreScope};
#[doc(hidden)]
pub use show::{FileAt, Snapshots, TreeEntry};
pub use statcache::statcache_round_trip;
pub use workspace::{list_snapshots, NodeEnd, NodeEntry, Workspace};

/// Now, RFC 3339 UTC with microseconds (the `created` of a manifest).
pub(crate) fn now_rfc3339() -> String {
    humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string()
}
