//! Progress reporting for long operations, as a trait: libraries report, the
//! binary draws (bars, spinners, JSON events — its choice).

/// A stage of a long operation. Shared by every crate that reports progress,
/// so one renderer in the binary handles captures, restores and prunes alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Phase {
    /// Walking a tree and reading its metadata (items: entries seen).
    Walk,
    /// Reading and hashing files (items: files; bytes: plain bytes read).
    Hash,
    /// Making new objects durable (items: objects).
    Store,
    /// Writing restored files under temporary names (items: files; bytes).
    Stage,
    /// Renaming, deleting and removing directories in place (items: paths).
    Apply,
    /// Prune: reading every manifest (items: hashes marked).
    Mark,
    /// Prune: deleting unreferenced objects (items: objects; bytes: on disk).
    Sweep,
    /// Re-reading stored objects and checking their hashes (items: objects;
    /// bytes: plain bytes verified).
    Verify,
    /// Sending objects to a remote store (items: objects sent; bytes: their
    /// stored bytes).
    Upload,
    /// Fetching objects from a remote store (items: objects fetched; bytes:
    /// their stored bytes).
    Fetch,
}

/// Receives progress. Every method has an empty default, so an implementation
/// overrides only what it draws. Methods are called from several threads at
/// once during parallel stages, hence `Sync`.
pub trait Progress: Sync {
    /// A phase starts; `total` is its item count when known in advance.
    fn begin(&self, phase: Phase, total: Option<u64>) {
        let _ = (phase, total);
    }
    /// `items` more items (and `bytes` more bytes) of `phase` are done.
    fn advance(&self, phase: Phase, items: u64, bytes: u64) {
        let _ = (phase, items, bytes);
    }
    /// The phase is over (also called when it ends early on an error path
    /// that the operation survives; not guaranteed when it fails).
    fn end(&self, phase: Phase) {
        let _ = phase;
    }
}

/// Reports nothing.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoProgress;

impl Progress for NoProgress {}
