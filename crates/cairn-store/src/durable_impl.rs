//! The fsync discipline, in one place.
//!
//! Invariants kept here:
//! - a replaced file is never observed half-written: it is written under a
//!   temporary name in the same directory, fsynced, renamed over the target, and
//!   the directory is fsynced so the rename itself survives a crash;
//! - a new directory entry (file or directory) is followed by an fsync of its
//!   parent directory;
//! - directories are created `0700` and files `0600`, because run records hold
//!   prompts and model output (DESIGN §9).

use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use crate::{storage, StoreError};

/// Mode of every directory cairn creates.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every file cairn creates.
pub const FILE_MODE: u32 = 0o600;

/// Fsyncs a directory, making the entries created or renamed in it durable.
///
/// # Errors
/// The directory cannot be opened or the fsync fails.
pub fn fsync_dir(dir: &Path) -> Result<(), StoreError> {
    fsync_dir_at(dir, "dir")
}

/// [`fsync_dir`] naming its site for the crash model (see [`crate::storage`]).
///
/// # Errors
/// As [`fsync_dir`].
pub fn fsync_dir_at(dir: &Path, site: &'static str) -> Result<(), StoreError> {
    let d = File::open(dir).map_err(|e| StoreError::io("opening directory", dir, e))?;
    storage::sync_dir(&d, dir, site).map_err(|e| StoreError::io("syncing directory", dir, e))
}

/// Flushes every dirty file and directory of the file system that holds
/// `dir` (`syncfs(2)`): one durability barrier for many new files, where a
/// per-file fsync would pay one journal commit each.
///
/// It is as strong as an fsync of each of them, and it reports a writeback
/// error that happened since `dir` was opened, but only on kernels that do
/// (Linux 5.8 and later). Elsewhere it does nothing and returns `Ok(false)`:
/// the caller must then fsync each file itself. `Ok(true)` means everything
/// written before the call is durable.
///
/// As with fsync, a failure is never retried: what was written is in an
/// unknown state and must not be named by anything durable.
///
/// # Errors
/// `dir` cannot be opened, or the flush fails.
pub fn sync_filesystem(dir: &Path) -> Result<bool, StoreError> {
    if !syncfs_reports_errors() {
        return Ok(false);
    }
    let d = File::open(dir).map_err(|e| StoreError::io("opening directory", dir, e))?;
    storage::syncfs(&d, dir, "syncfs")
        .map_err(|e| StoreError::io("syncing the file system of", dir, e))?;
    Ok(true)
}

/// [`sync_filesystem`] through a directory descriptor the caller opened
/// earlier — when a batch of writes began — so the barrier reports every
/// writeback error since that moment, not only since now. `dir` names it in
/// errors.
///
/// # Errors
/// The flush fails.
pub fn sync_filesystem_held(held: &File, dir: &Path) -> Result<bool, StoreError> {
    if !syncfs_reports_errors() {
        return Ok(false);
    }
    storage::syncfs(held, dir, "syncfs")
        .map_err(|e| StoreError::io("syncing the file system of", dir, e))?;
    Ok(true)
}

/// The bytes the kernel holds dirty or under writeback, system-wide
/// (`Dirty` and `Writeback` of `/proc/meminfo`): what a `syncfs` could have
/// to write besides the caller's own files (an upper bound: other file
/// systems' pages count too). `None` where it cannot be read.
pub fn dirty_bytes() -> Option<u64> {
    dirty_in_meminfo(&fs::read_to_string("/proc/meminfo").ok()?)
}

/// `Dirty` + `Writeback` of a `/proc/meminfo` text, in bytes; `None` when
/// either is missing or does not read.
fn dirty_in_meminfo(text: &str) -> Option<u64> {
    let kib = |name: &str| -> Option<u64> {
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))?;
        let value = line.trim().strip_suffix("kB")?;
        value.trim().parse::<u64>().ok()?.checked_mul(1024)
    };
    kib("Dirty")?.checked_add(kib("Writeback")?)
}

/// True when `syncfs(2)` returns writeback errors: Linux 5.8 and later.
/// Before that it returned 0 whatever happened, which would let a lost
/// write pass unnoticed.
fn syncfs_reports_errors() -> bool {
    static KNOWN: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *KNOWN.get_or_init(|| {
        cfg!(target_os = "linux")
            && fs::read_to_string("/proc/sys/kernel/osrelease")
                .ok()
                .and_then(|r| kernel_at_least(&r, (5, 8)))
                .unwrap_or(false)
    })
}

/// Compares a kernel release string (`"6.1.0-18-amd64"`) with `(major, minor)`.
fn kernel_at_least(release: &str, want: (u32, u32)) -> Option<bool> {
    let mut parts = release.trim().split(['.', '-']);
    let major: u32 = parts.next()?.parse().ok()?;
    let minor: u32 = parts.next()?.parse().ok()?;
    Some((major, minor) >= want)
}

/// Creates `dir` and any missing parents with mode `0700`, fsyncing the parent of
/// every directory it creates. Existing directories are left as they are.
///
/// # Errors
/// A component cannot be created or synced.
pub fn create_dir_private(dir: &Path) -> Result<(), StoreError> {
    create_dirs(dir, Some(DIR_MODE), "dir")
}

/// Creates `dir` and any missing parents as any tool makes a directory of
/// the user's (mode `0777` less the umask), fsyncing the parent of every
/// directory it creates, under `site` for the crash model: for a directory
/// outside the store that cairn fills (a fork's workspace). Existing
/// directories are left as they are.
///
/// # Errors
/// A component cannot be created or synced.
pub fn create_dir_all_durable(dir: &Path, site: &'static str) -> Result<(), StoreError> {
    create_dirs(dir, None, site)
}

/// Creates `dir` and its missing parents, with exactly `mode` (else the
/// default less the umask), each followed by an fsync of its parent.
fn create_dirs(dir: &Path, mode: Option<u32>, site: &'static str) -> Result<(), StoreError> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        if !parent.as_os_str().is_empty() {
            create_dirs(parent, mode, site)?;
        }
    }
    let mut builder = DirBuilder::new();
    if let Some(mode) = mode {
        builder.mode(mode);
    }
    match builder.create(dir) {
        Ok(()) => {}
        // Another process made it between our check and our create: fine.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => return Ok(()),
        Err(e) => return Err(StoreError::io("creating directory", dir, e)),
    }
    storage::created_dir(dir);
    if let Some(mode) = mode {
        // The umask may have narrowed the mode further, never widened it; make it exact.
        fs::set_permissions(dir, fs::Permissions::from_mode(mode))
            .map_err(|e| StoreError::io("setting permissions of", dir, e))?;
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        fsync_dir_at(parent, site)?;
    }
    Ok(())
}

/// Creates the one directory `dir` (its parent must exist) with mode `0700`
/// and does NOT fsync the parent: for a writer that creates many entries and
/// makes them durable together (one fsync of the parent, or a file-system
/// barrier) before anything names them. Returns whether it was created; an
/// existing directory is left as it is.
///
/// # Errors
/// It cannot be created (a missing parent included).
pub fn create_dir_deferred(dir: &Path) -> Result<bool, StoreError> {
    match DirBuilder::new().mode(DIR_MODE).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => return Ok(false),
        Err(e) => return Err(StoreError::io("creating directory", dir, e)),
    }
    storage::created_dir(dir);
    // The umask may have narrowed the mode further, never widened it; make it exact.
    fs::set_permissions(dir, fs::Permissions::from_mode(DIR_MODE))
        .map_err(|e| StoreError::io("setting permissions of", dir, e))?;
    Ok(true)
}

/// Creates a new file with mode `0600`, failing if it exists. The caller writes
/// it and fsyncs it and its directory.
///
/// # Errors
/// The file exists or cannot be created.
pub fn create_file_private(path: &Path) -> Result<File, StoreError> {
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(path)
        .map_err(|e| StoreError::io("creating file", path, e))?;
    storage::created_file(path);
    Ok(f)
}

/// Opens `path` for reading and writing, creating it with mode `0600` if it
/// is absent and never truncating it: the one way a lock file (a journal's,
/// the object pool's, the lineage lock, a workspace's, the listing index's) or the workspace's
/// clock file is opened. Such a file holds nothing a reader trusts after a
/// crash (a lock is released with its process; a lock's holder note is a
/// hint), so its creation is not made durable: its directory is not
/// fsynced, and losing it loses nothing.
///
/// # Errors
/// The open's IO error, for the caller to name the file its own way.
pub fn open_or_create_private(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(FILE_MODE)
        .open(path)
}

/// Replaces `path` with `bytes` atomically and durably: temporary file in the same
/// directory (mode `0600`), write, fsync, rename, fsync of the directory.
///
/// A reader sees either the old content or the new, never a mixture; after it
/// returns, the new content survives a crash.
///
/// # Errors
/// Any step fails; the target is then unchanged (a stray temporary file is
/// removed when possible).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), StoreError> {
    write_atomic_with(path, |w| w.write_all(bytes))
}

/// [`write_atomic`] for content produced by `fill`, written through a buffer
/// instead of being held whole in memory first (a large manifest). The same
/// steps and guarantees; `fill` failing leaves the target unchanged.
///
/// # Errors
/// As [`write_atomic`], or the error `fill` returned.
pub fn write_atomic_with(
    path: &Path,
    fill: impl FnOnce(&mut dyn Write) -> io::Result<()>,
) -> Result<(), StoreError> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .permissions(fs::Permissions::from_mode(FILE_MODE))
        .tempfile_in(dir)
        .map_err(|e| StoreError::io("creating temporary file in", dir, e))?;
    let tmp_path = tmp.path().to_owned();
    storage::created_file(&tmp_path);
    {
        let tracked = storage::Tracked::new(tmp.as_file_mut(), &tmp_path, 0);
        let mut w = io::BufWriter::with_capacity(256 << 10, tracked);
        fill(&mut w)
            .and_then(|()| w.flush())
            .map_err(|e| StoreError::io("writing", &tmp_path, e))?;
    }
    storage::sync_all(tmp.as_file(), &tmp_path, "atomic.file")
        .map_err(|e| StoreError::io("syncing", &tmp_path, e))?;
    tmp.persist(path)
        .map_err(|e| StoreError::io("renaming into place", path, e.error))?;
    storage::renamed(&tmp_path, path);
    fsync_dir_at(dir, "atomic.dir")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kernel_release_comparison() {
        assert_eq!(kernel_at_least("6.1.0-18-amd64", (5, 8)), Some(true));
        assert_eq!(kernel_at_least("5.8.0", (5, 8)), Some(true));
        assert_eq!(kernel_at_least("5.4.0-150-generic", (5, 8)), Some(false));
        assert_eq!(kernel_at_least("4.19.0", (5, 8)), Some(false));
        assert_eq!(kernel_at_least("garbage", (5, 8)), None);
    }

    #[test]
    fn dirty_bytes_are_read_from_meminfo() {
        let text = "MemTotal:       24000000 kB\nDirty:              3124 kB\nWriteback:            8 kB\nWritebackTmp:         0 kB\n";
        assert_eq!(dirty_in_meminfo(text), Some((3124 + 8) * 1024));
        // `WritebackTmp` is not `Writeback`, wherever it stands; a missing
        // or garbled field is not known rather than zero.
        assert_eq!(
            dirty_in_meminfo("WritebackTmp: 5 kB\nDirty: 1 kB\nWriteback: 2 kB\n"),
            Some(3 * 1024)
        );
        assert_eq!(dirty_in_meminfo("Dirty: 1 kB\nWritebackTmp: 0 kB\n"), None);
        assert_eq!(dirty_in_meminfo("Dirty: x kB\nWriteback: 0 kB\n"), None);
        assert_eq!(dirty_in_meminfo("Dirty: 1 MB\nWriteback: 0 kB\n"), None);
        assert_eq!(dirty_in_meminfo(""), None);
        if cfg!(target_os = "linux") {
            assert!(dirty_bytes().is_some(), "this kernel's /proc/meminfo");
        }
    }

    #[test]
    fn sync_filesystem_flushes_or_declines() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a"), b"x").unwrap();
        let done = sync_filesystem(dir.path()).unwrap();
        assert_eq!(done, syncfs_reports_errors());
        assert!(sync_filesystem(&dir.path().join("missing")).is_err() || !done);
    }

    #[test]
    fn atomic_write_replaces_and_leaves_no_temp() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("meta.json");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        let names: Vec<_> = fs::read_dir(d.path()).unwrap().collect();
        assert_eq!(names.len(), 1);
        let mode = fs::metadata(&p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, FILE_MODE);
    }

    #[test]
    fn private_dirs_are_0700() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("a/b/c");
        create_dir_private(&p).unwrap();
        for q in [d.path().join("a"), d.path().join("a/b"), p.clone()] {
            let mode = fs::metadata(&q).unwrap().permissions().mode() & 0o777;
            assert_eq!(mode, DIR_MODE, "{}", q.display());
        }
        create_dir_private(&p).unwrap();
    }

    #[test]
    fn new_file_is_0600_and_exclusive() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        create_file_private(&p).unwrap();
        assert_eq!(
            fs::metadata(&p).unwrap().permissions().mode() & 0o777,
            FILE_MODE
        );
        assert!(create_file_private(&p).is_err());
    }
}
