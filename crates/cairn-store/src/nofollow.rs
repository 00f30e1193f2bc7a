//! File operations below a root that never follow a symlink — the one place
//! for that rule, shared by the tools and every restore (workspace snapshots,
//! checkpoints).
//!
//! Every directory on a path is reached by the one resolver,
//! [`open_beneath`] (`openat2` with `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`
//! on Linux, a component-wise `O_NOFOLLOW` walk elsewhere), and the final
//! operation is an `*at` call on that directory, so a symlink anywhere on the
//! way — even one swapped in while cairn works — is refused, never followed.
//! Only the root itself may be reached through symlinks: it is the
//! operator's choice.
//!
//! Invariants of the file operations here:
//! - files are opened with `O_NOFOLLOW`, and for reading also `O_NONBLOCK`,
//!   so a FIFO or device put where a file was expected cannot hang the
//!   caller; the caller checks the kind on the opened descriptor;
//! - [`replace_at`] stages a [`crate::safe::temp_name`] file in the target's
//!   own directory descriptor, fsyncs it, renames it over the target inside
//!   that descriptor, and fsyncs the directory; on failure the temporary
//!   file is removed.

use std::ffi::{CString, OsStr, OsString};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::beneath::{check, cstr};
pub use crate::beneath::{open_beneath, Beneath, DirId, Unreachable};
use crate::storage;

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

impl From<Unreachable> for Reach {
    fn from(u: Unreachable) -> Reach {
        match u {
            Unreachable::Symlink(p) => Reach::Symlink(p),
            Unreachable::NotDir(p) => Reach::NotDir(p),
            Unreachable::Missing(_) => Reach::Io(io::Error::from_raw_os_error(libc::ENOENT)),
            Unreachable::Io(_, e) => Reach::Io(e),
            other => Reach::Io(io::Error::new(
                io::ErrorKind::InvalidInput,
                other.to_string(),
            )),
        }
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
    let how = Beneath {
        create,
        ..Beneath::default()
    };
    open_beneath(root, rel, how, created).map_err(Reach::from)
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
    crate::beneath::lstat(dir.as_fd(), name)
}

/// `fstat` of an open file or directory.
///
/// # Errors
/// The `fstat` fails.
pub fn stat_of(fd: impl AsFd) -> io::Result<libc::stat> {
    crate::beneath::fstat(fd)
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
    create_new_at(dir, name, 0o600)
}

/// Creates a new file `name` in `dir` for writing with `mode` (less the
/// umask), exclusively and not through a symlink.
///
/// # Errors
/// It exists or cannot be created.
pub fn create_new_at(dir: &OwnedFd, name: &str, mode: u32) -> io::Result<File> {
    let c = cstr(name)?;
    // SAFETY: valid descriptor and NUL-terminated name; the new descriptor is
    // owned by the File below.
    let fd = check(unsafe {
        libc::openat(
            dir.as_raw_fd(),
            c.as_ptr(),
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            mode as libc::c_uint,
        )
    })?;
    // SAFETY: `fd` was just returned by openat and is owned by nothing else.
    let file = unsafe { File::from_raw_fd(fd) };
    if let Some(p) = storage::path_at(dir.as_fd(), name) {
        storage::created_file(&p);
    }
    Ok(file)
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
    if let (Some(f), Some(t)) = (
        storage::path_at(dir.as_fd(), from),
        storage::path_at(dir.as_fd(), to),
    ) {
        storage::renamed(&f, &t);
    }
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
    if let Some(p) = storage::path_at(dir.as_fd(), name) {
        storage::removed(&p);
    }
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
    if let Some(p) = storage::path_at(dir.as_fd(), name) {
        storage::removed(&p);
    }
    Ok(())
}

/// Makes `name` in `dir` a directory with exactly the permission bits
/// `mode` when it is missing, and opens it without following a symlink;
/// true with it when this call made it. An existing directory is opened as
/// it is. The new entry is NOT made durable: the caller fsyncs `dir` before
/// anything names what it puts inside (one fsync for many new directories,
/// as a batch of objects does).
///
/// # Errors
/// [`Unreachable::Symlink`] or [`Unreachable::NotDir`] when `name` is a
/// symlink or not a directory; [`Unreachable::Io`] when it cannot be made,
/// opened or given its mode.
pub fn make_dir_at(dir: &OwnedFd, name: &str, mode: u32) -> Result<(OwnedFd, bool), Unreachable> {
    let io = |e| Unreachable::Io(name.to_owned(), e);
    let c = cstr(name).map_err(io)?;
    // SAFETY: valid descriptor and NUL-terminated name.
    let made = match check(unsafe { libc::mkdirat(dir.as_raw_fd(), c.as_ptr(), mode as _) }) {
        Ok(_) => true,
        Err(e) if e.raw_os_error() == Some(libc::EEXIST) => false,
        Err(e) => return Err(io(e)),
    };
    if made {
        if let Some(p) = storage::path_at(dir.as_fd(), name) {
            storage::created_dir(&p);
        }
    }
    let fd = open_beneath(dir, name, Beneath::default(), &mut Vec::new())?;
    if made {
        // The umask may have narrowed the mode; make it exact.
        rustix::fs::fchmod(&fd, rustix::fs::Mode::from_raw_mode(mode as _))
            .map_err(|e| io(e.into()))?;
    }
    Ok((fd, made))
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
    storage::sync_fd(dir.as_fd(), true, "dir")
}

/// What a directory entry or a `stat` result is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum FileKind {
    /// A regular file.
    File,
    /// A directory.
    Dir,
    /// A symbolic link.
    Symlink,
    /// A FIFO (named pipe).
    Fifo,
    /// A Unix socket.
    Socket,
    /// A character device.
    CharDevice,
    /// A block device.
    BlockDevice,
    /// Something the system did not name.
    Unknown,
}

impl FileKind {
    /// The kind in a `stat` result.
    pub fn of(st: &libc::stat) -> FileKind {
        FileKind::of_type(rustix::fs::FileType::from_raw_mode(st.st_mode))
    }

    fn of_type(t: rustix::fs::FileType) -> FileKind {
        use rustix::fs::FileType;
        match t {
            FileType::RegularFile => FileKind::File,
            FileType::Directory => FileKind::Dir,
            FileType::Symlink => FileKind::Symlink,
            FileType::Fifo => FileKind::Fifo,
            FileType::Socket => FileKind::Socket,
            FileType::CharacterDevice => FileKind::CharDevice,
            FileType::BlockDevice => FileKind::BlockDevice,
            _ => FileKind::Unknown,
        }
    }

    /// The kind in words, with its article: `a FIFO (named pipe)`.
    pub fn describe(self) -> &'static str {
        match self {
            FileKind::File => "a regular file",
            FileKind::Dir => "a directory",
            FileKind::Symlink => "a symbolic link",
            FileKind::Fifo => "a FIFO (named pipe)",
            FileKind::Socket => "a socket",
            FileKind::CharDevice => "a character device",
            FileKind::BlockDevice => "a block device",
            FileKind::Unknown => "a file of unknown kind",
        }
    }
}

/// One entry of [`read_dir_at`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// The entry's name, as the file system has it (not always UTF-8).
    pub name: OsString,
    /// What it is, not following a symlink.
    pub kind: FileKind,
}

/// The entries of an open directory, `.` and `..` left out, in the order
/// the file system gives them. Read through a descriptor of its own, so the
/// position of `dir` is untouched. An entry removed while it is read is left
/// out; one whose kind cannot be read is [`FileKind::Unknown`].
///
/// # Errors
/// The directory cannot be read.
pub fn read_dir_at(dir: &OwnedFd) -> io::Result<Vec<Entry>> {
    use rustix::fs::{AtFlags, FileType};
    let mut stream = rustix::fs::Dir::read_from(dir)?;
    let mut out = Vec::new();
    while let Some(entry) = stream.read() {
        let entry = entry?;
        let name = entry.file_name();
        if matches!(name.to_bytes(), b"." | b"..") {
            continue;
        }
        let kind = match entry.file_type() {
            // Some file systems do not fill in d_type: ask without following.
            FileType::Unknown => match rustix::fs::statat(dir, name, AtFlags::SYMLINK_NOFOLLOW) {
                Ok(st) => FileKind::of_type(FileType::from_raw_mode(st.st_mode)),
                Err(rustix::io::Errno::NOENT) => continue,
                Err(_) => FileKind::Unknown,
            },
            known => FileKind::of_type(known),
        };
        out.push(Entry {
            name: OsStr::from_bytes(name.to_bytes()).to_os_string(),
            kind,
        });
    }
    Ok(out)
}

/// Why [`replace_at`] failed: the step, and the system's error.
#[derive(Debug, thiserror::Error)]
#[error("could not {action}: {source}")]
pub struct ReplaceError {
    /// The step that failed, e.g. `write` or `sync the directory of`, to be
    /// followed by the file's name.
    pub action: &'static str,
    /// The underlying error.
    #[source]
    pub source: io::Error,
}

/// Replaces or creates the file `name` in `dir` with `bytes`, atomically
/// and durably: a new [`crate::safe::temp_name`] file in `dir` is written
/// and fsynced, renamed over `name` inside `dir` (a symlink at `name` is
/// replaced, never followed), and `dir` is fsynced. The file gets the
/// permission bits of `mode` ([`crate::safe::permission_bits`]), or with
/// `None` mode `0666` less the umask, as a new file made by any tool. On
/// failure the temporary file is removed and `name` is untouched, unless
/// only the final directory fsync failed (then the new file is in place
/// but not known to be durable; that is not retried).
///
/// # Errors
/// The step that failed.
pub fn replace_at(
    dir: &OwnedFd,
    name: &str,
    bytes: &[u8],
    mode: Option<u32>,
) -> Result<(), ReplaceError> {
    let fail = |action| move |source| ReplaceError { action, source };
    let temp = crate::safe::temp_name();
    let initial = if mode.is_some() { 0o600 } else { 0o666 };
    let mut file =
        create_new_at(dir, &temp, initial).map_err(fail("create a temporary file beside"))?;
    let staged = Staged { dir, temp: &temp };
    if let Some(mode) = mode {
        use std::os::unix::fs::PermissionsExt;
        let bits = crate::safe::permission_bits(mode);
        file.set_permissions(std::fs::Permissions::from_mode(bits))
            .map_err(fail("set the permissions of"))?;
    }
    file.write_all(bytes).map_err(fail("write"))?;
    if let Some(p) = storage::path_at(dir.as_fd(), &temp) {
        storage::wrote(&p, 0, bytes);
    }
    storage::sync_fd(file.as_fd(), false, "replace.file").map_err(fail("sync"))?;
    drop(file);
    rename_at(dir, &temp, name).map_err(fail("replace"))?;
    std::mem::forget(staged);
    sync_dir(dir).map_err(fail("sync the directory of"))
}

/// Removes a staged temporary file unless forgotten.
struct Staged<'a> {
    dir: &'a OwnedFd,
    temp: &'a str,
}

impl Drop for Staged<'_> {
    fn drop(&mut self) {
        let _ = unlink_at(self.dir, self.temp);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::ffi::OsStringExt;

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

    #[test]
    fn replace_at_stages_in_the_directory_and_keeps_only_the_permission_bits() {
        use std::os::unix::fs::PermissionsExt;
        let d = tempfile::tempdir().unwrap();
        let dir = open_root(d.path()).unwrap();
        replace_at(&dir, "f", b"one", None).unwrap();
        assert_eq!(std::fs::read(d.path().join("f")).unwrap(), b"one");
        replace_at(&dir, "f", b"two", Some(0o4755)).unwrap();
        let meta = std::fs::metadata(d.path().join("f")).unwrap();
        assert_eq!(meta.permissions().mode() & 0o7777, 0o755);
        assert_eq!(std::fs::read(d.path().join("f")).unwrap(), b"two");
        // A symlink at the name is replaced, its target untouched.
        let outside = tempfile::tempdir().unwrap();
        std::fs::write(outside.path().join("t"), "keep").unwrap();
        std::os::unix::fs::symlink(outside.path().join("t"), d.path().join("l")).unwrap();
        replace_at(&dir, "l", b"new", None).unwrap();
        assert_eq!(
            std::fs::read_to_string(outside.path().join("t")).unwrap(),
            "keep"
        );
        // A failed rename (a directory is there) leaves no temporary file.
        std::fs::create_dir(d.path().join("sub")).unwrap();
        std::fs::write(d.path().join("sub/x"), "").unwrap();
        let err = replace_at(&dir, "sub", b"x", None).unwrap_err();
        assert_eq!(err.action, "replace");
        let mut names: Vec<_> = read_dir_at(&dir)
            .unwrap()
            .into_iter()
            .map(|e| (e.name.into_string().unwrap(), e.kind))
            .collect();
        names.sort_by(|a, b| a.0.cmp(&b.0));
        assert_eq!(
            names,
            [
                ("f".to_owned(), FileKind::File),
                ("l".to_owned(), FileKind::File),
                ("sub".to_owned(), FileKind::Dir),
            ]
        );
    }

    #[test]
    fn read_dir_at_names_every_kind_without_following() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("file"), "").unwrap();
        std::fs::create_dir(d.path().join("dir")).unwrap();
        std::os::unix::fs::symlink("dir", d.path().join("link")).unwrap();
        let fifo =
            std::ffi::CString::new(d.path().join("fifo").into_os_string().into_vec()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o600) }, 0);
        let dir = open_root(d.path()).unwrap();
        let mut got: Vec<_> = read_dir_at(&dir)
            .unwrap()
            .into_iter()
            .map(|e| (e.name.into_string().unwrap(), e.kind))
            .collect();
        got.sort_by(|a, b| a.0.cmp(&b.0));
        let want = [
            ("dir", FileKind::Dir),
            ("fifo", FileKind::Fifo),
            ("file", FileKind::File),
            ("link", FileKind::Symlink),
        ];
        assert_eq!(got, want.map(|(n, k)| (n.to_owned(), k)));
        assert_eq!(
            FileKind::of(&lstat_at(&dir, "fifo").unwrap()),
            FileKind::Fifo
        );
        assert_eq!(FileKind::Fifo.describe(), "a FIFO (named pipe)");
    }
}
