//! One line of `cairn sessions`: a [`Summary`], built from the journal alone.

use cairn_journal::{read_head_record, read_tail_record, Cost, JournalError, RecordBody, Status};
use cairn_store::{RunId, Store};
use serde::Serialize;

use crate::load::load;

/// Where a fork came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ParentRef {
    /// Parent session id.
    pub id: String,
    /// Last parent record the fork shares.
    pub seq: u64,
}

/// A session as listed (the JSON object of `cairn sessions --json`, DESIGN §10).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Summary {
    /// Session id.
    pub id: String,
    /// Its name.
    pub name: Option<String>,
    /// `running` or the last terminal's reason.
    pub status: String,
    /// Creation time.
    pub created: String,
    /// Time of the last record.
    pub updated: String,
    /// Workspace root.
    pub workspace: String,
    /// Model turns.
    pub turns: u64,
    /// Records in the journal.
    pub records: u64,
    /// Chain hash of the last record, hex.
    pub tail: String,
    /// Cumulative cost.
    pub cost: Cost,
    /// Fork origin.
    pub parent: Option<ParentRef>,
    /// Whether the journal reads and verifies.
    pub valid: bool,
    /// Why it is not valid.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
}

/// Summarises run `id`. Never fails: a journal that does not read gives a
/// summary with `valid: false` and the problem.
pub fn summarize(store: &Store, id: &RunId) -> Summary {
    match quick(store, id) {
        Ok(Some(s)) => s,
        Ok(None) => full(store, id),
        Err(e) => invalid(store, id, &e),
    }
}

/// The O(1) path: the last record is a `terminal`, whose totals are cumulative.
fn quick(store: &Store, id: &RunId) -> Result<Option<Summary>, JournalError> {
    let path = store.journal_path(id);
    let Some(tail) = read_tail_record(&path)? else {
        return Ok(None);
    };
    let RecordBody::Terminal(t) = &tail.record.body else {
        return Ok(None);
    };
    let head = read_head_record(&path)?;
    let RecordBody::Meta(meta) = head.body else {
        return Ok(None);
    };
    if meta.run != id.as_str() {
        return Ok(None); // let the full read name the problem
    }
    Ok(Some(Summary {
        id: id.to_string(),
        name: meta.name.clone(),
        status: t.reason.as_str().to_owned(),
        created: meta.created.clone(),
        updated: tail.record.ts.clone(),
        workspace: meta.workspace.clone(),
        turns: t.totals.turns,
        records: tail.record.seq,
        tail: tail.hash.to_hex(),
        cost: t.totals.cost,
        parent: meta.fork.as_ref().map(|f| ParentRef {
            id: f.parent.clone(),
            seq: f.seq,
        }),
        valid: true,
        problem: None,
    }))
}

fn full(store: &Store, id: &RunId) -> Summary {
    match load(store, id) {
        Ok(l) => {
            let s = &l.state;
            Summary {
                id: id.to_string(),
                name: s.name.clone(),
                status: s.status.as_str().to_owned(),
                created: s.created.clone(),
                updated: s.updated.clone(),
                workspace: s.workspace.clone(),
                turns: s.totals.turns,
                records: s.records,
                tail: l.scan.tail.to_hex(),
                cost: s.totals.cost,
                parent: s.fork.as_ref().map(|f| ParentRef {
                    id: f.parent.clone(),
                    seq: f.seq,
                }),
                valid: true,
                problem: None,
            }
        }
        Err(e) => invalid(store, id, &e),
    }
}

fn invalid(store: &Store, id: &RunId, e: &JournalError) -> Summary {
    // Whatever the head still says, for a recognisable line.
    let head = read_head_record(&store.journal_path(id)).ok();
    let meta = head.and_then(|r| match r.body {
        RecordBody::Meta(m) => Some(m),
        _ => None,
    });
    Summary {
        id: id.to_string(),
        name: meta.as_ref().and_then(|m| m.name.clone()),
        status: Status::Running.as_str().to_owned(),
        created: meta.as_ref().map(|m| m.created.clone()).unwrap_or_default(),
        updated: String::new(),
        workspace: meta
            .as_ref()
            .map(|m| m.workspace.clone())
            .unwrap_or_default(),
        turns: 0,
        records: 0,
        tail: String::new(),
        cost: Cost::UNKNOWN,
        parent: meta.as_ref().and_then(|m| {
            m.fork.as_ref().map(|f| ParentRef {
                id: f.parent.clone(),
                seq: f.seq,
            })
        }),
        valid: false,
        problem: Some(e.to_string()),
    }
}

/// Every session in the store, newest first (by last update, then id).
///
/// # Errors
/// Only when the store's `runs/` directory cannot be read.
pub fn list(store: &Store) -> Result<Vec<Summary>, cairn_store::StoreError> {
    let mut out: Vec<Summary> = store
        .run_ids()?
        .iter()
        .filter(|id| store.journal_path(id).exists())
        .map(|id| summarize(store, id))
        .collect();
    out.sort_by(|a, b| b.updated.cmp(&a.updated).then_with(|| b.id.cmp(&a.id)));
    Ok(out)
}
