//! Projections (DESIGN §3.1): the per-run `meta.json` sidecar and the store's
//! `sessions.index`, so sessions can be listed without replaying them.
//!
//! Invariants:
//! - a projection is a cache, never the truth: each entry is bound to the
//!   journal's byte length, sub-second mtime, record count, chain tail hash
//!   and `h(1)`, and a reader uses it only when all five still match (the
//!   tail hash is checked against the journal's last line, which attests it
//!   alone; `h(1)` against the first line);
//! - what decides behaviour is taken from what the record attests, never
//!   from the projection's bytes: workspace (repository scoping, `cairn
//!   continue`), name, creation time and fork origin from the `meta` line;
//!   status, turns and cost from the last terminal behind any bookkeeping;
//!   validity from the binding and the receipt, which must follow the forks'
//!   `meta` pins. A projection only says "valid": invalid sessions are never
//!   projected;
//! - every length or offset read from a projection is bounded before it
//!   sizes a read (a receipt's pinned line at most `MAX_PIN_LINE` and inside
//!   the parent's file); one out of bounds makes the projection ignored;
//! - a missing, stale, malformed or oversized projection is ignored and
//!   rebuilt from the verified record; nothing in one can make a listing fail
//!   or lie;
//! - `meta.json` is replaced atomically (the durable-write helper);
//! - `sessions.index` is JSON lines, the last line for an id wins; each holds
//!   only what a lister checks ([`Vouched`]: the binding, turns, cost and
//!   receipt), the whole projection being in `meta.json`. Updates are
//!   appended under an exclusive lock (`sessions.index.lock`), so two
//!   processes finishing runs at once never lose each other's entries; the
//!   file is compacted (atomically, under the same lock) when it has grown to
//!   twice its size after the last compaction, which the lock file records
//!   (see `Compacted`): an update never reads the index it appends to;
//! - cost figures are not served from here unless honestly `unknown`
//!   (DESIGN §4.5): the lister takes them from the journal's last record.

use std::borrow::Cow;
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use cairn_journal::{ChainHash, Cost};
use cairn_store::{durable, RunId, Store};
use serde::{Deserialize, Serialize};

use crate::fork::Pin;
use crate::summary::Summary;

/// The largest `meta.json` a reader will parse.
pub const MAX_META_BYTES: u64 = 256 * 1024;
/// The largest `sessions.index` a reader will parse.
pub const MAX_INDEX_BYTES: u64 = 512 * 1024 * 1024;
/// The largest single index line.
const MAX_LINE_BYTES: usize = 256 * 1024;

/// What a projection is bound to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Binding {
    /// Journal length in bytes.
    pub len: u64,
    /// Journal mtime in nanoseconds since the epoch (a quick first test only).
    pub mtime_ns: i64,
    /// Records in the journal.
    pub records: u64,
    /// Chain hash of the last record, hex.
    pub tail: String,
    /// `h(1)`, the chain hash of the first record (`meta`), hex. The
    /// session's name, creation time, workspace and fork origin are read
    /// from that record, checked against this hash, never from the
    /// projection's own bytes. Empty in projections written before it
    /// existed: those are rebuilt.
    #[serde(default)]
    pub head: String,
}

/// One projected session.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Projection {
    /// The binding.
    pub binding: Binding,
    /// The summary as of the binding.
    pub summary: Summary,
    /// For a fork: the pins of every ancestor prefix it consumed, nearest first.
    #[serde(default)]
    pub receipt: Vec<Pin>,
}

/// What a lister takes from a projection: the binding it checks against the
/// journal, and the figures the journal's last terminal must agree with.
/// The summary's texts are not kept: a lister takes them from the record.
/// This is what a line of `sessions.index` holds.
#[derive(Clone, Debug, PartialEq)]
pub struct Vouched {
    /// The binding, its hashes decoded.
    pub binding: Bound,
    /// Model turns, as of the binding.
    pub turns: u64,
    /// Cumulative cost, as of the binding.
    pub cost: Cost,
    /// A fork's pins (see [`Projection::receipt`]).
    pub receipt: Vec<Pin>,
}

/// A [`Binding`] with its hashes decoded, compared with a journal's without
/// formatting either. A binding without `h(1)` (written before it existed)
/// or with a hash that is not 64 lowercase hex digits has none: its
/// projection is rebuilt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Bound {
    /// Journal length in bytes.
    pub len: u64,
    /// Journal mtime in nanoseconds since the epoch.
    pub mtime_ns: i64,
    /// Records in the journal.
    pub records: u64,
    /// Chain hash of the last record.
    pub tail: ChainHash,
    /// `h(1)`.
    pub head: ChainHash,
}

impl Vouched {
    /// The part of `p` a lister uses, or `None` when its hashes do not decode.
    pub fn of(p: &Projection) -> Option<Vouched> {
        let b = &p.binding;
        Some(Vouched {
            binding: Bound {
                len: b.len,
                mtime_ns: b.mtime_ns,
                records: b.records,
                tail: ChainHash::from_hex(&b.tail)?,
                head: ChainHash::from_hex(&b.head)?,
            },
            turns: p.summary.turns,
            cost: p.summary.cost,
            receipt: p.receipt.clone(),
        })
    }
}

/// One line of `sessions.index`: the id, then what a lister checks (no
/// `flatten`: it buffers, and is slow). About a third of the bytes of a
/// whole projection, which `meta.json` keeps.
#[derive(Serialize, Deserialize)]
struct IndexLine<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    binding: Bound,
    turns: u64,
    cost: Cost,
    #[serde(default)]
    receipt: Cow<'a, [Pin]>,
}

/// A line as cairn wrote it before lines were [`IndexLine`]s (a whole
/// projection), still read until the next compaction rewrites it; the
/// summary's texts are skipped by the parser, never allocated.
#[derive(Deserialize)]
struct WholeLine<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    #[serde(borrow)]
    projection: WholeProjection<'a>,
}

#[derive(Deserialize)]
struct WholeProjection<'a> {
    binding: Bound,
    #[serde(borrow)]
    summary: WholeSummary<'a>,
    #[serde(default)]
    receipt: Vec<Pin>,
}

#[derive(Deserialize)]
struct WholeSummary<'a> {
    #[serde(borrow)]
    id: Cow<'a, str>,
    turns: u64,
    cost: Cost,
}

/// The journal's current length and mtime, for a binding.
pub fn journal_stat(path: &Path) -> std::io::Result<(u64, i64)> {
    let m = std::fs::metadata(path)?;
    Ok((m.len(), cairn_journal::mtime_ns(&m)))
}

/// Reads a run's `meta.json`, or `None` when it is missing, oversized or
/// malformed.
pub fn read_meta(store: &Store, id: &RunId) -> Option<Projection> {
    let path = store.meta_path(id);
    let f = File::open(&path).ok()?;
    if f.metadata().ok()?.len() > MAX_META_BYTES {
        return None;
    }
    let mut bytes = Vec::new();
    f.take(MAX_META_BYTES).read_to_end(&mut bytes).ok()?;
    let p: Projection = serde_json::from_slice(&bytes).ok()?;
    (p.summary.id == id.as_str()).then_some(p)
}

/// Replaces a run's `meta.json` atomically.
///
/// # Errors
/// IO errors from the durable write.
pub fn write_meta(
    store: &Store,
    id: &RunId,
    p: &Projection,
) -> Result<(), cairn_store::StoreError> {
    let bytes = serde_json::to_vec_pretty(p).unwrap_or_default();
    durable::write_atomic(&store.meta_path(id), &bytes)
}

fn index_lock_path(store: &Store) -> PathBuf {
    store.sessions_index().with_file_name("sessions.index.lock")
}

/// The bytes of `sessions.index`, read once. Its lines are found and keyed
/// by id without parsing their projections: a lister parses each entry on
/// the thread that checks it, so nothing is allocated for entries it never
/// uses and nothing allocated on one thread is freed on another.
pub struct IndexBytes(Vec<u8>);

impl IndexBytes {
    /// Reads `sessions.index`; a missing, unreadable or oversized index reads
    /// as empty.
    pub fn read(store: &Store) -> IndexBytes {
        let path = store.sessions_index();
        let Ok(f) = File::open(&path) else {
            return IndexBytes(Vec::new());
        };
        let Ok(len) = f.metadata().map(|m| m.len()) else {
            return IndexBytes(Vec::new());
        };
        if len > MAX_INDEX_BYTES {
            return IndexBytes(Vec::new());
        }
        let mut bytes = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
        if f.take(MAX_INDEX_BYTES).read_to_end(&mut bytes).is_err() {
            return IndexBytes(Vec::new());
        }
        IndexBytes(bytes)
    }

    /// The newest line per id (later lines win), unparsed. Lines too long or
    /// without a readable id are skipped.
    pub fn entries(&self) -> HashMap<&str, IndexEntry<'_>> {
        use rayon::prelude::*;
        // Lines are found with memchr (a vectorised scan: a split tested
        // byte by byte took milliseconds over a large index), then keyed on
        // every core; rayon's collect keeps their order, so inserting them
        // in turn lets later lines win.
        let mut lines = Vec::new();
        let mut start = 0;
        for end in memchr::memchr_iter(b'\n', &self.0) {
            lines.push(&self.0[start..end]);
            start = end + 1;
        }
        lines.push(&self.0[start..]);
        let keyed: Vec<(&str, IndexEntry<'_>)> = lines
            .into_par_iter()
            .with_min_len(256)
            .filter_map(keyed_line)
            .collect();
        let mut map = HashMap::with_capacity(keyed.len());
        map.extend(keyed);
        map
    }
}

/// One unparsed line of `sessions.index`, with the id it was keyed by.
#[derive(Clone, Copy)]
pub struct IndexEntry<'a> {
    id: &'a str,
    line: &'a [u8],
}

impl IndexEntry<'_> {
    /// What this line vouches for, or `None` when it is malformed, or names
    /// another id than the one it was keyed by (or, written by an older
    /// cairn, is not the projection of the session it names).
    pub fn vouched(self) -> Option<Vouched> {
        if let Ok(l) = serde_json::from_slice::<IndexLine<'_>>(self.line) {
            return (l.id == self.id).then(|| Vouched {
                binding: l.binding,
                turns: l.turns,
                cost: l.cost,
                receipt: l.receipt.into_owned(),
            });
        }
        let l: WholeLine<'_> = serde_json::from_slice(self.line).ok()?;
        let p = l.projection;
        (l.id == self.id && p.summary.id == l.id).then_some(Vouched {
            binding: p.binding,
            turns: p.summary.turns,
            cost: p.summary.cost,
            receipt: p.receipt,
        })
    }
}

/// Only the id of an index line; the rest is skipped, not kept.
#[derive(Deserialize)]
struct LineId<'a> {
    #[serde(borrow)]
    id: std::borrow::Cow<'a, str>,
}

/// The id of an index line as cairn writes it (`{"id":"…",` first), found
/// without scanning the rest of the line; `None` for any other shape, which
/// the JSON parser then reads. A wrong guess costs nothing: the entry is
/// parsed whole before use and must name the same id.
fn leading_id(line: &[u8]) -> Option<&str> {
    let rest = line.strip_prefix(b"{\"id\":\"")?;
    let end = rest.iter().position(|&b| b == b'"')?;
    let id = &rest[..end];
    let plain = |b: &u8| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'-';
    if !id.iter().all(plain) || rest.get(end + 1) != Some(&b',') {
        return None;
    }
    std::str::from_utf8(id).ok()
}

fn keyed_line(line: &[u8]) -> Option<(&str, IndexEntry<'_>)> {
    if line.is_empty() || line.len() > MAX_LINE_BYTES {
        return None;
    }
    let id = match leading_id(line) {
        Some(id) => id,
        // Ids are ASCII: an escaped one is not an id, and is skipped.
        None => match serde_json::from_slice::<LineId>(line) {
            Ok(LineId {
                id: std::borrow::Cow::Borrowed(id),
            }) => id,
            _ => return None,
        },
    };
    Some((id, IndexEntry { id, line }))
}

/// What a lister reads from `bytes` taken as a `sessions.index`: for each id
/// keyed, its newest line and what that line vouches for. For the fuzz
/// target (`cairn-fuzz`), which checks these against the bytes.
#[doc(hidden)]
pub fn index_entries_of(bytes: &[u8]) -> Vec<(String, Vec<u8>, Option<Vouched>)> {
    let bytes = IndexBytes(bytes.to_vec());
    let mut out: Vec<_> = bytes
        .entries()
        .into_iter()
        .map(|(id, e)| (id.to_owned(), e.line.to_vec(), e.vouched()))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

/// `v` as the line of `id` cairn writes to `sessions.index`, without its
/// newline. For the fuzz target.
#[doc(hidden)]
pub fn index_line_of(id: &str, v: &Vouched) -> Vec<u8> {
    let mut buf = Vec::new();
    // Serialising these types into memory cannot fail.
    let _ = index_line(&mut buf, id, v);
    buf.pop();
    buf
}

/// Reads `sessions.index`: the newest entry per id, parsed. Malformed lines
/// are skipped; a missing or oversized index reads as empty.
pub fn read_index(store: &Store) -> HashMap<String, Vouched> {
    let bytes = IndexBytes::read(store);
    let entries = bytes.entries();
    entries
        .into_iter()
        .filter_map(|(id, e)| Some((id.to_owned(), e.vouched()?)))
        .collect()
}

/// An index line for `v`, newline included.
fn index_line(buf: &mut Vec<u8>, id: &str, v: &Vouched) -> std::io::Result<()> {
    let line = IndexLine {
        id: Cow::Borrowed(id),
        binding: v.binding,
        turns: v.turns,
        cost: v.cost,
        receipt: Cow::Borrowed(&v.receipt),
    };
    serde_json::to_writer(&mut *buf, &line).map_err(std::io::Error::other)?;
    buf.push(b'\n');
    Ok(())
}

/// A held `sessions.index.lock`. Its bytes hold the [`Compacted`] record.
struct IndexLock(File);

fn lock_index(store: &Store) -> std::io::Result<IndexLock> {
    let f = durable::open_or_create_private(&index_lock_path(store))?;
    f.lock()?;
    Ok(IndexLock(f))
}

/// What the last compaction left: which file (device and inode, since a
/// compaction or `reindex` replaces it) and how long it was. Kept in the
/// index lock file and read and written only under that lock, so deciding
/// whether to compact costs a stat and one small read, not a parse of the
/// whole index. Damaged or absent (a crash, an older cairn), it reads as
/// unknown and the next update compacts, which rewrites it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
struct Compacted {
    dev: u64,
    ino: u64,
    len: u64,
}

/// The smallest growth since the last compaction worth compacting for.
const MIN_GROWTH: u64 = 32 * 1024;

impl IndexLock {
    fn compacted(&self) -> Option<Compacted> {
        use std::os::unix::fs::FileExt;
        let mut buf = [0u8; 256];
        let n = self.0.read_at(&mut buf, 0).ok()?;
        serde_json::from_slice(&buf[..n]).ok()
    }

    /// Records the index as it is now, right after it was rewritten. Best
    /// effort: a record that is not written only means one extra compaction.
    fn record_compacted(&self, index: &Path) {
        use std::os::unix::fs::{FileExt, MetadataExt};
        let Ok(m) = std::fs::metadata(index) else {
            return;
        };
        let c = Compacted {
            dev: m.dev(),
            ino: m.ino(),
            len: m.len(),
        };
        if let Ok(bytes) = serde_json::to_vec(&c) {
            let _ = self
                .0
                .set_len(0)
                .and_then(|_| self.0.write_all_at(&bytes, 0));
        }
    }
}

/// Appends entries to `sessions.index` under its lock, and compacts it when
/// it has grown to twice its size after the last compaction (and by at least
/// [`MIN_GROWTH`]). The decision costs a stat and one small read, so an
/// update is proportional to its entries, not to the index; a compaction
/// reads the whole index, but only after as many bytes were appended as it
/// reads, so its cost per append is constant. Best effort: a projection that
/// is not written is rebuilt later.
///
/// # Errors
/// IO errors (the caller may ignore them: the index is a cache).
pub fn update_index(store: &Store, entries: &[(RunId, Projection)]) -> std::io::Result<()> {
    if entries.is_empty() {
        return Ok(());
    }
    let lock = lock_index(store)?;
    let path = store.sessions_index();
    let mut buf = Vec::new();
    for (id, p) in entries {
        // A projection whose hashes do not decode vouches for nothing.
        if let Some(v) = Vouched::of(p) {
            index_line(&mut buf, id.as_str(), &v)?;
        }
    }
    let mut f = OpenOptions::new()
        .append(true)
        .create(true)
        .mode(durable::FILE_MODE)
        .open(&path)?;
    f.write_all(&buf)?;
    let now = f.metadata()?;
    drop(f);
    if should_compact(lock.compacted(), &now) {
        write_index(store, read_index(store).into_iter().collect())?;
        lock.record_compacted(&path);
    }
    Ok(())
}

/// Whether the index, now `now`, has grown enough since `last` to compact.
fn should_compact(last: Option<Compacted>, now: &std::fs::Metadata) -> bool {
    use std::os::unix::fs::MetadataExt;
    match last {
        Some(c) if c.dev == now.dev() && c.ino == now.ino() => {
            now.len() >= c.len.saturating_add(c.len.max(MIN_GROWTH))
        }
        // Replaced or never compacted by this scheme: the size after the
        // last compaction is unknown, so compact once to learn it.
        _ => true,
    }
}

/// Rewrites `sessions.index` with exactly these entries (atomically). The
/// caller holds the index lock, or calls [`replace_index`].
fn write_index(store: &Store, mut entries: Vec<(String, Vouched)>) -> std::io::Result<()> {
    entries.retain(|(id, _)| {
        RunId::parse(id)
            .map(|id| store.journal_path(&id).exists())
            .unwrap_or(false)
    });
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    let mut buf = Vec::new();
    for (id, v) in &entries {
        index_line(&mut buf, id, v)?;
    }
    durable::write_atomic(&store.sessions_index(), &buf).map_err(std::io::Error::other)
}

/// Replaces `sessions.index` with these entries, under its lock (reindex).
///
/// # Errors
/// IO errors.
pub fn replace_index(store: &Store, entries: Vec<(String, Projection)>) -> std::io::Result<()> {
    let entries = entries
        .into_iter()
        .filter_map(|(id, p)| Some((id, Vouched::of(&p)?)))
        .collect();
    let lock = lock_index(store)?;
    write_index(store, entries)?;
    lock.record_compacted(&store.sessions_index());
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::summary::Summary;
    use cairn_journal::Cost;

    fn projection(id: &str) -> Projection {
        Projection {
            binding: Binding {
                len: 10,
                mtime_ns: 1_700_000_000_123_456_789,
                records: 3,
                tail: "ab".repeat(32),
                head: "cd".repeat(32),
            },
            summary: Summary {
                id: id.into(),
                name: Some("n".into()),
                status: "completed".into(),
                created: "c".into(),
                updated: "u".into(),
                workspace: "/w".into(),
                turns: 1,
                records: 3,
                bytes: 10,
                tail: "ab".repeat(32),
                cost: Cost::known(0.5),
                parent: None,
                valid: true,
                problem: None,
                first_bad_seq: None,
            },
            receipt: vec![],
        }
    }

    #[test]
    fn index_lines_round_trip_and_the_last_wins() {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(d.path()).unwrap();
        let id = RunId::new();
        cairn_journal::JournalWriter::create(
            &store,
            &id,
            cairn_journal::Meta {
                run: String::new(),
                created: "c".into(),
                workspace: "/w".into(),
                name: None,
                fingerprint: None,
                fork: None,
                routing: None,
                system_file: None,
            },
        )
        .unwrap();
        let mut p = projection(id.as_str());
        update_index(&store, &[(id.clone(), p.clone())]).unwrap();
        p.binding.records = 4;
        update_index(&store, &[(id.clone(), p.clone())]).unwrap();
        let read = read_index(&store);
        let v = Vouched::of(&p).unwrap();
        assert_eq!(read.get(id.as_str()), Some(&v));
        // Compaction keeps the newest entry of each live id.
        for _ in 0..300 {
            update_index(&store, &[(id.clone(), p.clone())]).unwrap();
        }
        let text = std::fs::read_to_string(store.sessions_index()).unwrap();
        let appended = 300 * (text.lines().next().unwrap().len() + 1);
        assert!(appended as u64 > 2 * MIN_GROWTH);
        assert!(
            (text.len() as u64) < MIN_GROWTH + 1024,
            "compacted: {} bytes",
            text.len()
        );
        assert_eq!(read_index(&store).get(id.as_str()), Some(&v));
        // A line holds what a lister checks, not the summary's texts.
        let last: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
        let keys: Vec<&str> = last
            .as_object()
            .unwrap()
            .keys()
            .map(|k| k.as_str())
            .collect();
        assert_eq!(keys, ["binding", "cost", "id", "receipt", "turns"]);
        // The id first, so a lister keys it without parsing it.
        assert!(leading_id(text.lines().last().unwrap().as_bytes()).is_some());
    }

    fn line(id: &str, p: &Projection) -> Vec<u8> {
        let mut buf = Vec::new();
        index_line(&mut buf, id, &Vouched::of(p).unwrap()).unwrap();
        buf.pop();
        buf
    }

    /// A line as cairn wrote it before lines held only what a lister checks.
    fn whole_line(id: &str, p: &Projection) -> Vec<u8> {
        serde_json::to_vec(&serde_json::json!({"id": id, "projection": p})).unwrap()
    }

    #[test]
    fn a_line_an_older_cairn_wrote_vouches_as_before_until_it_is_rewritten() {
        let a = projection("01ABC");
        let v = Vouched::of(&a).unwrap();
        let old = whole_line("01ABC", &a);
        let new = line("01ABC", &a);
        assert!(
            new.len() * 5 < old.len() * 3,
            "{} vs {} bytes",
            new.len(),
            old.len()
        );
        for l in [&old, &new] {
            let (id, e) = keyed_line(l).unwrap();
            assert_eq!(id, "01ABC");
            assert_eq!(e.vouched(), Some(v.clone()));
        }
        // An old line whose projection is another session's vouches for nothing.
        let other = whole_line("01ABC", &projection("01OTHER"));
        assert_eq!(keyed_line(&other).unwrap().1.vouched(), None);
        // Hashes that do not decode make no line.
        let mut bad = a.clone();
        bad.binding.head = String::new();
        assert_eq!(Vouched::of(&bad), None);
    }

    #[test]
    fn lines_are_keyed_by_the_id_they_name_however_it_is_written() {
        let a = projection("01ABC-x_y");
        // As cairn writes it: the id is read without parsing the line.
        let written = line("01ABC-x_y", &a);
        assert_eq!(leading_id(&written), Some("01ABC-x_y"));
        // Another shape (keys reordered, spaces): the parser finds the id.
        let value: serde_json::Value = serde_json::from_slice(&written).unwrap();
        let reordered = format!(
            "{{ \"binding\": {}, \"turns\": {}, \"cost\": {}, \"id\" : \"01ABC-x_y\" }}",
            value["binding"], value["turns"], value["cost"]
        );
        assert_eq!(leading_id(reordered.as_bytes()), None);
        // An escaped id is no id; one that is not the projection's is refused.
        let escaped = String::from_utf8(written.clone())
            .unwrap()
            .replacen("01ABC", "\\u0030", 1);
        let other = line("01OTHER", &a);
        let mut bytes = Vec::new();
        for l in [
            &written[..],
            reordered.as_bytes(),
            escaped.as_bytes(),
            &other,
        ] {
            bytes.extend_from_slice(l);
            bytes.push(b'\n');
        }
        let keyed: Vec<_> = bytes
            .split(|&b| b == b'\n')
            .filter_map(keyed_line)
            .collect();
        let ids: Vec<&str> = keyed.iter().map(|(id, _)| *id).collect();
        assert_eq!(ids, ["01ABC-x_y", "01ABC-x_y", "01OTHER"]);
        let v = Vouched::of(&a).unwrap();
        assert_eq!(keyed[0].1.vouched(), Some(v.clone()));
        assert_eq!(keyed[1].1.vouched(), Some(v));
        assert_eq!(
            keyed[2].1.vouched().map(|v| v.turns),
            Some(a.summary.turns),
            "a line vouches under the id it names"
        );
        // A line that starts like cairn's but names two ids is not believed
        // under the first.
        let two = String::from_utf8(written).unwrap().replacen(
            "\"binding\"",
            "\"id\":\"01OTHER\",\"binding\"",
            1,
        );
        let keyed: Vec<_> = two
            .split('\n')
            .filter_map(|l| keyed_line(l.as_bytes()))
            .collect();
        assert!(keyed.iter().all(|(_, e)| e.vouched().is_none()));
    }
}
