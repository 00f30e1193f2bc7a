//! The lineage lock, `<store>/lineage.lock`: forks and removals exclude
//! each other.
//!
//! A fork holds it SHARED from before it reads its parent until its own
//! journal and projection exist; a removal holds it EXCLUSIVE from before
//! it looks for forks of the sessions it removes until they are gone. So a
//! removal's "this session has no forks" stays true until it is done, and
//! a fork never pins a parent that a removal is deleting (it finds the
//! parent whole, or not at all). Forks do not wait for each other. Both
//! wait for the other kind to finish (each is short); the kernel drops the
//! lock with its process, so a crash leaves none behind. The lock is
//! advisory: it binds cairn only.

use std::fs::File;

use cairn_store::{Store, StoreError};

/// A held lineage lock; dropping it lets go.
#[derive(Debug)]
pub(crate) struct LineageLock {
    _file: File,
}

impl LineageLock {
    /// Taken by a fork, waiting while a removal holds it.
    pub(crate) fn shared(store: &Store) -> Result<LineageLock, StoreError> {
        Self::take(store, false)
    }

    /// Taken by a removal, waiting for every fork under way.
    pub(crate) fn exclusive(store: &Store) -> Result<LineageLock, StoreError> {
        Self::take(store, true)
    }

    fn take(store: &Store, exclusive: bool) -> Result<LineageLock, StoreError> {
        let path = store.lineage_lock_path();
        cairn_store::durable::create_dir_private(store.root())?;
        let file = cairn_store::durable::open_or_create_private(&path).map_err(|source| {
            StoreError::Io {
                action: "opening lock",
                path: path.clone(),
                source,
            }
        })?;
        let held = if exclusive {
            file.lock()
        } else {
            file.lock_shared()
        };
        held.map_err(|source| StoreError::Io {
            action: "locking",
            path,
            source,
        })?;
        Ok(LineageLock { _file: file })
    }
}
