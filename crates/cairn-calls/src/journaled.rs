//! The objects `model_call` records name: kept by prune, checked by verify.
//!
//! A `model_call` names its request and response bodies by hash. The
//! response store names the bodies of the responses it can serve; a failed
//! or cut call is journaled but never stored, so the journal itself is the
//! only thing naming its bodies. Prune keeps what either names, and
//! `cairn verify` checks that every body a journal names is present and
//! hashes right.

use cairn_journal::{read_journal, Record, RecordBody};
use cairn_objects::{ManifestSource, ObjectHash, ObjectPool, SourceError};
use cairn_store::Store;

/// Every body hash a record names, with what it is (`request`, `response`).
fn named(record: &Record) -> Vec<(&'static str, &str)> {
    match &record.body {
        RecordBody::ModelCall(m) => [("request", &m.request), ("response", &m.response)]
            .into_iter()
            .filter_map(|(what, h)| h.as_deref().map(|h| (what, h)))
            .collect(),
        _ => Vec::new(),
    }
}

/// The objects `record` names besides manifests: a `model_call`'s request
/// and response bodies (nothing for any other kind). What a copy of the
/// session to another store (`cairn push`, `cairn pull`) takes along.
///
/// # Errors
/// A hash that does not parse, saying which body it is.
pub fn model_call_objects(record: &Record) -> Result<Vec<ObjectHash>, String> {
    named(record)
        .into_iter()
        .map(|(what, h)| {
            ObjectHash::parse(h).map_err(|e| format!("its {what} hash {h:?} is not a hash ({e})"))
        })
        .collect()
}

/// What is wrong with the bodies `records` name: one line each (empty when
/// every one is present and hashes right).
pub fn check_model_call_objects(store: &Store, records: &[Record]) -> Vec<String> {
    let pool = ObjectPool::at(store);
    let mut problems = Vec::new();
    for r in records {
        for (what, h) in named(r) {
            let problem = match ObjectHash::parse(h) {
                Err(e) => Some(format!("its {what} hash {h:?} is not a hash ({e})")),
                Ok(hash) => match pool.check(&hash) {
                    Ok(c) if c.ok() => None,
                    Ok(c) => Some(format!(
                        "its {what} body {hash} does not verify ({} bad part(s))",
                        c.bad.len()
                    )),
                    Err(e) => Some(format!("its {what} body {hash}: {e}")),
                },
            };
            if let Some(p) = problem {
                problems.push(format!("model_call at seq {}: {p}", r.seq));
            }
        }
    }
    problems
}

/// The bodies every journal's `model_call` records name, for prune.
#[derive(Clone, Debug)]
pub struct JournaledCalls {
    store: Store,
}

impl JournaledCalls {
    /// The journals of `store`.
    pub fn new(store: &Store) -> Self {
        JournaledCalls {
            store: store.clone(),
        }
    }
}

impl ManifestSource for JournaledCalls {
    fn name(&self) -> String {
        "journaled model calls".into()
    }

    fn referenced(&self, mark: &mut dyn FnMut(ObjectHash)) -> Result<(), SourceError> {
        for run in self.store.run_ids().map_err(|e| e.to_string())? {
            let path = self.store.journal_path(&run);
            if !path.is_file() {
                continue;
            }
            let scan = read_journal(&path, run.as_str()).map_err(|e| e.to_string())?;
            for r in &scan.records {
                for (what, h) in named(r) {
                    mark(ObjectHash::parse(h).map_err(|e| {
                        format!(
                            "session {run}: model_call at seq {}: {what} hash: {e}",
                            r.seq
                        )
                    })?);
                }
            }
        }
        Ok(())
    }
}
