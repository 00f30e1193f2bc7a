#![allow(dead_code)]
//! A writer that keeps a run's state the way cairn's own session writer
//! does (lock, read, fold the lineage; fold every append; terminal totals
//! from the state; projections refreshed at turn and terminal boundaries),
//! and a small deterministic random source for model tests.

use cairn_journal::*;
use cairn_sessions::Pin;
use cairn_store::{RunId, Store};

pub fn meta(workspace: &str, name: &str) -> Meta {
    Meta {
        run: String::new(),
        created: now_rfc3339(),
        workspace: workspace.into(),
        name: Some(name.into()),
        fingerprint: None,
        fork: None,
        routing: None,
        system_file: None,
    }
}

pub fn user(t: &str) -> RecordBody {
    RecordBody::User(User {
        text: t.into(),
        origin: None,
    })
}

pub fn turn(input: u64, output: u64, cost: Cost, replay: bool, calls: &[&str]) -> RecordBody {
    RecordBody::Assistant(Assistant {
        text: "turn".into(),
        tool_calls: calls
            .iter()
            .map(|c| ToolCall {
                id: (*c).into(),
                name: "shell".into(),
                arguments: serde_json::json!({"command": "true"}),
                raw_arguments: None,
            })
            .collect(),
        usage: Usage {
            input_tokens: input,
            output_tokens: output,
        },
        cost,
        replay,
        model: None,
        ..Assistant::default()
    })
}

pub fn snapshot(label: &str) -> RecordBody {
    RecordBody::Snapshot(Snapshot {
        snapshot: "0".repeat(64),
        label: label.into(),
    })
}

pub fn reconcile() -> RecordBody {
    RecordBody::Reconcile(Reconcile {
        changed: vec!["a.txt".into()],
        snapshot: None,
        unknown: None,
        machine: None,
    })
}

/// The one place these tests build a `checkpoint` record.
pub fn checkpoint() -> RecordBody {
    RecordBody::Checkpoint(CheckpointRef {
        checkpoint: "cp-1".into(),
        manifest: None,
    })
}

/// An open run, kept in step with its journal.
pub struct Writer {
    pub store: Store,
    pub id: RunId,
    pub w: JournalWriter,
    pub state: RunState,
    pub receipt: Vec<Pin>,
}

impl Writer {
    pub fn create(store: &Store, workspace: &str, name: &str) -> Writer {
        let id = RunId::new();
        let w = JournalWriter::create(store, &id, meta(workspace, name)).unwrap();
        let mut m = meta(workspace, name);
        m.run = id.to_string();
        let state = RunState::from_meta(&m, w.last_ts());
        let s = Writer {
            store: store.clone(),
            id,
            w,
            state,
            receipt: Vec::new(),
        };
        s.refresh();
        s
    }

    /// Opens for a resume: lock, read, fold the lineage.
    pub fn open(store: &Store, id: &RunId) -> Writer {
        let (w, scan) = JournalWriter::open(store, id).unwrap();
        let (state, receipt) = cairn_sessions::state_for_resume(store, id, &scan).unwrap();
        Writer {
            store: store.clone(),
            id: id.clone(),
            w,
            state,
            receipt,
        }
    }

    /// Forks `parent` at `at` and opens the child for writing.
    pub fn fork(store: &Store, parent: &RunId, at: Option<u64>) -> Writer {
        let (id, w, _) = cairn_sessions::fork(store, parent, at, None).unwrap();
        drop(w);
        Writer::open(store, &id)
    }

    pub fn append(&mut self, body: RecordBody) -> Record {
        let r = self.w.append_record(body).unwrap();
        self.state.apply(&r);
        if matches!(r.body, RecordBody::Assistant(_) | RecordBody::Terminal(_)) {
            self.refresh();
        }
        r
    }

    /// Ends a stretch of work with the fold's totals, as every cairn writer does.
    pub fn end(&mut self, reason: TerminalReason) -> Record {
        let totals = self.state.totals;
        self.append(RecordBody::Terminal(Terminal {
            reason,
            totals,
            detail: None,
        }))
    }

    pub fn refresh(&self) {
        cairn_sessions::refresh(
            &self.store,
            &self.id,
            &self.state,
            &self.w.tail().to_hex(),
            &self.receipt,
        )
        .unwrap();
    }
}

/// xorshift64*: a small deterministic random source, so a failing case can
/// be replayed from its seed.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// 0..n
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

pub fn remove_projections(store: &Store) {
    for id in store.run_ids().unwrap() {
        let _ = std::fs::remove_file(store.meta_path(&id));
    }
    let _ = std::fs::remove_file(store.sessions_index());
}

pub fn edit_json(path: &std::path::Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let mut v: serde_json::Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    edit(&mut v);
    std::fs::write(path, serde_json::to_vec(&v).unwrap()).unwrap();
}
