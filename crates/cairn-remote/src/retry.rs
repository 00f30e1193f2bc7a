//! The one retry-with-backoff helper of the remote backends: an operation
//! is run again, after a pause that grows with each try, while its failure
//! says another try may succeed (a cluster electing a leader, a lost
//! acknowledgement, another write of the same key in flight); when the
//! tries are used up, the last failure is the answer. Synchronous: the
//! backends' interfaces are, and the pause blocks only the caller.
//!
//! (The model client's retries, in `cairn-model`, are asynchronous, follow
//! a provider's `Retry-After` and add jitter; that crate knows no store.)

use std::time::Duration;

/// How the pause before each retry grows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Growth {
    /// `first × n` before retry `n`.
    Linear,
    /// `first × 2^(n-1)` before retry `n`.
    Doubling,
}

/// How often, and after what pauses, an operation is tried again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Backoff {
    /// Retries after the first try.
    pub(crate) retries: u32,
    /// The pause before the first retry.
    pub(crate) first: Duration,
    /// How the pauses grow.
    pub(crate) growth: Growth,
    /// The longest pause.
    pub(crate) cap: Duration,
}

impl Backoff {
    /// The pause before retry `n` (1-based).
    pub(crate) fn pause(&self, n: u32) -> Duration {
        let n = n.max(1);
        let grown = match self.growth {
            Growth::Linear => self.first.saturating_mul(n),
            Growth::Doubling => self
                .first
                .saturating_mul(1u32.checked_shl(n - 1).unwrap_or(u32::MAX)),
        };
        grown.min(self.cap)
    }

    /// Runs `op` until it succeeds, fails with an error `again` does not
    /// accept, or the retries are used up (then its last error); `op` is
    /// told which try it is (0 for the first).
    pub(crate) fn run<T, E>(
        &self,
        mut op: impl FnMut(u32) -> Result<T, E>,
        again: impl Fn(&E) -> bool,
    ) -> Result<T, E> {
        let mut n = 0;
        loop {
            match op(n) {
                Err(e) if n < self.retries && again(&e) => {
                    n += 1;
                    std::thread::sleep(self.pause(n));
                }
                other => return other,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backoff(growth: Growth) -> Backoff {
        Backoff {
            retries: 3,
            first: Duration::from_millis(1),
            growth,
            cap: Duration::from_millis(3),
        }
    }

    #[test]
    fn pauses_grow_as_said_and_stop_at_the_cap() {
        let linear = backoff(Growth::Linear);
        let pauses: Vec<u128> = (1..=5).map(|n| linear.pause(n).as_millis()).collect();
        assert_eq!(pauses, [1, 2, 3, 3, 3]);
        let doubling = backoff(Growth::Doubling);
        let pauses: Vec<u128> = (1..=5).map(|n| doubling.pause(n).as_millis()).collect();
        assert_eq!(pauses, [1, 2, 3, 3, 3]);
        assert_eq!(doubling.pause(200), Duration::from_millis(3), "no overflow");
    }

    #[test]
    fn an_operation_is_tried_again_only_while_its_error_allows_and_tries_remain() {
        let b = backoff(Growth::Linear);
        let mut tries = Vec::new();
        let got: Result<u32, &str> = b.run(
            |n| {
                tries.push(n);
                if n < 2 {
                    Err("busy")
                } else {
                    Ok(n)
                }
            },
            |e| *e == "busy",
        );
        assert_eq!((got, tries.as_slice()), (Ok(2), &[0, 1, 2][..]));

        let mut count = 0;
        let got: Result<(), &str> = b.run(
            |_| {
                count += 1;
                Err("busy")
            },
            |e| *e == "busy",
        );
        assert_eq!(
            (got, count),
            (Err("busy"), 4),
            "the first try and three retries"
        );

        let mut count = 0;
        let got: Result<(), &str> = b.run(
            |_| {
                count += 1;
                Err("refused")
            },
            |e| *e == "busy",
        );
        assert_eq!(
            (got, count),
            (Err("refused"), 1),
            "a final error is not tried again"
        );
    }
}
