//! Removing sessions (`cairn session rm`), and what must not be orphaned.
//!
//! The policy, in the order it is checked — nothing is deleted until every
//! check has passed for every session to be removed:
//! 1. Each session is locked (a session being written is refused, the
//!    holder named) and stays locked until it is gone.
//! 2. A session that a fork pins is refused, naming the forks — a fork
//!    folds its parent's records on every resume and would be unresumable
//!    for ever — unless the forks are removed with it
//!    ([`RemoveOptions::with_forks`]), forks of forks included.
//! 3. A session that a checkpoint names is refused, naming the checkpoints:
//!    they need its records and snapshots to be restored or forked.
//! 4. A question that cannot be answered is an error, never "none": a
//!    journal whose first record cannot be read might be a fork, and an
//!    unreadable checkpoint manifest might name the session.
//!
//! Removal deletes the session's directory (records, projections,
//! workspace manifests) and makes the deletion durable; stored objects are
//! shared and stay until `cairn prune`.

use std::collections::BTreeSet;

use cairn_journal::{read_head_record, RecordBody, RunLock};
use cairn_store::{RunId, Store};

use crate::SessionError;

/// Options of [`remove`].
#[derive(Clone, Copy, Debug, Default)]
pub struct RemoveOptions {
    with_forks: bool,
}

impl RemoveOptions {
    /// The default: refuse a session that forks pin.
    pub fn new() -> Self {
        Self::default()
    }

    /// Remove the forks (and their forks) together with the session
    /// instead of refusing. Default: false.
    #[must_use]
    pub fn with_forks(mut self, yes: bool) -> Self {
        self.with_forks = yes;
        self
    }
}

/// What [`remove`] deleted: the sessions, forks first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Removed {
    /// Every session removed, deepest fork first, the one asked for last.
    pub runs: Vec<RunId>,
}

/// Removes session `id` by the policy of the module doc.
///
/// # Errors
/// [`SessionError::PinnedByForks`], [`SessionError::NamedByCheckpoints`],
/// [`SessionError::Unreadable`]; a lock held elsewhere
/// ([`cairn_journal::JournalError::Locked`]); IO errors.
pub fn remove(store: &Store, id: &RunId, options: RemoveOptions) -> Result<Removed, SessionError> {
    let mut doomed = vec![id.clone()];
    let mut locks = vec![RunLock::acquire(&store.lock_path(id), id.as_str())?];
    let forks = forks_by_parent(store)?;
    let mut i = 0;
    while i < doomed.len() {
        let children: Vec<RunId> = forks
            .iter()
            .filter(|(_, parent)| *parent == doomed[i])
            .map(|(child, _)| child.clone())
            .collect();
        if !children.is_empty() && !options.with_forks {
            return Err(SessionError::PinnedByForks {
                run: doomed[i].to_string(),
                forks: children.iter().map(ToString::to_string).collect(),
            });
        }
        for child in children {
            if !doomed.contains(&child) {
                locks.push(RunLock::acquire(&store.lock_path(&child), child.as_str())?);
                doomed.push(child);
            }
        }
        i += 1;
    }
    for run in &doomed {
        let named: Vec<String> = cairn_checkpoint::naming_run(store, run)?
            .iter()
            .map(ToString::to_string)
            .collect();
        if !named.is_empty() {
            return Err(SessionError::NamedByCheckpoints {
                run: run.to_string(),
                checkpoints: named,
            });
        }
    }
    // Deepest first: a failure part-way leaves no fork without its parent.
    doomed.reverse();
    for run in &doomed {
        let dir = store.run_dir(run);
        std::fs::remove_dir_all(&dir).map_err(|source| cairn_store::StoreError::Io {
            action: "removing",
            path: dir.clone(),
            source,
        })?;
        cairn_store::durable::fsync_dir(&store.runs_dir())?;
    }
    drop(locks);
    Ok(Removed { runs: doomed })
}

/// Every fork in the store with its parent, from the `meta` record each
/// journal begins with.
fn forks_by_parent(store: &Store) -> Result<Vec<(RunId, RunId)>, SessionError> {
    let mut out = Vec::new();
    let ids: BTreeSet<RunId> = store.run_ids()?.into_iter().collect();
    for child in ids {
        let path = store.journal_path(&child);
        if !path.is_file() {
            continue;
        }
        let head = read_head_record(&path).map_err(|e| SessionError::Unreadable {
            run: child.to_string(),
            reason: e.to_string(),
        })?;
        if let RecordBody::Meta(m) = head.body {
            if let Some(pin) = &m.fork {
                let parent = RunId::parse(&pin.parent).map_err(|e| SessionError::Unreadable {
                    run: child.to_string(),
                    reason: format!("its fork pin names an invalid parent id: {e}"),
                })?;
                out.push((child, parent));
            }
        }
    }
    Ok(out)
}
