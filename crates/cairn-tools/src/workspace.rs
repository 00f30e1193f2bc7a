//! The workspace root, held as a directory descriptor, and the one path-safety check
//! every tool uses.
//!
//! Invariants:
//!
//! 1. The root is opened once, in [`Workspace::new`]. Every file operation of a tool is
//!    an `*at` call on a directory reached beneath that descriptor by
//!    [`cairn_store::nofollow::open_beneath`]; no tool opens a path string built from
//!    the root, so a directory swapped for a symlink mid-call is refused, never
//!    followed.
//! 2. The model's text becomes a [`RelPath`] ([`RelPath::normalize`]: no absolute path,
//!    no `..`, no NUL, no `.git` in any case) before anything touches the disk.
//! 3. Protected directories ([`Workspace::protect`]) are refused by identity
//!    (`st_dev`, `st_ino`) at every directory the resolver opens.

use std::fs;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn_store::nofollow::{self, Beneath, DirId, FileKind, Unreachable};
use cairn_store::safe::{PathRule, RelPath};

use crate::error::{PathError, ToolError};

/// What a checked path is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The path must exist.
    Read,
    /// Missing trailing components are allowed (the writer creates the parents), but the
    /// path must not name an existing directory.
    Write,
}

/// The directory the tools work in: its canonical path (for display and as the shell's
/// working directory) and a descriptor of it, opened once, beneath which every file
/// tool works.
///
/// Clones share the descriptor.
#[derive(Debug, Clone)]
pub struct Workspace {
    root: PathBuf,
    fd: Arc<OwnedFd>,
    protected: Arc<[DirId]>,
}

impl Workspace {
    /// Opens `root` as a workspace, canonicalizing it (symlinks in the root itself are
    /// resolved once, here; below the root none are followed) and keeping a descriptor
    /// of it.
    ///
    /// # Errors
    ///
    /// [`ToolError::WorkspaceRoot`] if `root` does not exist, cannot be canonicalized
    /// or opened, or is not a directory.
    pub fn new(root: impl AsRef<Path>) -> Result<Self, ToolError> {
        let given = root.as_ref();
        let fail = |source| ToolError::WorkspaceRoot {
            path: given.to_path_buf(),
            source,
        };
        let root = fs::canonicalize(given).map_err(fail)?;
        if !fs::metadata(&root).map_err(fail)?.is_dir() {
            return Err(fail(io::Error::new(
                io::ErrorKind::NotADirectory,
                "it is not a directory",
            )));
        }
        let fd = nofollow::open_root(&root).map_err(fail)?;
        Ok(Self {
            root,
            fd: Arc::new(fd),
            protected: Arc::from(Vec::new()),
        })
    }

    /// Adds `dir` to the directories the tools must never touch (cairn's store): a path
    /// that goes into it or names it is refused with [`PathError::Protected`], and
    /// search leaves it out. The directory is recorded by identity (device and inode),
    /// so it is recognised under any name, letter case or bind mount, and after a
    /// rename. A `dir` that does not exist protects nothing (protect it once it
    /// exists). Symlinks in `dir` itself are followed: it is the operator's path.
    ///
    /// ```
    /// # fn main() -> Result<(), Box<dyn std::error::Error>> {
    /// let top = tempfile::tempdir()?;
    /// std::fs::create_dir_all(top.path().join("store"))?;
    /// let ws = cairn_tools::Workspace::new(top.path())?.protect(top.path().join("store"))?;
    /// assert!(ws.resolve("store/x", cairn_tools::Access::Write).is_err());
    /// # Ok(())
    /// # }
    /// ```
    ///
    /// # Errors
    ///
    /// [`ToolError::Protect`] if `dir` exists but cannot be inspected or is not a
    /// directory; [`ToolError::ProtectedRoot`] if the workspace root is `dir` or lies
    /// inside it (then every tool would write into it).
    pub fn protect(mut self, dir: impl AsRef<Path>) -> Result<Self, ToolError> {
        let dir = dir.as_ref();
        let fail = |source| ToolError::Protect {
            path: dir.to_path_buf(),
            source,
        };
        let fd = match nofollow::open_root(dir) {
            Ok(fd) => fd,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(self),
            Err(e) => return Err(fail(e)),
        };
        let id = DirId::of_fd(&fd).map_err(fail)?;
        // The root path is canonical, so its ancestors are the directories above it.
        for above in self.root.ancestors() {
            let meta = fs::metadata(above).map_err(fail)?;
            if (DirId {
                dev: meta.dev(),
                ino: meta.ino(),
            }) == id
            {
                return Err(ToolError::ProtectedRoot {
                    root: self.root.clone(),
                    protected: dir.to_path_buf(),
                });
            }
        }
        let mut ids = self.protected.to_vec();
        ids.push(id);
        self.protected = Arc::from(ids);
        Ok(self)
    }

    /// The canonical workspace root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The path-safety check, as a path: checks a workspace-relative path for reading
    /// or writing and returns it joined to the root. The tools apply the same check
    /// but do their I/O through the workspace's descriptor, never through this path.
    ///
    /// The rules, in the order they are applied:
    ///
    /// 1. `rel` must not be empty and must not name the root itself (`.`, `./`); see
    ///    [`Workspace::resolve_dir`] for the tools where the root is a valid answer.
    /// 2. `rel` must not contain a NUL byte.
    /// 3. `rel` must be relative: anything starting with `/`, `\`, `~` or a drive like
    ///    `C:` is refused.
    /// 4. `rel` must not contain a `..` component (also `..` between backslashes), nor
    ///    a `.git` component in any letter case. `..` is refused outright, never
    ///    normalised away. `.` components and repeated `/` are ignored.
    /// 5. Every existing directory, from the root down, is opened relative to the one
    ///    before without following links: a symlink anywhere on the path is refused,
    ///    even one that points inside the workspace, and so is a file used as a
    ///    directory and a protected directory ([`Workspace::protect`]).
    /// 6. For [`Access::Read`] the whole path must exist. For [`Access::Write`] the
    ///    missing trailing components are allowed, but an existing directory as the
    ///    final component is refused.
    ///
    /// # Errors
    ///
    /// The [`PathError`] variant of the first rule broken.
    pub fn resolve(&self, rel: &str, purpose: Access) -> Result<PathBuf, PathError> {
        let path = self.rel(rel)?;
        self.check(rel, &path, purpose)?;
        Ok(self.root.join(path.as_str()))
    }

    /// Like [`Workspace::resolve`] with [`Access::Read`], except that `""` and `.` mean
    /// the root itself. Used by the tools that take a directory (list_dir, search).
    ///
    /// # Errors
    ///
    /// As [`Workspace::resolve`].
    pub fn resolve_dir(&self, rel: &str) -> Result<PathBuf, PathError> {
        match self.rel_or_root(rel)? {
            None => Ok(self.root.clone()),
            Some(path) => {
                self.check(rel, &path, Access::Read)?;
                Ok(self.root.join(path.as_str()))
            }
        }
    }

    /// Rules 5 and 6 of [`Workspace::resolve`].
    fn check(&self, text: &str, path: &RelPath, purpose: Access) -> Result<(), PathError> {
        let parent = match self.open_dir(text, path.split_last().0, false) {
            Ok(fd) => fd,
            // The writer creates missing parents; all above them are plain directories.
            Err(PathError::NotFound { .. }) if purpose == Access::Write => return Ok(()),
            Err(e) => return Err(e),
        };
        if let Some(st) = self.entry(text, path, &parent, purpose)? {
            if nofollow::is_dir(&st) {
                // A directory named by the path must not be a protected one.
                self.open_dir(text, path.as_str(), false)?;
            }
        }
        Ok(())
    }

    /// Rules 1–4: the model's text as a validated path.
    pub(crate) fn rel(&self, text: &str) -> Result<RelPath, PathError> {
        RelPath::normalize(text).map_err(|rule| refused(text, rule))
    }

    /// As [`Workspace::rel`], but `None` for the root itself (`""`, `.`, `./`).
    pub(crate) fn rel_or_root(&self, text: &str) -> Result<Option<RelPath>, PathError> {
        match RelPath::normalize(text) {
            Ok(path) => Ok(Some(path)),
            Err(PathRule::Empty) => Ok(None),
            Err(rule) => Err(refused(text, rule)),
        }
    }

    /// Opens the directory `dir` (a [`RelPath`]'s text or directory part; `""` is the
    /// root) beneath the root, refusing symlinks and protected directories; with
    /// `create`, missing directories are made one at a time inside their opened parent.
    /// `text` is the model's path, for the error.
    pub(crate) fn open_dir(
        &self,
        text: &str,
        dir: &str,
        create: bool,
    ) -> Result<OwnedFd, PathError> {
        let how = Beneath {
            create,
            refuse: &self.protected,
        };
        nofollow::open_beneath(&self.fd, dir, how, &mut Vec::new())
            .map_err(|u| unreachable(text, u))
    }

    /// Opens the subdirectory `name` of `dir` (an already opened directory of the
    /// workspace), refusing a symlink or a protected directory there.
    pub(crate) fn open_subdir(&self, dir: &OwnedFd, name: &str) -> Result<OwnedFd, Unreachable> {
        let how = Beneath {
            create: false,
            refuse: &self.protected,
        };
        nofollow::open_beneath(dir, name, how, &mut Vec::new())
    }

    /// The final component of `path` in its opened `parent`, not following a link:
    /// `None` when missing (only for [`Access::Write`]). Refuses a symlink, a missing
    /// entry for reading, and a directory for writing.
    pub(crate) fn entry(
        &self,
        text: &str,
        path: &RelPath,
        parent: &OwnedFd,
        purpose: Access,
    ) -> Result<Option<libc::stat>, PathError> {
        let name = path.split_last().1;
        let st = nofollow::lstat_if_exists(parent, name).map_err(|source| PathError::Io {
            path: text.into(),
            component: PathBuf::from(path.as_str()),
            source,
        })?;
        match st {
            None if purpose == Access::Read => Err(PathError::NotFound { path: text.into() }),
            Some(st) if FileKind::of(&st) == FileKind::Symlink => Err(PathError::Symlink {
                path: text.into(),
                link: PathBuf::from(path.as_str()),
            }),
            Some(st) if nofollow::is_dir(&st) && purpose == Access::Write => {
                Err(PathError::IsADirectory { path: text.into() })
            }
            st => Ok(st),
        }
    }
}

/// The [`PathError`] for a path that breaks a rule of [`RelPath`].
fn refused(text: &str, rule: PathRule) -> PathError {
    let path = text.to_owned();
    match rule {
        PathRule::Empty => PathError::Empty { path },
        PathRule::Nul => PathError::Nul { path },
        PathRule::Absolute => PathError::Absolute { path },
        PathRule::Parent => PathError::ParentComponent { path },
        PathRule::Git => PathError::Git { path },
        rule => PathError::Invalid { path, rule },
    }
}

/// The [`PathError`] for a directory the resolver did not open.
fn unreachable(text: &str, u: Unreachable) -> PathError {
    let path = text.to_owned();
    match u {
        Unreachable::Symlink(p) => PathError::Symlink {
            path,
            link: p.into(),
        },
        Unreachable::NotDir(p) => PathError::NotADirectory {
            path,
            component: p.into(),
        },
        Unreachable::Missing(_) => PathError::NotFound { path },
        Unreachable::Refused(p) => PathError::Protected {
            path,
            dir: p.into(),
        },
        Unreachable::Io(p, source) => PathError::Io {
            path,
            component: p.into(),
            source,
        },
        other => PathError::Io {
            path,
            component: PathBuf::new(),
            source: io::Error::new(io::ErrorKind::InvalidInput, other.to_string()),
        },
    }
}
