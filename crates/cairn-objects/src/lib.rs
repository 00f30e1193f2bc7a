//! cairn's store-global object pool: content-addressed, compressed, durable.
//!
//! Every file a run writes is kept once per content, however many snapshots
//! or runs name it (DESIGN §5.1). An object lives at
//! `<store>/objects/<aa>/<62 more hex digits>`, where the 64 digits are the
//! SHA-256 of its plain bytes; the file holds a 16-byte header and the bytes
//! compressed with zstd (format in `DESIGN.md` beside this crate).
//!
//! # Guarantees
//! - An object appears complete or not at all: it is written under a
//!   temporary name in its own directory, fsynced, renamed, and the directory
//!   fsynced. Storing content that is already present writes nothing.
//! - Reads check the content against the name: [`ObjectPool::get`],
//!   [`ObjectPool::read_to`] and [`ObjectPool::verify`] report a damaged
//!   object as [`ObjectError::Corrupt`], never return wrong bytes silently
//!   (a streaming reader learns it at the end and must discard what it got).
//! - Large files ([`ObjectPool::put_file`] above [`ChunkConfig::threshold`],
//!   1 MiB by default) are cut into content-defined chunks (FastCDC 2020,
//!   16/64/256 KiB) stored as blobs, plus a chunk list under the hash of the
//!   whole content, so a small edit to a big file stores only the chunks it
//!   touched, and manifests name files by their SHA-256 either way. Reads
//!   reassemble transparently, verifying every chunk before passing its
//!   bytes on and the whole at the end; [`ObjectPool::check`] names every
//!   bad chunk. A visible chunk list only names durable chunks.
//! - [`ObjectBatch`] gives group commit: many objects, one barrier, and only
//!   after [`ObjectBatch::commit`] may a manifest name them.
//! - [`prune`] keeps every object any [`ManifestSource`] names and every
//!   chunk of those that are chunk lists, deletes nothing when a manifest or
//!   a live chunk list cannot be read, and holds the [`StoreLock`] exclusively.
//!   Every write needs the lock (the put and batch methods take a
//!   `&StoreLock`), which writers hold shared until their manifest is
//!   durable, so prune never races a capture.
//! - No symbolic link below the store's root is followed: `objects/`, its
//!   fan-out directories and the object files are reached beneath the
//!   root's descriptor, and a link there is refused
//!   ([`ObjectError::NotPlain`], naming it) by reads, puts and prune alike.
//! - Objects move to and from a store elsewhere ([`RemoteObjects`], e.g.
//!   S3 in `cairn-remote`) as their stored bytes: [`upload`] sends chunks
//!   before their list and never overwrites; [`fetch_missing`] verifies
//!   every object against its name before any of it becomes visible
//!   ([`ObjectPool::import_stored`]). Objects are uploaded before a record
//!   naming them is published.
//!
//! # Not guaranteed
//! - Objects are not encrypted, and the hash proves integrity, not origin.
//! - The store lock is advisory: a program other than cairn that deletes
//!   files in the pool is not stopped.
//! - A streaming read of a damaged object has already produced bytes when the
//!   damage is detected.
//!
//! No async, no networking; [`ObjectBatch::commit`] and the transfers use a
//! few short-lived IO threads. Progress goes to a [`Progress`] you pass in; nothing is drawn.
//!
//! # Example
//! ```
//! use cairn_objects::{prune, ManifestSource, NoProgress, ObjectHash, ObjectPool,
//!                     PruneOptions, SourceError, StoreLock};
//! use cairn_store::Store;
//!
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::open(dir.path()).unwrap();
//! let pool = ObjectPool::open(&store).unwrap();
//!
//! // Writers hold the store lock shared until their manifest is durable.
//! let lock = StoreLock::shared(&store).unwrap();
//! let kept = pool.put_bytes(&lock, b"named by a manifest").unwrap();
//! let lost = pool.put_bytes(&lock, b"named by nothing").unwrap();
//! assert!(kept.new && !pool.put_bytes(&lock, b"named by a manifest").unwrap().new);
//! assert_eq!(pool.get(&kept.hash).unwrap(), b"named by a manifest");
//! drop(lock);
//!
//! struct One(ObjectHash);
//! impl ManifestSource for One {
//!     fn name(&self) -> String { "example".into() }
//!     fn referenced(&self, mark: &mut dyn FnMut(ObjectHash)) -> Result<(), SourceError> {
//!         mark(self.0);
//!         Ok(())
//!     }
//! }
//! let report = prune(&pool, &[&One(kept.hash)], &PruneOptions::new(), &NoProgress).unwrap();
//! assert_eq!(report.objects, 1);
//! assert!(pool.contains(&kept.hash) && !pool.contains(&lost.hash));
//! ```
#![deny(missing_docs)]

mod barrier;
mod batch;
mod chunk;
mod chunked_put;
mod chunked_read;
mod dirs;
mod error;
mod format;
mod hash;
mod lock;
mod pool;
mod progress;
mod prune;
mod remote;
mod remote_prune;
mod stored;

pub use barrier::Barrier;
pub use batch::{BatchReport, ObjectBatch};
pub use chunk::{
    ChunkConfig, ChunkRef, Chunker, AVG_CHUNK, BODY_AVG_CHUNK, BODY_MAX_CHUNK, BODY_MIN_CHUNK,
    MAX_CHUNK, MIN_CHUNK,
};
pub use chunked_read::{BadObject, ObjectCheck};
pub use error::{ObjectError, RemoteError, SourceError};
pub use format::ObjectKind;
pub use hash::{HashParseError, ObjectHash};
pub use lock::{LockMode, StoreLock};
pub use pool::{open_nofollow, ObjectInfo, ObjectPool, Put, POOL_FORMAT};
pub use progress::{NoProgress, Phase, Progress};
pub use prune::{prune, ManifestSource, PruneOptions, PruneReport};
pub use remote::{
    fetch_missing, upload, PoolRemote, PutOutcome, RemoteEntry, RemoteFiles, RemoteObjects,
    TransferReport,
};
pub use remote_prune::{prune_remote, RemotePruneReport};
