//! The response store (DESIGN §7): every completed model response, by key,
//! for the proxy and for cairn's own agent loop alike.
//!
//! Layout: the entries — one small record per response, naming the
//! response body and, for the proxy, the request body in the store-global
//! object pool, cut into body-class chunks so a conversation re-sent with
//! each turn costs what it appended — and the delivery marks are records of
//! the store's response log (`<store>/gateway/log/`, the `log` module: a
//! call creates no file for them). An older cairn wrote each entry to
//! `<store>/gateway/responses/<aa>/<key>.json` and each mark as an empty
//! `<key>.delivered` beside it: those are still read, and the log's word on
//! a key supersedes them. `<store>/gateway/idempotency/<aa>/<sha256 of the
//! Idempotency-Key>` holds the key a client's `Idempotency-Key` was first
//! used with.
//!
//! Invariants:
//! 1. An entry is put — its bodies durable in the pool first, then the entry
//!    — before anything relies on it: the record that journals the call, the
//!    final event that tells a client the response is complete.
//! 2. `delivered` is set only after the client got the last byte (the
//!    gateway's `delivery` module says when that is). A crash or a cut
//!    connection before that leaves it unset, and the call's retry is
//!    served from the store instead of being bought again. Putting an entry
//!    clears the mark an earlier response under the same key left (durably,
//!    in the same write and before the entry): a new sample's client has
//!    not taken it.
//! 3. Nothing stored is a credential: request headers are not kept, and the
//!    key holds only a hash of the credential.
//! 4. A damaged entry is an error naming its file, never "no response": a
//!    miss would buy the call again.
//! 5. Bodies are put under the store lock held shared
//!    ([`ResponseStore::lock`]) until a durable record names them — the
//!    entry, or the journaled `model_call` of a call without one — so a
//!    prune never deletes them before they are named (the lock's rule,
//!    `cairn_objects::StoreLock`).

use std::path::{Path, PathBuf};

use cairn_objects::{Barrier, NoProgress, ObjectHash, ObjectPool, StoreLock};
use cairn_store::{durable, RunId, Store};
use serde::{Deserialize, Serialize};

use crate::log::{LogRecord, ResponseLog};
use crate::CallsError;

/// One stored response.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// The call's key.
    pub key: String,
    /// The session that bought it.
    pub run: String,
    /// What was called: an API path (`/v1/messages`), or `agent:<provider>`
    /// for cairn's own loop.
    pub endpoint: String,
    /// The upstream's HTTP status.
    pub status: u16,
    /// Whether the body is a stream (`text/event-stream`) or whole.
    pub stream: bool,
    /// The body's content type as the upstream sent it.
    pub content_type: String,
    /// The response body, in the object pool.
    pub body: String,
    /// The request body, in the object pool (the proxy keeps it; the agent
    /// journals its requests already).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request: Option<String>,
    /// The client's `Idempotency-Key`, when it sent one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idempotency_key: Option<String>,
    /// Whether the client got the whole response (see invariant 2): read
    /// from the marker file `<key>.delivered`, never stored in the entry.
    #[serde(default, skip_serializing)]
    pub delivered: bool,
    /// When it was stored, RFC 3339 UTC.
    pub stored: String,
}

impl Entry {
    /// A whole (not streamed) JSON response, status 200, that session `run`
    /// bought from `endpoint`, stored now: what cairn's own loop keeps.
    /// [`ResponseStore::put`] fills in its bodies' names.
    pub fn whole_json(
        key: impl Into<String>,
        run: impl Into<String>,
        endpoint: impl Into<String>,
    ) -> Entry {
        Entry {
            key: key.into(),
            run: run.into(),
            endpoint: endpoint.into(),
            status: 200,
            stream: false,
            content_type: "application/json".into(),
            body: String::new(),
            request: None,
            idempotency_key: None,
            delivered: false,
            stored: cairn_journal::now_rfc3339(),
        }
    }
}

/// Entries written by cairn before the store kept bodies in the pool: the
/// agent loop's responses, inline.
#[derive(Deserialize)]
struct Legacy {
    key: String,
    run: String,
    stored: String,
    response: serde_json::Value,
}

/// What an entry held, read back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Stored {
    /// The entry.
    pub entry: Entry,
    /// Bytes of a legacy entry's inline body (the pool holds all others).
    inline: Option<Vec<u8>>,
}

/// One call of [`ResponseStore::put_group`].
#[derive(Debug)]
pub struct GroupPut {
    /// The entry to store (a servable response), without its hashes; `None`
    /// for a call that is journaled but never served (an error, a cut).
    pub entry: Option<Entry>,
    /// The response body.
    pub body: Vec<u8>,
    /// The request body.
    pub request: Vec<u8>,
    /// Filled in: the response and request body hashes.
    pub hashes: Option<(String, String)>,
}

/// Completed responses by key.
#[derive(Clone, Debug)]
pub struct ResponseStore {
    store: Store,
    pool: ObjectPool,
    dir: PathBuf,
    idempotency: PathBuf,
    log: ResponseLog,
}

impl ResponseStore {
    /// The response store of `store`.
    pub fn new(store: &Store) -> Self {
        ResponseStore {
            store: store.clone(),
            pool: ObjectPool::at(store),
            dir: store.gateway_dir().join("responses"),
            idempotency: store.gateway_dir().join("idempotency"),
            log: ResponseLog::new(&store.gateway_dir()),
        }
    }

    /// Whether the client of `key`'s response got it: the log's last mark,
    /// else an older cairn's marker file.
    fn is_delivered(&self, key: &str, logged: Option<bool>) -> bool {
        logged.unwrap_or_else(|| fan(&self.dir, key, ".delivered").exists())
    }

    fn path(&self, key: &str) -> PathBuf {
        fan(&self.dir, key, ".json")
    }

    /// The entry for `key`, if any.
    ///
    /// # Errors
    /// [`CallsError::StoredResponse`] when the entry exists but does not
    /// read or names another key.
    pub fn get(&self, key: &str) -> Result<Option<Stored>, CallsError> {
        let logged = match self.log.read()?.keys.get(key) {
            Some(state) if state.removed => return Ok(None),
            Some(state) => match &state.entry {
                Some(entry) => {
                    let mut entry = entry.clone();
                    entry.delivered = state.delivered == Some(true);
                    return Ok(Some(Stored {
                        entry,
                        inline: None,
                    }));
                }
                None => state.delivered,
            },
            None => None,
        };
        let path = self.path(key);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(damaged(&path, e.to_string())),
        };
        let stored = match serde_json::from_slice::<Entry>(&bytes) {
            Ok(entry) => Stored {
                entry,
                inline: None,
            },
            Err(e) => match serde_json::from_slice::<Legacy>(&bytes) {
                Ok(l) => Stored {
                    inline: Some(
                        serde_json::to_vec(&l.response)
                            .map_err(|e| damaged(&path, e.to_string()))?,
                    ),
                    entry: Entry {
                        stored: l.stored,
                        ..Entry::whole_json(l.key, l.run, "agent")
                    },
                },
                Err(_) => return Err(damaged(&path, e.to_string())),
            },
        };
        if stored.entry.key != key {
            return Err(damaged(&path, "it is stored under the wrong key".into()));
        }
        let mut stored = stored;
        stored.entry.delivered = self.is_delivered(key, logged);
        Ok(Some(stored))
    }

    /// The response body of `stored`, verified against its hash.
    ///
    /// # Errors
    /// [`CallsError::StoredResponse`] when the body is missing or damaged.
    pub fn body(&self, stored: &Stored) -> Result<Vec<u8>, CallsError> {
        if let Some(b) = &stored.inline {
            return Ok(b.clone());
        }
        let path = self.path(&stored.entry.key);
        let hash = ObjectHash::parse(&stored.entry.body)
            .map_err(|e| damaged(&path, format!("its body hash: {e}")))?;
        self.pool
            .get(&hash)
            .map_err(|e| damaged(&path, format!("its body {hash}: {e}")))
    }

    /// Stores a response durably: `body` (and `request`) into the pool, then
    /// `entry` with their hashes filled in. Returns the entry as stored.
    ///
    /// # Errors
    /// Writing the objects or the entry fails; nothing then names them.
    pub fn put(
        &self,
        mut entry: Entry,
        body: &[u8],
        request: Option<&[u8]>,
    ) -> Result<Entry, CallsError> {
        let held = self.lock()?;
        let (b, r) = self.put_bodies(&held, body, request)?;
        entry.body = b;
        entry.request = r;
        let mut records = Vec::with_capacity(2);
        self.clear_marks([entry.key.as_str()], &mut records)?;
        records.push(LogRecord::Put {
            entry: entry.clone(),
        });
        self.log.append(&records, true)?;
        // The entry names the bodies now: a prune may run.
        drop(held);
        if let Some(idem) = &entry.idempotency_key {
            self.remember_idempotency(idem, &entry.key)?;
        }
        Ok(entry)
    }

    /// The store lock, shared: held from before a call's bodies are put
    /// until a record that names them is durable (its entry in the response
    /// log, or the `model_call` journaled for it), so that a prune, which
    /// holds the lock exclusive, never deletes them in between, nor an
    /// unnamed object a put found present and relied on.
    ///
    /// # Errors
    /// The lock file cannot be opened or locked.
    pub fn lock(&self) -> Result<StoreLock, CallsError> {
        Ok(StoreLock::shared(&self.store)?)
    }

    /// Stores a group of calls with one group commit (the gateway's
    /// concurrent purchases): every body into the pool with one commit,
    /// then, once they are durable, each call's entry, if it has one,
    /// appended to the response log with one write and one fsync. `barrier`
    /// says when one file-system barrier replaces the per-file fsyncs
    /// (counted in the new objects the group stages). Fills in each call's
    /// hashes.
    ///
    /// `held` is the caller's [`ResponseStore::lock`], to be kept until a
    /// call without an entry is journaled: until then nothing names its
    /// bodies.
    ///
    /// # Errors
    /// Any write fails: then none of the group's entries is stored.
    pub fn put_group(
        &self,
        held: &StoreLock,
        group: &mut [GroupPut],
        barrier: Barrier,
    ) -> Result<(), CallsError> {
        let batch = self.pool.batch(held).barrier(barrier);
        for g in group.iter_mut() {
            let b = batch.put_body(&g.body)?.hash.to_string();
            let r = batch.put_body(&g.request)?.hash.to_string();
            if let Some(e) = g.entry.as_mut() {
                e.body = b.clone();
                e.request = Some(r.clone());
            }
            g.hashes = Some((b, r));
        }
        // Invariant 1: the bodies are durable before an entry names them.
        batch.commit(&NoProgress)?;
        let entries: Vec<&Entry> = group.iter().filter_map(|g| g.entry.as_ref()).collect();
        let mut records = Vec::with_capacity(entries.len() * 2);
        // Invariant 2, in the same write, before the entries.
        self.clear_marks(entries.iter().map(|e| e.key.as_str()), &mut records)?;
        records.extend(
            entries
                .into_iter()
                .map(|e| LogRecord::Put { entry: e.clone() }),
        );
        self.log.append(&records, true)?;
        for g in group.iter() {
            if let Some(e) = &g.entry {
                if let Some(idem) = &e.idempotency_key {
                    self.remember_idempotency(idem, &e.key)?;
                }
            }
        }
        Ok(())
    }

    /// Stores a response body (and a request body) durably in the pool
    /// without an entry — for a call that is journaled but must never be
    /// served (an error, a cut stream) — and returns their hashes. `held`
    /// is the caller's [`ResponseStore::lock`], to be kept until the record
    /// that names them is durable.
    ///
    /// # Errors
    /// Writing the objects fails.
    pub fn put_bodies(
        &self,
        held: &StoreLock,
        body: &[u8],
        request: Option<&[u8]>,
    ) -> Result<(String, Option<String>), CallsError> {
        let batch = self.pool.batch(held);
        let b = batch.put_body(body)?;
        let r = request.map(|r| batch.put_body(r)).transpose()?;
        batch.commit(&NoProgress)?;
        Ok((b.hash.to_string(), r.map(|p| p.hash.to_string())))
    }

    /// Records that the client got the whole response of `key`: a
    /// `delivered` record in the log.
    ///
    /// It is appended without an fsync, on purpose: losing it in a power
    /// cut only makes a later identical request a replay of what the client
    /// already got, instead of a new sample; a torn record is never read,
    /// and the next append cuts it.
    ///
    /// # Errors
    /// The log cannot be appended to.
    pub fn mark_delivered(&self, key: &str) -> Result<(), CallsError> {
        self.log.append(
            &[LogRecord::Delivered {
                key: key.to_owned(),
            }],
            false,
        )
    }

    /// Invariant 2: for each of `keys` whose response is marked delivered,
    /// an `undelivered` record for `records`, and an older cairn's marker
    /// file removed (durably) so it cannot speak for what follows. The log
    /// is read once for them all.
    fn clear_marks<'k>(
        &self,
        keys: impl IntoIterator<Item = &'k str>,
        records: &mut Vec<LogRecord>,
    ) -> Result<(), CallsError> {
        let marked: Vec<&str> = {
            let index = self.log.read()?;
            keys.into_iter()
                .filter(|k| self.is_delivered(k, index.keys.get(*k).and_then(|s| s.delivered)))
                .collect()
        };
        for key in marked {
            remove_durably(&fan(&self.dir, key, ".delivered"))?;
            records.push(LogRecord::Undelivered {
                key: key.to_owned(),
            });
        }
        Ok(())
    }

    /// Forgets that the client got the whole response of `key`, durably: a
    /// machine restored from a checkpoint taken before the call never got
    /// it (DESIGN §13), so its retry is served the stored response, as the
    /// retry of a cut call is. Unlike the mark this is fsynced: a mark
    /// brought back by a power cut would buy the call again. Nothing is
    /// written when the response is not marked delivered.
    ///
    /// # Errors
    /// The log cannot be appended to, or an older cairn's marker file
    /// cannot be removed.
    pub fn mark_undelivered(&self, key: &str) -> Result<(), CallsError> {
        let mut records = Vec::new();
        self.clear_marks([key], &mut records)?;
        self.log.append(&records, true)
    }

    fn idempotency_path(&self, idem: &str) -> PathBuf {
        use sha2::{Digest, Sha256};
        let h = hex::encode(Sha256::digest(idem.as_bytes()));
        fan(&self.idempotency, &h, "")
    }

    /// The key an `Idempotency-Key` was first used with, if it was.
    ///
    /// # Errors
    /// The record exists but does not read.
    pub fn idempotency(&self, idem: &str) -> Result<Option<String>, CallsError> {
        let path = self.idempotency_path(idem);
        match std::fs::read_to_string(&path) {
            Ok(k) => Ok(Some(k.trim().to_owned())),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(damaged(&path, e.to_string())),
        }
    }

    fn remember_idempotency(&self, idem: &str, key: &str) -> Result<(), CallsError> {
        let path = self.idempotency_path(idem);
        if path.exists() {
            return Ok(());
        }
        create_parents(&path)?;
        durable::write_atomic(&path, key.as_bytes())?;
        Ok(())
    }

    /// Every entry, for prune and for removing a session's.
    ///
    /// # Errors
    /// A directory cannot be listed, or an entry does not read.
    pub fn entries(&self) -> Result<Vec<Stored>, CallsError> {
        let mut out = Vec::new();
        let logged: std::collections::HashSet<String> = {
            let index = self.log.read()?;
            for state in index.keys.values() {
                if let Some(e) = &state.entry {
                    let mut entry = e.clone();
                    entry.delivered = state.delivered == Some(true);
                    out.push(Stored {
                        entry,
                        inline: None,
                    });
                }
            }
            index
                .keys
                .iter()
                .filter(|(_, s)| s.entry.is_some() || s.removed)
                .map(|(k, _)| k.clone())
                .collect()
        };
        // An older cairn's entry files, where the log has not superseded
        // them.
        for fan in read_dir_if_any(&self.dir)? {
            for file in read_dir_if_any(&fan)? {
                let Some(key) = file
                    .file_name()
                    .and_then(|n| n.to_str())
                    .and_then(|n| n.strip_suffix(".json"))
                else {
                    continue; // a temporary of an interrupted write
                };
                if logged.contains(key) {
                    continue;
                }
                if let Some(s) = self.get(key)? {
                    out.push(s);
                }
            }
        }
        Ok(out)
    }

    /// Removes every entry bought by session `run` (they hold prompts), and
    /// returns how many. Their bodies stay in the pool until `cairn prune`.
    ///
    /// # Errors
    /// As [`ResponseStore::entries`], or a removal fails.
    pub fn remove_run(&self, run: &RunId) -> Result<usize, CallsError> {
        let mut records = Vec::new();
        for s in self.entries()? {
            if s.entry.run != run.as_str() {
                continue;
            }
            let key = &s.entry.key;
            // An older cairn's files for the key, if any, go too.
            let _ = std::fs::remove_file(fan(&self.dir, key, ".delivered"));
            remove_durably(&self.path(key))?;
            records.push(LogRecord::Removed { key: key.clone() });
        }
        self.log.append(&records, true)?;
        Ok(records.len())
    }
}

/// What prune must keep: every body an entry names.
impl cairn_objects::ManifestSource for ResponseStore {
    fn name(&self) -> String {
        "stored model responses".into()
    }

    fn referenced(
        &self,
        mark: &mut dyn FnMut(ObjectHash),
    ) -> Result<(), cairn_objects::SourceError> {
        for s in self.entries().map_err(|e| e.to_string())? {
            for h in std::iter::once(&s.entry.body)
                .chain(s.entry.request.iter())
                .filter(|h| !h.is_empty())
            {
                mark(
                    ObjectHash::parse(h).map_err(|e| {
                        format!("stored response {}: body hash {h}: {e}", s.entry.key)
                    })?,
                );
            }
        }
        Ok(())
    }
}

/// Removes `path` if it is there, and makes the removal durable (its
/// directory fsynced); nothing when it is not.
fn remove_durably(path: &Path) -> Result<(), CallsError> {
    match std::fs::remove_file(path) {
        Ok(()) => {
            if let Some(dir) = path.parent() {
                durable::fsync_dir(dir)?;
            }
            Ok(())
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(damaged(path, e.to_string())),
    }
}

fn fan(dir: &Path, name: &str, suffix: &str) -> PathBuf {
    dir.join(name.get(..2).unwrap_or("00"))
        .join(format!("{name}{suffix}"))
}

fn create_parents(path: &Path) -> Result<(), CallsError> {
    if let Some(parent) = path.parent() {
        if let Some(grand) = parent.parent() {
            durable::create_dir_private(grand)?;
        }
        durable::create_dir_private(parent)?;
    }
    Ok(())
}

fn read_dir_if_any(dir: &Path) -> Result<Vec<PathBuf>, CallsError> {
    match std::fs::read_dir(dir) {
        Ok(entries) => entries
            .map(|e| e.map(|e| e.path()))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| damaged(dir, e.to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(damaged(dir, e.to_string())),
    }
}

fn damaged(path: &Path, reason: String) -> CallsError {
    CallsError::StoredResponse {
        path: path.to_owned(),
        reason,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str, run: &str) -> Entry {
        Entry {
            key: key.into(),
            run: run.into(),
            endpoint: "/v1/messages".into(),
            status: 200,
            stream: true,
            content_type: "text/event-stream".into(),
            body: String::new(),
            request: None,
            idempotency_key: Some("idem-1".into()),
            delivered: false,
            stored: "2026-01-01T00:00:00Z".into(),
        }
    }

    #[test]
    fn a_put_reads_back_verified_and_delivery_is_marked_after() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(d.path()).unwrap();
        let rs = ResponseStore::new(&store);
        let key = "ab".repeat(32);
        assert!(rs.get(&key).unwrap().is_none());
        let put = rs
            .put(
                entry(&key, "R1"),
                b"data: one\n\n",
                Some(b"{\"model\":\"m\"}"),
            )
            .unwrap();
        let got = rs.get(&key).unwrap().unwrap();
        assert_eq!(got.entry, put);
        assert!(!got.entry.delivered);
        assert_eq!(rs.body(&got).unwrap(), b"data: one\n\n");
        rs.mark_delivered(&key).unwrap();
        assert!(rs.get(&key).unwrap().unwrap().entry.delivered);
        assert_eq!(rs.idempotency("idem-1").unwrap(), Some(key.clone()));
        assert_eq!(rs.idempotency("other").unwrap(), None);
        // Prune keeps both bodies.
        let mut marked = Vec::new();
        cairn_objects::ManifestSource::referenced(&rs, &mut |h| marked.push(h)).unwrap();
        assert_eq!(marked.len(), 2);
        assert_eq!(rs.remove_run(&RunId::parse("R1").unwrap()).unwrap(), 1);
        assert!(rs.get(&key).unwrap().is_none());
    }

    #[test]
    fn a_response_stored_again_under_its_key_is_not_delivered_until_taken_again() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(d.path()).unwrap();
        let rs = ResponseStore::new(&store);
        let key = "ab".repeat(32);
        rs.put(entry(&key, "R1"), b"first", None).unwrap();
        rs.mark_delivered(&key).unwrap();
        assert!(rs.get(&key).unwrap().unwrap().entry.delivered);
        // A fresh identical request was a new sample, and bought: its
        // client has not taken it yet, whatever the first one did.
        rs.put(entry(&key, "R1"), b"second", None).unwrap();
        assert!(!rs.get(&key).unwrap().unwrap().entry.delivered);
        rs.mark_delivered(&key).unwrap();
        let mut group = vec![GroupPut {
            entry: Some(entry(&key, "R1")),
            body: b"third".to_vec(),
            request: b"{}".to_vec(),
            hashes: None,
        }];
        rs.put_group(&rs.lock().unwrap(), &mut group, Barrier::From(0))
            .unwrap();
        let got = rs.get(&key).unwrap().unwrap();
        assert!(!got.entry.delivered);
        assert_eq!(rs.body(&got).unwrap(), b"third");
    }

    #[test]
    fn an_older_cairns_entry_files_are_read_and_the_log_supersedes_them() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(d.path()).unwrap();
        let rs = ResponseStore::new(&store);
        let key = "ab".repeat(32);
        // What an older cairn left: the entry's file and its marker.
        let (b, _) = rs
            .put_bodies(&rs.lock().unwrap(), b"old body", None)
            .unwrap();
        let old = Entry {
            body: b,
            ..entry(&key, "R1")
        };
        let path = rs.path(&key);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, serde_json::to_vec(&old).unwrap()).unwrap();
        let marker = fan(&rs.dir, &key, ".delivered");
        std::fs::write(&marker, b"").unwrap();
        let got = rs.get(&key).unwrap().unwrap();
        assert!(got.entry.delivered);
        assert_eq!(rs.body(&got).unwrap(), b"old body");
        assert_eq!(rs.entries().unwrap().len(), 1);
        // A new sample under the key: in the log, not delivered, the old
        // marker gone so it cannot speak for it.
        rs.put(entry(&key, "R1"), b"new body", None).unwrap();
        assert!(!marker.exists());
        let got = ResponseStore::new(&store).get(&key).unwrap().unwrap();
        assert!(!got.entry.delivered);
        assert_eq!(rs.body(&got).unwrap(), b"new body");
        assert_eq!(rs.entries().unwrap().len(), 1);
        // A second older entry, and a run removed: both kinds go.
        let other = "cd".repeat(32);
        let p2 = rs.path(&other);
        std::fs::create_dir_all(p2.parent().unwrap()).unwrap();
        std::fs::write(&p2, serde_json::to_vec(&entry(&other, "R1")).unwrap()).unwrap();
        assert_eq!(rs.entries().unwrap().len(), 2);
        assert_eq!(rs.remove_run(&RunId::parse("R1").unwrap()).unwrap(), 2);
        assert!(!path.exists() && !p2.exists());
        assert!(ResponseStore::new(&store).get(&key).unwrap().is_none());
        assert!(rs.entries().unwrap().is_empty());
    }

    #[test]
    fn a_call_through_the_store_creates_no_file_for_its_entry_or_mark() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(d.path()).unwrap();
        let rs = ResponseStore::new(&store);
        rs.put(entry(&"00".repeat(32), "R1"), b"warm-up", None)
            .unwrap();
        let files = |dir: &Path| walk_files(dir);
        let before = files(d.path());
        let mut group: Vec<GroupPut> = (0..20)
            .map(|n| GroupPut {
                entry: Some(entry(&format!("{n:064x}"), "R1")),
                body: b"the same short answer".to_vec(),
                request: format!("request {n}").into_bytes(),
                hashes: None,
            })
            .collect();
        rs.put_group(&rs.lock().unwrap(), &mut group, Barrier::From(8))
            .unwrap();
        for n in 0..20 {
            rs.mark_delivered(&format!("{n:064x}")).unwrap();
        }
        // One new object per call (its request); the response, the same
        // each time, once; entries and marks none.
        assert_eq!(files(d.path()) - before, 21);
    }

    fn walk_files(dir: &Path) -> usize {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| match e.file_type() {
                Ok(t) if t.is_dir() => walk_files(&e.path()),
                Ok(t) if t.is_file() => 1,
                _ => 0,
            })
            .sum()
    }

    #[test]
    fn a_damaged_entry_is_an_error_not_a_miss() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(d.path()).unwrap();
        let rs = ResponseStore::new(&store);
        let key = "cd".repeat(32);
        let path = rs.path(&key);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, b"{ not json").unwrap();
        assert!(rs.get(&key).is_err());
    }

    #[test]
    fn an_entry_of_an_older_cairn_still_serves_its_inline_response() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(d.path()).unwrap();
        let rs = ResponseStore::new(&store);
        let key = "ef".repeat(32);
        let path = rs.path(&key);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let legacy = serde_json::json!({"key": key, "run": "R", "turn": 3, "stored": "t", "response": {"text": "hi"}});
        std::fs::write(&path, serde_json::to_vec(&legacy).unwrap()).unwrap();
        let got = rs.get(&key).unwrap().unwrap();
        assert_eq!(rs.body(&got).unwrap(), br#"{"text":"hi"}"#);
    }
}
