//! Restore (DESIGN §5.4): bank, decide what to change, check everything, then
//! change it.

use std::collections::{BTreeSet, HashSet};

use cairn_objects::Progress;
use serde::Serialize;

use crate::apply::{apply, Plan, Write};
use crate::capture::{capture, CaptureReport};
use crate::history::{chain, next_number, resolve_pre, summaries};
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
    /// Paths that differ from the target but were not touched, with why.
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

pub(crate) fn restore(
    s: &mut Session<'_>,
    target: Target<'_>,
    scope: RestoreScope,
    progress: &dyn Progress,
) -> Result<RestoreReport, WorkspaceError> {
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

    let paths: BTreeSet<String> = match scope {
        RestoreScope::Full => want
            .entries
            .keys()
            .chain(have.entries.keys())
            .cloned()
            .collect(),
        RestoreScope::Run => run_paths(s, &target_id, &bank.snapshot)?,
    };
    let plan = plan(s, &want, &have, &paths)?;
    // Every object to write, and every chunk of those stored as chunks.
    for w in &plan.writes {
        ws.pool().require(&w.entry.hash)?;
    }
    let want_dirs: HashSet<&str> = want
        .entries
        .keys()
        .flat_map(|p| p.match_indices('/').map(move |(i, _)| &p[..i]))
        .collect();
    let done = apply(ws, &target_id, &bank.snapshot, plan, &want_dirs, progress)?;
    Ok(RestoreReport {
        target: target_id,
        target_label,
        scope,
        closed,
        bank,
        written: done.written,
        deleted: done.deleted,
        modes: done.modes,
        dirs_removed: done.dirs_removed,
        left_alone: done.left_alone,
        failed: done.failed,
    })
}

/// The paths the run changed after `pivot`: the union of the differences
/// across every interval on the chain from `pivot` to `head` that the run
/// was executing in (judged by each closing snapshot's own label).
fn run_paths(
    s: &Session<'_>,
    pivot: &SnapshotId,
    head: &SnapshotId,
) -> Result<BTreeSet<String>, WorkspaceError> {
    let ws = s.ws;
    let all = summaries(&ws.snapshots_dir())?;
    let chain = chain(&all, head)?;
    let start =
        chain
            .iter()
            .position(|x| x.id == *pivot)
            .ok_or_else(|| WorkspaceError::BrokenChain {
                snapshot: pivot.to_string(),
            })?;
    let mut out = BTreeSet::new();
    let mut prev: Option<Manifest> = None;
    for pair in chain[start..].windows(2) {
        let (a, b) = (pair[0], pair[1]);
        if !b.label.by_run() {
            prev = None;
            continue;
        }
        let before = match prev.take() {
            Some(m) if m.id == a.id => m,
            _ => Manifest::load(&ws.manifest_path(&a.id), &a.id)?,
        };
        let after = Manifest::load(&ws.manifest_path(&b.id), &b.id)?;
        diff_entries(&before.entries, &after.entries, &mut out);
        prev = Some(after);
    }
    Ok(out)
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
