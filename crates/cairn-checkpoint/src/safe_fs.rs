//! Writing files without following symlinks: every directory is opened
//! relative to its parent with `O_NOFOLLOW`, and the final operations are
//! `*at` calls on that directory, so a symlink anywhere on the way is refused,
//! never followed. New files are written under a temporary name, fsynced,
//! renamed over the target and the directory fsynced.

use std::ffi::CString;
use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use cairn_objects::{ObjectHash, ObjectPool};

use crate::CheckpointError;

/// Prefix of the temporary files a restore stages next to their targets.
pub(crate) const TEMP_PREFIX: &str = ".cairn-tmp-";

/// Why a directory could not be reached safely.
#[derive(Debug)]
pub(crate) enum Reach {
    /// This prefix of the path is a symbolic link.
    Symlink(String),
    /// This prefix is not a directory.
    NotDir(String),
    /// Another error.
    Io(io::Error),
}

impl Reach {
    /// The refusal or error for `path` of checkpoint `id`.
    pub(crate) fn into_error(self, id: &str, path: &str) -> CheckpointError {
        let unsafe_path = |reason: String| CheckpointError::UnsafePath {
            id: id.to_owned(),
            path: path.to_owned(),
            reason,
        };
        match self {
            Reach::Symlink(at) => unsafe_path(format!(
                "`{at}` is a symbolic link, and cairn never writes through one"
            )),
            Reach::NotDir(at) => unsafe_path(format!("`{at}` is not a directory")),
            Reach::Io(e) => CheckpointError::io("reaching", path, e),
        }
    }
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

/// Opens a directory by path, following symlinks (for roots the operator
/// chose, like the directory a fork is materialised into).
pub(crate) fn open_dir_path(path: &Path) -> io::Result<OwnedFd> {
    let c = CString::new(path.as_os_str().as_encoded_bytes())
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
    // SAFETY: valid descriptor and NUL-terminated name; the new descriptor
    // is owned by the OwnedFd below.
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

/// Opens `rel` (`/`-separated, `""` = `root`) below `root` without following
/// any symlink, creating missing directories (mode `0777` less the umask)
/// when `create`.
pub(crate) fn open_dir_in(root: &OwnedFd, rel: &str, create: bool) -> Result<OwnedFd, Reach> {
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
                    Ok(_) => sync_dir(&cur).map_err(Reach::Io)?,
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
pub(crate) fn open_abs_dir(path: &str, create: bool) -> Result<OwnedFd, Reach> {
    let root = open_dir_path(Path::new("/")).map_err(Reach::Io)?;
    open_dir_in(&root, path.trim_start_matches('/'), create).map_err(|r| match r {
        Reach::Symlink(p) => Reach::Symlink(format!("/{p}")),
        Reach::NotDir(p) => Reach::NotDir(format!("/{p}")),
        other => other,
    })
}

/// The directory part and last component of a `/`-separated path.
pub(crate) fn split(rel: &str) -> (&str, &str) {
    rel.rsplit_once('/').unwrap_or(("", rel))
}

fn classify(e: io::Error, at: &str) -> Reach {
    match e.raw_os_error() {
        Some(libc::ELOOP) => Reach::Symlink(at.to_owned()),
        Some(libc::ENOTDIR) => Reach::NotDir(at.to_owned()),
        _ => Reach::Io(e),
    }
}

/// `lstat` of `name` in `dir`: `None` when it does not exist.
pub(crate) fn lstat_at(dir: &OwnedFd, name: &str) -> io::Result<Option<libc::stat>> {
    let c = cstr(name)?;
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor, NUL-terminated name, pointer to a live `stat`.
    let rc = unsafe {
        libc::fstatat(
            dir.as_raw_fd(),
            c.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    };
    match check(rc) {
        Ok(_) => Ok(Some(st)),
        Err(e) if e.raw_os_error() == Some(libc::ENOENT) => Ok(None),
        Err(e) => Err(e),
    }
}

/// True when `st` describes a directory.
pub(crate) fn is_dir(st: &libc::stat) -> bool {
    st.st_mode & libc::S_IFMT == libc::S_IFDIR
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
    // SAFETY: `fd` was just returned by openat and is owned by nothing else.
    Ok(unsafe { File::from_raw_fd(fd) })
}

/// Opens the existing file `name` in `dir` for reading, not through a
/// symlink (`ELOOP` on one).
pub(crate) fn open_file_at(dir: &OwnedFd, name: &str) -> io::Result<File> {
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

/// Renames `from` to `to` in `dir` (a symlink at `to` is replaced, never
/// followed).
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

/// fsync of an open directory.
pub(crate) fn sync_dir(dir: &OwnedFd) -> io::Result<()> {
    // SAFETY: valid descriptor.
    check(unsafe { libc::fsync(dir.as_raw_fd()) })?;
    Ok(())
}

/// Writes the content of object `hash` (verified on the way) with `mode`
/// into a new temporary file in `dir`, fsynced; returns its name. On error
/// the temporary file is removed.
pub(crate) fn stage(
    pool: &ObjectPool,
    dir: &OwnedFd,
    hash: &ObjectHash,
    mode: u32,
    shown: &str,
) -> Result<String, CheckpointError> {
    let temp = format!(
        "{TEMP_PREFIX}{}",
        ulid::Ulid::new().to_string().to_lowercase()
    );
    let file = create_at(dir, &temp)
        .map_err(|e| CheckpointError::io("creating a temporary file for", shown, e))?;
    let result = (|| -> Result<(), CheckpointError> {
        let mut out = BufWriter::with_capacity(1 << 20, &file);
        pool.read_to(hash, &mut out)?;
        out.flush()
            .map_err(|e| CheckpointError::io("writing", shown, e))?;
        drop(out);
        file.set_permissions(std::fs::Permissions::from_mode(mode & 0o7777))
            .map_err(|e| CheckpointError::io("setting the mode of", shown, e))?;
        file.sync_all()
            .map_err(|e| CheckpointError::io("syncing", shown, e))
    })();
    match result {
        Ok(()) => Ok(temp),
        Err(e) => {
            let _ = unlink_at(dir, &temp);
            Err(e)
        }
    }
}
