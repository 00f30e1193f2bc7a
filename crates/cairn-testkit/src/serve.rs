//! What the servers share: a runtime of their own and a loopback listener.

use std::net::SocketAddr;

/// A two-thread runtime named `name` and a listener on `127.0.0.1` at an
/// ephemeral port. Its own runtime lets a server serve blocking tests and
/// async tests alike (the test's runtime may be single-threaded or busy).
///
/// # Panics
/// No thread can be started or no loopback port bound.
pub(crate) fn bind(name: &str) -> (tokio::runtime::Runtime, tokio::net::TcpListener, SocketAddr) {
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name(name)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => panic!("{name}: cannot start its runtime: {e}; the machine is out of threads"),
    };
    let bound = std::net::TcpListener::bind(("127.0.0.1", 0)).and_then(|listener| {
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let _in_runtime = runtime.enter();
        Ok((tokio::net::TcpListener::from_std(listener)?, addr))
    });
    match bound {
        Ok((listener, addr)) => (runtime, listener, addr),
        Err(e) => panic!("{name}: cannot listen on 127.0.0.1: {e}; is the loopback interface up?"),
    }
}
