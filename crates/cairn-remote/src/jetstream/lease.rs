//! Leases in the store's key-value bucket (DESIGN §12): who writes a
//! session (its writer lease, this file) and who uses the object pool (the
//! pool's leases, `pool.rs`).
//!
//! # Invariants
//! - A lease is the value `{pid, host, since, until, token}` under its key,
//!   live while `until` (seconds since the epoch) is in the future. The
//!   token is new for every lease taken, so a value read back says whether
//!   it is this lease.
//! - Every write is fenced: a create on no value, an update or a delete on
//!   the revision read or last written. Only a fenced write refused
//!   ([`Failure::Raced`]) is a race lost. A write that got no answer may
//!   have been stored: it is read back ([`JetStreamJournals::kv_write`]),
//!   and a value carrying this lease's token is this lease, adopted, never
//!   reported as held by someone else; otherwise it is reported as the
//!   server being unreachable.
//! - Giving a lease up deletes it fenced on the revision this writer holds,
//!   so a lease another writer took after this one lapsed is theirs and is
//!   left alone; a release that got no answer is an error: returned by
//!   [`JetStreamJournals::release`] and [`JetStreamJournals::release_held`],
//!   a warning (`tracing`) where the interface returns nothing.
//! - Writer leases are advice (the stream's fence keeps records whole):
//!   renewed on each [`cairn_journal::RemoteJournals::hold`] once half their
//!   period is gone. The pool's leases guard objects and are renewed in the
//!   background (`pool.rs`).

use std::time::{Instant, SystemTime};

use async_nats::jetstream::kv;
use cairn_journal::{LockHolder, RemoteJournalError};
use serde::{Deserialize, Serialize};

use super::classify::{classify, Failure};
use super::JetStreamJournals;

/// A lease as stored in the lease bucket.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(super) struct Lease {
    pub(super) pid: u32,
    pub(super) host: String,
    pub(super) since: String,
    /// Seconds since the Unix epoch after which the lease has lapsed.
    pub(super) until: u64,
    /// This lease and no other: new for each one taken.
    pub(super) token: String,
}

impl Lease {
    pub(super) fn holder(&self) -> LockHolder {
        LockHolder {
            pid: self.pid,
            host: self.host.clone(),
            since: self.since.clone(),
        }
    }

    fn live(&self) -> bool {
        self.until > unix_now()
    }
}

pub(super) fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The lease in `entry`, when it is a value (not a deletion) that reads as
/// one.
pub(super) fn lease_of(entry: &kv::Entry) -> Option<Lease> {
    (entry.operation == kv::Operation::Put)
        .then(|| serde_json::from_slice::<Lease>(&entry.value).ok())
        .flatten()
}

/// A held writer lease; released by [`JetStreamJournals::release`].
#[derive(Debug)]
pub struct WriterLease {
    run: String,
    revision: u64,
    since: String,
    token: String,
    taken: Instant,
}

impl JetStreamJournals {
    /// The period of a lease in whole seconds (at least 2, so that one
    /// written now lasts at least a whole second whatever the clock's
    /// fraction).
    pub(super) fn lease_secs(&self) -> u64 {
        self.config.lease.as_secs().max(2)
    }

    /// A new lease of this process with a new token, lasting one period.
    pub(super) fn new_lease(&self) -> Lease {
        Lease {
            pid: std::process::id(),
            host: gethostname::gethostname().to_string_lossy().into_owned(),
            since: humantime::format_rfc3339_seconds(SystemTime::now()).to_string(),
            until: unix_now() + self.lease_secs(),
            token: format!("{}-{}", std::process::id(), ulid::Ulid::new()),
        }
    }

    /// Who holds `run`'s writer lease now, if anyone does.
    pub(super) fn holder(&self, run: &str) -> Result<Option<Lease>, RemoteJournalError> {
        self.live_lease(run)
    }

    /// Takes the writer lease of `run`: refused while another writer holds
    /// one that has not lapsed.
    ///
    /// # Errors
    /// [`RemoteJournalError::Leased`] naming the holder;
    /// [`RemoteJournalError::Unreachable`] when the server does not answer;
    /// others when it refuses.
    pub fn lease(&self, run: &str) -> Result<WriterLease, RemoteJournalError> {
        let lease = self.new_lease();
        for _ in 0..3 {
            let revision = match self.kv_entry(run)? {
                None => None,
                Some(e) => {
                    // One this process took (and lost track of in a retry)
                    // is taken again, not refused.
                    let held = lease_of(&e)
                        .filter(Lease::live)
                        .filter(|l| !(l.pid == lease.pid && l.host == lease.host));
                    if let Some(l) = held {
                        return Err(self.leased(run, l.holder()));
                    }
                    Some(e.revision)
                }
            };
            match self.kv_write(run, &lease, revision)? {
                Ok(revision) => {
                    return Ok(WriterLease {
                        run: run.to_owned(),
                        revision,
                        since: lease.since.clone(),
                        token: lease.token.clone(),
                        taken: Instant::now(),
                    })
                }
                // Taken or changed between the read and the write: look again.
                Err(Failure::Raced) => continue,
                Err(f) => {
                    return Err(f.into_error(
                        &self.name,
                        &format!("take the writer lease of session {run}"),
                    ))
                }
            }
        }
        match self.holder(run)? {
            Some(l) => Err(self.leased(run, l.holder())),
            None => Err(self.failed(
                &format!("take the writer lease of session {run}"),
                "it changed three times while being taken; try again",
            )),
        }
    }

    /// Extends a lease this writer holds by another lease period (once half
    /// of it is gone; before that it is returned as it is); refused when it
    /// lapsed and another writer took it.
    ///
    /// # Errors
    /// [`RemoteJournalError::Leased`]; [`RemoteJournalError::Unreachable`]
    /// when the server does not answer (the lease may then lapse).
    pub fn renew(&self, lease: WriterLease) -> Result<WriterLease, RemoteJournalError> {
        if lease.taken + self.config.lease / 2 > Instant::now() {
            return Ok(lease);
        }
        let value = Lease {
            since: lease.since.clone(),
            token: lease.token.clone(),
            ..self.new_lease()
        };
        match self.kv_write(&lease.run, &value, Some(lease.revision))? {
            Ok(revision) => Ok(WriterLease {
                revision,
                taken: Instant::now(),
                ..lease
            }),
            Err(Failure::Raced) => match self.holder(&lease.run)? {
                Some(l) if l.token != lease.token => Err(self.leased(&lease.run, l.holder())),
                // Lapsed and free, or ours at a revision this writer did not
                // see: taken again.
                _ => self.lease(&lease.run),
            },
            Err(f) => Err(f.into_error(
                &self.name,
                &format!("renew the writer lease of session {}", lease.run),
            )),
        }
    }

    /// Gives up a lease taken by [`JetStreamJournals::lease`]. Nothing is
    /// deleted when it lapsed and another writer took it.
    ///
    /// # Errors
    /// [`RemoteJournalError::Unreachable`] when the server did not answer,
    /// others when it refused: the lease then stays until it lapses.
    pub fn release(&self, lease: WriterLease) -> Result<(), RemoteJournalError> {
        self.delete_lease(
            &lease.run,
            lease.revision,
            &lease.token,
            &format!("give up the writer lease of session {}", lease.run),
        )
    }

    /// Gives up every lease taken through
    /// [`cairn_journal::RemoteJournals::hold`]: each is tried, and each
    /// failure is logged as a warning.
    ///
    /// # Errors
    /// The first release that failed (that lease lapses on its own, within
    /// a lease period).
    pub fn release_held(&self) -> Result<(), RemoteJournalError> {
        let held: Vec<WriterLease> = self
            .held
            .lock()
            .map(|mut h| h.drain().map(|(_, l)| l).collect())
            .unwrap_or_default();
        let mut first = None;
        for lease in held {
            if let Err(e) = self.release(lease) {
                tracing::warn!("{e}; the writer lease lapses on its own");
                first.get_or_insert(e);
            }
        }
        first.map_or(Ok(()), Err)
    }

    pub(super) fn hold_once(&self, run: &str) -> Result<(), RemoteJournalError> {
        let mut held = self
            .held
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let lease = match held.remove(run) {
            Some(ours) => self.renew(ours)?,
            None => self.lease(run)?,
        };
        held.insert(run.to_owned(), lease);
        Ok(())
    }

    pub(super) fn leased(&self, run: &str, holder: LockHolder) -> RemoteJournalError {
        RemoteJournalError::Leased {
            remote: self.name.clone(),
            run: run.to_owned(),
            holder,
        }
    }

    pub(super) fn kv_entry(&self, key: &str) -> Result<Option<kv::Entry>, RemoteJournalError> {
        let leases = self.leases.clone();
        let k = key.to_owned();
        self.run(async move { leases.entry(k).await })?
            .map_err(|e| classify(&e).into_error(&self.name, &format!("read the lease {key}")))
    }

    /// The lease under `key` when it is held and has not lapsed.
    pub(super) fn live_lease(&self, key: &str) -> Result<Option<Lease>, RemoteJournalError> {
        Ok(self
            .kv_entry(key)?
            .as_ref()
            .and_then(lease_of)
            .filter(Lease::live))
    }

    /// Writes `lease` under `key`, fenced: created when `revision` is
    /// `None`, else replacing that revision. Its new revision, or what the
    /// failure means. A write that got no answer, or was refused as a race,
    /// is read back: when the key holds this very value (its token and its
    /// `until`), the write was stored and its revision is returned.
    ///
    /// # Errors
    /// Only when the runtime is gone; the server's answers are the inner
    /// result.
    pub(super) fn kv_write(
        &self,
        key: &str,
        lease: &Lease,
        revision: Option<u64>,
    ) -> Result<Result<u64, Failure>, RemoteJournalError> {
        let value: bytes::Bytes = serde_json::to_vec(lease)
            .map_err(|e| self.failed("write a lease", e))?
            .into();
        let leases = self.leases.clone();
        let k = key.to_owned();
        let done = self.run(async move {
            match revision {
                Some(rev) => leases.update(k, value, rev).await.map_err(|e| classify(&e)),
                None => leases.create(k, value).await.map_err(|e| classify(&e)),
            }
        })?;
        match done {
            // No answer, or (async-nats reads a create back itself) a key
            // found there: the write may be the value found.
            Err(f @ (Failure::Transport(_) | Failure::Raced)) => {
                let stored = self
                    .kv_entry(key)
                    .ok()
                    .flatten()
                    .filter(|e| {
                        lease_of(e)
                            .is_some_and(|l| l.token == lease.token && l.until == lease.until)
                    })
                    .map(|e| e.revision);
                Ok(stored.ok_or(f))
            }
            other => Ok(other),
        }
    }

    /// Deletes the lease `token` under `key`, fenced on `revision`: one
    /// another writer holds now is left alone; one still this lease's at a
    /// later revision (a write whose answer was lost) is deleted at that.
    pub(super) fn delete_lease(
        &self,
        key: &str,
        revision: u64,
        token: &str,
        action: &str,
    ) -> Result<(), RemoteJournalError> {
        let mut revision = revision;
        for _ in 0..3 {
            let leases = self.leases.clone();
            let k = key.to_owned();
            let done =
                self.run(async move { leases.delete_expect_revision(k, Some(revision)).await })?;
            let Err(e) = done else { return Ok(()) };
            match classify(&e) {
                Failure::Raced => match self.kv_entry(key)? {
                    Some(e) if lease_of(&e).is_some_and(|l| l.token == token) => {
                        revision = e.revision;
                    }
                    // Another writer's now (ours lapsed), or gone already.
                    _ => return Ok(()),
                },
                f => return Err(f.into_error(&self.name, action)),
            }
        }
        Err(self.failed(action, "it changed three times while being given up"))
    }
}
