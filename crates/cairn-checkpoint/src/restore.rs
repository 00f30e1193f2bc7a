//! Restoring a checkpoint in place, and materialising its workspace into a
//! new directory (for a fork).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

use cairn_objects::{ObjectHash, ObjectPool, Phase, Progress};
use cairn_store::Store;
use cairn_workspace::{RestoreReport as WorkspaceRestore, SnapshotId, Workspace};
use rayon::prelude::*;
use serde::Serialize;

use crate::manifest::{
    is_empty_or_missing, load_snapshot, Checkpoint, CheckpointKind, FileEntry, PathKind, SavedPath,
};
use crate::safe_fs::{self, Reach, ReachExt};
use crate::save::{save, SaveRequest};
use crate::{verify, CheckpointError, CheckpointId, JournalPosition};

/// What [`restore`] did.
#[derive(Clone, Debug, Serialize)]
pub struct RestoreReport {
    /// The checkpoint restored.
    pub id: CheckpointId,
    /// The workspace restore (its `bank` undoes it), when the checkpoint has
    /// a workspace part.
    pub workspace: Option<WorkspaceRestore>,
    /// The bank checkpoint: the named paths as they were just before, with
    /// the workspace bank; restoring it undoes this restore.
    pub bank: Option<CheckpointId>,
    /// Named-path files written (absolute paths).
    pub written: Vec<String>,
    /// Files deleted below named directories (they were not in the checkpoint).
    pub deleted: Vec<String>,
    /// Files whose permission bits alone were changed.
    pub modes: Vec<String>,
    /// Named-path files that already held the checkpoint's content.
    pub unchanged: u64,
}

/// What [`materialize`] wrote.
#[derive(Clone, Debug, Serialize)]
pub struct MaterializeReport {
    /// The checkpoint.
    pub id: CheckpointId,
    /// The directory written.
    pub dir: PathBuf,
    /// The workspace snapshot materialised.
    pub snapshot: SnapshotId,
    /// Files written.
    pub files: u64,
    /// Their total size.
    pub bytes: u64,
}

/// One file to write below a named path.
struct Job<'a> {
    /// The named path's directory (for a file: its parent), absolute.
    base: String,
    /// Relative to `base`.
    rel: String,
    entry: &'a FileEntry,
    shown: String,
}

/// Restores checkpoint `id` of `ws`'s run: the workspace snapshot (full
/// tree) and the named paths.
///
/// The order:
/// 1. refuse a checkpoint of another run;
/// 2. verify EVERYTHING it needs ([`verify`]: every object and chunk
///    re-hashed, the snapshot manifest, the journal position) and check that
///    every named path can be reached without a symlink and has the right
///    type; any problem refuses the restore with nothing changed;
/// 3. restore the workspace through cairn-workspace, which banks it first
///    (`bank:<n>`) and restores the full tree;
/// 4. bank the named paths as they are now: a checkpoint of kind `bank`
///    (with the workspace bank as its snapshot, at `position`), so restoring
///    it undoes this restore;
/// 5. stage every named-path file whose content differs (temporary file in
///    its directory, verified, mode set, fsynced); a failure removes them;
/// 6. rename them into place, set changed modes, delete files below named
///    directories that the checkpoint does not hold, fsync the directories.
///
/// The caller holds the run's journal writer (so nothing of the run
/// executes) and passes its position for the bank.
///
/// # Errors
/// [`CheckpointError::WrongRun`], [`CheckpointError::Damaged`] and
/// [`CheckpointError::UnsafePath`] before anything changed;
/// [`CheckpointError::RestoreIncomplete`] after changes began.
pub fn restore(
    store: &Store,
    id: &CheckpointId,
    ws: &Workspace,
    position: JournalPosition,
    progress: &dyn Progress,
) -> Result<RestoreReport, CheckpointError> {
    let cp = Checkpoint::load(store, id)?;
    if ws.run().as_str() != cp.run {
        return Err(CheckpointError::WrongRun {
            id: id.to_string(),
            run: cp.run.clone(),
            given: ws.run().to_string(),
        });
    }
    let report = verify(store, id, progress)?;
    if let Some(first) = report.bad.first() {
        return Err(CheckpointError::Damaged {
            id: id.to_string(),
            count: report.bad.len(),
            first: first.to_string(),
        });
    }
    for p in &cp.paths {
        probe(id, p)?;
    }

    let workspace = match &cp.workspace {
        Some(w) => Some(ws.restore_snapshot(&w.snapshot, progress)?),
        None => None,
    };
    let incomplete =
        |bank: Option<&CheckpointId>, e: CheckpointError| CheckpointError::RestoreIncomplete {
            id: id.to_string(),
            bank: bank.map(|b| b.to_string()),
            source: Box::new(e),
        };

    let present: Vec<PathBuf> = cp
        .paths
        .iter()
        .map(|p| PathBuf::from(&p.path))
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .collect();
    let mut bank = None;
    let mut before: BTreeMap<String, SavedPath> = BTreeMap::new();
    if !present.is_empty() {
        let mut req = SaveRequest::new(ws.run().clone(), position).paths(present);
        req.kind = CheckpointKind::Bank;
        if let Some(w) = &workspace {
            req = req.snapshot(w.bank.snapshot.clone());
        }
        let saved = save(store, &req, progress).map_err(|e| incomplete(None, e))?;
        let banked = Checkpoint::load(store, &saved.id).map_err(|e| incomplete(None, e))?;
        before = banked
            .paths
            .into_iter()
            .map(|p| (p.path.clone(), p))
            .collect();
        bank = Some(saved.id);
    }

    let mut out = RestoreReport {
        id: id.clone(),
        workspace,
        bank: bank.clone(),
        written: Vec::new(),
        deleted: Vec::new(),
        modes: Vec::new(),
        unchanged: 0,
    };
    apply_paths(store, id, &cp.paths, &before, &mut out, progress)
        .map_err(|e| incomplete(bank.as_ref(), e))?;
    Ok(out)
}

/// Refuses a named path that cannot be reached without a symlink, or whose
/// type changed (a directory where the file was, or the reverse).
fn probe(id: &CheckpointId, p: &SavedPath) -> Result<(), CheckpointError> {
    let refuse = |reason: &str| CheckpointError::UnsafePath {
        id: id.to_string(),
        path: p.path.clone(),
        reason: reason.to_owned(),
    };
    let (parent, name) = safe_fs::split(&p.path);
    let dir = match safe_fs::open_abs_dir(parent, false) {
        Ok(d) => d,
        Err(Reach::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(r) => return Err(r.into_error(id.as_str(), &p.path)),
    };
    let st =
        safe_fs::lstat_at(&dir, name).map_err(|e| CheckpointError::io("reading", &p.path, e))?;
    match (p.kind, st) {
        (_, None) => Ok(()),
        (_, Some(st)) if st.st_mode & libc::S_IFMT == libc::S_IFLNK => Err(refuse(
            "it is a symbolic link now, and cairn never writes through one",
        )),
        (PathKind::File, Some(st)) if safe_fs::is_dir(&st) => Err(refuse(
            "a directory is there now, where the checkpoint has a file; move it away first",
        )),
        (PathKind::Dir, Some(st)) if !safe_fs::is_dir(&st) => Err(refuse(
            "something other than a directory is there now; move it away first",
        )),
        _ => Ok(()),
    }
}

fn apply_paths(
    store: &Store,
    id: &CheckpointId,
    paths: &[SavedPath],
    before: &BTreeMap<String, SavedPath>,
    out: &mut RestoreReport,
    progress: &dyn Progress,
) -> Result<(), CheckpointError> {
    let pool = ObjectPool::at(store);
    let mut jobs = Vec::new();
    let mut chmods = Vec::new();
    let mut deletes = Vec::new();
    for p in paths {
        // A named file is written in its parent directory under its name; a
        // named directory's entries below it.
        let (parent, name) = safe_fs::split(&p.path);
        let base = match p.kind {
            PathKind::File => parent.to_owned(),
            PathKind::Dir => p.path.clone(),
        };
        let now: BTreeMap<&str, &FileEntry> = before
            .get(&p.path)
            .filter(|b| b.kind == p.kind)
            .map(|b| b.entries.iter().map(|e| (e.path.as_str(), e)).collect())
            .unwrap_or_default();
        let wanted: HashSet<&str> = p.entries.iter().map(|e| e.path.as_str()).collect();
        for e in &p.entries {
            let rel = match p.kind {
                PathKind::File => name.to_owned(),
                PathKind::Dir => e.path.clone(),
            };
            let shown = format!("{base}/{rel}");
            match now.get(e.path.as_str()) {
                Some(n) if n.hash == e.hash && n.size == e.size => {
                    if n.mode != e.mode {
                        chmods.push((base.clone(), rel, e.mode, shown));
                    } else {
                        out.unchanged += 1;
                    }
                }
                _ => jobs.push(Job {
                    base: base.clone(),
                    rel,
                    entry: e,
                    shown,
                }),
            }
        }
        if p.kind == PathKind::Dir {
            let kept: HashSet<&str> = p.skipped.iter().map(|s| s.path.as_str()).collect();
            for rel in now
                .keys()
                .filter(|r| !wanted.contains(*r) && !kept.contains(*r))
            {
                deletes.push((base.clone(), (*rel).to_owned()));
            }
        }
    }

    // Stage every file; on any failure remove what was staged.
    progress.begin(Phase::Stage, Some(jobs.len() as u64));
    let staged: Vec<Result<String, CheckpointError>> = jobs
        .par_iter()
        .map(|j| {
            let dir = open_parent(id, &j.base, &j.rel, true)?;
            let t = safe_fs::stage(&pool, &dir, &j.entry.hash, j.entry.mode, &j.shown)?;
            progress.advance(Phase::Stage, 1, j.entry.size);
            Ok(t)
        })
        .collect();
    progress.end(Phase::Stage);
    let mut temps = Vec::with_capacity(staged.len());
    let mut failed = None;
    for r in staged {
        match r {
            Ok(t) => temps.push(Some(t)),
            Err(e) => {
                temps.push(None);
                failed.get_or_insert(e);
            }
        }
    }
    if let Some(e) = failed {
        for (j, t) in jobs.iter().zip(&temps) {
            if let (Some(t), Ok(dir)) = (t, open_parent(id, &j.base, &j.rel, false)) {
                let _ = safe_fs::unlink_at(&dir, t);
            }
        }
        return Err(e);
    }

    progress.begin(Phase::Apply, None);
    let mut touched: BTreeSet<(String, String)> = BTreeSet::new();
    for (j, t) in jobs.iter().zip(temps.into_iter().flatten()) {
        let dir = open_parent(id, &j.base, &j.rel, false)?;
        let name = safe_fs::split(&j.rel).1;
        safe_fs::rename_at(&dir, &t, name).map_err(|e| {
            let _ = safe_fs::unlink_at(&dir, &t);
            CheckpointError::io("renaming into place", &j.shown, e)
        })?;
        out.written.push(j.shown.clone());
        touched.insert((j.base.clone(), safe_fs::split(&j.rel).0.to_owned()));
        progress.advance(Phase::Apply, 1, 0);
    }
    for (base, rel, mode, shown) in chmods {
        let dir = open_parent(id, &base, &rel, false)?;
        let f = open_nofollow_at(&dir, safe_fs::split(&rel).1, &shown)?;
        use std::os::unix::fs::PermissionsExt;
        f.set_permissions(std::fs::Permissions::from_mode(mode & 0o7777))
            .map_err(|e| CheckpointError::io("setting the mode of", &shown, e))?;
        out.modes.push(shown);
    }
    for (base, rel) in deletes {
        let dir = open_parent(id, &base, &rel, false)?;
        let shown = format!("{base}/{rel}");
        match safe_fs::unlink_at(&dir, safe_fs::split(&rel).1) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(CheckpointError::io("deleting", &shown, e)),
        }
        out.deleted.push(shown);
        touched.insert((base, safe_fs::split(&rel).0.to_owned()));
    }
    for (base, rel) in touched {
        let dir = open_dir(id, &base, &rel, false)?;
        safe_fs::sync_dir(&dir).map_err(|e| CheckpointError::io("syncing", &base, e))?;
    }
    progress.end(Phase::Apply);
    out.written.sort();
    out.deleted.sort();
    Ok(())
}

fn open_dir(
    id: &CheckpointId,
    base: &str,
    rel: &str,
    create: bool,
) -> Result<OwnedFd, CheckpointError> {
    let shown = if rel.is_empty() {
        base.to_owned()
    } else {
        format!("{base}/{rel}")
    };
    let root = safe_fs::open_abs_dir(base, create).map_err(|r| r.into_error(id.as_str(), base))?;
    safe_fs::open_dir_in(&root, rel, create).map_err(|r| r.into_error(id.as_str(), &shown))
}

fn open_parent(
    id: &CheckpointId,
    base: &str,
    rel: &str,
    create: bool,
) -> Result<OwnedFd, CheckpointError> {
    open_dir(id, base, safe_fs::split(rel).0, create)
}

fn open_nofollow_at(
    dir: &OwnedFd,
    name: &str,
    shown: &str,
) -> Result<std::fs::File, CheckpointError> {
    safe_fs::open_file_at(dir, name).map_err(|e| CheckpointError::io("opening", shown, e))
}

/// Writes the workspace snapshot of checkpoint `id` into `dir`, a new or
/// empty directory (created when missing), as plain writable files separate
/// from the store: what `cairn fork ID --at CHECKPOINT --workspace DIR`
/// starts the new lineage in. Every object (and chunk) is checked present
/// first; each file is verified as it is written, by temporary file and
/// rename, never through a symlink. On failure what was written is removed.
///
/// # Errors
/// [`CheckpointError::DirNotEmpty`], [`CheckpointError::NoWorkspace`],
/// integrity errors (missing or damaged objects), IO errors.
pub fn materialize(
    store: &Store,
    id: &CheckpointId,
    dir: &Path,
    progress: &dyn Progress,
) -> Result<MaterializeReport, CheckpointError> {
    let cp = Checkpoint::load(store, id)?;
    let w = cp
        .workspace
        .as_ref()
        .ok_or_else(|| CheckpointError::NoWorkspace { id: id.to_string() })?;
    if !is_empty_or_missing(dir)? {
        return Err(CheckpointError::DirNotEmpty {
            dir: dir.to_owned(),
        });
    }
    let m = load_snapshot(store, &cp.run_id()?, &w.snapshot)?;
    let pool = ObjectPool::at(store);
    let needed: HashSet<ObjectHash> = m.entries.values().map(|e| e.hash).collect();
    for h in &needed {
        pool.require(h)?;
    }
    std::fs::create_dir_all(dir).map_err(|e| CheckpointError::io("creating", dir, e))?;
    let root = safe_fs::open_dir_path(dir).map_err(|e| CheckpointError::io("opening", dir, e))?;
    progress.begin(Phase::Stage, Some(m.entries.len() as u64));
    let result = m
        .entries
        .par_iter()
        .map(|(p, e)| -> Result<(), CheckpointError> {
            let (parent, name) = safe_fs::split(p);
            let d = safe_fs::open_dir_in(&root, parent, true)
                .map_err(|r| r.into_error(id.as_str(), p))?;
            let t = safe_fs::stage(&pool, &d, &e.hash, e.mode, p)?;
            safe_fs::rename_at(&d, &t, name)
                .map_err(|err| CheckpointError::io("renaming into place", p, err))?;
            progress.advance(Phase::Stage, 1, e.size);
            Ok(())
        })
        .collect::<Result<Vec<()>, _>>();
    progress.end(Phase::Stage);
    let synced = result.and_then(|_| {
        let dirs: BTreeSet<&str> = m.entries.keys().map(|p| safe_fs::split(p).0).collect();
        for d in dirs {
            let fd =
                safe_fs::open_dir_in(&root, d, false).map_err(|r| r.into_error(id.as_str(), d))?;
            safe_fs::sync_dir(&fd).map_err(|e| CheckpointError::io("syncing", dir, e))?;
        }
        Ok(())
    });
    if let Err(e) = synced {
        // The directory was empty: take back everything written into it.
        if let Ok(entries) = std::fs::read_dir(dir) {
            for entry in entries.flatten() {
                let p = entry.path();
                let _ = if entry.file_type().is_ok_and(|t| t.is_dir()) {
                    std::fs::remove_dir_all(&p)
                } else {
                    std::fs::remove_file(&p)
                };
            }
        }
        return Err(e);
    }
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        let _ = cairn_store::durable::fsync_dir(parent);
    }
    Ok(MaterializeReport {
        id: id.clone(),
        dir: dir.to_owned(),
        snapshot: w.snapshot.clone(),
        files: m.files,
        bytes: m.bytes,
    })
}
