//! Copying sessions to and from a remote store (DESIGN §12): journals in a
//! [`RemoteJournals`] (JetStream), objects in a [`RemoteObjects`] and
//! snapshot and checkpoint manifests in [`RemoteFiles`] (S3).
//!
//! A pull is the transfer of the module above with the remote as its
//! [`Source`]: the same checks and the same order (objects, each verified,
//! then manifests, then the journal, then projections). A push keeps the
//! same order into the remote:
//!
//! 1. **Check, before writing anything.** The local journal is read and
//!    verified, the remote's read and verified, and the two compared by
//!    chain hash: different records at some seq refuse the session
//!    ([`SessionError::Diverged`]); a remote manifest with other bytes
//!    refuses it ([`SessionError::ManifestConflict`]).
//! 2. **Objects** (steps 2 to 4 hold the shared pool's shared lease, so a
//!    prune there waits for the records that name them) the session names
//!    are uploaded
//!    ([`cairn_objects::upload`]: chunks before their list, create-only),
//!    only when records or manifests are to be published: a push that
//!    finds the remote up to date reads no object and asks nothing of the
//!    object store.
//! 3. **Manifests**, create-only.
//! 4. **Records**: the writer lease of the session is taken, then the
//!    missing records are appended, fenced on the remote's end as it was
//!    read in step 1. A race lost to another writer is refused
//!    ([`cairn_journal::RemoteJournalError::Conflict`], exit 4) with
//!    nothing past the winner's records stored; a lost acknowledgement is
//!    adopted.
//!
//! # Not guaranteed
//! - A pull copies the checkpoint manifests the session's `checkpoint`
//!   records name; a checkpoint whose record was never written (a save
//!   that did not finish) stays behind.
//! - Objects uploaded by a push stopped before step 4 stay in the bucket,
//!   named by nothing yet; the next push uses them.

use std::collections::{BTreeSet, HashMap};
use std::path::PathBuf;
use std::sync::Mutex;

use cairn_journal::{
    scan_journal_bytes, ChainHash, ForkPin, JournalError, RecordBody, RemoteJournals, Scan,
};
use cairn_objects::{
    upload, ObjectHash, ObjectPool, Progress, PutOutcome, RemoteFiles, RemoteObjects, StoreLock,
};
use cairn_store::{RunId, Store};
use serde::Deserialize;

use super::files::{checkpoint_manifest, rel, snapshot_manifest};
use super::{
    diverged, fetch_for, lineage_order, links, objects_of_records, plan, transfer_from,
    ManifestFile, Plan, RecordObjects, SessionTransfer, Source, StoreSource, TransferReport,
    TransferStatus,
};
use crate::SessionError;

/// A store elsewhere: its journals, its objects and its manifests (for
/// JetStream and S3, `S3Objects` is both of the last two).
#[derive(Clone, Copy)]
pub struct RemoteStore<'a> {
    /// Session journals.
    pub journals: &'a dyn RemoteJournals,
    /// The object pool.
    pub objects: &'a dyn RemoteObjects,
    /// Snapshot and checkpoint manifests.
    pub files: &'a dyn RemoteFiles,
}

/// Copies `runs`, each with its ancestors, from the remote `from` into the
/// store `to`: the steps and guarantees of [`super::transfer`], the remote
/// read as the source.
///
/// # Errors
/// As [`super::transfer`], and [`SessionError::RemoteJournal`] or
/// [`SessionError::RemoteFile`] when the remote cannot be read.
pub fn pull_remote(
    from: &RemoteStore<'_>,
    to: &Store,
    runs: &[RunId],
    record_objects: RecordObjects<'_>,
    progress: &dyn Progress,
) -> Result<TransferReport, SessionError> {
    let source = RemoteSource {
        remote: *from,
        layout: to,
        journals: Mutex::new(HashMap::new()),
    };
    transfer_from(&source, to, runs, record_objects, progress)
}

/// Copies `runs`, each with its ancestors, from the store `from` to the
/// remote `to`, in the steps of the module documentation.
///
/// # Errors
/// [`SessionError::Diverged`], [`SessionError::ManifestConflict`] (nothing
/// of the session written), [`SessionError::RemoteJournal`] (a race lost,
/// a lease held, the server unreachable), [`SessionError::RemoteFile`],
/// [`SessionError::Objects`] (an object missing locally or the upload
/// failing: no record published), and the source's errors as for
/// [`super::transfer`].
pub fn push_remote(
    from: &Store,
    to: &RemoteStore<'_>,
    runs: &[RunId],
    record_objects: RecordObjects<'_>,
    progress: &dyn Progress,
) -> Result<TransferReport, SessionError> {
    let source = StoreSource::new(from);
    let order = lineage_order(&source, runs)?;
    let pool = ObjectPool::at(from);
    let mut report = TransferReport::default();
    for id in &order {
        let s = push_session(&source, from, &pool, to, id, record_objects, progress)?;
        report.objects_copied += s.objects_copied;
        report.bytes_copied += s.bytes_copied;
        report.sessions.push(s);
    }
    Ok(report)
}

fn push_session(
    source: &StoreSource<'_>,
    from: &Store,
    pool: &ObjectPool,
    to: &RemoteStore<'_>,
    id: &RunId,
    record_objects: RecordObjects<'_>,
    progress: &dyn Progress,
) -> Result<SessionTransfer, SessionError> {
    // 1. Check both ends.
    let bytes = source.journal(id)?.ok_or_else(|| JournalError::NotFound {
        run: id.to_string(),
    })?;
    let src = scan_journal_bytes(&from.journal_path(id), &bytes, id.as_str())?;
    crate::load::state_for_resume(from, id, &src)?;
    let records = &bytes[..usize::try_from(src.valid_len).unwrap_or(bytes.len())];
    let src_links = links(&src);
    let remote_name = to.journals.name();
    let shown = PathBuf::from(format!("{remote_name}/{id}"));
    let remote_bytes = to.journals.read(id.as_str())?;
    let dst = match &remote_bytes {
        Some(b) => Some(scan_journal_bytes(&shown, b, id.as_str())?),
        None => None,
    };
    let dst_links = dst.as_ref().map(links);
    let planned = plan(&src_links, dst_links.as_deref());
    if let Plan::Diverged(seq) = planned {
        return Err(diverged(id, seq));
    }
    let mut manifests = source.snapshot_manifests(id)?;
    manifests.extend(source.checkpoint_manifests(id, &src)?);
    // What every manifest names, read once: all of it goes up before records.
    let manifest_objects: BTreeSet<ObjectHash> = manifests
        .iter()
        .flat_map(|m| m.objects.iter().copied())
        .collect();
    let mut missing_manifests = Vec::new();
    for m in manifests {
        match get_file(to, &m.rel)? {
            None => missing_manifests.push(m),
            Some(have) if have == m.bytes => {}
            Some(_) => return Err(conflict(from, to, &m.rel)),
        }
    }
    let publish = matches!(planned, Plan::Create | Plan::Append);
    let mut out = SessionTransfer {
        id: id.to_string(),
        records_copied: 0,
        records: dst_links.as_ref().map_or(0, |l| l.len() as u64 - 1),
        tail: dst_links
            .as_ref()
            .and_then(|l| l.last())
            .map_or_else(String::new, ChainHash::to_hex),
        objects_copied: 0,
        bytes_copied: 0,
        manifests_copied: 0,
        status: match planned {
            Plan::Ahead => TransferStatus::RemoteAhead,
            _ => TransferStatus::UpToDate,
        },
    };
    if !publish && missing_manifests.is_empty() {
        return Ok(out);
    }

    // Steps 2 to 4 hold the pool's shared lease, as a capture holds the
    // store lock: a prune of the shared pool waits until the records that
    // name what was uploaded are published.
    let lease = share_pool(to.journals)?;
    let done = (|| -> Result<(), SessionError> {
        // 2. Objects: every one the session names, before anything names them
        // there.
        let mut named: BTreeSet<ObjectHash> = BTreeSet::new();
        if publish {
            named.extend(manifest_objects.iter().copied());
            named.extend(objects_of_records(id, &src.records, record_objects)?);
        } else {
            for m in missing_manifests.iter() {
                named.extend(m.objects.iter().copied());
            }
        }
        let named: Vec<ObjectHash> = named.into_iter().collect();
        if !named.is_empty() {
            let sent = upload(pool, to.objects, &named, progress)?;
            out.objects_copied = sent.objects;
            out.bytes_copied += sent.bytes;
        }

        // 3. Manifests.
        for m in &missing_manifests {
            let put = to
                .files
                .put_file(&m.rel, &m.bytes)
                .map_err(|e| remote_file("storing", to, &m.rel, e))?;
            if put == PutOutcome::AlreadyThere && get_file(to, &m.rel)?.as_deref() != Some(&m.bytes)
            {
                return Err(conflict(from, to, &m.rel));
            }
            out.manifests_copied += 1;
            out.bytes_copied += m.bytes.len() as u64;
        }

        // 4. Records, under the session's writer lease, fenced on the end read
        // in step 1.
        if publish {
            let have = dst_links.as_ref().map_or(0, |l| l.len() as u64 - 1);
            let at = remote_bytes.as_ref().map_or(0, Vec::len);
            if at > records.len() {
                return Err(diverged(id, have + 1));
            }
            to.journals.hold(id.as_str())?;
            let appended = to.journals.append(id.as_str(), have, &records[at..]);
            to.journals.let_go(id.as_str());
            let appended = appended?;
            out.records_copied = appended.stored + appended.adopted;
            out.bytes_copied += (records.len() - at) as u64;
            out.records = src_links.len() as u64 - 1;
            out.tail = src.tail.to_hex();
            out.status = TransferStatus::Copied;
        }
        Ok(())
    })();
    if let Some(token) = lease {
        to.journals.pool_release(&token);
    }
    done?;
    Ok(out)
}

/// Takes the shared pool's shared lease, waiting up to a minute for a
/// prune that holds the exclusive one. Each `pool_share` waits with its
/// share held for as long as the share is sure to stay live (half a lease
/// on JetStream); a longer prune is waited out here, with a new share.
pub(super) fn share_pool(journals: &dyn RemoteJournals) -> Result<Option<String>, SessionError> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        match journals.pool_share() {
            Err(cairn_journal::RemoteJournalError::Leased { .. })
                if std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(200));
            }
            other => return Ok(other?),
        }
    }
}

fn get_file(to: &RemoteStore<'_>, rel_path: &str) -> Result<Option<Vec<u8>>, SessionError> {
    to.files
        .get_file(rel_path)
        .map_err(|e| remote_file("reading", to, rel_path, e))
}

fn remote_file(
    action: &'static str,
    to: &RemoteStore<'_>,
    rel_path: &str,
    source: cairn_objects::RemoteError,
) -> SessionError {
    SessionError::RemoteFile {
        action,
        path: rel_path.to_owned(),
        remote: to.objects.name().to_owned(),
        source,
    }
}

fn conflict(from: &Store, to: &RemoteStore<'_>, rel_path: &str) -> SessionError {
    SessionError::ManifestConflict {
        source_path: from.root().join(rel_path),
        destination_path: PathBuf::from(format!("{}/files/{rel_path}", to.objects.name())),
    }
}

/// A remote store read as a [`Source`].
pub(super) struct RemoteSource<'a> {
    pub(super) remote: RemoteStore<'a>,
    /// The destination, for the layout of paths below a store's root.
    pub(super) layout: &'a Store,
    /// Journals read so far (a fork's pin and then its records are read
    /// from one read).
    pub(super) journals: Mutex<HashMap<String, Option<Vec<u8>>>>,
}

impl Source for RemoteSource<'_> {
    fn show(&self, rel_path: &str) -> PathBuf {
        PathBuf::from(format!("{}/{rel_path}", self.remote.journals.name()))
    }

    fn journal(&self, id: &RunId) -> Result<Option<Vec<u8>>, SessionError> {
        let mut held = self
            .journals
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(j) = held.get(id.as_str()) {
            return Ok(j.clone());
        }
        let read = self.remote.journals.read(id.as_str())?;
        held.insert(id.to_string(), read.clone());
        Ok(read)
    }

    fn fork_pin(&self, id: &RunId) -> Result<Option<Option<ForkPin>>, SessionError> {
        #[derive(Deserialize)]
        struct Head {
            #[serde(default)]
            fork: Option<ForkPin>,
        }
        let Some(bytes) = self.journal(id)? else {
            return Ok(None);
        };
        let first = bytes.split(|&b| b == b'\n').next().unwrap_or_default();
        Ok(Some(
            serde_json::from_slice::<Head>(first)
                .ok()
                .and_then(|h| h.fork),
        ))
    }

    fn snapshot_manifests(&self, id: &RunId) -> Result<Vec<ManifestFile>, SessionError> {
        let dir = rel(self.layout, &self.layout.snapshots_dir(id));
        let names = self
            .remote
            .files
            .list_files(&dir)
            .map_err(|e| remote_file("listing", &self.remote, &dir, e))?;
        let mut out = Vec::new();
        for name in names {
            let Some(stem) = name.strip_suffix(".json") else {
                continue;
            };
            let rel_path = format!("{dir}/{name}");
            let Some(bytes) = get_file(&self.remote, &rel_path)? else {
                continue;
            };
            out.push(snapshot_manifest(
                stem,
                rel_path.clone(),
                bytes,
                self.show(&rel_path),
            )?);
        }
        Ok(out)
    }

    fn checkpoint_manifests(
        &self,
        id: &RunId,
        scan: &Scan,
    ) -> Result<Vec<ManifestFile>, SessionError> {
        let dir = rel(self.layout, &self.layout.checkpoints_dir());
        let mut out = Vec::new();
        let mut seen = BTreeSet::new();
        for r in &scan.records {
            let RecordBody::Checkpoint(c) = &r.body else {
                continue;
            };
            if !seen.insert(c.checkpoint.clone()) {
                continue;
            }
            let rel_path = format!("{dir}/{}.json", c.checkpoint);
            let shown = self.show(&rel_path);
            let bytes = get_file(&self.remote, &rel_path)?.ok_or_else(|| {
                SessionError::ManifestUnreadable {
                    path: shown.clone(),
                    reason: format!(
                        "record {} names checkpoint {} and the remote does not hold its manifest",
                        r.seq, c.checkpoint
                    ),
                }
            })?;
            let (run, file) = checkpoint_manifest(&c.checkpoint, rel_path, bytes, shown.clone())?;
            if run != id.as_str() {
                return Err(SessionError::ManifestUnreadable {
                    path: shown,
                    reason: format!("it belongs to session {run}, not {id}"),
                });
            }
            out.push(file);
        }
        Ok(out)
    }

    fn fetch(
        &self,
        id: &RunId,
        pool: &ObjectPool,
        lock: &StoreLock,
        missing: &[ObjectHash],
        progress: &dyn Progress,
    ) -> Result<(u64, u64), SessionError> {
        let shown = PathBuf::from(self.remote.objects.name());
        fetch_for(
            id,
            pool,
            lock,
            self.remote.objects,
            missing,
            progress,
            &shown,
        )
    }

    fn ancestry(&self) -> Option<&Store> {
        None
    }
}
