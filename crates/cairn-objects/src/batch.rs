//! Group commit of objects: many puts, one durability barrier.
//!
//! A put hashes its bytes, skips them when the object is present (or already
//! staged in this batch), and otherwise writes header + zstd frame to a
//! temporary file in the object's fan-out directory. A large file is cut
//! into chunks first (see `chunked_put.rs`): each chunk is such a put, and
//! its chunk list one more. [`ObjectBatch::commit`] then, on several IO
//! threads, fsyncs each temporary blob and renames it to its name, fsyncs
//! every fan-out directory the batch wrote into or relied on, and only then
//! publishes the chunk lists the same way: a chunk list that can be seen
//! names only chunks that are durable. Only after `commit` returns may a
//! manifest name the objects.
//!
//! A large batch replaces the per-file fsyncs by two file-system barriers
//! (`syncfs`, see [`cairn_store::durable::sync_filesystem`]): one after every
//! temporary file is written, so each is durable before it gets its name,
//! and one after the renames, so the names are. The invariant is the same:
//! an object is never visible under its name before its bytes are durable.
//! Which way a batch goes is a matter of cost, never of safety: by its size
//! ([`Barrier::From`]), and for small batches committed often also by how
//! much else the kernel holds dirty ([`Barrier::FromWhenQuiet`]), since a
//! barrier writes out every other writer's pending data too.
//!
//! The directory descriptor the barrier goes through is opened when the
//! batch begins (before it writes anything) and held until commit: `syncfs`
//! reports the writeback errors recorded since that descriptor was opened,
//! so one opened just before the barrier could miss an error that the
//! batch's own writes met earlier and that something else observed first.
//!
//! Every directory a batch writes into is opened once, beneath the store's
//! root without following a link (`dirs.rs`), and held: temporary files are
//! created, renamed and removed with `*at` calls on that descriptor, and the
//! directory is fsynced through it, so nothing is written outside the
//! store, even through a link swapped in while the batch runs.

use std::cell::RefCell;
use std::collections::{BTreeMap, HashMap, HashSet};
use std::fs::File;
use std::io::Write;
use std::os::fd::AsFd;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use cairn_store::durable::{self, sync_filesystem_held, FILE_MODE};
use cairn_store::nofollow;
use cairn_store::safe::{temp_name, TEMP_PREFIX};
use cairn_store::storage;

use crate::barrier::{takes_barrier, Barrier};
use crate::dirs::Dir;
use crate::format::{Header, ObjectKind};
use crate::hash::Hasher;
use crate::{ObjectError, ObjectHash, ObjectPool, Phase, Progress, Put, StoreLock};

/// Files up to this size are read whole, hashed, and compressed in memory;
/// larger ones are streamed twice (hash, then compress while re-hashing).
const IN_MEMORY_MAX: u64 = 4 << 20;
const STREAM_CHUNK: usize = 1 << 20;
/// zstd level: the fastest standard level. Objects are written once per
/// content and read rarely, so speed of capture wins over ratio.
const ZSTD_LEVEL: i32 = 1;
/// Threads issuing fsync and rename at commit: the disk merges concurrent
/// flushes, so more threads than cores pay off.
const IO_THREADS: usize = 8;
/// From this many new objects on, one `syncfs` barrier is cheaper than an
/// fsync per object (each of which commits the file-system journal).
const BARRIER_MIN: usize = 256;

thread_local! {
    static COMPRESSOR: RefCell<Option<zstd::bulk::Compressor<'static>>> = const { RefCell::new(None) };
}

/// Totals of a committed batch.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct BatchReport {
    /// Objects this batch added to the pool.
    pub objects: u64,
    /// Bytes those objects occupy on disk.
    pub stored_bytes: u64,
}

/// A file written under a temporary name, to be renamed to its own name
/// in the same directory at commit; removed when dropped before that.
struct Staged {
    dir: Arc<Dir>,
    temp: String,
    name: String,
    stored: u64,
    /// A chunk list: published only after every blob of the batch.
    list: bool,
    /// Renamed into place: nothing to remove.
    placed: bool,
}

impl Staged {
    fn new(dir: &Arc<Dir>, temp: String, name: String, list: bool) -> Staged {
        Staged {
            dir: Arc::clone(dir),
            temp,
            name,
            stored: 0,
            list,
            placed: false,
        }
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.placed {
            let _ = nofollow::unlink_at(&self.dir.fd, &self.temp);
        }
    }
}

#[derive(Default)]
struct State {
    staged: Vec<Staged>,
    /// Files outside the pool that name this batch's objects (entries of
    /// the response store): published after every object and list.
    files: Vec<Staged>,
    /// When the barrier replaces per-file fsyncs (`None`: from
    /// [`BARRIER_MIN`] files).
    barrier_rule: Option<Barrier>,
    claimed: HashSet<ObjectHash>,
    /// Directories to fsync at commit (fan-out directories and `objects/`),
    /// by path.
    dirs: BTreeMap<PathBuf, Arc<Dir>>,
    /// Fan-out directories opened (or made) so far, by name.
    fans: HashMap<String, Arc<Dir>>,
    /// `objects/`, once opened (or made).
    objects: Option<Arc<Dir>>,
    /// Directories outside the pool that files are staged into, by path.
    outside: HashMap<PathBuf, Arc<Dir>>,
    /// The pool directory, opened when the batch began (or, for a pool
    /// whose directory did not exist yet, when it was created, before this
    /// batch wrote anything): the file-system barrier goes through it.
    barrier: Option<File>,
}

/// A group of puts that become durable together. Safe to share between
/// threads (`put_*` take `&self`). Dropping it without [`commit`] removes its
/// temporary files; nothing it staged becomes visible.
///
/// [`commit`]: ObjectBatch::commit
pub struct ObjectBatch<'p> {
    pool: &'p ObjectPool,
    _lock: &'p StoreLock,
    state: Mutex<State>,
}

impl<'p> ObjectBatch<'p> {
    pub(crate) fn new(pool: &'p ObjectPool, lock: &'p StoreLock) -> Self {
        // A pool whose `objects/` cannot be opened yet (missing, or a link
        // that the first put refuses) has no barrier descriptor now.
        let objects = pool.objects_dir().ok().flatten().map(Arc::new);
        let state = State {
            barrier: objects.as_ref().and_then(|d| barrier_of(d)),
            objects,
            ..State::default()
        };
        ObjectBatch {
            pool,
            _lock: lock,
            state: Mutex::new(state),
        }
    }

    /// The pool this batch writes into.
    pub(crate) fn pool(&self) -> &'p ObjectPool {
        self.pool
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding this lock leaves the sets consistent enough:
        // at worst an object is written twice or an extra directory fsynced.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Uses the file-system barrier as `rule` says, instead of from 256
    /// staged files on: for a group commit of small writes (the gateway's),
    /// where one barrier for the group is cheaper than an fsync each even
    /// for a few files.
    #[must_use]
    pub fn barrier(self, rule: Barrier) -> Self {
        self.state().barrier_rule = Some(rule);
        self
    }

    /// Stages `bytes` to become the file `dest` (outside the pool, in an
    /// existing directory) when the batch commits: written to a temporary
    /// file beside it now, made durable and renamed into place after every
    /// object and chunk list of the batch, its directory then synced. So a
    /// file that names the batch's objects is never visible before they are
    /// durable. `dest` is replaced if it exists.
    ///
    /// # Errors
    /// The temporary file cannot be written.
    pub fn stage_file(&self, dest: &Path, bytes: &[u8]) -> Result<(), ObjectError> {
        let bad = || ObjectError::io("staging", dest, std::io::ErrorKind::InvalidInput.into());
        let parent = dest.parent().ok_or_else(bad)?;
        let name = dest.file_name().and_then(|n| n.to_str()).ok_or_else(bad)?;
        let dir = self.outside_dir(parent)?;
        let temp = format!(".cairn-staged-{}", &temp_name()[TEMP_PREFIX.len()..]);
        let mut file = nofollow::create_new_at(&dir.fd, &temp, FILE_MODE)
            .map_err(|e| ObjectError::io("creating a temporary file in", parent, e))?;
        let mut staged = Staged::new(&dir, temp, name.to_owned(), false);
        staged.stored = bytes.len() as u64;
        file.write_all(bytes)
            .map_err(|e| ObjectError::io("writing", parent.join(&staged.temp), e))?;
        if let Some(p) = dir.reported(&staged.temp) {
            storage::wrote(&p, 0, bytes);
        }
        self.state().files.push(staged);
        Ok(())
    }

    /// The existing directory `path` outside the pool, opened by path once
    /// per batch (it is the caller's, as `dest` of [`ObjectBatch::stage_file`]).
    fn outside_dir(&self, path: &Path) -> Result<Arc<Dir>, ObjectError> {
        if let Some(d) = self.state().outside.get(path) {
            return Ok(Arc::clone(d));
        }
        let fd =
            nofollow::open_root(path).map_err(|e| ObjectError::io("opening directory", path, e))?;
        let dir = Arc::new(Dir {
            fd,
            path: path.to_path_buf(),
        });
        let mut st = self.state();
        Ok(Arc::clone(
            st.outside.entry(path.to_path_buf()).or_insert(dir),
        ))
    }

    /// Number of objects staged so far.
    pub fn len(&self) -> usize {
        self.state().staged.len()
    }

    /// True when nothing is staged.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Stages `bytes` (visible after [`ObjectBatch::commit`]).
    ///
    /// # Errors
    /// The temporary file cannot be written.
    pub fn put_bytes(&self, bytes: &[u8]) -> Result<Put, ObjectError> {
        let hash = ObjectHash::of(bytes);
        let size = bytes.len() as u64;
        let Some(fan) = self.claim(hash)? else {
            return Ok(not_new(hash, size));
        };
        match self.stage_encoded(&fan, hash, ObjectKind::Blob, size, bytes) {
            Ok(stored) => Ok(Put {
                hash,
                size,
                new: true,
                stored_bytes: stored,
            }),
            Err(e) => {
                self.unclaim(&hash);
                Err(e)
            }
        }
    }

    /// Stages the content of an open file, read from offset 0 whatever its
    /// position. `path` is used in messages only. A file larger than the
    /// pool's [`crate::ChunkConfig::threshold`] is stored as content-defined
    /// chunks plus a chunk list named by the hash of the whole content; the
    /// returned [`Put::stored_bytes`] counts every chunk it added.
    ///
    /// # Errors
    /// Reading fails, or the file changed while it was read (its length
    /// differs from its metadata's, or between the two passes over a large
    /// unchunked file: [`ObjectError::SourceChanged`]); or the write fails.
    pub fn put_open_file(&self, file: &File, path: &Path) -> Result<Put, ObjectError> {
        let meta = file
            .metadata()
            .map_err(|e| ObjectError::io("reading metadata of", path, e))?;
        if !meta.is_file() {
            return Err(ObjectError::io(
                "storing",
                path,
                std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a regular file"),
            ));
        }
        if self.pool.chunking().chunks(meta.len()) {
            return self.put_chunked(file, path, meta.len());
        }
        if meta.len() <= IN_MEMORY_MAX {
            let bytes = read_whole(file, meta.len(), path)?;
            return self.put_bytes(&bytes);
        }
        self.put_streamed(file, path)
    }

    fn put_streamed(&self, file: &File, path: &Path) -> Result<Put, ObjectError> {
        let (hash, size) = hash_stream(file, path, |_| Ok(()))?;
        let Some(fan) = self.claim(hash)? else {
            return Ok(not_new(hash, size));
        };
        let res = (|| {
            let (mut staged, mut out) = self.temp_in(&fan, hash, false)?;
            let tmp_path = fan.path.join(&staged.temp);
            let io = |e| ObjectError::io("writing object", &tmp_path, e);
            let header = Header {
                kind: ObjectKind::Blob,
                plain_len: size,
            };
            let mut w = storage::Tracked::resolved(&mut out, fan.reported(&staged.temp));
            w.write_all(&header.encode()).map_err(io)?;
            let mut enc = zstd::stream::write::Encoder::new(&mut w, ZSTD_LEVEL).map_err(io)?;
            let (again, len) = hash_stream(file, path, |chunk| enc.write_all(chunk).map_err(io))?;
            enc.finish().map_err(io)?;
            if again != hash || len != size {
                return Err(ObjectError::SourceChanged {
                    path: path.to_owned(),
                });
            }
            drop(w);
            staged.stored = out.metadata().map_err(io)?.len();
            let stored = staged.stored;
            self.state().staged.push(staged);
            Ok(stored)
        })();
        match res {
            Ok(stored) => Ok(Put {
                hash,
                size,
                new: true,
                stored_bytes: stored,
            }),
            Err(e) => {
                self.unclaim(&hash);
                Err(e)
            }
        }
    }

    /// Decides whether this put writes `hash`: `Some(fan-out dir)` when it
    /// must, `None` when the object is present or already staged here.
    pub(crate) fn claim(&self, hash: ObjectHash) -> Result<Option<Arc<Dir>>, ObjectError> {
        if self.state().claimed.contains(&hash) {
            return Ok(None);
        }
        let present = self.pool.contains(&hash);
        // Its entry in `objects/` becomes durable at commit, with the rest
        // (below): nothing names an object of this batch before.
        let fan = self.fan(&hash.fan_out())?;
        let objects = self.objects()?;
        let mut st = self.state();
        // Even an object we did not write is about to be named by a manifest:
        // its directory entry, and its fan-out directory's entry in
        // `objects/` (which another writer may have created a moment ago
        // and not synced yet), must be durable before that manifest is.
        if !st.dirs.contains_key(&fan.path) {
            st.dirs.insert(fan.path.clone(), Arc::clone(&fan));
            st.dirs.insert(objects.path.clone(), objects);
        }
        if present || !st.claimed.insert(hash) {
            return Ok(None);
        }
        Ok(Some(fan))
    }

    pub(crate) fn unclaim(&self, hash: &ObjectHash) {
        self.state().claimed.remove(hash);
    }

    /// `objects/`, opened when the batch began or made now (for a pool
    /// whose directory did not exist yet: made durable at once, and the
    /// barrier's descriptor opened on it before this batch writes its
    /// first object).
    fn objects(&self) -> Result<Arc<Dir>, ObjectError> {
        if let Some(d) = &self.state().objects {
            return Ok(Arc::clone(d));
        }
        let made = Arc::new(self.pool.objects_dir_made()?);
        let mut st = self.state();
        if st.barrier.is_none() {
            st.barrier = barrier_of(&made);
        }
        Ok(Arc::clone(st.objects.get_or_insert(made)))
    }

    /// The fan-out directory `name`, opened (made when missing) once per batch.
    fn fan(&self, name: &str) -> Result<Arc<Dir>, ObjectError> {
        if let Some(d) = self.state().fans.get(name) {
            return Ok(Arc::clone(d));
        }
        let objects = self.objects()?;
        let dir = Arc::new(self.pool.fan_dir_made(&objects, name)?);
        let mut st = self.state();
        Ok(Arc::clone(st.fans.entry(name.to_owned()).or_insert(dir)))
    }

    /// A new temporary file in `fan` for the object `hash`, named as prune
    /// knows temporaries (`.` … `.tmp`), and its staging entry (which removes
    /// the file if dropped before commit).
    fn temp_in(
        &self,
        fan: &Arc<Dir>,
        hash: ObjectHash,
        list: bool,
    ) -> Result<(Staged, File), ObjectError> {
        let temp = format!("{}.tmp", temp_name());
        let file = nofollow::create_new_at(&fan.fd, &temp, FILE_MODE)
            .map_err(|e| ObjectError::io("creating temporary object in", &fan.path, e))?;
        Ok((Staged::new(fan, temp, hash.rest(), list), file))
    }

    /// Compresses `body` and stages it as an object of `kind` whose plain
    /// length is `plain_len` (the body's own length for a blob, the whole
    /// content's for a chunk list).
    pub(crate) fn stage_encoded(
        &self,
        fan: &Arc<Dir>,
        hash: ObjectHash,
        kind: ObjectKind,
        plain_len: u64,
        body: &[u8],
    ) -> Result<u64, ObjectError> {
        let encoded =
            compress(body).map_err(|e| ObjectError::io("compressing for", &fan.path, e))?;
        let header = Header { kind, plain_len }.encode();
        self.stage_raw(fan, hash, kind, &header, &encoded)
    }

    /// Stages an object's stored encoding, `header` then `encoded`, exactly
    /// as given (a put that compressed it, or an import of bytes already
    /// checked against `hash`); a chunk list is published after every blob.
    pub(crate) fn stage_raw(
        &self,
        fan: &Arc<Dir>,
        hash: ObjectHash,
        kind: ObjectKind,
        header: &[u8],
        encoded: &[u8],
    ) -> Result<u64, ObjectError> {
        let (mut staged, mut file) = self.temp_in(fan, hash, kind == ObjectKind::ChunkList)?;
        write_both(&mut file, header, encoded)
            .map_err(|e| ObjectError::io("writing object", fan.path.join(&staged.temp), e))?;
        if let Some(p) = fan.reported(&staged.temp) {
            storage::wrote(&p, 0, header);
            storage::wrote(&p, header.len() as u64, encoded);
        }
        staged.stored = (header.len() + encoded.len()) as u64;
        let stored = staged.stored;
        self.state().staged.push(staged);
        Ok(stored)
    }

    /// Makes every staged object durable and visible: fsync of each
    /// temporary file, rename to its name, fsync of each directory involved;
    /// blobs first, chunk lists after every blob and directory is durable.
    /// After it returns, a manifest may name any object put into this batch.
    ///
    /// # Errors
    /// An fsync or rename fails. Objects renamed before the failure may be
    /// visible but are not guaranteed durable; the caller must not write a
    /// manifest naming them. A chunk list is never visible unless all its
    /// chunks were durable first.
    pub fn commit(self, progress: &dyn Progress) -> Result<BatchReport, ObjectError> {
        let state = self.state.into_inner().unwrap_or_else(|p| p.into_inner());
        let total = state.staged.len();
        let files = state.files;
        let rule = state.barrier_rule.unwrap_or(Barrier::From(BARRIER_MIN));
        if total == 0 && state.dirs.is_empty() && files.is_empty() {
            return Ok(BatchReport::default());
        }
        progress.begin(Phase::Store, Some(total as u64));
        let (lists, blobs): (Vec<Staged>, Vec<Staged>) =
            state.staged.into_iter().partition(|s| s.list);
        let list_dirs = dirs_of(&lists);
        // One barrier for every temporary file, when the rule takes it and
        // the kernel reports errors from it; otherwise an fsync per file.
        let held = state.barrier.as_ref().filter(|_| {
            let own = page_bytes(blobs.iter().chain(&lists).chain(&files));
            takes_barrier(rule, total + files.len(), own, durable::dirty_bytes)
        });
        let barrier = match held {
            Some(dir) => filesystem_barrier(dir, self.pool.dir())?,
            None => false,
        };
        let mut stored_bytes = publish(blobs, !barrier, progress)?;
        if let (true, Some(dir)) = (barrier, held) {
            filesystem_barrier(dir, self.pool.dir())?;
        } else {
            sync_dirs(state.dirs.into_values().collect())?;
        }
        if !lists.is_empty() {
            stored_bytes += publish(lists, !barrier, progress)?;
            sync_dirs(list_dirs)?;
        }
        if !files.is_empty() {
            // Their bytes were made durable by the first barrier, or are
            // fsynced now; then the names, by their directories' fsyncs.
            let file_dirs = dirs_of(&files);
            publish(files, !barrier, &crate::NoProgress)?;
            match (barrier, held) {
                (true, Some(dir)) => {
                    filesystem_barrier(dir, self.pool.dir())?;
                }
                _ => sync_dirs(file_dirs)?,
            }
        }
        progress.end(Phase::Store);
        Ok(BatchReport {
            objects: total as u64,
            stored_bytes,
        })
    }
}

/// What `staged` occupies in the page cache: its dirty pages.
fn page_bytes<'a>(staged: impl Iterator<Item = &'a Staged>) -> u64 {
    staged.map(|s| s.stored.div_ceil(4096) * 4096).sum()
}

/// The distinct directories of `staged`.
fn dirs_of(staged: &[Staged]) -> Vec<Arc<Dir>> {
    let by_path: BTreeMap<&Path, &Arc<Dir>> = staged
        .iter()
        .map(|s| (s.dir.path.as_path(), &s.dir))
        .collect();
    by_path.into_values().map(Arc::clone).collect()
}

/// A descriptor of `objects/` for the file-system barrier.
fn barrier_of(objects: &Dir) -> Option<File> {
    objects.fd.try_clone().ok().map(File::from)
}

/// One file-system barrier through `held`, the descriptor opened when the
/// batch began; false (nothing done) where `syncfs` does not report
/// writeback errors, so the caller fsyncs each file instead.
fn filesystem_barrier(held: &File, dir: &Path) -> Result<bool, ObjectError> {
    Ok(sync_filesystem_held(held, dir)?)
}

/// Renames staged objects into place, fsyncing each first unless a barrier
/// already made it durable: on up to [`IO_THREADS`] threads when there are
/// fsyncs to wait for at once, on this thread when only renames are left.
fn publish(staged: Vec<Staged>, fsync: bool, progress: &dyn Progress) -> Result<u64, ObjectError> {
    let nlanes = if fsync {
        IO_THREADS.min(staged.len())
    } else {
        1
    };
    let mut lanes: Vec<Vec<Staged>> = (0..nlanes).map(|_| Vec::new()).collect();
    for (i, s) in staged.into_iter().enumerate() {
        lanes[i % nlanes].push(s);
    }
    let stored = in_lanes(lanes, |lane| publish_lane(lane, fsync, progress))?;
    Ok(stored.into_iter().sum())
}

/// Fsyncs directories on up to [`IO_THREADS`] threads.
fn sync_dirs(dirs: Vec<Arc<Dir>>) -> Result<(), ObjectError> {
    let chunk = dirs.len().div_ceil(IO_THREADS).max(1);
    in_lanes(dirs.chunks(chunk).collect(), |part| {
        part.iter().try_for_each(|d| d.sync("objects.dir"))
    })?;
    Ok(())
}

/// Runs `work` on every lane: each on a thread of its own when there are
/// several, so that their fsyncs wait on the disk at once (it merges
/// concurrent flushes); on this thread when there is one, where a thread
/// would buy nothing. Every lane runs to its end; then the first error, or
/// a lane that panicked, fails the whole.
fn in_lanes<L: Send, R: Send>(
    lanes: Vec<L>,
    work: impl Fn(L) -> Result<R, ObjectError> + Sync,
) -> Result<Vec<R>, ObjectError> {
    if lanes.len() <= 1 {
        return lanes.into_iter().map(work).collect();
    }
    let work = &work;
    let results: Vec<Result<R, ObjectError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = lanes
            .into_iter()
            .map(|lane| scope.spawn(move || work(lane)))
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err(panicked())))
            .collect()
    });
    results.into_iter().collect()
}

fn panicked() -> ObjectError {
    ObjectError::io(
        "committing objects",
        PathBuf::new(),
        std::io::Error::other("an IO thread panicked"),
    )
}

fn publish_lane(
    lane: Vec<Staged>,
    fsync: bool,
    progress: &dyn Progress,
) -> Result<u64, ObjectError> {
    let mut bytes = 0;
    for mut s in lane {
        if fsync {
            // Reopened without following a link, in the directory held.
            nofollow::open_file_at(&s.dir.fd, &s.temp)
                .and_then(|f| storage::sync_fd(f.as_fd(), false, "objects.file"))
                .map_err(|e| ObjectError::io("syncing object", s.dir.path.join(&s.temp), e))?;
        }
        nofollow::rename_at(&s.dir.fd, &s.temp, &s.name).map_err(|e| {
            ObjectError::io("renaming object into place", s.dir.path.join(&s.name), e)
        })?;
        s.placed = true;
        bytes += s.stored;
        progress.advance(Phase::Store, 1, s.stored);
    }
    Ok(bytes)
}

/// Writes `a` then `b`, in one `writev` when the file takes them whole.
fn write_both(f: &mut File, a: &[u8], b: &[u8]) -> std::io::Result<()> {
    let n = loop {
        match f.write_vectored(&[std::io::IoSlice::new(a), std::io::IoSlice::new(b)]) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            r => break r?,
        }
    };
    if n < a.len() {
        f.write_all(&a[n..])?;
        f.write_all(b)
    } else {
        f.write_all(&b[n - a.len()..])
    }
}

fn not_new(hash: ObjectHash, size: u64) -> Put {
    Put {
        hash,
        size,
        new: false,
        stored_bytes: 0,
    }
}

fn compress(bytes: &[u8]) -> std::io::Result<Vec<u8>> {
    COMPRESSOR.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            *slot = Some(zstd::bulk::Compressor::new(ZSTD_LEVEL)?);
        }
        match slot.as_mut() {
            Some(c) => c.compress(bytes),
            None => zstd::bulk::compress(bytes, ZSTD_LEVEL),
        }
    })
}

/// Reads a whole file from offset 0 (it may have grown since `hint`).
fn read_whole(file: &File, hint: u64, path: &Path) -> Result<Vec<u8>, ObjectError> {
    let mut buf = vec![0u8; (hint as usize).max(1)];
    let mut len = 0usize;
    loop {
        if len == buf.len() {
            buf.resize(buf.len() * 2, 0);
        }
        match file.read_at(&mut buf[len..], len as u64) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(ObjectError::io("reading", path, e)),
        }
    }
    buf.truncate(len);
    Ok(buf)
}

/// Hashes a file from offset 0 in chunks, handing each chunk to `sink`.
fn hash_stream(
    file: &File,
    path: &Path,
    mut sink: impl FnMut(&[u8]) -> Result<(), ObjectError>,
) -> Result<(ObjectHash, u64), ObjectError> {
    let mut hasher = Hasher::default();
    let mut buf = vec![0u8; STREAM_CHUNK];
    let mut off = 0u64;
    loop {
        let n = match file.read_at(&mut buf, off) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(ObjectError::io("reading", path, e)),
        };
        hasher.update(&buf[..n]);
        sink(&buf[..n])?;
        off += n as u64;
    }
    Ok(hasher.finish())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::MetadataExt;

    use cairn_store::Store;

    use crate::{Barrier, NoProgress, ObjectPool, StoreLock};

    /// A pool in a new store, and a shared lock on it.
    fn opened() -> (tempfile::TempDir, ObjectPool, StoreLock) {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let pool = ObjectPool::open(&store).unwrap();
        let lock = StoreLock::shared(&store).unwrap();
        (dir, pool, lock)
    }

    #[test]
    fn the_barrier_descriptor_is_held_from_the_start_of_the_batch() {
        let (_dir, pool, lock) = opened();
        let batch = pool.batch(&lock);
        // Opened before anything is put: the pool directory itself.
        let held = batch
            .state()
            .barrier
            .as_ref()
            .map(|f| f.metadata().unwrap().ino());
        assert_eq!(held, Some(std::fs::metadata(pool.dir()).unwrap().ino()));
        for i in 0..(super::BARRIER_MIN + 1) {
            batch.put_bytes(format!("object {i}").as_bytes()).unwrap();
        }
        let r = batch.commit(&NoProgress).unwrap();
        assert_eq!(r.objects as usize, super::BARRIER_MIN + 1);

        // A pool whose directory does not exist yet: opened when the batch
        // creates it, before its first object is written.
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let pool = ObjectPool::at(&store);
        let lock = StoreLock::shared(&store).unwrap();
        let batch = pool.batch(&lock);
        if !pool.dir().exists() {
            assert!(batch.state().barrier.is_none());
        }
        let put = batch.put_bytes(b"first").unwrap();
        assert!(batch.state().barrier.is_some());
        batch.commit(&NoProgress).unwrap();
        assert_eq!(pool.get(&put.hash).unwrap(), b"first");
    }

    #[test]
    fn a_staged_file_appears_only_with_its_objects_and_after_them() {
        let (dir, pool, lock) = opened();
        let outside = dir.path().join("entries");
        std::fs::create_dir(&outside).unwrap();
        for barrier_from in [usize::MAX, 1] {
            let batch = pool.batch(&lock).barrier(Barrier::From(barrier_from));
            let put = batch
                .put_bytes(format!("body {barrier_from}").as_bytes())
                .unwrap();
            let entry = outside.join(format!("e{barrier_from}.json"));
            batch
                .stage_file(&entry, put.hash.to_string().as_bytes())
                .unwrap();
            assert!(!entry.exists(), "not visible before commit");
            batch.commit(&NoProgress).unwrap();
            assert_eq!(
                std::fs::read_to_string(&entry).unwrap(),
                put.hash.to_string()
            );
            assert!(pool.contains(&put.hash));
        }
        // Dropped without commit: nothing appears, no temporary stays.
        let batch = pool.batch(&lock);
        batch.stage_file(&outside.join("never.json"), b"x").unwrap();
        drop(batch);
        let left: Vec<_> = std::fs::read_dir(&outside)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| !n.starts_with('e'))
            .collect();
        assert!(left.is_empty(), "{left:?}");
    }

    #[test]
    fn a_quiet_barrier_batch_commits_whichever_way_it_goes() {
        // Whether this machine is quiet or not, the batch must publish
        // every object and leave no temporary behind.
        let (dir, pool, lock) = opened();
        let batch = pool.batch(&lock).barrier(Barrier::FromWhenQuiet(2));
        let bodies: Vec<Vec<u8>> = (0..5).map(|i| format!("object {i}").into_bytes()).collect();
        let puts: Vec<_> = bodies.iter().map(|b| batch.put_bytes(b).unwrap()).collect();
        let report = batch.commit(&NoProgress).unwrap();
        assert_eq!(report.objects, 5);
        for (p, b) in puts.iter().zip(&bodies) {
            assert_eq!(&pool.get(&p.hash).unwrap(), b);
        }
        let fans = std::fs::read_dir(dir.path().join("objects")).unwrap();
        for fan in fans.map(|f| f.unwrap().path()).filter(|p| p.is_dir()) {
            for e in std::fs::read_dir(&fan).unwrap() {
                let name = e.unwrap().file_name().into_string().unwrap();
                assert!(!name.ends_with(".tmp"), "a temporary stayed: {name}");
            }
        }
    }
}
