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
/// server waits for them before it stops, so nothing paid for is dropped.
#[derive(Default)]
pub(crate) struct Running {
    count: std::sync::atomic::AtomicUsize,
    idle: tokio::sync::Notify,
}

/// Held by a running purchase.
pub(crate) struct RunningGuard(Arc<Running>);

impl Running {
    pub(crate) fn start(self: &Arc<Self>) -> RunningGuard {
        self.count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        RunningGuard(self.clone())
    }

    /// Waits until no purchase is running.
    pub(crate) async fn idle(&self) {
        loop {
            let notified = self.idle.notified();
            if self.count.load(std::sync::atomic::Ordering::SeqCst) == 0 {
                return;
            }
            notified.await;
        }
    }
}

impl Drop for RunningGuard {
    fn drop(&mut self) {
        self.0
            .count
            .fetch_sub(1, std::sync::atomic::Ordering::SeqCst);
        self.0.idle.notify_waiters();
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
