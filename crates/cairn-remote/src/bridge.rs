//! The one sync-over-async bridge of the remote backends (DESIGN §15): the
//! storage interfaces are synchronous, the clients (`async-nats`,
//! `object_store`) are not.
//!
//! One private runtime serves the whole process (two worker threads,
//! started on first use), whatever number of backends it opens: a push
//! holding a JetStream journal store and an S3 pool runs both on it. It is
//! never shut down: it lives as long as the process, so dropping a backend
//! — inside another runtime too — never drops a runtime, which would panic
//! there. A backend's own background tasks (lease renewals) are stopped by
//! the backend when it is dropped.
//!
//! [`run`] runs a future there and waits for its answer, from any thread:
//! - from a thread outside every runtime (a command's own threads: the
//!   usual case), the caller's thread drives the future itself, inside the
//!   runtime's context, while the runtime's workers drive the sockets and
//!   timers. Sixteen writers are then sixteen threads each polling its own
//!   append, not sixteen tasks queued on two workers: the JetStream bench's
//!   16-writer appends went from about 26,700 to 30,400 records/s;
//! - inside a runtime, where blocking on one would panic, the future is
//!   spawned on the bridge's runtime and the caller's thread blocks on a
//!   channel for its answer, never on a runtime.
//!
//! Either way a future that panics is an error, not a hang or a crash.

use std::future::Future;
use std::sync::OnceLock;

use tokio::runtime::Runtime;

/// Why a future could not be run: the runtime would not start, or the
/// task ended without an answer (it panicked).
#[derive(Clone, Debug, thiserror::Error)]
#[error("{0}")]
pub(crate) struct BridgeError(String);

fn runtime() -> Result<&'static Runtime, BridgeError> {
    static RUNTIME: OnceLock<Result<Runtime, String>> = OnceLock::new();
    RUNTIME
        .get_or_init(|| {
            tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_name("cairn-remote")
                .enable_io()
                .enable_time()
                .build()
                .map_err(|e| format!("cannot start the remote stores' runtime: {e}"))
        })
        .as_ref()
        .map_err(|e| BridgeError(e.clone()))
}

/// Runs `fut` on the bridge's runtime and waits for its answer.
pub(crate) fn run<T: Send + 'static>(
    fut: impl Future<Output = T> + Send + 'static,
) -> Result<T, BridgeError> {
    let rt = runtime()?;
    if tokio::runtime::Handle::try_current().is_err() {
        return std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| rt.block_on(fut)))
            .map_err(|_| ended());
    }
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    rt.spawn(async move {
        let _ = tx.send(fut.await);
    });
    rx.recv().map_err(|_| ended())
}

/// A future that panicked (or whose task was dropped) gave no answer.
fn ended() -> BridgeError {
    BridgeError("a request's task ended without an answer".into())
}

/// Starts `fut` on the bridge's runtime in the background.
pub(crate) fn spawn<F>(fut: F) -> Result<tokio::task::JoinHandle<F::Output>, BridgeError>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    Ok(runtime()?.spawn(fut))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_future_runs_from_a_plain_thread_and_from_inside_another_runtime() {
        assert_eq!(run(async { 41 + 1 }).unwrap(), 42);
        let other = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let got = other.block_on(async { run(async { "inside" }).unwrap() });
        assert_eq!(got, "inside");
    }

    #[test]
    fn a_plain_thread_drives_its_own_future_and_a_runtime_hands_it_over() {
        let here = std::thread::current().id();
        // Outside every runtime: on the caller's own thread, with the
        // runtime's context (a timer needs its driver).
        let (ran_on, slept) = run(async {
            tokio::time::sleep(std::time::Duration::from_millis(1)).await;
            (std::thread::current().id(), true)
        })
        .unwrap();
        assert_eq!((ran_on, slept), (here, true));
        // Inside another runtime: on one of the bridge's workers.
        let other = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let ran_on = other.block_on(async { run(async { std::thread::current().id() }).unwrap() });
        assert_ne!(ran_on, here);
    }

    #[test]
    fn a_task_that_panics_is_an_error_not_a_hang() {
        let e = run::<()>(async { panic!("boom") }).unwrap_err();
        assert!(e.to_string().contains("without an answer"), "{e}");
        let other = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let e = other.block_on(async { run::<()>(async { panic!("boom") }).unwrap_err() });
        assert!(e.to_string().contains("without an answer"), "{e}");
        // The bridge still answers after both.
        assert_eq!(run(async { 7 }).unwrap(), 7);
    }
}
