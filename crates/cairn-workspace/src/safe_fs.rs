//! File operations inside the workspace that never follow a symlink and
//! never leave the root: the shared rule of `cairn_store::nofollow`, plus
//! what only workspace restores need.

use std::os::fd::OwnedFd;

pub(crate) use cairn_store::nofollow::{
    chmod_at, create_at, is_regular, lstat_at, open_dir, open_file_at, open_root, rename_at,
    rmdir_at, sync_dir, unlink_at, Reach,
};

/// Opens the directory holding `rel` and returns it with the last component.
pub(crate) fn open_parent(
    root: &OwnedFd,
    rel: &str,
    create: bool,
    created: &mut Vec<String>,
) -> Result<(OwnedFd, String), Reach> {
    let (dir, name) = cairn_store::nofollow::split(rel);
    Ok((open_dir(root, dir, create, created)?, name.to_owned()))
}
