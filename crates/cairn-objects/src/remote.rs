//! Objects in a content-addressed store elsewhere (DESIGN §12): the
//! interface a remote backend implements, and the two transfers built on it.
//!
//! A remote holds objects under their names, as the pool does, each as its
//! **stored encoding** (the pool's file, header and compressed body, byte
//! for byte: [`ObjectPool::stored_bytes`]), so compression and chunk lists
//! survive the round trip and both ends hold the same bytes. The S3 backend
//! lives in `cairn-remote`; this crate has no networking and no async: the
//! trait is synchronous, and a backend that needs a runtime owns one.
//!
//! # The rule
//! **Objects are uploaded before any record naming them is published, and
//! fetched on demand, verified by hash, before anything is read from them.**
//! A caller that publishes a record (a journal record, a manifest, an index
//! entry) naming objects calls [`upload`] with every object the record names
//! and publishes only after it returned `Ok`; one that restores or forks
//! from a record calls [`fetch_missing`] for what the record names before it
//! reads any of it.
//!
//! # Invariants
//! 1. **Create-only.** A backend's [`RemoteObjects::put_create`] never
//!    overwrites: an object already there is a successful dedup
//!    ([`PutOutcome::AlreadyThere`]). Names are hashes, so what is there
//!    is meant to be the same object; it is not compared on upload, and a
//!    damaged copy is found when it is fetched (then delete that key by
//!    hand and upload again from a store that holds the object intact).
//! 2. **Chunks before their list.** [`upload`] sends a chunk list only after
//!    every chunk it names is on the remote (sent, or found there), so on
//!    the remote as in the pool "the list is there" implies "its chunks are
//!    there", and a later upload skips a present list without looking at its
//!    chunks. A failed upload may leave chunks without their list, or
//!    objects no record names: harmless, the next upload sends only what is
//!    missing, and a prune of the shared pool removes what nothing names.
//! 3. **Present objects are not read.** [`upload`] asks
//!    [`RemoteObjects::contains`] first and neither reads nor sends an
//!    object the remote has; [`fetch_missing`] fetches only what the pool
//!    lacks. Repeating either moves nothing.
//! 4. **Only what is sent is checked, and it is checked first.** [`upload`]
//!    checks the stored bytes of every object it sends as the receiving end
//!    will (a blob's content hashes to its name; a chunk list's list is
//!    sound and its chunks are blobs of the lengths it gives), so a damaged
//!    local object is reported as [`ObjectError::Corrupt`] and never
//!    published.
//! 5. **Nothing unverified becomes visible.** [`fetch_missing`] checks every
//!    fetched object before it is staged (rules in `stored.rs`:
//!    [`ObjectBatch::import_stored`]); the blobs and chunks of one fetch are
//!    committed together, so one that does not verify
//!    ([`ObjectError::FetchedCorrupt`]) or is absent
//!    ([`ObjectError::RemoteMissing`]) leaves nothing of the fetch in the
//!    pool. Chunk lists are committed after, each only once its chunks are
//!    durable in the pool and their concatenation hashes to its name; a list
//!    that fails that last check is not imported, and its chunks stay as
//!    unreferenced objects that the next local prune removes.
//!
//! # Not guaranteed
//! - The remote's durability is its own: an acknowledged put is as durable
//!   as the backend says (S3: stored). Nothing here makes a remote object
//!   survive a prune of the shared pool that does not see a record naming
//!   it; that needs the leases and grace period of DESIGN §12.
//! - The hash proves integrity, not origin; objects are not encrypted.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::SystemTime;

use crate::chunk::ChunkRef;
use crate::error::RemoteError;
use crate::format::ObjectKind;
use crate::stored::{check_stored, fetched_fault, not_a_chunk, Checked, Fault};
use crate::{ObjectError, ObjectHash, ObjectPool, Phase, Progress, StoreLock};

/// Transfers in flight at once: remote stores are latency-bound, so more
/// requests than cores pay off.
const TRANSFER_THREADS: usize = 8;

/// What a create-only put did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PutOutcome {
    /// The object was stored under its name.
    Created,
    /// An object was there already under that name; nothing was written.
    AlreadyThere,
}

/// One object a remote holds, as its listing gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RemoteEntry {
    /// The object's name.
    pub hash: ObjectHash,
    /// The length of its stored encoding.
    pub stored_bytes: u64,
    /// When the remote last wrote it, when the remote says (a prune of a
    /// shared pool keeps objects younger than its grace period).
    pub last_modified: Option<SystemTime>,
}

/// A content-addressed object store elsewhere: what a remote backend
/// implements. Every method is synchronous and may be called from several
/// threads at once; bytes are an object's stored encoding, never checked by
/// the backend (the callers check them, see the module notes).
pub trait RemoteObjects: Send + Sync {
    /// The store in words, for messages: its URL, without credentials.
    fn name(&self) -> &str;

    /// True when an object named `hash` is there (its bytes are not read).
    ///
    /// # Errors
    /// The backend cannot answer; its message says why and what to do.
    fn contains(&self, hash: &ObjectHash) -> Result<bool, RemoteError>;

    /// Stores `stored` under `hash` unless an object of that name is there;
    /// never overwrites.
    ///
    /// # Errors
    /// The backend cannot store it.
    fn put_create(&self, hash: &ObjectHash, stored: &[u8]) -> Result<PutOutcome, RemoteError>;

    /// The stored bytes under `hash`, `None` when there is no such object.
    ///
    /// # Errors
    /// The backend cannot answer (a missing object is not an error).
    fn get(&self, hash: &ObjectHash) -> Result<Option<Vec<u8>>, RemoteError>;

    /// Calls `visit` for every object whose name starts with `hex_prefix`
    /// (lowercase hex digits; empty for all), in no particular order.
    /// Entries that are not objects (foreign keys) are skipped.
    ///
    /// # Errors
    /// The backend cannot list; some entries may have been visited.
    fn list(&self, hex_prefix: &str, visit: &mut dyn FnMut(RemoteEntry))
        -> Result<(), RemoteError>;

    /// The first `n` stored bytes under `hash` (all of them when it is
    /// shorter), `None` when there is no such object. The default reads the
    /// whole object; a backend that can read a range overrides it.
    ///
    /// # Errors
    /// As [`RemoteObjects::get`].
    fn get_head(&self, hash: &ObjectHash, n: usize) -> Result<Option<Vec<u8>>, RemoteError> {
        Ok(self.get(hash)?.map(|mut b| {
            b.truncate(n);
            b
        }))
    }

    /// Deletes the object `hash` (a missing one is not an error): what a
    /// prune of a shared pool does. The default refuses.
    ///
    /// # Errors
    /// The backend cannot delete.
    fn delete(&self, hash: &ObjectHash) -> Result<(), RemoteError> {
        Err(format!("{} does not delete objects ({hash})", self.name()).into())
    }
}

/// Small named files kept beside a remote's objects: the snapshot and
/// checkpoint manifests of sessions copied there, under the path they
/// have below a store's root (`runs/<id>/workspace/snapshots/<s>.json`,
/// `checkpoints/<c>.json`). Puts are create-only, as for objects: a
/// manifest, once written, is never replaced.
pub trait RemoteFiles: Send + Sync {
    /// The file at `rel`, `None` when there is none.
    ///
    /// # Errors
    /// The backend cannot answer (a missing file is not an error).
    fn get_file(&self, rel: &str) -> Result<Option<Vec<u8>>, RemoteError>;

    /// Stores `bytes` at `rel` unless a file is there; never overwrites.
    ///
    /// # Errors
    /// The backend cannot store it.
    fn put_file(&self, rel: &str, bytes: &[u8]) -> Result<PutOutcome, RemoteError>;

    /// The names of the files directly in the directory `rel`, sorted.
    ///
    /// # Errors
    /// The backend cannot list.
    fn list_files(&self, rel: &str) -> Result<Vec<String>, RemoteError>;

    /// The paths of every file below the directory `rel`, at any depth,
    /// relative to it (`a/b.json`), sorted: one listing where a store can
    /// list a tree in one go.
    ///
    /// # Errors
    /// The backend cannot list.
    fn list_tree(&self, rel: &str) -> Result<Vec<String>, RemoteError>;
}

/// Totals of an [`upload`] or a [`fetch_missing`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct TransferReport {
    /// Objects copied to the destination (chunks included).
    pub objects: u64,
    /// Their stored bytes.
    pub bytes: u64,
    /// Objects found at the destination already, and not read. The chunks of
    /// a chunk list found there are not looked at, so not counted.
    pub present: u64,
}

#[derive(Default)]
struct Totals {
    objects: AtomicU64,
    bytes: AtomicU64,
    present: AtomicU64,
}

impl Totals {
    fn moved(&self, bytes: u64) {
        self.objects.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }

    fn present(&self) {
        self.present.fetch_add(1, Ordering::Relaxed);
    }

    fn report(&self) -> TransferReport {
        TransferReport {
            objects: self.objects.load(Ordering::Relaxed),
            bytes: self.bytes.load(Ordering::Relaxed),
            present: self.present.load(Ordering::Relaxed),
        }
    }
}

/// A chunk list on its way, with the entries it names.
struct List {
    hash: ObjectHash,
    bytes: Vec<u8>,
    checked: Checked,
}

/// Uploads to `remote` every object named in `hashes` that it lacks and,
/// for each of those that is a chunk list, every chunk it names that the
/// remote lacks, chunks before their list (module notes, invariants 2–4).
/// Call it before publishing any record that names these objects, and
/// publish only when it returns `Ok`. Progress: [`Phase::Upload`].
///
/// # Errors
/// [`ObjectError::Missing`] when a named object or one of its chunks is not
/// in the pool; [`ObjectError::Corrupt`] or [`ObjectError::NewerFormat`]
/// for a local object that does not check out (nothing of it is sent);
/// [`ObjectError::Remote`] when the backend fails. Objects sent before the
/// error stay on the remote (harmless, see invariant 2).
pub fn upload(
    pool: &ObjectPool,
    remote: &dyn RemoteObjects,
    hashes: &[ObjectHash],
    progress: &dyn Progress,
) -> Result<TransferReport, ObjectError> {
    let named = distinct(hashes);
    let totals = Totals::default();
    progress.begin(Phase::Upload, None);
    let send = |hash: &ObjectHash, bytes: &[u8]| -> Result<(), ObjectError> {
        let outcome = remote
            .put_create(hash, bytes)
            .map_err(|source| remote_error("uploading", hash, remote, source))?;
        match outcome {
            PutOutcome::Created => {
                totals.moved(bytes.len() as u64);
                progress.advance(Phase::Upload, 1, bytes.len() as u64);
            }
            PutOutcome::AlreadyThere => totals.present(),
        }
        Ok(())
    };
    // 1. The named objects the remote lacks, read and checked: blobs are
    //    sent at once, chunk lists wait for their chunks.
    let lists = parallel(&named, |hash| {
        if remote_contains(remote, hash)? {
            totals.present();
            return Ok(None);
        }
        let bytes = pool.stored_bytes(hash)?;
        let checked = check_stored(hash, &bytes).map_err(|f| local_fault(pool, hash, f))?;
        if checked.kind == ObjectKind::ChunkList {
            return Ok(Some(List {
                hash: *hash,
                bytes,
                checked,
            }));
        }
        send(hash, &bytes).map(|()| None)
    })?;
    let lists: Vec<List> = lists.into_iter().flatten().collect();
    // 2. Their chunks that the remote lacks.
    let chunks = chunks_of(&lists, &named);
    parallel(&chunks, |(c, of)| {
        if remote_contains(remote, &c.hash)? {
            totals.present();
            return Ok(());
        }
        let bytes = pool.stored_bytes(&c.hash)?;
        let checked = check_stored(&c.hash, &bytes).map_err(|f| local_fault(pool, &c.hash, f))?;
        if let Some(reason) = not_a_chunk(&checked, c, of) {
            return Err(ObjectError::Corrupt {
                hash: c.hash,
                path: pool.path_of(&c.hash),
                reason,
            });
        }
        send(&c.hash, &bytes)
    })?;
    // 3. Only now the lists: every chunk they name is on the remote.
    parallel(&lists, |l| send(&l.hash, &l.bytes))?;
    progress.end(Phase::Upload);
    Ok(totals.report())
}

/// Fetches from `remote` every object named in `hashes` that the pool
/// lacks, and the chunks of those that are chunk lists, checks each against
/// its name and imports it the pool's durable way (module notes, invariant
/// 5). After it returns `Ok`, every named object can be read from the pool.
/// `lock` is held by the caller (shared) until the manifest or record naming
/// the objects is durable, as for any write. Progress: [`Phase::Fetch`],
/// then [`Phase::Store`] for each of the two commits.
///
/// # Errors
/// [`ObjectError::RemoteMissing`] when the remote lacks an object;
/// [`ObjectError::FetchedCorrupt`] or [`ObjectError::FetchedNewer`] when one
/// does not check out (no blob or chunk of this fetch is then imported);
/// [`ObjectError::Remote`] when the backend fails; IO errors of the pool.
pub fn fetch_missing(
    pool: &ObjectPool,
    lock: &StoreLock,
    remote: &dyn RemoteObjects,
    hashes: &[ObjectHash],
    progress: &dyn Progress,
) -> Result<TransferReport, ObjectError> {
    let named = distinct(hashes);
    let totals = Totals::default();
    let origin = remote.name();
    let (wanted, here): (Vec<ObjectHash>, Vec<ObjectHash>) =
        named.iter().partition(|h| !pool.contains(h));
    for _ in &here {
        totals.present();
    }
    if wanted.is_empty() {
        return Ok(totals.report());
    }
    progress.begin(Phase::Fetch, None);
    let fetch = |hash: &ObjectHash| -> Result<Vec<u8>, ObjectError> {
        let bytes = remote
            .get(hash)
            .map_err(|source| remote_error("fetching", hash, remote, source))?
            .ok_or_else(|| ObjectError::RemoteMissing {
                hash: *hash,
                remote: origin.to_owned(),
            })?;
        progress.advance(Phase::Fetch, 1, bytes.len() as u64);
        Ok(bytes)
    };
    let count = |put: crate::Put| {
        if put.new {
            totals.moved(put.stored_bytes);
        }
    };
    // 1. Blobs and chunks, in one batch: one that does not check out drops
    //    the batch, and nothing of this fetch becomes visible.
    let blobs = pool.batch(lock);
    let lists = parallel(&wanted, |hash| {
        let bytes = fetch(hash)?;
        let checked = check_stored(hash, &bytes).map_err(|f| fetched_fault(hash, origin, f))?;
        if checked.kind == ObjectKind::ChunkList {
            return Ok(Some(List {
                hash: *hash,
                bytes,
                checked,
            }));
        }
        count(blobs.stage_checked(hash, &checked, &bytes)?);
        Ok(None)
    })?;
    let lists: Vec<List> = lists.into_iter().flatten().collect();
    let chunks = chunks_of(&lists, &wanted);
    let list_names: HashSet<ObjectHash> = lists.iter().map(|l| l.hash).collect();
    parallel(&chunks, |(c, of)| {
        if list_names.contains(&c.hash) {
            return Err(ObjectError::FetchedCorrupt {
                hash: *of,
                origin: origin.to_owned(),
                reason: format!("it names the chunk list {} as one of its chunks", c.hash),
            });
        }
        if pool.contains(&c.hash) {
            return Ok(());
        }
        let bytes = fetch(&c.hash)?;
        count(blobs.import_chunk(c, of, &bytes, origin)?);
        Ok(())
    })?;
    blobs.commit(progress)?;
    // 2. The lists, each checked against its chunks, durable now.
    if !lists.is_empty() {
        let listed = pool.batch(lock);
        parallel(&lists, |l| {
            count(listed.import_checked(&l.hash, &l.checked, &l.bytes, origin)?);
            Ok(())
        })?;
        listed.commit(progress)?;
    }
    progress.end(Phase::Fetch);
    Ok(totals.report())
}

fn distinct(hashes: &[ObjectHash]) -> Vec<ObjectHash> {
    let mut seen = HashSet::with_capacity(hashes.len());
    hashes.iter().copied().filter(|h| seen.insert(*h)).collect()
}

/// The distinct chunks of `lists`, each with the list that names it first,
/// leaving out those of the `named` objects that are not lists themselves
/// (handled as named objects already). A chunk that is one of `lists` is
/// kept, for the caller to refuse: a chunk is a blob.
fn chunks_of(lists: &[List], named: &[ObjectHash]) -> Vec<(ChunkRef, ObjectHash)> {
    let is_list: HashSet<ObjectHash> = lists.iter().map(|l| l.hash).collect();
    let mut seen: HashSet<ObjectHash> = named
        .iter()
        .copied()
        .filter(|h| !is_list.contains(h))
        .collect();
    lists
        .iter()
        .flat_map(|l| l.checked.list.iter().map(move |c| (*c, l.hash)))
        .filter(|(c, _)| seen.insert(c.hash))
        .collect()
}

fn local_fault(pool: &ObjectPool, hash: &ObjectHash, fault: Fault) -> ObjectError {
    let path = pool.path_of(hash);
    match fault {
        Fault::Damaged(reason) => ObjectError::Corrupt {
            hash: *hash,
            path,
            reason,
        },
        Fault::Newer(version) => ObjectError::NewerFormat { path, version },
    }
}

fn remote_contains(remote: &dyn RemoteObjects, hash: &ObjectHash) -> Result<bool, ObjectError> {
    remote
        .contains(hash)
        .map_err(|source| remote_error("looking up", hash, remote, source))
}

fn remote_error(
    action: &'static str,
    hash: &ObjectHash,
    remote: &dyn RemoteObjects,
    source: RemoteError,
) -> ObjectError {
    // A pool on this machine behind the interface ([`PoolRemote`]) fails
    // with the pool's own errors: passed on as they are, so that a link
    // refused in that store is a refusal here too, naming it.
    match source.downcast::<ObjectError>() {
        Ok(own) => *own,
        Err(source) => ObjectError::Remote {
            action,
            hash: *hash,
            remote: remote.name().to_owned(),
            source,
        },
    }
}

/// Runs `f` on every item on up to [`TRANSFER_THREADS`] threads and
/// collects the results in no particular order; after the first error no
/// new item is started, and that error is returned.
fn parallel<T: Sync, R: Send>(
    items: &[T],
    f: impl Fn(&T) -> Result<R, ObjectError> + Sync,
) -> Result<Vec<R>, ObjectError> {
    if items.is_empty() {
        return Ok(Vec::new());
    }
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let out = Mutex::new(Vec::with_capacity(items.len()));
    let failed: Mutex<Option<ObjectError>> = Mutex::new(None);
    std::thread::scope(|scope| {
        for _ in 0..TRANSFER_THREADS.min(items.len()) {
            scope.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let Some(item) = items.get(next.fetch_add(1, Ordering::Relaxed)) else {
                        break;
                    };
                    match f(item) {
                        Ok(r) => out.lock().unwrap_or_else(|p| p.into_inner()).push(r),
                        Err(e) => {
                            stop.store(true, Ordering::Relaxed);
                            failed
                                .lock()
                                .unwrap_or_else(|p| p.into_inner())
                                .get_or_insert(e);
                        }
                    }
                }
            });
        }
    });
    match failed.into_inner().unwrap_or_else(|p| p.into_inner()) {
        Some(e) => Err(e),
        None => Ok(out.into_inner().unwrap_or_else(|p| p.into_inner())),
    }
}

mod local;
pub use local::PoolRemote;

#[cfg(test)]
mod tests;
