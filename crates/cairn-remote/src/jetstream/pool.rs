//! The object pool's leases (DESIGN §12): shared ones for uploads, an
//! exclusive one for a prune, in the lease bucket beside writer leases
//! (`lease.rs` states the rules every lease write follows).
//!
//! # Invariants
//! - A pool lease is renewed while it is held: a task on the connection's
//!   runtime writes it again every third of its period, fenced on the
//!   revision it last wrote, until [`RemoteJournals::pool_release`] stops
//!   it (and waits for it: no renewal lands after the release). An upload
//!   or a prune longer than a lease period keeps its lease, so a prune on
//!   another host cannot start while an upload that found an object
//!   already there has yet to publish the record naming it.
//! - A renewal that gets no answer is tried again sooner; one refused
//!   because another writer took the key ends the renewal and marks the
//!   lease lost. A lease whose renewal did not succeed before it could read
//!   as lapsed to others is lost too, for good (renewing it later would
//!   not undo a prune run meanwhile): from then on this connection refuses
//!   to publish records ([`JetStreamJournals::shares_kept`]), because a
//!   prune elsewhere may have deleted an object the upload found there;
//!   giving the lease up ends the refusal, and the caller runs again,
//!   uploading what is missing.
//!
//! # Not guaranteed
//! - A prune whose exclusive lease is lost goes on deleting: the deletes
//!   do not pass through here. Its grace period keeps what was uploaded
//!   recently.
//! - An append that is under way when a share lapses is not stopped.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use async_nats::jetstream::kv;
use cairn_journal::{RemoteJournalError, RemoteJournals as _};

use super::classify::{classify, Failure};
use super::lease::{lease_of, unix_now, Lease};
use super::JetStreamJournals;

/// The key of the pool's exclusive lease (a prune's).
pub(super) const POOL_PRUNE: &str = "pool.prune";
/// The prefix of the keys of the pool's shared leases (uploads').
pub(super) const POOL_SHARE: &str = "pool.share.";

/// A pool lease this connection holds and renews.
pub(super) struct Kept {
    state: Arc<Mutex<KeptState>>,
    stop: tokio::sync::watch::Sender<bool>,
    task: tokio::task::JoinHandle<()>,
    token: String,
}

/// What the renewal knows of its lease.
struct KeptState {
    /// The revision last written.
    revision: u64,
    /// From when others may read it as lapsed, unless renewed before.
    lapses: Instant,
    /// Why it is not this connection's any more, once it is not.
    lost: Option<String>,
}

impl KeptState {
    /// Why the lease may no longer guard what it was taken for, if so.
    fn gone(&self) -> Option<String> {
        self.lost.clone().or_else(|| {
            (Instant::now() >= self.lapses)
                .then(|| "no renewal got an answer before it could lapse".to_owned())
        })
    }
}

fn locked<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Pool leases held, by key.
pub(super) type KeptLeases = Mutex<HashMap<String, Kept>>;

impl JetStreamJournals {
    pub(super) fn pool_share_once(&self) -> Result<Option<String>, RemoteJournalError> {
        let key = format!("{POOL_SHARE}{}", ulid::Ulid::new());
        let lease = self.new_lease();
        let revision = self
            .kv_write(&key, &lease, None)?
            .map_err(|f| f.into_error(&self.name, "take a shared lease on the object pool"))?;
        self.keep(&key, lease, revision);
        // Taken, then checked: a prune that took its lease first is seen.
        // While it runs the share is kept (for half a lease period), so a
        // prune that starts after it is refused and this upload goes next:
        // given up and taken again, it could wait behind prune after prune.
        let deadline = Instant::now() + self.config.lease / 2;
        loop {
            let prune = match self.live_lease(POOL_PRUNE) {
                Ok(p) => p,
                Err(e) => {
                    self.pool_release(&key);
                    return Err(e);
                }
            };
            match prune {
                None => return Ok(Some(key)),
                Some(prune) if Instant::now() >= deadline => {
                    self.pool_release(&key);
                    return Err(self.leased("the object pool", prune.holder()));
                }
                Some(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    pub(super) fn pool_exclusive_once(&self) -> Result<Option<String>, RemoteJournalError> {
        let lease = self.new_lease();
        let revision = match self.kv_entry(POOL_PRUNE)? {
            Some(e) => {
                if let Some(l) = lease_of(&e).filter(|l| l.until > unix_now()) {
                    return Err(self.leased("the object pool", l.holder()));
                }
                Some(e.revision)
            }
            None => None,
        };
        let revision = match self.kv_write(POOL_PRUNE, &lease, revision)? {
            Ok(r) => r,
            Err(Failure::Raced) => {
                return Err(match self.live_lease(POOL_PRUNE)? {
                    Some(l) => self.leased("the object pool", l.holder()),
                    None => self.failed(
                        "take the object pool's exclusive lease",
                        "another prune changed it at the same moment; try again",
                    ),
                })
            }
            Err(f) => {
                return Err(f.into_error(&self.name, "take the object pool's exclusive lease"))
            }
        };
        self.keep(POOL_PRUNE, lease, revision);
        // Taken, then checked: an upload that took its lease first is seen.
        match self.live_share() {
            Ok(None) => Ok(Some(POOL_PRUNE.to_owned())),
            Ok(Some(l)) => {
                self.pool_release(POOL_PRUNE);
                Err(self.leased("the object pool", l.holder()))
            }
            Err(e) => {
                self.pool_release(POOL_PRUNE);
                Err(e)
            }
        }
    }

    /// A shared pool lease that has not lapsed, if any.
    fn live_share(&self) -> Result<Option<Lease>, RemoteJournalError> {
        for key in self.kv_keys()? {
            if key.starts_with(POOL_SHARE) {
                if let Some(l) = self.live_lease(&key)? {
                    return Ok(Some(l));
                }
            }
        }
        Ok(None)
    }

    fn kv_keys(&self) -> Result<Vec<String>, RemoteJournalError> {
        use futures_util::StreamExt;
        let leases = self.leases.clone();
        let got = self.run(async move {
            let mut keys = leases.keys().await.map_err(|e| classify(&e))?;
            let mut out = Vec::new();
            while let Some(k) = keys.next().await {
                out.push(k.map_err(|e| classify(&e))?);
            }
            Ok::<_, Failure>(out)
        })?;
        got.map_err(|f| f.into_error(&self.name, "list the leases"))
    }

    /// Starts renewing the pool lease `lease`, written at `revision` under
    /// `key`, until [`JetStreamJournals::give_up_pool`].
    fn keep(&self, key: &str, lease: Lease, revision: u64) {
        // From its `until`: the write may have taken a while.
        let left = lease.until.saturating_sub(unix_now()).saturating_sub(1);
        let state = Arc::new(Mutex::new(KeptState {
            revision,
            lapses: Instant::now() + Duration::from_secs(left),
            lost: None,
        }));
        let (stop, stopped) = tokio::sync::watch::channel(false);
        let token = lease.token.clone();
        let Ok(task) = crate::bridge::spawn(renew_while_held(
            self.leases.clone(),
            key.to_owned(),
            lease,
            self.lease_secs(),
            state.clone(),
            stopped,
        )) else {
            // Unreachable: the store was opened through the same runtime.
            return;
        };
        locked(&self.kept).insert(
            key.to_owned(),
            Kept {
                state,
                stop,
                task,
                token,
            },
        );
    }

    /// Stops renewing the pool lease `key` (waiting for a renewal under way)
    /// and deletes it, fenced on the revision last written.
    ///
    /// # Errors
    /// The server did not answer or refused: the lease stays until it
    /// lapses. A lease that was lost while held is logged as a warning.
    pub(super) fn give_up_pool(&self, key: &str) -> Result<(), RemoteJournalError> {
        let Some(kept) = locked(&self.kept).remove(key) else {
            return Ok(());
        };
        let _ = kept.stop.send(true);
        let task = kept.task;
        // Waits for the renewal to stop; a runtime shut down has none.
        let _ = self.run(async move {
            let _ = task.await;
        });
        let (revision, gone) = {
            let s = locked(&kept.state);
            (s.revision, s.gone())
        };
        if let Some(why) = gone {
            tracing::warn!(
                "the object pool lease {key} on {} was not kept while held: {why}",
                self.name
            );
        }
        self.delete_lease(
            key,
            revision,
            &kept.token,
            &format!("give up the object pool lease {key}"),
        )
    }

    /// Gives up every pool lease still held (when the connection closes).
    pub(super) fn give_up_all_pool(&self) {
        let keys: Vec<String> = locked(&self.kept).keys().cloned().collect();
        for key in keys {
            self.pool_release(&key);
        }
    }

    /// Refuses to publish while a shared pool lease of this connection was
    /// not kept: a prune on another host may have deleted an object the
    /// upload under it found there, and a record naming it must not be
    /// published.
    ///
    /// # Errors
    /// [`RemoteJournalError::Failed`] saying so and what to do.
    pub(super) fn shares_kept(&self) -> Result<(), RemoteJournalError> {
        let kept = locked(&self.kept);
        for (key, k) in kept.iter().filter(|(k, _)| k.starts_with(POOL_SHARE)) {
            if let Some(why) = locked(&k.state).gone() {
                return Err(self.failed(
                    "publish records naming objects uploaded under the object pool's shared lease",
                    format!(
                        "the lease {key} lapsed ({why}), so a prune on another host may have deleted an object the upload found there; nothing was published: run the command again"
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// Writes `lease` under `key` again every third of its period, fenced on
/// the revision last written, until `stopped` says so (see the module
/// notes).
async fn renew_while_held(
    leases: kv::Store,
    key: String,
    lease: Lease,
    period_secs: u64,
    state: Arc<Mutex<KeptState>>,
    mut stopped: tokio::sync::watch::Receiver<bool>,
) {
    let every = Duration::from_secs(period_secs) / 3;
    let mut wait = every;
    loop {
        // Sooner when the lease has less than a third of its period left.
        let left = locked(&state)
            .lapses
            .saturating_duration_since(Instant::now());
        let pause = wait.min(left / 2);
        tokio::select! {
            _ = tokio::time::sleep(pause) => {}
            _ = stopped.changed() => return,
        }
        if *stopped.borrow() {
            return;
        }
        // Once it could read as lapsed, a prune may have run: renewing it
        // now would not undo that. Lost for good.
        let gone = locked(&state).gone();
        if let Some(why) = gone {
            tracing::warn!("the object pool lease {key} lapsed: {why}");
            locked(&state).lost = Some(why);
            return;
        }
        wait = every;
        let asked = Instant::now();
        let value = Lease {
            until: unix_now() + period_secs,
            ..lease.clone()
        };
        let Ok(bytes) = serde_json::to_vec(&value) else {
            return;
        };
        let revision = locked(&state).revision;
        match leases.update(&key, bytes.into(), revision).await {
            Ok(r) => {
                let mut s = locked(&state);
                s.revision = r;
                s.lapses = asked + Duration::from_secs(period_secs - 1);
            }
            Err(e) => match classify(&e) {
                // Written by a renewal whose answer was lost, and still
                // this lease: renewed again at once from its revision.
                Failure::Raced => match leases.entry(&key).await {
                    Ok(Some(en)) if lease_of(&en).is_some_and(|l| l.token == lease.token) => {
                        locked(&state).revision = en.revision;
                        wait = Duration::ZERO;
                    }
                    Ok(_) => {
                        locked(&state).lost =
                            Some("another writer took it after it lapsed".to_owned());
                        tracing::warn!("the object pool lease {key} was taken by another writer after it lapsed");
                        return;
                    }
                    Err(_) => wait = every / 3,
                },
                Failure::Transport(reason) | Failure::Refused(reason) => {
                    tracing::warn!("renewing the object pool lease {key}: {reason}; trying again");
                    wait = every / 3;
                }
            },
        }
    }
}
