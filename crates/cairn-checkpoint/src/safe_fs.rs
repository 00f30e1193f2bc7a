//! Writing files without following symlinks: the shared rule of
//! `cairn_store::nofollow`, plus staging objects into temporary files. New
//! files are written under a temporary name (`cairn_store::safe::temp_name`,
//! the one scheme captures know to skip), fsynced, renamed over the target
//! and the directory fsynced. The mode a file gets is only ever
//! `cairn_store::safe::permission_bits` of the recorded one: no setuid,
//! setgid or sticky bit from a manifest is applied.

use std::io::{self, BufWriter, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use cairn_objects::{ObjectHash, ObjectPool};
use cairn_store::safe::{permission_bits, temp_name};
use cairn_store::storage;

use crate::CheckpointError;

pub(crate) use cairn_store::nofollow::{
    create_at, is_dir, open_abs_dir, open_file_at, rename_at, split, sync_dir, unlink_at, Reach,
};

/// Turns a [`Reach`] refusal into this crate's error for `path` of
/// checkpoint `id`.
pub(crate) trait ReachExt {
    /// The refusal before anything changed ([`CheckpointError::UnsafePath`]).
    fn into_error(self, id: &str, path: &str) -> CheckpointError;
    /// The same found while writing ([`CheckpointError::Unreachable`]),
    /// which claims nothing about what was changed.
    fn into_unreachable(self, path: &str) -> CheckpointError;
}

/// Why a path could not be reached, in words.
fn reason(r: &Reach) -> String {
    match r {
        Reach::Symlink(at) => {
            format!("`{at}` is a symbolic link, and cairn never writes through one")
        }
        Reach::NotDir(at) => format!("`{at}` is not a directory"),
        Reach::Io(e) => e.to_string(),
    }
}

impl ReachExt for Reach {
    fn into_error(self, id: &str, path: &str) -> CheckpointError {
        match self {
            Reach::Io(e) => CheckpointError::io("reaching", path, e),
            r => CheckpointError::UnsafePath {
                id: id.to_owned(),
                path: path.to_owned(),
                reason: reason(&r),
            },
        }
    }

    fn into_unreachable(self, path: &str) -> CheckpointError {
        match self {
            Reach::Io(e) => CheckpointError::io("reaching", path, e),
            r => CheckpointError::Unreachable {
                path: path.to_owned(),
                reason: reason(&r),
            },
        }
    }
}

/// Sets the permission bits of `mode` (and nothing else) on `file`.
pub(crate) fn set_mode(
    file: &std::fs::File,
    mode: u32,
    shown: &str,
) -> Result<(), CheckpointError> {
    file.set_permissions(std::fs::Permissions::from_mode(permission_bits(mode)))
        .map_err(|e| CheckpointError::io("setting the mode of", shown, e))
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

/// Writes the content of object `hash` (verified on the way) with the
/// permission bits of `mode` into a new temporary file in `dir`, fsynced;
/// returns its name. On error the temporary file is removed.
pub(crate) fn stage(
    pool: &ObjectPool,
    dir: &OwnedFd,
    hash: &ObjectHash,
    mode: u32,
    shown: &str,
) -> Result<String, CheckpointError> {
    let temp = temp_name();
    let file = create_at(dir, &temp)
        .map_err(|e| CheckpointError::io("creating a temporary file for", shown, e))?;
    let result = (|| -> Result<(), CheckpointError> {
        let tracked = storage::Tracked::resolved(&file, storage::path_at(dir.as_fd(), &temp));
        let mut out = BufWriter::with_capacity(1 << 20, tracked);
        pool.read_to(hash, &mut out)?;
        out.flush()
            .map_err(|e| CheckpointError::io("writing", shown, e))?;
        drop(out);
        set_mode(&file, mode, shown)?;
        storage::sync_fd(file.as_fd(), false, "checkpoint.restore.file")
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
