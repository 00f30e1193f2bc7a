//! Journals mirrored to a shared store (DESIGN §12): when a store
//! directory is the local cache of a shared store (`--store nats://…`),
//! every record a [`crate::JournalWriter`] makes durable there is also
//! published to the shared store before the append is acknowledged.
//!
//! # Invariants
//! - A mirror is installed for a store *root* ([`install_mirror`]), so
//!   every writer of that root publishes, however its `Store` value was
//!   made.
//! - A writer publishes after its local `fdatasync` and before it returns;
//!   a publish that fails (a race lost, a server gone) fails the append and
//!   poisons the writer. The records it made durable locally stay in the
//!   cache unacknowledged; the cache is never the truth, and the next sync
//!   from the shared store sets them aside.
//! - [`crate::JournalWriter::append_lines`] does not publish: it writes
//!   lines copied from another copy of the journal, which is how records
//!   come *from* the shared store into its cache.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock, RwLock};

use cairn_store::{RunId, Store};

use crate::RemoteJournalError;

/// Publishes records made durable in a store's cache to its shared store.
pub trait JournalMirror: Send + Sync {
    /// `lines` (whole lines, records `after + 1 ..`) of `run` are durable
    /// in `store`; returns once the shared store acknowledged them, having
    /// first stored there every object and manifest they name.
    ///
    /// # Errors
    /// The records are not acknowledged: refused by the fence (another
    /// writer's records are there), a lease held elsewhere, an object that
    /// could not be uploaded, the server unreachable.
    fn publish(
        &self,
        store: &Store,
        run: &RunId,
        after: u64,
        lines: &[u8],
    ) -> Result<(), RemoteJournalError>;
}

type Mirrors = RwLock<Vec<(PathBuf, Arc<dyn JournalMirror>)>>;

fn mirrors() -> &'static Mirrors {
    static MIRRORS: OnceLock<Mirrors> = OnceLock::new();
    MIRRORS.get_or_init(|| RwLock::new(Vec::new()))
}

/// Makes every journal writer of the store at `root` publish through
/// `mirror` from now on (replacing one installed before).
pub fn install_mirror(root: &Path, mirror: Arc<dyn JournalMirror>) {
    let mut all = mirrors()
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    all.retain(|(r, _)| r != root);
    all.push((root.to_path_buf(), mirror));
}

/// The mirror of the store at `root`, if one is installed.
pub fn mirror_of(root: &Path) -> Option<Arc<dyn JournalMirror>> {
    let all = mirrors()
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    all.iter()
        .find(|(r, _)| r == root)
        .map(|(_, m)| Arc::clone(m))
}
