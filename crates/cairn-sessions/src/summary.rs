//! One line of `cairn sessions`: a [`Summary`], from a projection the
//! journal still vouches for, or rebuilt from the verified record.

use std::collections::HashMap;

use cairn_journal::{
    read_ends, read_ends_of, read_head, Cost, CostState, Ends, RecordBody, RunState,
};
use cairn_store::{RunId, RunsDir, Store};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};

use crate::fork::{check_lineage, Pin, ReceiptFault};
use crate::load::load;
use crate::projection::{
    journal_stat, read_meta, update_index, write_meta, Binding, IndexBytes, IndexEntry, Projection,
    Vouched,
};
use crate::SessionError;

/// Where a fork came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParentRef {
    /// Parent session id.
    pub id: String,
    /// Last parent record the fork shares.
    pub seq: u64,
}

/// A session as listed (the JSON object of `cairn sessions --json`, DESIGN §10).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Session id.
    pub id: String,
    /// Its name.
    pub name: Option<String>,
    /// The last terminal's reason; `running` when the journal ends without
    /// one and a writer holds it; `interrupted` when it ends without one and
    /// no writer holds it (the writer crashed or was killed: resume it).
    pub status: String,
    /// Creation time.
    pub created: String,
    /// Time of the last record.
    pub updated: String,
    /// Workspace root.
    pub workspace: String,
    /// Model turns (a fork counts the turns it inherited).
    pub turns: u64,
    /// Records in the session's own journal.
    pub records: u64,
    /// The size of its journal in bytes (a fork's own records only).
    #[serde(default)]
    pub bytes: u64,
    /// Chain hash of the last record, hex.
    pub tail: String,
    /// Cumulative cost.
    pub cost: Cost,
    /// Fork origin.
    pub parent: Option<ParentRef>,
    /// Whether the journal (and a fork's pinned ancestry) verifies.
    pub valid: bool,
    /// Why it is not valid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub problem: Option<String>,
    /// The first seq that does not verify, when known.
    #[serde(skip)]
    pub first_bad_seq: Option<u64>,
}

impl Summary {
    /// The summary of a folded run.
    pub fn from_state(id: &RunId, state: &RunState, records: u64, tail: &str) -> Summary {
        Summary {
            id: id.to_string(),
            name: state.name.clone().map(|n| bounded(&n, 200)),
            status: state.status.as_str().to_owned(),
            created: state.created.clone(),
            updated: state.updated.clone(),
            workspace: state.workspace.clone(),
            turns: state.totals.turns,
            records,
            bytes: 0,
            tail: tail.to_owned(),
            cost: state.totals.cost,
            parent: state.fork.as_ref().map(|f| ParentRef {
                id: f.parent.clone(),
                seq: f.seq,
            }),
            valid: true,
            problem: None,
            first_bad_seq: None,
        }
    }

    fn invalid(store: &Store, id: &RunId, e: &SessionError) -> Summary {
        let head = cairn_journal::read_head_record(&store.journal_path(id)).ok();
        let meta = head.and_then(|r| match r.body {
            RecordBody::Meta(m) => Some(m),
            _ => None,
        });
        let first_bad_seq = match e {
            SessionError::Journal(cairn_journal::JournalError::Damaged { seq, .. }) => Some(*seq),
            _ => None,
        };
        Summary {
            id: id.to_string(),
            name: meta.as_ref().and_then(|m| m.name.clone()),
            status: "running".into(),
            created: meta.as_ref().map(|m| m.created.clone()).unwrap_or_default(),
            updated: String::new(),
            workspace: meta
                .as_ref()
                .map(|m| m.workspace.clone())
                .unwrap_or_default(),
            turns: 0,
            records: 0,
            bytes: 0,
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
            first_bad_seq,
        }
    }
}

fn bounded(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

/// A summary with the receipt it was checked against.
struct Listed {
    summary: Summary,
    receipt: Vec<Pin>,
    /// A projection to persist, when this one was rebuilt (boxed: a listing
    /// holds ten thousand of these, mostly without one).
    rebuilt: Option<Box<Projection>>,
}

/// Uses a projection when the journal still vouches for it: same length and
/// mtime, its last line carries the recorded seq and tail hash, and its
/// first line hashes to the recorded `h(1)`. Only what the record attests
/// decides anything (see the projection module):
/// 1. name, creation time, workspace and fork origin come from the `meta`
///    line, checked against `h(1)`;
/// 2. status, turns and cost come from the last terminal, found by walking
///    back from the tail through linked lines over bookkeeping; a session
///    whose last record of work follows its last terminal is `running`;
/// 3. validity is never read from the projection: the receipt must follow
///    the forks' `meta` pins and every pinned line must still match;
/// 4. the projection's own figures serve only an honestly unknown cost of a
///    running session, and must agree with the terminal's otherwise.
fn trust(store: &Store, id: &RunId, ends: Ends, v: Vouched) -> Option<Listed> {
    let b = &v.binding;
    let last = ends.tail.last()?;
    if ends.len != b.len
        || ends.mtime_ns != b.mtime_ns
        || last.seq != b.records
        || ends.tail.hash != b.tail
        || ends.head.hash != b.head
    {
        return None;
    }
    let status = ends.tail.status().as_str().to_owned();
    let updated = last.ts.clone();
    let RecordBody::Meta(meta) = ends.head.record.body else {
        return None;
    };
    let mut s = Summary {
        id: id.to_string(),
        name: meta.name.as_deref().map(|n| bounded(n, 200)),
        status,
        created: meta.created,
        updated,
        workspace: meta.workspace,
        turns: v.turns,
        records: b.records,
        bytes: ends.len,
        tail: b.tail.to_hex(),
        cost: v.cost,
        parent: meta.fork.as_ref().map(|f| ParentRef {
            id: f.parent.clone(),
            seq: f.seq,
        }),
        valid: true,
        problem: None,
        first_bad_seq: None,
    };
    match ends.tail.terminal() {
        Some(t) => {
            // The projection was folded at this binding; figures that
            // disagree with the record mean it is not to be believed.
            if v.turns != t.totals.turns || v.cost.state != t.totals.cost.state {
                return None;
            }
            s.turns = t.totals.turns;
            s.cost = t.totals.cost;
        }
        // Only an honestly unknown cost may be served without a replay.
        None if s.cost.state == CostState::Unknown => {}
        // The projection is current; only the cost needs the record.
        None => {
            let mut l = rebuild(store, id);
            l.rebuilt = None;
            return Some(l);
        }
    }
    match check_lineage(store, meta.fork.as_ref(), &v.receipt) {
        Ok(()) => {}
        Err(ReceiptFault::Unusable) => return None,
        Err(ReceiptFault::Broken(pin, why)) => {
            s.valid = false;
            s.problem = Some(format!(
                "its pinned prefix of {} (seq {}) is no longer intact: {why}",
                pin.run, pin.seq
            ));
        }
    }
    Some(Listed {
        summary: s,
        receipt: v.receipt,
        rebuilt: None,
    })
}

/// Rebuilds a summary from the verified record.
fn rebuild(store: &Store, id: &RunId) -> Listed {
    let path = store.journal_path(id);
    let before = journal_stat(&path).ok();
    match load(store, id) {
        Ok(l) => {
            let records = l.scan.records.len() as u64;
            let tail = l.scan.tail.to_hex();
            // h(1): what record 2 states, or the tail when there is no record 2.
            let head = l
                .scan
                .records
                .get(1)
                .map_or(l.scan.tail, |r| r.prev)
                .to_hex();
            let mut summary = Summary::from_state(id, &l.state, records, &tail);
            summary.bytes = before.map_or(0, |b| b.0);
            // Bind to what was read; if the file moved meanwhile, the next
            // reader sees a mismatch and rebuilds again. A running writer's
            // preallocated zeros are no torn record: bound with them.
            let after = journal_stat(&path).ok();
            let rebuilt = match (before, after) {
                (Some(b), Some(a)) if a == b && l.scan.torn.is_none_or(|t| t.zeros) => {
                    Some(Box::new(Projection {
                        binding: Binding {
                            len: a.0,
                            mtime_ns: a.1,
                            records,
                            tail,
                            head,
                        },
                        summary: summary.clone(),
                        receipt: l.receipt.clone(),
                    }))
                }
                _ => None,
            };
            Listed {
                summary,
                receipt: l.receipt,
                rebuilt,
            }
        }
        Err(e) => Listed {
            summary: Summary::invalid(store, id, &e),
            receipt: Vec::new(),
            rebuilt: None,
        },
    }
}

/// The listing of one session, or `None` when it has no journal (a run
/// directory being created or removed). `entry` is its line of the index;
/// without one, its `meta.json` is tried. `runs`, when given, is where its
/// journal is opened (a listing of many holds `runs/` open).
fn listed(
    store: &Store,
    runs: Option<&RunsDir>,
    id: &RunId,
    entry: Option<IndexEntry<'_>>,
) -> Option<Listed> {
    let vouched = entry
        .and_then(IndexEntry::vouched)
        .or_else(|| read_meta(store, id).as_ref().and_then(Vouched::of));
    let path = store.journal_path(id);
    if let Some(v) = vouched {
        let ends = match runs {
            Some(runs) => runs
                .open_journal(id)
                .ok()
                .and_then(|f| read_ends_of(&f, &path, id.as_str()).ok().flatten()),
            None => read_ends(&path, id.as_str()).ok().flatten(),
        };
        if let Some(l) = ends.and_then(|ends| trust(store, id, ends, v)) {
            return Some(l);
        }
    }
    path.exists().then(|| rebuild(store, id))
}

/// Marks forks invalid whose ancestors are missing or damaged at or before
/// the pinned seq.
fn propagate(all: &mut [Option<Listed>]) {
    if all.iter().flatten().all(|l| l.receipt.is_empty()) {
        return; // no forks
    }
    let by_id: HashMap<&str, &Summary> = all
        .iter()
        .flatten()
        .map(|l| (l.summary.id.as_str(), &l.summary))
        .collect();
    let verdicts: Vec<(usize, String)> = all
        .iter()
        .enumerate()
        .filter_map(|(i, l)| Some((i, l.as_ref()?)))
        .filter(|(_, l)| l.summary.valid)
        .filter_map(|(i, l)| {
            l.receipt
                .iter()
                .find_map(|pin| match by_id.get(pin.run.as_str()) {
                    None => Some((i, format!("its parent {} is gone", pin.run))),
                    Some(a) if !a.valid && a.first_bad_seq.is_none_or(|b| b <= pin.seq) => Some((
                        i,
                        format!(
                            "its ancestor {} does not verify within the pinned prefix (seq {})",
                            pin.run, pin.seq
                        ),
                    )),
                    _ => None,
                })
        })
        .collect();
    for (i, why) in verdicts {
        if let Some(l) = &mut all[i] {
            l.summary.valid = false;
            l.summary.problem = Some(why);
        }
    }
}

/// A journal that ends without a terminal is `running` only while a writer
/// holds its lock; when none does, its writer is gone (a crash, a kill -9)
/// and the session is listed `interrupted`, so a crash shows at a glance
/// (DESIGN §16). The projections keep what the record says (`running`):
/// liveness is asked at each listing, never stored. When the lock cannot be
/// asked, the record's word stands. A VM session (one with a machine
/// directory) holds no writer lock while its guest runs: its liveness is the
/// machine's, and `cairn vm` ends it with a terminal when the guest is
/// stopped or found gone (DESIGN §13).
fn probe_writer(store: &Store, s: &mut Summary) {
    if s.status != "running" {
        return;
    }
    if let Ok(id) = RunId::parse(&s.id) {
        if store.machine_dir(&id).is_dir() {
            return;
        }
        if cairn_journal::writer_alive(&store.lock_path(&id)) == Some(false) {
            s.status = "interrupted".into();
        }
    }
}

fn persist(store: &Store, all: &[Option<Listed>]) {
    let mut fresh = Vec::new();
    for l in all.iter().flatten() {
        if let (Some(p), Ok(id)) = (&l.rebuilt, RunId::parse(&l.summary.id)) {
            // Best effort: a projection that is not written is rebuilt later.
            let _ = write_meta(store, &id, p);
            fresh.push((id, Projection::clone(p)));
        }
    }
    let _ = update_index(store, &fresh);
}

/// Summarises run `id` (and checks a fork's ancestors). Never fails: a
/// session that does not verify gets `valid: false` and the problem. Reads
/// each session's own `meta.json`, not the store's index, so it costs the
/// same in a store of ten sessions or ten thousand.
pub fn summarize(store: &Store, id: &RunId) -> Summary {
    let not_found = || {
        Summary::invalid(
            store,
            id,
            &SessionError::Journal(cairn_journal::JournalError::NotFound {
                run: id.to_string(),
            }),
        )
    };
    let Some(me) = listed(store, None, id, None) else {
        return not_found();
    };
    let mut all: Vec<Option<Listed>> = Vec::with_capacity(me.receipt.len() + 1);
    for pin in &me.receipt {
        let seen = all.iter().flatten().any(|l| l.summary.id == pin.run);
        if pin.run == id.as_str() || seen {
            continue;
        }
        if let Ok(aid) = RunId::parse(&pin.run) {
            all.push(listed(store, None, &aid, None));
        }
    }
    all.push(Some(me));
    propagate(&mut all);
    persist(store, &all);
    let Some(Some(mut summary)) = all.pop().map(|l| l.map(|l| l.summary)) else {
        return not_found();
    };
    probe_writer(store, &mut summary);
    summary
}

/// Every session in the store, newest first (by last update, then id).
/// Projections are used where the journal still vouches for them; the rest
/// are rebuilt from the record and written back.
///
/// # Errors
/// Only when the store's `runs/` directory cannot be read.
pub fn list(store: &Store) -> Result<Vec<Summary>, cairn_store::StoreError> {
    // `runs/` is read on a thread of its own while the index is read and
    // keyed on rayon's: the directory's read is mostly the kernel's, and
    // keying the index is mostly ours, so neither waits for the other.
    std::thread::scope(|s| {
        let dir = s.spawn(|| (store.run_ids(), store.open_runs().ok()));
        let bytes = IndexBytes::read(store);
        let index = bytes.entries();
        let (ids, runs) = dir
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        Ok(list_these(store, ids?, runs.as_ref(), &index))
    })
}

/// [`list`] of `ids`, the run directories found, given the index's lines
/// and `runs/` held open.
fn list_these(
    store: &Store,
    ids: Vec<RunId>,
    runs: Option<&RunsDir>,
    index: &HashMap<&str, IndexEntry<'_>>,
) -> Vec<Summary> {
    let work: Vec<(RunId, Option<IndexEntry<'_>>)> = ids
        .into_iter()
        .map(|id| {
            let e = index.get(id.as_str()).copied();
            (id, e)
        })
        .collect();
    // Each session is checked on its own. Rayon's work stealing spreads them
    // over the cores by what they cost, not by count: a share of sessions
    // that must be rebuilt from the record does not hold up the rest. The
    // results are written in place, in order, into one vector sized up
    // front, and stay there until each is moved once into the order listed:
    // ten thousand summaries are megabytes, and every copy of them is memory
    // the kernel must first clear.
    let mut all: Vec<Option<Listed>> = Vec::with_capacity(work.len());
    work.into_par_iter()
        .with_min_len(16)
        .map(|(id, p)| listed(store, runs, &id, p))
        .collect_into_vec(&mut all);
    propagate(&mut all);
    persist(store, &all);
    // Newest first (by last update, then id), the order found on indices.
    let mut order: Vec<usize> = (0..all.len()).filter(|&i| all[i].is_some()).collect();
    let key = |i: usize| all[i].as_ref().map(|l| (&l.summary.updated, &l.summary.id));
    order.par_sort_unstable_by(|&a, &b| key(b).cmp(&key(a)));
    let mut out = Vec::with_capacity(order.len());
    for i in order {
        if let Some(mut l) = all[i].take() {
            probe_writer(store, &mut l.summary);
            out.push(l.summary);
        }
    }
    out
}

/// Refreshes a run's projections from its writer's state (at turn and
/// terminal boundaries). Best effort: errors are returned for logging only.
///
/// # Errors
/// IO errors writing `meta.json` or the index.
pub fn refresh(
    store: &Store,
    id: &RunId,
    state: &RunState,
    tail: &str,
    receipt: &[Pin],
) -> Result<(), SessionError> {
    let (len, mtime_ns) =
        journal_stat(&store.journal_path(id)).map_err(|e| cairn_store::StoreError::Io {
            action: "reading metadata of",
            path: store.journal_path(id),
            source: e,
        })?;
    // The writer's own first line; a reader checks it against this hash.
    let head = read_head(&store.journal_path(id))?.hash.to_hex();
    let mut summary = Summary::from_state(id, state, state.records, tail);
    summary.bytes = len;
    let p = Projection {
        binding: Binding {
            len,
            mtime_ns,
            records: state.records,
            tail: tail.to_owned(),
            head,
        },
        summary,
        receipt: receipt.to_vec(),
    };
    write_meta(store, id, &p)?;
    update_index(store, &[(id.clone(), p)]).map_err(|e| cairn_store::StoreError::Io {
        action: "updating",
        path: store.sessions_index(),
        source: e,
    })?;
    Ok(())
}

/// Rebuilds every projection from the verified record (`cairn reindex`).
/// Returns (sessions indexed, sessions that do not verify).
///
/// # Errors
/// The store cannot be read or the index cannot be written.
pub fn reindex(store: &Store) -> Result<(usize, usize), SessionError> {
    let mut entries = Vec::new();
    let mut bad = 0;
    for id in store.run_ids()? {
        if !store.journal_path(&id).exists() {
            continue;
        }
        let l = rebuild(store, &id);
        match l.rebuilt {
            Some(p) => {
                write_meta(store, &id, &p)?;
                entries.push((id.to_string(), *p));
            }
            None => {
                // Nothing trustworthy to project: drop any stale sidecar.
                let _ = std::fs::remove_file(store.meta_path(&id));
                if !l.summary.valid {
                    bad += 1;
                }
            }
        }
    }
    let n = entries.len();
    crate::projection::replace_index(store, entries).map_err(|e| cairn_store::StoreError::Io {
        action: "writing",
        path: store.sessions_index(),
        source: e,
    })?;
    Ok((n, bad))
}

/// The newest session of the repository at `repo_root` that verifies and is
/// not running (what `cairn snapshot` records into when no session is
/// named), or `None`.
///
/// # Errors
/// As [`list`].
pub fn newest_idle(
    store: &Store,
    repo_root: &std::path::Path,
) -> Result<Option<RunId>, SessionError> {
    for s in list(store)? {
        if s.valid && s.status != "running" && crate::in_repository(&s.workspace, repo_root) {
            if let Ok(id) = RunId::parse(&s.id) {
                return Ok(Some(id));
            }
        }
    }
    Ok(None)
}

/// What [`reindex_workspaces`] did for one session.
#[derive(Debug)]
pub struct WorkspaceReindex {
    /// The session.
    pub run: RunId,
    /// The rebuilt index, or why it could not be rebuilt.
    pub result: Result<cairn_workspace::RebuildReport, SessionError>,
    /// `snapshot` records whose snapshot id or label does not parse.
    pub unreadable_records: Vec<String>,
}

/// Rebuilds every session's workspace index (labels, head, open node) from
/// the `snapshot` records of its journal and its manifests (`cairn
/// reindex`), so a damaged `index.json` loses no label the journal holds.
/// Sessions that never captured are left alone.
///
/// # Errors
/// The store cannot be listed.
pub fn reindex_workspaces(store: &Store) -> Result<Vec<WorkspaceReindex>, SessionError> {
    let mut out = Vec::new();
    for run in store.run_ids()? {
        let path = store.journal_path(&run);
        if !path.exists() || !store.workspace_dir(&run).exists() {
            continue;
        }
        let mut unreadable_records = Vec::new();
        let result = cairn_journal::read_journal(&path, run.as_str())
            .map_err(SessionError::from)
            .and_then(|scan| {
                let mut boundaries = Vec::new();
                for r in &scan.records {
                    if let cairn_journal::RecordBody::Snapshot(s) = &r.body {
                        match (
                            cairn_workspace::SnapshotId::parse(&s.snapshot),
                            cairn_workspace::Label::parse(&s.label),
                        ) {
                            (Ok(id), Ok(label)) => boundaries.push((id, label)),
                            _ => unreadable_records.push(format!(
                                "seq {}: snapshot {:?} labelled {:?}",
                                r.seq, s.snapshot, s.label
                            )),
                        }
                    }
                }
                Ok(cairn_workspace::Workspace::rebuild_index_of(
                    store,
                    &run,
                    &boundaries,
                )?)
            });
        out.push(WorkspaceReindex {
            run,
            result,
            unreadable_records,
        });
    }
    Ok(out)
}
