//! Reading a run's snapshots: the chain, its intervals and windows, the
//! listing, and the iteration helpers.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

use serde::Serialize;

use crate::index::Index;
use crate::manifest::{Manifest, SnapshotId, Summary};
use crate::{Label, NodeName, NodeRef, WorkspaceError};

/// One row of `cairn rewind ID --list-snapshots`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct SnapshotInfo {
    /// The snapshot's id.
    pub id: SnapshotId,
    /// Its parent.
    pub parent: Option<SnapshotId>,
    /// The label it was captured under (never moves).
    pub label: Label,
    /// Every label it carries: its own first, then each label of the label
    /// map that points at it (a bank or a `pre:` often lands on an existing
    /// snapshot).
    pub labels: Vec<Label>,
    /// When it was captured, RFC 3339 UTC.
    pub created: String,
    /// Number of files.
    pub files: u64,
    /// Their total size.
    pub bytes: u64,
}

/// The stretch between a snapshot's parent and the snapshot, judged by the
/// snapshot's own label.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Interval {
    /// Where it starts (the parent), `None` for the first snapshot.
    pub from: Option<SnapshotId>,
    /// Where it ends.
    pub to: SnapshotId,
    /// The closing snapshot's own label.
    pub label: Label,
    /// True when the run was executing during it, so what changed is the
    /// run's work; false for a non-executing window (closed by `resume:`, a
    /// `bank:` or an operator's capture).
    pub by_run: bool,
}

/// The manifests in `dir`: every `<snapshot-id>.json`, with its path.
/// Anything else (a temporary of an interrupted write) is not a manifest; a
/// missing directory holds none.
pub(crate) fn manifest_files(dir: &Path) -> Result<Vec<(SnapshotId, PathBuf)>, WorkspaceError> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(WorkspaceError::io("listing", dir, e)),
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| WorkspaceError::io("listing", dir, e))?;
        let name = entry.file_name();
        if let Some(id) = name
            .to_str()
            .and_then(|n| n.strip_suffix(".json"))
            .and_then(|stem| SnapshotId::parse(stem).ok())
        {
            out.push((id, entry.path()));
        }
    }
    Ok(out)
}

/// Summaries oldest first (by creation time, then id).
pub(crate) fn sort_oldest_first(all: &mut [Summary]) {
    all.sort_by(|a, b| (&a.created, &a.id).cmp(&(&b.created, &b.id)));
}

/// Every manifest's summary, oldest first.
pub(crate) fn summaries(dir: &Path) -> Result<Vec<Summary>, WorkspaceError> {
    let mut out = Vec::new();
    for (id, path) in manifest_files(dir)? {
        let s = Manifest::load_summary(&path)?;
        if s.id != id {
            return Err(WorkspaceError::ManifestDamaged {
                path,
                reason: format!("it names itself {}", s.id),
            });
        }
        out.push(s);
    }
    sort_oldest_first(&mut out);
    Ok(out)
}

/// The chain from the first snapshot to `head`, following parents.
pub(crate) fn chain<'a>(
    all: &'a [Summary],
    head: &SnapshotId,
) -> Result<Vec<&'a Summary>, WorkspaceError> {
    let by_id: HashMap<&SnapshotId, &Summary> = all.iter().map(|s| (&s.id, s)).collect();
    let mut out = Vec::new();
    let mut cur = Some(head);
    while let Some(id) = cur {
        let s = by_id.get(id).ok_or_else(|| WorkspaceError::BrokenChain {
            snapshot: id.to_string(),
        })?;
        if out.len() > all.len() {
            return Err(WorkspaceError::BrokenChain {
                snapshot: id.to_string(),
            });
        }
        out.push(*s);
        cur = s.parent.as_ref();
    }
    out.reverse();
    Ok(out)
}

/// The intervals along a chain, oldest first.
pub(crate) fn intervals(chain: &[&Summary]) -> Vec<Interval> {
    chain
        .iter()
        .map(|s| Interval {
            from: s.parent.clone(),
            to: s.id.clone(),
            label: s.label.clone(),
            by_run: s.label.by_run(),
        })
        .collect()
}

/// The listing, newest first.
pub(crate) fn list(all: &[Summary], index: &Index) -> Vec<SnapshotInfo> {
    let mut extra: BTreeMap<&SnapshotId, Vec<Label>> = BTreeMap::new();
    for (label, id) in &index.labels {
        extra.entry(id).or_default().push(label.clone());
    }
    all.iter()
        .rev()
        .map(|s| {
            let mut labels = vec![s.label.clone()];
            for l in extra.get(&s.id).into_iter().flatten() {
                if *l != s.label {
                    labels.push(l.clone());
                }
            }
            SnapshotInfo {
                id: s.id.clone(),
                parent: s.parent.clone(),
                label: s.label.clone(),
                labels,
                created: s.created.clone(),
                files: s.files,
                bytes: s.bytes,
            }
        })
        .collect()
}

// Every label ever used is a key of the label map: a capture inserts its own
// label, and labels are re-pointed, never removed (a rebuilt index inserts
// each snapshot's own label). So numbering needs no manifest.

/// The next iteration of `node`: one more than any seen, from 1.
pub(crate) fn next_iteration(index: &Index, node: &NodeName) -> u32 {
    index
        .labels
        .keys()
        .filter_map(Label::node_iter)
        .filter(|n| n.node == *node)
        .map(|n| n.iter)
        .max()
        .map_or(1, |m| m.saturating_add(1))
}

/// The next number for `bank:` (`bank = true`) or `snap:` labels.
pub(crate) fn next_number(index: &Index, bank: bool) -> u32 {
    index
        .labels
        .keys()
        .filter_map(|l| match (l, bank) {
            (Label::Bank(n), true) | (Label::Snap(n), false) => Some(*n),
            _ => None,
        })
        .max()
        .map_or(1, |m| m.saturating_add(1))
}

/// The `pre:` label of `to` and the snapshot it points at; without an
/// iteration, the node's latest iteration that has one.
pub(crate) fn resolve_pre(
    index: &Index,
    to: &NodeRef,
) -> Result<(Label, SnapshotId), WorkspaceError> {
    let found = index
        .labels
        .iter()
        .filter(|(l, _)| match l {
            Label::Pre(n) => n.node == to.node && to.iter.is_none_or(|i| i == n.iter),
            _ => false,
        })
        .max_by_key(|(l, _)| l.node_iter().map_or(0, |n| n.iter));
    match found {
        Some((l, id)) => Ok((l.clone(), id.clone())),
        None => Err(WorkspaceError::NoSuchBoundary {
            node: to.to_string(),
        }),
    }
}
