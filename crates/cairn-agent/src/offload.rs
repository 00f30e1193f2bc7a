//! Workspace captures off the async runtime, abandoned by an immediate stop.
//!
//! A capture walks, hashes and stores the whole workspace: seconds on a big
//! tree. Run inline, it held up the runtime that watches for stop requests,
//! so a Ctrl-C did nothing until it returned and a second one was folded
//! into the first. Here each capture runs on a thread of its own while the
//! loop waits for it or for an immediate stop, whichever comes first.
//!
//! Invariants:
//! 1. Captures stay in journal order: the loop waits for each one before it
//!    journals anything after it, and never starts one while another is
//!    running (the tracker is on that capture's thread meanwhile).
//! 2. Only a capture in flight when an immediate stop comes is abandoned.
//!    One that starts after it (the `fail:` or `resume:` that closes an
//!    interrupted turn or question) is awaited: the record needs it, and no
//!    stronger request can come.
//! 3. An abandoned capture journals nothing: it is as if the process had
//!    stopped in the middle of it, which the tracker survives (DESIGN §5).
//!    Its thread hands the tracker back when it ends; the next capture in
//!    this process waits for that, unless a stop at once is asked for (then
//!    it is skipped), and a process that exits meanwhile does not wait for
//!    it.
//! 4. Versioning never stops silently: when an abandoned capture ended
//!    versioning, the next capture reports that instead of capturing.

use tokio::sync::oneshot;

use cairn_workspace::{Label, Manifest};

use crate::boundaries::{Boundaries, Stopped, Taken};
use crate::stop::{Stop, StopLevel};

/// What a capture gives: the boundary taken (none without a tracker), or
/// where and why versioning stopped.
pub(crate) type Captured = Result<Option<Taken>, Stopped>;

/// Which boundary to take.
// One at a time, moved once to its thread: its size does not matter.
#[allow(clippy::large_enum_variant)]
pub(crate) enum Work {
    /// `pre:turn:N`.
    Pre(u64),
    /// A capture under a label (post, fail, pause, resume); for a run with
    /// no snapshot of its own yet, compared against `base`.
    Capture(Label, Result<Option<Manifest>, String>),
}

impl Work {
    fn label(&self) -> String {
        match self {
            Work::Pre(n) => format!("pre:turn:{n}"),
            Work::Capture(l, _) => l.to_string(),
        }
    }

    fn run(self, b: &mut Boundaries) -> Captured {
        match self {
            Work::Pre(n) => b.pre(n),
            Work::Capture(label, base) => b.capture_since(label, base),
        }
    }
}

/// The run's boundaries, here or on the thread of a capture in flight.
pub(crate) struct Offloaded {
    here: Option<Boundaries>,
    /// A capture abandoned by an immediate stop, still running.
    away: Option<oneshot::Receiver<(Boundaries, Captured)>>,
    /// Versioning stopped in an abandoned capture, not reported yet.
    unreported: Option<Stopped>,
    /// Test only: every capture stalls for good, announced on stderr.
    stall: bool,
}

impl Offloaded {
    pub(crate) fn new(b: Boundaries) -> Self {
        Offloaded {
            here: Some(b),
            away: None,
            unreported: None,
            stall: false,
        }
    }

    /// Makes every capture stall for good after saying so on stderr
    /// (`cairn: fault: the capture at LABEL stalls`); tests only.
    pub(crate) fn stall(&mut self, on: bool) {
        self.stall = on;
    }

    /// Takes a boundary on a thread of its own. `None` when an immediate
    /// stop abandoned it (or the tracker is still with one it abandoned):
    /// nothing of the capture is to be journaled.
    pub(crate) async fn take(&mut self, work: Work, stop: &mut Stop) -> Option<Captured> {
        if !self.reclaim(stop).await {
            return None;
        }
        let abandonable = stop.level() != StopLevel::Immediate;
        if let Some(stopped) = self.unreported.take() {
            return Some(Err(stopped));
        }
        let mut b = match self.here.take() {
            Some(b) if b.tracking() => b,
            other => {
                self.here = other;
                return Some(Ok(None));
            }
        };
        let at = work.label();
        let stall = self.stall;
        let (tx, mut rx) = oneshot::channel();
        let spawned = std::thread::Builder::new()
            .name("cairn-capture".into())
            .spawn(move || {
                if stall {
                    stall_for_good(&work.label());
                }
                let captured = work.run(&mut b);
                let _ = tx.send((b, captured));
            });
        if let Err(e) = spawned {
            // The tracker went with the thread that never started.
            return Some(Err(lost(
                at,
                &format!("no thread could be started for it ({e})"),
            )));
        }
        let back = if abandonable {
            tokio::select! {
                back = &mut rx => back,
                _ = stop.immediate() => {
                    self.away = Some(rx);
                    return None;
                }
            }
        } else {
            rx.await
        };
        Some(match back {
            Ok((b, captured)) => {
                self.here = Some(b);
                captured
            }
            Err(_) => Err(lost(at, "its thread panicked")),
        })
    }

    /// Whether this run has captured anything yet; `None` when an immediate
    /// stop came first.
    pub(crate) async fn has_own_snapshots(&mut self, stop: &mut Stop) -> Option<bool> {
        if !self.reclaim(stop).await {
            return None;
        }
        Some(
            self.here
                .as_ref()
                .is_some_and(Boundaries::has_own_snapshots),
        )
    }

    /// Waits for an abandoned capture to hand the tracker back; false when
    /// an immediate stop came first.
    async fn reclaim(&mut self, stop: &mut Stop) -> bool {
        let Some(rx) = self.away.as_mut() else {
            return true;
        };
        let back = tokio::select! {
            back = rx => back,
            _ = stop.immediate() => return false,
        };
        self.away = None;
        match back {
            Ok((b, captured)) => {
                self.here = Some(b);
                self.unreported = captured.err();
            }
            Err(_) => {
                self.unreported = Some(lost("an abandoned capture".into(), "its thread panicked"))
            }
        }
        true
    }
}

/// Versioning stopped because the tracker was lost with a capture's thread.
fn lost(at: String, why: &str) -> Stopped {
    Stopped {
        at,
        reason: format!(
            "the workspace capture failed: {why}; the workspace is no longer captured in this process, so a rewind cannot undo what follows"
        ),
    }
}

#[cfg(feature = "fault-injection")]
fn stall_for_good(label: &str) {
    eprintln!("cairn: fault: the capture at {label} stalls");
    loop {
        std::thread::park();
    }
}

#[cfg(not(feature = "fault-injection"))]
fn stall_for_good(_label: &str) {}
