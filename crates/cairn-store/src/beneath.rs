//! The one resolver of a relative directory path beneath a directory
//! descriptor, for the tools and every restore (re-exported by
//! [`crate::nofollow`]).
//!
//! Invariants:
//!
//! 1. **Nothing is followed.** No component may be a symbolic link (magic
//!    links included), `.`, `..` or absolute; repeated `/` are skipped. A
//!    path with a `.` or `..` component is refused before any system call.
//! 2. **Every step is relative to the descriptor of the step before**, never
//!    a path string from the root. A directory swapped for a symlink while
//!    the resolver runs is seen either as the directory (and opened) or as
//!    the symlink (and refused); it is never followed.
//! 3. **Directories are created inside their opened parent**: a missing
//!    component is made with `mkdirat` on the parent's descriptor, one
//!    component at a time, the parent is fsynced, and the new directory is
//!    opened with the same no-follow rule (so a symlink raced in between is
//!    refused too).
//! 4. **Refused directories** ([`Beneath::refuse`]) are checked by identity
//!    (`st_dev`, `st_ino`) on the descriptor of every directory the walk
//!    opens, the last one included, so no name, case or bind mount hides one.
//!    The root itself is not checked: it is the caller's choice.
//!
//! On Linux the whole path is opened by one `openat2` with
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS` when
//! nothing has to be created or checked on the way. Everywhere else, and
//! when `openat2` is missing (`ENOSYS`, or refused by a seccomp filter), or
//! fails for any reason, the component walk runs: it is correct on its own,
//! and it names the component that is a symlink or not a directory.

use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd};

/// The identity of a directory: its device and inode numbers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DirId {
    /// `st_dev`.
    pub dev: u64,
    /// `st_ino`.
    pub ino: u64,
}

impl DirId {
    /// The identity in a `stat` result.
    // The widths of st_dev and st_ino differ between platforms.
    #[allow(clippy::unnecessary_cast)]
    pub fn of(st: &libc::stat) -> DirId {
        DirId {
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
        }
    }

    /// The identity of an open descriptor (`fstat`).
    ///
    /// # Errors
    /// The `fstat` fails.
    pub fn of_fd(fd: impl AsFd) -> io::Result<DirId> {
        Ok(DirId::of(&fstat(fd)?))
    }
}

/// How [`open_beneath`] treats the path.
#[derive(Debug, Clone, Copy, Default)]
pub struct Beneath<'a> {
    /// Create missing directories (mode `0777` less the umask, the parent
    /// fsynced after each). Default: false.
    pub create: bool,
    /// Directories that must not be on the path, by identity. Default: none.
    pub refuse: &'a [DirId],
}

/// Why [`open_beneath`] did not open a directory. Each variant names the
/// `/`-separated prefix of the path where it stopped.
#[derive(Debug)]
#[non_exhaustive]
pub enum Unreachable {
    /// This prefix is a symbolic link.
    Symlink(String),
    /// This prefix is not a directory.
    NotDir(String),
    /// This prefix does not exist (and nothing was to be created). With
    /// `openat2` the whole path is named, as the kernel does not say which
    /// component was missing; everything before it is a plain directory.
    Missing(String),
    /// This prefix is one of [`Beneath::refuse`].
    Refused(String),
    /// The path has a `.` or `..` component (named).
    Invalid(String),
    /// Another error at this prefix.
    Io(String, io::Error),
}

impl fmt::Display for Unreachable {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Unreachable::Symlink(p) => write!(f, "`{p}` is a symbolic link"),
            Unreachable::NotDir(p) => write!(f, "`{p}` is not a directory"),
            Unreachable::Missing(p) => write!(f, "`{p}` does not exist"),
            Unreachable::Refused(p) => write!(f, "`{p}` is a protected directory"),
            Unreachable::Invalid(p) => write!(f, "`{p}` has a `.` or `..` component"),
            Unreachable::Io(p, e) => write!(f, "cannot open `{p}`: {e}"),
        }
    }
}

impl std::error::Error for Unreachable {}

/// Opens the directory `rel` (`/`-separated components; `""` is `root`
/// itself) beneath `root`, following no symlink at any component (module
/// doc). With [`Beneath::create`], the relative paths of the directories it
/// made are appended to `created`, in order.
///
/// # Errors
/// The [`Unreachable`] case, naming the prefix where the walk stopped.
pub fn open_beneath(
    root: &OwnedFd,
    rel: &str,
    how: Beneath<'_>,
    created: &mut Vec<String>,
) -> Result<OwnedFd, Unreachable> {
    open_with(root.as_fd(), rel, how, created, true)
}

/// [`open_beneath`], choosing whether the one-call `openat2` may be used
/// (tests run both ways).
pub(crate) fn open_with(
    root: BorrowedFd<'_>,
    rel: &str,
    how: Beneath<'_>,
    created: &mut Vec<String>,
    allow_openat2: bool,
) -> Result<OwnedFd, Unreachable> {
    let comps = components(rel)?;
    if comps.is_empty() {
        return root
            .try_clone_to_owned()
            .map_err(|e| Unreachable::Io(String::new(), e));
    }
    #[cfg(any(target_os = "linux", target_os = "android"))]
    if allow_openat2 && how.refuse.is_empty() {
        match openat2::open(root, &comps) {
            openat2::Outcome::Opened(fd) => return Ok(fd),
            openat2::Outcome::Missing if !how.create => {
                return Err(Unreachable::Missing(comps.join("/")));
            }
            openat2::Outcome::Missing | openat2::Outcome::Walk => {}
        }
    }
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let _ = allow_openat2;
    walk(root, &comps, how, created)
}

/// The plain components of `rel`: empty ones skipped, `.` and `..` refused.
fn components(rel: &str) -> Result<Vec<&str>, Unreachable> {
    let comps: Vec<&str> = rel.split('/').filter(|c| !c.is_empty()).collect();
    if comps.iter().any(|c| *c == "." || *c == "..") {
        return Err(Unreachable::Invalid(rel.to_owned()));
    }
    Ok(comps)
}

/// The component walk of invariants 2–4.
fn walk(
    root: BorrowedFd<'_>,
    comps: &[&str],
    how: Beneath<'_>,
    created: &mut Vec<String>,
) -> Result<OwnedFd, Unreachable> {
    let mut cur: Option<OwnedFd> = None;
    let mut so_far = String::new();
    for comp in comps {
        if !so_far.is_empty() {
            so_far.push('/');
        }
        so_far.push_str(comp);
        let at = cur.as_ref().map_or(root, |fd| fd.as_fd());
        let io = |e| Unreachable::Io(so_far.clone(), e);
        let next = match open_dir_at(at, comp) {
            Ok(fd) => fd,
            Err(e) if e.raw_os_error() == Some(libc::ENOENT) && how.create => {
                let c = cstr(comp).map_err(io)?;
                // SAFETY: valid descriptor and NUL-terminated name.
                match check(unsafe { libc::mkdirat(at.as_raw_fd(), c.as_ptr(), 0o777) }) {
                    Ok(_) => {
                        if let Some(p) = crate::storage::path_at(at, comp) {
                            crate::storage::created_dir(&p);
                        }
                        crate::storage::sync_fd(at, true, "dir").map_err(io)?;
                        created.push(so_far.clone());
                    }
                    // Made by someone else meanwhile: open it like any other.
                    Err(e) if e.raw_os_error() == Some(libc::EEXIST) => {}
                    Err(e) => return Err(io(e)),
                }
                open_dir_at(at, comp).map_err(|e| classify(at, comp, e, &so_far))?
            }
            Err(e) => return Err(classify(at, comp, e, &so_far)),
        };
        if !how.refuse.is_empty() && how.refuse.contains(&DirId::of_fd(&next).map_err(io)?) {
            return Err(Unreachable::Refused(so_far));
        }
        cur = Some(next);
    }
    match cur {
        Some(fd) => Ok(fd),
        None => root
            .try_clone_to_owned()
            .map_err(|e| Unreachable::Io(String::new(), e)),
    }
}

/// Names what stopped the walk at `comp`. A symlink met with
/// `O_DIRECTORY | O_NOFOLLOW` gives `ELOOP` or `ENOTDIR` depending on the
/// system, so the entry is looked at to tell the two apart.
fn classify(at: BorrowedFd<'_>, comp: &str, e: io::Error, so_far: &str) -> Unreachable {
    match e.raw_os_error() {
        Some(libc::ELOOP | libc::ENOTDIR) => match lstat(at, comp) {
            Ok(st) if st.st_mode & libc::S_IFMT == libc::S_IFLNK => {
                Unreachable::Symlink(so_far.to_owned())
            }
            // Whatever is there now, it was not a directory when opened.
            _ if e.raw_os_error() == Some(libc::ELOOP) => Unreachable::Symlink(so_far.to_owned()),
            _ => Unreachable::NotDir(so_far.to_owned()),
        },
        Some(libc::ENOENT) => Unreachable::Missing(so_far.to_owned()),
        _ => Unreachable::Io(so_far.to_owned(), e),
    }
}

pub(crate) fn cstr(s: &str) -> io::Result<CString> {
    CString::new(s).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in path"))
}

pub(crate) fn check(rc: libc::c_int) -> io::Result<libc::c_int> {
    if rc < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(rc)
    }
}

/// Opens the directory `name` in `at` without following a symlink.
pub(crate) fn open_dir_at(at: BorrowedFd<'_>, name: &str) -> io::Result<OwnedFd> {
    let c = cstr(name)?;
    // SAFETY: valid descriptor and NUL-terminated name; the new descriptor is
    // owned by the OwnedFd below.
    let fd = check(unsafe {
        libc::openat(
            at.as_raw_fd(),
            c.as_ptr(),
            libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_RDONLY | libc::O_CLOEXEC,
        )
    })?;
    // SAFETY: `fd` was just returned by openat and is owned by nothing else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// `fstatat(at, name, AT_SYMLINK_NOFOLLOW)`.
pub(crate) fn lstat(at: BorrowedFd<'_>, name: &str) -> io::Result<libc::stat> {
    let c = cstr(name)?;
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor, NUL-terminated name, and a pointer to a live
    // `stat` the kernel fills in.
    check(unsafe {
        libc::fstatat(
            at.as_raw_fd(),
            c.as_ptr(),
            &mut st,
            libc::AT_SYMLINK_NOFOLLOW,
        )
    })?;
    Ok(st)
}

/// `fstat` of an open descriptor.
pub(crate) fn fstat(fd: impl AsFd) -> io::Result<libc::stat> {
    // SAFETY: an all-zero `stat` is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: valid descriptor and a pointer to a live `stat`.
    check(unsafe { libc::fstat(fd.as_fd().as_raw_fd(), &mut st) })?;
    Ok(st)
}

#[cfg(any(target_os = "linux", target_os = "android"))]
mod openat2 {
    use std::os::fd::{BorrowedFd, OwnedFd};
    use std::sync::atomic::{AtomicBool, Ordering};

    use rustix::fs::{Mode, OFlags, ResolveFlags};
    use rustix::io::Errno;

    /// Set once the kernel said it has no usable `openat2`.
    static MISSING: AtomicBool = AtomicBool::new(false);

    pub(super) enum Outcome {
        Opened(OwnedFd),
        /// A component does not exist; every one before it is a directory.
        Missing,
        /// Anything else: the component walk decides (and names the cause).
        Walk,
    }

    pub(super) fn open(root: BorrowedFd<'_>, comps: &[&str]) -> Outcome {
        if MISSING.load(Ordering::Relaxed) {
            return Outcome::Walk;
        }
        let flags = OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW;
        let resolve =
            ResolveFlags::BENEATH | ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS;
        match rustix::fs::openat2(root, comps.join("/"), flags, Mode::empty(), resolve) {
            Ok(fd) => Outcome::Opened(fd),
            Err(Errno::NOENT) => Outcome::Missing,
            // No openat2 (before Linux 5.6), or a seccomp filter that refuses it.
            Err(Errno::NOSYS | Errno::PERM) => {
                MISSING.store(true, Ordering::Relaxed);
                Outcome::Walk
            }
            Err(_) => Outcome::Walk,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    fn root(d: &tempfile::TempDir) -> OwnedFd {
        crate::nofollow::open_root(d.path()).unwrap()
    }

    fn kind(r: &Result<OwnedFd, Unreachable>) -> String {
        match r {
            Ok(_) => "ok".into(),
            Err(Unreachable::Symlink(p)) => format!("symlink {p}"),
            Err(Unreachable::NotDir(p)) => format!("notdir {p}"),
            Err(Unreachable::Missing(p)) => format!("missing {p}"),
            Err(Unreachable::Refused(p)) => format!("refused {p}"),
            Err(Unreachable::Invalid(p)) => format!("invalid {p}"),
            Err(Unreachable::Io(p, e)) => format!("io {p} {e}"),
        }
    }

    #[test]
    fn both_resolvers_apply_the_same_rules() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("a/b/c")).unwrap();
        std::fs::write(d.path().join("a/file"), "x").unwrap();
        symlink(d.path().join("a"), d.path().join("link")).unwrap();
        symlink("b", d.path().join("a/rel")).unwrap();
        symlink("/", d.path().join("a/abs")).unwrap();
        let fd = root(&d);
        #[rustfmt::skip]
        let rows: &[(&str, &str)] = &[
            ("",            "ok"),
            ("a",           "ok"),
            ("a//b/c/",     "ok"),
            ("link",        "symlink link"),
            ("link/b",      "symlink link"),
            ("a/rel/c",     "symlink a/rel"),
            ("a/abs",       "symlink a/abs"),
            ("a/file",      "notdir a/file"),
            ("a/file/x",    "notdir a/file"),
            ("a/..",        "invalid a/.."),
            ("./a",         "invalid ./a"),
            ("../x",        "invalid ../x"),
        ];
        for allow in [true, false] {
            for (rel, want) in rows {
                let got = open_with(fd.as_fd(), rel, Beneath::default(), &mut Vec::new(), allow);
                assert_eq!(kind(&got), *want, "{rel:?} openat2={allow}");
            }
            // Missing: the walk names the first missing prefix, openat2 the path.
            let got = open_with(
                fd.as_fd(),
                "a/nope/x",
                Beneath::default(),
                &mut Vec::new(),
                allow,
            );
            assert!(kind(&got).starts_with("missing a/nope"), "{}", kind(&got));
        }
    }

    #[test]
    fn creation_is_one_component_at_a_time_and_reported() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir(d.path().join("a")).unwrap();
        symlink(d.path(), d.path().join("a/loop")).unwrap();
        let fd = root(&d);
        let how = Beneath {
            create: true,
            ..Beneath::default()
        };
        for allow in [true, false] {
            let mut made = Vec::new();
            let sub = format!("n{allow}/m");
            open_with(fd.as_fd(), &sub, how, &mut made, allow).unwrap();
            assert_eq!(made, [format!("n{allow}"), sub.clone()]);
            let mut made = Vec::new();
            let got = open_with(fd.as_fd(), "a/loop/x", how, &mut made, allow);
            assert_eq!(kind(&got), "symlink a/loop");
            assert!(made.is_empty());
        }
        assert!(!d.path().join("x").exists());
    }

    #[test]
    fn a_refused_directory_is_found_by_identity_at_any_depth() {
        let d = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(d.path().join("a/store/inner")).unwrap();
        let fd = root(&d);
        let store = open_with(
            fd.as_fd(),
            "a/store",
            Beneath::default(),
            &mut Vec::new(),
            true,
        )
        .unwrap();
        let id = DirId::of_fd(&store).unwrap();
        let how = Beneath {
            create: true,
            refuse: &[id],
        };
        for rel in ["a/store", "a/store/inner", "a/store/new"] {
            let got = open_with(fd.as_fd(), rel, how, &mut Vec::new(), true);
            assert_eq!(kind(&got), "refused a/store", "{rel}");
        }
        assert!(!d.path().join("a/store/new").exists());
        // Renamed, it is still the same directory.
        std::fs::rename(d.path().join("a/store"), d.path().join("moved")).unwrap();
        let got = open_with(fd.as_fd(), "moved/inner", how, &mut Vec::new(), true);
        assert_eq!(kind(&got), "refused moved");
        assert!(open_with(fd.as_fd(), "a", how, &mut Vec::new(), true).is_ok());
    }
}
