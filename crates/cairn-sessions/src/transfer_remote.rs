//! Copying sessions to and from a remote store (DESIGN §12): journals in a
//! [`RemoteJournals`] (JetStream), objects in a [`RemoteObjects`] and
//! snapshot and checkpoint manifests in [`RemoteFiles`] (S3).
//!
//! A pull is the transfer of the module above with the remote as its
//! [`Source`]: the same checks and the same order (objects, each verified,
//! then manifests, then the journal, then projections). A push is the same
//! algorithm with the remote as its [`Destination`] ([`RemoteDest`]), which
//! keeps the same order into the remote:
//!
//! 1. **Check, before writing anything.** The local journal is read and
//!    verified, the remote's read and verified, and the two compared by
//!    chain hash: different records at some seq refuse the session
//!    ([`SessionError::Diverged`]); a remote manifest with other bytes
//!    refuses it ([`SessionError::ManifestConflict`]); a link where the
//!    local store keeps the objects the session names refuses it
//!    ([`cairn_objects::ObjectError::NotPlain`]).
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
//! A push copies its sessions side by side, forks after their ancestors,
//! under one lease on the pool for the whole push (`transfer_push.rs`).
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

use cairn_journal::{ChainHash, ForkPin, RecordBody, RemoteJournals, Scan};
use cairn_objects::{upload, ObjectHash, ObjectPool, Progress, PutOutcome};
use cairn_objects::{RemoteError, RemoteFiles, RemoteObjects};
use cairn_store::{RunId, Store};
use serde::Deserialize;

use super::files::{checkpoint_manifest, rel, snapshot_manifest};
use super::push::{copy_side_by_side, PushShared};
use super::{
    conflict, copy_sessions, diverged, Claimed, Destination, Found, ManifestFile, Plan, Source,
    SourceObjects, Stands, StoreDest, StoreSource, TransferReport,
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
    progress: &dyn Progress,
) -> Result<TransferReport, SessionError> {
    let source = RemoteSource::new(*from, to, HashMap::new());
    copy_sessions(&source, &mut StoreDest::new(to), runs, progress)
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
    progress: &dyn Progress,
) -> Result<TransferReport, SessionError> {
    let source = StoreSource::new(from);
    let push = PushShared::new(*to);
    let to = push.store();
    copy_side_by_side(
        &source,
        || RemoteDest::pushing(to, from, &push),
        runs,
        progress,
    )
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

/// A shared lease on a remote store's pool, given up when dropped.
pub(super) struct Lease<'a> {
    journals: &'a dyn RemoteJournals,
    token: Option<String>,
}

impl<'a> Lease<'a> {
    /// The lease `token` names (none: nothing to give up).
    pub(super) fn new(journals: &'a dyn RemoteJournals, token: Option<String>) -> Self {
        Lease { journals, token }
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        if let Some(token) = self.token.take() {
            self.journals.pool_release(&token);
        }
    }
}

impl RemoteStore<'_> {
    /// The manifest at `rel_path` in the remote's files, or `None`.
    fn get_file(&self, rel_path: &str) -> Result<Option<Vec<u8>>, SessionError> {
        self.files
            .get_file(rel_path)
            .map_err(|e| self.file_error("reading", rel_path, e))
    }

    /// The remote's files failing at `action` on `rel_path`.
    fn file_error(
        &self,
        action: &'static str,
        rel_path: &str,
        source: RemoteError,
    ) -> SessionError {
        SessionError::RemoteFile {
            action,
            path: rel_path.to_owned(),
            remote: self.objects.name().to_owned(),
            source,
        }
    }
}

/// A remote store as a [`Destination`], written from a store directory:
/// objects uploaded from its pool, manifests stored create-only, records
/// appended under the session's writer lease, fenced on the remote's end as
/// step 1 read it.
pub(super) struct RemoteDest<'a> {
    remote: RemoteStore<'a>,
    /// The store written from: the objects uploaded are its pool's, its
    /// paths name the manifests in messages.
    from: &'a Store,
    pool: ObjectPool,
    /// The push this session is part of, holding the pool's lease for all.
    push: Option<&'a PushShared<'a>>,
}

impl<'a> RemoteDest<'a> {
    pub(super) fn new(remote: RemoteStore<'a>, from: &'a Store) -> Self {
        RemoteDest {
            remote,
            from,
            pool: ObjectPool::at(from),
            push: None,
        }
    }

    /// A session of `push`, which holds the pool's lease for all of them.
    pub(super) fn pushing(
        remote: RemoteStore<'a>,
        from: &'a Store,
        push: &'a PushShared<'a>,
    ) -> Self {
        RemoteDest {
            push: Some(push),
            ..RemoteDest::new(remote, from)
        }
    }

    /// Uploads `named` from the pool of the store written from
    /// ([`cairn_objects::upload`]: chunks before their list, create-only):
    /// (objects, bytes as stored) the remote lacked.
    pub(super) fn upload(
        &self,
        named: &[ObjectHash],
        progress: &dyn Progress,
    ) -> Result<(u64, u64), SessionError> {
        if named.is_empty() {
            return Ok((0, 0));
        }
        let sent = upload(&self.pool, self.remote.objects, named, progress)?;
        Ok((sent.objects, sent.bytes))
    }
}

/// A remote journal claimed for step 4: the records and bytes step 1 read.
pub(super) struct RemoteClaim {
    have: u64,
    at: usize,
}

impl<'a> Destination for RemoteDest<'a> {
    type Hold = Lease<'a>;
    type Claim = RemoteClaim;

    fn show(&self, rel_path: &str) -> PathBuf {
        PathBuf::from(format!("{}/files/{rel_path}", self.remote.objects.name()))
    }

    fn show_journal(&self, id: &RunId) -> PathBuf {
        PathBuf::from(format!("{}/{id}", self.remote.journals.name()))
    }

    fn ancestry(&self) -> &Store {
        self.from
    }

    fn journal(&self, id: &RunId) -> Result<Option<Vec<u8>>, SessionError> {
        Ok(self.remote.journals.read(id.as_str())?)
    }

    fn manifest(&self, rel_path: &str) -> Result<Option<Vec<u8>>, SessionError> {
        self.remote.get_file(rel_path)
    }

    fn check_objects(&self, _named: &BTreeSet<ObjectHash>) -> Result<(), SessionError> {
        Ok(())
    }

    fn fills_in(&self) -> bool {
        false
    }

    /// Nothing is taken yet: the writer lease is held around the append,
    /// whose fence refuses a journal changed since step 1 read it.
    fn claim(
        &self,
        _id: &RunId,
        _planned: Plan,
        _src: &[ChainHash],
        found: Option<&Found>,
    ) -> Result<Claimed<RemoteClaim>, SessionError> {
        Ok(Claimed::Write(RemoteClaim {
            have: found.map_or(0, |f| f.links.len() as u64 - 1),
            at: found.map_or(0, |f| f.len),
        }))
    }

    /// The pool's shared lease, as a capture holds the store lock: a prune
    /// of the shared pool waits until the records that name what was
    /// uploaded are published.
    fn hold(&self) -> Result<Lease<'a>, SessionError> {
        if let Some(push) = self.push {
            push.hold()?;
            return Ok(Lease::new(self.remote.journals, None));
        }
        Ok(Lease::new(
            self.remote.journals,
            share_pool(self.remote.journals)?,
        ))
    }

    fn put_objects(
        &mut self,
        _source: &dyn Source,
        _id: &RunId,
        _lease: &Lease<'a>,
        send: &[ObjectHash],
        _named: &BTreeSet<ObjectHash>,
        _naming: bool,
        progress: &dyn Progress,
    ) -> Result<(u64, u64), SessionError> {
        self.upload(send, progress)
    }

    /// Create-only: a manifest stored meanwhile with other bytes is a
    /// conflict.
    fn put_manifest(&self, m: &ManifestFile) -> Result<(), SessionError> {
        let put = self
            .remote
            .files
            .put_file(&m.rel, &m.bytes)
            .map_err(|e| self.remote.file_error("storing", &m.rel, e))?;
        if put == PutOutcome::AlreadyThere
            && self.remote.get_file(&m.rel)?.as_deref() != Some(&m.bytes)
        {
            return Err(conflict(self.from.root().join(&m.rel), self.show(&m.rel)));
        }
        Ok(())
    }

    /// The missing records, under the session's writer lease, fenced on
    /// the end step 1 read.
    fn write_journal(
        &mut self,
        id: &RunId,
        claim: RemoteClaim,
        src: &[ChainHash],
        records: &[u8],
    ) -> Result<Stands, SessionError> {
        let RemoteClaim { have, at } = claim;
        if at > records.len() {
            return Err(diverged(id, have + 1));
        }
        let journals = self.remote.journals;
        journals.hold(id.as_str())?;
        let appended = journals.append(id.as_str(), have, &records[at..]);
        journals.let_go(id.as_str());
        let appended = appended?;
        Ok(Stands {
            copied: appended.stored + appended.adopted,
            bytes: (records.len() - at) as u64,
            records: src.len() as u64 - 1,
            tail: src[src.len() - 1],
            ahead: false,
        })
    }

    fn settle(&self, _id: &RunId, _stands: &Stands) -> Result<(), SessionError> {
        Ok(())
    }
}

/// A remote store read as a [`Source`].
pub(super) struct RemoteSource<'a> {
    remote: RemoteStore<'a>,
    /// The destination, for the layout of paths below a store's root.
    layout: &'a Store,
    /// Journals read so far (a fork's pin and then its records are read
    /// from one read).
    journals: Mutex<HashMap<String, Option<Vec<u8>>>>,
    /// The snapshot manifests of every session, listed once before the
    /// journals were read, or `None` to list each session's.
    listed: Option<&'a SnapshotListing>,
}

impl<'a> RemoteSource<'a> {
    /// `remote` read as a source, with the journals `known` already read.
    pub(super) fn new(
        remote: RemoteStore<'a>,
        layout: &'a Store,
        known: HashMap<String, Option<Vec<u8>>>,
    ) -> Self {
        RemoteSource {
            remote,
            layout,
            journals: Mutex::new(known),
            listed: None,
        }
    }

    /// Takes each session's snapshot manifests from `listed` where it
    /// holds every one the session's records name.
    pub(super) fn with_listing(mut self, listed: Option<&'a SnapshotListing>) -> Self {
        self.listed = listed;
        self
    }
}

/// The snapshot manifests of every session of a remote store, from one
/// listing of its `runs/` tree: what bringing in many sessions reads
/// instead of listing each session's directory (a request for each).
///
/// Listed before the journals are read, it can lack a manifest uploaded
/// since, named by a record read after it: a session whose records name a
/// snapshot it does not list has its directory listed as before
/// ([`SnapshotListing::covering`]). Since manifests are stored before any
/// record that names them, everything a session's records name is then in
/// what it copies, as with a listing of its own.
pub(super) struct SnapshotListing(HashMap<String, Vec<String>>);

impl SnapshotListing {
    /// Lists the snapshot manifests of every session of `remote`; `layout`
    /// places them.
    pub(super) fn read(remote: RemoteStore<'_>, layout: &Store) -> Result<Self, SessionError> {
        let runs = rel(layout, &layout.runs_dir());
        let paths = remote
            .files
            .list_tree(&runs)
            .map_err(|e| remote.file_error("listing", &runs, e))?;
        Ok(Self::from_paths(layout, paths))
    }

    /// The listing of `paths`, the files below `runs/` (relative to it):
    /// each session's snapshot manifests, anything else left out.
    fn from_paths(layout: &Store, paths: Vec<String>) -> Self {
        let runs = rel(layout, &layout.runs_dir());
        let mut by_run: HashMap<String, Vec<String>> = HashMap::new();
        for path in paths {
            let Some(id) = path.split('/').next().and_then(|p| RunId::parse(p).ok()) else {
                continue;
            };
            let dir = rel(layout, &layout.snapshots_dir(&id));
            let full = format!("{runs}/{path}");
            let Some(name) = full
                .strip_prefix(dir.as_str())
                .and_then(|n| n.strip_prefix('/'))
                .filter(|n| !n.contains('/'))
            else {
                continue;
            };
            by_run
                .entry(id.to_string())
                .or_default()
                .push(name.to_owned());
        }
        for names in by_run.values_mut() {
            names.sort();
        }
        SnapshotListing(by_run)
    }

    /// The file names listed in `id`'s snapshot directory, sorted, when
    /// they hold the manifest of every snapshot `scan`'s records name;
    /// `None` when one is missing from the listing.
    fn covering(&self, id: &RunId, scan: &Scan) -> Option<&[String]> {
        let names = self.0.get(id.as_str()).map_or(&[][..], Vec::as_slice);
        let all_there = scan.records.iter().all(|r| match &r.body {
            RecordBody::Snapshot(s) => {
                let file = format!("{}.json", s.snapshot);
                names.binary_search(&file).is_ok()
            }
            _ => true,
        });
        all_there.then_some(names)
    }
}

impl Source for RemoteSource<'_> {
    fn show(&self, rel_path: &str) -> PathBuf {
        PathBuf::from(format!("{}/{rel_path}", self.remote.journals.name()))
    }

    fn show_journal(&self, id: &RunId) -> PathBuf {
        self.show(&rel(self.layout, &self.layout.journal_path(id)))
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

    fn snapshot_manifests(
        &self,
        id: &RunId,
        scan: &Scan,
    ) -> Result<Vec<ManifestFile>, SessionError> {
        let dir = rel(self.layout, &self.layout.snapshots_dir(id));
        let names = match self.listed.and_then(|l| l.covering(id, scan)) {
            Some(names) => names.to_vec(),
            None => self
                .remote
                .files
                .list_files(&dir)
                .map_err(|e| self.remote.file_error("listing", &dir, e))?,
        };
        let mut out = Vec::new();
        for name in names {
            let Some(stem) = name.strip_suffix(".json") else {
                continue;
            };
            let rel_path = format!("{dir}/{name}");
            let Some(bytes) = self.remote.get_file(&rel_path)? else {
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
            let bytes = self.remote.get_file(&rel_path)?.ok_or_else(|| {
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

    fn objects(&self) -> (SourceObjects<'_>, PathBuf) {
        (
            SourceObjects::Remote(self.remote.objects),
            PathBuf::from(self.remote.objects.name()),
        )
    }

    fn ancestry(&self) -> Option<&Store> {
        None
    }
}

#[cfg(test)]
mod tests {
    use cairn_journal::{scan_journal_bytes, JournalWriter, Meta, Snapshot};

    use super::*;

    /// A session's journal naming the snapshots `named`, scanned.
    fn naming(store: &Store, named: &[&str]) -> (RunId, Scan) {
        let id = RunId::new();
        let meta = Meta {
            run: String::new(),
            created: "2026-01-01T00:00:00Z".into(),
            workspace: "/tmp/ws".into(),
            name: None,
            fingerprint: None,
            fork: None,
            routing: None,
            system_file: None,
        };
        let mut w = JournalWriter::create(store, &id, meta).unwrap();
        for (i, snapshot) in named.iter().enumerate() {
            w.append(&RecordBody::Snapshot(Snapshot {
                snapshot: (*snapshot).to_owned(),
                label: format!("post:turn:{i}"),
            }))
            .unwrap();
        }
        drop(w);
        let path = store.journal_path(&id);
        let scan = scan_journal_bytes(&path, &std::fs::read(&path).unwrap(), id.as_str()).unwrap();
        (id, scan)
    }

    /// One listing of `runs/` stands for each session's own listing only
    /// while it holds every snapshot the session's records name: one
    /// uploaded after it (named by a record read later) sends the session
    /// back to a listing of its own.
    #[test]
    fn a_listing_of_every_session_covers_only_the_snapshots_it_saw() {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let (a, scan_a) = naming(&store, &["s1", "s2"]);
        let (b, scan_b) = naming(&store, &["s1", "s3"]);
        let (none, scan_none) = naming(&store, &[]);
        let in_dir = |id: &RunId, name: &str| {
            let dir = rel(&store, &store.snapshots_dir(id));
            let runs = rel(&store, &store.runs_dir());
            format!("{}/{name}", dir.strip_prefix(&format!("{runs}/")).unwrap())
        };
        let paths = vec![
            in_dir(&a, "s2.json"),
            in_dir(&a, "s1.json"),
            in_dir(&a, "unnamed.json"),
            in_dir(&b, "s1.json"),
            // Not snapshot manifests: other files, deeper files, not runs.
            format!("{a}/meta.json"),
            in_dir(&b, "deeper/s3.json"),
            "not-a-run/workspace/snapshots/s3.json".to_owned(),
        ];
        let listed = SnapshotListing::from_paths(&store, paths);
        assert_eq!(
            listed.covering(&a, &scan_a),
            Some(
                &[
                    "s1.json".to_owned(),
                    "s2.json".to_owned(),
                    "unnamed.json".to_owned()
                ][..]
            )
        );
        assert_eq!(
            listed.covering(&b, &scan_b),
            None,
            "s3 came after the listing"
        );
        assert_eq!(listed.covering(&none, &scan_none), Some(&[][..]));
        assert_eq!(listed.covering(&RunId::new(), &scan_none), Some(&[][..]));
    }
}
