//! Calls being bought right now, by key: a duplicate that arrives while the
//! first is in flight waits for it instead of buying it again (DESIGN §7).
//!
//! Invariant: the first request of a key holds a [`Purchase`] until its
//! response is durable (or failed); every later one gets a [`Wait`] that
//! completes when that guard is dropped, whatever the outcome, so no waiter
//! waits for ever.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

/// The keys in flight.
#[derive(Default)]
pub(crate) struct InFlight {
    keys: Arc<Mutex<HashMap<String, watch::Receiver<bool>>>>,
}

/// What [`InFlight::begin`] gives.
pub(crate) enum Turn {
    /// Nobody is buying this key: buy it, holding the guard until done.
    Buy(Purchase),
    /// Another request is buying it: wait, then serve from the store.
    Wait(watch::Receiver<bool>),
}

/// Held by the request that buys a key; dropping it releases the waiters.
pub(crate) struct Purchase {
    key: String,
    keys: Arc<Mutex<HashMap<String, watch::Receiver<bool>>>>,
    done: watch::Sender<bool>,
}

impl InFlight {
    pub(crate) fn begin(&self, key: &str) -> Turn {
        let Ok(mut keys) = self.keys.lock() else {
            // A poisoned map: buy without sharing rather than hang.
            let (done, _) = watch::channel(false);
            return Turn::Buy(Purchase {
                key: key.to_owned(),
                keys: self.keys.clone(),
                done,
            });
        };
        if let Some(rx) = keys.get(key) {
            return Turn::Wait(rx.clone());
        }
        let (done, rx) = watch::channel(false);
        keys.insert(key.to_owned(), rx);
        Turn::Buy(Purchase {
            key: key.to_owned(),
            keys: self.keys.clone(),
            done,
        })
    }
}

impl Drop for Purchase {
    fn drop(&mut self) {
        if let Ok(mut keys) = self.keys.lock() {
            keys.remove(&self.key);
        }
        let _ = self.done.send(true);
    }
}

/// Waits until the purchase a [`Turn::Wait`] names is over.
pub(crate) async fn wait(mut rx: watch::Receiver<bool>) {
    // An error means the sender is gone: the purchase is over too.
    let _ = rx.wait_for(|done| *done).await;
}

/// Purchases still reading their upstream (a client may be long gone): the
/// server waits for them before it stops, so nothing paid for is dropped —
/// and when it may wait no longer, it can say which were not stored.
///
/// Invariant: a purchase is registered from before its request goes
/// upstream until its response is durable or has failed; an entry marked
/// stored is no longer listed as in flight.
#[derive(Default)]
pub(crate) struct Running {
    /// Client connections open now (for what a stopping gateway waits for).
    pub(crate) connections: std::sync::atomic::AtomicUsize,
    next: std::sync::atomic::AtomicU64,
    purchases: Mutex<HashMap<u64, InFlightPurchase>>,
    idle: tokio::sync::Notify,
}

/// A purchase in flight, as [`crate::Activity::purchases`] and
/// [`crate::Stopped`] report it.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct InFlightPurchase {
    /// The route, e.g. `/v1/chat/completions`.
    pub endpoint: String,
    /// The model the request asked for, if it named one.
    pub model: Option<String>,
    /// The session its record goes to.
    pub session: String,
    /// The call's key.
    pub key: String,
    /// When it started.
    pub started: std::time::Instant,
}

/// One line naming the purchase (it may hold a client's model name: a
/// terminal needs it escaped).
impl std::fmt::Display for InFlightPurchase {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "POST {}", self.endpoint)?;
        if let Some(m) = &self.model {
            write!(f, " ({m})")?;
        }
        write!(
            f,
            " for session {}, key {}…, {:.1} s so far",
            self.session,
            self.key.get(..12).unwrap_or(&self.key),
            self.started.elapsed().as_secs_f64()
        )
    }
}

/// Held by a running purchase.
pub(crate) struct RunningGuard {
    running: Arc<Running>,
    id: u64,
}

impl Running {
    pub(crate) fn start(self: &Arc<Self>, purchase: InFlightPurchase) -> RunningGuard {
        let id = self.next.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.lock().insert(id, purchase);
        RunningGuard {
            running: self.clone(),
            id,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u64, InFlightPurchase>> {
        // The map stays whole whatever panicked while it was held.
        self.purchases
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// The purchases whose responses are not stored yet, oldest first.
    pub(crate) fn in_flight(&self) -> Vec<InFlightPurchase> {
        let mut all: Vec<InFlightPurchase> = self.lock().values().cloned().collect();
        all.sort_by_key(|p| p.started);
        all
    }

    /// Waits until no purchase is running.
    pub(crate) async fn idle(&self) {
        loop {
            let notified = self.idle.notified();
            if self.lock().is_empty() {
                return;
            }
            notified.await;
        }
    }
}

impl RunningGuard {
    /// The purchase's response is durable: it is no longer in flight.
    pub(crate) fn stored(self) {}
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        self.running.lock().remove(&self.id);
        self.running.idle.notify_waiters();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_duplicate_waits_for_the_first_and_is_released_when_it_ends() {
        let f = InFlight::default();
        let Turn::Buy(first) = f.begin("k") else {
            panic!("the first request buys")
        };
        let Turn::Wait(rx) = f.begin("k") else {
            panic!("a duplicate waits")
        };
        assert!(matches!(f.begin("other"), Turn::Buy(_)));
        let waiter = tokio::spawn(wait(rx));
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished());
        drop(first);
        waiter.await.unwrap();
        assert!(
            matches!(f.begin("k"), Turn::Buy(_)),
            "the key is free again"
        );
    }
}
