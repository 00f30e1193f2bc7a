//! File operations inside the workspace that never follow a symlink and
//! never leave the root: every directory on a path is opened relative to its
//! parent with `O_NOFOLLOW`, and the final operation is an `*at` call on that
//! directory, so a symlink swapped in at any point is refused, not followed.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// Why a path could not be reached safely.
#[derive(Debug)]
pub(crate) enum Reach {
    /// A component (the relative prefix given) is a symlink.
    Symlink(String),
    /// A component is not a directory.
    NotDir(String),
    /// Some other error.
    Io(io::Error),
}

fn cstr(s: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))
}

fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Opens the workspace root (the root itself may be reached via symlinks;
/// it is the operator's choice).
pub(crate) fn open_root(root: &Path) -> io::Result<OwnedFd> {
    let c = CString::new(root.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
    // SAFETY: `c` is a valid NUL-terminated string; the returned descriptor is
    // owned by the OwnedFd below.
    let fd = check(unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_DIRECTORY | libc::O_RDONLY | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: `fd` was just returned by open and is not owned elsewhere.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn open_dir_at(parent: &OwnedFd, name: &str) -> io::Result<OwnedFd> {
    let c = cstr(name)?;
    // SAFETY: valid descriptor and NUL-terminated name; the new descriptor is
    // owned by the OwnedFd below.
    let fd = check(unsafe {
        libc::openat(
            parent.as_raw_fd(),
            c.as_ptr(),
            libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_RDONLY | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: `fd` was just returned by openat and is not owned elsewhere.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens the directory `rel` (`""` is the root) without following any
/// symlink. With `create`, missing directories are made (mode `0777` less
/// the umask) and their relative paths appended to `created`.
pub(crate) fn open_dir(
    root: &OwnedFd,
    rel: &str,
    create: bool,
    created: &mut Vec<String>,
) -> Result<OwnedFd, Reach> {
    let mut cur = root.try_clone().map_err(Reach::Io)?;
    let mut so_far = String::new();
    for comp in rel.split('/').filter(|c| !c.is_empty()) {
        if !so_far.is_empty() {
            so_far.push('/');
        }
        so_far.push_str(comp);
        cur = match open_dir_at(&cur, comp) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) && create => {
                let c = cstr(comp).map_err(Reach::Io)?;
                // SAFETY: valid descriptor and NUL-terminated name.
                match check(unsafe { libc::mkdirat(cur.as_raw_fd(), c.as_ptr(), 0o777) }) {
                    Ok(_) => created.push(so_far.clone()),
                    Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
                    Err(e) => return Err(Reach::Io(e)),
                }
                open_dir_at(&cur, comp).map_err(|e| classify(e, &so_far))?
            }
            Err(e) => return Err(classify(e, &so_far)),
        };
    }
    Ok(cur)
}

/// Opens the directory holding `rel` and returns it with the last component.
pub(crate) fn open_parent(
    root: &OwnedFd,
    rel: &str,
    create: bool,
    created: &mut Vec<String>,
) -> Result<(OwnedFd, String), Reach> {
    let (dir, name) = rel.rsplit_once('/').unwrap_or(("", rel));
    Ok((open_dir(root, dir, create, created)?, name.to_owned()))
}

fn classify(e: io::Error, at: &str) -> Reach {
    match e.raw_os_error() {
        Some(libc::ELOOP) => Reach::Symlink(at.to_owned()),
        Some(libc::ENOTDIR) => Reach::NotDir(at.to_owned()),
        _ => Reach::Io(e),
    }
}

/// `lstat` of `name` in `dir`.
pub(crate) fn lstat_at(dir: &OwnedFd, name: &str) -> io::Result<libc::stat> {
    let c = cstr(name)?;
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor, NUL-terminated name, and a pointer to a live
    // `stat` the kernel fills in.
    check(unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            c.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })?;
    Ok(st)
}

/// True when `st` describes a regular file.
pub(crate) fn is_regular(st: &libc::stat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFREG
}

/// Creates a new file `name` in `dir` (`0600`, exclusive, not through a symlink).
pub(crate) fn create_at(dir: &OwnedFd, name: &str) -> io::Result<File> {
    let c = cstr(name)?;
    // SAFETY: valid descriptor and NUL-terminated name; the new descriptor is
    // owned by the File below.
    let fd = check(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            0o600 as libc::c_uint,
        )
    })?;
    // SAFETY: `fd` was just returned by openat and is not owned elsewhere.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Renames `from` to `to`, both in `dir` (replacing `to`; a symlink at `to`
/// is replaced, never followed).
pub(crate) fn rename_at(dir: &OwnedFd, from: &str, to: &str) -> io::Result<()> {
    let (a, b) = (cstr(from)?, cstr(to)?);
    // SAFETY: valid descriptor and NUL-terminated names.
    check(unsafe { libc::renameat(dir.as_raw_fd(), a.as_ptr(), dir.as_raw_fd(), b.as_ptr()) })?;
    Ok(())
}

/// Removes the file `name` from `dir` (a symlink is removed, not followed).
pub(crate) fn unlink_at(dir: &OwnedFd, name: &str) -> io::Result<()> {
    let c = cstr(name)?;
    // SAFETY: valid descriptor and NUL-terminated name.
    check(unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) })?;
    Ok(())
}

/// Removes the empty directory `name` from `dir`.
pub(crate) fn rmdir_at(dir: &OwnedFd, name: &str) -> io::Result<()> {
    let c = cstr(name)?;
    // SAFETY: valid descriptor and NUL-terminated name.
    check(unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), libc::AT_REMOVEDIR) })?;
    Ok(())
}

/// Sets the permission bits of `name` in `dir` without following a symlink
/// (fails with `ENOTSUP`/`EOPNOTSUPP` on one).
pub(crate) fn chmod_at(dir: &OwnedFd, name: &str, mode: u32) -> io::Result<()> {
    let c = cstr(name)?;
    // SAFETY: valid descriptor and NUL-terminated name.
    check(unsafe {
        libc::fchmodat(
            dir.as_raw_fd(),
            c.as_ptr(),
            mode as libc::mode_t,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })?;
    Ok(())
}

/// fsync of an open directory.
pub(crate) fn sync_dir(dir: &OwnedFd) -> io::Result<()> {
    // SAFETY: valid descriptor.
    check(unsafe { libc::fsync(dir.as_raw_fd()) })?;
    Ok(())
}
