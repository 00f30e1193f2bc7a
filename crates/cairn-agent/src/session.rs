//! An open, locked run and its folded state, kept in step: every record
//! appended is folded in at once, so the state never lags the journal.

use cairn_journal::{JournalWriter, Meta, Record, RecordBody, RunState};
use cairn_sessions::Pin;
use cairn_store::{RunId, Store};

use crate::AgentError;

/// A run held for writing. Its projections (`meta.json`, `sessions.index`)
/// are refreshed at creation and at every turn and terminal boundary.
#[derive(Debug)]
pub struct Session {
    store: Store,
    writer: JournalWriter,
    state: RunState,
    receipt: Vec<Pin>,
}

impl Session {
    /// Creates a new root run (forks are made by `cairn_sessions::fork`).
    ///
    /// # Errors
    /// Journal and store errors.
    pub fn create(store: &Store, id: &RunId, meta: Meta) -> Result<Self, AgentError> {
        let writer = JournalWriter::create(store, id, meta.clone())?;
        let mut meta = meta;
        meta.run = id.to_string();
        let state = RunState::from_meta(&meta, writer.last_ts());
        let s = Session {
            store: store.clone(),
            writer,
            state,
            receipt: Vec::new(),
        };
        s.refresh_projections();
        Ok(s)
    }

    /// Opens a run for a resume: the journal is locked BEFORE it is read and
    /// folded, so no second writer can slip in between replay and continuation.
    ///
    /// # Errors
    /// [`cairn_journal::JournalError::Locked`] and read errors.
    pub fn open(store: &Store, id: &RunId) -> Result<Self, AgentError> {
        let (writer, scan) = JournalWriter::open(store, id)?;
        let (state, receipt) = cairn_sessions::state_for_resume(store, id, &scan)?;
        Ok(Session {
            store: store.clone(),
            writer,
            state,
            receipt,
        })
    }

    /// The run id.
    pub fn id(&self) -> &RunId {
        self.writer.run()
    }

    /// The folded state, current with the last append.
    pub fn state(&self) -> &RunState {
        &self.state
    }

    /// For a fork, the pins of the ancestor prefixes it folds over.
    pub fn receipt(&self) -> &[Pin] {
        &self.receipt
    }

    /// The store.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// The writer (for its seq and tail).
    pub fn writer(&self) -> &JournalWriter {
        &self.writer
    }

    /// Appends one record durably and folds it in.
    ///
    /// # Errors
    /// Journal errors (the writer is poisoned by a failed write or fsync).
    pub fn append(&mut self, body: RecordBody) -> Result<Record, AgentError> {
        let record = self.writer.append_record(body)?;
        self.state.apply(&record);
        // Turn and terminal boundaries keep the projections current; a
        // command that ends on bookkeeping (a snapshot, a checkpoint) calls
        // `refresh_projections` once when it is done.
        if matches!(
            record.body,
            RecordBody::Assistant(_) | RecordBody::Terminal(_)
        ) {
            self.refresh_projections();
        }
        Ok(record)
    }

    /// Rewrites the projections from the state. Best effort: a projection
    /// that is not written is rebuilt from the record by the next reader.
    pub fn refresh_projections(&self) {
        let tail = self.writer.tail().to_hex();
        if let Err(e) =
            cairn_sessions::refresh(&self.store, self.id(), &self.state, &tail, &self.receipt)
        {
            tracing::warn!("projections of {} not refreshed: {e}", self.id());
        }
    }
}
