//! A store directory at either end of a transfer.
//!
//! - As the source ([`StoreSource`]): its journals and manifests read below
//!   its root without following a link, its objects fetched from its pool
//!   (which follows none either).
//! - As the destination ([`StoreDest`]): steps 1 to 5 of the module above
//!   for a store directory — the writer lock taken and the journal compared
//!   again under it, the store lock held shared over objects, manifests and
//!   journal, objects fetched from the source each verified before it is
//!   visible, manifests and new journals written beneath the root's
//!   descriptor, appends through the journal writer, then projections and
//!   the workspace index.

use std::collections::{BTreeSet, HashSet};
use std::path::PathBuf;

use cairn_journal::{ChainHash, ForkPin, JournalWriter, RecordBody, RunLock, Scan};
use cairn_objects::{fetch_missing, ObjectError, ObjectHash, ObjectPool, PoolRemote, Progress};
use cairn_objects::{RemoteObjects, StoreLock};
use cairn_store::{RunId, Store};
use cairn_workspace::{Label, SnapshotId, Workspace};

use super::files::{
    all_checkpoint_manifests, ensure_dir, fork_pin, read_beneath, rel, snapshot_manifests,
    write_beneath,
};
use super::{
    diverged, links, plan, stands, Claimed, Destination, Found, ManifestFile, Plan, Source,
    SourceObjects, Stands,
};
use crate::SessionError;

/// A store directory as a [`Source`].
pub(super) struct StoreSource<'a> {
    store: &'a Store,
    pool: ObjectPool,
    /// Every checkpoint manifest of the store, by session, read once.
    checkpoints: std::sync::Mutex<Option<std::collections::HashMap<String, Vec<ManifestFile>>>>,
}

impl<'a> StoreSource<'a> {
    pub(super) fn new(store: &'a Store) -> Self {
        StoreSource {
            store,
            pool: ObjectPool::at(store),
            checkpoints: std::sync::Mutex::new(None),
        }
    }
}

impl Source for StoreSource<'_> {
    fn show(&self, rel: &str) -> PathBuf {
        self.store.root().join(rel)
    }

    fn show_journal(&self, id: &RunId) -> PathBuf {
        self.store.journal_path(id)
    }

    fn journal(&self, id: &RunId) -> Result<Option<Vec<u8>>, SessionError> {
        read_beneath(
            self.store.root(),
            &rel(self.store, &self.store.journal_path(id)),
        )
    }

    fn fork_pin(&self, id: &RunId) -> Result<Option<Option<ForkPin>>, SessionError> {
        fork_pin(self.store, id)
    }

    fn snapshot_manifests(
        &self,
        id: &RunId,
        _scan: &Scan,
    ) -> Result<Vec<ManifestFile>, SessionError> {
        snapshot_manifests(self.store, id)
    }

    fn checkpoint_manifests(
        &self,
        id: &RunId,
        _scan: &Scan,
    ) -> Result<Vec<ManifestFile>, SessionError> {
        let mut held = self
            .checkpoints
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if held.is_none() {
            *held = Some(all_checkpoint_manifests(self.store)?);
        }
        Ok(held
            .as_mut()
            .and_then(|m| m.remove(id.as_str()))
            .unwrap_or_default())
    }

    fn objects(&self) -> (SourceObjects<'_>, PathBuf) {
        (
            SourceObjects::Pool(&self.pool),
            self.store.root().to_path_buf(),
        )
    }

    fn ancestry(&self) -> Option<&Store> {
        Some(self.store)
    }
}

/// A store directory as a [`Destination`].
pub(super) struct StoreDest<'a> {
    store: &'a Store,
    /// Its pool for lookups: opening it creates nothing.
    pool: ObjectPool,
    /// Its pool opened for writing, once something is put.
    opened: Option<ObjectPool>,
}

impl<'a> StoreDest<'a> {
    pub(super) fn new(store: &'a Store) -> Self {
        StoreDest {
            store,
            pool: ObjectPool::at(store),
            opened: None,
        }
    }
}

/// A store directory's journal claimed for step 4.
pub(super) enum StoreClaim {
    /// It is to be created: its writer lock.
    Create(RunLock),
    /// It is to be extended: its writer (boxed: a lock is a few bytes), and
    /// the records it holds.
    Append(Box<JournalWriter>, u64),
}

impl Destination for StoreDest<'_> {
    type Hold = StoreLock;
    type Claim = StoreClaim;

    fn show(&self, rel: &str) -> PathBuf {
        self.store.root().join(rel)
    }

    fn show_journal(&self, id: &RunId) -> PathBuf {
        self.store.journal_path(id)
    }

    fn ancestry(&self) -> &Store {
        self.store
    }

    fn journal(&self, id: &RunId) -> Result<Option<Vec<u8>>, SessionError> {
        read_beneath(
            self.store.root(),
            &rel(self.store, &self.store.journal_path(id)),
        )
    }

    fn manifest(&self, rel: &str) -> Result<Option<Vec<u8>>, SessionError> {
        read_beneath(self.store.root(), rel)
    }

    fn check_objects(&self, named: &BTreeSet<ObjectHash>) -> Result<(), SessionError> {
        Ok(self.pool.check_dirs(named)?)
    }

    fn fills_in(&self) -> bool {
        true
    }

    /// Takes the journal's writer lock for `planned` (a create or an
    /// append) and compares the journal again under it.
    fn claim(
        &self,
        id: &RunId,
        planned: Plan,
        src: &[ChainHash],
        _found: Option<&Found>,
    ) -> Result<Claimed<StoreClaim>, SessionError> {
        let to = self.store;
        if planned == Plan::Create {
            ensure_dir(to.root(), &rel(to, &to.run_dir(id)))?;
            let lock = RunLock::acquire(&to.lock_path(id), id.as_str())?;
            if std::fs::symlink_metadata(to.journal_path(id)).is_err() {
                return Ok(Claimed::Write(StoreClaim::Create(lock)));
            }
            // Created since it was compared: extend it instead.
        }
        let (writer, scan) = JournalWriter::open(to, id)?;
        let have = links(&scan);
        match plan(src, Some(&have)) {
            Plan::Append => Ok(Claimed::Write(StoreClaim::Append(
                Box::new(writer),
                have.len() as u64 - 1,
            ))),
            Plan::Diverged(seq) => Err(diverged(id, seq)),
            p => Ok(Claimed::Stays(stands(&have, p == Plan::Ahead))),
        }
    }

    fn hold(&self) -> Result<StoreLock, SessionError> {
        Ok(StoreLock::shared(self.store)?)
    }

    /// Copies each of `send` the pool lacks from the source's objects, in
    /// its stored encoding, each checked against its name before it becomes
    /// visible here: the path of a fetch from any remote
    /// ([`cairn_objects::fetch_missing`], a source's pool seen as one by
    /// [`PoolRemote`]). The new objects are made durable together.
    fn put_objects(
        &mut self,
        source: &dyn Source,
        id: &RunId,
        lock: &StoreLock,
        send: &[ObjectHash],
        named: &BTreeSet<ObjectHash>,
        naming: bool,
        progress: &dyn Progress,
    ) -> Result<(u64, u64), SessionError> {
        let missing: Vec<ObjectHash> = send
            .iter()
            .copied()
            .filter(|h| !self.pool.contains(h))
            .collect();
        let mut done = (0, 0);
        if !missing.is_empty() {
            if self.opened.is_none() {
                // Its format file and `objects/`, when this is its first
                // object.
                self.opened = Some(ObjectPool::open(self.store)?);
            }
            let pool = self.opened.as_ref().unwrap_or(&self.pool);
            let (objects, shown) = source.objects();
            let pool_remote;
            let remote: &dyn RemoteObjects = match objects {
                SourceObjects::Pool(p) => {
                    pool_remote = PoolRemote::new(p);
                    &pool_remote
                }
                SourceObjects::Remote(r) => r,
            };
            done = match fetch_missing(pool, lock, remote, &missing, progress) {
                Ok(report) => (report.objects, report.bytes),
                Err(ObjectError::RemoteMissing { hash, .. }) => {
                    return Err(SessionError::SourceObjectMissing {
                        run: id.to_string(),
                        hash,
                        store: shown,
                    })
                }
                Err(e) => return Err(e.into()),
            };
        }
        if naming {
            // Objects that were there already are about to be named: their
            // directory entries must be durable first (those an interrupted
            // copy left may not be yet), as a capture makes them.
            let copied: HashSet<&ObjectHash> = missing.iter().collect();
            self.pool.sync_dirs_of(
                named.iter().filter(|h| !copied.contains(h)),
                "transfer.objects",
            )?;
        }
        Ok(done)
    }

    fn put_manifest(&self, m: &ManifestFile) -> Result<(), SessionError> {
        write_beneath(self.store.root(), &m.rel, &m.bytes)
    }

    fn write_journal(
        &mut self,
        id: &RunId,
        claim: StoreClaim,
        src: &[ChainHash],
        records: &[u8],
    ) -> Result<Stands, SessionError> {
        let all = stands(src, false);
        match claim {
            StoreClaim::Create(_lock) => {
                write_beneath(
                    self.store.root(),
                    &rel(self.store, &self.store.journal_path(id)),
                    records,
                )?;
                Ok(Stands {
                    copied: all.records,
                    bytes: records.len() as u64,
                    ..all
                })
            }
            StoreClaim::Append(mut writer, had) => {
                let at = usize::try_from(writer.len()).unwrap_or(usize::MAX);
                // Equal `h(n)`: the destination's records are the first `at`
                // bytes of the source's.
                if at > records.len() || (at > 0 && records[at - 1] != b'\n') {
                    return Err(diverged(id, writer.seq() + 1));
                }
                writer.append_lines(&records[at..])?;
                // The space the append preallocated goes now, so the journal
                // ends where the source's records do.
                writer.trim()?;
                Ok(Stands {
                    copied: all.records - had,
                    bytes: (records.len() - at) as u64,
                    ..all
                })
            }
        }
    }

    /// The projections, from the verified journal, when records were
    /// copied; the workspace index then, or when a copy that stopped
    /// before it left none.
    fn settle(&self, id: &RunId, stands: &Stands) -> Result<(), SessionError> {
        let to = self.store;
        if stands.copied > 0 {
            let loaded = crate::load::load(to, id)?;
            if let Err(e) = crate::summary::refresh(
                to,
                id,
                &loaded.state,
                &loaded.scan.tail.to_hex(),
                &loaded.receipt,
            ) {
                // A projection is a cache: a listing rebuilds it from the
                // record.
                tracing::warn!("session {id}: projections not refreshed: {e}");
            }
        }
        let index_missing = to.snapshots_dir(id).is_dir() && !to.workspace_index_path(id).exists();
        if stands.copied > 0 || index_missing {
            rebuild_workspace_index(to, id)?;
        }
        Ok(())
    }
}

/// Rebuilds the destination's workspace index of `id` (labels, head; no
/// stat cache) from its journal's `snapshot` records and its manifests,
/// as `cairn reindex` does. Nothing is done for a session that never
/// captured.
fn rebuild_workspace_index(to: &Store, id: &RunId) -> Result<(), SessionError> {
    if !to.snapshots_dir(id).is_dir() {
        return Ok(());
    }
    let scan = cairn_journal::read_journal(&to.journal_path(id), id.as_str())?;
    let boundaries: Vec<(SnapshotId, Label)> = scan
        .records
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::Snapshot(s) => Some((
                SnapshotId::parse(&s.snapshot).ok()?,
                Label::parse(&s.label).ok()?,
            )),
            _ => None,
        })
        .collect();
    Workspace::rebuild_index_of(to, id, &boundaries)?;
    Ok(())
}
