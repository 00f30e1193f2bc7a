//! Verifying a checkpoint: every object and chunk re-hashed, the snapshot
//! manifest read, the journal position checked against the journal.

use std::collections::{BTreeMap, HashSet};

use cairn_journal::read_journal;
use cairn_objects::{ObjectHash, ObjectPool, Phase, Progress};
use cairn_store::Store;
use rayon::prelude::*;
use serde::Serialize;

use crate::manifest::{load_snapshot, Checkpoint};
use crate::{CheckpointError, CheckpointId};

/// One thing in a checkpoint that does not verify.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BadPart {
    /// The object or chunk that is damaged or missing; `None` for a problem
    /// with a manifest or the journal.
    pub object: Option<ObjectHash>,
    /// What names it: `workspace:<path>` for a workspace file, the absolute
    /// path of a named file, or `journal` / `snapshot <id>`.
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
    /// True when everything verified.
    pub ok: bool,
    /// Distinct objects and chunks re-hashed.
    pub chunks: u64,
    /// Everything that did not verify.
    pub bad: Vec<BadPart>,
}

/// Re-reads every object and chunk the checkpoint needs (its workspace
/// snapshot's files and its named paths' files, each chunk against its own
/// hash and each file reassembled against its hash), reads its snapshot
/// manifest, and checks its journal position against the run's journal.
/// Reports every problem rather than stopping at the first.
///
/// # Errors
/// The checkpoint manifest itself cannot be read
/// ([`CheckpointError::NotFound`], [`CheckpointError::ManifestDamaged`]), or
/// an IO error prevents checking. Damaged or missing objects are not errors:
/// they are in [`VerifyReport::bad`].
pub fn verify(
    store: &Store,
    id: &CheckpointId,
    progress: &dyn Progress,
) -> Result<VerifyReport, CheckpointError> {
    let cp = Checkpoint::load(store, id)?;
    let run = cp.run_id()?;
    let mut bad = Vec::new();
    if let Some(b) = check_journal(store, &cp) {
        bad.push(b);
    }

    // Each object once, with the first file that names it.
    let mut objects: BTreeMap<ObjectHash, String> = BTreeMap::new();
    if let Some(w) = &cp.workspace {
        match load_snapshot(store, &run, &w.snapshot) {
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
        id: cp.id,
        ok: bad.is_empty(),
        chunks: seen.len() as u64,
        bad,
    })
}

/// Checks that record `seq` of the run's journal has the recorded chain hash.
fn check_journal(store: &Store, cp: &Checkpoint) -> Option<BadPart> {
    let bad = |reason: String| {
        Some(BadPart {
            object: None,
            file: "journal".into(),
            missing: false,
            reason,
        })
    };
    let scan = match read_journal(&store.journal_path(&cp.run_id().ok()?), &cp.run) {
        Ok(s) => s,
        Err(e) => {
            return bad(format!(
                "the journal of session {} cannot be read: {e}",
                cp.run
            ))
        }
    };
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
        None => bad(format!(
            "the checkpoint stands at seq {seq}, the journal has {n} records"
        )),
        Some(h) if h != cp.journal.hash => bad(format!(
            "the journal's chain hash at seq {seq} is {h}, the checkpoint recorded {}",
            cp.journal.hash
        )),
        Some(_) => None,
    }
}
