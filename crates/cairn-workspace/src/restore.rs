//! Restore (DESIGN §5.4): bank, decide what to change, check everything, then
//! change it.
//!
//! Invariants:
//! - The rules live in one place, [`prepare`]: the restore and its preview
//!   ([`crate::Workspace::preview_rewind`]) resolve, bank, scope and plan
//!   through it, so a preview lists exactly what the restore then does
//!   (the workspace unchanged in between).
//! - Nothing in the workspace changes before every path and every object
//!   of the plan has been checked (`apply` then stages every file first).
//! - Scope `run` never touches a path changed only in non-executing
//!   windows after the target: each is reported as left alone, naming the
//!   windows.

use std::collections::{BTreeSet, HashSet};

use cairn_objects::Progress;
use serde::Serialize;

use crate::apply::{apply, Plan, Write};
use crate::attribution::attribute;
use crate::capture::{capture, CaptureReport};
use crate::history::{next_number, resolve_pre};
use crate::manifest::{diff_entries, Manifest, SnapshotId};
use crate::workspace::Session;
use crate::{Label, NodeRef, WorkspaceError};

/// Which paths a restore may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RestoreScope {
    /// Only the paths the run itself changed after the target, leaving out
    /// changes made inside non-executing windows (`--restore-scope run`).
    Run,
    /// The whole tree (`--restore-scope full`, and `--restore-snapshot`).
    Full,
}

/// A path a restore did not touch although the target differs there.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct LeftAlone {
    /// The path.
    pub path: String,
    /// Why it was left as it is.
    pub reason: String,
}

/// What a restore did.
#[derive(Clone, Debug, Serialize)]
pub struct RestoreReport {
    /// The snapshot restored.
    pub target: SnapshotId,
    /// The boundary resolved, for `--to NODE[:ITER]`.
    pub target_label: Option<Label>,
    /// The scope applied.
    pub scope: RestoreScope,
    /// A `fail:` capture that closed a node which had started and never
    /// recorded its end (it was interrupted), taken before the bank.
    pub closed: Option<CaptureReport>,
    /// The bank: the workspace as it was just before this restore. Restoring
    /// it undoes this restore.
    pub bank: CaptureReport,
    /// Files written (created or replaced).
    pub written: Vec<String>,
    /// Files deleted.
    pub deleted: Vec<String>,
    /// Files whose permission bits alone were changed.
    pub modes: Vec<String>,
    /// Directories removed because the restore left them empty.
    pub dirs_removed: Vec<String>,
    /// Paths that differ from the target but were not touched, with why:
    /// skipped or uncaptured paths, and, for scope [`RestoreScope::Run`],
    /// the operator's edits (paths changed only inside non-executing
    /// windows after the target, each reason naming its windows).
    pub left_alone: Vec<LeftAlone>,
    /// Changes the restore set out to make and could not (a mode that
    /// could not be set): the workspace still differs from the target
    /// there. Empty when the restore is complete; otherwise the caller
    /// must report each one as an error (the bank undoes the rest).
    pub failed: Vec<LeftAlone>,
}

impl RestoreReport {
    /// True when every planned change was made ([`RestoreReport::failed`]
    /// is empty).
    pub fn is_complete(&self) -> bool {
        self.failed.is_empty()
    }
}

/// What to restore.
pub(crate) enum Target<'a> {
    Snapshot(&'a SnapshotId),
    Node(&'a NodeRef),
}

/// Everything a restore decides before it changes a file: the one
/// implementation of the restore rules, shared by [`restore`] and the
/// preview ([`crate::Workspace::preview_rewind`]).
pub(crate) struct Prepared {
    /// The snapshot to restore.
    pub(crate) target: SnapshotId,
    /// The boundary resolved, for `--to NODE[:ITER]`.
    pub(crate) target_label: Option<Label>,
    /// The scope applied.
    pub(crate) scope: RestoreScope,
    /// The `fail:` capture that closed an interrupted node.
    pub(crate) closed: Option<CaptureReport>,
    /// The bank.
    pub(crate) bank: CaptureReport,
    /// The target's manifest.
    pub(crate) want: Manifest,
    /// The bank's manifest (the workspace as it is).
    pub(crate) have: Manifest,
    /// What to change; its `left_alone` also holds, for scope `run`, the
    /// paths only the operator changed after the target.
    pub(crate) plan: Plan,
}

/// Resolves and checks the target, closes an interrupted node with
/// `fail:`, banks, computes the paths the scope covers and plans each one,
/// and checks every object the plan writes is present. Changes no file of
/// the workspace (it writes only the store: the `fail:` and bank captures).
///
/// # Errors
/// [`WorkspaceError::NoSuchBoundary`], [`WorkspaceError::NoSuchSnapshot`],
/// [`WorkspaceError::UnsafePath`] (a path cairn never writes, or reached
/// through a symlink), a missing object or chunk, capture errors.
pub(crate) fn prepare(
    s: &mut Session<'_>,
    target: Target<'_>,
    scope: RestoreScope,
    progress: &dyn Progress,
) -> Result<Prepared, WorkspaceError> {
    let ws = s.ws;
    // Resolve and check the target before anything is written anywhere.
    let (target_id, target_label) = match target {
        Target::Snapshot(id) => (id.clone(), None),
        Target::Node(r) => {
            let (label, id) = resolve_pre(s.index()?, r)?;
            (id, Some(label))
        }
    };
    let want = Manifest::load(&ws.manifest_path(&target_id), &target_id)?;
    let rules = ws.ignore_rules()?;
    for p in want.entries.keys() {
        if rules.is_always_excluded(p) {
            return Err(WorkspaceError::UnsafePath {
                snapshot: target_id.to_string(),
                path: p.clone(),
                reason: "cairn never writes there (git's database or the store)".into(),
            });
        }
    }

    // A node that started and never recorded its end was interrupted: close
    // it with `fail:` so its work is attributed to it, then bank.
    let closed = match s.index()?.open.as_ref().and_then(Label::node_iter).cloned() {
        Some(n) => Some(capture(s, &Label::Fail(n), progress)?),
        None => None,
    };
    let bank_label = Label::Bank(next_number(s.index()?, true));
    let bank = capture(s, &bank_label, progress)?;
    let have = Manifest::load(&ws.manifest_path(&bank.snapshot), &bank.snapshot)?;

    // Scope `run`: the paths the run changed after the target.
    let who = match scope {
        RestoreScope::Run => Some(attribute(ws, &target_id, &bank.snapshot)?),
        RestoreScope::Full => None,
    };
    let full: BTreeSet<String>;
    let paths = match &who {
        Some(who) => &who.run,
        None => {
            full = want
                .entries
                .keys()
                .chain(have.entries.keys())
                .cloned()
                .collect();
            &full
        }
    };
    let mut plan = plan(s, &want, &have, paths)?;
    // Every object to write, and every chunk of those stored as chunks.
    for w in &plan.writes {
        ws.pool().require(&w.entry.hash)?;
    }
    // What differs outside the run's paths was changed only in
    // non-executing windows: it is the operator's, and left alone.
    if let Some(who) = &who {
        let mut outside = BTreeSet::new();
        diff_entries(&want.entries, &have.entries, &mut outside);
        for p in outside.into_iter().filter(|p| !who.run.contains(p)) {
            let reason = who.reason(&p);
            plan.left_alone.push(LeftAlone { path: p, reason });
        }
    }
    Ok(Prepared {
        target: target_id,
        target_label,
        scope,
        closed,
        bank,
        want,
        have,
        plan,
    })
}

/// Prepares ([`prepare`]), then applies the plan: stage every file, then
/// change the tree.
///
/// # Errors
/// As [`prepare`] (nothing changed), and
/// [`WorkspaceError::RestoreIncomplete`] when applying failed part-way.
pub(crate) fn restore(
    s: &mut Session<'_>,
    target: Target<'_>,
    scope: RestoreScope,
    progress: &dyn Progress,
) -> Result<RestoreReport, WorkspaceError> {
    let p = prepare(s, target, scope, progress)?;
    let want_dirs: HashSet<&str> = p
        .want
        .entries
        .keys()
        .flat_map(|p| p.match_indices('/').map(move |(i, _)| &p[..i]))
        .collect();
    let done = apply(
        s.ws,
        &p.target,
        &p.bank.snapshot,
        p.plan,
        &want_dirs,
        progress,
    )?;
    Ok(RestoreReport {
        target: p.target,
        target_label: p.target_label,
        scope,
        closed: p.closed,
        bank: p.bank,
        written: done.written,
        deleted: done.deleted,
        modes: done.modes,
        dirs_removed: done.dirs_removed,
        left_alone: done.left_alone,
        failed: done.failed,
    })
}

/// Decides each path, and refuses the whole restore if any path that needs
/// a change would be reached through a symlink.
fn plan(
    s: &Session<'_>,
    want: &Manifest,
    have: &Manifest,
    paths: &BTreeSet<String>,
) -> Result<Plan, WorkspaceError> {
    let root = s.ws.root();
    let skipped: HashSet<&str> = want
        .skipped
        .iter()
        .chain(&have.skipped)
        .map(|x| x.path.as_str())
        .collect();
    let deleting: HashSet<&str> = paths
        .iter()
        .filter(|p| !want.entries.contains_key(*p) && have.entries.contains_key(*p))
        .map(String::as_str)
        .collect();
    let mut plan = Plan::default();
    let leave = |plan: &mut Plan, path: &str, reason: String| {
        plan.left_alone.push(crate::LeftAlone {
            path: path.to_owned(),
            reason,
        })
    };
    for p in paths {
        let (d, c) = (want.entries.get(p), have.entries.get(p));
        match (d, c) {
            (None, None) => continue,
            (Some(d), Some(c)) if d == c => continue,
            _ => {}
        }
        // Every directory on the way must be a real directory (or missing).
        let mut late = false;
        let mut in_the_way = None;
        for (i, _) in p.match_indices('/') {
            let a = &p[..i];
            match std::fs::symlink_metadata(root.join(a)) {
                Err(_) => break,
                Ok(m) if m.is_dir() => {}
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(WorkspaceError::UnsafePath {
                        snapshot: want.id.to_string(),
                        path: p.clone(),
                        reason: format!(
                            "`{a}` is a symbolic link, and cairn never restores through one"
                        ),
                    })
                }
                Ok(_) if deleting.contains(a) => {
                    late = true;
                    break;
                }
                Ok(_) => {
                    in_the_way = Some(a.to_owned());
                    break;
                }
            }
        }
        if skipped.contains(p.as_str()) {
            leave(
                &mut plan,
                p,
                "it was not captured (skipped), so cairn never overwrites or deletes it".into(),
            );
            continue;
        }
        if let Some(a) = in_the_way {
            leave(
                &mut plan,
                p,
                format!("`{a}` is a file, not a directory, and is not being removed"),
            );
            continue;
        }
        match (d, c) {
            (Some(d), Some(c)) if d.hash == c.hash && d.size == c.size => {
                plan.modes.push((p.clone(), d.mode));
            }
            (Some(d), Some(_)) => plan.writes.push(Write {
                late,
                ..Write::new(p, *d)
            }),
            (Some(d), None) => {
                if !late && std::fs::symlink_metadata(root.join(p)).is_ok() {
                    leave(
                        &mut plan,
                        p,
                        "something is there that the bank did not capture (excluded by the rules, or not a regular file), so cairn has no copy to put back".into(),
                    );
                } else {
                    plan.writes.push(Write {
                        late,
                        ..Write::new(p, *d)
                    });
                }
            }
            (None, _) => plan.deletes.push(p.clone()),
        }
    }
    Ok(plan)
}
