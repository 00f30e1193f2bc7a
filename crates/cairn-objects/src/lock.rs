//! The store lock, `<store>/store.lock` (DESIGN §5.6).
//!
//! Everything that writes objects and then a manifest naming them holds it
//! SHARED from before the first object is looked up until the manifest is
//! durable; prune holds it EXCLUSIVE from before it reads the first manifest
//! until its last deletion. So prune never sees a manifest half-way, and a
//! capture never relies on an object ("already present, skip it") that a
//! prune is about to delete. The kernel drops the lock with the process, so a
//! crash leaves no stale lock. The lock is advisory: it binds cairn only.

use std::fs::{File, TryLockError};
use std::path::{Path, PathBuf};

use cairn_store::Store;

use crate::ObjectError;

/// How a [`StoreLock`] is held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockMode {
    /// Held by captures and other writers of objects and manifests; many at once.
    Shared,
    /// Held by prune; excludes every other holder.
    Exclusive,
}

/// A held store lock. Dropping it releases the lock.
#[derive(Debug)]
pub struct StoreLock {
    _file: File,
    mode: LockMode,
    path: PathBuf,
}

impl StoreLock {
    /// Takes the lock shared, waiting while a prune holds it.
    ///
    /// # Errors
    /// The lock file cannot be created or locked.
    pub fn shared(store: &Store) -> Result<StoreLock, ObjectError> {
        Self::take(store, LockMode::Shared, true)
    }

    /// Takes the lock exclusively, waiting for every holder to let go.
    ///
    /// # Errors
    /// The lock file cannot be created or locked.
    pub fn exclusive(store: &Store) -> Result<StoreLock, ObjectError> {
        Self::take(store, LockMode::Exclusive, true)
    }

    /// Takes the lock exclusively or refuses at once.
    ///
    /// # Errors
    /// [`ObjectError::StoreBusy`] when anyone else holds it.
    pub fn try_exclusive(store: &Store) -> Result<StoreLock, ObjectError> {
        Self::take(store, LockMode::Exclusive, false)
    }

    /// How this lock is held.
    pub fn mode(&self) -> LockMode {
        self.mode
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn take(store: &Store, mode: LockMode, wait: bool) -> Result<StoreLock, ObjectError> {
        let path = store.store_lock_path();
        let file = open_lock_file(store.root(), &path)?;
        let res = match (mode, wait) {
            (LockMode::Shared, true) => file.lock_shared().map_err(TryLockError::Error),
            (LockMode::Exclusive, true) => file.lock().map_err(TryLockError::Error),
            (LockMode::Shared, false) => file.try_lock_shared(),
            (LockMode::Exclusive, false) => file.try_lock(),
        };
        match res {
            Ok(()) => Ok(StoreLock {
                _file: file,
                mode,
                path,
            }),
            Err(TryLockError::WouldBlock) => Err(ObjectError::StoreBusy { path }),
            Err(TryLockError::Error(e)) => Err(ObjectError::io("locking", path, e)),
        }
    }
}

fn open_lock_file(root: &Path, path: &PathBuf) -> Result<File, ObjectError> {
    cairn_store::durable::create_dir_private(root)?;
    cairn_store::durable::open_or_create_private(path)
        .map_err(|e| ObjectError::io("opening lock", path, e))
}
