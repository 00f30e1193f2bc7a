//! The gateway's errors. What a client sees is decided by the server (a
//! status and a JSON body); these are what the library reports.

/// What went wrong in the gateway or its store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum GatewayError {
    /// The response store or the call record failed.
    #[error(transparent)]
    Calls(#[from] cairn_calls::CallsError),
    /// The object pool failed.
    #[error(transparent)]
    Objects(#[from] cairn_objects::ObjectError),
    /// The store failed.
    #[error(transparent)]
    Store(#[from] cairn_store::StoreError),
    /// The session failed.
    #[error(transparent)]
    Session(#[from] cairn_sessions::SessionError),
    /// The journal failed.
    #[error(transparent)]
    Journal(#[from] cairn_journal::JournalError),
    /// The gateway cannot listen where it was told.
    #[error("cannot listen on {addr}: {source}; choose another address with --listen")]
    Listen {
        /// The address.
        addr: String,
        /// Why.
        source: std::io::Error,
    },
    /// The configuration cannot work.
    #[error("{reason}")]
    Config {
        /// What is wrong and what to do.
        reason: String,
    },
    /// A bug: a lock poisoned by a panic, a task that did not finish.
    #[error("internal gateway error: {reason}")]
    Internal {
        /// What happened.
        reason: String,
    },
}
