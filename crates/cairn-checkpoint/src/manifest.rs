//! Checkpoint manifests: `<store>/checkpoints/<id>.json` (format in DESIGN.md).
//!
//! Invariants kept here:
//! - a manifest is read once, as bytes, and its SHA-256 is taken of exactly
//!   those bytes ([`Loaded::digest`]), so what is checked against the
//!   journal is what is used;
//! - every path in a manifest that cairn will write to passes the one path
//!   rule of `cairn_store::safe` ([`RelPath`]): a named path is `/` followed
//!   by a `RelPath`, an entry below a named directory is a `RelPath`.

use std::io;
use std::path::{Path, PathBuf};

use cairn_objects::ObjectHash;
use cairn_store::safe::{PathRule, RelPath};
use cairn_store::{RunId, Store};
use cairn_workspace::SnapshotId;
use serde::{Deserialize, Serialize};

use crate::{CheckpointError, CheckpointId, JournalPosition};

/// The manifest format this build writes; it reads this version and older.
pub const CHECKPOINT_VERSION: u32 = 1;

/// Why a checkpoint was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum CheckpointKind {
    /// `cairn checkpoint save`.
    Save,
    /// Written by a restore just before it changed the named paths: restoring
    /// it undoes the restore.
    Bank,
}

/// The workspace part of a checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspacePart {
    /// The snapshot of the run's workspace (in its `snapshots/`).
    pub snapshot: SnapshotId,
    /// The workspace root it was captured from, when known.
    pub root: Option<String>,
    /// Files in the snapshot.
    pub files: u64,
    /// Their total size.
    pub bytes: u64,
}

/// Whether a named path is a file or a directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PathKind {
    /// A regular file: one entry, with the empty relative path.
    File,
    /// A directory: one entry per regular file below it.
    Dir,
}

/// One saved file of a named path.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileEntry {
    /// `/`-separated, relative to the named path; empty when the named path
    /// is this file.
    pub path: String,
    /// Permission bits (`0o777` at most when cairn wrote it; a restore
    /// applies only `cairn_store::safe::permission_bits` of whatever is here).
    pub mode: u32,
    /// Length in bytes.
    pub size: u64,
    /// Its content's object (a chunk list for files above the threshold).
    pub hash: ObjectHash,
}

/// A path below a named directory that was not saved, with why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SkippedEntry {
    /// Relative to the named path.
    pub path: String,
    /// `symlink`, `special`, `not_utf8`, `store` (the cairn store, when
    /// the named directory holds it), `git` (a `.git` directory, which cairn
    /// never saves or restores) or `unsafe_name` (a name the path rule of
    /// `cairn_store::safe` refuses, such as one starting with `~`).
    pub reason: String,
}

/// One path named with `--path`, as saved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedPath {
    /// The absolute path, resolved (no symlinks) when it was saved.
    pub path: String,
    /// File or directory.
    pub kind: PathKind,
    /// The permission bits of the named file or directory itself.
    pub mode: u32,
    /// Files saved.
    pub files: u64,
    /// Their total size.
    pub bytes: u64,
    /// Every regular file, sorted by path.
    pub entries: Vec<FileEntry>,
    /// Coverage gaps below a directory.
    pub skipped: Vec<SkippedEntry>,
}

/// A checkpoint manifest: everything a checkpoint is, in one file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Format version.
    pub version: u32,
    /// Its id (equal to its file name).
    pub id: CheckpointId,
    /// The run it checkpoints.
    pub run: String,
    /// Why it was written.
    pub kind: CheckpointKind,
    /// When it was written, RFC 3339 UTC.
    pub created: String,
    /// Where the run's journal stood.
    pub journal: JournalPosition,
    /// The workspace snapshot, when one was captured.
    pub workspace: Option<WorkspacePart>,
    /// The further paths named.
    pub paths: Vec<SavedPath>,
    /// Workspace bytes plus named-path bytes: what restoring writes at most.
    pub logical_bytes: u64,
}

/// One row of `cairn checkpoint ls`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointSummary {
    /// Its id.
    pub id: CheckpointId,
    /// When it was written.
    pub created: String,
    /// The journal seq it stands at.
    pub seq: u64,
    /// Its logical size.
    pub logical_bytes: u64,
    /// Its run.
    pub run: String,
    /// Why it was written.
    pub kind: CheckpointKind,
}

/// The listing fields, parsed without building the entries.
#[derive(Deserialize)]
struct Head {
    id: CheckpointId,
    run: String,
    kind: CheckpointKind,
    created: String,
    journal: JournalPosition,
    logical_bytes: u64,
}

/// `<store>/checkpoints/<id>.json`.
pub(crate) fn manifest_path(store: &Store, id: &CheckpointId) -> PathBuf {
    store.checkpoints_dir().join(format!("{id}.json"))
}

/// A manifest as read: the checkpoint, the SHA-256 of the file's exact
/// bytes, and the file.
pub(crate) struct Loaded {
    pub(crate) cp: Checkpoint,
    pub(crate) digest: String,
    pub(crate) path: PathBuf,
}

/// The SHA-256, in lowercase hex, of a manifest's bytes (what the journal's
/// `checkpoint` record holds).
pub(crate) fn digest(bytes: &[u8]) -> String {
    ObjectHash::of(bytes).to_hex()
}

/// Why a named (absolute) path breaks the rule: it must be `/` followed by a
/// [`RelPath`].
pub(crate) fn check_absolute(p: &str) -> Result<(), String> {
    let Some(rest) = p.strip_prefix('/') else {
        return Err("the path is not absolute".into());
    };
    RelPath::parse(rest).map(drop).map_err(|rule| match rule {
        PathRule::Empty => "the path is the root directory".into(),
        PathRule::Absolute => "a component starts at a root (a second `/`, `~` or a drive)".into(),
        other => other.to_string(),
    })
}

impl Checkpoint {
    /// Reads and checks the manifest of `id`, path rules included.
    pub(crate) fn load(store: &Store, id: &CheckpointId) -> Result<Loaded, CheckpointError> {
        let loaded = Self::read(store, id)?;
        loaded.cp.check_paths()?;
        Ok(loaded)
    }

    /// Reads the manifest of `id` and checks what it says of itself (format
    /// version, id, run id, one entry per named file), but not its paths:
    /// for the readers that only need its hashes or its run (prune, the
    /// question which checkpoints name a run), so one path that breaks
    /// today's rule cannot make them lose sight of the checkpoint.
    pub(crate) fn read(store: &Store, id: &CheckpointId) -> Result<Loaded, CheckpointError> {
        let path = manifest_path(store, id);
        let bytes = std::fs::read(&path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => CheckpointError::NotFound { id: id.to_string() },
            _ => CheckpointError::io("reading checkpoint manifest", &path, e),
        })?;
        Ok(Loaded {
            cp: Self::from_bytes(&bytes, &path, id)?,
            digest: digest(&bytes),
            path,
        })
    }

    /// Parses the bytes of the manifest of `id`, read from `path` (named in
    /// errors), and checks what it says of itself as [`Checkpoint::read`]
    /// does (format version, id, run id, one entry per named file), but not
    /// its paths: for a reader that fetched the bytes its own way (a copy
    /// between stores) and needs its run and hashes.
    ///
    /// # Errors
    /// [`CheckpointError::ManifestDamaged`].
    pub fn from_bytes(
        bytes: &[u8],
        path: &std::path::Path,
        id: &CheckpointId,
    ) -> Result<Checkpoint, CheckpointError> {
        let damaged = |reason: String| CheckpointError::ManifestDamaged {
            path: path.to_path_buf(),
            reason,
        };
        let cp: Checkpoint = serde_json::from_slice(bytes).map_err(|e| damaged(e.to_string()))?;
        if cp.version > CHECKPOINT_VERSION {
            return Err(damaged(format!(
                "format version {} is newer than this cairn's {CHECKPOINT_VERSION}; upgrade cairn",
                cp.version
            )));
        }
        if cp.id != *id {
            return Err(damaged(format!("it names itself {}", cp.id)));
        }
        RunId::parse(&cp.run).map_err(|e| damaged(e.to_string()))?;
        for p in &cp.paths {
            if p.kind == PathKind::File && (p.entries.len() != 1 || !p.entries[0].path.is_empty()) {
                return Err(damaged(format!(
                    "the file {} does not have exactly one entry",
                    p.path
                )));
            }
        }
        Ok(cp)
    }

    /// Every named path and every entry below a named directory passes the
    /// one path rule ([`CheckpointError::UnsafePath`] otherwise).
    fn check_paths(&self) -> Result<(), CheckpointError> {
        let unsafe_path = |path: String, reason: String| CheckpointError::UnsafePath {
            id: self.id.to_string(),
            path,
            reason,
        };
        for p in &self.paths {
            check_absolute(&p.path).map_err(|r| unsafe_path(p.path.clone(), r))?;
            if p.kind == PathKind::Dir {
                for e in &p.entries {
                    RelPath::parse(&e.path).map_err(|r| {
                        unsafe_path(format!("{}/{}", p.path, e.path), r.to_string())
                    })?;
                }
            }
        }
        Ok(())
    }

    /// The run, parsed.
    pub fn run_id(&self) -> Result<RunId, CheckpointError> {
        RunId::parse(&self.run).map_err(|e| CheckpointError::ManifestDamaged {
            path: PathBuf::from(format!("{}.json", self.id)),
            reason: e.to_string(),
        })
    }
}

/// Every checkpoint manifest's listing fields, with the file each came from.
/// Files that are not `<id>.json` (temporaries of an interrupted write) are
/// ignored; a manifest that exists but does not parse is an error.
pub(crate) fn heads(store: &Store) -> Result<Vec<CheckpointSummary>, CheckpointError> {
    let mut out = Vec::new();
    for (id, path) in manifest_files(store)? {
        let bytes = std::fs::read(&path)
            .map_err(|e| CheckpointError::io("reading checkpoint manifest", &path, e))?;
        let h: Head =
            serde_json::from_slice(&bytes).map_err(|e| CheckpointError::ManifestDamaged {
                path: path.clone(),
                reason: e.to_string(),
            })?;
        if h.id != id {
            return Err(CheckpointError::ManifestDamaged {
                path,
                reason: format!("it names itself {}", h.id),
            });
        }
        out.push(CheckpointSummary {
            id: h.id,
            created: h.created,
            seq: h.journal.seq,
            logical_bytes: h.logical_bytes,
            run: h.run,
            kind: h.kind,
        });
    }
    Ok(out)
}

/// The id and path of every `<id>.json` in `checkpoints/`.
pub(crate) fn manifest_files(
    store: &Store,
) -> Result<Vec<(CheckpointId, PathBuf)>, CheckpointError> {
    let dir = store.checkpoints_dir();
    let entries = match std::fs::read_dir(&dir) {
        Ok(e) => e,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(CheckpointError::io("listing", &dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| CheckpointError::io("listing", &dir, e))?;
        let name = entry.file_name();
        let Some(id) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".json"))
            .and_then(|stem| CheckpointId::parse(stem).ok())
        else {
            continue;
        };
        out.push((id, entry.path()));
    }
    Ok(out)
}

/// Where a workspace is to be materialised: `Ok(false)` when nothing is
/// there, `Ok(true)` for an empty directory.
///
/// # Errors
/// [`CheckpointError::DirNotEmpty`] for a directory with something in it,
/// [`CheckpointError::NotADirectory`] for anything else that exists (a
/// symbolic link is not followed).
pub(crate) fn check_target(path: &Path) -> Result<bool, CheckpointError> {
    let m = match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(CheckpointError::io("reading metadata of", path, e)),
        Ok(m) => m,
    };
    let ft = m.file_type();
    if !ft.is_dir() {
        let what = if ft.is_file() {
            "a file"
        } else if ft.is_symlink() {
            "a symbolic link"
        } else {
            "a special file"
        };
        return Err(CheckpointError::NotADirectory {
            dir: path.to_owned(),
            what,
        });
    }
    let empty = std::fs::read_dir(path)
        .map_err(|e| CheckpointError::io("listing", path, e))?
        .next()
        .is_none();
    if empty {
        Ok(true)
    } else {
        Err(CheckpointError::DirNotEmpty {
            dir: path.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Named paths: `/` and then the one relative-path rule of
    /// `cairn_store::safe` (so `.git` is refused here as everywhere).
    #[test]
    fn named_path_rule() {
        for (p, ok) in [
            ("/var/lib/disk.img", true),
            ("/home/u/.hidden/x", true),
            ("/home/u/.gitignore", true),
            ("/srv/a~b", true),
            ("/", false),
            ("relative", false),
            ("", false),
            ("/a/../b", false),
            ("/a/./b", false),
            ("/a//b", false),
            ("//a", false),
            ("/a/", false),
            ("/a\\..\\b", false),
            ("/a\0b", false),
            ("/repo/.git", false),
            ("/repo/.git/hooks/pre-commit", false),
            ("/repo/.GIT/config", false),
        ] {
            assert_eq!(check_absolute(p).is_ok(), ok, "{p:?}");
        }
    }
}
