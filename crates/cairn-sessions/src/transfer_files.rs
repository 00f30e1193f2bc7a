//! The files of a transfer, read and written below a store's root without
//! following a symbolic link: journals' first lines, snapshot and checkpoint
//! manifests, and the directories written into.

use std::collections::HashMap;
use std::fs::File;
use std::io::{self, Read};
use std::os::fd::OwnedFd;
use std::path::Path;

use cairn_checkpoint::{Checkpoint, CheckpointError, CheckpointId};
use cairn_journal::ForkPin;
use cairn_objects::ObjectHash;
use cairn_store::nofollow::{self, FileKind, Reach, Unreachable};
use cairn_store::{durable, RunId, Store, StoreError};
use cairn_workspace::{Manifest, SnapshotId, WorkspaceError};
use serde::Deserialize;

use crate::fork::MAX_PIN_LINE;
use crate::SessionError;

/// A manifest to copy: where it lies below the store root, its bytes, and
/// the objects it names.
#[derive(Debug)]
pub(crate) struct ManifestFile {
    pub(crate) rel: String,
    pub(crate) bytes: Vec<u8>,
    pub(crate) objects: Vec<ObjectHash>,
}

/// The fork pin in the first record of `id`'s journal in `store` (`None`
/// inside for a root session), or `None` when it has no journal. A first
/// line that does not say is taken for a root's: reading the journal in
/// full reports what is wrong with it.
pub(super) fn fork_pin(store: &Store, id: &RunId) -> Result<Option<Option<ForkPin>>, SessionError> {
    #[derive(Deserialize)]
    struct Head {
        #[serde(default)]
        fork: Option<ForkPin>,
    }
    let path = store.journal_path(id);
    let Some(file) = open_beneath(store.root(), &rel(store, &path))? else {
        return Ok(None);
    };
    let mut line = Vec::new();
    io::BufRead::read_until(
        &mut io::BufReader::new(file).take(MAX_PIN_LINE),
        b'\n',
        &mut line,
    )
    .map_err(|e| io_error("reading", &path, e))?;
    let line = line.strip_suffix(b"\n").unwrap_or(&line);
    Ok(Some(
        serde_json::from_slice::<Head>(line)
            .ok()
            .and_then(|h| h.fork),
    ))
}

/// The snapshot manifests of `id` in `store`, each checked as every read
/// of one is ([`Manifest::from_bytes`]).
pub(super) fn snapshot_manifests(
    store: &Store,
    id: &RunId,
) -> Result<Vec<ManifestFile>, SessionError> {
    let dir = rel(store, &store.snapshots_dir(id));
    let valid = |s: &str| SnapshotId::parse(s).is_ok();
    let mut out = Vec::new();
    for (stem, rel_path, bytes) in manifests(store, &dir, valid)? {
        let path = store.root().join(&rel_path);
        out.push(snapshot_manifest(&stem, rel_path, bytes, path)?);
    }
    Ok(out)
}

/// The snapshot manifest `stem` read from `shown` (`rel_path` below a
/// store's root), checked as every read of one is.
pub(super) fn snapshot_manifest(
    stem: &str,
    rel_path: String,
    bytes: Vec<u8>,
    shown: std::path::PathBuf,
) -> Result<ManifestFile, SessionError> {
    let m = SnapshotId::parse(stem)
        .map_err(WorkspaceError::from)
        .and_then(|snap| Manifest::from_bytes(&bytes, &shown, &snap))
        .map_err(|e| match e {
            WorkspaceError::ManifestDamaged { reason, .. } => unreadable(shown, reason),
            e => unreadable(shown, e.to_string()),
        })?;
    let objects = m.entries.values().map(|e| e.hash).collect();
    Ok(ManifestFile {
        rel: rel_path,
        bytes,
        objects,
    })
}

/// Every checkpoint manifest of the store, by session, each checked as
/// every read of one is ([`Checkpoint::from_bytes`]): which session one
/// belongs to is in it.
pub(super) fn all_checkpoint_manifests(
    store: &Store,
) -> Result<HashMap<String, Vec<ManifestFile>>, SessionError> {
    let dir = rel(store, &store.checkpoints_dir());
    let valid = |s: &str| CheckpointId::parse(s).is_ok();
    let mut out: HashMap<String, Vec<ManifestFile>> = HashMap::new();
    for (stem, rel_path, bytes) in manifests(store, &dir, valid)? {
        let path = store.root().join(&rel_path);
        let (run, file) = checkpoint_manifest(&stem, rel_path, bytes, path)?;
        out.entry(run).or_default().push(file);
    }
    Ok(out)
}

/// The checkpoint manifest `stem` read from `shown` (`rel_path` below a
/// store's root), checked as every read of one is: the session it belongs
/// to, and the file.
pub(super) fn checkpoint_manifest(
    stem: &str,
    rel_path: String,
    bytes: Vec<u8>,
    shown: std::path::PathBuf,
) -> Result<(String, ManifestFile), SessionError> {
    let cp = CheckpointId::parse(stem)
        .map_err(|e| CheckpointError::ManifestDamaged {
            path: shown.clone(),
            reason: e.to_string(),
        })
        .and_then(|id| Checkpoint::from_bytes(&bytes, &shown, &id))
        .map_err(|e| match e {
            CheckpointError::ManifestDamaged { reason, .. } => unreadable(shown, reason),
            e => unreadable(shown, e.to_string()),
        })?;
    let objects = cp
        .paths
        .iter()
        .flat_map(|p| p.entries.iter().map(|e| e.hash))
        .collect();
    Ok((
        cp.run.clone(),
        ManifestFile {
            rel: rel_path,
            bytes,
            objects,
        },
    ))
}

/// A manifest that does not pass its crate's checks, and why.
fn unreadable(path: std::path::PathBuf, reason: String) -> SessionError {
    SessionError::ManifestUnreadable { path, reason }
}

/// The manifests of [`manifest_names`], with their bytes; one removed
/// since it was listed is left out.
fn manifests(
    store: &Store,
    dir: &str,
    valid: impl Fn(&str) -> bool,
) -> Result<Vec<(String, String, Vec<u8>)>, SessionError> {
    let mut out = Vec::new();
    for (stem, rel_path) in manifest_names(store, dir, valid)? {
        if let Some(bytes) = read_beneath(store.root(), &rel_path)? {
            out.push((stem, rel_path, bytes));
        }
    }
    Ok(out)
}

/// The `<id>.json` files (an id that `valid` accepts) of the directory `dir`
/// below the store root, as
/// (id, path below the root), sorted; other names (temporary files of an
/// interrupted write) are left out. An entry with a manifest's name that is
/// not a regular file is refused.
fn manifest_names(
    store: &Store,
    dir: &str,
    valid: impl Fn(&str) -> bool,
) -> Result<Vec<(String, String)>, SessionError> {
    let mut out = Vec::new();
    for e in list_beneath(store.root(), dir)? {
        let Some(stem) = e
            .name
            .to_str()
            .and_then(|n| n.strip_suffix(".json"))
            .filter(|s| valid(s))
        else {
            continue;
        };
        let rel_path = format!("{dir}/{stem}.json");
        if e.kind != FileKind::File {
            return Err(SessionError::NotPlain {
                path: store.root().join(&rel_path),
                what: e.kind.describe(),
                expected: "file",
            });
        }
        out.push((stem.to_owned(), rel_path));
    }
    out.sort();
    Ok(out)
}

/// `path` (one of the store's own paths) relative to the store root, `/`-separated.
pub(super) fn rel(store: &Store, path: &Path) -> String {
    path.strip_prefix(store.root())
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

fn io_error(action: &'static str, path: &Path, source: io::Error) -> SessionError {
    SessionError::Store(StoreError::Io {
        action,
        path: path.to_path_buf(),
        source,
    })
}

/// Opens the directory `rel` below `root` without following a symlink below
/// the root; `None` when it (or the root) does not exist.
fn open_dir_beneath(root: &Path, rel: &str) -> Result<Option<std::os::fd::OwnedFd>, SessionError> {
    let root_fd = match nofollow::open_root(root) {
        Ok(fd) => fd,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error("opening", root, e)),
    };
    match nofollow::open_dir(&root_fd, rel, false, &mut Vec::new()) {
        Ok(fd) => Ok(Some(fd)),
        Err(Reach::Io(e)) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(Reach::Io(e)) => Err(io_error("opening", &root.join(rel), e)),
        Err(Reach::Symlink(p)) => Err(SessionError::NotPlain {
            path: root.join(p),
            what: FileKind::Symlink.describe(),
            expected: "directory",
        }),
        Err(Reach::NotDir(p)) => Err(SessionError::NotPlain {
            path: root.join(p),
            what: "not a directory",
            expected: "directory",
        }),
    }
}

/// Opens the regular file `rel` below `root` for reading without following
/// a symlink; `None` when it does not exist.
fn open_beneath(root: &Path, rel: &str) -> Result<Option<File>, SessionError> {
    let (dir, name) = nofollow::split(rel);
    let Some(dir_fd) = open_dir_beneath(root, dir)? else {
        return Ok(None);
    };
    let path = root.join(rel);
    let not_plain = |what| SessionError::NotPlain {
        path: path.clone(),
        what,
        expected: "file",
    };
    match nofollow::lstat_if_exists(&dir_fd, name) {
        Ok(None) => return Ok(None),
        Ok(Some(st)) if !nofollow::is_regular(&st) => {
            return Err(not_plain(FileKind::of(&st).describe()))
        }
        Ok(Some(_)) => {}
        Err(e) => return Err(io_error("reading metadata of", &path, e)),
    }
    // Opened without following a symlink, so one swapped in since fails.
    let file = match nofollow::open_file_at(&dir_fd, name) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_error("opening", &path, e)),
    };
    let st = nofollow::stat_of(&file).map_err(|e| io_error("reading metadata of", &path, e))?;
    if !nofollow::is_regular(&st) {
        return Err(not_plain(FileKind::of(&st).describe()));
    }
    Ok(Some(file))
}

/// The bytes of the regular file `rel` below `root`, `None` when it does
/// not exist; a symlink anywhere below the root is refused.
pub(super) fn read_beneath(root: &Path, rel: &str) -> Result<Option<Vec<u8>>, SessionError> {
    let Some(mut file) = open_beneath(root, rel)? else {
        return Ok(None);
    };
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| io_error("reading", &root.join(rel), e))?;
    Ok(Some(bytes))
}

/// The entries of the directory `rel` below `root` (none when it does not
/// exist), not following a symlink.
fn list_beneath(root: &Path, rel: &str) -> Result<Vec<nofollow::Entry>, SessionError> {
    let Some(fd) = open_dir_beneath(root, rel)? else {
        return Ok(Vec::new());
    };
    nofollow::read_dir_at(&fd).map_err(|e| io_error("listing", &root.join(rel), e))
}

/// Makes `rel` below `root` a directory, creating what is missing (`0700`,
/// each new entry's parent fsynced), one component at a time beneath the
/// one before, and refuses any component that is a symlink or not a
/// directory; returns it opened.
pub(super) fn ensure_dir(root: &Path, rel: &str) -> Result<OwnedFd, SessionError> {
    let mut at = nofollow::open_root(root).map_err(|e| io_error("opening", root, e))?;
    let mut shown = root.to_path_buf();
    for part in rel.split('/').filter(|p| !p.is_empty()) {
        let parent = shown.clone();
        shown.push(part);
        let (fd, made) = nofollow::make_dir_at(&at, part, durable::DIR_MODE).map_err(|u| {
            let what = match u {
                Unreachable::Symlink(_) => FileKind::Symlink.describe(),
                Unreachable::NotDir(_) => "not a directory",
                Unreachable::Io(_, e) => return io_error("creating directory", &shown, e),
                other => {
                    return io_error(
                        "creating directory",
                        &shown,
                        io::Error::other(other.to_string()),
                    )
                }
            };
            SessionError::NotPlain {
                path: shown.clone(),
                what,
                expected: "directory",
            }
        })?;
        if made {
            nofollow::sync_dir(&at).map_err(|e| io_error("syncing directory", &parent, e))?;
        }
        at = fd;
    }
    Ok(at)
}

/// Writes `bytes` as the file `rel` below `root` (its directories made by
/// [`ensure_dir`]) by temporary file, fsync, rename and directory fsync, all
/// in the directory reached without following a link.
pub(super) fn write_beneath(root: &Path, rel: &str, bytes: &[u8]) -> Result<(), SessionError> {
    let (dir, name) = nofollow::split(rel);
    let fd = ensure_dir(root, dir)?;
    nofollow::replace_at(&fd, name, bytes, Some(durable::FILE_MODE))
        .map_err(|e| io_error(e.action, &root.join(rel), e.source))
}
