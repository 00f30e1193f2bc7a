//! Reading and atomically replacing files of the workspace, through the descriptor of
//! the directory that holds them.
//!
//! Invariants: a file is opened with `O_NOFOLLOW | O_NONBLOCK` relative to its opened
//! parent and checked to be a regular file on the opened descriptor, so a FIFO, socket
//! or device is refused without blocking; a write goes through
//! [`cairn_store::nofollow::replace_at`] in that same parent (temporary file named by
//! [`cairn_store::safe::temp_name`], fsync, rename, fsync of the directory).

use std::fs::File;
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::path::PathBuf;

use cairn_store::nofollow::{self, FileKind};
use cairn_store::safe::RelPath;

use crate::error::{PathError, ToolError};
use crate::workspace::{Access, Workspace};

/// A file of the workspace, reached: the directory that holds it, opened beneath the
/// root, and the validated path. `text` is the model's path, for messages.
pub(crate) struct Target<'a> {
    pub(crate) text: &'a str,
    pub(crate) path: RelPath,
    pub(crate) parent: OwnedFd,
}

impl<'a> Target<'a> {
    /// Checks `text` and opens the directory that holds it; with `create`, missing
    /// parent directories are made inside the workspace, one at a time.
    pub(crate) fn reach(ws: &Workspace, text: &'a str, create: bool) -> Result<Self, ToolError> {
        let path = ws.rel(text)?;
        let parent = ws.open_dir(text, path.split_last().0, create)?;
        Ok(Target { text, path, parent })
    }

    fn name(&self) -> &str {
        self.path.split_last().1
    }

    /// Opens the target as a regular file for reading; returns it and its size.
    pub(crate) fn open(&self, ws: &Workspace) -> Result<(File, u64), ToolError> {
        if let Some(st) = ws.entry(self.text, &self.path, &self.parent, Access::Read)? {
            refuse_kind(self.text, FileKind::of(&st))?;
        }
        open_regular(&self.parent, self.name(), self.text)
    }

    /// Replaces the target with `bytes` atomically, creating it if missing. An existing
    /// file keeps its permission bits; anything but a regular file is refused.
    pub(crate) fn replace(&self, ws: &Workspace, bytes: &[u8]) -> Result<(), ToolError> {
        let mode = match ws.entry(self.text, &self.path, &self.parent, Access::Write)? {
            None => None,
            Some(st) => {
                refuse_kind(self.text, FileKind::of(&st))?;
                // mode_t is narrower than u32 on some systems.
                #[allow(clippy::useless_conversion)]
                let mode = u32::from(st.st_mode);
                Some(mode)
            }
        };
        nofollow::replace_at(&self.parent, self.name(), bytes, mode)
            .map_err(|e| io_error(e.action, self.text, e.source))
    }
}

/// Refuses anything but a regular file, by what it is.
fn refuse_kind(text: &str, kind: FileKind) -> Result<(), ToolError> {
    match kind {
        FileKind::File => Ok(()),
        FileKind::Dir => Err(ToolError::IsADirectory { path: text.into() }),
        FileKind::Symlink => Err(PathError::Symlink {
            path: text.into(),
            link: PathBuf::from(text),
        }
        .into()),
        other => Err(ToolError::NotRegular {
            path: text.into(),
            kind: other.describe(),
        }),
    }
}

/// Opens `name` in `dir` for reading without following a link and without blocking,
/// and checks on the opened descriptor that it is a regular file (whatever a
/// concurrent process put there since it was looked at). `shown` names it in errors.
pub(crate) fn open_regular(
    dir: &OwnedFd,
    name: &str,
    shown: &str,
) -> Result<(File, u64), ToolError> {
    let file = nofollow::open_file_at(dir, name).map_err(|e| {
        let kind = match e.raw_os_error() {
            Some(libc::ELOOP) => Some(FileKind::Symlink),
            Some(libc::ENOENT) => return PathError::NotFound { path: shown.into() }.into(),
            // A socket, or a device with nothing behind it, cannot be opened at all.
            Some(libc::ENXIO) => nofollow::lstat_at(dir, name)
                .ok()
                .map(|st| FileKind::of(&st)),
            _ => None,
        };
        kind.and_then(|kind| refuse_kind(shown, kind).err())
            .unwrap_or_else(|| io_error("open", shown, e))
    })?;
    let st = nofollow::stat_of(&file).map_err(|e| io_error("inspect", shown, e))?;
    refuse_kind(shown, FileKind::of(&st))?;
    Ok((file, u64::try_from(st.st_size).unwrap_or(0)))
}

/// Reads up to `limit` bytes of a file; returns them and whether the file had more.
pub(crate) fn read_prefix(
    rel: &str,
    file: File,
    limit: usize,
) -> Result<(Vec<u8>, bool), ToolError> {
    let mut bytes = Vec::new();
    let cap = u64::try_from(limit).unwrap_or(u64::MAX).saturating_add(1);
    file.take(cap)
        .read_to_end(&mut bytes)
        .map_err(|e| io_error("read", rel, e))?;
    let more = bytes.len() > limit;
    bytes.truncate(limit);
    Ok((bytes, more))
}

/// The length of the longest prefix of `bytes` that does not end inside a UTF-8
/// sequence, so that cutting there splits no character.
pub(crate) fn char_boundary(bytes: &[u8]) -> usize {
    match std::str::from_utf8(bytes) {
        Ok(_) => bytes.len(),
        Err(e) if e.error_len().is_none() => e.valid_up_to(),
        Err(_) => {
            // Invalid bytes somewhere; only trim a trailing partial sequence.
            let tail_start = bytes.len().saturating_sub(3);
            (tail_start..bytes.len())
                .find(|&i| {
                    let b = bytes[i];
                    let need = match b {
                        0xC0..=0xDF => 2,
                        0xE0..=0xEF => 3,
                        0xF0..=0xF7 => 4,
                        _ => return false,
                    };
                    i + need > bytes.len()
                })
                .unwrap_or(bytes.len())
        }
    }
}

pub(crate) fn io_error(action: &'static str, rel: &str, source: io::Error) -> ToolError {
    ToolError::Io {
        action,
        path: rel.into(),
        source,
    }
}

#[cfg(test)]
mod tests {
    use super::char_boundary;

    #[test]
    fn char_boundary_trims_only_a_partial_trailing_character() {
        let e_acute = "é".as_bytes();
        assert_eq!(char_boundary(b"abc"), 3);
        assert_eq!(char_boundary(&[b'a', e_acute[0]]), 1);
        assert_eq!(char_boundary(&[0xFF, b'a', e_acute[0]]), 2);
        assert_eq!(char_boundary(&[0xFF, b'a']), 2);
        let snowman = "☃".as_bytes();
        assert_eq!(char_boundary(&snowman[..2]), 0);
    }
}
