//! Verifying a checkpoint: its manifest against the journal's record of it
//! (see `anchor`), its journal position against the journal, its snapshot
//! manifest read with cairn-workspace's one reader, every object and chunk
//! re-hashed.

use std::collections::{BTreeMap, HashSet};

use cairn_journal::{read_journal, Scan};
use cairn_objects::{ObjectHash, ObjectPool, Phase, Progress};
use cairn_store::Store;
use cairn_workspace::Manifest as SnapshotManifest;
use rayon::prelude::*;
use serde::Serialize;

use crate::anchor::Anchor;
use crate::manifest::{Checkpoint, Loaded};
use crate::{CheckpointError, CheckpointId};

/// One thing in a checkpoint that does not verify.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BadPart {
    /// The object or chunk that is damaged or missing; `None` for a problem
    /// with a manifest or the journal.
    pub object: Option<ObjectHash>,
    /// What names it: `workspace:<path>` for a workspace file, the absolute
    /// path of a named file, or `manifest` (the checkpoint manifest against
    /// the journal's record of it) / `journal` / `snapshot <id>`.
    pub file: String,
    /// True when the object is missing rather than damaged.
    pub missing: bool,
    /// What is wrong.
    pub reason: String,
}

impl std::fmt::Display for BadPart {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.object {
            Some(h) => write!(f, "object {h} of {}: {}", self.file, self.reason),
            None => write!(f, "{}: {}", self.file, self.reason),
        }
    }
}

/// What [`verify`] found (`cairn checkpoint verify CP --json`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct VerifyReport {
    /// The checkpoint.
    pub id: CheckpointId,
    /// True when everything verified, the manifest against the journal
    /// included.
    pub ok: bool,
    /// True when the run's journal holds a `checkpoint` record with this
    /// manifest's SHA-256 (false also for checkpoints journaled by a cairn
    /// that did not record it: see [`BadPart`] `manifest`).
    pub anchored: bool,
    /// The SHA-256 of the manifest's bytes, lowercase hex.
    pub manifest: String,
    /// Distinct objects and chunks re-hashed.
    pub chunks: u64,
    /// Everything that did not verify.
    pub bad: Vec<BadPart>,
}

/// The journal side of a check: the run's journal (when it reads and its
/// chain verifies), what it says of the manifest, and the problems found.
pub(crate) struct JournalCheck {
    pub(crate) scan: Option<Scan>,
    pub(crate) anchor: Option<Anchor>,
    pub(crate) bad: Vec<BadPart>,
}

impl JournalCheck {
    /// The refusal to use the checkpoint for its journal side: the anchor
    /// error, or the first journal problem. `None` when all is well.
    pub(crate) fn refusal(&self, loaded: &Loaded) -> Option<CheckpointError> {
        if let Some(e) = self.anchor.as_ref().and_then(|a| a.error(loaded)) {
            return Some(e);
        }
        self.bad.first().map(|b| CheckpointError::Damaged {
            id: loaded.cp.id.to_string(),
            count: self.bad.len(),
            first: b.to_string(),
        })
    }
}

/// Reads the run's journal (chain verified) and checks the manifest against
/// its `checkpoint` record, and the recorded position against the chain.
pub(crate) fn check_journal(store: &Store, loaded: &Loaded) -> JournalCheck {
    let cp = &loaded.cp;
    let journal_bad = |reason: String| BadPart {
        object: None,
        file: "journal".into(),
        missing: false,
        reason,
    };
    let read = cp.run_id().map_err(|e| e.to_string()).and_then(|run| {
        read_journal(&store.journal_path(&run), &cp.run).map_err(|e| e.to_string())
    });
    let scan = match read {
        Ok(s) => s,
        Err(e) => {
            return JournalCheck {
                scan: None,
                anchor: None,
                bad: vec![journal_bad(format!(
                    "the journal of session {} cannot be read, so neither the manifest nor its position can be checked: {e}",
                    cp.run
                ))],
            }
        }
    };
    let mut bad = Vec::new();
    let anchor = Anchor::find(&scan.records, loaded);
    if let Some(reason) = anchor.problem(loaded) {
        bad.push(BadPart {
            object: None,
            file: "manifest".into(),
            missing: false,
            reason,
        });
    }
    if let Some(reason) = position_problem(&scan, cp) {
        bad.push(journal_bad(reason));
    }
    JournalCheck {
        scan: Some(scan),
        anchor: Some(anchor),
        bad,
    }
}

/// Checks everything a checkpoint needs, reporting every problem rather than
/// stopping at the first:
/// 1. the manifest's bytes against the `checkpoint` record of the run's
///    journal (chain verified), which holds their SHA-256 — a manifest
///    changed since, one no record names, and one journaled by a cairn that
///    did not record the hash ("unanchored") are all reported, as `manifest`;
/// 2. the recorded journal position against the chain (`journal`);
/// 3. the workspace snapshot manifest, read with cairn-workspace's reader
///    and its path rule (`snapshot <id>`);
/// 4. every object and chunk the workspace snapshot and the named paths
///    need: each chunk re-hashed against its own name, each file reassembled
///    against its hash.
///
/// # Errors
/// The checkpoint manifest itself cannot be read
/// ([`CheckpointError::NotFound`], [`CheckpointError::ManifestDamaged`],
/// [`CheckpointError::UnsafePath`]), or an IO error prevents checking.
/// Everything else that does not verify is in [`VerifyReport::bad`].
pub fn verify(
    store: &Store,
    id: &CheckpointId,
    progress: &dyn Progress,
) -> Result<VerifyReport, CheckpointError> {
    let loaded = Checkpoint::load(store, id)?;
    let journal = check_journal(store, &loaded);
    verify_loaded(store, &loaded, &journal, progress)
}

/// [`verify`] of a manifest already read and checked against the journal.
pub(crate) fn verify_loaded(
    store: &Store,
    loaded: &Loaded,
    journal: &JournalCheck,
    progress: &dyn Progress,
) -> Result<VerifyReport, CheckpointError> {
    let cp = &loaded.cp;
    let run = cp.run_id()?;
    let mut bad = journal.bad.clone();

    // Each object once, with the first file that names it.
    let mut objects: BTreeMap<ObjectHash, String> = BTreeMap::new();
    if let Some(w) = &cp.workspace {
        match SnapshotManifest::read(store, &run, &w.snapshot) {
            Ok(m) => {
                for (p, e) in &m.entries {
                    objects
                        .entry(e.hash)
                        .or_insert_with(|| format!("workspace:{p}"));
                }
            }
            Err(e) => bad.push(BadPart {
                object: None,
                file: format!("snapshot {}", w.snapshot),
                missing: false,
                reason: e.to_string(),
            }),
        }
    }
    for p in &cp.paths {
        for e in &p.entries {
            let shown = if e.path.is_empty() {
                p.path.clone()
            } else {
                format!("{}/{}", p.path, e.path)
            };
            objects.entry(e.hash).or_insert(shown);
        }
    }

    let pool = ObjectPool::at(store);
    progress.begin(Phase::Verify, Some(objects.len() as u64));
    let checks = objects
        .par_iter()
        .map(|(h, file)| {
            let c = pool.check(h)?;
            progress.advance(Phase::Verify, 1, c.size);
            Ok((file, c))
        })
        .collect::<Result<Vec<_>, CheckpointError>>()?;
    progress.end(Phase::Verify);
    let mut seen: HashSet<ObjectHash> = HashSet::new();
    for (file, c) in checks {
        seen.insert(c.hash);
        seen.extend(c.chunks.iter().copied());
        for b in c.bad {
            bad.push(BadPart {
                object: Some(b.hash),
                file: file.clone(),
                missing: b.missing,
                reason: b.reason,
            });
        }
    }
    Ok(VerifyReport {
        id: cp.id.clone(),
        ok: bad.is_empty(),
        anchored: journal.anchor.as_ref().is_some_and(Anchor::is_anchored),
        manifest: loaded.digest.clone(),
        chunks: seen.len() as u64,
        bad,
    })
}

/// Why record `seq` of the journal does not have the recorded chain hash;
/// `None` when it does.
fn position_problem(scan: &Scan, cp: &Checkpoint) -> Option<String> {
    let seq = cp.journal.seq;
    let n = scan.records.len() as u64;
    let at = if seq == n {
        Some(scan.tail)
    } else if seq >= 1 && seq < n {
        // The record after `seq` carries h(seq) as its `prev`.
        scan.records.get(seq as usize).map(|r| r.prev)
    } else {
        None
    };
    match at {
        None => Some(format!(
            "the checkpoint stands at seq {seq}, the journal has {n} records"
        )),
        Some(h) if h != cp.journal.hash => Some(format!(
            "the journal's chain hash at seq {seq} is {h}, the checkpoint recorded {}",
            cp.journal.hash
        )),
        Some(_) => None,
    }
}
