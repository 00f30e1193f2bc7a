//! Who changed what (DESIGN §5.3): the paths the run changed along a chain
//! of snapshots, and the non-executing windows every other change came
//! from.
//!
//! Invariants:
//! - Each interval (a snapshot's parent to the snapshot) is judged by the
//!   closing snapshot's own label ([`crate::Label::by_run`]), never by the
//!   label map.
//! - The intervals from `pivot` to `head` cover every difference between
//!   the two: a path that differs between them changed in at least one of
//!   the intervals, so a path outside [`Attribution::run`] that differs is
//!   in [`Attribution::windows`].
//! - Nothing is written; only manifests are read.

use std::collections::{BTreeMap, BTreeSet};

use crate::history::{chain, summaries};
use crate::manifest::{diff_entries, Manifest, SnapshotId};
use crate::workspace::Workspace;
use crate::{Label, WorkspaceError};

/// A non-executing window a path changed in: the own labels of the
/// snapshots that open and close it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Window {
    /// The own label of the snapshot the window starts at.
    pub(crate) open: Label,
    /// The own label of the snapshot that closes it (`resume:`, `bank:`,
    /// an operator's capture).
    pub(crate) close: Label,
}

/// The changes along a chain, split by author.
#[derive(Debug, Default)]
pub(crate) struct Attribution {
    /// Every path that differs across some interval the run was executing
    /// in (the `run` restore scope).
    pub(crate) run: BTreeSet<String>,
    /// Every path that differs across some non-executing window, with each
    /// window it changed in, oldest first.
    pub(crate) windows: BTreeMap<String, Vec<Window>>,
}

impl Attribution {
    /// Why `path`, changed only in non-executing windows, is left alone by
    /// a run-scoped restore.
    pub(crate) fn reason(&self, path: &str) -> String {
        let shown: Vec<String> = self
            .windows
            .get(path)
            .into_iter()
            .flatten()
            .map(|w| format!("between {} and {}", w.open, w.close))
            .collect();
        if shown.is_empty() {
            // Not reachable for a path that differs (see the module's
            // invariants), but never an empty reason.
            return "the run did not change it, so it is left alone".into();
        }
        format!(
            "changed outside the session ({}), so it is yours and is left alone",
            shown.join("; ")
        )
    }
}

/// Splits the changes on the chain from `pivot` to `head` by author.
///
/// # Errors
/// [`WorkspaceError::BrokenChain`] when `pivot` is not on the chain that
/// ends at `head` (or the chain is broken); a manifest that cannot be read.
pub(crate) fn attribute(
    ws: &Workspace,
    pivot: &SnapshotId,
    head: &SnapshotId,
) -> Result<Attribution, WorkspaceError> {
    let all = summaries(&ws.snapshots_dir())?;
    let chain = chain(&all, head)?;
    let start =
        chain
            .iter()
            .position(|x| x.id == *pivot)
            .ok_or_else(|| WorkspaceError::BrokenChain {
                snapshot: pivot.to_string(),
            })?;
    let mut out = Attribution::default();
    let mut prev: Option<Manifest> = None;
    let mut changed = BTreeSet::new();
    for pair in chain[start..].windows(2) {
        let (a, b) = (pair[0], pair[1]);
        let before = match prev.take() {
            Some(m) if m.id == a.id => m,
            _ => Manifest::load(&ws.manifest_path(&a.id), &a.id)?,
        };
        let after = Manifest::load(&ws.manifest_path(&b.id), &b.id)?;
        if b.label.by_run() {
            diff_entries(&before.entries, &after.entries, &mut out.run);
        } else {
            changed.clear();
            diff_entries(&before.entries, &after.entries, &mut changed);
            for p in &changed {
                out.windows.entry(p.clone()).or_default().push(Window {
                    open: a.label.clone(),
                    close: b.label.clone(),
                });
            }
        }
        prev = Some(after);
    }
    Ok(out)
}
