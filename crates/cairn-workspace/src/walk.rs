//! The tree walk: which files to capture, which gaps to report.
//!
//! Directories are read in parallel (one rayon task per directory): on a
//! warm cache the walk is bound by `getdents`/`statx` system calls, which
//! scale with cores. Each directory is opened relative to the workspace
//! root's descriptor, without following a symlink in its last component.
//! On Linux its entries are listed with `getdents` into one large buffer and
//! stat'ed with `statx` relative to the directory's own descriptor: one path
//! component looked up per file, and no `fstat` per directory. Elsewhere the
//! system's directory stream and a stat by path do the same work.

use std::fs;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use cairn_objects::{Phase, Progress};
use rustix::fs::{FileType, Mode, OFlags};

use crate::ignore::{Chain, Decision, IgnoreRules, Markers};
use crate::manifest::{SkipReason, Skipped};
use crate::statcache::Stat;
use crate::WorkspaceError;

/// A regular file to capture.
#[derive(Clone, Debug)]
pub(crate) struct Found {
    pub(crate) path: String,
    pub(crate) stat: Stat,
}

/// What the walk saw.
#[derive(Debug, Default)]
pub(crate) struct Walked {
    /// Files to capture, sorted by path.
    pub(crate) files: Vec<Found>,
    /// Gaps: symlinks, oversized, special and unreadable entries, sorted.
    pub(crate) skipped: Vec<Skipped>,
}

/// Limits the walk enforces.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub(crate) max_files: usize,
    pub(crate) max_file_bytes: u64,
}

struct Shared<'a> {
    root: &'a Path,
    root_fd: OwnedFd,
    rules: &'a IgnoreRules,
    limits: Limits,
    progress: &'a dyn Progress,
    counted: AtomicUsize,
    over: AtomicBool,
    out: Mutex<Walked>,
}

/// Walks `root`, applying `rules`.
///
/// 1. An excluded directory is not entered, unless a `!` rule could match
///    below it; then it is entered and each entry is tested by its type from
///    the directory listing, and stat'ed only if it is captured.
/// 2. Symlinks (to files or directories) are never followed: reported.
/// 3. Files over the size limit are reported, not captured; they count
///    toward the file limit.
/// 4. More than `max_files` files to capture stops the walk with
///    [`WorkspaceError::TooManyFiles`] before anything is read.
pub(crate) fn walk(
    root: &Path,
    rules: &IgnoreRules,
    limits: Limits,
    progress: &dyn Progress,
) -> Result<Walked, WorkspaceError> {
    // The root itself must be readable: that is an error, not a gap.
    // (Opening a directory for reading needs its read permission.)
    let root_fd = rustix::fs::open(root, dir_flags(), Mode::empty())
        .map_err(|e| WorkspaceError::io("reading the workspace", root, e.into()))?;
    progress.begin(Phase::Walk, None);
    let shared = Shared {
        root,
        root_fd,
        rules,
        limits,
        progress,
        counted: AtomicUsize::new(0),
        over: AtomicBool::new(false),
        out: Mutex::new(Walked::default()),
    };
    rayon::scope(|s| {
        visit(
            s,
            &shared,
            String::new(),
            Decision::Unmatched,
            Decision::Unmatched,
            false,
            Chain::default(),
        )
    });
    if shared.over.load(Ordering::Relaxed) {
        return Err(WorkspaceError::TooManyFiles {
            root: root.to_owned(),
            limit: limits.max_files,
        });
    }
    let mut out = shared.out.into_inner().unwrap_or_else(|p| p.into_inner());
    out.files.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    out.skipped.sort_by(|a, b| a.path.cmp(&b.path));
    progress.end(Phase::Walk);
    Ok(out)
}

/// Bytes of directory entries one `getdents` may return (about a thousand
/// names).
const LISTING_BUF: usize = 32 << 10;

/// Flags for opening a directory to list it.
fn dir_flags() -> OFlags {
    OFlags::RDONLY | OFlags::DIRECTORY | OFlags::CLOEXEC
}

/// What a directory entry is, from its listing (or a stat when the file
/// system does not say).
enum Kind {
    Dir,
    File(Option<Stat>),
    Symlink,
    Special,
}

/// Visits directory `dir`, decided `parent` (excluded: `dir_excluded`)
/// under its own parent's decision `up`.
fn visit<'s>(
    scope: &rayon::Scope<'s>,
    sh: &'s Shared<'s>,
    dir: String,
    up: Decision,
    mut parent: Decision,
    mut dir_excluded: bool,
    chain: Chain,
) {
    if sh.over.load(Ordering::Relaxed) {
        return;
    }
    let mut files = Vec::new();
    // Gaps of the listing itself; dropped if the directory is excluded.
    let mut skipped = Vec::new();
    let gap = |skipped: &mut Vec<Skipped>, path: String, reason: SkipReason| {
        skipped.push(Skipped { path, reason });
    };
    let unreadable = |e: rustix::io::Errno| SkipReason::Unreadable {
        detail: std::io::Error::from(e).to_string(),
    };
    let rel_dir: &str = if dir.is_empty() { "." } else { &dir };
    let opened = rustix::fs::openat(
        &sh.root_fd,
        rel_dir,
        dir_flags() | OFlags::NOFOLLOW,
        Mode::empty(),
    );
    let fd = match opened {
        Ok(fd) => fd,
        Err(e) => {
            if !dir_excluded {
                gap(&mut skipped, dir.clone(), unreadable(e));
            }
            flush(sh, files, skipped);
            return;
        }
    };
    let dfd = fd.as_fd();
    // Names first: the directory's own rule file, wherever it comes in the
    // listing, applies to every other entry. Each name is kept as its
    // relative path and where the name starts in it.
    let mut names: Vec<(String, usize, FileType)> = Vec::new();
    let name_at = if dir.is_empty() { 0 } else { dir.len() + 1 };
    let mut has_rule_file = false;
    // Marker files named in the listing (evidence that `dir` is a cache).
    let mut markers = Markers::NONE;
    let listed = list(dfd, |raw, ft| {
        if raw == b"." || raw == b".." {
            return;
        }
        let Ok(name) = std::str::from_utf8(raw) else {
            gap(
                &mut skipped,
                join(&dir, &String::from_utf8_lossy(raw)),
                SkipReason::NotUtf8,
            );
            return;
        };
        // A rule file of any type but a directory is looked at (a symlink
        // or a FIFO there is reported, never followed or read).
        has_rule_file |= name == sh.rules.file_name() && ft != FileType::Directory;
        if matches!(ft, FileType::RegularFile | FileType::Unknown) {
            markers = markers.with(Markers::of_name(name));
        }
        names.push((join(&dir, name), name_at, ft));
    });
    if let Err(e) = listed {
        // What was listed before the error is still walked.
        gap(&mut skipped, dir.clone(), unreadable(e));
    }
    let seen = names.len() as u64;
    // Evidence can only exclude a directory no rule decided on (every rule
    // numbers after the marker rules), so it is looked for only in one
    // that is captured so far, and never at the root.
    if !dir.is_empty() && !dir_excluded && !markers.is_empty() {
        let found = markers.verify(dfd);
        if !found.is_empty() {
            let d = sh.rules.decide(&dir, true, up, &chain, found);
            if sh.rules.excludes(d, &chain) {
                if !sh.rules.may_reinclude_below(&dir, d, &chain) {
                    sh.progress.advance(Phase::Walk, seen, 0);
                    return;
                }
                (parent, dir_excluded) = (d, true);
            }
        }
    }
    if dir_excluded {
        skipped.clear();
    }
    // The root's rule file is read with the rules; as in git, an excluded
    // directory's is not read.
    let chain = if has_rule_file && !dir.is_empty() && !dir_excluded {
        sh.rules.read_in(dfd, &dir, &chain)
    } else {
        chain
    };
    for (rel, at, ft) in names {
        let name = &rel[at..];
        let kind = match ft {
            FileType::Directory => Kind::Dir,
            FileType::RegularFile => Kind::File(None),
            FileType::Symlink => Kind::Symlink,
            FileType::Unknown => match stat_entry(sh, dfd, name, &rel) {
                Ok(st) => kind_of(st),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(_) => Kind::Special,
            },
            _ => Kind::Special,
        };
        if let Kind::Dir = kind {
            // Its markers are looked at when it is listed.
            let d = sh.rules.decide(&rel, true, parent, &chain, Markers::NONE);
            let excluded = sh.rules.excludes(d, &chain);
            if !excluded || sh.rules.may_reinclude_below(&rel, d, &chain) {
                let chain = chain.clone();
                scope.spawn(move |s| visit(s, sh, rel, parent, d, excluded, chain));
            }
            continue;
        }
        let d = sh.rules.decide(&rel, false, parent, &chain, Markers::NONE);
        if sh.rules.excludes(d, &chain) {
            continue;
        }
        let known = match kind {
            Kind::File(known) => known,
            Kind::Symlink => {
                skipped.push(Skipped {
                    path: rel,
                    reason: SkipReason::Symlink,
                });
                continue;
            }
            Kind::Dir | Kind::Special => {
                skipped.push(Skipped {
                    path: rel,
                    reason: SkipReason::Special,
                });
                continue;
            }
        };
        let stat = match known.map_or_else(|| stat_entry(sh, dfd, name, &rel), Ok) {
            Ok(st) => st,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                skipped.push(Skipped {
                    path: rel,
                    reason: SkipReason::Unreadable {
                        detail: e.to_string(),
                    },
                });
                continue;
            }
        };
        if sh.counted.fetch_add(1, Ordering::Relaxed) >= sh.limits.max_files {
            sh.over.store(true, Ordering::Relaxed);
            return;
        }
        if stat.size > sh.limits.max_file_bytes {
            skipped.push(Skipped {
                path: rel,
                reason: SkipReason::TooLarge {
                    size: stat.size,
                    limit: sh.limits.max_file_bytes,
                },
            });
            continue;
        }
        files.push(Found { path: rel, stat });
    }
    sh.progress.advance(Phase::Walk, seen, 0);
    flush(sh, files, skipped);
}

/// Stats `name` in the directory `dfd` without following a symlink: one
/// `statx` relative to the directory; a path stat where the kernel has no
/// `statx`.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn stat_entry(
    sh: &Shared<'_>,
    dfd: BorrowedFd<'_>,
    name: &str,
    rel: &str,
) -> std::io::Result<Stat> {
    use rustix::fs::AtFlags;
    match rustix::fs::statx(dfd, name, AtFlags::SYMLINK_NOFOLLOW, Stat::STATX_MASK) {
        Ok(x) => Ok(Stat::of_statx(&x)),
        Err(rustix::io::Errno::NOSYS) => {
            fs::symlink_metadata(sh.root.join(rel)).map(|m| Stat::of(&m))
        }
        Err(e) => Err(e.into()),
    }
}

/// Stats `rel` by its path, without following a symlink (systems without
/// `statx`).
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn stat_entry(
    sh: &Shared<'_>,
    _dfd: BorrowedFd<'_>,
    _name: &str,
    rel: &str,
) -> std::io::Result<Stat> {
    fs::symlink_metadata(sh.root.join(rel)).map(|m| Stat::of(&m))
}

/// Hands `each` the name and listed type of every entry of the open
/// directory `fd` (`.` and `..` included), with one `getdents` per
/// [`LISTING_BUF`] bytes of entries. Entries listed before an error have
/// been handed over when it is returned.
#[cfg(any(target_os = "linux", target_os = "android"))]
fn list(fd: BorrowedFd<'_>, mut each: impl FnMut(&[u8], FileType)) -> rustix::io::Result<()> {
    use rustix::fs::RawDir;
    let mut buf: Vec<u8> = Vec::with_capacity(LISTING_BUF);
    let mut listing = RawDir::new(fd, buf.spare_capacity_mut());
    while let Some(entry) = listing.next() {
        let entry = entry?;
        each(entry.file_name().to_bytes(), entry.file_type());
    }
    Ok(())
}

/// As the Linux `list`, through the system's directory stream.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn list(fd: BorrowedFd<'_>, mut each: impl FnMut(&[u8], FileType)) -> rustix::io::Result<()> {
    let mut listing = rustix::fs::Dir::read_from(fd)?;
    while let Some(entry) = listing.read() {
        let entry = entry?;
        each(entry.file_name().to_bytes(), entry.file_type());
    }
    Ok(())
}

fn kind_of(st: Stat) -> Kind {
    match st.mode & libc::S_IFMT {
        libc::S_IFDIR => Kind::Dir,
        libc::S_IFREG => Kind::File(Some(st)),
        libc::S_IFLNK => Kind::Symlink,
        _ => Kind::Special,
    }
}

fn flush(sh: &Shared<'_>, files: Vec<Found>, skipped: Vec<Skipped>) {
    if files.is_empty() && skipped.is_empty() {
        return;
    }
    let mut out = sh.out.lock().unwrap_or_else(|p| p.into_inner());
    out.files.extend(files);
    out.skipped.extend(skipped);
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        let mut s = String::with_capacity(dir.len() + 1 + name.len());
        s.push_str(dir);
        s.push('/');
        s.push_str(name);
        s
    }
}
