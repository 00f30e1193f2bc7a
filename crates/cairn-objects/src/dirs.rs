//! The pool's directories and files, reached beneath the store's root
//! without following a symbolic link: the one way the pool opens anything.
//!
//! Invariants:
//! 1. The store root is opened by path (a link there is the operator's
//!    choice, as for every store path); `objects/`, `objects/<aa>/` and
//!    every object file below it are reached by
//!    [`cairn_store::nofollow`]'s resolver and `*at` calls on the
//!    descriptor it returns. A link anywhere below the root — even one
//!    swapped in while cairn works — is refused as
//!    [`ObjectError::NotPlain`], naming it, never followed: nothing is read
//!    from or written to a directory outside the store through the pool.
//! 2. A directory the pool makes gets mode `0700`; `objects/` has its
//!    parent fsynced at once, a fan-out directory is made durable by the
//!    batch that made it, at commit, before anything names its objects.
//! 3. An object file is opened `O_NOFOLLOW | O_NONBLOCK`, and used only
//!    when the opened descriptor is a regular file.

use std::fs::File;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::PathBuf;

use cairn_store::durable::DIR_MODE;
use cairn_store::nofollow::{self, Beneath, FileKind, Unreachable};

use crate::{ObjectError, ObjectHash, ObjectPool};

/// A directory of the pool (or one a batch stages a file into), held open:
/// its descriptor, and its path for messages.
#[derive(Debug)]
pub(crate) struct Dir {
    pub(crate) fd: OwnedFd,
    pub(crate) path: PathBuf,
}

impl Dir {
    /// fsync of the directory (`site` for the crash model).
    pub(crate) fn sync(&self, site: &'static str) -> Result<(), ObjectError> {
        cairn_store::storage::sync_fd(self.fd.as_fd(), true, site)
            .map_err(|e| ObjectError::io("syncing directory", &self.path, e))
    }

    /// The path of `name` in it, to report to the crash model (`None`
    /// when nothing records).
    pub(crate) fn reported(&self, name: &str) -> Option<PathBuf> {
        cairn_store::storage::path_at(self.fd.as_fd(), name)
    }
}

impl ObjectPool {
    /// The store root, opened by path; `None` when it does not exist.
    fn root_fd(&self) -> Result<Option<OwnedFd>, ObjectError> {
        let root = self.store().root();
        match nofollow::open_root(root) {
            Ok(fd) => Ok(Some(fd)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(ObjectError::io("opening the store", root, e)),
        }
    }

    /// The error for a path below the store root that could not be reached
    /// (`None`: it is missing).
    fn unreached(&self, u: Unreachable) -> Option<ObjectError> {
        let root = self.store().root();
        Some(match u {
            Unreachable::Missing(_) => return None,
            Unreachable::Symlink(p) => ObjectError::NotPlain {
                path: root.join(p),
                what: FileKind::Symlink.describe(),
                expected: "directory",
            },
            Unreachable::NotDir(p) => ObjectError::NotPlain {
                path: root.join(p),
                what: "not a directory",
                expected: "directory",
            },
            Unreachable::Io(p, e) => ObjectError::io("opening", root.join(p), e),
            other => ObjectError::io(
                "opening",
                root.join("objects"),
                io::Error::new(io::ErrorKind::InvalidInput, other.to_string()),
            ),
        })
    }

    /// Opens `rel` (`objects` or `objects/<aa>`) beneath the store root;
    /// `None` when it (or the root) is missing.
    fn open_rel(&self, rel: &str) -> Result<Option<Dir>, ObjectError> {
        let Some(root) = self.root_fd()? else {
            return Ok(None);
        };
        match nofollow::open_beneath(&root, rel, Beneath::default(), &mut Vec::new()) {
            Ok(fd) => Ok(Some(Dir {
                fd,
                path: self.store().root().join(rel),
            })),
            Err(u) => self.unreached(u).map_or(Ok(None), Err),
        }
    }

    /// `<store>/objects`, opened (invariant 1); `None` when missing.
    ///
    /// # Errors
    /// [`ObjectError::NotPlain`] when it is a link or not a directory.
    pub(crate) fn objects_dir(&self) -> Result<Option<Dir>, ObjectError> {
        self.open_rel("objects")
    }

    /// `<store>/objects`, made (and the store root with it, by path) when
    /// missing, with the root fsynced after (invariant 2).
    ///
    /// # Errors
    /// As [`ObjectPool::objects_dir`], or the directory cannot be made.
    pub(crate) fn objects_dir_made(&self) -> Result<Dir, ObjectError> {
        let root = match self.root_fd()? {
            Some(fd) => fd,
            None => {
                cairn_store::durable::create_dir_private(self.store().root())?;
                self.root_fd()?.ok_or_else(|| {
                    ObjectError::io(
                        "opening the store",
                        self.store().root(),
                        io::ErrorKind::NotFound.into(),
                    )
                })?
            }
        };
        let (fd, made) = nofollow::make_dir_at(&root, "objects", DIR_MODE)
            .map_err(|u| self.unreached(u).unwrap_or_else(|| missing_dir(self)))?;
        if made {
            cairn_store::storage::sync_fd(root.as_fd(), true, "dir")
                .map_err(|e| ObjectError::io("syncing directory", self.store().root(), e))?;
        }
        Ok(Dir {
            fd,
            path: self.dir().to_path_buf(),
        })
    }

    /// The fan-out directory `fan` (two hex digits), opened; `None` when
    /// it (or `objects/`) is missing.
    ///
    /// # Errors
    /// As [`ObjectPool::objects_dir`], for either directory.
    pub(crate) fn fan_dir(&self, fan: &str) -> Result<Option<Dir>, ObjectError> {
        self.open_rel(&format!("objects/{fan}"))
    }

    /// The fan-out directory `fan` in the open `objects`, made when missing
    /// (mode `0700`; its entry made durable by the caller: invariant 2).
    ///
    /// # Errors
    /// As [`ObjectPool::objects_dir`], or it cannot be made.
    pub(crate) fn fan_dir_made(&self, objects: &Dir, fan: &str) -> Result<Dir, ObjectError> {
        let (fd, _) = nofollow::make_dir_at(&objects.fd, fan, DIR_MODE).map_err(|u| {
            let u = match u {
                Unreachable::Symlink(p) => Unreachable::Symlink(format!("objects/{p}")),
                Unreachable::NotDir(p) => Unreachable::NotDir(format!("objects/{p}")),
                Unreachable::Io(p, e) => Unreachable::Io(format!("objects/{p}"), e),
                other => other,
            };
            self.unreached(u).unwrap_or_else(|| missing_dir(self))
        })?;
        Ok(Dir {
            fd,
            path: self.dir().join(fan),
        })
    }

    /// The file of the object `hash`, opened for reading (invariants 1 and
    /// 3); `None` when it is missing.
    ///
    /// # Errors
    /// [`ObjectError::NotPlain`] for a link on the way, or an object file
    /// that is not a regular file; IO errors.
    pub(crate) fn open_object_file(&self, hash: &ObjectHash) -> Result<Option<File>, ObjectError> {
        let Some(dir) = self.fan_dir(&hash.fan_out())? else {
            return Ok(None);
        };
        let path = self.path_of(hash);
        let file = match nofollow::open_file_at(&dir.fd, &hash.rest()) {
            Ok(f) => f,
            Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
            Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
                return Err(not_a_file(path, FileKind::Symlink))
            }
            Err(e) => return Err(ObjectError::io("opening object", path, e)),
        };
        let st = nofollow::stat_of(&file)
            .map_err(|e| ObjectError::io("reading metadata of", &path, e))?;
        if !nofollow::is_regular(&st) {
            return Err(not_a_file(path, FileKind::of(&st)));
        }
        Ok(Some(file))
    }

    /// Makes the directory entries of the objects `hashes` durable: an
    /// fsync of each one's fan-out directory, then of `objects/` (what a
    /// writer that names objects it did not write itself does before it
    /// names them: another writer may have made them a moment ago and not
    /// synced them yet). `site` names the syncs for the crash model.
    ///
    /// # Errors
    /// A directory cannot be reached (a link is refused) or synced.
    pub fn sync_dirs_of<'a>(
        &self,
        hashes: impl IntoIterator<Item = &'a ObjectHash>,
        site: &'static str,
    ) -> Result<(), ObjectError> {
        let fans: std::collections::BTreeSet<String> =
            hashes.into_iter().map(ObjectHash::fan_out).collect();
        if fans.is_empty() {
            return Ok(());
        }
        for fan in &fans {
            if let Some(dir) = self.fan_dir(fan)? {
                dir.sync(site)?;
            }
        }
        if let Some(objects) = self.objects_dir()? {
            objects.sync(site)?;
        }
        Ok(())
    }

    /// Checks that `objects/` and the fan-out directories of `hashes` are
    /// plain directories or missing, reached without following a link: what
    /// a copy checks before it writes anything, so that a link in either
    /// store is refused with nothing written. (Every later step refuses a
    /// link too, one swapped in meanwhile included.)
    ///
    /// # Errors
    /// [`ObjectError::NotPlain`] naming the first link; IO errors.
    pub fn check_dirs<'a>(
        &self,
        hashes: impl IntoIterator<Item = &'a ObjectHash>,
    ) -> Result<(), ObjectError> {
        if self.objects_dir()?.is_none() {
            return Ok(());
        }
        let fans: std::collections::BTreeSet<String> =
            hashes.into_iter().map(ObjectHash::fan_out).collect();
        for fan in &fans {
            self.fan_dir(fan)?;
        }
        Ok(())
    }

    /// Whether the object file of `hash` is there as a regular file,
    /// looked up without following a link; any error is "no".
    pub(crate) fn has_file(&self, hash: &ObjectHash) -> bool {
        let Ok(Some(dir)) = self.fan_dir(&hash.fan_out()) else {
            return false;
        };
        matches!(
            nofollow::lstat_if_exists(&dir.fd, &hash.rest()),
            Ok(Some(st)) if nofollow::is_regular(&st)
        )
    }
}

fn not_a_file(path: PathBuf, kind: FileKind) -> ObjectError {
    ObjectError::NotPlain {
        path,
        what: kind.describe(),
        expected: "file",
    }
}

/// A directory just made or found that vanished before it was opened.
fn missing_dir(pool: &ObjectPool) -> ObjectError {
    ObjectError::io(
        "opening",
        pool.dir(),
        io::Error::new(
            io::ErrorKind::NotFound,
            "the directory was removed while it was being opened",
        ),
    )
}
