//! A push of many sessions to a remote store (DESIGN §12): the sessions
//! copied side by side, in waves that keep each fork after its ancestors,
//! sharing one lease on the remote's object pool and what is known to be
//! in it.
//!
//! # Invariants
//! - Each session is copied in the steps of `copy_session`, unchanged; a
//!   fork starts only when the wave of its parent is done.
//! - The pool's shared lease is taken when the first session needs it and
//!   held, renewed, until the push ends: every session's uploads and
//!   records fall inside it, as each session's own lease covered its own.
//! - An object is taken as present without asking only when the remote
//!   said so (or stored it) during this push, under that lease: a prune
//!   cannot start while it is held, so what was there stays there.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

use cairn_objects::{
    ObjectHash, Phase, Progress, PutOutcome, RemoteEntry, RemoteError, RemoteObjects,
};
use cairn_store::RunId;

use super::remote::{share_pool, Lease, RemoteStore};
use super::{
    copy_session, copy_sessions, lineage_order, lock, Destination, SessionTransfer, Source,
    TransferReport,
};
use crate::SessionError;

/// How many sessions a push to a remote store copies at once.
const PUSH_WORKERS: usize = 8;

/// [`copy_sessions`] with sessions copied side by side, each worker with a
/// destination of its own: a remote session's copy is a dozen round trips
/// (its journal read, its manifests looked up, the pool's lease, its
/// uploads, its writer lease, its records), each waiting on the network,
/// not on this host.
///
/// A fork is still copied only after its ancestors are, complete: the
/// sessions go in waves by fork depth (roots, then forks of roots, …), and
/// a wave starts when the one before it is done. Each session is copied in
/// the steps of [`copy_session`], unchanged. A failure stops the workers
/// taking another session; sessions already under way finish (each is
/// complete or, stopped in step 2 or 3, names nothing yet), and the error
/// of the first session in lineage order that failed is returned.
///
/// With more than one session, the upload phases of sessions copied at
/// once are one phase to `progress` ([`Phase::Upload`], no total).
pub(super) fn copy_side_by_side<D: Destination>(
    from: &(dyn Source + Sync),
    dest: impl Fn() -> D + Sync,
    runs: &[RunId],
    progress: &dyn Progress,
) -> Result<TransferReport, SessionError> {
    let order = lineage_order(from, runs)?;
    if order.len() < 2 {
        return copy_sessions(from, &mut dest(), runs, progress);
    }
    let mut waves = waves(&order);
    // The first session goes alone: it usually uploads what the others
    // share (sessions of one workspace name mostly the same objects), which
    // they then find remembered instead of all asking for it at once.
    if waves[0].len() > 1 {
        let first = waves[0].remove(0);
        waves.insert(0, vec![first]);
    }
    progress.begin(Phase::Upload, None);
    let merged = OnePhase(progress);
    let mut done: Vec<Option<SessionTransfer>> = vec![None; order.len()];
    for wave in waves {
        let next = AtomicUsize::new(0);
        let failed: Mutex<Option<(usize, SessionError)>> = Mutex::new(None);
        let copied: Mutex<Vec<(usize, SessionTransfer)>> = Mutex::new(Vec::new());
        std::thread::scope(|scope| {
            for _ in 0..PUSH_WORKERS.min(wave.len()) {
                scope.spawn(|| {
                    let mut to = dest();
                    while let Some(&i) = wave.get(next.fetch_add(1, Ordering::Relaxed)) {
                        if lock(&failed).is_some() {
                            break;
                        }
                        match copy_session(from, &mut to, &order[i].0, &merged) {
                            Ok(s) => lock(&copied).push((i, s)),
                            Err(e) => {
                                let mut first = lock(&failed);
                                if first.as_ref().is_none_or(|(at, _)| i < *at) {
                                    *first = Some((i, e));
                                }
                            }
                        }
                    }
                });
            }
        });
        for (i, s) in std::mem::take(&mut *lock(&copied)) {
            done[i] = Some(s);
        }
        let first = lock(&failed).take();
        if let Some((_, e)) = first {
            return Err(e);
        }
    }
    progress.end(Phase::Upload);
    let mut report = TransferReport::default();
    for s in done.into_iter().flatten() {
        report.add(s);
    }
    Ok(report)
}

/// `order` (lineage order, each session with its fork depth) as waves of
/// indexes into it: wave `d` holds the sessions of depth `d`.
pub(super) fn waves(order: &[(RunId, usize)]) -> Vec<Vec<usize>> {
    let mut waves: Vec<Vec<usize>> = Vec::new();
    for (i, &(_, d)) in order.iter().enumerate() {
        if waves.len() <= d {
            waves.resize_with(d + 1, Vec::new);
        }
        waves[d].push(i);
    }
    waves
}

/// A [`Progress`] that passes on what is done and not the phases' starts
/// and ends: the sessions copied at once each start and end their upload.
struct OnePhase<'a>(&'a dyn Progress);

impl Progress for OnePhase<'_> {
    fn advance(&self, phase: Phase, items: u64, bytes: u64) {
        self.0.advance(phase, items, bytes);
    }
}

/// What the sessions of one push share: the pool's lease and the objects
/// known to be in the pool (module invariants).
pub(super) struct PushShared<'a> {
    remote: RemoteStore<'a>,
    objects: Remembered<'a>,
    /// The pool's shared lease, once a session needed it: its token, if
    /// the store gave one. Given up when the push is dropped.
    lease: Mutex<Option<Option<String>>>,
}

impl<'a> PushShared<'a> {
    pub(super) fn new(remote: RemoteStore<'a>) -> Self {
        PushShared {
            remote,
            objects: Remembered::new(remote.objects),
            lease: Mutex::new(None),
        }
    }

    /// The remote, its objects seen through what this push knows of them.
    pub(super) fn store(&self) -> RemoteStore<'_> {
        RemoteStore {
            journals: self.remote.journals,
            objects: &self.objects,
            files: self.remote.files,
        }
    }

    /// Takes the pool's shared lease for the rest of the push, unless taken.
    pub(super) fn hold(&self) -> Result<(), SessionError> {
        let mut lease = lock(&self.lease);
        if lease.is_none() {
            *lease = Some(share_pool(self.remote.journals)?);
        }
        Ok(())
    }
}

impl Drop for PushShared<'_> {
    fn drop(&mut self) {
        if let Some(token) = lock(&self.lease).take() {
            drop(Lease::new(self.remote.journals, token));
        }
    }
}

/// A remote pool that answers from memory for the objects it has said are
/// there during this push (see the module invariants), and asks about each
/// object once at a time: sessions copied side by side name mostly the
/// same objects, and one that is missing is uploaded by the session that
/// asked first while the others wait for it.
struct Remembered<'a> {
    inner: &'a dyn RemoteObjects,
    known: Mutex<Known>,
    settled: Condvar,
}

#[derive(Default)]
struct Known {
    /// Said to be there, or stored, during this push.
    present: HashSet<ObjectHash>,
    /// Being asked about, or found missing and about to be uploaded by the
    /// session that asked: until when the others wait for that.
    claimed: HashMap<ObjectHash, Instant>,
}

/// How long the others wait for a session that found an object missing to
/// upload it, before asking themselves (it may have failed).
const CLAIM: Duration = Duration::from_secs(5);

impl<'a> Remembered<'a> {
    fn new(inner: &'a dyn RemoteObjects) -> Self {
        Remembered {
            inner,
            known: Mutex::new(Known::default()),
            settled: Condvar::new(),
        }
    }

    /// Marks `hash` there (`Some(true)`), claimed as missing
    /// (`Some(false)`), or neither; wakes the sessions waiting on it.
    fn settle(&self, hash: &ObjectHash, there: Option<bool>) {
        let mut known = lock(&self.known);
        match there {
            Some(true) => {
                known.claimed.remove(hash);
                known.present.insert(*hash);
            }
            Some(false) => {
                known.claimed.insert(*hash, Instant::now() + CLAIM);
            }
            None => {
                known.claimed.remove(hash);
            }
        }
        drop(known);
        self.settled.notify_all();
    }
}

impl RemoteObjects for Remembered<'_> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn contains(&self, hash: &ObjectHash) -> Result<bool, RemoteError> {
        let mut known = lock(&self.known);
        loop {
            if known.present.contains(hash) {
                return Ok(true);
            }
            match known.claimed.get(hash) {
                Some(&until) if Instant::now() < until => {
                    let wait = until.saturating_duration_since(Instant::now());
                    known = self
                        .settled
                        .wait_timeout(known, wait)
                        .map_or_else(|p| p.into_inner().0, |(g, _)| g);
                }
                _ => break,
            }
        }
        known.claimed.insert(*hash, Instant::now() + CLAIM);
        drop(known);
        let there = self.inner.contains(hash);
        self.settle(hash, there.as_ref().ok().copied());
        there
    }

    fn put_create(&self, hash: &ObjectHash, stored: &[u8]) -> Result<PutOutcome, RemoteError> {
        let put = self.inner.put_create(hash, stored);
        self.settle(hash, put.as_ref().ok().map(|_| true));
        put
    }

    fn get(&self, hash: &ObjectHash) -> Result<Option<Vec<u8>>, RemoteError> {
        self.inner.get(hash)
    }

    fn list(
        &self,
        hex_prefix: &str,
        visit: &mut dyn FnMut(RemoteEntry),
    ) -> Result<(), RemoteError> {
        self.inner.list(hex_prefix, visit)
    }

    fn get_head(&self, hash: &ObjectHash, n: usize) -> Result<Option<Vec<u8>>, RemoteError> {
        self.inner.get_head(hash, n)
    }

    fn delete(&self, hash: &ObjectHash) -> Result<(), RemoteError> {
        lock(&self.known).present.remove(hash);
        self.inner.delete(hash)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU64;

    /// A pool in memory that counts what it is asked.
    #[derive(Default)]
    struct Counting {
        objects: Mutex<HashMap<ObjectHash, Vec<u8>>>,
        asked: AtomicU64,
        puts: AtomicU64,
    }

    impl RemoteObjects for Counting {
        fn name(&self) -> &str {
            "memory"
        }
        fn contains(&self, hash: &ObjectHash) -> Result<bool, RemoteError> {
            self.asked.fetch_add(1, Ordering::SeqCst);
            // Slow enough that sessions ask at the same moment.
            std::thread::sleep(Duration::from_millis(2));
            Ok(lock(&self.objects).contains_key(hash))
        }
        fn put_create(&self, hash: &ObjectHash, stored: &[u8]) -> Result<PutOutcome, RemoteError> {
            self.puts.fetch_add(1, Ordering::SeqCst);
            std::thread::sleep(Duration::from_millis(2));
            let mut o = lock(&self.objects);
            if o.contains_key(hash) {
                return Ok(PutOutcome::AlreadyThere);
            }
            o.insert(*hash, stored.to_vec());
            Ok(PutOutcome::Created)
        }
        fn get(&self, hash: &ObjectHash) -> Result<Option<Vec<u8>>, RemoteError> {
            Ok(lock(&self.objects).get(hash).cloned())
        }
        fn list(
            &self,
            _hex_prefix: &str,
            _visit: &mut dyn FnMut(RemoteEntry),
        ) -> Result<(), RemoteError> {
            Ok(())
        }
    }

    /// Eight sessions upload the same 50 objects at once, as an upload
    /// does (ask, then store what is missing): each object is asked about
    /// once and stored once, and every session sees all of them there.
    #[test]
    fn sessions_side_by_side_ask_about_and_store_each_object_once() {
        let inner = Counting::default();
        let hashes: Vec<ObjectHash> = (0..50u32)
            .map(|i| ObjectHash::of(&i.to_le_bytes()))
            .collect();
        // One there already.
        inner.put_create(&hashes[0], b"old").unwrap();
        inner.puts.store(0, Ordering::SeqCst);
        let remembered = Remembered::new(&inner);
        std::thread::scope(|scope| {
            for _ in 0..8 {
                scope.spawn(|| {
                    for h in &hashes {
                        if !remembered.contains(h).unwrap() {
                            remembered.put_create(h, b"new").unwrap();
                        }
                    }
                    for h in &hashes {
                        assert!(remembered.contains(h).unwrap());
                    }
                });
            }
        });
        assert_eq!(inner.asked.load(Ordering::SeqCst), 50);
        assert_eq!(inner.puts.load(Ordering::SeqCst), 49);
        assert_eq!(lock(&inner.objects).len(), 50);
    }
}
