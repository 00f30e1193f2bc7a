//! Restoring a checkpoint in place.
//!
//! Invariants:
//! - nothing is changed (and nothing banked) before the manifest is anchored
//!   in the run's journal (`anchor`), everything it needs verified, the
//!   workspace given found to be the one the run's journal names (and the one
//!   the manifest recorded), and every named path — and every directory
//!   below it that will be written — found reachable without a symbolic link
//!   and of the right type;
//! - files are written only into that workspace (by cairn-workspace) and
//!   below the named paths of the anchored manifest, by temporary file
//!   (`cairn_store::safe::temp_name`) and rename, with permission bits only;
//!   a mode-only change is fsynced (the file) before the touched
//!   directories are;
//! - what a restore will replace is banked, and the banks journaled through
//!   [`RestoreJournal`], before any named path changes; every error after
//!   the first change is [`CheckpointError::RestoreIncomplete`], saying what
//!   was changed and naming the banks.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use cairn_journal::{CheckpointRef, JournalWriter, Record, RecordBody, Snapshot};
use cairn_objects::{ObjectPool, Phase, Progress};
use cairn_store::safe::permission_bits;
use cairn_store::{storage, Store};
use cairn_workspace::{RestoreReport as WorkspaceRestore, Workspace};
use rayon::prelude::*;
use serde::Serialize;

use crate::manifest::{Checkpoint, CheckpointKind, FileEntry, PathKind, SavedPath};
use crate::safe_fs::{self, Reach, ReachExt};
use crate::save::{save, SaveRequest};
use crate::verify::{check_journal, verify_loaded};
use crate::{CheckpointError, CheckpointId, JournalPosition};

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

/// One file to write below a named path.
struct Job<'a> {
    /// The named path's directory (for a file: its parent), absolute.
    base: String,
    /// Relative to `base`.
    rel: String,
    entry: &'a FileEntry,
    shown: String,
}

/// The run's journal, as a restore needs it: where it stands (the bank
/// checkpoint records that position) and a way to append the records of the
/// banks. The caller holds the run's journal writer, so nothing of the run
/// executes meanwhile; [`JournalWriter`] implements it.
pub trait RestoreJournal {
    /// Where the journal stands now.
    fn position(&self) -> JournalPosition;
    /// Appends one record, durably, before returning.
    ///
    /// # Errors
    /// Whatever kept the record from being written; the restore then stops
    /// before it changes any named path.
    fn append(
        &mut self,
        record: RecordBody,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>>;
}

impl RestoreJournal for JournalWriter {
    fn position(&self) -> JournalPosition {
        JournalPosition::of(self)
    }

    fn append(
        &mut self,
        record: RecordBody,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        JournalWriter::append(self, &record)
            .map(drop)
            .map_err(Into::into)
    }
}

/// Restores checkpoint `id` of `ws`'s run: the workspace snapshot (full
/// tree) and the named paths.
///
/// The order:
/// 1. read the manifest once and find its `checkpoint` record in the run's
///    journal (chain verified): unless the record holds the SHA-256 of these
///    bytes, refuse ([`CheckpointError::ManifestChanged`],
///    [`CheckpointError::Unjournaled`], [`CheckpointError::Unanchored`]);
/// 2. refuse a checkpoint of another run, and a workspace that is not the
///    one the run's journal names or the manifest recorded
///    ([`CheckpointError::WrongWorkspace`]);
/// 3. verify everything else it needs (every object and chunk re-hashed,
///    the snapshot manifest, the journal position), and check that every
///    named path, and every directory below one that will be written, can
///    be reached without a symlink and has the right type;
/// 4. restore the workspace through cairn-workspace, which banks it first
///    (`bank:<n>`) and restores the full tree;
/// 5. bank the named paths as they are now: a checkpoint of kind `bank`
///    (with the workspace bank as its snapshot, at the journal's position),
///    so restoring it undoes this restore;
/// 6. journal the banks through `journal`: the `snapshot` records of the
///    workspace capture(s), then the bank's `checkpoint` record with its
///    manifest's hash — so the bank can be restored, whatever happens next;
/// 7. stage every named-path file whose content differs (temporary file in
///    its directory, verified, permission bits set, fsynced); a failure
///    removes them;
/// 8. rename them into place, set changed permission bits, delete files
///    below named directories that the checkpoint does not hold, fsync the
///    directories.
///
/// # Errors
/// Before anything changed: [`CheckpointError::WrongRun`], the anchor
/// errors, [`CheckpointError::WrongWorkspace`],
/// [`CheckpointError::Damaged`], [`CheckpointError::UnsafePath`], and
/// [`CheckpointError::NotRestored`] (steps 5–7 failed and the checkpoint
/// has no workspace part). After changes began:
/// [`CheckpointError::RestoreIncomplete`], or the workspace crate's own
/// error when its restore (step 4) fails.
pub fn restore(
    store: &Store,
    id: &CheckpointId,
    ws: &Workspace,
    journal: &mut dyn RestoreJournal,
    progress: &dyn Progress,
) -> Result<RestoreReport, CheckpointError> {
    let loaded = Checkpoint::load(store, id)?;
    let checked = check_journal(store, &loaded);
    if let Some(e) = checked.refusal(&loaded) {
        return Err(e);
    }
    let cp = &loaded.cp;
    if ws.run().as_str() != cp.run {
        return Err(CheckpointError::WrongRun {
            id: id.to_string(),
            run: cp.run.clone(),
            given: ws.run().to_string(),
        });
    }
    let records = checked.scan.as_ref().map_or(&[][..], |s| &s.records[..]);
    check_workspace(cp, records, ws)?;
    let report = verify_loaded(store, &loaded, &checked, progress)?;
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
    let stopped = Stopped {
        id,
        run: &cp.run,
        workspace_bank: workspace
            .as_ref()
            .map(|w| (w.bank.snapshot.to_string(), w.bank.label.to_string())),
    };

    let present: Vec<PathBuf> = cp
        .paths
        .iter()
        .map(|p| PathBuf::from(&p.path))
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .collect();
    let position = journal.position();
    let mut bank = None;
    let mut before: BTreeMap<String, SavedPath> = BTreeMap::new();
    if !present.is_empty() {
        let mut req = SaveRequest::new(ws.run().clone(), position).paths(present);
        req.kind = CheckpointKind::Bank;
        if let Some(w) = &workspace {
            req = req.snapshot(w.bank.snapshot.clone());
            req.root = ws.root().to_str().map(str::to_owned);
        }
        let saved = save(store, &req, progress).map_err(|e| {
            stopped.before_paths(None, "banking the named paths as they are now", e)
        })?;
        let banked = Checkpoint::load(store, &saved.id).map_err(|e| {
            stopped.before_paths(None, "reading back the bank of the named paths", e)
        })?;
        before = banked
            .cp
            .paths
            .into_iter()
            .map(|p| (p.path.clone(), p))
            .collect();
        bank = Some(saved);
    }
    journal_banks(&cp.run, journal, workspace.as_ref(), bank.as_ref())
        .map_err(|e| stopped.before_paths(None, "journaling the banks", e))?;
    let bank = bank.map(|b| b.id);

    let mut out = RestoreReport {
        id: id.clone(),
        workspace,
        bank: bank.clone(),
        written: Vec::new(),
        deleted: Vec::new(),
        modes: Vec::new(),
        unchanged: 0,
    };
    if let Err((e, replaced)) = apply_paths(store, &cp.paths, &before, &mut out, progress) {
        return Err(match replaced {
            0 => stopped.before_paths(bank.as_ref(), "staging the named paths", e),
            n => stopped.during_paths(bank.as_ref(), n, e),
        });
    }
    Ok(out)
}

/// Appends the records of a restore's banks: the workspace captures (a
/// closing `fail:` one, then the `bank:`), then the bank checkpoint with its
/// manifest's hash.
fn journal_banks(
    run: &str,
    journal: &mut dyn RestoreJournal,
    workspace: Option<&WorkspaceRestore>,
    bank: Option<&crate::SaveReport>,
) -> Result<(), CheckpointError> {
    let mut records = Vec::new();
    if let Some(w) = workspace {
        for c in w.closed.iter().chain(std::iter::once(&w.bank)) {
            records.push(RecordBody::Snapshot(Snapshot {
                snapshot: c.snapshot.to_string(),
                label: c.label.to_string(),
            }));
        }
    }
    if let Some(b) = bank {
        records.push(RecordBody::Checkpoint(CheckpointRef {
            checkpoint: b.id.to_string(),
            manifest: Some(b.manifest.clone()),
        }));
    }
    for r in records {
        journal
            .append(r)
            .map_err(|source| CheckpointError::Journal {
                run: run.to_owned(),
                source,
            })?;
    }
    Ok(())
}

/// What a restore had done when it stopped, to word its error exactly.
struct Stopped<'a> {
    id: &'a CheckpointId,
    run: &'a str,
    /// The workspace bank's snapshot and label, once the workspace was
    /// restored.
    workspace_bank: Option<(String, String)>,
}

impl Stopped<'_> {
    /// Failed before any named path changed (the staged files removed).
    fn before_paths(
        &self,
        bank: Option<&CheckpointId>,
        step: &'static str,
        e: CheckpointError,
    ) -> CheckpointError {
        let Some((snapshot, label)) = &self.workspace_bank else {
            return CheckpointError::NotRestored {
                id: self.id.to_string(),
                step,
                source: Box::new(e),
            };
        };
        CheckpointError::RestoreIncomplete {
            id: self.id.to_string(),
            bank: bank.map(ToString::to_string),
            done: format!(
                "the workspace was restored (its state before is snapshot {snapshot}, labelled {label}), and no named path was changed: {step} failed"
            ),
            undo: self.undo(bank),
            source: Box::new(e),
        }
    }

    /// Failed after `replaced` named-path files were renamed into place.
    fn during_paths(
        &self,
        bank: Option<&CheckpointId>,
        replaced: usize,
        e: CheckpointError,
    ) -> CheckpointError {
        let ws = if self.workspace_bank.is_some() {
            "the workspace was restored and "
        } else {
            ""
        };
        CheckpointError::RestoreIncomplete {
            id: self.id.to_string(),
            bank: bank.map(ToString::to_string),
            done: format!(
                "{ws}{replaced} named-path file(s) were replaced or removed, the rest not"
            ),
            undo: self.undo(bank),
            source: Box::new(e),
        }
    }

    fn undo(&self, bank: Option<&CheckpointId>) -> String {
        match (bank, &self.workspace_bank) {
            (Some(b), _) => format!(
                "The state before is checkpoint {b}: `cairn checkpoint restore {b}` puts it all back"
            ),
            (None, Some((snapshot, _))) => format!(
                "`cairn rewind {} --restore-snapshot {snapshot}` puts the workspace back",
                self.run
            ),
            (None, None) => "No named path existed before, so there is nothing to put back".into(),
        }
    }
}

/// Refuses a workspace that is not the one the run's journal names (its
/// `meta` record, resolved now), or that the anchored manifest recorded.
fn check_workspace(
    cp: &Checkpoint,
    records: &[Record],
    ws: &Workspace,
) -> Result<(), CheckpointError> {
    let named = match records.first().map(|r| &r.body) {
        Some(RecordBody::Meta(m)) => m.workspace.clone(),
        _ => {
            return Err(CheckpointError::Damaged {
                id: cp.id.to_string(),
                count: 1,
                first: format!(
                    "journal: session {}'s journal does not begin with its `meta` record",
                    cp.run
                ),
            })
        }
    };
    let refuse = |what: String| CheckpointError::WrongWorkspace {
        id: cp.id.to_string(),
        run: cp.run.clone(),
        workspace: named.clone(),
        what,
    };
    match Path::new(&named).canonicalize() {
        Ok(p) if p == ws.root() => {}
        Ok(p) if Path::new(&named) != p => {
            return Err(refuse(format!(
                "the workspace given is {}, while {named} now resolves to {}",
                ws.root().display(),
                p.display()
            )))
        }
        Ok(_) => {
            return Err(refuse(format!(
                "the workspace given is {}",
                ws.root().display()
            )))
        }
        Err(e) => return Err(refuse(format!("{named} cannot be resolved now ({e})"))),
    }
    if let Some(root) = cp.workspace.as_ref().and_then(|w| w.root.as_deref()) {
        if Path::new(root) != ws.root() {
            return Err(refuse(format!(
                "the checkpoint's manifest records its workspace as {root}"
            )));
        }
    }
    Ok(())
}

/// Refuses a named path that cannot be reached without a symlink, or whose
/// type changed (a directory where the file was, or the reverse), and, below
/// a named directory, a directory to write into that is a symlink or not a
/// directory, or a directory where the checkpoint has a file.
fn probe(id: &CheckpointId, p: &SavedPath) -> Result<(), CheckpointError> {
    let refuse = |path: &str, reason: &str| CheckpointError::UnsafePath {
        id: id.to_string(),
        path: path.to_owned(),
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
        (_, None) => return Ok(()),
        (_, Some(st)) if st.st_mode & libc::S_IFMT == libc::S_IFLNK => {
            return Err(refuse(
                &p.path,
                "it is a symbolic link now, and cairn never writes through one",
            ))
        }
        (PathKind::File, Some(st)) if safe_fs::is_dir(&st) => {
            return Err(refuse(
                &p.path,
                "a directory is there now, where the checkpoint has a file; move it away first",
            ))
        }
        (PathKind::Dir, Some(st)) if !safe_fs::is_dir(&st) => {
            return Err(refuse(
                &p.path,
                "something other than a directory is there now; move it away first",
            ))
        }
        (PathKind::File, _) => return Ok(()),
        (PathKind::Dir, _) => {}
    }
    // Below a named directory: every directory an entry is written into.
    let root =
        safe_fs::open_abs_dir(&p.path, false).map_err(|r| r.into_error(id.as_str(), &p.path))?;
    let mut dirs: HashMap<&str, Option<OwnedFd>> = HashMap::new();
    for e in &p.entries {
        let (sub, name) = safe_fs::split(&e.path);
        if !dirs.contains_key(sub) {
            let fd = match safe_fs::open_dir_in(&root, sub, false) {
                Ok(fd) => Some(fd),
                // Missing: created when written.
                Err(Reach::Io(err)) if err.kind() == std::io::ErrorKind::NotFound => None,
                Err(r) => return Err(r.into_error(id.as_str(), &format!("{}/{sub}", p.path))),
            };
            dirs.insert(sub, fd);
        }
        let Some(Some(d)) = dirs.get(sub) else {
            continue;
        };
        let shown = format!("{}/{}", p.path, e.path);
        let st = safe_fs::lstat_at(d, name)
            .map_err(|err| CheckpointError::io("reading", &shown, err))?;
        if st.is_some_and(|st| safe_fs::is_dir(&st)) {
            return Err(refuse(
                &shown,
                "a directory is there now, where the checkpoint has a file; move it away first",
            ));
        }
    }
    Ok(())
}

/// Steps 7 and 8 of [`restore`]. On error, also how many named-path files
/// had been replaced or removed (0: none was changed).
fn apply_paths(
    store: &Store,
    paths: &[SavedPath],
    before: &BTreeMap<String, SavedPath>,
    out: &mut RestoreReport,
    progress: &dyn Progress,
) -> Result<(), (CheckpointError, usize)> {
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
                    if permission_bits(n.mode) != permission_bits(e.mode) {
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
            let dir = open_parent(&j.base, &j.rel, true)?;
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
            if let (Some(t), Ok(dir)) = (t, open_parent(&j.base, &j.rel, false)) {
                let _ = safe_fs::unlink_at(&dir, t);
            }
        }
        return Err((e, 0));
    }

    progress.begin(Phase::Apply, None);
    let mut changed = 0usize;
    let mut touched: BTreeSet<(String, String)> = BTreeSet::new();
    let mut temps = temps.into_iter().flatten();
    let mut jobs_left = jobs.iter();
    let result = (|| -> Result<(), CheckpointError> {
        for (j, t) in jobs_left.by_ref().zip(temps.by_ref()) {
            let dir = open_parent(&j.base, &j.rel, false)?;
            let name = safe_fs::split(&j.rel).1;
            safe_fs::rename_at(&dir, &t, name).map_err(|e| {
                let _ = safe_fs::unlink_at(&dir, &t);
                CheckpointError::io("renaming into place", &j.shown, e)
            })?;
            changed += 1;
            out.written.push(j.shown.clone());
            touched.insert((j.base.clone(), safe_fs::split(&j.rel).0.to_owned()));
            progress.advance(Phase::Apply, 1, 0);
        }
        for (base, rel, mode, shown) in &chmods {
            let dir = open_parent(base, rel, false)?;
            let f = safe_fs::open_file_at(&dir, safe_fs::split(rel).1)
                .map_err(|e| CheckpointError::io("opening", shown, e))?;
            safe_fs::set_mode(&f, *mode, shown)?;
            // A mode is inode metadata the directory fsyncs below do not
            // cover; mode-only changes are few, so one fsync each is cheap.
            storage::sync_fd(f.as_fd(), false, "checkpoint.restore.mode")
                .map_err(|e| CheckpointError::io("syncing", shown, e))?;
            changed += 1;
            out.modes.push(shown.clone());
        }
        for (base, rel) in &deletes {
            let dir = open_parent(base, rel, false)?;
            let shown = format!("{base}/{rel}");
            match safe_fs::unlink_at(&dir, safe_fs::split(rel).1) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                Err(e) => return Err(CheckpointError::io("deleting", &shown, e)),
            }
            changed += 1;
            out.deleted.push(shown);
            touched.insert((base.clone(), safe_fs::split(rel).0.to_owned()));
        }
        for (base, rel) in &touched {
            let dir = open_dir(base, rel, false)?;
            safe_fs::sync_dir(&dir).map_err(|e| CheckpointError::io("syncing", base, e))?;
        }
        Ok(())
    })();
    progress.end(Phase::Apply);
    if let Err(e) = result {
        // Staged files not yet renamed are taken back.
        for (j, t) in jobs_left.zip(temps) {
            if let Ok(dir) = open_parent(&j.base, &j.rel, false) {
                let _ = safe_fs::unlink_at(&dir, &t);
            }
        }
        return Err((e, changed));
    }
    out.written.sort();
    out.deleted.sort();
    Ok(())
}

/// Opens `base/rel` without following a symlink (`base` absolute), creating
/// missing directories when `create`. Used while writing, so a refusal is
/// [`CheckpointError::Unreachable`].
fn open_dir(base: &str, rel: &str, create: bool) -> Result<OwnedFd, CheckpointError> {
    let shown = if rel.is_empty() {
        base.to_owned()
    } else {
        format!("{base}/{rel}")
    };
    let root = safe_fs::open_abs_dir(base, create).map_err(|r| r.into_unreachable(base))?;
    safe_fs::open_dir_in(&root, rel, create).map_err(|r| r.into_unreachable(&shown))
}

fn open_parent(base: &str, rel: &str, create: bool) -> Result<OwnedFd, CheckpointError> {
    open_dir(base, safe_fs::split(rel).0, create)
}
