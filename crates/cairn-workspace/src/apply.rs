//! Carrying out a restore plan: stage every file first, then change the tree.
//!
//! Stage: each file to write is decompressed (and verified against its hash)
//! into a temporary file in its final directory (named by the one scheme,
//! `cairn_store::safe::temp_name`), given its mode and fsynced. If anything
//! fails here the temporaries and any directory created for them are
//! removed: the workspace is as it was.
//! Apply: deletions, then renames of the staged files over their targets,
//! then mode changes, then removal of directories left empty, then an fsync
//! of every directory touched (one removed as emptied is skipped; one that
//! cannot be opened fails the restore, since its renames and unlinks are
//! then not durable). A failure here is reported as
//! [`WorkspaceError::RestoreIncomplete`], naming the bank that undoes it; a
//! mode that cannot be set is reported in `RestoreReport::failed`.
//!
//! Every mode applied is the recorded mode's permission bits only
//! (`cairn_store::safe::permission_bits`): setuid, setgid and sticky bits in
//! a manifest are never applied, whoever wrote it. Modes are set through a
//! descriptor opened without following a symlink (`fchmod`), then that file
//! is fsynced (its directory, for a file that cannot be opened).

use std::collections::{BTreeSet, HashSet};
use std::io::{BufWriter, Write as _};
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::fs::PermissionsExt;
use std::sync::Mutex;

use cairn_objects::{Phase, Progress};
use cairn_store::safe::permission_bits;
use cairn_store::storage;
use rayon::prelude::*;

use crate::manifest::{Entry, SnapshotId};
use crate::safe_fs::{self, Reach};
use crate::workspace::Workspace;
use crate::{LeftAlone, WorkspaceError};

/// One file to write.
#[derive(Clone, Debug)]
pub(crate) struct Write {
    pub(crate) path: String,
    pub(crate) entry: Entry,
    /// A file in the way on its path is deleted first, so it is staged after
    /// the deletions.
    pub(crate) late: bool,
}

impl Write {
    pub(crate) fn new(path: &str, entry: Entry) -> Self {
        Write {
            path: path.to_owned(),
            entry,
            late: false,
        }
    }
}

/// What to change.
#[derive(Debug, Default)]
pub(crate) struct Plan {
    pub(crate) writes: Vec<Write>,
    pub(crate) deletes: Vec<String>,
    pub(crate) modes: Vec<(String, u32)>,
    pub(crate) left_alone: Vec<LeftAlone>,
}

/// What was changed.
#[derive(Debug, Default)]
pub(crate) struct Done {
    pub(crate) written: Vec<String>,
    pub(crate) deleted: Vec<String>,
    pub(crate) modes: Vec<String>,
    pub(crate) dirs_removed: Vec<String>,
    pub(crate) left_alone: Vec<LeftAlone>,
    pub(crate) failed: Vec<LeftAlone>,
}

/// A staged file. Its directory is re-opened (safely) when it is renamed,
/// so a large restore does not hold one descriptor per file.
struct Staged {
    path: String,
    temp: String,
}

impl Staged {
    fn dir(&self, root: &OwnedFd) -> Result<(OwnedFd, String), Reach> {
        safe_fs::open_parent(root, &self.path, false, &mut Vec::new())
    }
}

fn reach_err(target: &SnapshotId, path: &str, r: Reach) -> WorkspaceError {
    match r {
        Reach::Symlink(a) => WorkspaceError::UnsafePath {
            snapshot: target.to_string(),
            path: path.to_owned(),
            reason: format!("`{a}` is a symbolic link, and cairn never restores through one"),
        },
        Reach::NotDir(a) => WorkspaceError::UnsafePath {
            snapshot: target.to_string(),
            path: path.to_owned(),
            reason: format!("`{a}` is not a directory"),
        },
        Reach::Io(e) => WorkspaceError::io("reaching", path, e),
    }
}

pub(crate) fn apply(
    ws: &Workspace,
    target: &SnapshotId,
    bank: &SnapshotId,
    plan: Plan,
    want_dirs: &HashSet<&str>,
    progress: &dyn Progress,
) -> Result<Done, WorkspaceError> {
    let root =
        safe_fs::open_root(ws.root()).map_err(|e| WorkspaceError::io("opening", ws.root(), e))?;
    let (early, late): (Vec<Write>, Vec<Write>) = plan.writes.into_iter().partition(|w| !w.late);

    // Stage: nothing visible changes until every file is staged.
    let created = Mutex::new(Vec::new());
    progress.begin(Phase::Stage, Some((early.len() + late.len()) as u64));
    let staged: Vec<Result<Staged, WorkspaceError>> = early
        .par_iter()
        .map(|w| stage(ws, &root, target, w, &created, progress))
        .collect();
    let (ok, failed): (Vec<_>, Vec<_>) = staged.into_iter().partition(|r| r.is_ok());
    let ok: Vec<Staged> = ok.into_iter().filter_map(Result::ok).collect();
    if let Some(Err(e)) = failed.into_iter().next() {
        for s in &ok {
            if let Ok((dir, _)) = s.dir(&root) {
                let _ = safe_fs::unlink_at(&dir, &s.temp);
            }
        }
        let mut made = created.into_inner().unwrap_or_else(|p| p.into_inner());
        made.sort_by_key(|d| std::cmp::Reverse(d.matches('/').count()));
        for d in made {
            if let Ok((dir, name)) = safe_fs::open_parent(&root, &d, false, &mut Vec::new()) {
                let _ = safe_fs::rmdir_at(&dir, &name);
            }
        }
        return Err(e);
    }

    let mut done = Done {
        left_alone: plan.left_alone,
        ..Done::default()
    };
    let incomplete = |e: WorkspaceError| WorkspaceError::RestoreIncomplete {
        bank: bank.to_string(),
        source: Box::new(e),
    };
    let mut touched: BTreeSet<String> = BTreeSet::new();
    let total = plan.deletes.len() + ok.len() + late.len() + plan.modes.len();
    progress.end(Phase::Stage);
    progress.begin(Phase::Apply, Some(total as u64));

    for p in &plan.deletes {
        let (dir, name) = safe_fs::open_parent(&root, p, false, &mut Vec::new())
            .map_err(|r| incomplete(reach_err(target, p, r)))?;
        match safe_fs::lstat_at(&dir, &name) {
            Ok(st) if safe_fs::is_regular(&st) => {
                safe_fs::unlink_at(&dir, &name)
                    .map_err(|e| incomplete(WorkspaceError::io("deleting", p, e)))?;
                done.deleted.push(p.clone());
                touched.insert(parent_of(p).to_owned());
            }
            Ok(_) => done.left_alone.push(LeftAlone {
                path: p.clone(),
                reason: "it is no longer a regular file, so cairn has no copy of it".into(),
            }),
            Err(_) => {}
        }
        progress.advance(Phase::Apply, 1, 0);
    }
    let mut to_rename = ok;
    for w in &late {
        let s =
            stage(ws, &root, target, w, &Mutex::new(Vec::new()), progress).map_err(incomplete)?;
        to_rename.push(s);
    }
    for s in &to_rename {
        let (dir, name) = s
            .dir(&root)
            .map_err(|r| incomplete(reach_err(target, &s.path, r)))?;
        safe_fs::rename_at(&dir, &s.temp, &name).map_err(|e| {
            let _ = safe_fs::unlink_at(&dir, &s.temp);
            incomplete(WorkspaceError::io("renaming into place", &s.path, e))
        })?;
        done.written.push(s.path.clone());
        touched.insert(parent_of(&s.path).to_owned());
        progress.advance(Phase::Apply, 1, 0);
    }
    for (p, mode) in &plan.modes {
        let (dir, name) = safe_fs::open_parent(&root, p, false, &mut Vec::new())
            .map_err(|r| incomplete(reach_err(target, p, r)))?;
        match set_mode(&dir, &name, *mode) {
            Ok(true) => done.modes.push(p.clone()),
            Ok(false) => done.left_alone.push(LeftAlone {
                path: p.clone(),
                reason: "it is no longer a regular file, so cairn has no copy of it".into(),
            }),
            Err(e) => done.failed.push(LeftAlone {
                path: p.clone(),
                reason: format!(
                    "its mode could not be set to {:o} ({e}); the bank {bank} holds the state before this restore",
                    permission_bits(*mode)
                ),
            }),
        }
        progress.advance(Phase::Apply, 1, 0);
    }

    // Directories emptied by the deletions, deepest first, unless the target
    // has files below them.
    let mut candidates: BTreeSet<&str> = BTreeSet::new();
    for p in &done.deleted {
        for (i, _) in p.match_indices('/') {
            candidates.insert(&p[..i]);
        }
    }
    let mut ordered: Vec<&str> = candidates
        .into_iter()
        .filter(|d| !want_dirs.contains(d))
        .collect();
    ordered.sort_by_key(|d| std::cmp::Reverse(d.matches('/').count()));
    for d in ordered {
        let Ok((dir, name)) = safe_fs::open_parent(&root, d, false, &mut Vec::new()) else {
            continue;
        };
        if safe_fs::rmdir_at(&dir, &name).is_ok() {
            done.dirs_removed.push(d.to_owned());
            touched.insert(parent_of(d).to_owned());
        }
    }
    for d in &touched {
        let opened = safe_fs::open_dir(&root, d, false, &mut Vec::new());
        #[cfg(test)]
        let opened = match tests::FAIL_DIR_OPENS.with(std::cell::Cell::get) {
            Some(errno) => Err(Reach::Io(std::io::Error::from_raw_os_error(errno))),
            None => opened,
        };
        let fd = match opened {
            Ok(fd) => fd,
            // Removed above as emptied; its parent is touched too.
            Err(Reach::Io(e)) if e.kind() == std::io::ErrorKind::NotFound => continue,
            // Any other failure (EMFILE, EACCES, a symlink put in its
            // place) leaves its renames and unlinks not durable: the
            // restore did not complete.
            Err(r) => return Err(incomplete(reach_err(target, d, r))),
        };
        safe_fs::sync_dir(&fd).map_err(|e| incomplete(WorkspaceError::io("syncing", d, e)))?;
    }
    progress.end(Phase::Apply);
    done.written.sort();
    done.dirs_removed.sort();
    done.left_alone.sort_by(|a, b| a.path.cmp(&b.path));
    done.failed.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(done)
}

/// Sets the permission bits (only those: [`permission_bits`]) of the
/// regular file `name` in `dir`. Returns false when `name` is not a regular
/// file (nothing changed).
///
/// The file is opened without following a symlink and changed through that
/// descriptor (`fchmod`), so the check and the change are about the same
/// file, and no `fchmodat(AT_SYMLINK_NOFOLLOW)` is needed (which older C
/// libraries refuse with `ENOTSUP`). Only a file that cannot be opened for
/// reading (no read permission) falls back to that call.
///
/// # Errors
/// The mode could not be set: the caller reports it, never drops it.
fn set_mode(dir: &OwnedFd, name: &str, mode: u32) -> std::io::Result<bool> {
    let mode = permission_bits(mode);
    #[cfg(test)]
    if tests::FAIL_MODES.with(std::cell::Cell::get) {
        return Err(std::io::Error::from_raw_os_error(libc::ENOTSUP));
    }
    let file = match safe_fs::open_file_at(dir, name) {
        Ok(f) => f,
        Err(e) if e.raw_os_error() == Some(libc::EACCES) => {
            return match safe_fs::lstat_at(dir, name) {
                Ok(st) if safe_fs::is_regular(&st) => {
                    // No descriptor of the file to fsync: the directory's
                    // fsync is the nearest (it commits the change on
                    // journaling file systems such as ext4).
                    safe_fs::chmod_at(dir, name, mode)?;
                    safe_fs::sync_dir(dir)?;
                    Ok(true)
                }
                Ok(_) => Ok(false),
                Err(e) => Err(e),
            };
        }
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => return Ok(false),
        Err(e) => return Err(e),
    };
    if !file.metadata()?.is_file() {
        return Ok(false);
    }
    file.set_permissions(std::fs::Permissions::from_mode(mode))?;
    // A mode is inode metadata no directory fsync covers. Mode-only changes
    // are few (a rewritten file gets its mode before its own fsync), so one
    // fsync each is cheap.
    storage::sync_fd(file.as_fd(), false, "workspace.restore.mode")?;
    Ok(true)
}

fn parent_of(p: &str) -> &str {
    p.rsplit_once('/').map_or("", |(d, _)| d)
}

/// Writes one file's content under a temporary name in its final directory.
fn stage(
    ws: &Workspace,
    root: &OwnedFd,
    target: &SnapshotId,
    w: &Write,
    created: &Mutex<Vec<String>>,
    progress: &dyn Progress,
) -> Result<Staged, WorkspaceError> {
    let mut made = Vec::new();
    let res = safe_fs::open_parent(root, &w.path, true, &mut made);
    created
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .extend(made);
    let (dir, _) = res.map_err(|r| reach_err(target, &w.path, r))?;
    // The one temp-name scheme: captures never take it, restores never
    // delete it.
    let temp = cairn_store::safe::temp_name();
    let file = safe_fs::create_at(&dir, &temp)
        .map_err(|e| WorkspaceError::io("creating a temporary file for", &w.path, e))?;
    let result = (|| -> Result<(), WorkspaceError> {
        let tracked = storage::Tracked::resolved(&file, storage::path_at(dir.as_fd(), &temp));
        let mut out = BufWriter::with_capacity(256 << 10, tracked);
        ws.pool().read_to(&w.entry.hash, &mut out)?;
        out.flush()
            .map_err(|e| WorkspaceError::io("writing", &w.path, e))?;
        drop(out);
        file.set_permissions(std::fs::Permissions::from_mode(permission_bits(
            w.entry.mode,
        )))
        .map_err(|e| WorkspaceError::io("setting the mode of", &w.path, e))?;
        storage::sync_fd(file.as_fd(), false, "restore.file")
            .map_err(|e| WorkspaceError::io("syncing", &w.path, e))
    })();
    if let Err(e) = result {
        let _ = safe_fs::unlink_at(&dir, &temp);
        return Err(e);
    }
    progress.advance(Phase::Stage, 1, w.entry.size);
    Ok(Staged {
        path: w.path.clone(),
        temp,
    })
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::os::unix::fs::PermissionsExt;

    use cairn_store::{RunId, Store};

    use crate::{CaptureConfig, Label, NoProgress, Workspace};

    thread_local! {
        /// Makes every mode change on this thread fail, as `fchmodat` with
        /// `AT_SYMLINK_NOFOLLOW` does on an older C library (root can set
        /// any mode, so a test cannot make one fail otherwise).
        pub(super) static FAIL_MODES: Cell<bool> = const { Cell::new(false) };
        /// Makes opening a touched directory to fsync it fail with this
        /// errno on this thread (root opens any directory, and EMFILE would
        /// hit every test at once).
        pub(super) static FAIL_DIR_OPENS: Cell<Option<i32>> = const { Cell::new(None) };
    }

    /// A touched directory that cannot be opened for its fsync fails the
    /// restore (its renames and unlinks are not durable); only one that is
    /// gone (removed as emptied) is skipped.
    #[test]
    fn a_touched_directory_that_cannot_be_synced_fails_the_restore() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(root.join("a.txt"), "one").unwrap();
        let store = Store::open(dir.path().join("store")).unwrap();
        let ws = Workspace::open(&store, &RunId::new(), &root, CaptureConfig::default()).unwrap();
        let first = ws.capture(&Label::Snap(1), &NoProgress).unwrap();

        std::fs::write(root.join("a.txt"), "two").unwrap();
        FAIL_DIR_OPENS.with(|f| f.set(Some(libc::EMFILE)));
        let r = ws.restore_snapshot(&first.snapshot, &NoProgress);
        FAIL_DIR_OPENS.with(|f| f.set(None));
        let e = r.unwrap_err();
        assert!(
            matches!(e, crate::WorkspaceError::RestoreIncomplete { .. }),
            "{e}"
        );

        std::fs::write(root.join("a.txt"), "three").unwrap();
        FAIL_DIR_OPENS.with(|f| f.set(Some(libc::ENOENT)));
        let r = ws.restore_snapshot(&first.snapshot, &NoProgress);
        FAIL_DIR_OPENS.with(|f| f.set(None));
        assert!(r.unwrap().is_complete());
        assert_eq!(std::fs::read_to_string(root.join("a.txt")).unwrap(), "one");
    }

    #[test]
    fn a_mode_change_that_fails_is_reported_as_failed_not_left_alone() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        std::fs::create_dir(&root).unwrap();
        std::fs::write(root.join("tool.sh"), "echo").unwrap();
        let store = Store::open(dir.path().join("store")).unwrap();
        let ws = Workspace::open(&store, &RunId::new(), &root, CaptureConfig::default()).unwrap();
        let first = ws.capture(&Label::Snap(1), &NoProgress).unwrap();
        let set = |m| std::fs::set_permissions(root.join("tool.sh"), PermissionsExt::from_mode(m));
        set(0o700).unwrap();

        FAIL_MODES.with(|f| f.set(true));
        let r = ws.restore_snapshot(&first.snapshot, &NoProgress).unwrap();
        FAIL_MODES.with(|f| f.set(false));
        assert!(!r.is_complete());
        assert!(r.modes.is_empty() && r.left_alone.is_empty(), "{r:?}");
        assert_eq!(r.failed.len(), 1);
        assert_eq!(r.failed[0].path, "tool.sh");
        assert!(r.failed[0].reason.contains("644"), "{}", r.failed[0].reason);
        assert!(r.failed[0].reason.contains(r.bank.snapshot.as_str()));

        // Without the fault, the same change is made through the descriptor.
        let r = ws.restore_snapshot(&first.snapshot, &NoProgress).unwrap();
        assert!(r.is_complete());
        assert_eq!(r.modes, vec!["tool.sh"]);
        let mode = std::fs::metadata(root.join("tool.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o7777, 0o644);
    }
}
