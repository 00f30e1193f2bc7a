//! Reclaiming disk in a store directory (DESIGN §5.6): what keeps an object
//! of its pool alive, and the one prune that counts all of it.
//!
//! The prune roots — an object named by any of them is kept:
//! 1. snapshot manifests (every workspace version of every session);
//! 2. checkpoint manifests;
//! 3. stored model responses: the request and response bodies the response
//!    store can serve again instead of buying a call twice;
//! 4. journaled model calls: the bodies a `model_call` record names even
//!    when no response is stored (a failed or cut call), which `cairn
//!    verify` checks and `cairn push` carries.
//!
//! [`prune`] is the only way this crate offers to prune a store directory,
//! so no caller can forget a root and delete live data. A shared store's
//! prune ([`crate::Shared::prune`]) names its objects from the sessions
//! themselves, under the pool's lease.

use cairn_calls::{JournaledCalls, ResponseStore};
use cairn_checkpoint::CheckpointManifests;
use cairn_objects::{ManifestSource, ObjectPool, Progress, PruneOptions, PruneReport};
use cairn_store::Store;
use cairn_workspace::SnapshotManifests;

use crate::SessionError;

/// Deletes every object of `store`'s pool that no prune root (module doc)
/// names, by `options` (a dry run counts instead); `progress` hears the
/// objects scanned and removed.
///
/// # Errors
/// A root that cannot be read (nothing is deleted then: an unreadable root
/// might name anything), the store lock held by a capture when `options`
/// do not wait, IO errors.
pub fn prune(
    store: &Store,
    options: &PruneOptions,
    progress: &dyn Progress,
) -> Result<PruneReport, SessionError> {
    let pool = ObjectPool::open(store)?;
    let snapshots = SnapshotManifests::new(store);
    let checkpoints = CheckpointManifests::new(store);
    let responses = ResponseStore::new(store);
    let calls = JournaledCalls::new(store);
    let roots: [&dyn ManifestSource; 4] = [&snapshots, &checkpoints, &responses, &calls];
    Ok(cairn_objects::prune(&pool, &roots, options, progress)?)
}
