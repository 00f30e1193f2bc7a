//! The storage interface: every operation whose order decides what a power
//! cut leaves behind, in one place.
//!
//! Durable writers in every crate — journal appends and the torn-tail cut,
//! object batches (the `syncfs` barrier path included), manifests,
//! projections, [`crate::durable::write_atomic`], restores — make their
//! creates, writes, truncations, syncs, renames and removals through these
//! functions. Production runs the real system calls and nothing else: when
//! no [`Recorder`] is installed the only extra cost is one relaxed atomic
//! load per call (the journal benchmark measures it).
//!
//! A test installs a recorder (the crash model of `cairn-testkit`), which is
//! told each operation after the real one succeeded, in order, with the bytes
//! written. From that sequence it computes every state a power cut could
//! leave (unsynced data dropped or torn, unsynced directory entries lost) and
//! checks the invariants in each.
//!
//! Invariants:
//! - an operation is reported only after it succeeded; a failed one is not;
//! - a sync is never retried here (DESIGN §2): its error goes to the caller;
//! - each sync names its *site*, a stable label (`journal.append`, …), so a
//!   test can remove exactly one sync from the model and show that the crash
//!   model then finds a lost acknowledgement;
//! - in builds with the `fault-injection` feature, `CAIRN_FAULT=skip-fsync`
//!   makes every sync a no-op for real (the power-cut test's control run:
//!   acknowledgements before anything is durable must show losses).

use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, BorrowedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, RwLock};

/// One operation, as a recorder is told it.
#[derive(Debug)]
pub enum Op<'a> {
    /// A new, empty file's directory entry now exists.
    CreateFile(&'a Path),
    /// A new directory now exists.
    CreateDir(&'a Path),
    /// `bytes` were written at `offset` of the file at `path`.
    Write {
        /// The file.
        path: &'a Path,
        /// Where.
        offset: u64,
        /// What.
        bytes: &'a [u8],
    },
    /// The file was cut (or extended with zeros) to `len`.
    SetLen {
        /// The file.
        path: &'a Path,
        /// Its new length.
        len: u64,
    },
    /// The file's content (and size) is durable (`fsync`/`fdatasync`).
    SyncFile {
        /// The file.
        path: &'a Path,
        /// Which sync this is.
        site: &'static str,
    },
    /// The entries of the directory are durable (`fsync` of the directory).
    SyncDir {
        /// The directory.
        path: &'a Path,
        /// Which sync this is.
        site: &'static str,
    },
    /// Everything written on the file system holding `path` is durable
    /// (`syncfs`).
    SyncFs {
        /// A directory of that file system.
        path: &'a Path,
        /// Which sync this is.
        site: &'static str,
    },
    /// `from` was renamed over `to`.
    Rename {
        /// Old name.
        from: &'a Path,
        /// New name.
        to: &'a Path,
    },
    /// The file (or empty directory) at `path` was removed.
    Remove(&'a Path),
}

/// What a test installs to be told every operation.
pub trait Recorder: Send + Sync {
    /// Called after each operation succeeded.
    fn record(&self, op: Op<'_>);
}

static ON: AtomicBool = AtomicBool::new(false);
static RECORDER: RwLock<Option<Arc<dyn Recorder>>> = RwLock::new(None);

/// Installs `r` until the returned guard drops. Process-wide: a test that
/// installs one must not run beside another that does.
pub fn install(r: Arc<dyn Recorder>) -> Installed {
    let mut slot = RECORDER.write().unwrap_or_else(|p| p.into_inner());
    *slot = Some(r);
    ON.store(true, Ordering::Release);
    Installed(())
}

/// Removes the installed recorder when dropped.
#[must_use = "the recorder is removed when this drops"]
pub struct Installed(());

impl Drop for Installed {
    fn drop(&mut self) {
        ON.store(false, Ordering::Release);
        let mut slot = RECORDER.write().unwrap_or_else(|p| p.into_inner());
        *slot = None;
    }
}

#[inline]
fn tell(op: Op<'_>) {
    if ON.load(Ordering::Relaxed) {
        let slot = RECORDER.read().unwrap_or_else(|p| p.into_inner());
        if let Some(r) = slot.as_ref() {
            r.record(op);
        }
    }
}

/// Whether syncs are skipped for real (`CAIRN_FAULT=skip-fsync`, test
/// builds only).
fn skip_syncs() -> bool {
    #[cfg(feature = "fault-injection")]
    {
        static SKIP: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
        *SKIP.get_or_init(|| {
            std::env::var("CAIRN_FAULT")
                .map(|v| v.split(',').any(|f| f.trim() == "skip-fsync"))
                .unwrap_or(false)
        })
    }
    #[cfg(not(feature = "fault-injection"))]
    {
        false
    }
}

/// Whether a recorder is installed: callers that know a file only by its
/// descriptor resolve its path for the report only then.
pub fn recording() -> bool {
    ON.load(Ordering::Relaxed)
}

/// The path of an open descriptor (from `/proc/self/fd`), when recording;
/// `None` otherwise or where it cannot be read.
pub fn fd_path(fd: BorrowedFd<'_>) -> Option<PathBuf> {
    if !recording() {
        return None;
    }
    std::fs::read_link(format!("/proc/self/fd/{}", fd.as_raw_fd())).ok()
}

/// The path of `name` in the directory open as `dir`, when recording.
pub fn path_at(dir: BorrowedFd<'_>, name: &str) -> Option<PathBuf> {
    fd_path(dir).map(|d| d.join(name))
}

/// `fsync` of a descriptor (a file, or a directory when `dir`), reported
/// under the path it resolves to.
///
/// # Errors
/// As [`sync_data`].
pub fn sync_fd(fd: BorrowedFd<'_>, dir: bool, site: &'static str) -> io::Result<()> {
    if !skip_syncs() {
        rustix::fs::fsync(fd)?;
    }
    if let Some(path) = fd_path(fd) {
        if dir {
            tell(Op::SyncDir { path: &path, site });
        } else {
            tell(Op::SyncFile { path: &path, site });
        }
    }
    Ok(())
}

/// Reports a new file at `path` (after it was created).
pub fn created_file(path: &Path) {
    tell(Op::CreateFile(path));
}

/// Reports a new directory at `path` (after it was created).
pub fn created_dir(path: &Path) {
    tell(Op::CreateDir(path));
}

/// Reports `bytes` written at `offset` of `path` (after the write).
pub fn wrote(path: &Path, offset: u64, bytes: &[u8]) {
    tell(Op::Write {
        path,
        offset,
        bytes,
    });
}

/// Reports that `from` was renamed over `to` (after the rename).
pub fn renamed(from: &Path, to: &Path) {
    tell(Op::Rename { from, to });
}

/// Reports that `path` was removed (after the removal).
pub fn removed(path: &Path) {
    tell(Op::Remove(path));
}

/// Writes all of `bytes` at the end of `file`, which holds `at` bytes (an
/// append-only file opened with `O_APPEND`).
///
/// # Errors
/// The write fails; nothing is reported.
pub fn append(file: &mut File, path: &Path, at: u64, bytes: &[u8]) -> io::Result<()> {
    file.write_all(bytes)?;
    wrote(path, at, bytes);
    Ok(())
}

/// Writes all of `bytes` at `offset` of `file` (`pwrite`; the file must
/// not be open with `O_APPEND`).
///
/// # Errors
/// The write fails; nothing is reported.
pub fn write_at(file: &File, path: &Path, offset: u64, bytes: &[u8]) -> io::Result<()> {
    use std::os::unix::fs::FileExt;
    file.write_all_at(bytes, offset)?;
    wrote(path, offset, bytes);
    Ok(())
}

/// Cuts or extends `file` to `len`.
///
/// # Errors
/// The truncation fails.
pub fn set_len(file: &File, path: &Path, len: u64) -> io::Result<()> {
    file.set_len(len)?;
    tell(Op::SetLen { path, len });
    Ok(())
}

/// `fdatasync`: the content and size of `file` are durable.
///
/// # Errors
/// The sync fails. Never retry it: the page cache may have dropped the data.
pub fn sync_data(file: &File, path: &Path, site: &'static str) -> io::Result<()> {
    if !skip_syncs() {
        file.sync_data()?;
    }
    tell(Op::SyncFile { path, site });
    Ok(())
}

/// `fsync`: the content and metadata of `file` are durable.
///
/// # Errors
/// As [`sync_data`].
pub fn sync_all(file: &File, path: &Path, site: &'static str) -> io::Result<()> {
    if !skip_syncs() {
        file.sync_all()?;
    }
    tell(Op::SyncFile { path, site });
    Ok(())
}

/// `fsync` of a directory opened as `dir_file`: its entries are durable.
///
/// # Errors
/// As [`sync_data`].
pub fn sync_dir(dir_file: &File, dir: &Path, site: &'static str) -> io::Result<()> {
    if !skip_syncs() {
        dir_file.sync_all()?;
    }
    tell(Op::SyncDir { path: dir, site });
    Ok(())
}

/// `syncfs` through `held`, a descriptor of a directory `dir` on the file
/// system: everything written there is durable.
///
/// # Errors
/// As [`sync_data`].
pub fn syncfs(held: &File, dir: &Path, site: &'static str) -> io::Result<()> {
    if !skip_syncs() {
        syncfs_of(held)?;
    }
    tell(Op::SyncFs { path: dir, site });
    Ok(())
}

#[cfg(target_os = "linux")]
fn syncfs_of(d: &File) -> io::Result<()> {
    use std::os::fd::AsRawFd;
    // SAFETY: syncfs takes a descriptor we own for the duration of the call.
    if unsafe { libc::syncfs(d.as_raw_fd()) } == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(not(target_os = "linux"))]
fn syncfs_of(_: &File) -> io::Result<()> {
    Err(io::Error::from(io::ErrorKind::Unsupported))
}

/// A writer that reports each write to the recorder: for a file written
/// front to back (a temporary file, a new object).
pub struct Tracked<'a, W: Write> {
    inner: W,
    path: Option<std::borrow::Cow<'a, Path>>,
    offset: u64,
}

impl<'a, W: Write> Tracked<'a, W> {
    /// Tracks writes to `inner`, the file at `path`, from `offset` on.
    pub fn new(inner: W, path: &'a Path, offset: u64) -> Self {
        Tracked {
            inner,
            path: Some(std::borrow::Cow::Borrowed(path)),
            offset,
        }
    }

    /// Tracks writes to `inner`, a new file known by its descriptor: `path`
    /// from [`path_at`] (`None` when nothing records, and then nothing is
    /// reported).
    pub fn resolved(inner: W, path: Option<PathBuf>) -> Tracked<'static, W> {
        Tracked {
            inner,
            path: path.map(std::borrow::Cow::Owned),
            offset: 0,
        }
    }
}

impl<W: Write> Write for Tracked<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        if let Some(p) = &self.path {
            wrote(p, self.offset, &buf[..n]);
        }
        self.offset += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}
