//! "Now" as the store's file system sees it.
//!
//! File times are stamped by the kernel's file-system clock, which may lag
//! the system clock (coarse timestamps) and, on a network file system, is
//! another machine's. The racy guard compares file times with the start of a
//! capture, so it measures that start the same way: it sets a file in the
//! store to "now" and reads the time back.

use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use crate::WorkspaceError;

/// Nanoseconds since the epoch on the store's file-system clock.
pub(crate) fn store_now(path: &Path) -> Result<i64, WorkspaceError> {
    let file = cairn_store::durable::open_or_create_private(path)
        .map_err(|e| WorkspaceError::io("opening the clock file", path, e))?;
    // SAFETY: futimens with a null times pointer sets both times of the open
    // descriptor to the current time; no memory is passed.
    let rc = unsafe { libc::futimens(file.as_raw_fd(), std::ptr::null()) };
    if rc != 0 {
        return Err(WorkspaceError::io(
            "touching the clock file",
            path,
            std::io::Error::last_os_error(),
        ));
    }
    let m = file
        .metadata()
        .map_err(|e| WorkspaceError::io("reading the clock file", path, e))?;
    Ok(cairn_store::safe::mtime_ns(m.mtime(), m.mtime_nsec()))
}
