//! The two system calls the shell tool needs that std does not wrap at our MSRV.

use std::io;
use std::os::fd::{FromRawFd, OwnedFd};

/// Creates a pipe whose ends are closed on exec; returns `(read end, write end)`.
pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as libc::c_int; 2];
    // SAFETY: `fds` is a valid array of two ints for pipe(2) to fill.
    #[cfg(any(target_os = "linux", target_os = "android", target_os = "freebsd"))]
    let rc = unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) };
    // SAFETY: as above.
    #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
    let rc = unsafe { libc::pipe(fds.as_mut_ptr()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: pipe(2) succeeded, so both descriptors are open and owned by nobody else.
    let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
    #[cfg(not(any(target_os = "linux", target_os = "android", target_os = "freebsd")))]
    for fd in [&read, &write] {
        use std::os::fd::AsRawFd;
        // SAFETY: `fd` is an open descriptor we own.
        if unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_SETFD, libc::FD_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok((read, write))
}

/// Sends SIGKILL to every process in the process group `pgid`. Errors (the group is
/// already gone) are ignored.
pub(crate) fn kill_group(pgid: libc::pid_t) {
    if pgid <= 1 {
        return; // Never signal "every process" or init's group by mistake.
    }
    // SAFETY: kill(2) with a negative pid only sends a signal; it touches no memory.
    unsafe {
        libc::kill(-pgid, libc::SIGKILL);
    }
}
