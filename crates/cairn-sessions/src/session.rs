//! An open, locked session and its folded state, kept in step.
//!
//! Invariants:
//! 1. The journal is locked before it is read: [`Session::open`] takes the
//!    writer's lock first, then reads and folds, so no second writer can
//!    slip in between replay and continuation (DESIGN §4.4).
//! 2. Every record appended is folded in at once, so [`Session::state`]
//!    never lags the journal.
//! 3. Projections are refreshed at creation and at turn and terminal
//!    boundaries; they are caches, so a failed refresh is logged, not fatal.

use cairn_journal::{JournalWriter, Meta, Record, RecordBody, RunState};
use cairn_store::{RunId, Store};

use crate::{Pin, SessionError};

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
    pub fn create(store: &Store, id: &RunId, meta: Meta) -> Result<Self, SessionError> {
        let writer = JournalWriter::create(store, id, meta.clone())?;
        let mut meta = meta;
        meta.run = id.to_string();
        let state = RunState::from_meta(&meta, writer.last_ts());
        let mut s = Session {
            store: store.clone(),
            writer,
            state,
            receipt: Vec::new(),
        };
        s.refresh_projections();
        Ok(s)
    }

    /// Creates a session without a model (for `cairn exec` and `cairn
    /// snapshot`) whose workspace is `workspace`, canonicalised.
    ///
    /// # Errors
    /// The directory cannot be canonicalised; journal and store errors.
    pub fn create_without_model(
        store: &Store,
        workspace: &std::path::Path,
        name: &str,
    ) -> Result<Self, SessionError> {
        let root = std::fs::canonicalize(workspace).map_err(|e| cairn_store::StoreError::Io {
            action: "resolving the workspace directory",
            path: workspace.to_path_buf(),
            source: e,
        })?;
        let meta = Meta {
            run: String::new(),
            created: cairn_journal::now_rfc3339(),
            workspace: root.to_string_lossy().into_owned(),
            name: Some(name.to_owned()),
            fingerprint: None,
            fork: None,
            routing: None,
            system_file: None,
        };
        Self::create(store, &RunId::new(), meta)
    }

    /// Opens a run for a resume: the journal is locked BEFORE it is read and
    /// folded, so no second writer can slip in between replay and continuation.
    ///
    /// # Errors
    /// [`cairn_journal::JournalError::Locked`] and read errors.
    pub fn open(store: &Store, id: &RunId) -> Result<Self, SessionError> {
        let (writer, scan) = JournalWriter::open(store, id)?;
        let (state, receipt) = crate::load::state_for_resume_owned(store, id, scan)?;
        Ok(Session {
            store: store.clone(),
            writer,
            state,
            receipt,
        })
    }

    /// [`Session::open`], handing back the records it read and verified:
    /// a caller that needs them as well (the rewind points of a rewind)
    /// reads the journal once, and reads it under the lock.
    ///
    /// # Errors
    /// As [`Session::open`].
    pub fn open_with_records(
        store: &Store,
        id: &RunId,
    ) -> Result<(Self, Vec<Record>), SessionError> {
        let (writer, scan) = JournalWriter::open(store, id)?;
        let (state, receipt) = crate::state_for_resume(store, id, &scan)?;
        Ok((
            Session {
                store: store.clone(),
                writer,
                state,
                receipt,
            },
            scan.records,
        ))
    }

    /// The run id.
    pub fn id(&self) -> &RunId {
        self.writer.run()
    }

    /// The folded state, current with the last append.
    pub fn state(&self) -> &RunState {
        &self.state
    }

    /// The workspace versioning of this session, over the workspace its
    /// state names ([`crate::tracker`]): no second read of the journal.
    ///
    /// # Errors
    /// The workspace index cannot be opened.
    pub fn tracker(
        &self,
        capture: cairn_workspace::CaptureConfig,
    ) -> Result<cairn_workspace::Workspace, SessionError> {
        crate::tracker(self.store(), self.id(), &self.state.workspace, capture)
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
    pub fn append(&mut self, body: RecordBody) -> Result<Record, SessionError> {
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

    /// Appends several records with one write and one fsync (group commit)
    /// and folds them in. Projections are refreshed once, at the end, when
    /// any of them is a turn or a terminal.
    ///
    /// # Errors
    /// Journal errors (the writer is poisoned by a failed write or fsync).
    pub fn append_all(&mut self, bodies: Vec<RecordBody>) -> Result<(), SessionError> {
        if bodies.is_empty() {
            return Ok(());
        }
        let records = self.writer.append_records(bodies)?;
        let mut boundary = false;
        for record in &records {
            self.state.apply(record);
            boundary |= matches!(
                record.body,
                RecordBody::Assistant(_) | RecordBody::Terminal(_)
            );
        }
        if boundary {
            self.refresh_projections();
        }
        Ok(())
    }

    /// Journals a workspace capture as a `snapshot` record (a boundary).
    ///
    /// # Errors
    /// Journal errors.
    pub fn record_capture(
        &mut self,
        capture: &cairn_workspace::CaptureReport,
    ) -> Result<Record, SessionError> {
        self.append(RecordBody::Snapshot(cairn_journal::Snapshot {
            snapshot: capture.snapshot.to_string(),
            label: capture.label.to_string(),
        }))
    }

    /// Ends a session that holds nothing but the bookkeeping just journaled
    /// (a session made to hold a snapshot): nothing of it is running, so it
    /// is `completed`, with `detail` saying why. Any other session is left
    /// as it is.
    ///
    /// # Errors
    /// Journal errors.
    pub fn close_if_only_bookkeeping(&mut self, detail: &str) -> Result<(), SessionError> {
        let only_bookkeeping = self.state.status == cairn_journal::Status::Running
            && self.state.totals.turns == 0
            && self.state.totals.tool_calls == 0
            && self.state.records <= 2;
        if only_bookkeeping {
            let totals = self.state.totals;
            self.append(RecordBody::Terminal(cairn_journal::Terminal {
                reason: cairn_journal::TerminalReason::Completed,
                totals,
                detail: Some(detail.to_owned()),
            }))?;
        }
        Ok(())
    }

    /// Rewrites the projections from the state. Best effort: a projection
    /// that is not written is rebuilt from the record by the next reader.
    pub fn refresh_projections(&mut self) {
        // At the end of a stretch, cut the journal's preallocated space
        // first, so the binding written now holds after the writer closes.
        if self.state.status != cairn_journal::Status::Running {
            if let Err(e) = self.writer.trim() {
                tracing::warn!("journal of {} not trimmed: {e}", self.id());
            }
        }
        let tail = self.writer.tail().to_hex();
        if let Err(e) = crate::refresh(&self.store, self.id(), &self.state, &tail, &self.receipt) {
            tracing::warn!("projections of {} not refreshed: {e}", self.id());
        }
    }
}
