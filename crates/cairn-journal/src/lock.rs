//! The writer's exclusive lock on `journal.lock` (DESIGN §2).
//!
//! Invariants: at most one process appends to a journal; a second writer is
//! refused without waiting for the holder to finish, and told who holds it;
//! the kernel drops the lock when the holder dies, so a crash leaves no
//! stale lock. The holder's pid, host and start time are written into the
//! lock file for that message only: its bytes are informational and never
//! trusted for exclusion.
//!
//! Naming the holder is a protocol of its own, because taking the lock and
//! writing the name cannot be one step:
//! 1. the holder takes the lock, empties the file, then writes its name with
//!    one write; on release it empties the file again before the lock goes.
//!    So the file is empty or holds a prefix of the current holder's name,
//!    except after a crash, when it holds a dead process's;
//! 2. a refused process reads the name; when the file is empty, cut, or
//!    names a process of this host that no longer exists (a crashed
//!    holder's), it tries the lock again and re-reads, for at most
//!    [`HOLDER_WAIT`]. Only a holder that never names itself in that time
//!    (it stopped between locking and writing) is reported as unknown.

use std::fs::{File, OpenOptions, TryLockError};
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::time::{Duration, Instant};

use crate::error::LockHolder;
use crate::record::now_rfc3339;
use crate::JournalError;

/// How long a refused process waits for the holder to name itself.
pub const HOLDER_WAIT: Duration = Duration::from_secs(2);

/// The most bytes of a holder's name read from the lock file.
const MAX_HOLDER_BYTES: usize = 4096;

/// A held writer lock. Dropping it releases the lock.
#[derive(Debug)]
pub struct RunLock {
    file: File,
}

impl RunLock {
    /// Takes the lock at `path` for `run`, or refuses: at once when the
    /// holder has named itself, else as soon as it does (rule 2 above).
    ///
    /// # Errors
    /// [`JournalError::Locked`] naming the holder when another process has it;
    /// IO errors otherwise.
    pub fn acquire(path: &Path, run: &str) -> Result<RunLock, JournalError> {
        let file = cairn_store::durable::open_or_create_private(path)
            .map_err(|e| JournalError::io("opening lock", path, e))?;
        let deadline = Instant::now() + HOLDER_WAIT;
        loop {
            match file.try_lock() {
                Ok(()) => break,
                Err(TryLockError::WouldBlock) => {
                    let holder = read_holder(&file);
                    if holder.is_some() || Instant::now() >= deadline {
                        return Err(JournalError::Locked {
                            run: run.to_owned(),
                            holder,
                        });
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
                Err(TryLockError::Error(e)) => return Err(JournalError::io("locking", path, e)),
            }
        }
        let holder = LockHolder {
            pid: std::process::id(),
            host: host_name(),
            since: now_rfc3339(),
        };
        // Informational only; a failure here does not weaken exclusion.
        // Empty first, then one write: a reader never sees a mix of two names.
        let text = serde_json::to_vec(&holder)?;
        let _ = file.set_len(0).and_then(|_| file.write_all_at(&text, 0));
        Ok(RunLock { file })
    }
}

impl Drop for RunLock {
    fn drop(&mut self) {
        // Unname the holder before the lock goes (when the file closes), so
        // the next contender never reads a name that is no longer true.
        let _ = self.file.set_len(0);
    }
}

/// Whether a writer holds the lock at `path` now (DESIGN §16: a session
/// whose journal ends without a terminal is `running` only while it does).
///
/// Asked by taking a shared lock with `try_lock_shared` and letting it go at
/// once: it fails exactly while a writer holds the exclusive one. The probe
/// never creates the file and never waits; a writer that tries to take the
/// lock in the instant the probe holds it sees an unnamed holder and tries
/// again ([`RunLock::acquire`], rule 2), so it is delayed, never refused.
/// No file means no writer ever held it here (a session copied from another
/// store). `None` when the file cannot be asked (permissions, an IO error):
/// the caller cannot tell, and says so.
pub fn writer_alive(path: &Path) -> Option<bool> {
    let file = match OpenOptions::new().read(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(false),
        Err(_) => return None,
    };
    match file.try_lock_shared() {
        Ok(()) => {
            // Dropping the file lets the shared lock go.
            drop(file);
            Some(false)
        }
        Err(TryLockError::WouldBlock) => Some(true),
        Err(TryLockError::Error(_)) => None,
    }
}

fn host_name() -> String {
    gethostname::gethostname().to_string_lossy().into_owned()
}

/// The holder named in the lock file, when it names a complete one that
/// may still be alive.
fn read_holder(file: &File) -> Option<LockHolder> {
    let mut buf = vec![0u8; MAX_HOLDER_BYTES];
    let n = file.read_at(&mut buf, 0).ok()?;
    let holder: LockHolder = serde_json::from_slice(&buf[..n]).ok()?;
    (holder.host != host_name() || process_exists(holder.pid)).then_some(holder)
}

/// Whether process `pid` exists on this host. Where there is no `/proc` to
/// ask, it is assumed to.
fn process_exists(pid: u32) -> bool {
    let proc = Path::new("/proc");
    !proc.join("self").exists() || proc.join(pid.to_string()).exists()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writer_alive_while_the_lock_is_held_and_not_after() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("journal.lock");
        assert_eq!(writer_alive(&path), Some(false), "no file, no writer");
        assert!(!path.exists(), "the probe creates nothing");
        let lock = RunLock::acquire(&path, "r").unwrap();
        assert_eq!(writer_alive(&path), Some(true));
        drop(lock);
        assert_eq!(writer_alive(&path), Some(false));
        // A probe never stands in a writer's way.
        let again = RunLock::acquire(&path, "r").unwrap();
        assert_eq!(writer_alive(&path), Some(true));
        drop(again);
    }
}
