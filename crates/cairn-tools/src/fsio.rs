//! File reading and atomic writing for the file tools, after the path-safety check.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::error::{PathError, ToolError};
use crate::workspace::Workspace;

/// Opens a resolved path for reading without following a symlink in its final
/// component (closing the window between the check and the open).
pub(crate) fn open_read(rel: &str, path: &Path) -> Result<File, ToolError> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(path)
        .map_err(|source| match source.raw_os_error() {
            Some(libc::ELOOP) => PathError::Symlink {
                path: rel.into(),
                link: PathBuf::from(rel),
            }
            .into(),
            _ => io_error("open", rel, source),
        })
}

/// Opens a resolved path as a regular file for reading.
pub(crate) fn open_file(rel: &str, path: &Path) -> Result<(File, u64), ToolError> {
    let file = open_read(rel, path)?;
    let meta = file.metadata().map_err(|e| io_error("inspect", rel, e))?;
    if meta.is_dir() {
        return Err(ToolError::IsADirectory { path: rel.into() });
    }
    Ok((file, meta.len()))
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

/// Writes `bytes` to `path` atomically: into a new temporary file in the same
/// directory, synced, then renamed over the target. Missing parent directories are
/// created and then re-checked to lie inside the workspace. An existing target keeps
/// its permissions. On any failure the temporary file is removed, so no partial file
/// is ever visible under the target's name.
pub(crate) fn atomic_write(
    ws: &Workspace,
    rel: &str,
    path: &Path,
    bytes: &[u8],
) -> Result<(), ToolError> {
    let parent = path
        .parent()
        .ok_or_else(|| PathError::Empty { path: rel.into() })?;
    let name = path
        .file_name()
        .ok_or_else(|| PathError::Empty { path: rel.into() })?;
    fs::create_dir_all(parent).map_err(|e| io_error("create the parent directories of", rel, e))?;
    match fs::canonicalize(parent) {
        Ok(canon) if canon == parent && canon.starts_with(ws.root()) => {}
        Ok(_) => return Err(PathError::Escapes { path: rel.into() }.into()),
        Err(e) => return Err(io_error("create the parent directories of", rel, e)),
    }
    let permissions = match fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => {
            return Err(PathError::Symlink {
                path: rel.into(),
                link: PathBuf::from(rel),
            }
            .into());
        }
        Ok(meta) if meta.is_dir() => {
            return Err(PathError::IsADirectory { path: rel.into() }.into())
        }
        Ok(meta) => Some(meta.permissions()),
        Err(_) => None,
    };

    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let temp = parent.join(format!(
        ".{}.cairn-tmp.{}.{}",
        name.to_string_lossy(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let mut guard = TempGuard(Some(temp.clone()));
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .custom_flags(libc::O_NOFOLLOW)
        .open(&temp)
        .map_err(|e| io_error("create a temporary file beside", rel, e))?;
    let written = (|| -> io::Result<()> {
        if let Some(permissions) = permissions {
            file.set_permissions(permissions)?;
        }
        file.write_all(bytes)?;
        file.sync_all()
    })();
    written.map_err(|e| io_error("write", rel, e))?;
    drop(file);
    fs::rename(&temp, path).map_err(|e| io_error("replace", rel, e))?;
    guard.0 = None;
    Ok(())
}

/// Removes a temporary file unless disarmed.
struct TempGuard(Option<PathBuf>);

impl Drop for TempGuard {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = fs::remove_file(path);
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
