//! The object pool's one error type.
//!
//! Policy: every variant names the object (hash) or the file it was touching;
//! every message says what to do next. Nothing is repaired silently: a damaged
//! object is reported, never rewritten in place, and prune refuses to delete
//! anything when it cannot see every manifest.

use std::path::PathBuf;

use crate::ObjectHash;

/// The error a [`crate::ManifestSource`] returns when a manifest cannot be read.
pub type SourceError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// The error a [`crate::RemoteObjects`] backend returns; its message says
/// what failed and what to do (the S3 backend's are typed, so a caller may
/// downcast them).
pub type RemoteError = Box<dyn std::error::Error + Send + Sync + 'static>;

/// What went wrong in the object pool.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ObjectError {
    /// A file-system operation failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What cairn was doing, e.g. "writing object".
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The store could not be prepared.
    #[error(transparent)]
    Store(#[from] cairn_store::StoreError),
    /// No object with this hash is in the pool.
    #[error("object {hash} is missing from the store: the snapshot naming it cannot be restored; `cairn prune` never removes a referenced object, so the store was changed by hand or damaged")]
    Missing {
        /// The hash asked for.
        hash: ObjectHash,
    },
    /// An object's bytes do not match its name.
    #[error("object {hash} at {path} is damaged: {reason}. Remove the file and capture again to re-create it if the content still exists")]
    Corrupt {
        /// The object's name.
        hash: ObjectHash,
        /// Its file.
        path: PathBuf,
        /// What does not verify.
        reason: String,
    },
    /// An object written by a newer cairn (a header version, kind or codec
    /// this build does not know).
    #[error("object file {path} has format version {version} or a kind this cairn does not know: upgrade cairn to read it")]
    NewerFormat {
        /// The file.
        path: PathBuf,
        /// The version byte found.
        version: u8,
    },
    /// The pool was written by a newer cairn, which may store references this
    /// build cannot follow; prune refuses to run on it.
    #[error("the object pool at {path} is format {found}, this cairn knows up to {known}: upgrade cairn before pruning (an older prune could delete objects still in use)")]
    NewerPool {
        /// The pool's format file.
        path: PathBuf,
        /// The format it declares.
        found: String,
        /// The newest this build knows.
        known: u32,
    },
    /// The file being stored changed while it was read.
    #[error(
        "{path} changed while it was being read: capture again once it is no longer being written"
    )]
    SourceChanged {
        /// The file.
        path: PathBuf,
    },
    /// Prune could not read a manifest, so it deleted nothing.
    #[error("prune deleted nothing: a manifest in {source_name} cannot be read ({source}); repair or remove it, then prune again")]
    ManifestUnreadable {
        /// Which kind of manifest (e.g. "workspace snapshots").
        source_name: String,
        /// Why it cannot be read.
        #[source]
        source: SourceError,
    },
    /// The stored bytes of an object fetched from a remote store do not
    /// decode, or do not hash to the name they were fetched under. Nothing
    /// of the object was imported.
    #[error("object {hash} fetched from {origin} is damaged: {reason}. Nothing of it was imported; delete that object at {origin} and upload it again from a store that holds it intact (uploads never overwrite)")]
    FetchedCorrupt {
        /// The name the bytes were fetched under.
        hash: ObjectHash,
        /// The remote store, e.g. its URL.
        origin: String,
        /// What does not verify.
        reason: String,
    },
    /// An object fetched from a remote store was written by a newer cairn
    /// (a header version, kind or codec this build does not know).
    #[error("object {hash} fetched from {origin} has format version {version} or a kind this cairn does not know: upgrade cairn to fetch it")]
    FetchedNewer {
        /// The name the bytes were fetched under.
        hash: ObjectHash,
        /// The remote store.
        origin: String,
        /// The version byte found.
        version: u8,
    },
    /// A remote store does not hold an object that was to be fetched from it.
    #[error("object {hash} is not in {remote}: it was never uploaded there, or was removed by hand; push it from a store that holds it")]
    RemoteMissing {
        /// The object asked for.
        hash: ObjectHash,
        /// The remote store.
        remote: String,
    },
    /// A remote store's backend failed (unreachable, refused, misconfigured).
    #[error("{action} object {hash} at {remote}: {source}")]
    Remote {
        /// What cairn was doing, e.g. "uploading".
        action: &'static str,
        /// The object it was moving.
        hash: ObjectHash,
        /// The remote store.
        remote: String,
        /// The backend's error, which says what to do.
        #[source]
        source: RemoteError,
    },
    /// A path of the pool is a symbolic link, or another kind of file than
    /// the pool keeps there: it is not followed (nothing is read from or
    /// written outside the store through it).
    #[error("{} is {what}, where the store keeps a plain {expected}: cairn never follows a symbolic link inside a store. Move it out of the store (or put the real {expected} in its place) and retry", path.display())]
    NotPlain {
        /// The path.
        path: PathBuf,
        /// What it is, e.g. `a symbolic link`.
        what: &'static str,
        /// What the store keeps there: `file` or `directory`.
        expected: &'static str,
    },
    /// Another process holds the store lock and the caller chose not to wait.
    #[error("the store at {path} is busy: another cairn is capturing or pruning; wait for it to finish and retry")]
    StoreBusy {
        /// The lock file.
        path: PathBuf,
    },
}

impl ObjectError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        ObjectError::Io {
            action,
            path: path.into(),
            source,
        }
    }

    /// True when stored bytes do not verify or a manifest cannot be read
    /// (exit code 3 in the CLI).
    pub fn is_integrity(&self) -> bool {
        matches!(
            self,
            ObjectError::Missing { .. }
                | ObjectError::Corrupt { .. }
                | ObjectError::ManifestUnreadable { .. }
                | ObjectError::FetchedCorrupt { .. }
                | ObjectError::RemoteMissing { .. }
        )
    }

    /// True when the operation was refused on purpose (exit code 4 in the CLI).
    pub fn is_refusal(&self) -> bool {
        matches!(
            self,
            ObjectError::StoreBusy { .. }
                | ObjectError::NewerPool { .. }
                | ObjectError::NotPlain { .. }
        )
    }
}
