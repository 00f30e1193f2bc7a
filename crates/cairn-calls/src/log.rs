//! The response log: the response store's entries and delivery marks as
//! records appended to segment files, one log per store, so a call through
//! the gateway creates no file of its own for them (DESIGN §2, §7).
//!
//! Layout: `<store>/gateway/log/<n>.log` (`n` a zero-padded segment number;
//! the highest is the one appended to), `<store>/gateway/log.lock`. Each
//! record is one JSON line: `{"op": "put", "entry": {…}}`,
//! `{"op": "delivered", "key"}`, `{"op": "undelivered", "key"}`,
//! `{"op": "removed", "key"}`. For each key the last record wins.
//!
//! Invariants:
//! 1. **Whole lines, one writer at a time.** Appends hold `log.lock`
//!    (exclusive) across the cut, the write and the `fdatasync`; a write is
//!    all of a group's lines in one `write`. Before writing, the appender
//!    cuts what follows the last newline (a line torn by a crash, or zeros a
//!    power cut left), durably, so a torn line is never glued to the next.
//!    The sync is under the lock so that no other appender's lines (and
//!    successful sync) can follow lines whose sync failed.
//! 2. **A failed append leaves nothing.** When the write or its sync fails,
//!    the appender, still holding the lock, cuts the segment back to its
//!    length before the append and syncs the cut (site
//!    `responses.log.discard`), then rolls to a new empty segment, and
//!    returns the write's or sync's error. The failed sync is never retried
//!    (DESIGN §2): otherwise the failed lines would stay in the page cache,
//!    be indexed as stored by every reader, and be acknowledged by the next
//!    appender's sync while their own writeback may have failed (a hole
//!    after a power cut). Rolling makes the cut visible to a reader that
//!    indexed the failed lines meanwhile: the segment is then shorter than
//!    what it read, which sends it back to the start (rule 7). If the cut
//!    fails too, the lines stay (nothing more can be done to the file).
//! 3. **Never read torn bytes as a record.** A reader takes only what ends
//!    with a newline; what follows the last one is left for the next read (a
//!    write in progress) or for the next appender to cut (a crash's).
//! 4. **Durable when acknowledged.** A `put`, `undelivered` or `removed`
//!    group is `fdatasync`ed before the call returns (site
//!    `responses.log`); the segment's directory is fsynced the first time
//!    this process appends to that segment (not only when this call
//!    created it: a creator whose directory fsync failed left the entry
//!    in place, unsynced). A `delivered` mark is appended without a sync, as the
//!    marker file was: losing one only serves the client's retry again.
//! 5. **Damage is an error, never a miss.** A complete line that does not
//!    read is an error naming the segment and offset: a miss would buy a call
//!    again.
//! 6. **Rolled and compacted.** Past [`ROLL_AT`] bytes, the appender writes
//!    the live state (every entry still present, every key marked
//!    delivered) to the next segment — written whole, fsynced, then
//!    renamed into place and its directory fsynced — and removes the older
//!    segments. A reader that finds a segment it had read gone reads the
//!    log again from the start.
//! 7. Every reader keeps an index, shared by its clones, and brings it up
//!    to date from where it stopped before each answer: another process's
//!    appends (a gateway's, a VM restore's) are seen at the next lookup. A
//!    segment gone, or shorter than what the index read of it (a failed
//!    append cut back), sends the reader back to the start of the log.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use cairn_store::{durable, storage};
use serde::{Deserialize, Serialize};

use crate::store::Entry;
use crate::CallsError;

/// A segment past this size is compacted into the next.
pub(crate) const ROLL_AT: u64 = 64 * 1024 * 1024;

/// One record.
#[derive(Debug, Serialize, Deserialize)]
#[serde(tag = "op", rename_all = "snake_case")]
pub(crate) enum LogRecord {
    /// A stored response.
    Put {
        /// Its entry.
        entry: Entry,
    },
    /// Its client got it whole.
    Delivered {
        /// The call's key.
        key: String,
    },
    /// A mark taken back (a new sample stored, a VM restored).
    Undelivered {
        /// The call's key.
        key: String,
    },
    /// The entry removed (`cairn session rm`).
    Removed {
        /// The call's key.
        key: String,
    },
}

/// What the log says of one key.
#[derive(Clone, Debug, Default)]
pub(crate) struct KeyState {
    /// The entry, if the last word on it was a `put`; `None` after a
    /// removal, or when only marks were logged.
    pub(crate) entry: Option<Entry>,
    /// Whether a `removed` came after the last `put`.
    pub(crate) removed: bool,
    /// The last mark, if any.
    pub(crate) delivered: Option<bool>,
}

#[derive(Default)]
pub(crate) struct Index {
    /// Each segment read, with how far (up to its last newline).
    segments: Vec<(u64, u64)>,
    pub(crate) keys: HashMap<String, KeyState>,
    /// Records applied since the log was last read from the start.
    records: u64,
}

impl Index {
    fn apply(&mut self, r: LogRecord) {
        self.records += 1;
        match r {
            LogRecord::Put { entry } => {
                let s = self.keys.entry(entry.key.clone()).or_default();
                s.entry = Some(entry);
                s.removed = false;
            }
            LogRecord::Delivered { key } => {
                self.keys.entry(key).or_default().delivered = Some(true);
            }
            LogRecord::Undelivered { key } => {
                self.keys.entry(key).or_default().delivered = Some(false);
            }
            LogRecord::Removed { key } => {
                let s = self.keys.entry(key).or_default();
                s.entry = None;
                s.removed = true;
            }
        }
    }

    /// Whether the live state is less than half of what was read: worth
    /// compacting when the segment rolls.
    fn live(&self) -> u64 {
        self.keys
            .values()
            .map(|s| u64::from(s.entry.is_some()) + u64::from(s.delivered == Some(true)))
            .sum()
    }
}

/// The log of one store, and the index its clones share.
#[derive(Clone, Debug)]
pub(crate) struct ResponseLog {
    dir: PathBuf,
    lock: PathBuf,
    roll_at: u64,
    index: Arc<Mutex<Index>>,
    /// The segment whose directory entry this process has fsynced (0 for
    /// none; segments start at 1): rule 4.
    dir_synced: Arc<AtomicU64>,
    #[cfg(test)]
    fail_next_sync: FailNextSync,
}

/// What runs in place of the next append's sync and the error it fails
/// with (tests).
#[cfg(test)]
type SyncFault = Box<dyn FnOnce() -> std::io::Error + Send>;

/// The fault for the next append's sync, if any (tests).
#[cfg(test)]
#[derive(Clone, Default)]
struct FailNextSync(Arc<Mutex<Option<SyncFault>>>);

#[cfg(test)]
impl std::fmt::Debug for FailNextSync {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("FailNextSync")
    }
}

impl std::fmt::Debug for Index {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Index")
            .field("segments", &self.segments)
            .field("keys", &self.keys.len())
            .finish()
    }
}

fn segment_name(n: u64) -> String {
    format!("{n:010}.log")
}

fn io_err(path: &Path, e: impl std::fmt::Display) -> CallsError {
    CallsError::StoredResponse {
        path: path.to_owned(),
        reason: e.to_string(),
    }
}

impl ResponseLog {
    /// The log in `gateway_dir`.
    pub(crate) fn new(gateway_dir: &Path) -> ResponseLog {
        ResponseLog {
            dir: gateway_dir.join("log"),
            lock: gateway_dir.join("log.lock"),
            roll_at: ROLL_AT,
            index: Arc::default(),
            dir_synced: Arc::default(),
            #[cfg(test)]
            fail_next_sync: FailNextSync::default(),
        }
    }

    /// The same, rolling at `bytes` (tests).
    #[cfg(test)]
    pub(crate) fn rolling_at(mut self, bytes: u64) -> ResponseLog {
        self.roll_at = bytes;
        self
    }

    /// Makes the next append's sync run `fault` instead and fail with the
    /// error it returns (tests).
    #[cfg(test)]
    fn fail_next_sync(&self, fault: impl FnOnce() -> std::io::Error + Send + 'static) {
        *self
            .fail_next_sync
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(Box::new(fault));
    }

    /// The `fdatasync` that makes an append durable.
    fn sync_append(&self, f: &File, path: &Path) -> std::io::Result<()> {
        #[cfg(test)]
        {
            let fault = self
                .fail_next_sync
                .0
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .take();
            if let Some(fault) = fault {
                return Err(fault());
            }
        }
        storage::sync_data(f, path, "responses.log")
    }

    fn segment(&self, n: u64) -> PathBuf {
        self.dir.join(segment_name(n))
    }

    /// The segment numbers present, in order.
    fn segments(&self) -> Result<Vec<u64>, CallsError> {
        let mut out = Vec::new();
        let entries = match std::fs::read_dir(&self.dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(io_err(&self.dir, e)),
        };
        for e in entries {
            let e = e.map_err(|e| io_err(&self.dir, e))?;
            let name = e.file_name();
            let Some(n) = name
                .to_str()
                .and_then(|n| n.strip_suffix(".log"))
                .and_then(|n| n.parse::<u64>().ok())
            else {
                continue; // a compaction's temporary, or not ours
            };
            out.push(n);
        }
        out.sort_unstable();
        Ok(out)
    }

    /// The index, brought up to date with what was appended since it was
    /// last read (rule 7).
    pub(crate) fn read(&self) -> Result<MutexGuard<'_, Index>, CallsError> {
        let mut index = self.index.lock().unwrap_or_else(|p| p.into_inner());
        let present = self.segments()?;
        // A segment read before and gone now: compacted away. Start over.
        if index
            .segments
            .iter()
            .any(|(n, _)| present.binary_search(n).is_err())
        {
            *index = Index::default();
        }
        for n in present {
            let at = match index.segments.iter().position(|(m, _)| *m == n) {
                Some(i) => i,
                None => {
                    index.segments.push((n, 0));
                    index.segments.len() - 1
                }
            };
            let from = index.segments[at].1;
            let path = self.segment(n);
            let mut f = match File::open(&path) {
                Ok(f) => f,
                // Compacted away between the listing and the open.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    drop(index);
                    *self.index.lock().unwrap_or_else(|p| p.into_inner()) = Index::default();
                    return self.read();
                }
                Err(e) => return Err(io_err(&path, e)),
            };
            let len = f.metadata().map_err(|e| io_err(&path, e))?.len();
            if len < from {
                // Cut below what was read: the index holds lines of an
                // append that failed (rule 2). Start over.
                drop(f);
                drop(index);
                *self.index.lock().unwrap_or_else(|p| p.into_inner()) = Index::default();
                return self.read();
            }
            if len == from {
                continue;
            }
            let mut buf = Vec::with_capacity((len - from) as usize);
            f.seek(SeekFrom::Start(from))
                .and_then(|_| f.take(len - from).read_to_end(&mut buf))
                .map_err(|e| io_err(&path, e))?;
            // Rule 3: only what ends with a newline.
            let Some(end) = buf.iter().rposition(|&b| b == b'\n') else {
                continue;
            };
            let mut at_line = from;
            for line in buf[..end].split(|&b| b == b'\n') {
                let r: LogRecord = serde_json::from_slice(line).map_err(|e| {
                    io_err(
                        &path,
                        format!("the record at byte {at_line} does not read ({e})"),
                    )
                })?;
                index.apply(r);
                at_line += line.len() as u64 + 1;
            }
            index.segments[at].1 = from + end as u64 + 1;
        }
        Ok(index)
    }

    /// Appends `records` (rule 1), synced unless `sync` is false (rule 4).
    /// The next [`ResponseLog::read`] sees them.
    ///
    /// # Errors
    /// The write or its sync failed: the records were cut from the log
    /// again (rule 2). Or the log could not be opened, cut or rolled.
    pub(crate) fn append(&self, records: &[LogRecord], sync: bool) -> Result<(), CallsError> {
        if records.is_empty() {
            return Ok(());
        }
        let mut bytes = Vec::new();
        for r in records {
            serde_json::to_writer(&mut bytes, r).map_err(|e| io_err(&self.dir, e))?;
            bytes.push(b'\n');
        }
        if !self.dir.is_dir() {
            if let Some(parent) = self.dir.parent() {
                durable::create_dir_all_durable(parent, "responses.log.dir")?;
            }
            durable::create_dir_all_durable(&self.dir, "responses.log.dir")?;
        }
        let lock =
            durable::open_or_create_private(&self.lock).map_err(|e| io_err(&self.lock, e))?;
        lock.lock().map_err(|e| io_err(&self.lock, e))?;
        let n = self.segments()?.last().copied().unwrap_or(1);
        let path = self.segment(n);
        let (mut f, len) = self.open_segment(n, &path)?;
        let len = cut_torn_tail(&f, &path, len)?;
        let written = storage::append(&mut f, &path, len, &bytes).and_then(|()| {
            if sync {
                self.sync_append(&f, &path)
            } else {
                Ok(())
            }
        });
        if let Err(e) = written {
            // Rule 2, under the lock: no other append can follow these
            // lines. The failure is what the caller is told; a failed cut
            // or roll only leaves the log as the failure left it.
            let cut = storage::set_len(&f, &path, len)
                .and_then(|()| storage::sync_data(&f, &path, "responses.log.discard"));
            if cut.is_ok() {
                let _ = self.roll(n, None);
            }
            return Err(io_err(&path, e));
        }
        drop(lock);
        if sync && len + bytes.len() as u64 >= self.roll_at {
            self.roll_if_due(n)?;
        }
        Ok(())
    }

    /// Rule 5, under the lock: when segment `n` is still the last and past
    /// the size, starts the next one, compacted when the live state is less
    /// than half of what was read.
    fn roll_if_due(&self, n: u64) -> Result<(), CallsError> {
        let lock =
            durable::open_or_create_private(&self.lock).map_err(|e| io_err(&self.lock, e))?;
        lock.lock().map_err(|e| io_err(&self.lock, e))?;
        if self.segments()?.last() != Some(&n) {
            return Ok(()); // rolled by another appender meanwhile
        }
        // Read under the lock: the index holds every record there is.
        let index = self.read()?;
        let compact = index.live().saturating_mul(2) < index.records;
        let state = compact.then(|| snapshot(&index));
        drop(index);
        self.roll(n, state)
    }

    /// Starts segment `n + 1`: with the live state when compacting (then
    /// segments up to `n` go), or empty.
    fn roll(&self, n: u64, state: Option<Vec<u8>>) -> Result<(), CallsError> {
        let next = self.segment(n + 1);
        match &state {
            Some(bytes) => durable::write_atomic(&next, bytes)?,
            None => {
                let f = durable::create_file_private(&next)?;
                drop(f);
                durable::fsync_dir(&self.dir)?;
            }
        }
        if state.is_some() {
            for old in self.segments()?.into_iter().filter(|&m| m <= n) {
                let p = self.segment(old);
                std::fs::remove_file(&p).map_err(|e| io_err(&p, e))?;
                storage::removed(&p);
            }
            durable::fsync_dir(&self.dir)?;
        }
        Ok(())
    }
}

/// The live state as records: each present entry, each delivered mark.
fn snapshot(index: &Index) -> Vec<u8> {
    let mut out = Vec::new();
    let mut keys: Vec<_> = index.keys.iter().collect();
    keys.sort_by(|a, b| a.0.cmp(b.0));
    for (key, s) in keys {
        let mut put = |r: &LogRecord| {
            if serde_json::to_writer(&mut out, r).is_ok() {
                out.push(b'\n');
            }
        };
        if let Some(e) = &s.entry {
            put(&LogRecord::Put { entry: e.clone() });
        }
        if s.delivered == Some(true) {
            put(&LogRecord::Delivered { key: key.clone() });
        }
    }
    out
}

impl ResponseLog {
    /// Opens (creating, durably) segment `n` at `path` for appending: its
    /// handle and length. Its directory is fsynced when this call created
    /// it and also the first time this process appends to it (rule 4): a
    /// segment found present may be one whose creator's directory fsync
    /// failed (the creator reported the error; its entry is still there).
    fn open_segment(&self, n: u64, path: &Path) -> Result<(File, u64), CallsError> {
        use std::os::unix::fs::OpenOptionsExt;
        if !path.exists() {
            drop(durable::create_file_private(path)?);
            self.dir_synced.store(0, Ordering::Relaxed);
        }
        if self.dir_synced.load(Ordering::Relaxed) != n {
            durable::fsync_dir_at(&self.dir, "responses.log.segment")?;
            self.dir_synced.store(n, Ordering::Relaxed);
        }
        let f = std::fs::OpenOptions::new()
            .read(true)
            .append(true)
            .mode(durable::FILE_MODE)
            .open(path)
            .map_err(|e| io_err(path, e))?;
        let len = f.metadata().map_err(|e| io_err(path, e))?.len();
        Ok((f, len))
    }
}

/// Rule 1: cuts what follows the segment's last newline, durably; the new
/// length.
fn cut_torn_tail(f: &File, path: &Path, len: u64) -> Result<u64, CallsError> {
    use std::os::unix::fs::FileExt;
    let mut end = len;
    let mut window = 4096u64;
    let keep = loop {
        if end == 0 {
            break 0;
        }
        let take = window.min(end);
        let mut buf = vec![0u8; take as usize];
        f.read_exact_at(&mut buf, end - take)
            .map_err(|e| io_err(path, e))?;
        if let Some(i) = buf.iter().rposition(|&b| b == b'\n') {
            break end - take + i as u64 + 1;
        }
        end -= take;
        window = (window * 4).min(1 << 20);
    };
    if keep < len {
        storage::set_len(f, path, keep).map_err(|e| io_err(path, e))?;
        storage::sync_data(f, path, "responses.log.cut").map_err(|e| io_err(path, e))?;
    }
    Ok(keep)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(key: &str) -> Entry {
        Entry {
            body: "ab".repeat(32),
            ..Entry::whole_json(key, "R1", "agent:test")
        }
    }

    fn put(key: &str) -> LogRecord {
        LogRecord::Put { entry: entry(key) }
    }

    fn state(log: &ResponseLog, key: &str) -> Option<KeyState> {
        log.read().unwrap().keys.get(key).cloned()
    }

    #[test]
    fn the_last_word_on_a_key_wins_and_every_reader_sees_it() {
        let d = tempfile::tempdir().unwrap();
        let a = ResponseLog::new(d.path());
        let b = ResponseLog::new(d.path()); // another process
        a.append(&[put("k1"), put("k2")], true).unwrap();
        a.append(&[LogRecord::Delivered { key: "k1".into() }], false)
            .unwrap();
        let s = state(&b, "k1").unwrap();
        assert!(s.entry.is_some() && s.delivered == Some(true));
        b.append(&[LogRecord::Undelivered { key: "k1".into() }], true)
            .unwrap();
        b.append(&[LogRecord::Removed { key: "k2".into() }], true)
            .unwrap();
        assert_eq!(state(&a, "k1").unwrap().delivered, Some(false));
        let k2 = state(&a, "k2").unwrap();
        assert!(k2.entry.is_none() && k2.removed);
        a.append(&[put("k2")], true).unwrap();
        assert!(!state(&b, "k2").unwrap().removed);
    }

    #[test]
    fn a_torn_tail_is_never_read_and_the_next_append_cuts_it() {
        let d = tempfile::tempdir().unwrap();
        let log = ResponseLog::new(d.path());
        log.append(&[put("k1")], true).unwrap();
        let seg = log.segment(1);
        let whole = std::fs::read(&seg).unwrap();
        // A crash mid-write: half a line, then zeros a power cut left.
        let mut torn = whole.clone();
        torn.extend_from_slice(br#"{"op":"put","entry":{"key":"k2""#);
        torn.extend_from_slice(&[0u8; 300]);
        std::fs::write(&seg, &torn).unwrap();
        let fresh = ResponseLog::new(d.path());
        assert!(state(&fresh, "k2").is_none());
        assert!(state(&fresh, "k1").is_some());
        fresh.append(&[put("k3")], true).unwrap();
        let after = std::fs::read(&seg).unwrap();
        assert!(after.starts_with(&whole));
        assert_eq!(after.iter().filter(|&&b| b == b'\n').count(), 2);
        let again = ResponseLog::new(d.path());
        assert!(state(&again, "k3").is_some() && state(&again, "k2").is_none());
    }

    /// A sync that fails: the lines are cut from the segment again, so no
    /// reader keeps them (not even one that indexed them while the sync
    /// ran) and no later append's sync acknowledges them.
    #[test]
    fn a_failed_sync_cuts_the_lines_back_and_no_reader_keeps_them() {
        let d = tempfile::tempdir().unwrap();
        let log = ResponseLog::new(d.path());
        log.append(&[put("k1")], true).unwrap();
        let before = std::fs::read(log.segment(1)).unwrap();
        let reader = ResponseLog::new(d.path());
        let during = reader.clone();
        log.fail_next_sync(move || {
            // Another process reads while the sync runs: it sees the lines.
            assert!(during.read().unwrap().keys.contains_key("k2"));
            std::io::Error::from_raw_os_error(5) // EIO
        });
        let err = log.append(&[put("k2")], true).unwrap_err().to_string();
        assert!(err.contains("0000000001.log"), "{err}");
        assert_eq!(std::fs::read(log.segment(1)).unwrap(), before);
        // The log goes on in a new segment: the one cut stays shorter than
        // what the reader had read of it (k3's line is as long as k2's), so
        // the reader starts over instead of keeping k2 and missing k3.
        log.append(&[put("k3")], true).unwrap();
        assert_eq!(log.segments().unwrap(), [1, 2]);
        for r in [&reader, &log, &ResponseLog::new(d.path())] {
            assert!(state(r, "k1").is_some() && state(r, "k3").is_some());
            assert!(state(r, "k2").is_none());
        }
    }

    /// Collects the directory syncs of one directory.
    struct DirSyncs(PathBuf, Mutex<Vec<&'static str>>);

    impl storage::Recorder for DirSyncs {
        fn record(&self, op: storage::Op<'_>) {
            if let storage::Op::SyncDir { path, site } = op {
                if path == self.0 {
                    self.1.lock().unwrap().push(site);
                }
            }
        }
    }

    /// A segment found present (made by another process, whose directory
    /// fsync may have failed) has its directory fsynced before this process
    /// first appends to it, and only then.
    #[test]
    fn a_segment_s_directory_is_fsynced_the_first_time_a_process_appends_to_it() {
        let d = tempfile::tempdir().unwrap();
        let first = ResponseLog::new(d.path());
        first.append(&[put("k1")], true).unwrap();
        let syncs = Arc::new(DirSyncs(first.dir.clone(), Mutex::default()));
        let _installed = storage::install(syncs.clone());
        let other = ResponseLog::new(d.path()); // another process
        other.append(&[put("k2")], true).unwrap();
        other.append(&[put("k3")], true).unwrap();
        first.append(&[put("k4")], true).unwrap();
        assert_eq!(*syncs.1.lock().unwrap(), ["responses.log.segment"]);
    }

    #[test]
    fn a_damaged_complete_record_is_an_error_naming_where() {
        let d = tempfile::tempdir().unwrap();
        let log = ResponseLog::new(d.path());
        log.append(&[put("k1")], true).unwrap();
        let seg = log.segment(1);
        let mut bytes = std::fs::read(&seg).unwrap();
        bytes.extend_from_slice(b"{not a record}\n");
        std::fs::write(&seg, &bytes).unwrap();
        let err = ResponseLog::new(d.path()).read().unwrap_err().to_string();
        assert!(err.contains("0000000001.log"), "{err}");
        assert!(err.contains("does not read"), "{err}");
    }

    #[test]
    fn a_rolled_log_is_compacted_to_its_live_state_and_readers_follow() {
        let d = tempfile::tempdir().unwrap();
        let log = ResponseLog::new(d.path()).rolling_at(4096);
        let reader = ResponseLog::new(d.path());
        for round in 0..40 {
            let key = format!("k{}", round % 5);
            log.append(&[put(&key)], true).unwrap();
            log.append(&[LogRecord::Delivered { key: key.clone() }], false)
                .unwrap();
            if round % 7 == 0 {
                log.append(&[LogRecord::Removed { key }], true).unwrap();
            }
            // The other reader keeps up as segments go.
            drop(reader.read().unwrap());
        }
        let segments = log.segments().unwrap();
        assert!(segments.len() <= 2 && segments[0] > 1, "{segments:?}");
        let fresh = ResponseLog::new(d.path());
        for r in [&fresh, &reader, &log] {
            let index = r.read().unwrap();
            let mut live: Vec<_> = index
                .keys
                .iter()
                .filter(|(_, s)| s.entry.is_some())
                .map(|(k, s)| (k.clone(), s.delivered))
                .collect();
            live.sort();
            // k0 was removed in round 35 (35 % 7 == 0, 35 % 5 == 0) and
            // never put again; the others are put and delivered.
            assert_eq!(
                live,
                ["k1", "k2", "k3", "k4"]
                    .iter()
                    .map(|k| (k.to_string(), Some(true)))
                    .collect::<Vec<_>>()
            );
        }
    }
}
