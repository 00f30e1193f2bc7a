//! File operations below a root that never follow a symlink — the one place
//! for that rule, shared by every restore (workspace snapshots, checkpoints).
//!
//! Every directory on a path is opened relative to its parent with
//! `O_NOFOLLOW`, and the final operation is an `*at` call on that directory,
//! so a symlink anywhere on the way — even one swapped in while cairn works —
//! is refused (`ELOOP`), never followed. Only the root itself may be reached
//! through symlinks: it is the operator's choice.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;

/// Why a directory could not be reached safely.
#[derive(Debug)]
pub enum Reach {
    /// This prefix of the path is a symbolic link.
    Symlink(String),
    /// This prefix of the path is not a directory.
    NotDir(String),
    /// Another error.
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

fn classify(e: io::Error, at: &str) -> Reach {
    match e.raw_os_error() {
        Some(libc::ELOOP) => Reach::Symlink(at.to_owned()),
        Some(libc::ENOTDIR) => Reach::NotDir(at.to_owned()),
        _ => Reach::Io(e),
    }
}

/// Opens a root directory by path (symlinks in the root itself are followed).
///
/// # Errors
/// The directory cannot be opened.
pub fn open_root(root: &Path) -> io::Result<OwnedFd> {
    let c = CString::new(root.as_os_str().as_encoded_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))?;
    // SAFETY: `c` is NUL-terminated; the descriptor is owned by the OwnedFd.
    let fd = check(unsafe {
        libc::open(
            c.as_ptr(),
            libc::O_DIRECTORY | libc::O_RDONLY | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: `fd` was just returned by open and is owned by nothing else.
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
    // SAFETY: `fd` was just returned by openat and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Opens the directory `rel` (`/`-separated; `""` is `root`) below `root`
/// without following any symlink. With `create`, missing directories are
/// made (mode `0777` less the umask; the parent fsynced) and their relative
/// paths appended to `created`.
///
/// # Errors
/// [`Reach::Symlink`] or [`Reach::NotDir`] naming the prefix that is not a
/// plain directory; [`Reach::Io`] otherwise.
pub fn open_dir(
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
                    Ok(_) => {
                        sync_dir(&cur).map_err(Reach::Io)?;
                        created.push(so_far.clone());
                    }
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

/// Opens an absolute directory path from `/`, never following a symlink.
///
/// # Errors
/// As [`open_dir`], with the prefix shown absolute.
pub fn open_abs_dir(path: &str, create: bool) -> Result<OwnedFd, Reach> {
    let root = open_root(Path::new("/")).map_err(Reach::Io)?;
    open_dir(&root, path.trim_start_matches('/'), create, &mut Vec::new()).map_err(|r| match r {
        Reach::Symlink(p) => Reach::Symlink(format!("/{p}")),
        Reach::NotDir(p) => Reach::NotDir(format!("/{p}")),
        other => other,
    })
}

/// The directory part and last component of a `/`-separated path.
pub fn split(rel: &str) -> (&str, &str) {
    rel.rsplit_once('/').unwrap_or(("", rel))
}

/// `lstat` of `name` in `dir`.
///
/// # Errors
/// The entry does not exist or cannot be read.
pub fn lstat_at(dir: &OwnedFd, name: &str) -> io::Result<libc::stat> {
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

/// `lstat` of `name` in `dir`, `None` when it does not exist.
///
/// # Errors
/// It cannot be read.
pub fn lstat_if_exists(dir: &OwnedFd, name: &str) -> io::Result<Option<libc::stat>> {
    match lstat_at(dir, name) {
        Ok(st) => Ok(Some(st)),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// True when `st` describes a regular file.
pub fn is_regular(st: &libc::stat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFREG
}

/// True when `st` describes a directory.
pub fn is_dir(st: &libc::stat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFDIR
}

/// Creates a new file `name` in `dir` (`0600`, exclusive, not through a symlink).
///
/// # Errors
/// It exists or cannot be created.
pub fn create_at(dir: &OwnedFd, name: &str) -> io::Result<File> {
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
    // SAFETY: `fd` was just returned by openat and is owned by nothing else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Opens the existing file `name` in `dir` for reading, not through a
/// symlink (`ELOOP` on one).
///
/// # Errors
/// It does not exist, is a symlink, or cannot be opened.
pub fn open_file_at(dir: &OwnedFd, name: &str) -> io::Result<File> {
    let c = cstr(name)?;
    // SAFETY: valid descriptor and NUL-terminated name; the new descriptor is
    // owned by the File below.
    let fd = check(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c.as_ptr(),
            libc::O_RDONLY | libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: `fd` was just returned by openat and is owned by nothing else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Renames `from` to `to`, both in `dir` (a symlink at `to` is replaced,
/// never followed).
///
/// # Errors
/// The rename fails.
pub fn rename_at(dir: &OwnedFd, from: &str, to: &str) -> io::Result<()> {
    let (a, b) = (cstr(from)?, cstr(to)?);
    // SAFETY: valid descriptor and NUL-terminated names.
    check(unsafe { libc::renameat(dir.as_raw_fd(), a.as_ptr(), dir.as_raw_fd(), b.as_ptr()) })?;
    Ok(())
}

/// Removes the file `name` from `dir` (a symlink is removed, not followed).
///
/// # Errors
/// The unlink fails.
pub fn unlink_at(dir: &OwnedFd, name: &str) -> io::Result<()> {
    let c = cstr(name)?;
    // SAFETY: valid descriptor and NUL-terminated name.
    check(unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), 0) })?;
    Ok(())
}

/// Removes the empty directory `name` from `dir`.
///
/// # Errors
/// It is not empty, or the removal fails.
pub fn rmdir_at(dir: &OwnedFd, name: &str) -> io::Result<()> {
    let c = cstr(name)?;
    // SAFETY: valid descriptor and NUL-terminated name.
    check(unsafe { libc::unlinkat(dir.as_raw_fd(), c.as_ptr(), libc::AT_REMOVEDIR) })?;
    Ok(())
}

/// Sets the permission bits of `name` in `dir` without following a symlink
/// (fails with `ENOTSUP`/`EOPNOTSUPP` on one).
///
/// # Errors
/// The change fails.
pub fn chmod_at(dir: &OwnedFd, name: &str, mode: u32) -> io::Result<()> {
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
///
/// # Errors
/// The fsync fails.
pub fn sync_dir(dir: &OwnedFd) -> io::Result<()> {
    // SAFETY: valid descriptor.
    check(unsafe { libc::fsync(dir.as_raw_fd()) })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_symlinked_directory_is_refused_and_named() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("real/inner")).unwrap();
        std::os::unix::fs::symlink(d.path().join("real"), d.path().join("link")).unwrap();
        let root = open_root(d.path()).unwrap();
        let mut made = Vec::new();
        assert!(open_dir(&root, "real/inner", false, &mut made).is_ok());
        // Linux reports a symlink met with O_DIRECTORY|O_NOFOLLOW as ENOTDIR
        // or ELOOP; either way it is refused, and the prefix is named.
        match open_dir(&root, "link/inner", true, &mut made) {
            Err(Reach::Symlink(at) | Reach::NotDir(at)) => assert_eq!(at, "link"),
            other => panic!("{other:?}"),
        }
        assert!(made.is_empty());
        open_dir(&root, "new/deeper", true, &mut made).unwrap();
        assert_eq!(made, ["new", "new/deeper"]);
    }
}
