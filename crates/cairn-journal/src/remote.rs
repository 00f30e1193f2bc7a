//! Journals kept somewhere else (DESIGN §12): the interface a shared
//! journal store implements, so that copying sessions to it and from it is
//! one code path whatever the store is. JetStream's implementation lives in
//! `cairn-remote`; this crate does no networking.
//!
//! # The contract an implementation keeps
//! - A journal is a sequence of whole lines, record `n` the `n`-th line,
//!   each stored and returned byte for byte (so a file journal copied there
//!   and back is the same file, and its chain verifies on both).
//! - [`RemoteJournals::append`] is fenced: it writes records `after+1..`
//!   only while the journal holds exactly `after` records. A journal that
//!   holds more is a race this writer lost, unless the records it holds
//!   there are byte for byte the ones being appended (an earlier attempt
//!   whose acknowledgement was lost): those are adopted, never stored
//!   twice.
//! - A record is reported appended only once the store acknowledged it as
//!   stored (on every replica it requires). One that was sent but not
//!   acknowledged is an error, never a success: it may or may not be
//!   there, and the next read says which.
//! - A journal that is not there reads as `None`, not as an error.

use crate::LockHolder;

/// What an append did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RemoteAppended {
    /// Records this call stored.
    pub stored: u64,
    /// Records found already stored with the same bytes (a retry after a
    /// lost acknowledgement) and adopted.
    pub adopted: u64,
}

/// A store of session journals that other machines share.
pub trait RemoteJournals: Send + Sync {
    /// The store, as the user named it (`nats://HOST:PORT/PREFIX`), for
    /// messages.
    fn name(&self) -> String;

    /// The journal of `run`, every record's line (each ending in `\n`) in
    /// order, or `None` when the store has no record of it.
    ///
    /// # Errors
    /// The store could not be read.
    fn read(&self, run: &str) -> Result<Option<Vec<u8>>, RemoteJournalError>;

    /// The lines of `run`'s records after the first `after` (all of them
    /// for 0), or `None` when the store has no record of it. An
    /// implementation that can start a read in the middle overrides this.
    ///
    /// # Errors
    /// The store could not be read.
    fn read_after(&self, run: &str, after: u64) -> Result<Option<Vec<u8>>, RemoteJournalError> {
        let Some(all) = self.read(run)? else {
            return Ok(None);
        };
        let skip = usize::try_from(after).unwrap_or(usize::MAX);
        Ok(Some(
            all.split_inclusive(|&b| b == b'\n')
                .skip(skip)
                .flatten()
                .copied()
                .collect(),
        ))
    }

    /// Reads the journals of many sessions at once, handing each to `each`
    /// as [`RemoteJournals::read`] reads it, until `each` returns `false`.
    /// `runs` are ids with the record count [`RemoteJournals::runs`] gave;
    /// each journal handed is the session's first records as the store held
    /// them at one moment of the call: at least that count of them, unless
    /// the store holds fewer. A session the store does not hold is not
    /// handed (a caller reads those it was not handed one by one). The
    /// default reads
    /// them one by one; a store that can read its journals in one pass
    /// overrides it (what a new host's first listing of a big store needs).
    ///
    /// # Errors
    /// The store could not be read, or holds a damaged journal.
    fn read_many(
        &self,
        runs: &[(String, u64)],
        each: &mut dyn FnMut(&str, Vec<u8>) -> bool,
    ) -> Result<(), RemoteJournalError> {
        for (run, _) in runs {
            if let Some(lines) = self.read(run)? {
                if !each(run, lines) {
                    break;
                }
            }
        }
        Ok(())
    }

    /// Appends `lines` (whole lines, each ending in `\n`, one record each)
    /// to the journal of `run`, which must hold exactly `after` records.
    ///
    /// # Errors
    /// [`RemoteJournalError::Conflict`] when the journal holds other records
    /// from `after + 1` on (nothing of this call's past that seq is
    /// stored); [`RemoteJournalError::NotAcknowledged`] when a record was
    /// sent and its acknowledgement did not come; others when the store
    /// cannot be reached or refuses.
    fn append(
        &self,
        run: &str,
        after: u64,
        lines: &[u8],
    ) -> Result<RemoteAppended, RemoteJournalError>;

    /// Takes the writer lease of `run` for this writer, as the local
    /// writer lock is taken: refused, naming the holder, while another
    /// writer holds one. A lease is advice for people and messages; the
    /// fence of [`RemoteJournals::append`] is what keeps records whole.
    /// The default takes none.
    ///
    /// # Errors
    /// [`RemoteJournalError::Leased`]; the store could not be reached.
    fn hold(&self, run: &str) -> Result<(), RemoteJournalError> {
        let _ = run;
        Ok(())
    }

    /// Gives up the lease [`RemoteJournals::hold`] took, if any; a failure
    /// leaves it to lapse.
    fn let_go(&self, run: &str) {
        let _ = run;
    }

    /// Takes a shared lease on the store's object pool, as an upload holds
    /// the local store lock shared until the records naming its objects
    /// are written: a prune of the pool waits for it. While a prune holds
    /// the exclusive lease, waits for it with the share taken (so a prune
    /// that starts meanwhile is refused), then is refused
    /// ([`RemoteJournalError::Leased`]) if it still holds it. Returns a
    /// token for [`RemoteJournals::pool_release`]; the default takes none.
    ///
    /// # Errors
    /// Refused, or the store could not be reached.
    fn pool_share(&self) -> Result<Option<String>, RemoteJournalError> {
        Ok(None)
    }

    /// Takes the exclusive lease on the store's object pool, for a prune:
    /// refused while another prune holds it or any shared lease is held.
    ///
    /// # Errors
    /// Refused, or the store could not be reached.
    fn pool_exclusive(&self) -> Result<Option<String>, RemoteJournalError> {
        Ok(None)
    }

    /// Gives up a pool lease; a failure leaves it to lapse.
    fn pool_release(&self, token: &str) {
        let _ = token;
    }

    /// Every session the store holds a journal of, with its number of
    /// records, sorted by id.
    ///
    /// # Errors
    /// The store could not be read.
    fn runs(&self) -> Result<Vec<(String, u64)>, RemoteJournalError>;
}

/// What went wrong with a shared journal store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RemoteJournalError {
    /// The location is malformed.
    #[error("`{url}` is not a journal store: {reason}")]
    BadUrl {
        /// The location given.
        url: String,
        /// What is wrong with it, and how to write it.
        reason: String,
    },
    /// The server did not answer.
    #[error("cannot reach the journal store {remote} ({reason}): check that the server is running and that this machine can reach it; nothing was changed")]
    Unreachable {
        /// The store.
        remote: String,
        /// What the connection met.
        reason: String,
    },
    /// The store is set up so that it could lose records.
    #[error("the journal store {remote} could lose records: {setting}; {fix}")]
    Unsafe {
        /// The store.
        remote: String,
        /// The setting and its value.
        setting: String,
        /// What to change.
        fix: String,
    },
    /// Another writer appended first.
    #[error("session {run} has another record {seq} in {remote}, written by another writer ({}): the race was lost and nothing past record {} was stored; pull the session to see what won", holder.as_ref().map_or_else(|| "holder unknown".to_string(), |h| h.to_string()), seq - 1)]
    Conflict {
        /// The store.
        remote: String,
        /// The run.
        run: String,
        /// The first seq that differs.
        seq: u64,
        /// Who holds the session's writer lease, when one does.
        holder: Option<LockHolder>,
    },
    /// A writer lease is held by another writer.
    #[error("session {run} is being written to {remote} by another writer ({holder}): wait for it to finish, then retry")]
    Leased {
        /// The store.
        remote: String,
        /// The run.
        run: String,
        /// Who holds it.
        holder: LockHolder,
    },
    /// A record was sent and not acknowledged.
    #[error("record {seq} of session {run} was sent to {remote} and not acknowledged ({reason}): it is not reported written; it may or may not be stored, and the next push or pull finds out")]
    NotAcknowledged {
        /// The store.
        remote: String,
        /// The run.
        run: String,
        /// The record.
        seq: u64,
        /// What happened instead.
        reason: String,
    },
    /// The store holds something that is not a journal record.
    #[error("the journal of session {run} in {remote} is damaged: {reason}")]
    Damaged {
        /// The store.
        remote: String,
        /// The run.
        run: String,
        /// What is wrong.
        reason: String,
    },
    /// Any other refusal by the server.
    #[error("the journal store {remote} refused to {action}: {reason}")]
    Failed {
        /// The store.
        remote: String,
        /// What cairn asked for.
        action: String,
        /// The server's answer.
        reason: String,
    },
}

impl RemoteJournalError {
    /// What kind of failure this is ([`cairn_store::ErrorKind`]): another
    /// writer's record or lease is a refusal, a shared journal that does not
    /// verify is damage, a malformed location is bad usage.
    pub fn kind(&self) -> cairn_store::ErrorKind {
        use cairn_store::ErrorKind;
        match self {
            RemoteJournalError::Conflict { .. } | RemoteJournalError::Leased { .. } => {
                ErrorKind::Refused
            }
            RemoteJournalError::Damaged { .. } => ErrorKind::Integrity,
            RemoteJournalError::BadUrl { .. } => ErrorKind::Usage,
            _ => ErrorKind::Failure,
        }
    }
}
