use std::path::PathBuf;

/// What went wrong while touching the store.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StoreError {
    /// No store location could be derived from the environment.
    #[error("no store location: set CAIRN_STORE or --store, or set HOME or XDG_STATE_HOME")]
    NoLocation,
    /// A file-system operation on a store path failed.
    #[error("{action} {path}: {source}")]
    Io {
        /// What cairn was doing, e.g. "creating directory".
        action: &'static str,
        /// The path it was doing it to.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

impl StoreError {
    pub(crate) fn io(
        action: &'static str,
        path: impl Into<PathBuf>,
        source: std::io::Error,
    ) -> Self {
        StoreError::Io {
            action,
            path: path.into(),
            source,
        }
    }
}
