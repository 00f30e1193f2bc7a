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
//! [`run`] spawns a future there and waits for its answer, from any thread,
//! inside another runtime too (the caller's thread blocks on a channel,
//! never on a runtime).

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
    let (tx, rx) = std::sync::mpsc::sync_channel(1);
    rt.spawn(async move {
        let _ = tx.send(fut.await);
    });
    rx.recv()
        .map_err(|_| BridgeError("a request's task ended without an answer".into()))
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
    fn a_task_that_panics_is_an_error_not_a_hang() {
        let e = run::<()>(async { panic!("boom") }).unwrap_err();
        assert!(e.to_string().contains("without an answer"), "{e}");
    }
}
