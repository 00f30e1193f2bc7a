//! Copying sessions from one store to another (DESIGN §12): what `cairn
//! push` and `cairn pull` do, one algorithm for every direction.
//!
//! [`transfer`] copies sessions from a *source* store to a *destination*
//! store. Each step below is written once, in [`copy_session`], over two
//! interfaces: a [`Source`] is what a copy reads (a store directory, or a
//! remote store: journals on JetStream, objects and manifests on S3), and a
//! [`Destination`] is what differs where it writes: a store directory
//! (`transfer_store.rs`: its locks, its pool, files written beneath its
//! root) or a remote store (`transfer_remote.rs`: uploads create-only,
//! records appended fenced under the session's writer lease). A shared
//! store's cache is a store directory filled from the remote as a source,
//! and publishing each append to the shared store takes the remote
//! destination's steps (`transfer_shared.rs`). The steps as written here
//! are those of a store directory as the destination; `transfer_remote.rs`
//! says how a remote one keeps their order.
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
//!    bodies `model_call` records name: [`cairn_calls::model_call_objects`])
//!    — that the destination lacks is read from the source,
//!    copied into the destination in its stored encoding (compression and
//!    chunk lists unchanged, chunks before their list), each checked against
//!    its name before it becomes visible there: the path of a fetch from any
//!    remote ([`cairn_objects::fetch_missing`] from a
//!    [`cairn_objects::PoolRemote`]). The destination's store lock is held
//!    shared from before the first object is looked up until the journal
//!    is written, as captures hold it, so a prune there never deletes what
//!    is about to be named. An object the destination has is skipped without
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
//! - No symbolic link below either store's root is followed (the root
//!   itself may be one: the operator chose it). A link where a store keeps
//!   a directory or file — `objects/`, a fan-out directory `objects/<aa>/`
//!   of an object the session names, `runs/`, the session's directory, a
//!   manifest's directory or file — is refused with
//!   [`SessionError::NotPlain`] or [`ObjectError::NotPlain`] (exit 4,
//!   naming it), found in step 1 before anything is written: it is never
//!   skipped, because a copy that leaves out what the user asked for
//!   without stopping is worse than one that stops and says why. Journals,
//!   manifests and objects are read, and manifests, new journals and
//!   objects written, beneath the store root's descriptor
//!   ([`cairn_store::nofollow`], the object pool's one resolver), so a link
//!   swapped in later is refused too.
//!
//! # Not guaranteed
//! - Into a store directory, sessions are copied one after another; to a
//!   remote store, several at once, forks after their ancestors
//!   (`transfer_remote.rs`). A failure stops the transfer, and the sessions
//!   copied before it (and, to a remote store, those under way beside it)
//!   stay, each complete.
//! - A session stopped in step 2 or 3 can leave objects or manifests in the
//!   destination that nothing there names yet; the next transfer uses them,
//!   and a prune there removes unnamed objects.
//! - The gateway's response store (`gateway/`) is not copied: the bodies a
//!   session's records name are, but the destination's gateway replays only
//!   what it stored itself.
//! - The comparison that finds a destination journal up to date, or ahead,
//!   takes no lock: it is the journal as it was when it was read.
//! - An append to a destination journal, its writer lock, its projections
//!   and its workspace index are written by path, after the session's
//!   directory was found to be a plain directory: a link that another
//!   process swaps in at that moment is not caught there.
//!
//! [`ObjectError::NotPlain`]: cairn_objects::ObjectError::NotPlain

use std::collections::{BTreeSet, HashMap, HashSet};
use std::path::PathBuf;

use cairn_journal::{scan_journal_bytes, ChainHash, ForkPin, JournalError, Record, Scan};
use cairn_objects::{ObjectHash, ObjectPool, Progress, RemoteObjects};
use cairn_store::{RunId, Store};
use serde::{Deserialize, Serialize};

use crate::fork::MAX_DEPTH;
use crate::SessionError;

#[path = "transfer_files.rs"]
mod files;
#[path = "transfer_push.rs"]
mod push;
#[path = "transfer_remote.rs"]
mod remote;
#[path = "transfer_shared.rs"]
mod shared;
#[path = "transfer_store.rs"]
mod store;

use files::ManifestFile;
pub use remote::{pull_remote, push_remote, RemoteStore};
pub use shared::{Shared, Synced};
use store::{StoreDest, StoreSource};
// Names the tests of this module use that the copy itself does not.
#[cfg(test)]
use {
    cairn_journal::{JournalWriter, RecordBody},
    cairn_objects::StoreLock,
    std::path::Path,
};

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
/// module documentation. `progress` hears the objects being read
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
/// (before any manifest or journal byte), [`SessionError::NotPlain`] or
/// [`ObjectError::NotPlain`] (a symbolic link where a store holds a file
/// or directory),
/// [`SessionError::ManifestUnreadable`], [`SessionError::BadObjectName`],
/// and IO errors.
///
/// [`ObjectError::NotPlain`]: cairn_objects::ObjectError::NotPlain
/// [`Phase::Verify`]: cairn_objects::Phase::Verify
/// [`Phase::Store`]: cairn_objects::Phase::Store
pub fn transfer(
    from: &Store,
    to: &Store,
    runs: &[RunId],
    progress: &dyn Progress,
) -> Result<TransferReport, SessionError> {
    let source = StoreSource::new(from);
    copy_sessions(&source, &mut StoreDest::new(to), runs, progress)
}

/// Where a transfer reads sessions from: a store directory
/// ([`StoreSource`]) or a remote store (journals on JetStream, objects and
/// manifests on S3).
trait Source {
    /// Where `rel` (a path below a store's root) is, for messages.
    fn show(&self, rel: &str) -> PathBuf;
    /// Where the session's journal is, for messages.
    fn show_journal(&self, id: &RunId) -> PathBuf;
    /// The session's journal as stored, or `None`.
    fn journal(&self, id: &RunId) -> Result<Option<Vec<u8>>, SessionError>;
    /// The fork pin of the session's first record (`None` inside for a
    /// root), or `None` when there is no journal.
    fn fork_pin(&self, id: &RunId) -> Result<Option<Option<ForkPin>>, SessionError>;
    /// The session's snapshot manifests, checked; `scan` is its verified
    /// journal.
    fn snapshot_manifests(
        &self,
        id: &RunId,
        scan: &Scan,
    ) -> Result<Vec<ManifestFile>, SessionError>;
    /// The session's checkpoint manifests, checked; `scan` is its verified
    /// journal.
    fn checkpoint_manifests(
        &self,
        id: &RunId,
        scan: &Scan,
    ) -> Result<Vec<ManifestFile>, SessionError>;
    /// Its objects, and where they are for messages.
    fn objects(&self) -> (SourceObjects<'_>, PathBuf);
    /// The store a fork's ancestors are checked in: the source's own, or
    /// `None` for the destination's (where they were copied first).
    fn ancestry(&self) -> Option<&Store>;
    /// Checks, before anything is written, that the objects `named` can be
    /// read without following a link (a store directory's pool; nothing to
    /// check elsewhere).
    fn check_objects(&self, named: &BTreeSet<ObjectHash>) -> Result<(), SessionError> {
        match self.objects().0 {
            SourceObjects::Pool(pool) => Ok(pool.check_dirs(named)?),
            SourceObjects::Remote(_) => Ok(()),
        }
    }
}

/// The objects of a [`Source`].
enum SourceObjects<'a> {
    /// A store directory's pool.
    Pool(&'a ObjectPool),
    /// A remote object store.
    Remote(&'a dyn RemoteObjects),
}

/// Where a transfer writes sessions: what differs between a store directory
/// ([`StoreDest`]) and a remote store (`RemoteDest`: journals on JetStream,
/// objects and manifests on S3). [`copy_session`] calls these in the order
/// of the module documentation, every check of step 1 before the first
/// write.
trait Destination {
    /// Keeps a prune of the destination's objects waiting, from before the
    /// first object is looked up until it is dropped after the journal is
    /// written: the store lock held shared, or the shared pool's lease.
    type Hold;
    /// The session's journal claimed in step 1 for writing in step 4.
    type Claim;

    /// Where `rel` (a path below a store's root) is there, for messages.
    fn show(&self, rel: &str) -> PathBuf;
    /// Where the session's journal is there, for messages.
    fn show_journal(&self, id: &RunId) -> PathBuf;
    /// A store directory holding the session's ancestors, where a fork's
    /// pinned ancestry is checked when the source is not a store directory:
    /// for a store directory itself (the ancestors are copied there first).
    /// A remote destination is pushed to from a store directory, which is
    /// checked as the source.
    fn ancestry(&self) -> &Store;
    /// The session's journal as stored there (read without its lock), or
    /// `None`.
    fn journal(&self, id: &RunId) -> Result<Option<Vec<u8>>, SessionError>;
    /// The manifest at `rel` below the root as stored there, or `None`.
    fn manifest(&self, rel: &str) -> Result<Option<Vec<u8>>, SessionError>;
    /// Checks, before anything is written, that the objects `named` can be
    /// stored without following a link (a store directory's pool).
    fn check_objects(&self, named: &BTreeSet<ObjectHash>) -> Result<(), SessionError>;
    /// Whether every object the session names that it lacks is copied even
    /// when no record or manifest is to be written: a store directory looks
    /// each up with a stat and fills in what it lacks; a remote store is
    /// asked nothing by a transfer that writes nothing there.
    fn fills_in(&self) -> bool;
    /// Claims the journal for `planned` (a create or an append of the
    /// source's `h(0..=n)` `src`); `found` is the journal as step 1 read
    /// it. A store directory takes the writer lock (refused while another
    /// process writes the session) and compares again under it.
    fn claim(
        &self,
        id: &RunId,
        planned: Plan,
        src: &[ChainHash],
        found: Option<&Found>,
    ) -> Result<Claimed<Self::Claim>, SessionError>;
    /// Step 2 begins: takes the [`Destination::Hold`].
    fn hold(&self) -> Result<Self::Hold, SessionError>;
    /// Step 2: copies each of `send` it lacks from `source` in its stored
    /// encoding, each checked against its name before it is visible there;
    /// one it has is skipped without reading its body. With `naming` (a
    /// record or manifest is about to name them), the `named` objects it
    /// already had are made durable there first. Returns (objects, bytes as
    /// stored).
    #[allow(clippy::too_many_arguments)]
    fn put_objects(
        &mut self,
        source: &dyn Source,
        id: &RunId,
        hold: &Self::Hold,
        send: &[ObjectHash],
        named: &BTreeSet<ObjectHash>,
        naming: bool,
        progress: &dyn Progress,
    ) -> Result<(u64, u64), SessionError>;
    /// Step 3: stores a manifest step 1 found missing, byte for byte,
    /// durably, never over other bytes.
    fn put_manifest(&self, m: &ManifestFile) -> Result<(), SessionError>;
    /// Step 4: creates or extends the claimed journal with the source's
    /// `records` (whole lines, `h(0..=n)` `src`) it lacks.
    fn write_journal(
        &mut self,
        id: &RunId,
        claim: Self::Claim,
        src: &[ChainHash],
        records: &[u8],
    ) -> Result<Stands, SessionError>;
    /// Step 5: what the destination derives from its journal, refreshed.
    fn settle(&self, id: &RunId, stands: &Stands) -> Result<(), SessionError>;
}

/// The destination's journal as step 1 read it: its length and `h(0..=n)`.
struct Found {
    len: usize,
    links: Vec<ChainHash>,
}

/// A destination journal after [`Destination::claim`].
enum Claimed<C> {
    /// To be written in step 4.
    Write(C),
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

impl TransferReport {
    /// Adds one session's copy, in lineage order, to the totals.
    fn add(&mut self, s: SessionTransfer) {
        self.objects_copied += s.objects_copied;
        self.bytes_copied += s.bytes_copied;
        self.sessions.push(s);
    }
}

/// Copies `runs`, each with its ancestors, from `from` to `to`: the one
/// algorithm of every transfer.
fn copy_sessions<D: Destination>(
    from: &dyn Source,
    to: &mut D,
    runs: &[RunId],
    progress: &dyn Progress,
) -> Result<TransferReport, SessionError> {
    let mut report = TransferReport::default();
    for (id, _) in lineage_order(from, runs)? {
        report.add(copy_session(from, to, &id, progress)?);
    }
    Ok(report)
}

/// Copies one session, in the steps of the module documentation.
fn copy_session<D: Destination>(
    from: &dyn Source,
    to: &mut D,
    id: &RunId,
    progress: &dyn Progress,
) -> Result<SessionTransfer, SessionError> {
    // 1. Check the source, then compare the destination's journal and
    // manifests with it; nothing is written before both pass.
    let bytes = from.journal(id)?.ok_or_else(|| JournalError::NotFound {
        run: id.to_string(),
    })?;
    let src = scan_journal_bytes(&from.show_journal(id), &bytes, id.as_str())?;
    // A fork: its pinned ancestry and its terminals over the lineage (in
    // the destination when the source cannot say: its ancestors were
    // copied there first).
    crate::load::state_for_resume(from.ancestry().unwrap_or(to.ancestry()), id, &src)?;
    let records = &bytes[..usize::try_from(src.valid_len).unwrap_or(bytes.len())];
    let src_links = links(&src);
    let found = match to.journal(id)? {
        Some(b) => Some(Found {
            len: b.len(),
            links: links(&scan_journal_bytes(&to.show_journal(id), &b, id.as_str())?),
        }),
        None => None,
    };
    let planned = plan(&src_links, found.as_ref().map(|f| f.links.as_slice()));
    if let Plan::Diverged(seq) = planned {
        return Err(diverged(id, seq));
    }
    let (manifests, named) = named_by(from, id, &src)?;
    // A link where either end keeps objects is refused now, with nothing
    // written.
    from.check_objects(&named)?;
    to.check_objects(&named)?;
    let mut missing_manifests = Vec::new();
    for m in manifests {
        match to.manifest(&m.rel)? {
            None => missing_manifests.push(m),
            Some(have) if have == m.bytes => {}
            Some(_) => return Err(conflict(from.show(&m.rel), to.show(&m.rel))),
        }
    }
    // The journal claimed, when records are to be written, before anything
    // else is: a session another process writes is refused with nothing
    // copied, and one changed since it was compared is compared again.
    let claimed = match planned {
        Plan::Create | Plan::Append => to.claim(id, planned, &src_links, found.as_ref())?,
        _ => {
            let have = found.as_ref().map_or(&src_links, |f| &f.links);
            Claimed::Stays(stands(have, planned == Plan::Ahead))
        }
    };
    let appends = matches!(claimed, Claimed::Write(_));
    let naming = appends || !missing_manifests.is_empty();
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
    let hold = match naming || to.fills_in() {
        true => Some(to.hold()?),
        false => None,
    };
    if let Some(hold) = &hold {
        // 2. Objects, the hold kept until the journal is written: every one
        // the session names, or, when only manifests are to be written,
        // every one they name.
        let send: Vec<ObjectHash> = if appends || to.fills_in() {
            named.iter().copied().collect()
        } else {
            let of_manifests: BTreeSet<ObjectHash> = missing_manifests
                .iter()
                .flat_map(|m| m.objects.iter().copied())
                .collect();
            of_manifests.into_iter().collect()
        };
        let (n, stored) = to.put_objects(from, id, hold, &send, &named, naming, progress)?;
        out.objects_copied = n;
        out.bytes_copied += stored;

        // 3. Manifests.
        for m in &missing_manifests {
            to.put_manifest(m)?;
            out.manifests_copied += 1;
            out.bytes_copied += m.bytes.len() as u64;
        }
    }

    // 4. Journal.
    let stands = match claimed {
        Claimed::Write(claim) => to.write_journal(id, claim, &src_links, records)?,
        Claimed::Stays(stands) => stands,
    };
    drop(hold);
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

    // 5. What the destination derives from its journal.
    to.settle(id, &stands)?;
    Ok(out)
}

/// A mutex's guard, poisoned or not: what the transfers' workers guard (a
/// first error, finished copies, lists of indexes) is whole after any
/// panic.
fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// `runs` with their ancestors, each ancestor before its forks, each once,
/// with its fork depth among them (0 for a session whose parent is not
/// copied: a root, or a fork of one already there).
fn lineage_order(from: &dyn Source, runs: &[RunId]) -> Result<Vec<(RunId, usize)>, SessionError> {
    let mut order = Vec::new();
    // Each session placed, with its fork depth among those copied.
    let mut placed: HashMap<RunId, usize> = HashMap::new();
    for id in runs {
        if placed.contains_key(id) {
            continue;
        }
        let mut chain: Vec<RunId> = Vec::new();
        let mut seen: HashSet<RunId> = HashSet::from([id.clone()]);
        let mut at = id.clone();
        // The pin that led to `at`, for an ancestor.
        let mut led: Option<ForkPin> = None;
        // The depth of the chain's oldest session.
        let mut base = 0;
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
            if let Some(&d) = placed.get(&parent) {
                base = d + 1;
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
        for (k, r) in chain.into_iter().rev().enumerate() {
            if !placed.contains_key(&r) {
                placed.insert(r.clone(), base + k);
                order.push((r, base + k));
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

/// Every object `records` of session `id` name besides manifests (the
/// bodies of `model_call` records); a name that is not one is refused with its seq.
fn objects_of_records(id: &RunId, records: &[Record]) -> Result<Vec<ObjectHash>, SessionError> {
    let mut out = Vec::new();
    for r in records {
        let found =
            cairn_calls::model_call_objects(r).map_err(|reason| SessionError::BadObjectName {
                run: id.to_string(),
                seq: r.seq,
                reason,
            })?;
        out.extend(found);
    }
    Ok(out)
}

/// The manifests of session `id` in `from` (snapshots, then checkpoints)
/// and every object the session names: in them, and in its records `scan`.
fn named_by(
    from: &dyn Source,
    id: &RunId,
    scan: &Scan,
) -> Result<(Vec<ManifestFile>, BTreeSet<ObjectHash>), SessionError> {
    let mut manifests = from.snapshot_manifests(id, scan)?;
    manifests.extend(from.checkpoint_manifests(id, scan)?);
    let mut named: BTreeSet<ObjectHash> = BTreeSet::new();
    for m in &manifests {
        named.extend(m.objects.iter().copied());
    }
    named.extend(objects_of_records(id, &scan.records)?);
    Ok((manifests, named))
}

/// A manifest held at `destination_path` with other bytes than at
/// `source_path`.
fn conflict(source_path: PathBuf, destination_path: PathBuf) -> SessionError {
    SessionError::ManifestConflict {
        source_path,
        destination_path,
    }
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
