//! The workspace root and the one path-safety check every tool uses.

use std::ffi::OsStr;
use std::fs;
use std::io;
use std::path::{Component, Path, PathBuf};

use crate::error::{PathError, ToolError};

/// What a resolved path is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The path must exist.
    Read,
    /// Missing trailing components are allowed (the writer creates the parents), but the
    /// path must not name an existing directory.
    Write,
}

/// The directory the tools work in, held as a canonical path.
///
/// Tools see the filesystem only through [`Workspace::resolve`], so every path a tool
/// touches passes the same check.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
}

impl Workspace {
    /// Opens `root` as a workspace, canonicalizing it (symlinks in the root itself are
    /// resolved once, here; below the root none are followed).
    ///
    /// # Errors
    ///
    /// [`ToolError::WorkspaceRoot`] if `root` does not exist, cannot be canonicalized
    /// or is not a directory.
    pub fn new(root: impl AsRef<Path>) -> Result<Self, ToolError> {
        let given = root.as_ref();
        let fail = |source| ToolError::WorkspaceRoot {
            path: given.to_path_buf(),
            source,
        };
        let root = fs::canonicalize(given).map_err(fail)?;
        let meta = fs::metadata(&root).map_err(fail)?;
        if !meta.is_dir() {
            return Err(fail(io::Error::new(
                io::ErrorKind::NotADirectory,
                "it is not a directory",
            )));
        }
        Ok(Self { root })
    }

    /// The canonical workspace root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The path-safety check: resolves a workspace-relative path for reading or writing.
    ///
    /// The rules, in the order they are applied:
    ///
    /// 1. `rel` must not contain a NUL byte.
    /// 2. `rel` must not be empty, and must not name the root itself (`.`, `./`); see
    ///    [`Workspace::resolve_dir`] for the tools where the root is a valid answer.
    /// 3. `rel` must be relative: anything starting with `/`, `\`, `~` or a drive like
    ///    `C:` is refused.
    /// 4. `rel` must not contain a `..` component (also `..` between backslashes). It is
    ///    refused outright, never normalised away. `.` components and repeated `/` are
    ///    ignored.
    /// 5. Every existing component, from the root down, is inspected without following
    ///    links: a symlink anywhere on the path is refused, even one that points inside
    ///    the workspace, and so is a file used as a directory.
    /// 6. For [`Access::Read`] the whole path must exist. For [`Access::Write`] the
    ///    missing trailing components are allowed, but an existing directory as the
    ///    final component is refused.
    /// 7. The deepest existing component is canonicalized and must still lie inside the
    ///    root.
    ///
    /// The check cannot stop a concurrent process from swapping a directory for a
    /// symlink after it ran; the tools narrow that window by opening the final
    /// component with `O_NOFOLLOW` and re-checking created parents.
    ///
    /// # Errors
    ///
    /// The [`PathError`] variant of the first rule broken.
    pub fn resolve(&self, rel: &str, purpose: Access) -> Result<PathBuf, PathError> {
        let parts = components(rel)?;
        if parts.is_empty() {
            return Err(PathError::Empty { path: rel.into() });
        }
        self.walk(rel, &parts, purpose)
    }

    /// Like [`Workspace::resolve`] with [`Access::Read`], except that `""` and `.` mean
    /// the root itself. Used by the tools that take a directory (list_dir, search).
    ///
    /// # Errors
    ///
    /// As [`Workspace::resolve`].
    pub fn resolve_dir(&self, rel: &str) -> Result<PathBuf, PathError> {
        let parts = components(rel)?;
        if parts.is_empty() {
            return Ok(self.root.clone());
        }
        self.walk(rel, &parts, Access::Read)
    }

    fn walk(&self, rel: &str, parts: &[&OsStr], purpose: Access) -> Result<PathBuf, PathError> {
        let mut full = self.root.clone();
        let mut shown = PathBuf::new();
        // The deepest component known to exist, and whether it is the final one.
        let mut complete = true;
        let mut final_is_dir = false;
        for (i, part) in parts.iter().enumerate() {
            full.push(part);
            shown.push(part);
            match fs::symlink_metadata(&full) {
                Ok(meta) if meta.file_type().is_symlink() => {
                    return Err(PathError::Symlink {
                        path: rel.into(),
                        link: shown,
                    });
                }
                Ok(meta) if i + 1 < parts.len() && !meta.is_dir() => {
                    return Err(PathError::NotADirectory {
                        path: rel.into(),
                        component: shown,
                    });
                }
                Ok(meta) => final_is_dir = meta.is_dir(),
                Err(e) if e.kind() == io::ErrorKind::NotFound => {
                    if purpose == Access::Read {
                        return Err(PathError::NotFound { path: rel.into() });
                    }
                    full.pop();
                    complete = false;
                    break;
                }
                Err(source) => {
                    return Err(PathError::Io {
                        path: rel.into(),
                        component: shown,
                        source,
                    });
                }
            }
        }
        if complete && final_is_dir && purpose == Access::Write {
            return Err(PathError::IsADirectory { path: rel.into() });
        }
        // `full` is now the deepest existing component; no link was seen on the way,
        // so its canonical form must be itself, inside the root.
        match fs::canonicalize(&full) {
            Ok(canon) if canon == full && canon.starts_with(&self.root) => {}
            Ok(_) => return Err(PathError::Escapes { path: rel.into() }),
            Err(source) => {
                return Err(PathError::Io {
                    path: rel.into(),
                    component: shown,
                    source,
                });
            }
        }
        let mut out = self.root.clone();
        out.extend(parts);
        Ok(out)
    }

    /// Writes a path under the root back as the workspace-relative text the model uses.
    pub(crate) fn display(&self, path: &Path) -> String {
        match path.strip_prefix(&self.root) {
            Ok(rel) if rel.as_os_str().is_empty() => ".".into(),
            Ok(rel) => rel.to_string_lossy().into_owned(),
            Err(_) => path.to_string_lossy().into_owned(),
        }
    }
}

/// Applies rules 1, 3 and 4 of [`Workspace::resolve`] and returns the normal components.
fn components(rel: &str) -> Result<Vec<&OsStr>, PathError> {
    if rel.contains('\0') {
        return Err(PathError::Nul { path: rel.into() });
    }
    let bytes = rel.as_bytes();
    let drive = bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':';
    if rel.starts_with(['/', '\\', '~']) || drive {
        return Err(PathError::Absolute { path: rel.into() });
    }
    let mut parts = Vec::new();
    for component in Path::new(rel).components() {
        match component {
            Component::Normal(part) => {
                let text = part.to_string_lossy();
                if text.split('\\').any(|piece| piece == "..") {
                    return Err(PathError::ParentComponent { path: rel.into() });
                }
                parts.push(part);
            }
            Component::CurDir => {}
            Component::ParentDir => {
                return Err(PathError::ParentComponent { path: rel.into() });
            }
            Component::RootDir | Component::Prefix(_) => {
                return Err(PathError::Absolute { path: rel.into() });
            }
        }
    }
    Ok(parts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn components_skip_dots_and_repeated_slashes() {
        let parts = components("./a//b/./c/").unwrap_or_default();
        assert_eq!(parts, ["a", "b", "c"]);
    }

    #[test]
    fn lexical_refusals() {
        for (rel, ok) in [
            ("a\\..\\b", false),
            ("..\\x", false),
            ("a\\b", true),
            ("c:x", false),
            ("~", false),
            ("a/~", true),
            ("...", true),
            ("..a", true),
        ] {
            assert_eq!(components(rel).is_ok(), ok, "{rel}");
        }
    }
}
