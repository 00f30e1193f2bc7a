//! Copying sessions from one store to another (DESIGN §12): what `cairn
//! push` and `cairn pull` do, one code path for both directions.
//!
//! [`transfer`] copies sessions from a *source* store to a *destination*
//! store. This build knows one kind of store, a store directory (a
//! [`Store`] and its [`ObjectPool`]); each step below reads one end and
//! writes the other, so journals on JetStream and objects on S3 can take
//! their places behind storage interfaces.
//!
//! # The steps
//! A session is copied with its ancestors (a fork's parent chain, root
//! first), each whole before the next, so a fork is never in the
//! destination without the prefix it pins. For each session, in this order,
//! so that nothing in the destination ever names something missing there:
//!
//! 1. **Check, before writing anything.** The source journal is read once
//!    and verified: its hash chain, its terminals, and for a fork its pinned
//!    ancestry. One that does not verify is an integrity failure naming the
//!    session and the first bad seq. Only whole records are copied: a torn
//!    or preallocated tail (NUL bytes) is not. The destination's journal of
//!    the session, if it has one, is read without its lock and compared
//!    record by record by chain hash (`h(n)` covers every byte of records
//!    1..=n); if the two differ at some seq, the session is refused with
//!    nothing written. So is a snapshot or checkpoint manifest that the
//!    destination holds with other bytes. When records are to be written,
//!    the destination journal's writer lock is taken now (refused, naming
//!    the holder, while another process writes the session; nothing is
//!    copied then) and the journal compared again under it.
//! 2. **Objects.** Every object the session names — in its snapshot
//!    manifests, in its checkpoint manifests, and in its records (the
//!    caller says which: [`RecordObjects`], the gateway's `model_call`
//!    bodies) — that the destination lacks is read from the source,
//!    copied into the destination in its stored encoding (compression and
//!    chunk lists unchanged, chunks before their list), each checked against
//!    its name before it becomes visible there: the path of a fetch from any
//!    remote ([`cairn_objects::fetch_missing`] from a [`PoolRemote`]).
//!    The destination's store lock is held shared from before the first object is looked up until the journal is
//!    written, as captures hold it, so a prune there never deletes what is
//!    about to be named. An object the destination has is skipped without
//!    reading its body. An object missing from the source, or that does not
//!    verify, stops the session before any manifest or journal byte is
//!    written. The new objects are made durable together.
//! 3. **Manifests.** The snapshot manifests (`runs/<id>/workspace/
//!    snapshots/`), then the session's checkpoint manifests
//!    (`checkpoints/`), byte for byte, each by temporary file, fsync, rename
//!    and directory fsync.
//! 4. **Journal.** A destination without the session gets the whole journal
//!    the same way, under the session's writer lock: a crash never leaves a
//!    partial journal visible. One whose journal holds a prefix of the
//!    source's records gets the missing records' exact bytes appended
//!    through its journal writer (see
//!    [`cairn_journal::JournalWriter::append_lines`]), which cut its torn or
//!    preallocated tail when it took the lock, checks that the lines
//!    continue its chain, writes them with one write and one fsync, and
//!    then cuts the space it preallocated. A destination that already holds
//!    the same records, or more (`remote_ahead`), is left alone, not even
//!    locked, and reported.
//! 5. **Projections.** The destination's `meta.json` and `sessions.index`
//!    are refreshed from its verified journal, and its workspace index (the
//!    label map and head, with no stat cache) is rebuilt from its `snapshot`
//!    records, so `cairn sessions`, `rewind` and `resume` work there. The
//!    stat cache describes files on one machine: it is never copied.
//!
//! # Guarantees
//! - Objects before the manifests that name them, manifests before the
//!   journal, a fork's ancestors before the fork.
//! - The copied journal is byte for byte the source's records, created or
//!   extended (`file → file → file` round-trips exactly).
//! - Repeating a transfer copies and writes nothing: present objects are not
//!   read, equal manifests are not rewritten, and a destination journal
//!   that holds every record is not opened for writing, nor locked.
//! - No symbolic link below either store's root is followed: files are read
//!   through [`cairn_store::nofollow`], and every directory written into is
//!   checked, component by component, to be a plain directory.
//!
//! # Not guaranteed
//! - Sessions are copied one after another: a failure stops the transfer,
//!   and the sessions copied before it stay, each complete.
//! - A session stopped in step 2 or 3 can leave objects or manifests in the
//!   destination that nothing there names yet; the next transfer uses them,
//!   and a prune there removes unnamed objects.
//! - The gateway's response store (`gateway/`) is not copied: the bodies a
//!   session's records name are, but the destination's gateway replays only
//!   what it stored itself.
//! - The comparison that finds a destination journal up to date, or ahead,
//!   takes no lock: it is the journal as it was when it was read.

use std::collections::{BTreeSet, HashSet};
use std::path::{Path, PathBuf};

use cairn_journal::{
    scan_journal_bytes, ChainHash, ForkPin, JournalError, JournalWriter, Record, RecordBody,
    RunLock, Scan,
};
use cairn_objects::{
    fetch_missing, ObjectError, ObjectHash, ObjectPool, PoolRemote, Progress, StoreLock,
};
use cairn_store::nofollow;
use cairn_store::{durable, RunId, Store};
use cairn_workspace::{Label, SnapshotId, Workspace};
use serde::{Deserialize, Serialize};

use crate::fork::MAX_DEPTH;
use crate::SessionError;

#[path = "transfer_files.rs"]
mod files;
#[path = "transfer_remote.rs"]
mod remote;
pub(crate) use files::ManifestFile;
use files::{
    all_checkpoint_manifests, ensure_dir, fork_pin, read_beneath, rel, snapshot_manifests,
};
pub use remote::{pull_remote, push_remote, RemoteStore};
#[path = "transfer_shared.rs"]
mod shared;
pub use shared::{RecordObjectsFn, Shared, Synced};

/// Names the objects a record needs besides those of manifests (for
/// `model_call` records, their bodies: `cairn_gateway::model_call_objects`),
/// or says why a name it holds is not one.
pub type RecordObjects<'a> = &'a (dyn Fn(&Record) -> Result<Vec<ObjectHash>, String> + Sync);

/// How a session's journal stands in the destination after the transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TransferStatus {
    /// Records were copied: the destination had none of the session, or a
    /// prefix of its records.
    Copied,
    /// The destination already held exactly the source's records.
    UpToDate,
    /// The destination holds the source's records and more: nothing was
    /// copied (copy the other way to bring them back).
    RemoteAhead,
}

/// What a transfer did for one session (an element of `--json`'s
/// `sessions`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionTransfer {
    /// The session.
    pub id: String,
    /// Records appended to the destination's journal.
    pub records_copied: u64,
    /// Records in the destination's journal now.
    pub records: u64,
    /// Chain hash of its last record, hex.
    pub tail: String,
    /// Objects named by the session that the destination lacked and now
    /// holds (a chunked file counts once).
    pub objects_copied: u64,
    /// Bytes written to the destination: objects as stored (compressed,
    /// chunks it already had not counted), manifests and journal records.
    pub bytes_copied: u64,
    /// Snapshot and checkpoint manifests written to the destination.
    pub manifests_copied: u64,
    /// How its journal stands there.
    pub status: TransferStatus,
}

/// What [`transfer`] did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransferReport {
    /// Every session copied or checked, ancestors before their forks.
    pub sessions: Vec<SessionTransfer>,
    /// The sum of their `objects_copied`.
    pub objects_copied: u64,
    /// The sum of their `bytes_copied`.
    pub bytes_copied: u64,
}

/// Copies `runs`, each with its ancestors, from the store `from` to the
/// store `to` (which must exist: see [`Store::open`]), in the steps of the
/// module documentation. `record_objects` names the objects records need
/// besides manifests; `progress` hears the objects being read
/// ([`Phase::Verify`]) and stored ([`Phase::Store`]).
///
/// # Errors
/// The first session that cannot be copied stops the transfer:
/// [`JournalError::Damaged`] (exit 3: the source, or the destination's own
/// copy, does not verify; nothing of the session written),
/// [`SessionError::ForkPrefix`] (an ancestor is missing or changed),
/// [`SessionError::Diverged`] and [`SessionError::ManifestConflict`]
/// (nothing of the session written), [`JournalError::Locked`],
/// [`SessionError::SourceObjectMissing`] and [`SessionError::Objects`]
/// (before any manifest or journal byte), [`SessionError::NotPlain`] (a
/// symbolic link where a store holds a file or directory),
/// [`SessionError::ManifestUnreadable`], [`SessionError::BadObjectName`],
/// and IO errors.
pub fn transfer(
    from: &Store,
    to: &Store,
    runs: &[RunId],
    record_objects: RecordObjects<'_>,
    progress: &dyn Progress,
) -> Result<TransferReport, SessionError> {
    let source = StoreSource::new(from);
    transfer_from(&source, to, runs, record_objects, progress)
}

/// [`transfer`] from any [`Source`] into the store `to`.
pub(crate) fn transfer_from(
    source: &dyn Source,
    to: &Store,
    runs: &[RunId],
    record_objects: RecordObjects<'_>,
    progress: &dyn Progress,
) -> Result<TransferReport, SessionError> {
    let order = lineage_order(source, runs)?;
    let mut copier = Copier {
        source,
        to,
        to_pool: ObjectPool::at(to),
        opened: None,
        record_objects,
        progress,
    };
    let mut report = TransferReport::default();
    for id in &order {
        let s = copier.session(id)?;
        report.objects_copied += s.objects_copied;
        report.bytes_copied += s.bytes_copied;
        report.sessions.push(s);
    }
    Ok(report)
}

/// Where a transfer reads sessions from: a store directory
/// ([`StoreSource`]) or a remote store (journals on JetStream, objects and
/// manifests on S3).
pub(crate) trait Source {
    /// Where `rel` (a path below a store's root) is, for messages.
    fn show(&self, rel: &str) -> PathBuf;
    /// The session's journal as stored, or `None`.
    fn journal(&self, id: &RunId) -> Result<Option<Vec<u8>>, SessionError>;
    /// The fork pin of the session's first record (`None` inside for a
    /// root), or `None` when there is no journal.
    fn fork_pin(&self, id: &RunId) -> Result<Option<Option<ForkPin>>, SessionError>;
    /// The session's snapshot manifests, checked.
    fn snapshot_manifests(&self, id: &RunId) -> Result<Vec<ManifestFile>, SessionError>;
    /// The session's checkpoint manifests, checked; `scan` is its verified
    /// journal.
    fn checkpoint_manifests(
        &self,
        id: &RunId,
        scan: &Scan,
    ) -> Result<Vec<ManifestFile>, SessionError>;
    /// Fetches `missing` into `pool`, each verified before it is visible.
    fn fetch(
        &self,
        id: &RunId,
        pool: &ObjectPool,
        lock: &StoreLock,
        missing: &[ObjectHash],
        progress: &dyn Progress,
    ) -> Result<(u64, u64), SessionError>;
    /// The store a fork's ancestors are checked in: the source's own, or
    /// `None` for the destination (where they were copied first).
    fn ancestry(&self) -> Option<&Store>;
}

/// Fetches `missing` from `source` into `pool` for session `id`: an object
/// the source lacks is [`SessionError::SourceObjectMissing`] naming `shown`.
/// Returns (objects, stored bytes).
fn fetch_for(
    id: &RunId,
    pool: &ObjectPool,
    lock: &StoreLock,
    source: &dyn cairn_objects::RemoteObjects,
    missing: &[ObjectHash],
    progress: &dyn Progress,
    shown: &Path,
) -> Result<(u64, u64), SessionError> {
    match fetch_missing(pool, lock, source, missing, progress) {
        Ok(report) => Ok((report.objects, report.bytes)),
        Err(ObjectError::RemoteMissing { hash, .. }) => Err(SessionError::SourceObjectMissing {
            run: id.to_string(),
            hash,
            store: shown.to_path_buf(),
        }),
        Err(e) => Err(e.into()),
    }
}

/// A store directory as a [`Source`].
pub(crate) struct StoreSource<'a> {
    store: &'a Store,
    pool: ObjectPool,
    /// Every checkpoint manifest of the store, by session, read once.
    checkpoints: std::sync::Mutex<Option<std::collections::HashMap<String, Vec<ManifestFile>>>>,
}

impl<'a> StoreSource<'a> {
    pub(crate) fn new(store: &'a Store) -> Self {
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

    fn journal(&self, id: &RunId) -> Result<Option<Vec<u8>>, SessionError> {
        read_beneath(
            self.store.root(),
            &rel(self.store, &self.store.journal_path(id)),
        )
    }

    fn fork_pin(&self, id: &RunId) -> Result<Option<Option<ForkPin>>, SessionError> {
        fork_pin(self.store, id)
    }

    fn snapshot_manifests(&self, id: &RunId) -> Result<Vec<ManifestFile>, SessionError> {
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

    fn fetch(
        &self,
        id: &RunId,
        pool: &ObjectPool,
        lock: &StoreLock,
        missing: &[ObjectHash],
        progress: &dyn Progress,
    ) -> Result<(u64, u64), SessionError> {
        let source = PoolRemote::new(&self.pool);
        fetch_for(
            id,
            pool,
            lock,
            &source,
            missing,
            progress,
            self.store.root(),
        )
    }

    fn ancestry(&self) -> Option<&Store> {
        Some(self.store)
    }
}

/// `runs` with their ancestors, each ancestor before its forks, each once.
pub(crate) fn lineage_order(from: &dyn Source, runs: &[RunId]) -> Result<Vec<RunId>, SessionError> {
    let mut order = Vec::new();
    let mut placed: HashSet<RunId> = HashSet::new();
    for id in runs {
        if placed.contains(id) {
            continue;
        }
        let mut chain: Vec<RunId> = Vec::new();
        let mut seen: HashSet<RunId> = HashSet::from([id.clone()]);
        let mut at = id.clone();
        // The pin that led to `at`, for an ancestor.
        let mut led: Option<ForkPin> = None;
        loop {
            let fail = |pin: &ForkPin, reason: String| SessionError::ForkPrefix {
                run: id.to_string(),
                ancestor: pin.parent.clone(),
                seq: pin.seq,
                reason,
            };
            let Some(fork) = from.fork_pin(&at)? else {
                return Err(match &led {
                    None => JournalError::NotFound {
                        run: id.to_string(),
                    }
                    .into(),
                    Some(pin) => fail(
                        pin,
                        format!(
                            "it is not in the store {} the fork is copied from, so the fork cannot be copied either",
                            from.show("").display()
                        ),
                    ),
                });
            };
            chain.push(at.clone());
            let Some(pin) = fork else {
                break;
            };
            let parent = RunId::parse(&pin.parent).map_err(|e| fail(&pin, e.to_string()))?;
            if placed.contains(&parent) {
                break;
            }
            if !seen.insert(parent.clone()) || seen.len() > MAX_DEPTH {
                return Err(fail(
                    &pin,
                    "the fork chain loops or is deeper than cairn follows".into(),
                ));
            }
            at = parent;
            led = Some(pin);
        }
        for r in chain.into_iter().rev() {
            if placed.insert(r.clone()) {
                order.push(r);
            }
        }
    }
    Ok(order)
}

/// How the destination's journal relates to the source's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Plan {
    /// The destination has no journal of the session.
    Create,
    /// It holds a strict prefix of the source's records.
    Append,
    /// It holds exactly the source's records.
    UpToDate,
    /// It holds the source's records and more.
    Ahead,
    /// The records differ from this seq on.
    Diverged(u64),
}

/// `h(0..=n)` of a journal read in full: `h(k)` is the `prev` of record
/// k+1, and the scan's tail for the last.
fn links(scan: &Scan) -> Vec<ChainHash> {
    let mut out: Vec<ChainHash> = scan.records.iter().map(|r| r.prev).collect();
    out.push(scan.tail);
    out
}

/// Compares two copies of one journal by chain hashes: equal `h(k)` means
/// equal bytes for records 1..=k.
fn plan(src: &[ChainHash], dst: Option<&[ChainHash]>) -> Plan {
    let Some(dst) = dst else {
        return Plan::Create;
    };
    let m = src.len().min(dst.len()) - 1;
    if src[m] == dst[m] {
        return match dst.len().cmp(&src.len()) {
            std::cmp::Ordering::Less => Plan::Append,
            std::cmp::Ordering::Equal => Plan::UpToDate,
            std::cmp::Ordering::Greater => Plan::Ahead,
        };
    }
    let k = (0..=m).find(|&k| src[k] != dst[k]).unwrap_or(m);
    Plan::Diverged(k.max(1) as u64)
}

struct Copier<'a> {
    source: &'a dyn Source,
    to: &'a Store,
    /// The destination's pool for lookups: opening it creates nothing.
    to_pool: ObjectPool,
    /// The destination's pool opened for writing, once something is put.
    opened: Option<ObjectPool>,
    record_objects: RecordObjects<'a>,
    progress: &'a dyn Progress,
}

impl Copier<'_> {
    fn session(&mut self, id: &RunId) -> Result<SessionTransfer, SessionError> {
        // 1. Check the source, then compare the destination's journal and
        // manifests with it; nothing is written before both pass.
        let (from, to) = (self.source, self.to);
        let bytes = from.journal(id)?.ok_or_else(|| JournalError::NotFound {
            run: id.to_string(),
        })?;
        let src_path = from.show(&rel(to, &to.journal_path(id)));
        let src = scan_journal_bytes(&src_path, &bytes, id.as_str())?;
        // A fork: its pinned ancestry and its terminals over the lineage
        // (in the destination when the source cannot say: its ancestors
        // were copied there first).
        crate::load::state_for_resume(from.ancestry().unwrap_or(to), id, &src)?;
        let records = &bytes[..usize::try_from(src.valid_len).unwrap_or(bytes.len())];
        let src_links = links(&src);
        let dst = match read_beneath(to.root(), &rel(to, &to.journal_path(id)))? {
            Some(b) => Some(scan_journal_bytes(&to.journal_path(id), &b, id.as_str())?),
            None => None,
        };
        let dst_links = dst.as_ref().map(links);
        let planned = plan(&src_links, dst_links.as_deref());
        if let Plan::Diverged(seq) = planned {
            return Err(diverged(id, seq));
        }
        let mut manifests = from.snapshot_manifests(id)?;
        manifests.extend(from.checkpoint_manifests(id, &src)?);
        let mut named: BTreeSet<ObjectHash> = BTreeSet::new();
        for m in &manifests {
            named.extend(m.objects.iter().copied());
        }
        named.extend(objects_of_records(id, &src.records, self.record_objects)?);
        let mut missing_manifests = Vec::new();
        for m in manifests {
            match read_beneath(to.root(), &m.rel)? {
                None => missing_manifests.push(m),
                Some(have) if have == m.bytes => {}
                Some(_) => {
                    return Err(SessionError::ManifestConflict {
                        source_path: from.show(&m.rel),
                        destination_path: to.root().join(&m.rel),
                    })
                }
            }
        }
        let mut out = SessionTransfer {
            id: id.to_string(),
            records_copied: 0,
            records: 0,
            tail: String::new(),
            objects_copied: 0,
            bytes_copied: 0,
            manifests_copied: 0,
            status: TransferStatus::UpToDate,
        };

        // The journal's writer lock, when records are to be written, before
        // anything else is: a session another process writes is refused
        // with nothing copied, and one changed since it was compared is
        // compared again.
        let claim = match planned {
            Plan::Create | Plan::Append => self.claim_journal(id, planned, &src_links)?,
            _ => {
                let d = dst_links.as_deref().unwrap_or(&src_links);
                Claim::Stays(stands(d, planned == Plan::Ahead))
            }
        };

        // 2. Objects, under the destination's store lock (shared) until the
        // journal is written.
        let lock = StoreLock::shared(to)?;
        let missing: Vec<ObjectHash> = named
            .iter()
            .copied()
            .filter(|h| !self.to_pool.contains(h))
            .collect();
        if !missing.is_empty() {
            let (n, stored) = self.copy_objects(id, &missing, &lock)?;
            out.objects_copied = n;
            out.bytes_copied += stored;
        }
        if !matches!(claim, Claim::Stays(_)) || !missing_manifests.is_empty() {
            // Objects that were there already are about to be named: their
            // directory entries must be durable first (those an interrupted
            // copy left may not be yet), as a capture makes them.
            self.sync_present(&named, &missing)?;
        }

        // 3. Manifests.
        for m in &missing_manifests {
            ensure_dir(to.root(), nofollow::split(&m.rel).0)?;
            durable::write_atomic(&to.root().join(&m.rel), &m.bytes)?;
            out.manifests_copied += 1;
            out.bytes_copied += m.bytes.len() as u64;
        }

        // 4. Journal.
        let stands = self.write_journal(id, claim, &src_links, records)?;
        drop(lock);
        out.records_copied = stands.copied;
        out.bytes_copied += stands.bytes;
        out.records = stands.records;
        out.tail = stands.tail.to_hex();
        out.status = if stands.copied > 0 {
            TransferStatus::Copied
        } else if stands.ahead {
            TransferStatus::RemoteAhead
        } else {
            TransferStatus::UpToDate
        };

        // 5. Projections, and the workspace index (also when a copy that
        // stopped before it left none).
        if stands.copied > 0 {
            self.refresh_projections(id)?;
        }
        let index_missing = to.snapshots_dir(id).is_dir() && !to.workspace_index_path(id).exists();
        if stands.copied > 0 || index_missing {
            rebuild_workspace_index(to, id)?;
        }
        Ok(out)
    }

    /// Copies each of `missing` from the source's pool into the
    /// destination's, in its stored encoding, each checked against its name
    /// before it becomes visible there: the path of a fetch from any remote
    /// ([`cairn_objects::fetch_missing`], the source seen as one by
    /// [`PoolRemote`]). Returns (objects, stored bytes).
    fn copy_objects(
        &mut self,
        id: &RunId,
        missing: &[ObjectHash],
        lock: &StoreLock,
    ) -> Result<(u64, u64), SessionError> {
        if self.opened.is_none() {
            // Its format file and `objects/`, when this is its first object.
            self.opened = Some(ObjectPool::open(self.to)?);
        }
        let pool = self.opened.as_ref().unwrap_or(&self.to_pool);
        self.source.fetch(id, pool, lock, missing, self.progress)
    }

    /// Fsyncs the fan-out directories of the `named` objects that were
    /// already in the destination, and the pool's directory.
    fn sync_present(
        &self,
        named: &BTreeSet<ObjectHash>,
        missing: &[ObjectHash],
    ) -> Result<(), SessionError> {
        let copied: HashSet<&ObjectHash> = missing.iter().collect();
        let dirs: BTreeSet<PathBuf> = named
            .iter()
            .filter(|h| !copied.contains(h))
            .filter_map(|h| self.to_pool.path_of(h).parent().map(Path::to_path_buf))
            .collect();
        if dirs.is_empty() {
            return Ok(());
        }
        for d in &dirs {
            durable::fsync_dir_at(d, "transfer.objects")?;
        }
        durable::fsync_dir_at(self.to_pool.dir(), "transfer.objects")?;
        Ok(())
    }

    /// Takes the destination journal's writer lock for `planned` (a create
    /// or an append) and compares the journal again under it.
    fn claim_journal(
        &self,
        id: &RunId,
        planned: Plan,
        src: &[ChainHash],
    ) -> Result<Claim, SessionError> {
        let to = self.to;
        if planned == Plan::Create {
            ensure_dir(to.root(), &rel(to, &to.run_dir(id)))?;
            let lock = RunLock::acquire(&to.lock_path(id), id.as_str())?;
            if std::fs::symlink_metadata(to.journal_path(id)).is_err() {
                return Ok(Claim::Create(lock));
            }
            // Created since it was compared: extend it instead.
        }
        let (writer, scan) = JournalWriter::open(to, id)?;
        let have = links(&scan);
        match plan(src, Some(&have)) {
            Plan::Append => Ok(Claim::Append(writer, have.len() as u64 - 1)),
            Plan::Diverged(seq) => Err(diverged(id, seq)),
            p => Ok(Claim::Stays(stands(&have, p == Plan::Ahead))),
        }
    }

    /// Step 4: creates or extends the destination's journal as claimed.
    fn write_journal(
        &self,
        id: &RunId,
        claim: Claim,
        src: &[ChainHash],
        records: &[u8],
    ) -> Result<Stands, SessionError> {
        let all = stands(src, false);
        match claim {
            Claim::Stays(stands) => Ok(stands),
            Claim::Create(_lock) => {
                durable::write_atomic(&self.to.journal_path(id), records)?;
                Ok(Stands {
                    copied: all.records,
                    bytes: records.len() as u64,
                    ..all
                })
            }
            Claim::Append(mut writer, had) => {
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

    /// Step 5: the destination's projections, from its verified journal.
    fn refresh_projections(&self, id: &RunId) -> Result<(), SessionError> {
        let to = self.to;
        let loaded = crate::load::load(to, id)?;
        if let Err(e) = crate::summary::refresh(
            to,
            id,
            &loaded.state,
            &loaded.scan.tail.to_hex(),
            &loaded.receipt,
        ) {
            // A projection is a cache: a listing rebuilds it from the record.
            tracing::warn!("session {id}: projections not refreshed: {e}");
        }
        Ok(())
    }
}

/// The destination's journal, held for step 4.
enum Claim {
    /// It is to be created: its writer lock.
    Create(RunLock),
    /// It is to be extended: its writer, and the records it holds.
    Append(JournalWriter, u64),
    /// Nothing is to be written to it; it stands so.
    Stays(Stands),
}

/// Where a session's journal stands in the destination after step 4.
struct Stands {
    copied: u64,
    bytes: u64,
    records: u64,
    tail: ChainHash,
    ahead: bool,
}

/// A journal of `h(0..=n)` `links` that nothing is copied into.
fn stands(links: &[ChainHash], ahead: bool) -> Stands {
    Stands {
        copied: 0,
        bytes: 0,
        records: links.len() as u64 - 1,
        tail: links[links.len() - 1],
        ahead,
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

/// Every object `records` of session `id` name besides manifests, by
/// `record_objects`; a name that is not one is refused with its seq.
fn objects_of_records(
    id: &RunId,
    records: &[Record],
    record_objects: RecordObjects<'_>,
) -> Result<Vec<ObjectHash>, SessionError> {
    let mut out = Vec::new();
    for r in records {
        let found = record_objects(r).map_err(|reason| SessionError::BadObjectName {
            run: id.to_string(),
            seq: r.seq,
            reason,
        })?;
        out.extend(found);
    }
    Ok(out)
}

fn diverged(id: &RunId, seq: u64) -> SessionError {
    SessionError::Diverged {
        run: id.to_string(),
        seq,
    }
}

#[cfg(test)]
#[path = "transfer_tests.rs"]
mod tests;
