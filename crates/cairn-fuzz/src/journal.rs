//! The journal: one line into a record, and a whole journal read back.
//!
//! Input: one flags byte, then the journal's bytes. Flag bit 0 re-chains the
//! journal before reading it (every `"prev":"<64 characters>"` is
//! overwritten with the hash the chain needs there), so the fuzzer gets past
//! the chain check to the schema, totals and ends checks; bits 1–7 choose
//! where the journal is cut for the prefix property.
//!
//! Properties:
//! 1. every line: `Record::from_line` agrees with serde's `Record` (both
//!    fail, or both give the same record), and a record it gives serialises
//!    and parses back to itself;
//! 2. `verify_bytes` and `scan_journal_bytes` agree (ok, records, tail, torn
//!    tail); a report never counts a record at or past its first bad seq; its
//!    tail is the chain over exactly the records it counts;
//! 3. a scan that succeeds returns each complete line, in order, as its
//!    record: seq n at line n, a `meta` first and nowhere else, each `prev`
//!    the hash of the line before, no version newer than this build's, and
//!    the torn tail (if any) is exactly the bytes after the last record;
//! 4. the fold of a scan succeeds; its status is the last terminal's reason
//!    when only bookkeeping follows it, else running;
//! 5. cutting a good journal anywhere leaves a good journal holding the
//!    records whose lines are complete (none: the "no meta" damage);
//! 6. read from its ends, a good journal gives the same head, last record,
//!    tail hash and status as the full read; one with a torn tail gives
//!    nothing from its end.

use std::borrow::Cow;
use std::cell::RefCell;
use std::path::Path;

use cairn_journal::{
    fold, read_ends, read_head, read_tail_record, scan_journal_bytes, verify_bytes, ChainHash,
    ForkPin, Record, RecordBody, Scan, Status, MAX_END_BYTES, SCHEMA_VERSION,
};
use serde::Deserialize;

use crate::scratch::Scratch;

/// The run id every fuzzed journal is read as (the seeds' meta names it).
pub const RUN: &str = "01JFUZZRUN0000000000000000";

thread_local! {
    static SCRATCH: RefCell<Option<Scratch>> = const { RefCell::new(None) };
}

/// Checks the journal properties (see the module doc) on `data`.
pub fn journal(data: &[u8]) {
    let Some((&flags, body)) = data.split_first() else {
        return;
    };
    for line in body.split(|&b| b == b'\n') {
        line_round_trip(line);
    }
    let bytes = match flags & 1 {
        1 => Cow::Owned(rechain(body)),
        _ => Cow::Borrowed(body),
    };
    let cut = bytes.len() * usize::from(flags >> 1) / 127;
    read_back(&bytes, cut);
}

/// Property 1.
fn line_round_trip(line: &[u8]) {
    let by_hand = Record::from_line(line);
    let by_serde = serde_json::from_slice::<Record>(line);
    match (&by_hand, &by_serde) {
        (Ok(a), Ok(b)) => assert_eq!(a, b, "from_line and serde read different records"),
        (Err(_), Err(_)) => {}
        (a, b) => panic!(
            "from_line and serde disagree on {:?}: from_line {:?}, serde {:?}",
            String::from_utf8_lossy(line),
            a.as_ref().map(|_| ()),
            b.as_ref().map(|_| ())
        ),
    }
    if let Ok(r) = by_hand {
        let again = serde_json::to_vec(&r)
            .unwrap_or_else(|e| panic!("a record read does not serialise: {e}"));
        match Record::from_line(&again) {
            Ok(back) => assert_eq!(back, r, "a record does not read back as itself"),
            Err(e) => panic!(
                "a record read does not read back ({e}): {}",
                String::from_utf8_lossy(&again)
            ),
        }
    }
}

/// The genesis a first line gives: its fork pin's, or the root run's.
fn genesis_of(first: &[u8]) -> ChainHash {
    #[derive(Deserialize)]
    struct ForkOnly {
        #[serde(default)]
        fork: Option<ForkPin>,
    }
    match serde_json::from_slice::<ForkOnly>(first) {
        Ok(ForkOnly { fork: Some(f) }) => ChainHash::fork_genesis(&f.parent, f.seq, &f.hash),
        _ => ChainHash::genesis(RUN),
    }
}

/// `body` with every line's `prev` (when it has 64 characters) replaced by
/// the chain hash of the line before.
fn rechain(body: &[u8]) -> Vec<u8> {
    const KEY: &[u8] = b"\"prev\":\"";
    let mut out = body.to_vec();
    let mut prev = None;
    let mut pos = 0;
    while let Some(i) = out[pos..].iter().position(|&b| b == b'\n') {
        let end = pos + i;
        let h = *prev.get_or_insert_with(|| genesis_of(&out[pos..end]));
        if let Some(at) = out[pos..end].windows(KEY.len()).position(|w| w == KEY) {
            let start = pos + at + KEY.len();
            if start + 64 <= end {
                out[start..start + 64].copy_from_slice(h.to_hex().as_bytes());
            }
        }
        prev = Some(h.next(&out[pos..end]));
        pos = end + 1;
    }
    out
}

/// The complete lines of `bytes`, each without its newline.
fn lines(bytes: &[u8]) -> impl Iterator<Item = &[u8]> {
    let complete = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    bytes[..complete]
        .split(|&b| b == b'\n')
        .take(bytes[..complete].iter().filter(|&&b| b == b'\n').count())
}

/// The chain hash after the first `n` lines, starting from the first line's
/// stated `prev` (`h(0)` of the run when `n` is 0).
fn chain_over(bytes: &[u8], n: usize) -> ChainHash {
    let mut it = lines(bytes).take(n).peekable();
    let Some(first) = it.peek() else {
        return ChainHash::genesis(RUN);
    };
    let Ok(r) = Record::from_line(first) else {
        panic!("a counted first record does not parse");
    };
    it.fold(r.prev, |h, line| h.next(line))
}

/// Properties 2 to 6.
fn read_back(bytes: &[u8], cut: usize) {
    let report = verify_bytes(bytes, RUN);
    assert_eq!(report.first_bad_seq.is_some(), report.problem.is_some());
    if let Some(bad) = report.first_bad_seq {
        assert!(
            report.records < bad,
            "{} records verified, yet seq {bad} is bad: {:?}",
            report.records,
            report.problem
        );
    }
    let counted = usize::try_from(report.records).unwrap_or(usize::MAX);
    assert_eq!(report.tail, chain_over(bytes, counted), "the report's tail");
    let scan = scan_journal_bytes(Path::new("fuzz.jsonl"), bytes, RUN);
    match &scan {
        Ok(s) => {
            assert!(
                report.ok(),
                "scan succeeds, verify reports {:?}",
                report.problem
            );
            assert_eq!(report.records, s.records.len() as u64);
            assert_eq!(report.tail, s.tail);
            assert_eq!(report.torn_tail, s.torn.is_some());
            let status = check_scan(bytes, s);
            check_prefix(bytes, s, cut);
            check_ends(bytes, Some((s, status)));
        }
        Err(e) => {
            assert!(!report.ok(), "scan fails ({e}), verify reports no problem");
            check_ends(bytes, None);
        }
    }
}

/// Properties 3 and 4; returns the fold's status.
fn check_scan(bytes: &[u8], s: &Scan) -> Status {
    let mut h = None;
    let mut pos = 0usize;
    let mut it = lines(bytes);
    for (i, r) in s.records.iter().enumerate() {
        let Some(line) = it.next() else {
            panic!("record {} has no complete line", i + 1);
        };
        assert_eq!(
            r.seq,
            i as u64 + 1,
            "record {} carries seq {}",
            i + 1,
            r.seq
        );
        assert!(r.v <= SCHEMA_VERSION, "a newer record was returned");
        match Record::from_line(line) {
            Ok(parsed) => assert_eq!(&parsed, r, "record {} is not its line", i + 1),
            Err(e) => panic!(
                "record {} was returned, its line does not parse: {e}",
                i + 1
            ),
        }
        let expected = *h.get_or_insert_with(|| genesis_of(line));
        assert_eq!(r.prev, expected, "record {} is not chained", i + 1);
        match (&r.body, i) {
            (RecordBody::Meta(m), 0) => assert_eq!(m.run, RUN),
            (_, 0) => panic!("the first record returned is not a meta"),
            (RecordBody::Meta(_), _) => panic!("a second meta was returned"),
            _ => {}
        }
        h = Some(expected.next(line));
        pos += line.len() + 1;
    }
    assert!(!s.records.is_empty(), "a good journal without records");
    assert_eq!(h, Some(s.tail), "the scan's tail");
    assert_eq!(s.valid_len, pos as u64, "the valid length");
    match s.torn {
        Some(t) => {
            assert_eq!(
                t.offset, s.valid_len,
                "the torn tail starts after the records"
            );
            assert_eq!(
                t.offset + t.len,
                bytes.len() as u64,
                "the torn tail ends the file"
            );
            assert!(t.len > 0, "an empty torn tail");
        }
        None => assert_eq!(s.valid_len, bytes.len() as u64, "bytes past the records"),
    }
    let state = match fold(&s.records) {
        Ok(state) => state,
        Err(e) => panic!("a good journal does not fold: {e}"),
    };
    assert_eq!(state.records, s.records.len() as u64);
    let status = match s.records.iter().rev().find(|r| !r.body.is_bookkeeping()) {
        Some(Record {
            body: RecordBody::Terminal(t),
            ..
        }) => Status::Ended(t.reason),
        _ => Status::Running,
    };
    assert_eq!(state.status, status, "the fold's status");
    status
}

/// Property 5.
fn check_prefix(bytes: &[u8], s: &Scan, cut: usize) {
    let prefix = &bytes[..cut.min(bytes.len())];
    let complete = prefix.iter().filter(|&&b| b == b'\n').count();
    let k = complete.min(s.records.len());
    match scan_journal_bytes(Path::new("fuzz.jsonl"), prefix, RUN) {
        Ok(p) => {
            assert!(k > 0, "a prefix without a complete meta reads as good");
            assert_eq!(p.records, s.records[..k], "a prefix's records");
            assert_eq!(p.tail, chain_over(bytes, k), "a prefix's tail");
        }
        Err(e) => assert_eq!(k, 0, "a prefix of a good journal is damaged: {e}"),
    }
}

/// Property 6: `good` is the full read and its status, when it succeeded.
fn check_ends(bytes: &[u8], good: Option<(&Scan, Status)>) {
    SCRATCH.with(|cell| {
        let mut cell = cell.borrow_mut();
        let scratch = cell.get_or_insert_with(Scratch::new);
        let path = scratch.file("journal.jsonl");
        if let Err(e) = std::fs::write(&path, bytes) {
            panic!("writing {}: {e}", path.display());
        }
        let tail = read_tail_record(&path).unwrap_or_else(|e| panic!("read_tail_record: {e}"));
        let head = read_head(&path);
        let ends = read_ends(&path, RUN).unwrap_or_else(|e| panic!("read_ends: {e}"));
        let Some((s, status)) = good else {
            return;
        };
        if s.torn.is_some() {
            assert!(tail.is_none(), "a last record read past a torn tail");
            assert!(ends.is_none(), "ends read past a torn tail");
            return;
        }
        if bytes.len() as u64 > MAX_END_BYTES {
            return;
        }
        let (Some(first), Some(last)) = (s.records.first(), s.records.last()) else {
            return;
        };
        let h1 = chain_over(bytes, 1);
        let Some(t) = tail else {
            panic!("a good journal's last record does not read from its end");
        };
        assert_eq!(&t.record, last, "the last record read from the end");
        assert_eq!(t.hash, s.tail, "the tail hash read from the end");
        assert_eq!(t.len, bytes.len() as u64);
        match head {
            Ok(h) => {
                assert_eq!(&h.record, first, "the head");
                assert_eq!(h.hash, h1, "h(1) read from the head");
            }
            Err(e) => panic!("a good journal's head does not read: {e}"),
        }
        let Some(e) = ends else {
            panic!("a good journal's ends do not read");
        };
        assert_eq!(&e.head.record, first, "the ends' head");
        assert_eq!(e.head.hash, h1, "the ends' h(1)");
        assert_eq!(e.tail.hash, s.tail, "the ends' tail hash");
        let from = s
            .records
            .iter()
            .rposition(|r| !r.body.is_bookkeeping())
            .unwrap_or(0);
        assert_eq!(e.tail.records, s.records[from..], "the ends' last records");
        assert_eq!(e.tail.status(), status, "the status read from the ends");
    });
}
