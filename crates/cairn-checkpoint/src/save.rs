//! Saving a checkpoint: workspace snapshot, named paths, then the manifest.

use std::fs::Metadata;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use cairn_objects::{
    open_nofollow, ObjectBatch, ObjectError, ObjectPool, Phase, Progress, StoreLock,
};
use cairn_store::durable::{create_dir_private, write_atomic};
use cairn_store::safe::{is_temp_name, permission_bits, RelPath};
use cairn_store::{RunId, Store};
use cairn_workspace::{CaptureReport, Label, Manifest as SnapshotManifest, SnapshotId, Workspace};
use rayon::prelude::*;
use serde::Serialize;

use crate::manifest::{
    check_absolute, digest, manifest_path, Checkpoint, CheckpointKind, FileEntry, PathKind,
    SavedPath, SkippedEntry, WorkspacePart, CHECKPOINT_VERSION,
};
use crate::{CheckpointError, CheckpointId, JournalPosition};

/// How often a file that changes while it is read is read again before the
/// save gives up ([`CheckpointError::Changing`]).
const READ_ATTEMPTS: usize = 3;

/// Where a checkpoint's workspace snapshot comes from.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub enum WorkspaceSource<'a> {
    /// No workspace part.
    #[default]
    None,
    /// [`save`] captures the workspace itself, under the named label equal
    /// to the checkpoint id (`cp_…`): a checkpoint is taken while nothing of
    /// the run executes, so what changed since the last boundary did not come
    /// from the run, which is what a named label records (cairn-workspace's
    /// label rules). The capture's objects count in
    /// [`SaveReport::stored_bytes`].
    Capture(&'a Workspace),
    /// A snapshot of the run the caller already captured.
    Snapshot(SnapshotId),
}

/// What to save. Build with [`SaveRequest::new`] and the setters.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct SaveRequest<'a> {
    /// The run.
    pub run: RunId,
    /// Where its journal stands: the caller holds the run's journal writer,
    /// reads this with [`JournalPosition::of`], saves, then appends the
    /// `checkpoint` record.
    pub position: JournalPosition,
    /// The workspace part. Default: none.
    pub workspace: WorkspaceSource<'a>,
    /// Further files or directories to save, anywhere (a disk image, a memory
    /// dump, a data directory). Default: none.
    pub paths: Vec<PathBuf>,
    pub(crate) kind: CheckpointKind,
    /// The workspace root recorded with a [`WorkspaceSource::Snapshot`]
    /// (a restore's bank knows it).
    pub(crate) root: Option<String>,
}

impl<'a> SaveRequest<'a> {
    /// A checkpoint of `run` at `position`, with nothing in it yet.
    pub fn new(run: RunId, position: JournalPosition) -> Self {
        SaveRequest {
            run,
            position,
            workspace: WorkspaceSource::None,
            paths: Vec::new(),
            kind: CheckpointKind::Save,
            root: None,
        }
    }

    /// Captures `ws` (which must be the run's) as the workspace part.
    pub fn capture(mut self, ws: &'a Workspace) -> Self {
        self.workspace = WorkspaceSource::Capture(ws);
        self
    }

    /// Uses a snapshot the caller captured as the workspace part.
    pub fn snapshot(mut self, id: SnapshotId) -> Self {
        self.workspace = WorkspaceSource::Snapshot(id);
        self
    }

    /// Adds paths to save.
    pub fn paths<P: Into<PathBuf>>(mut self, paths: impl IntoIterator<Item = P>) -> Self {
        self.paths.extend(paths.into_iter().map(Into::into));
        self
    }
}

/// What a save wrote (`cairn checkpoint save --json`).
#[derive(Clone, Debug, Serialize)]
pub struct SaveReport {
    /// The new checkpoint.
    pub id: CheckpointId,
    /// The SHA-256 (lowercase hex) of the manifest's exact bytes. The caller
    /// journals it in the `checkpoint` record
    /// (`cairn_journal::CheckpointRef::manifest`); a checkpoint whose record
    /// does not hold it is never restored or materialised.
    pub manifest: String,
    /// Its run.
    pub run: String,
    /// The journal seq it stands at.
    pub seq: u64,
    /// The workspace snapshot in it.
    pub snapshot: Option<SnapshotId>,
    /// Workspace bytes plus named-path bytes.
    pub logical_bytes: u64,
    /// New bytes this save added to the store: new objects and chunks
    /// (compressed, the workspace capture's included) and the manifest.
    pub stored_bytes: u64,
    /// Files in the named paths.
    pub files: u64,
    /// Paths below named directories that were not saved, with why.
    pub skipped: Vec<String>,
    /// The workspace capture, when the save took one (so the caller can
    /// journal its `snapshot` boundary).
    #[serde(skip)]
    pub capture: Option<CaptureReport>,
}

/// A named path, resolved before anything is written.
struct Target {
    abs: PathBuf,
    text: String,
    meta: Metadata,
}

/// Saves a checkpoint, publishing it atomically.
///
/// The order, so that a checkpoint exists only when complete:
/// 1. resolve every named path (a missing one is a usage error, nothing
///    written);
/// 2. capture the workspace, when asked (its snapshot manifest is durable
///    when the capture returns);
/// 3. holding the store lock shared (so prune waits), store every file of
///    the named paths (large ones as chunks) in one batch and commit it:
///    every chunk fsynced, renamed, its directory fsynced, chunk lists last;
/// 4. write the manifest `checkpoints/<id>.json` by temporary file, fsync,
///    rename, directory fsync; only now does the checkpoint exist.
///
/// The caller then appends the `checkpoint` record with
/// [`SaveReport::manifest`]: until it does, the checkpoint is listed but
/// does not verify, and is not restored (see the crate doc).
///
/// A crash before step 4 leaves unreferenced objects (prune removes them)
/// and possibly a snapshot labelled with the id; never a partial checkpoint.
///
/// Below a named directory, `.git` directories and names the path rule of
/// `cairn_store::safe` refuses are not saved (reported in
/// [`SaveReport::skipped`]), so every manifest written reads back.
///
/// # Errors
/// [`CheckpointError::PathMissing`] / [`CheckpointError::NotUtf8`] for a bad
/// path (also one inside `.git`, or one the path rule refuses),
/// [`CheckpointError::WrongRun`] when the workspace is another run's,
/// [`CheckpointError::Changing`] when a file kept changing while read;
/// workspace, pool and IO errors.
pub fn save(
    store: &Store,
    req: &SaveRequest<'_>,
    progress: &dyn Progress,
) -> Result<SaveReport, CheckpointError> {
    let targets = req
        .paths
        .iter()
        .map(|p| resolve(store, p))
        .collect::<Result<Vec<_>, _>>()?;
    let pool = ObjectPool::open(store)?;
    create_dir_private(&store.checkpoints_dir())?;
    let id = loop {
        let id = CheckpointId::new();
        if !manifest_path(store, &id).exists() {
            break id;
        }
    };

    let (workspace, capture) = match &req.workspace {
        WorkspaceSource::None => (None, None),
        WorkspaceSource::Capture(ws) => {
            if ws.run() != &req.run {
                return Err(CheckpointError::WrongRun {
                    id: id.to_string(),
                    run: req.run.to_string(),
                    given: ws.run().to_string(),
                });
            }
            let label = Label::parse(id.as_str()).map_err(cairn_workspace::WorkspaceError::from)?;
            let r = ws.capture(&label, progress)?;
            let part = WorkspacePart {
                snapshot: r.snapshot.clone(),
                root: ws.root().to_str().map(str::to_owned),
                files: r.files,
                bytes: r.bytes,
            };
            (Some(part), Some(r))
        }
        WorkspaceSource::Snapshot(s) => {
            let m = SnapshotManifest::read(store, &req.run, s)?;
            let part = WorkspacePart {
                snapshot: s.clone(),
                root: req.root.clone(),
                files: m.files,
                bytes: m.bytes,
            };
            (Some(part), None)
        }
    };

    let lock = StoreLock::shared(store)?;
    let batch = pool.batch(&lock);
    let never = store_root(store);
    let mut paths = Vec::with_capacity(targets.len());
    for t in &targets {
        paths.push(save_path(&batch, &never, t, progress)?);
    }
    let committed = batch.commit(progress)?;

    let path_bytes: u64 = paths.iter().map(|p| p.bytes).sum();
    let logical_bytes = workspace.as_ref().map_or(0, |w| w.bytes) + path_bytes;
    let cp = Checkpoint {
        version: CHECKPOINT_VERSION,
        id: id.clone(),
        run: req.run.to_string(),
        kind: req.kind,
        created: now_rfc3339(),
        journal: req.position,
        workspace,
        paths,
        logical_bytes,
    };
    let json = serde_json::to_vec(&cp).map_err(CheckpointError::Encode)?;
    write_atomic(&manifest_path(store, &id), &json)?;
    drop(lock);

    let captured = capture.as_ref().map_or(0, |c| c.stored_bytes);
    Ok(SaveReport {
        id,
        manifest: digest(&json),
        run: cp.run,
        seq: cp.journal.seq,
        snapshot: cp.workspace.map(|w| w.snapshot),
        logical_bytes,
        stored_bytes: captured + committed.stored_bytes + json.len() as u64,
        files: cp.paths.iter().map(|p| p.files).sum(),
        skipped: cp
            .paths
            .iter()
            .flat_map(|p| {
                p.skipped
                    .iter()
                    .map(move |s| format!("{}/{} ({})", p.path, s.path, s.reason))
            })
            .collect(),
        capture,
    })
}

/// Now, RFC 3339 UTC with microseconds.
fn now_rfc3339() -> String {
    humantime::format_rfc3339_micros(std::time::SystemTime::now()).to_string()
}

/// The store's root, resolved (a directory holding it skips it when saved).
fn store_root(store: &Store) -> PathBuf {
    std::fs::canonicalize(store.root()).unwrap_or_else(|_| store.root().into())
}

fn resolve(store: &Store, given: &Path) -> Result<Target, CheckpointError> {
    let missing = |source| CheckpointError::PathMissing {
        path: given.to_owned(),
        source,
    };
    let abs = std::fs::canonicalize(given).map_err(missing)?;
    let text = abs
        .to_str()
        .ok_or_else(|| CheckpointError::NotUtf8 { path: abs.clone() })?
        .to_owned();
    let meta = std::fs::symlink_metadata(&abs).map_err(missing)?;
    if !meta.is_file() && !meta.is_dir() {
        return Err(missing(std::io::Error::other(
            "it is neither a regular file nor a directory",
        )));
    }
    // A VM session's staged machine state lives in `<store>/machines`: the
    // store's working state, not its record, so it may be saved.
    let machines = std::fs::canonicalize(store.machines_dir()).ok();
    let staged_machine = machines.is_some_and(|m| abs.starts_with(m));
    if abs.starts_with(store_root(store)) && !staged_machine {
        return Err(missing(std::io::Error::other(
            "it is inside the cairn store",
        )));
    }
    // The manifest must read back, and a restore writes here: the one path
    // rule (no `.git`, plain components).
    check_absolute(&text).map_err(|reason| missing(std::io::Error::other(reason)))?;
    Ok(Target { abs, text, meta })
}

fn save_path(
    batch: &ObjectBatch<'_>,
    store: &Path,
    t: &Target,
    progress: &dyn Progress,
) -> Result<SavedPath, CheckpointError> {
    let mode = permission_bits(t.meta.mode());
    if t.meta.is_file() {
        let entry = put_checked(batch, &t.abs, String::new(), progress)?;
        return Ok(SavedPath {
            path: t.text.clone(),
            kind: PathKind::File,
            mode,
            files: 1,
            bytes: entry.size,
            entries: vec![entry],
            skipped: Vec::new(),
        });
    }
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    progress.begin(Phase::Walk, None);
    walk(&t.abs, "", store, &mut files, &mut skipped, progress)?;
    progress.end(Phase::Walk);
    progress.begin(Phase::Hash, Some(files.len() as u64));
    let mut entries = files
        .par_iter()
        .map(|rel: &String| put_checked(batch, &t.abs.join(rel), rel.clone(), progress))
        .collect::<Result<Vec<_>, _>>()?;
    progress.end(Phase::Hash);
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    skipped.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(SavedPath {
        path: t.text.clone(),
        kind: PathKind::Dir,
        mode,
        files: entries.len() as u64,
        bytes: entries.iter().map(|e| e.size).sum(),
        entries,
        skipped,
    })
}

/// Every regular file below `dir` (relative paths), without following
/// symlinks; everything else is a reported gap, and the store (when the
/// named directory holds it) is skipped.
fn walk(
    dir: &Path,
    rel: &str,
    store: &Path,
    files: &mut Vec<String>,
    skipped: &mut Vec<SkippedEntry>,
    progress: &dyn Progress,
) -> Result<(), CheckpointError> {
    let here = dir.join(rel);
    let entries = std::fs::read_dir(&here).map_err(|e| CheckpointError::io("listing", &here, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| CheckpointError::io("listing", &here, e))?;
        progress.advance(Phase::Walk, 1, 0);
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            skipped.push(SkippedEntry {
                path: format!("{rel}{}", name.to_string_lossy()),
                reason: "not_utf8".into(),
            });
            continue;
        };
        if is_temp_name(name) {
            continue;
        }
        let path = format!("{rel}{name}");
        let ft = entry
            .file_type()
            .map_err(|e| CheckpointError::io("reading the type of", entry.path(), e))?;
        let skip = if ft.is_dir() && entry.path() == store {
            Some("store")
        } else if name.eq_ignore_ascii_case(".git") {
            Some("git")
        } else if RelPath::parse(&path).is_err() {
            Some("unsafe_name")
        } else {
            None
        };
        if let Some(reason) = skip {
            skipped.push(SkippedEntry {
                path,
                reason: reason.into(),
            });
        } else if ft.is_dir() {
            walk(dir, &format!("{path}/"), store, files, skipped, progress)?;
        } else if ft.is_file() {
            files.push(path);
        } else {
            let reason = if ft.is_symlink() {
                "symlink"
            } else {
                "special"
            };
            skipped.push(SkippedEntry {
                path,
                reason: reason.into(),
            });
        }
    }
    Ok(())
}

/// The parts of a stat that change when a file is written.
fn fingerprint(m: &Metadata) -> (u64, i64, i64, i64, i64, u64) {
    (
        m.len(),
        m.mtime(),
        m.mtime_nsec(),
        m.ctime(),
        m.ctime_nsec(),
        m.ino(),
    )
}

/// Stores one file, reading it again if it changed meanwhile.
fn put_checked(
    batch: &ObjectBatch<'_>,
    abs: &Path,
    rel: String,
    progress: &dyn Progress,
) -> Result<FileEntry, CheckpointError> {
    for _ in 0..READ_ATTEMPTS {
        let file = open_nofollow(abs).map_err(|e| CheckpointError::io("opening", abs, e))?;
        let before = file
            .metadata()
            .map_err(|e| CheckpointError::io("reading metadata of", abs, e))?;
        let put = match batch.put_open_file(&file, abs) {
            Ok(p) => p,
            Err(ObjectError::SourceChanged { .. }) => continue,
            Err(e) => return Err(e.into()),
        };
        let after = file
            .metadata()
            .map_err(|e| CheckpointError::io("reading metadata of", abs, e))?;
        if fingerprint(&before) == fingerprint(&after) && put.size == after.len() {
            progress.advance(Phase::Hash, 1, put.size);
            return Ok(FileEntry {
                path: rel,
                mode: permission_bits(after.mode()),
                size: put.size,
                hash: put.hash,
            });
        }
    }
    Err(CheckpointError::Changing {
        path: abs.to_owned(),
    })
}
