//! Capture settings. The library reads no environment: the binary turns
//! `CAIRN_WORKSPACE_MAX_FILE_MB` and `CAIRN_WORKSPACE_MAX_FILES` into a
//! [`CaptureConfig`].

use std::time::Duration;

use cairn_objects::ChunkConfig;

/// How captures behave. Build with [`CaptureConfig::default`] and the setters.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct CaptureConfig {
    /// Files larger than this are skipped and reported. Default: 32 MiB.
    pub max_file_bytes: u64,
    /// More files than this to capture refuses the capture. Default: 50,000.
    pub max_files: usize,
    /// The racy window: a stat-cache entry whose file times are not older
    /// than the previous capture's start minus this is re-hashed. Default:
    /// 2 s (covers 1-2 s timestamp granularity and coarse clocks).
    pub racy_slack: Duration,
    /// Compare ctime as well as mtime in the stat cache. Default: true.
    pub trust_ctime: bool,
    /// Apply cairn's default excludes: by name (`node_modules`, `__pycache__`
    /// …) and by evidence (a directory holding a `CACHEDIR.TAG`, such as
    /// cargo's `target/`, or a `pyvenv.cfg`).
    /// Default: true.
    pub default_excludes: bool,
    /// Files larger than this are stored as content-defined chunks, so a
    /// small edit to a big file stores only the chunks it touched (see
    /// `cairn_objects::ChunkConfig`). Default: 1 MiB; never below one
    /// maximum chunk (256 KiB).
    pub chunk_threshold: u64,
}

impl CaptureConfig {
    /// The default per-file limit in MiB (`CAIRN_WORKSPACE_MAX_FILE_MB`).
    pub const DEFAULT_MAX_FILE_MB: u64 = 32;
    /// The default file-count limit (`CAIRN_WORKSPACE_MAX_FILES`).
    pub const DEFAULT_MAX_FILES: usize = 50_000;

    /// Sets the per-file limit in MiB.
    pub fn max_file_mb(mut self, mb: u64) -> Self {
        self.max_file_bytes = mb.saturating_mul(1 << 20);
        self
    }

    /// Sets the per-file limit in bytes.
    pub fn max_file_bytes(mut self, bytes: u64) -> Self {
        self.max_file_bytes = bytes;
        self
    }

    /// Sets the file-count limit: more files than this to capture refuses
    /// the capture with [`crate::WorkspaceError::TooManyFiles`]. Default:
    /// [`CaptureConfig::DEFAULT_MAX_FILES`]; the binary reads it from
    /// `CAIRN_WORKSPACE_MAX_FILES`.
    pub fn max_files(mut self, n: usize) -> Self {
        self.max_files = n;
        self
    }

    /// Sets the racy window.
    pub fn racy_slack(mut self, d: Duration) -> Self {
        self.racy_slack = d;
        self
    }

    /// Sets whether ctime is compared.
    pub fn trust_ctime(mut self, yes: bool) -> Self {
        self.trust_ctime = yes;
        self
    }

    /// Sets whether the default excludes apply.
    pub fn default_excludes(mut self, yes: bool) -> Self {
        self.default_excludes = yes;
        self
    }

    /// Sets the size above which files are stored as chunks.
    pub fn chunk_threshold(mut self, bytes: u64) -> Self {
        self.chunk_threshold = ChunkConfig::default().threshold(bytes).threshold;
        self
    }

    /// The object pool's chunking for these settings.
    pub(crate) fn chunking(&self) -> ChunkConfig {
        ChunkConfig::default().threshold(self.chunk_threshold)
    }
}

impl Default for CaptureConfig {
    fn default() -> Self {
        CaptureConfig {
            max_file_bytes: Self::DEFAULT_MAX_FILE_MB << 20,
            max_files: Self::DEFAULT_MAX_FILES,
            racy_slack: Duration::from_secs(2),
            trust_ctime: true,
            default_excludes: true,
            chunk_threshold: ChunkConfig::DEFAULT_THRESHOLD,
        }
    }
}
