//! The writer's exclusive lock on `journal.lock` (DESIGN §2).
//!
//! Invariants: at most one process appends to a journal; a second writer is
//! refused at once (never waits) and told who holds it; the kernel drops the
//! lock when the holder dies, so a crash leaves no stale lock. The holder's
//! pid, host and start time are written into the lock file for that message
//! only: its bytes are informational and never trusted for exclusion.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

use crate::error::LockHolder;
use crate::record::now_rfc3339;
use crate::JournalError;

/// A held writer lock. Dropping it releases the lock.
#[derive(Debug)]
pub struct RunLock {
    _file: File,
}

impl RunLock {
    /// Takes the lock at `path` for `run`, or refuses at once.
    ///
    /// # Errors
    /// [`JournalError::Locked`] naming the holder when another process has it;
    /// IO errors otherwise.
    pub fn acquire(path: &Path, run: &str) -> Result<RunLock, JournalError> {
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .mode(cairn_store::durable::FILE_MODE)
            .open(path)
            .map_err(|e| JournalError::io("opening lock", path, e))?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut text = String::new();
                let holder = file
                    .read_to_string(&mut text)
                    .ok()
                    .and_then(|_| serde_json::from_str::<LockHolder>(text.trim()).ok());
                return Err(JournalError::Locked {
                    run: run.to_owned(),
                    holder,
                });
            }
            Err(TryLockError::Error(e)) => return Err(JournalError::io("locking", path, e)),
        }
        let holder = LockHolder {
            pid: std::process::id(),
            host: gethostname::gethostname().to_string_lossy().into_owned(),
            since: now_rfc3339(),
        };
        // Informational only; a failure here does not weaken exclusion.
        let text = serde_json::to_string(&holder)?;
        let _ = file
            .set_len(0)
            .and_then(|_| file.seek(SeekFrom::Start(0)))
            .and_then(|_| file.write_all(text.as_bytes()));
        Ok(RunLock { _file: file })
    }
}
