//! Checkpoint manifests: `<store>/checkpoints/<id>.json` (format in DESIGN.md).

use std::io;
use std::path::{Path, PathBuf};

use cairn_objects::ObjectHash;
use cairn_store::{RunId, Store};
use cairn_workspace::{Manifest as SnapshotManifest, SnapshotId};
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
    /// Permission bits (`0o7777` at most).
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
    /// `symlink`, `special`, `not_utf8`, or `store` (the cairn store, when
    /// the named directory holds it).
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

/// Checks a relative path inside a named directory or a workspace: no empty,
/// `.` or `..` component, not absolute, no NUL. The empty path (the named
/// file itself) is allowed only when `empty_ok`.
pub(crate) fn check_relative(p: &str, empty_ok: bool) -> Result<(), &'static str> {
    if p.is_empty() {
        return if empty_ok {
            Ok(())
        } else {
            Err("the path is empty")
        };
    }
    if p.starts_with('/') {
        return Err("the path is absolute");
    }
    if p.contains('\0') {
        return Err("the path contains a NUL byte");
    }
    if p.split('/').any(|c| matches!(c, "" | "." | "..")) {
        return Err("the path has an empty, `.` or `..` component");
    }
    Ok(())
}

/// Checks a named path: absolute, and every component a plain name.
fn check_absolute(p: &str) -> Result<(), &'static str> {
    match p.strip_prefix('/') {
        Some("") => Err("the path is the root directory"),
        Some(rest) => check_relative(rest, false),
        None => Err("the path is not absolute"),
    }
}

impl Checkpoint {
    /// Reads and checks the manifest of `id`.
    pub(crate) fn load(store: &Store, id: &CheckpointId) -> Result<Checkpoint, CheckpointError> {
        let path = manifest_path(store, id);
        let bytes = std::fs::read(&path).map_err(|e| match e.kind() {
            io::ErrorKind::NotFound => CheckpointError::NotFound { id: id.to_string() },
            _ => CheckpointError::io("reading checkpoint manifest", &path, e),
        })?;
        let damaged = |reason: String| CheckpointError::ManifestDamaged {
            path: path.clone(),
            reason,
        };
        let cp: Checkpoint = serde_json::from_slice(&bytes).map_err(|e| damaged(e.to_string()))?;
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
            let unsafe_path = |path: String, reason: &str| CheckpointError::UnsafePath {
                id: id.to_string(),
                path,
                reason: reason.to_owned(),
            };
            check_absolute(&p.path).map_err(|r| unsafe_path(p.path.clone(), r))?;
            for e in &p.entries {
                check_relative(&e.path, p.kind == PathKind::File)
                    .map_err(|r| unsafe_path(format!("{}/{}", p.path, e.path), r))?;
            }
            if p.kind == PathKind::File && (p.entries.len() != 1 || !p.entries[0].path.is_empty()) {
                return Err(damaged(format!(
                    "the file {} does not have exactly one entry",
                    p.path
                )));
            }
        }
        Ok(cp)
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

/// Reads a run's workspace snapshot manifest, checking its paths.
pub(crate) fn load_snapshot(
    store: &Store,
    run: &RunId,
    snapshot: &SnapshotId,
) -> Result<SnapshotManifest, CheckpointError> {
    let path = store.snapshots_dir(run).join(format!("{snapshot}.json"));
    let bytes = std::fs::read(&path)
        .map_err(|e| CheckpointError::io("reading workspace snapshot", &path, e))?;
    let m: SnapshotManifest =
        serde_json::from_slice(&bytes).map_err(|e| CheckpointError::ManifestDamaged {
            path: path.clone(),
            reason: e.to_string(),
        })?;
    if m.id != *snapshot {
        return Err(CheckpointError::ManifestDamaged {
            path,
            reason: format!("it names itself {}", m.id),
        });
    }
    for p in m.entries.keys() {
        check_relative(p, false).map_err(|reason| CheckpointError::UnsafePath {
            id: format!("(snapshot {snapshot})"),
            path: p.clone(),
            reason: reason.to_owned(),
        })?;
    }
    Ok(m)
}

/// True when `path` is a directory with nothing in it, or does not exist.
pub(crate) fn is_empty_or_missing(path: &Path) -> Result<bool, CheckpointError> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(true),
        Err(e) => Err(CheckpointError::io("reading metadata of", path, e)),
        Ok(m) if !m.is_dir() => Ok(false),
        Ok(_) => Ok(std::fs::read_dir(path)
            .map_err(|e| CheckpointError::io("listing", path, e))?
            .next()
            .is_none()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_rules() {
        for (p, ok) in [
            ("a", true),
            ("a/b.txt", true),
            (".hidden/x", true),
            ("", false),
            ("/etc/passwd", false),
            ("a//b", false),
            ("a/./b", false),
            ("../x", false),
            ("a/..", false),
            ("a\0b", false),
        ] {
            assert_eq!(check_relative(p, false).is_ok(), ok, "{p:?}");
        }
        assert!(check_relative("", true).is_ok());
        for (p, ok) in [
            ("/var/lib/disk.img", true),
            ("/", false),
            ("relative", false),
            ("/a/../b", false),
            ("/a//b", false),
        ] {
            assert_eq!(check_absolute(p).is_ok(), ok, "{p:?}");
        }
    }
}
