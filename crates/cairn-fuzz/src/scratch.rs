//! A scratch store for the targets that read through the file system.

use std::path::PathBuf;

use cairn_store::Store;

/// A temporary directory holding a store, removed when dropped.
pub(crate) struct Scratch {
    dir: tempfile::TempDir,
    pub(crate) store: Store,
}

impl Scratch {
    /// A new, empty store in the system's temporary directory.
    ///
    /// # Panics
    /// When the directory or the store cannot be created: no target can run.
    pub(crate) fn new() -> Scratch {
        let dir = tempfile::Builder::new()
            .prefix("cairn-fuzz-")
            .tempdir()
            .unwrap_or_else(|e| panic!("creating a scratch directory: {e}"));
        let store = Store::open(dir.path().join("store"))
            .unwrap_or_else(|e| panic!("creating a scratch store: {e}"));
        Scratch { dir, store }
    }

    /// A path in the scratch directory, outside the store.
    pub(crate) fn file(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }
}
