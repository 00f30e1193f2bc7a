//! The tree walk: which files to capture, which gaps to report.
//!
//! Directories are read in parallel (one rayon task per directory): on a
//! warm cache the walk is bound by `getdents`/`statx` system calls, which
//! scale with cores.

use std::fs;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Mutex;

use cairn_objects::{Phase, Progress};

use crate::ignore::{Decision, IgnoreRules};
use crate::index::Stat;
use crate::manifest::{SkipReason, Skipped};
use crate::WorkspaceError;

/// A regular file to capture.
#[derive(Clone, Debug)]
pub(crate) struct Found {
    pub(crate) path: String,
    pub(crate) stat: Stat,
}

/// What the walk saw.
#[derive(Debug, Default)]
pub(crate) struct Walked {
    /// Files to capture, sorted by path.
    pub(crate) files: Vec<Found>,
    /// Gaps: symlinks, oversized, special and unreadable entries, sorted.
    pub(crate) skipped: Vec<Skipped>,
}

/// Limits the walk enforces.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Limits {
    pub(crate) max_files: usize,
    pub(crate) max_file_bytes: u64,
}

struct Shared<'a> {
    root: &'a Path,
    rules: &'a IgnoreRules,
    limits: Limits,
    progress: &'a dyn Progress,
    counted: AtomicUsize,
    over: AtomicBool,
    out: Mutex<Walked>,
}

/// Walks `root`, applying `rules`.
///
/// 1. An excluded directory is not entered, unless a `!` rule could match
///    below it; then it is entered and each entry is tested by its type from
///    the directory listing, and stat'ed only if it is captured.
/// 2. Symlinks (to files or directories) are never followed: reported.
/// 3. Files over the size limit are reported, not captured; they count
///    toward the file limit.
/// 4. More than `max_files` files to capture stops the walk with
///    [`WorkspaceError::TooManyFiles`] before anything is read.
pub(crate) fn walk(
    root: &Path,
    rules: &IgnoreRules,
    limits: Limits,
    progress: &dyn Progress,
) -> Result<Walked, WorkspaceError> {
    // The root itself must be readable: that is an error, not a gap.
    fs::read_dir(root).map_err(|e| WorkspaceError::io("reading the workspace", root, e))?;
    progress.begin(Phase::Walk, None);
    let shared = Shared {
        root,
        rules,
        limits,
        progress,
        counted: AtomicUsize::new(0),
        over: AtomicBool::new(false),
        out: Mutex::new(Walked::default()),
    };
    rayon::scope(|s| visit(s, &shared, String::new(), Decision::Unmatched, false));
    if shared.over.load(Ordering::Relaxed) {
        return Err(WorkspaceError::TooManyFiles {
            root: root.to_owned(),
            limit: limits.max_files,
        });
    }
    let mut out = shared.out.into_inner().unwrap_or_else(|p| p.into_inner());
    out.files.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    out.skipped.sort_by(|a, b| a.path.cmp(&b.path));
    progress.end(Phase::Walk);
    Ok(out)
}

fn visit<'s>(
    scope: &rayon::Scope<'s>,
    sh: &'s Shared<'s>,
    dir: String,
    parent: Decision,
    dir_excluded: bool,
) {
    if sh.over.load(Ordering::Relaxed) {
        return;
    }
    let abs = if dir.is_empty() {
        sh.root.to_path_buf()
    } else {
        sh.root.join(&dir)
    };
    let mut files = Vec::new();
    let mut skipped = Vec::new();
    let gap = |skipped: &mut Vec<Skipped>, path: String, reason: SkipReason| {
        if !dir_excluded {
            skipped.push(Skipped { path, reason });
        }
    };
    let entries = match fs::read_dir(&abs) {
        Ok(e) => e,
        Err(e) => {
            gap(
                &mut skipped,
                dir.clone(),
                SkipReason::Unreadable {
                    detail: e.to_string(),
                },
            );
            flush(sh, files, skipped);
            return;
        }
    };
    let mut seen = 0u64;
    for entry in entries {
        let entry = match entry {
            Ok(e) => e,
            Err(e) => {
                gap(
                    &mut skipped,
                    dir.clone(),
                    SkipReason::Unreadable {
                        detail: e.to_string(),
                    },
                );
                break;
            }
        };
        seen += 1;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            gap(
                &mut skipped,
                join(&dir, &name.to_string_lossy()),
                SkipReason::NotUtf8,
            );
            continue;
        };
        let rel = join(&dir, name);
        let Ok(ft) = entry.file_type() else {
            continue;
        };
        if ft.is_dir() {
            let d = sh.rules.decide(&rel, true, parent);
            let excluded = sh.rules.excludes(d);
            if !excluded || sh.rules.may_reinclude_below(&rel, d) {
                scope.spawn(move |s| visit(s, sh, rel, d, excluded));
            }
            continue;
        }
        if sh.rules.excludes(sh.rules.decide(&rel, false, parent)) {
            continue;
        }
        if ft.is_symlink() {
            skipped.push(Skipped {
                path: rel,
                reason: SkipReason::Symlink,
            });
            continue;
        }
        if !ft.is_file() {
            skipped.push(Skipped {
                path: rel,
                reason: SkipReason::Special,
            });
            continue;
        }
        let meta = match entry.metadata() {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => {
                skipped.push(Skipped {
                    path: rel,
                    reason: SkipReason::Unreadable {
                        detail: e.to_string(),
                    },
                });
                continue;
            }
        };
        if sh.counted.fetch_add(1, Ordering::Relaxed) >= sh.limits.max_files {
            sh.over.store(true, Ordering::Relaxed);
            return;
        }
        let stat = Stat::of(&meta);
        if stat.size > sh.limits.max_file_bytes {
            skipped.push(Skipped {
                path: rel,
                reason: SkipReason::TooLarge {
                    size: stat.size,
                    limit: sh.limits.max_file_bytes,
                },
            });
            continue;
        }
        files.push(Found { path: rel, stat });
    }
    sh.progress.advance(Phase::Walk, seen, 0);
    flush(sh, files, skipped);
}

fn flush(sh: &Shared<'_>, files: Vec<Found>, skipped: Vec<Skipped>) {
    if files.is_empty() && skipped.is_empty() {
        return;
    }
    let mut out = sh.out.lock().unwrap_or_else(|p| p.into_inner());
    out.files.extend(files);
    out.skipped.extend(skipped);
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() {
        name.to_owned()
    } else {
        let mut s = String::with_capacity(dir.len() + 1 + name.len());
        s.push_str(dir);
        s.push('/');
        s.push_str(name);
        s
    }
}
