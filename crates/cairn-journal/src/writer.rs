//! The one writer of a journal.
//!
//! Invariants:
//! - the writer holds the run's lock for its whole life;
//! - each append is one write of whole lines at the end of the records
//!   (after, at most, one write of zeros that extends the file by
//!   [`PREALLOCATE_STEP`]) followed by `fdatasync`; only then is the record
//!   acknowledged (its seq and hash returned);
//! - the zeros past the records are cut when the writer is dropped; a crash
//!   leaves them, and readers take them for a torn tail (`TornTail::zeros`);
//! - creating a run fsyncs the run directory (and its parent) so the new
//!   journal's directory entry survives a crash;
//! - a failed write or fsync poisons the writer: it never retries, because the
//!   page cache may already have dropped the data it claimed to write;
//! - a failed write or fsync first cuts the file back to the acknowledged
//!   records and makes the cut durable (`ftruncate` + `fdatasync`), so the
//!   unacknowledged lines are neither read back by the next writer (from the
//!   page cache, where they still verify) nor left as a hole in the middle of
//!   the file once a later sync makes the size durable; if the cut or its
//!   sync fails too, the file is left as it is (the writer stays poisoned);
//! - opening cuts a torn tail (and fsyncs the cut) before the first append;
//! - lines copied from another copy of the journal
//!   ([`JournalWriter::append_lines`]) are written as given, and only when
//!   each continues the chain (seq, `prev`), so a copy is byte for byte the
//!   original.

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn_store::{durable, storage, RunId, Store};

use crate::chain::ChainHash;
use crate::lock::RunLock;
use crate::reader::{scan_journal_bytes, Scan};
use crate::record::{now_rfc3339, write_line, Meta, Record, RecordBody};
use crate::{mirror_of, JournalError, JournalMirror};

/// The file operations the writer needs; a trait so tests can inject faults.
pub trait JournalIo: Send {
    /// Writes all of `buf` at the end of the journal.
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()>;
    /// Makes everything written so far durable (`fdatasync`).
    fn sync_data(&mut self) -> io::Result<()>;
    /// Cuts space preallocated past the records, durably (nothing to do
    /// for an implementation that preallocates none).
    fn trim(&mut self) -> io::Result<()> {
        Ok(())
    }
    /// After a failed [`JournalIo::write_all`] or [`JournalIo::sync_data`]:
    /// cuts the file back to `len`, the bytes of the records acknowledged so
    /// far, and makes the cut durable (`ftruncate`, then `fdatasync`). The
    /// failed bytes are discarded, never synced again.
    ///
    /// # Errors
    /// The cut or its sync failed: the file may still hold the failed bytes.
    fn discard(&mut self, len: u64) -> io::Result<()>;
}

/// How much the journal file is extended by at a time, with zeros, so that
/// most appends overwrite space the file already has: their `fdatasync`
/// then makes no size change durable (no file-system journal commit), as
/// SQLite's WAL overwrites its own. A reader takes NUL bytes to the end of
/// the file for a torn tail (DESIGN §2), which is what they are.
pub const PREALLOCATE_STEP: u64 = 128 * 1024;

/// The journal file itself: appends and syncs go through the storage
/// interface (`cairn_store::storage`), so the crash model sees them.
///
/// Records are written at `len` over zeros written earlier; the zeros past
/// `len` are cut when the file is dropped (unless a write or sync failed and
/// could not be discarded: then nothing more is done to the file).
struct JournalFile {
    file: File,
    path: PathBuf,
    /// Bytes of records: where the next append lands.
    len: u64,
    /// Bytes in the file: records, then zeros.
    allocated: u64,
    /// A write or sync failed and was not discarded: the file is left as it
    /// is.
    failed: bool,
}

impl JournalFile {
    fn new(file: File, path: PathBuf, len: u64) -> JournalFile {
        JournalFile {
            file,
            path,
            len,
            allocated: len,
            failed: false,
        }
    }

    fn append(&mut self, buf: &[u8]) -> io::Result<()> {
        let end = self.len + buf.len() as u64;
        if end > self.allocated {
            // One extension covers this append and the next many; it is made
            // durable by this append's sync, with the record.
            let grown = end.div_ceil(PREALLOCATE_STEP) * PREALLOCATE_STEP;
            let zeros = vec![0u8; usize::try_from(grown - self.allocated).unwrap_or(0)];
            storage::write_at(&self.file, &self.path, self.allocated, &zeros)?;
            self.allocated = grown;
        }
        storage::write_at(&self.file, &self.path, self.len, buf)?;
        self.len = end;
        Ok(())
    }
}

impl JournalIo for JournalFile {
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        let r = self.append(buf);
        self.failed |= r.is_err();
        r
    }
    fn sync_data(&mut self) -> io::Result<()> {
        let r = storage::sync_data(&self.file, &self.path, "journal.append");
        self.failed |= r.is_err();
        r
    }
    fn trim(&mut self) -> io::Result<()> {
        if self.failed || self.allocated == self.len {
            return Ok(());
        }
        let r = storage::set_len(&self.file, &self.path, self.len)
            .and_then(|()| storage::sync_data(&self.file, &self.path, "journal.trim"));
        match r {
            Ok(()) => self.allocated = self.len,
            Err(_) => self.failed = true,
        }
        r
    }
    fn discard(&mut self, len: u64) -> io::Result<()> {
        // A new sync of the cut, not a retry of the failed one: it makes the
        // smaller size durable, and the failed bytes are no longer in the
        // file for anyone to read or for a later sync to acknowledge.
        let r = storage::set_len(&self.file, &self.path, len)
            .and_then(|()| storage::sync_data(&self.file, &self.path, "journal.discard"));
        match r {
            Ok(()) => {
                self.len = len;
                self.allocated = len;
                self.failed = false;
            }
            Err(_) => self.failed = true,
        }
        r
    }
}

impl Drop for JournalFile {
    fn drop(&mut self) {
        if self.failed || self.allocated == self.len {
            return;
        }
        // Best effort: zeros left by a failure here read as a preallocated
        // tail, which the next writer cuts.
        if storage::set_len(&self.file, &self.path, self.len).is_ok() {
            let _ = storage::sync_data(&self.file, &self.path, "journal.close");
        }
    }
}

/// A record made durable: its seq and chain hash.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Appended {
    /// Its seq.
    pub seq: u64,
    /// `h(seq)`.
    pub hash: ChainHash,
}

/// The writer of one run's journal.
pub struct JournalWriter {
    path: PathBuf,
    run: RunId,
    io: Box<dyn JournalIo>,
    _lock: RunLock,
    next_seq: u64,
    tail: ChainHash,
    len: u64,
    poisoned: bool,
    buf: Vec<u8>,
    last_ts: String,
    /// The shared store this store's records are published to, if any
    /// (see [`crate::install_mirror`]), and the store.
    mirror: Option<(Arc<dyn JournalMirror>, Store)>,
}

impl std::fmt::Debug for JournalWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("JournalWriter")
            .field("path", &self.path)
            .field("next_seq", &self.next_seq)
            .field("poisoned", &self.poisoned)
            .finish()
    }
}

impl JournalWriter {
    /// Creates run `id` in `store` with `meta` as its first record (its `run`
    /// field is set to `id`), durably.
    ///
    /// # Errors
    /// [`JournalError::Exists`] when the run exists; IO errors.
    pub fn create(store: &Store, id: &RunId, mut meta: Meta) -> Result<Self, JournalError> {
        meta.run = id.to_string();
        let dir = store.run_dir(id);
        durable::create_dir_private(&store.runs_dir())?;
        let fresh = !dir.exists();
        durable::create_dir_private(&dir)?;
        let made = (|| -> Result<Self, JournalError> {
            let lock = RunLock::acquire(&store.lock_path(id), id.as_str())?;
            let path = store.journal_path(id);
            let file = match durable::create_file_private(&path) {
                Ok(f) => f,
                Err(cairn_store::StoreError::Io { source, .. })
                    if source.kind() == io::ErrorKind::AlreadyExists =>
                {
                    return Err(JournalError::Exists {
                        run: id.to_string(),
                    })
                }
                Err(e) => return Err(e.into()),
            };
            let genesis = match &meta.fork {
                Some(f) => ChainHash::fork_genesis(&f.parent, f.seq, &f.hash),
                None => ChainHash::genesis(id.as_str()),
            };
            let mut w = JournalWriter {
                io: Box::new(JournalFile::new(file, path.clone(), 0)),
                path,
                run: id.clone(),
                _lock: lock,
                next_seq: 1,
                tail: genesis,
                len: 0,
                poisoned: false,
                buf: Vec::with_capacity(1024),
                last_ts: String::new(),
                mirror: mirror_of(store.root()).map(|m| (m, store.clone())),
            };
            w.append_many(
                std::slice::from_ref(&RecordBody::Meta(Box::new(meta))),
                true,
            )?;
            durable::fsync_dir_at(&dir, "journal.create")?;
            Ok(w)
        })();
        if let Err(e) = &made {
            // A run that could not be made (a full disk) leaves nothing
            // behind: not a directory every reader would report as damage.
            if fresh && !matches!(e, JournalError::Exists { .. }) {
                let _ = std::fs::remove_dir_all(&dir);
            }
        }
        made
    }

    /// Opens run `id` for appending: takes the lock first, then reads and
    /// checks the whole journal, cuts a torn tail, and returns what it read.
    ///
    /// # Errors
    /// [`JournalError::NotFound`], [`JournalError::Locked`], damage and schema
    /// errors from reading, IO errors.
    pub fn open(store: &Store, id: &RunId) -> Result<(Self, Scan), JournalError> {
        let path = store.journal_path(id);
        if !path.is_file() {
            return Err(JournalError::NotFound {
                run: id.to_string(),
            });
        }
        let lock = RunLock::acquire(&store.lock_path(id), id.as_str())?;
        let bytes = std::fs::read(&path).map_err(|e| JournalError::io("reading", &path, e))?;
        let scan = scan_journal_bytes(&path, &bytes, id.as_str())?;
        // Written at known offsets (`pwrite`), not `O_APPEND`: appends
        // overwrite preallocated zeros.
        let file = OpenOptions::new()
            .write(true)
            .open(&path)
            .map_err(|e| JournalError::io("opening", &path, e))?;
        if scan.torn.is_some() {
            // Cut the torn tail under the lock, durably, before any append.
            storage::set_len(&file, &path, scan.valid_len)
                .map_err(|e| JournalError::io("cutting the torn tail of", &path, e))?;
            storage::sync_data(&file, &path, "journal.cut").map_err(|source| {
                JournalError::Sync {
                    path: path.clone(),
                    source,
                }
            })?;
        }
        let w = JournalWriter {
            io: Box::new(JournalFile::new(file, path.clone(), scan.valid_len)),
            path,
            run: id.clone(),
            _lock: lock,
            next_seq: scan.records.len() as u64 + 1,
            tail: scan.tail,
            len: scan.valid_len,
            poisoned: false,
            buf: Vec::with_capacity(1024),
            last_ts: String::new(),
            mirror: mirror_of(store.root()).map(|m| (m, store.clone())),
        };
        Ok((w, scan))
    }

    /// Appends one record and makes it durable before returning.
    ///
    /// # Errors
    /// [`JournalError::Poisoned`] after an earlier failure; [`JournalError::Write`]
    /// or [`JournalError::Sync`] (which poison the writer);
    /// [`JournalError::InvalidAppend`] for a second `meta` or a cost that breaks
    /// its state's rules (nothing is written then).
    pub fn append(&mut self, body: &RecordBody) -> Result<Appended, JournalError> {
        self.append_many(std::slice::from_ref(body), false)
    }

    /// Appends one record durably and returns it as a reader would see it, so a
    /// caller can fold it without reading the file back.
    ///
    /// # Errors
    /// As [`JournalWriter::append`].
    pub fn append_record(&mut self, body: RecordBody) -> Result<Record, JournalError> {
        let prev = self.tail;
        let a = self.append(&body)?;
        Ok(Record {
            v: body.version(),
            seq: a.seq,
            prev,
            ts: self.last_ts.clone(),
            body,
        })
    }

    /// Appends several records with one write and one fsync (group commit).
    /// Either all are durable when it returns, or the writer is poisoned.
    /// Returns the last record's seq and hash.
    ///
    /// # Errors
    /// As [`JournalWriter::append`]; an empty batch is an error.
    pub fn append_batch(&mut self, bodies: &[RecordBody]) -> Result<Appended, JournalError> {
        self.append_many(bodies, false)
    }

    /// [`JournalWriter::append_batch`] returning the records as a reader
    /// would see them, so a caller can fold them without reading back.
    ///
    /// # Errors
    /// As [`JournalWriter::append_batch`].
    pub fn append_records(&mut self, bodies: Vec<RecordBody>) -> Result<Vec<Record>, JournalError> {
        let first_seq = self.next_seq;
        let mut prev = self.tail;
        let mut prevs = Vec::with_capacity(bodies.len());
        // The chain of the lines about to be written, computed the same way
        // `append_many` computes it (the bytes are not known until written,
        // so read them back from the writer's buffer afterwards).
        self.append_many(&bodies, false)?;
        for line in self.buf.split(|&b| b == b'\n').filter(|l| !l.is_empty()) {
            prevs.push(prev);
            prev = prev.next(line);
        }
        Ok(bodies
            .into_iter()
            .zip(prevs)
            .enumerate()
            .map(|(i, (body, prev))| Record {
                v: body.version(),
                seq: first_seq + i as u64,
                prev,
                ts: self.last_ts.clone(),
                body,
            })
            .collect())
    }

    fn append_many(
        &mut self,
        bodies: &[RecordBody],
        first: bool,
    ) -> Result<Appended, JournalError> {
        if self.poisoned {
            return Err(JournalError::Poisoned {
                path: self.path.clone(),
            });
        }
        if bodies.is_empty() {
            return Err(JournalError::InvalidAppend("an empty batch"));
        }
        if !first && bodies.iter().any(|b| matches!(b, RecordBody::Meta(_))) {
            return Err(JournalError::InvalidAppend(
                "`meta` is written only as the first record",
            ));
        }
        if !bodies.iter().all(costs_valid) {
            // serde_json would write a NaN as `null`: a record no reader accepts.
            return Err(JournalError::InvalidAppend(
                "a cost must be `zero` with usd 0, `known` with a finite amount of 0 or more, or `unknown` with no usd",
            ));
        }
        self.buf.clear();
        let ts = now_rfc3339();
        let mut seq = self.next_seq;
        let mut tail = self.tail;
        for body in bodies {
            let start = self.buf.len();
            write_line(&mut self.buf, seq, &tail, &ts, body)?;
            tail = tail.next(&self.buf[start..]);
            self.buf.push(b'\n');
            seq += 1;
        }
        if let Err(e) = write_durably(self.io.as_mut(), &self.path, self.len, &self.buf) {
            self.poisoned = true;
            return Err(e);
        }
        if let Some((mirror, store)) = &self.mirror {
            // Acknowledged only once the shared store has it too.
            let after = self.next_seq - 1;
            if let Err(source) = mirror.publish(store, &self.run, after, &self.buf) {
                self.poisoned = true;
                return Err(JournalError::Unpublished {
                    run: self.run.to_string(),
                    first: after + 1,
                    source: Box::new(source),
                });
            }
        }
        self.next_seq = seq;
        self.tail = tail;
        self.len += self.buf.len() as u64;
        self.last_ts = ts;
        Ok(Appended {
            seq: seq - 1,
            hash: tail,
        })
    }

    /// Appends `lines` exactly as given: whole journal lines, each ending
    /// in `\n`, taken from another copy of this journal (what `cairn push`
    /// and `cairn pull` append). They are written with one write and made
    /// durable with one `fdatasync`, as [`JournalWriter::append_batch`], and
    /// never re-serialised, so the copy holds the original's bytes and
    /// chain.
    ///
    /// Before anything is written, every line must continue this journal's
    /// chain: the k-th carries seq [`JournalWriter::seq`]` + k` and a `prev`
    /// equal to the chain hash of the line before it, and none is a `meta`.
    /// Only those links are checked: the caller verifies the records
    /// themselves (for instance by reading the journal they come from with
    /// [`crate::scan_journal_bytes`]).
    ///
    /// # Errors
    /// [`JournalError::InvalidAppend`] (nothing written, the writer not
    /// poisoned) when `lines` is empty or not whole lines, or a line is not
    /// a record header that continues the chain; otherwise as
    /// [`JournalWriter::append`].
    pub fn append_lines(&mut self, lines: &[u8]) -> Result<Appended, JournalError> {
        /// The header fields a link is checked by.
        #[derive(serde::Deserialize)]
        struct Link<'a> {
            seq: u64,
            #[serde(borrow)]
            prev: std::borrow::Cow<'a, str>,
            #[serde(borrow)]
            kind: std::borrow::Cow<'a, str>,
            #[serde(borrow)]
            ts: std::borrow::Cow<'a, str>,
        }
        if self.poisoned {
            return Err(JournalError::Poisoned {
                path: self.path.clone(),
            });
        }
        let Some(body) = lines.strip_suffix(b"\n") else {
            return Err(JournalError::InvalidAppend(
                "the lines to append must be whole lines, each ending in a newline",
            ));
        };
        let mut seq = self.next_seq;
        let mut tail = self.tail;
        let mut ts = String::new();
        for line in body.split(|&b| b == b'\n') {
            let Ok(link) = serde_json::from_slice::<Link<'_>>(line) else {
                return Err(JournalError::InvalidAppend(
                    "a line to append is not a journal record",
                ));
            };
            if link.kind == "meta" {
                return Err(JournalError::InvalidAppend(
                    "`meta` is written only as the first record",
                ));
            }
            if link.seq != seq || ChainHash::from_hex(&link.prev) != Some(tail) {
                return Err(JournalError::InvalidAppend(
                    "the lines to append do not continue this journal's chain",
                ));
            }
            tail = tail.next(line);
            seq += 1;
            ts = link.ts.into_owned();
        }
        if let Err(e) = write_durably(self.io.as_mut(), &self.path, self.len, lines) {
            self.poisoned = true;
            return Err(e);
        }
        self.next_seq = seq;
        self.tail = tail;
        self.len += lines.len() as u64;
        self.last_ts = ts;
        Ok(Appended {
            seq: seq - 1,
            hash: tail,
        })
    }

    /// Cuts the space preallocated past the records now (the next append
    /// extends the file again), so the file's length and mtime stay as they
    /// are until the session is written again: a projection bound to them
    /// then stays good after the writer closes. Called at the end of a
    /// stretch of work.
    ///
    /// # Errors
    /// [`JournalError::Sync`]: the cut or its `fdatasync` failed, and the
    /// writer is poisoned (the records already acknowledged are durable).
    pub fn trim(&mut self) -> Result<(), JournalError> {
        if self.poisoned {
            return Ok(());
        }
        self.io.trim().map_err(|source| {
            self.poisoned = true;
            JournalError::Sync {
                path: self.path.clone(),
                source,
            }
        })
    }

    /// Replaces the file operations (fault injection in tests).
    pub fn wrap_io(&mut self, wrap: impl FnOnce(Box<dyn JournalIo>) -> Box<dyn JournalIo>) {
        let io = std::mem::replace(&mut self.io, Box::new(NullIo));
        self.io = wrap(io);
    }

    /// The run.
    pub fn run(&self) -> &RunId {
        &self.run
    }

    /// The journal file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Seq of the last durable record.
    pub fn seq(&self) -> u64 {
        self.next_seq - 1
    }

    /// `h(seq)` of the last durable record.
    pub fn tail(&self) -> ChainHash {
        self.tail
    }

    /// The `ts` of the last record this writer appended (empty before any).
    pub fn last_ts(&self) -> &str {
        &self.last_ts
    }

    /// Bytes of durable records.
    pub fn len(&self) -> u64 {
        self.len
    }

    /// True before the first record (never, once created).
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// True after a failed write or fsync.
    pub fn is_poisoned(&self) -> bool {
        self.poisoned
    }
}

/// One write of `bytes` at the end of the journal (`acked` bytes of
/// acknowledged records), then `fdatasync`: the only way records reach the
/// file. When either fails, the file is cut back to `acked`
/// ([`JournalIo::discard`]) before the error is returned; the caller
/// poisons its writer.
fn write_durably(
    io: &mut dyn JournalIo,
    path: &Path,
    acked: u64,
    bytes: &[u8],
) -> Result<(), JournalError> {
    let r = io
        .write_all(bytes)
        .map_err(|source| JournalError::Write {
            path: path.to_path_buf(),
            source,
        })
        .and_then(|()| {
            io.sync_data().map_err(|source| JournalError::Sync {
                path: path.to_path_buf(),
                source,
            })
        });
    if r.is_err() {
        // The failure is what the caller reports; a cut that fails too only
        // leaves the file as it was (the writer is poisoned either way).
        let _ = io.discard(acked);
    }
    r
}

/// Whether every cost in `body` obeys its state's rules (see `Cost`).
fn costs_valid(body: &RecordBody) -> bool {
    match body {
        RecordBody::Assistant(a) => a.cost.is_valid(),
        RecordBody::Terminal(t) => t.totals.cost.is_valid(),
        _ => true,
    }
}

struct NullIo;

impl JournalIo for NullIo {
    fn write_all(&mut self, _: &[u8]) -> io::Result<()> {
        Err(io::Error::other("no journal file"))
    }
    fn sync_data(&mut self) -> io::Result<()> {
        Err(io::Error::other("no journal file"))
    }
    fn discard(&mut self, _: u64) -> io::Result<()> {
        Err(io::Error::other("no journal file"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Meta, User};

    fn meta() -> Meta {
        Meta {
            run: String::new(),
            created: "2026-01-01T00:00:00Z".into(),
            workspace: "/tmp/ws".into(),
            name: None,
            fingerprint: None,
            fork: None,
            routing: None,
            system_file: None,
        }
    }

    fn user(text: &str) -> RecordBody {
        RecordBody::User(User {
            text: text.into(),
            origin: None,
        })
    }

    /// Lines copied from one journal make another byte for byte the same;
    /// lines that do not continue the chain are refused and write nothing.
    #[test]
    fn appended_lines_copy_a_journal_exactly_and_only_when_they_chain() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (
            Store::open(dir.path().join("a")).unwrap(),
            Store::open(dir.path().join("b")).unwrap(),
        );
        let id = RunId::new();
        let mut w = JournalWriter::create(&a, &id, meta()).unwrap();
        let meta_len = w.len() as usize;
        w.append_batch(&[user("one"), user("two")]).unwrap();
        w.trim().unwrap();
        let original = std::fs::read(a.journal_path(&id)).unwrap();
        drop(w);

        // The copy starts with the meta line, then takes the rest as lines.
        std::fs::create_dir_all(b.run_dir(&id)).unwrap();
        std::fs::write(b.journal_path(&id), &original[..meta_len]).unwrap();
        let (mut c, _) = JournalWriter::open(&b, &id).unwrap();
        let rest = &original[meta_len..];
        let second = rest.iter().position(|&x| x == b'\n').unwrap() + 1;
        for bad in [
            &rest[second..],     // skips a seq
            &rest[..second - 1], // no newline at the end
            b"{\"not\":\"a record\"}\n".as_slice(),
            &original[..meta_len], // a second meta
            b"".as_slice(),
        ] {
            let e = c.append_lines(bad).unwrap_err();
            assert!(matches!(e, JournalError::InvalidAppend(_)), "{e}");
            assert!(!c.is_poisoned());
        }
        let done = c.append_lines(rest).unwrap();
        assert_eq!(done.seq, 3);
        assert_eq!(c.seq(), 3);
        c.trim().unwrap();
        drop(c);
        assert_eq!(std::fs::read(b.journal_path(&id)).unwrap(), original);
        let scan = crate::read_journal(&b.journal_path(&id), id.as_str()).unwrap();
        assert_eq!(scan.tail, done.hash);
        // The writer goes on from the copied records.
        let (mut c, _) = JournalWriter::open(&b, &id).unwrap();
        assert_eq!(c.append(&user("three")).unwrap().seq, 4);
    }
}
