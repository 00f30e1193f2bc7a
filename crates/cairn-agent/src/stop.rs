//! Stop requests: the first asks the loop to finish what is in flight and
//! suspend; the second to stop at once.

use tokio::sync::watch;

/// How hard the user asked to stop.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum StopLevel {
    /// Keep going.
    None,
    /// Finish the model call or tool in flight, then suspend.
    Graceful,
    /// Stop now; the call in flight is abandoned.
    Immediate,
}

/// The sending side, held by whoever watches signals.
#[derive(Clone, Debug)]
pub struct StopHandle(watch::Sender<StopLevel>);

/// The receiving side, held by the loop.
#[derive(Clone, Debug)]
pub struct Stop(watch::Receiver<StopLevel>);

/// A connected pair.
pub fn stop_pair() -> (StopHandle, Stop) {
    let (tx, rx) = watch::channel(StopLevel::None);
    (StopHandle(tx), Stop(rx))
}

impl StopHandle {
    /// Escalates one step: none → graceful → immediate. Returns the new level.
    pub fn escalate(&self) -> StopLevel {
        let mut level = StopLevel::None;
        self.0.send_modify(|l| {
            *l = match *l {
                StopLevel::None => StopLevel::Graceful,
                _ => StopLevel::Immediate,
            };
            level = *l;
        });
        level
    }

    /// The level asked for so far.
    pub fn level(&self) -> StopLevel {
        *self.0.borrow()
    }
}

impl Stop {
    /// The current level.
    pub fn level(&self) -> StopLevel {
        *self.0.borrow()
    }

    /// Resolves when an immediate stop is requested (never, if the sender is gone).
    pub async fn immediate(&mut self) {
        if self
            .0
            .wait_for(|l| *l == StopLevel::Immediate)
            .await
            .is_err()
        {
            std::future::pending::<()>().await;
        }
    }
}
