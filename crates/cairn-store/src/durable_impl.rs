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

use crate::StoreError;

/// Mode of every directory cairn creates.
pub const DIR_MODE: u32 = 0o700;
/// Mode of every file cairn creates.
pub const FILE_MODE: u32 = 0o600;

/// Fsyncs a directory, making the entries created or renamed in it durable.
///
/// # Errors
/// The directory cannot be opened or the fsync fails.
pub fn fsync_dir(dir: &Path) -> Result<(), StoreError> {
    let d = File::open(dir).map_err(|e| StoreError::io("opening directory", dir, e))?;
    d.sync_all()
        .map_err(|e| StoreError::io("syncing directory", dir, e))
}

/// Creates `dir` and any missing parents with mode `0700`, fsyncing the parent of
/// every directory it creates. Existing directories are left as they are.
///
/// # Errors
/// A component cannot be created or synced.
pub fn create_dir_private(dir: &Path) -> Result<(), StoreError> {
    if dir.is_dir() {
        return Ok(());
    }
    if let Some(parent) = dir.parent() {
        if !parent.as_os_str().is_empty() {
            create_dir_private(parent)?;
        }
    }
    match DirBuilder::new().mode(DIR_MODE).create(dir) {
        Ok(()) => {}
        // Another process made it between our check and our create: fine.
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists && dir.is_dir() => return Ok(()),
        Err(e) => return Err(StoreError::io("creating directory", dir, e)),
    }
    // The umask may have narrowed the mode further, never widened it; make it exact.
    fs::set_permissions(dir, fs::Permissions::from_mode(DIR_MODE))
        .map_err(|e| StoreError::io("setting permissions of", dir, e))?;
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        fsync_dir(parent)?;
    }
    Ok(())
}

/// Creates a new file with mode `0600`, failing if it exists. The caller writes
/// it and fsyncs it and its directory.
///
/// # Errors
/// The file exists or cannot be created.
pub fn create_file_private(path: &Path) -> Result<File, StoreError> {
    OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .mode(FILE_MODE)
        .open(path)
        .map_err(|e| StoreError::io("creating file", path, e))
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
    tmp.write_all(bytes)
        .map_err(|e| StoreError::io("writing", tmp.path(), e))?;
    tmp.as_file()
        .sync_all()
        .map_err(|e| StoreError::io("syncing", tmp.path(), e))?;
    tmp.persist(path)
        .map_err(|e| StoreError::io("renaming into place", path, e.error))?;
    fsync_dir(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

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
