//! Removing sessions (`cairn session rm`), and what must not be orphaned.
//!
//! The policy, in the order it is checked — nothing is deleted until every
//! check has passed for every session to be removed:
//! 1. The lineage lock is taken exclusively (`lineage_lock.rs`): no fork
//!    starts or is under way until the removal is done, so the forks found
//!    in step 3 are all there are.
//! 2. Each session is locked (a session being written is refused, the
//!    holder named) and stays locked until it is gone.
//! 3. A session that a fork pins is refused, naming the forks — a fork
//!    folds its parent's records on every resume and would be unresumable
//!    for ever — unless the forks are removed with it
//!    ([`RemoveOptions::with_forks`]), forks of forks included.
//! 4. A session that a checkpoint names is refused, naming the checkpoints:
//!    they need its records and snapshots to be restored or forked.
//! 5. A question that cannot be answered is an error, never "none": a
//!    journal whose first record cannot be read might be a fork, and an
//!    unreadable checkpoint manifest might name the session.
//!
//! # The order of deletion, and what a failure or crash leaves
//! Sessions go deepest fork first, so no failure leaves a fork without its
//! parent. For each:
//! 1. what it owns outside its directory is removed, durably: its stored
//!    model responses ([`cairn_calls::ResponseStore`]: they hold its
//!    prompts), whether the gateway or cairn's own loop bought them;
//! 2. its directory `runs/<id>` is renamed to `runs/.removing-<id>`
//!    ([`Store::removing_dir`]) and `runs/` fsynced: from here on no reader
//!    sees a session (the name is not a run id), and nothing can fork it;
//! 3. that directory is deleted (records, projections, workspace
//!    manifests) and `runs/` fsynced.
//!
//! A failure or crash in step 1 leaves the session whole, listed and
//! resumable (some of its stored responses may be gone: a resume buys those
//! calls again); `rm` again removes the rest. Step 2 happens or not. A
//! failure or crash in step 3 leaves `runs/.removing-<id>`: the next `rm`
//! of that id finishes it, and every removal first finishes every such
//! leftover, so no prompt stays in the store for ever. Stored objects are
//! shared and stay until `cairn prune` (which no longer counts a removed
//! session's manifests or responses).

use std::collections::BTreeSet;

use cairn_journal::{read_head_record, JournalError, RecordBody, RunLock};
use cairn_store::{RunId, Store, StoreError, REMOVING_PREFIX};

use cairn_calls::ResponseStore;

use crate::lineage_lock::LineageLock;
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

/// What [`remove`] deleted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Removed {
    /// Every session removed, deepest fork first, the one asked for last.
    pub runs: Vec<RunId>,
    /// How many stored model responses of the removed sessions went.
    pub responses: usize,
    /// Sessions whose earlier removal had stopped part-way (a
    /// `runs/.removing-<id>` directory) and is now finished.
    pub finished: Vec<RunId>,
}

/// Removes session `id` and its stored model responses, by the policy and in
/// the order of the module doc. A session whose earlier removal stopped
/// part-way is finished.
///
/// # Errors
/// [`JournalError::NotFound`] when there is no such session (nor a
/// removal of it to finish); [`SessionError::PinnedByForks`],
/// [`SessionError::NamedByCheckpoints`], [`SessionError::Unreadable`]; a
/// lock held elsewhere ([`JournalError::Locked`]);
/// [`SessionError::StoredResponses`] when they cannot be removed (the session is
/// then whole); IO errors.
pub fn remove(store: &Store, id: &RunId, options: RemoveOptions) -> Result<Removed, SessionError> {
    let _lineage = LineageLock::exclusive(store)?;
    let responses = ResponseStore::new(store);
    let finished = finish_leftovers(store, &responses)?;
    if !store.run_dir(id).is_dir() {
        if finished.contains(id) {
            return Ok(Removed {
                runs: vec![id.clone()],
                responses: 0,
                finished,
            });
        }
        return Err(JournalError::NotFound {
            run: id.to_string(),
        }
        .into());
    }
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
    let mut removed_responses = 0;
    for run in &doomed {
        removed_responses += remove_responses(&responses, run)?;
        let (from, to) = (store.run_dir(run), store.removing_dir(run));
        std::fs::rename(&from, &to).map_err(|source| StoreError::Io {
            action: "moving aside for removal",
            path: from.clone(),
            source,
        })?;
        cairn_store::durable::fsync_dir(&store.runs_dir())?;
        delete(store, &to)?;
    }
    drop(locks);
    Ok(Removed {
        runs: doomed,
        responses: removed_responses,
        finished,
    })
}

/// Step 1 of the removal of `run`.
fn remove_responses(responses: &ResponseStore, run: &RunId) -> Result<usize, SessionError> {
    responses
        .remove_run(run)
        .map_err(|source| SessionError::StoredResponses {
            run: run.to_string(),
            source,
        })
}

/// Deletes a directory moved aside by step 2, then makes that durable.
fn delete(store: &Store, dir: &std::path::Path) -> Result<(), SessionError> {
    match std::fs::remove_dir_all(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(StoreError::Io {
                action: "removing",
                path: dir.to_path_buf(),
                source,
            }
            .into())
        }
    }
    cairn_store::durable::fsync_dir(&store.runs_dir())?;
    Ok(())
}

/// Finishes every removal that stopped after step 2: the stored responses of each
/// (again: a crash may have come before step 1 was durable), then its
/// directory. Returns their sessions.
fn finish_leftovers(store: &Store, responses: &ResponseStore) -> Result<Vec<RunId>, SessionError> {
    let runs = store.runs_dir();
    let entries = match std::fs::read_dir(&runs) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(StoreError::Io {
                action: "reading",
                path: runs,
                source,
            }
            .into())
        }
    };
    let mut out = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|source| StoreError::Io {
            action: "reading",
            path: runs.clone(),
            source,
        })?;
        let name = entry.file_name();
        let Some(run) = name
            .to_str()
            .and_then(|n| n.strip_prefix(REMOVING_PREFIX))
            .and_then(|n| RunId::parse(n).ok())
        else {
            continue;
        };
        remove_responses(responses, &run)?;
        delete(store, &store.removing_dir(&run))?;
        out.push(run);
    }
    Ok(out)
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
