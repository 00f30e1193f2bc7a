//! Writing files without following symlinks: the shared rule of
//! `cairn_store::nofollow`, plus staging objects into temporary files. New
//! files are written under a temporary name, fsynced, renamed over the
//! target and the directory fsynced.

use std::io::{self, BufWriter, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use cairn_objects::{ObjectHash, ObjectPool};

use crate::CheckpointError;

/// Prefix of the temporary files a restore stages next to their targets.
pub(crate) const TEMP_PREFIX: &str = ".cairn-tmp-";

pub(crate) use cairn_store::nofollow::{
    create_at, is_dir, open_abs_dir, open_file_at, rename_at, split, sync_dir, unlink_at, Reach,
};

/// Turns a [`Reach`] refusal into this crate's error for `path` of
/// checkpoint `id`.
pub(crate) trait ReachExt {
    /// The refusal or error.
    fn into_error(self, id: &str, path: &str) -> CheckpointError;
}

impl ReachExt for Reach {
    fn into_error(self, id: &str, path: &str) -> CheckpointError {
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

/// Opens an existing directory by path, following symlinks (for roots the
/// operator chose, like the directory a fork is materialised into).
pub(crate) fn open_dir_path(path: &Path) -> io::Result<OwnedFd> {
    cairn_store::nofollow::open_root(path)
}

/// Opens `rel` below `root` without following any symlink, creating
/// missing directories when `create`.
pub(crate) fn open_dir_in(root: &OwnedFd, rel: &str, create: bool) -> Result<OwnedFd, Reach> {
    cairn_store::nofollow::open_dir(root, rel, create, &mut Vec::new())
}

/// `lstat` of `name` in `dir`: `None` when it does not exist.
pub(crate) fn lstat_at(dir: &OwnedFd, name: &str) -> io::Result<Option<libc::stat>> {
    cairn_store::nofollow::lstat_if_exists(dir, name)
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
