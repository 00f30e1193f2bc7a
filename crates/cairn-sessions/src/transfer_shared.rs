//! A shared store used as the store (`--store nats://…`, DESIGN §12): a
//! local store directory is its cache, every command runs on the cache
//! unchanged, and [`Shared`] keeps the two in step.
//!
//! - **In:** before a command reads or writes a session, [`Shared::sync`]
//!   brings the cache's copy to the shared store's records (the pull of
//!   [`super::pull_remote`]: objects fetched and verified, manifests,
//!   records appended). A cached journal that holds records the shared
//!   store does not (never acknowledged: a publish that failed or was cut
//!   off) or other records is moved aside to `unpublished/` below the
//!   cache root, never deleted, and the session pulled whole.
//! - **Out:** as a [`JournalMirror`], every record a writer makes durable
//!   in the cache is published before the append returns, by the steps of
//!   the remote destination of a push ([`RemoteDest`]): first the objects
//!   and manifests it names are uploaded (create-only), then the writer
//!   lease of the session is taken or renewed, then the records are
//!   appended with the fence. A race lost, a lease held elsewhere or a
//!   server gone fails the append.
//!
//! # Invariants
//! - The cache is never the truth: what a command reports as written is in
//!   the shared store.
//! - Objects and manifests are in the shared store before any record that
//!   names them.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use cairn_journal::{
    scan_journal_bytes, JournalMirror, Record, RecordBody, RemoteJournalError, RemoteJournals,
    RunLock,
};
use cairn_objects::{NoProgress, ObjectHash, RemoteFiles, RemoteObjects};
use cairn_store::{durable, RunId, Store};

use super::files::{checkpoint_manifest, read_beneath, rel, snapshot_manifest};
use super::remote::{RemoteDest, RemoteSource, SnapshotListing};
use super::{
    copy_sessions, links, lock, named_by, objects_of_records, plan, Destination, ManifestFile,
    Plan, StoreDest,
};
use crate::SessionError;

/// How many sessions [`Shared::sync_stale`] brings in at once.
const SYNC_WORKERS: usize = 8;

/// From how many stale sessions [`Shared::sync_stale`] reads them in one
/// pass over the shared store (when they also hold a quarter of its
/// records), with one listing of every snapshot manifest.
const ONE_PASS_FROM: usize = 64;

/// A shared store: journals, objects and manifests elsewhere.
pub struct Shared {
    /// Session journals (JetStream).
    pub journals: Arc<dyn RemoteJournals>,
    /// The object pool (S3).
    pub objects: Arc<dyn RemoteObjects>,
    /// Snapshot and checkpoint manifests (S3).
    pub files: Arc<dyn RemoteFiles>,
}

/// What [`Shared::sync`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Synced {
    /// The shared store has no such session.
    Absent,
    /// The cache holds the shared store's records now.
    Current,
    /// The cache's own copy held records the shared store does not; it was
    /// moved to this directory.
    SetAside(PathBuf),
}

impl Shared {
    /// The pieces as a [`super::RemoteStore`].
    pub fn remote(&self) -> super::RemoteStore<'_> {
        super::RemoteStore {
            journals: self.journals.as_ref(),
            objects: self.objects.as_ref(),
            files: self.files.as_ref(),
        }
    }

    /// Brings the cache's copy of `id` (and of its ancestors) to the shared
    /// store's records, as the module documentation says.
    ///
    /// # Errors
    /// The shared store cannot be read, or holds a journal that does not
    /// verify; the cache's copy is being written by another process here;
    /// the pull's errors.
    pub fn sync(&self, cache: &Store, id: &RunId) -> Result<Synced, SessionError> {
        self.sync_session(cache, id, false, None, None)
            .map(|s| s.unwrap_or(Synced::Current))
    }

    /// [`Shared::sync`]; with `roots_only`, a fork is left alone
    /// (`Ok(None)`): bringing it in brings its ancestors too, which may be
    /// brought in by another thread at the same time. `read` is the shared
    /// store's journal when it was read already, and `listed` the snapshot
    /// manifests of every session when they were listed at once.
    fn sync_session(
        &self,
        cache: &Store,
        id: &RunId,
        roots_only: bool,
        read: Option<Vec<u8>>,
        listed: Option<&SnapshotListing>,
    ) -> Result<Option<Synced>, SessionError> {
        let remote = match read {
            Some(lines) => Some(lines),
            None => self.journals.read(id.as_str())?,
        };
        let local = read_beneath(cache.root(), &rel(cache, &cache.journal_path(id)))?;
        let Some(remote) = remote else {
            if local.is_some() {
                return Ok(Some(Synced::SetAside(set_aside(cache, id)?)));
            }
            return Ok(Some(Synced::Absent));
        };
        let shown = PathBuf::from(format!("{}/{id}", self.journals.name()));
        let theirs = scan_journal_bytes(&shown, &remote, id.as_str())?;
        let fork = theirs
            .records
            .first()
            .is_some_and(|r| matches!(&r.body, RecordBody::Meta(m) if m.fork.is_some()));
        if roots_only && fork {
            return Ok(None);
        }
        let ours = local
            .as_ref()
            .and_then(|b| scan_journal_bytes(&cache.journal_path(id), b, id.as_str()).ok());
        let mut outcome = Synced::Current;
        let planned = match (&local, &ours) {
            (None, _) => Plan::Create,
            // A cached copy that does not even read is set aside too.
            (Some(_), None) => Plan::Diverged(1),
            (Some(_), Some(o)) => plan(&links(&theirs), Some(&links(o))),
        };
        match planned {
            Plan::UpToDate => return Ok(Some(outcome)),
            Plan::Ahead | Plan::Diverged(_) => {
                outcome = Synced::SetAside(set_aside(cache, id)?);
            }
            Plan::Create | Plan::Append => {}
        }
        let known = HashMap::from([(id.to_string(), Some(remote))]);
        let source = RemoteSource::new(self.remote(), cache, known).with_listing(listed);
        let mut dest = StoreDest::new(cache);
        copy_sessions(&source, &mut dest, std::slice::from_ref(id), &NoProgress)?;
        Ok(Some(outcome))
    }

    /// [`Shared::sync`] for every session of the shared store whose record
    /// count differs from the cache's; returns how many were brought in.
    ///
    /// # Errors
    /// As [`Shared::sync`].
    pub fn sync_all(&self, cache: &Store) -> Result<usize, SessionError> {
        self.sync_stale(cache, |id| cached_records(cache, id))
    }

    /// [`Shared::sync_all`] with the cache's record counts already known:
    /// `cached(id)` is the seq of the last record of the cache's journal
    /// of `id`, read from that journal (a listing that checked its
    /// projections against the journal's tail knows it), or `None` to read
    /// it here. One request to the shared store, no second pass over the
    /// cache's journals.
    ///
    /// # Errors
    /// As [`Shared::sync`].
    pub fn sync_stale(
        &self,
        cache: &Store,
        cached: impl Fn(&RunId) -> Option<u64>,
    ) -> Result<usize, SessionError> {
        let counts = self.journals.runs()?;
        let total: u64 = counts.iter().map(|(_, n)| n).sum();
        let stale: Vec<(RunId, u64)> = counts
            .into_iter()
            .filter_map(|(id, records)| {
                let id = RunId::parse(&id).ok()?;
                let have = cached(&id).or_else(|| cached_records(cache, &id));
                (have != Some(records)).then_some((id, records))
            })
            .collect();
        // Many stale sessions (a new host's first listing of a big store)
        // are read in one pass over the shared store, after one listing of
        // every snapshot manifest, instead of two requests each; a few are
        // read one by one.
        let stale_records: u64 = stale.iter().map(|(_, n)| n).sum();
        let one_pass = stale.len() >= ONE_PASS_FROM && stale_records.saturating_mul(4) >= total;
        let listed = match one_pass {
            true => Some(SnapshotListing::read(self.remote(), cache)?),
            false => None,
        };
        // Each one waits on the network and on fsyncs: sessions that are not
        // forks are brought in side by side, handed to the workers as their
        // journals arrive, forks after them one by one, since a fork brings
        // its ancestors with it.
        let failed: Mutex<Option<SessionError>> = Mutex::new(None);
        let forks: Mutex<Vec<usize>> = Mutex::new(Vec::new());
        let (tx, rx) = std::sync::mpsc::sync_channel::<(usize, Option<Vec<u8>>)>(SYNC_WORKERS);
        let rx = Mutex::new(rx);
        std::thread::scope(|scope| {
            for _ in 0..SYNC_WORKERS.min(stale.len()) {
                scope.spawn(|| loop {
                    let Ok((i, read)) = lock(&rx).recv() else {
                        break;
                    };
                    // After a failure the rest is drained, not brought in.
                    if lock(&failed).is_some() {
                        continue;
                    }
                    let id = &stale[i].0;
                    match self.sync_session(cache, id, true, read, listed.as_ref()) {
                        Ok(Some(_)) => {}
                        Ok(None) => lock(&forks).push(i),
                        Err(e) => {
                            lock(&failed).get_or_insert(e);
                        }
                    }
                });
            }
            let mut handed = vec![false; stale.len()];
            if one_pass {
                let at: HashMap<&str, usize> = stale
                    .iter()
                    .enumerate()
                    .map(|(i, (id, _))| (id.as_str(), i))
                    .collect();
                let runs: Vec<(String, u64)> =
                    stale.iter().map(|(id, n)| (id.to_string(), *n)).collect();
                let read = self.journals.read_many(&runs, &mut |run, lines| {
                    let Some(&i) = at.get(run) else {
                        return true;
                    };
                    handed[i] = true;
                    tx.send((i, Some(lines))).is_ok() && lock(&failed).is_none()
                });
                if let Err(e) = read {
                    lock(&failed).get_or_insert(e.into());
                }
            }
            // Those not read yet (all of them, unless read in one pass) are
            // read by the workers.
            for (i, _) in handed.iter().enumerate().filter(|(_, &h)| !h) {
                if lock(&failed).is_some() || tx.send((i, None)).is_err() {
                    break;
                }
            }
            drop(tx);
        });
        if let Some(e) = lock(&failed).take() {
            return Err(e);
        }
        let mut forks = std::mem::take(&mut *lock(&forks));
        forks.sort_unstable();
        for i in forks {
            self.sync(cache, &stale[i].0)?;
        }
        Ok(stale.len())
    }

    /// Uploads what `lines` name, then appends them: the body of
    /// [`JournalMirror::publish`].
    fn publish_lines(
        &self,
        store: &Store,
        run: &RunId,
        after: u64,
        lines: &[u8],
    ) -> Result<(), SessionError> {
        let mut manifests: Vec<ManifestFile> = Vec::new();
        let mut named: BTreeSet<ObjectHash> = BTreeSet::new();
        for line in lines.split_inclusive(|&b| b == b'\n') {
            let line = line.strip_suffix(b"\n").unwrap_or(line);
            let record = Record::from_line(line).map_err(|e| SessionError::BadObjectName {
                run: run.to_string(),
                seq: after + 1,
                reason: format!("a record to publish does not parse: {e}"),
            })?;
            match &record.body {
                RecordBody::Snapshot(s) => {
                    let rel_path = format!(
                        "{}/{}.json",
                        rel(store, &store.snapshots_dir(run)),
                        s.snapshot
                    );
                    manifests.push(self.local_manifest(store, &s.snapshot, rel_path, false)?);
                }
                RecordBody::Checkpoint(c) => {
                    let rel_path = format!(
                        "{}/{}.json",
                        rel(store, &store.checkpoints_dir()),
                        c.checkpoint
                    );
                    manifests.push(self.local_manifest(store, &c.checkpoint, rel_path, true)?);
                }
                _ => {}
            }
            named.extend(objects_of_records(run, std::slice::from_ref(&record))?);
        }
        for m in &manifests {
            named.extend(m.objects.iter().copied());
        }
        let named: Vec<ObjectHash> = named.into_iter().collect();
        // The remote destination's steps 2 to 4 for these lines: uploads
        // hold the pool's shared lease until the records naming them are
        // published, so a prune on another host waits.
        let dest = RemoteDest::new(self.remote(), store);
        let _lease = match named.is_empty() && manifests.is_empty() {
            true => None,
            false => Some(dest.hold()?),
        };
        dest.upload(&named, &NoProgress)?;
        for m in &manifests {
            dest.put_manifest(m)?;
        }
        // The session's writer lease, taken or renewed, is kept: the
        // writer here goes on appending.
        self.journals.hold(run.as_str())?;
        self.journals.append(run.as_str(), after, lines)?;
        Ok(())
    }

    /// Deletes from the shared pool every object that no session of the
    /// shared store names and that is older than `grace`, under the pool's
    /// exclusive lease (refused while an upload holds a shared one).
    ///
    /// # Errors
    /// The lease is held elsewhere ([`RemoteJournalError::Leased`]); a
    /// journal or manifest does not read or verify (nothing deleted); the
    /// backends fail.
    pub fn prune(
        &self,
        layout: &Store,
        grace: std::time::Duration,
        dry_run: bool,
    ) -> Result<cairn_objects::RemotePruneReport, SessionError> {
        let token = self.journals.pool_exclusive()?;
        let done = self.prune_under_lease(layout, grace, dry_run);
        if let Some(token) = token {
            self.journals.pool_release(&token);
        }
        done
    }

    fn prune_under_lease(
        &self,
        layout: &Store,
        grace: std::time::Duration,
        dry_run: bool,
    ) -> Result<cairn_objects::RemotePruneReport, SessionError> {
        use super::Source as _;
        let source = RemoteSource::new(self.remote(), layout, HashMap::new());
        let mut named: BTreeSet<ObjectHash> = BTreeSet::new();
        for (id, _) in self.journals.runs()? {
            let Ok(id) = RunId::parse(&id) else {
                continue;
            };
            let Some(bytes) = source.journal(&id)? else {
                continue;
            };
            let shown = PathBuf::from(format!("{}/{id}", self.journals.name()));
            let scan = scan_journal_bytes(&shown, &bytes, id.as_str())?;
            named.extend(named_by(&source, &id, &scan)?.1);
        }
        let named: Vec<ObjectHash> = named.into_iter().collect();
        Ok(cairn_objects::prune_remote(
            self.objects.as_ref(),
            &named,
            grace,
            dry_run,
        )?)
    }

    fn local_manifest(
        &self,
        store: &Store,
        stem: &str,
        rel_path: String,
        checkpoint: bool,
    ) -> Result<ManifestFile, SessionError> {
        let path = store.root().join(&rel_path);
        let bytes = read_beneath(store.root(), &rel_path)?.ok_or_else(|| {
            SessionError::ManifestUnreadable {
                path: path.clone(),
                reason: "a record to publish names it and it is not there".into(),
            }
        })?;
        if checkpoint {
            Ok(checkpoint_manifest(stem, rel_path, bytes, path)?.1)
        } else {
            snapshot_manifest(stem, rel_path, bytes, path)
        }
    }
}

impl JournalMirror for Shared {
    fn publish(
        &self,
        store: &Store,
        run: &RunId,
        after: u64,
        lines: &[u8],
    ) -> Result<(), RemoteJournalError> {
        match self.publish_lines(store, run, after, lines) {
            Ok(()) => Ok(()),
            Err(SessionError::RemoteJournal(e)) => Err(e),
            Err(e) => Err(RemoteJournalError::Failed {
                remote: self.journals.name(),
                action: format!("publish record {} of session {run}", after + 1),
                reason: e.to_string(),
            }),
        }
    }
}

/// The number of records in the cache's copy of `id`, if it has one: the
/// seq of its last record, read from the file's end (the whole file only
/// when its end is not one whole record).
fn cached_records(cache: &Store, id: &RunId) -> Option<u64> {
    let path = cache.journal_path(id);
    if let Ok(Some(tail)) = cairn_journal::read_tail_record(&path) {
        return Some(tail.record.seq);
    }
    let bytes = read_beneath(cache.root(), &rel(cache, &path)).ok()??;
    let end = bytes.iter().rposition(|&b| b == b'\n')? + 1;
    Some(bytes[..end].iter().filter(|&&b| b == b'\n').count() as u64)
}

/// Moves the cache's copy of `id` to `unpublished/<id>-<unix time>` below
/// the cache root, under the session's writer lock.
fn set_aside(cache: &Store, id: &RunId) -> Result<PathBuf, SessionError> {
    let _lock = RunLock::acquire(&cache.lock_path(id), id.as_str())?;
    let dir = cache.root().join("unpublished");
    durable::create_dir_private(&dir)?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let to = dir.join(format!("{id}-{now}"));
    let from = cache.run_dir(id);
    std::fs::rename(&from, &to).map_err(|source| cairn_store::StoreError::Io {
        action: "setting aside",
        path: from.clone(),
        source,
    })?;
    durable::fsync_dir(&dir)?;
    durable::fsync_dir(&cache.runs_dir())?;
    tracing::warn!(
        "session {id}: the cached copy held records the shared store does not; moved to {}",
        to.display()
    );
    Ok(to)
}
