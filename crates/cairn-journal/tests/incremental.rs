//! The incremental reader agrees with the one-shot reader about every byte:
//! for journals written by the real writer, then damaged, re-chained,
//! cut, padded with zeros, and split into pieces anywhere, what the
//! incremental reader yields and reports after each piece is what
//! `verify_bytes` and `scan_journal_bytes` say of the bytes so far; and a
//! report it calls settled never changes again.

mod common;

use std::path::Path;
use std::sync::OnceLock;

use cairn_journal::*;
use cairn_store::{RunId, Store};
use proptest::prelude::*;

/// A journal written by the real writer: its run and bytes.
struct Base {
    run: String,
    bytes: Vec<u8>,
}

fn complete_lines(bytes: &[u8]) -> Vec<&[u8]> {
    let end = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    let mut lines: Vec<&[u8]> = bytes[..end].split(|&b| b == b'\n').collect();
    lines.pop(); // after the last newline
    lines
}

/// Writes `bodies` after a meta (with `fork`), each terminal given the
/// fold's totals (plus `inherited`).
fn write(store: &Store, fork: Option<ForkPin>, inherited: Totals, bodies: Vec<RecordBody>) -> Base {
    let id = RunId::new();
    let mut meta = common::meta("/work/ws");
    meta.fork = fork;
    let mut w = JournalWriter::create(store, &id, meta).unwrap();
    let path = store.journal_path(&id);
    for mut b in bodies {
        if let RecordBody::Terminal(t) = &mut b {
            let records = read_journal(&path, id.as_str()).unwrap().records;
            let mut totals = fold(&records).unwrap().totals;
            totals.turns += inherited.turns;
            totals.input_tokens += inherited.input_tokens;
            totals.output_tokens += inherited.output_tokens;
            totals.tool_calls += inherited.tool_calls;
            t.totals = totals;
        }
        w.append(&b).unwrap();
    }
    drop(w);
    let bytes = std::fs::read(&path).unwrap();
    Base {
        run: id.to_string(),
        bytes,
    }
}

fn terminal(reason: TerminalReason) -> RecordBody {
    RecordBody::Terminal(Terminal {
        reason,
        totals: Totals::default(),
        detail: None,
    })
}

fn turn_bodies(n: usize) -> Vec<RecordBody> {
    let mut out = Vec::new();
    for i in 0..n {
        out.push(common::user(&format!(
            "message {i}: \"quoted\", ünïcode 😀"
        )));
        let cost = match i % 3 {
            0 => Cost::known(0.25),
            1 => Cost::ZERO,
            _ => Cost::known(1.5),
        };
        let call = format!("c{i}");
        out.push(common::assistant(
            "reading",
            &[(call.as_str(), "read_file")],
            cost,
        ));
        out.push(RecordBody::ToolStart(ToolStart {
            call: call.clone(),
            name: "read_file".into(),
            mcp: None,
        }));
        out.push(RecordBody::ToolResult(ToolResult {
            call,
            outcome: Outcome::Ok,
            output: if i % 4 == 3 {
                "a long output line ".repeat(200)
            } else {
                "line1\nline2".into()
            },
        }));
        if i % 2 == 1 {
            out.push(terminal(TerminalReason::Suspended));
        }
    }
    out.push(common::assistant("done", &[], Cost::ZERO));
    out.push(terminal(TerminalReason::Completed));
    out
}

/// The journals every case starts from: a root run, a fork of it (its own
/// genesis, the fork's totals rule), and a longer run with long lines; and
/// a fork of thousands of lines, for the read-ahead (not in `case`: pushing
/// it a byte at a time would take minutes).
fn bases() -> &'static [Base] {
    static BASES: OnceLock<Vec<Base>> = OnceLock::new();
    BASES.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let store = Store::open(dir.path()).unwrap();
        let root = write(&store, None, Totals::default(), turn_bodies(2));
        let lines = complete_lines(&root.bytes);
        let mut at = ChainHash::genesis(&root.run);
        for line in &lines[..4] {
            at = at.next(line);
        }
        let pin = ForkPin {
            parent: root.run.clone(),
            seq: 4,
            hash: at,
        };
        // The fork's first terminal holds what it inherited (one turn).
        let inherited = Totals {
            turns: 1,
            input_tokens: 10,
            output_tokens: 5,
            cost: Cost::known(0.25),
            tool_calls: 1,
            tool_calls_unstated: false,
        };
        let mut fork_bodies = vec![terminal(TerminalReason::Suspended)];
        fork_bodies.extend(turn_bodies(1));
        let fork = write(&store, Some(pin.clone()), inherited, fork_bodies.clone());
        let long = write(&store, None, Totals::default(), turn_bodies(8));
        // Large enough to be read ahead on every core (`big_journal_*`): a
        // fork, so the guess of its chain's start is tested too.
        let mut big_bodies = fork_bodies;
        big_bodies.extend(turn_bodies(600));
        let big = write(&store, Some(pin), inherited, big_bodies);
        vec![root, fork, long, big]
    })
}

/// Every line's 64-character `prev` overwritten with the hash the chain
/// needs there, so problems past the chain (schema, totals) are reached.
fn rechain(bytes: &mut [u8], run: &str) {
    const KEY: &[u8] = b"\"prev\":\"";
    let mut prev: Option<ChainHash> = None;
    let mut pos = 0;
    while let Some(i) = bytes[pos..].iter().position(|&b| b == b'\n') {
        let end = pos + i;
        let h = *prev.get_or_insert_with(|| {
            match serde_json::from_slice::<serde_json::Value>(&bytes[pos..end])
                .ok()
                .and_then(|v| serde_json::from_value::<ForkPin>(v["fork"].clone()).ok())
            {
                Some(f) => ChainHash::fork_genesis(&f.parent, f.seq, &f.hash),
                None => ChainHash::genesis(run),
            }
        });
        if let Some(at) = bytes[pos..end].windows(KEY.len()).position(|w| w == KEY) {
            let start = pos + at + KEY.len();
            if start + 64 <= end {
                bytes[start..start + 64].copy_from_slice(h.to_hex().as_bytes());
            }
        }
        prev = Some(h.next(&bytes[pos..end]));
        pos = end + 1;
    }
}

/// A change to a journal's bytes; offsets and line numbers are fractions
/// of what there is (out of 65,536).
#[derive(Clone, Debug)]
enum Damage {
    /// One byte set to a value.
    Byte(u16, u8),
    /// Bytes inserted.
    Insert(u16, Vec<u8>),
    /// A line dropped.
    DropLine(u16),
    /// A line's `"v":` set to 99 (a newer schema).
    Newer(u16),
    /// A line's first `"text":` made a number (a body not of its kind).
    Schema(u16),
    /// A line's first `"turns":` given a leading digit (totals off).
    Totals(u16),
}

fn frac(f: u16, n: usize) -> usize {
    n * usize::from(f) / 65536
}

fn replace_in_line(bytes: &mut Vec<u8>, line: u16, from: &[u8], to: &[u8]) {
    let lines = complete_lines(bytes).len();
    if lines == 0 {
        return;
    }
    let k = frac(line, lines);
    let start = complete_lines(bytes)[..k]
        .iter()
        .map(|l| l.len() + 1)
        .sum::<usize>();
    let len = complete_lines(bytes)[k].len();
    if let Some(at) = bytes[start..start + len]
        .windows(from.len())
        .position(|w| w == from)
    {
        let at = start + at;
        bytes.splice(at..at + from.len(), to.iter().copied());
    }
}

fn apply(bytes: &mut Vec<u8>, d: &Damage) {
    match d {
        Damage::Byte(at, b) => {
            if !bytes.is_empty() {
                let i = frac(*at, bytes.len());
                bytes[i] = *b;
            }
        }
        Damage::Insert(at, ins) => {
            let i = frac(*at, bytes.len() + 1);
            bytes.splice(i..i, ins.iter().copied());
        }
        Damage::DropLine(line) => {
            let lines = complete_lines(bytes);
            if !lines.is_empty() {
                let k = frac(*line, lines.len());
                let start: usize = lines[..k].iter().map(|l| l.len() + 1).sum();
                let len = lines[k].len() + 1;
                bytes.drain(start..start + len);
            }
        }
        Damage::Newer(line) => replace_in_line(bytes, *line, b"{\"v\":", b"{\"v\":99,\"w\":"),
        Damage::Schema(line) => replace_in_line(bytes, *line, b"\"text\":", b"\"text\":7,\"t\":"),
        Damage::Totals(line) => replace_in_line(bytes, *line, b"\"turns\":", b"\"turns\":1"),
    }
}

fn damage() -> impl Strategy<Value = Damage> {
    prop_oneof![
        3 => (any::<u16>(), any::<u8>()).prop_map(|(a, b)| Damage::Byte(a, b)),
        1 => (any::<u16>(), any::<u8>()).prop_map(|(a, b)| Damage::Byte(a, if b % 2 == 0 { b'\n' } else { 0 })),
        2 => (
            any::<u16>(),
            prop_oneof![
                Just(b"garbage\n".to_vec()),
                Just(b"{not json}\n".to_vec()),
                Just(b"{\"v\":1,\"seq\":3,\"prev\":\"00\",\"kind\":\"user\"}\n".to_vec()),
                Just(vec![0u8; 7]),
                prop::collection::vec(any::<u8>(), 1..12),
            ]
        )
            .prop_map(|(a, b)| Damage::Insert(a, b)),
        1 => any::<u16>().prop_map(Damage::DropLine),
        1 => any::<u16>().prop_map(Damage::Newer),
        1 => any::<u16>().prop_map(Damage::Schema),
        1 => any::<u16>().prop_map(Damage::Totals),
    ]
}

/// One case: a base journal, damage, re-chained or not, then cut and
/// padded with zeros as a crash or a running writer leaves it.
#[derive(Clone, Debug)]
struct Case {
    base: usize,
    damage: Vec<Damage>,
    rechain: bool,
    cut: Option<u16>,
    zeros: usize,
    /// Where the bytes are split into pushes.
    splits: Vec<u16>,
    /// Pushed a byte at a time instead.
    bytewise: bool,
}

fn case() -> impl Strategy<Value = Case> {
    (
        0..3usize,
        prop::collection::vec(damage(), 0..3),
        any::<bool>(),
        prop::option::weighted(0.4, any::<u16>()),
        prop_oneof![3 => Just(0usize), 1 => 1..300usize],
        prop::collection::vec(any::<u16>(), 0..12),
        prop::bool::weighted(0.1),
    )
        .prop_map(
            |(base, damage, rechain, cut, zeros, splits, bytewise)| Case {
                base,
                damage,
                rechain,
                cut,
                zeros,
                splits,
                bytewise,
            },
        )
}

fn bytes_of(c: &Case) -> (String, Vec<u8>) {
    let base = &bases()[c.base];
    let mut bytes = base.bytes.clone();
    for d in &c.damage {
        apply(&mut bytes, d);
    }
    if c.rechain {
        rechain(&mut bytes, &base.run);
    }
    if let Some(cut) = c.cut {
        bytes.truncate(frac(cut, bytes.len() + 1));
    }
    bytes.extend(std::iter::repeat_n(0u8, c.zeros));
    (base.run.clone(), bytes)
}

fn pieces(c: &Case, len: usize) -> Vec<std::ops::Range<usize>> {
    let mut cuts: Vec<usize> = if c.bytewise {
        (0..=len).collect()
    } else {
        let mut v: Vec<usize> = c.splits.iter().map(|&f| frac(f, len + 1)).collect();
        v.push(0);
        v.push(len);
        v
    };
    cuts.sort_unstable();
    cuts.dedup();
    cuts.windows(2).map(|w| w[0]..w[1]).collect()
}

/// What the one-shot reader says of `bytes` that the incremental reader
/// must say too, after any pushes of them: the report, and the records
/// before the problem (the scan's, or each complete line's, in order).
fn check_against_one_shot(
    run: &str,
    bytes: &[u8],
    reader: &IncrementalReader,
    yielded: &[(Record, String)],
) -> Result<(), TestCaseError> {
    let want = verify_bytes(bytes, run);
    let got = reader.report();
    prop_assert_eq!(&got, &want, "the report after {} bytes", bytes.len());
    let n = usize::try_from(want.records).unwrap();
    prop_assert!(yielded.len() >= n, "fewer records yielded than verify");
    if yielded.len() > n {
        // Past what verifies, only the records from the first bad seq on.
        prop_assert_eq!(want.first_bad_seq, Some(want.records + 1));
    }
    match scan_journal_bytes(Path::new("j"), bytes, run) {
        Ok(scan) => {
            prop_assert_eq!(yielded.len(), scan.records.len());
            let records: Vec<&Record> = yielded.iter().map(|(r, _)| r).collect();
            let scanned: Vec<&Record> = scan.records.iter().collect();
            prop_assert_eq!(records, scanned);
            prop_assert_eq!(scan.tail, want.tail);
        }
        Err(_) => prop_assert!(!want.ok()),
    }
    // Every record yielded is its line, in order, with the exact text.
    let lines = complete_lines(bytes);
    let mut h: Option<ChainHash> = None;
    let mut end = 0u64;
    for (i, (r, text)) in yielded.iter().enumerate() {
        prop_assert_eq!(text.as_bytes(), lines[i], "line {}", i + 1);
        prop_assert_eq!(r, &Record::from_line(lines[i]).unwrap());
        prop_assert_eq!(r.seq, i as u64 + 1);
        h = Some(h.unwrap_or(r.prev).next(lines[i]));
        end += lines[i].len() as u64 + 1;
    }
    prop_assert_eq!(reader.seq(), yielded.len() as u64);
    prop_assert_eq!(reader.tail(), h);
    prop_assert_eq!(reader.offset(), end);
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, .. ProptestConfig::default() })]

    #[test]
    fn any_split_of_any_journal_reads_as_the_one_shot_reader_reads_it(c in case()) {
        let (run, bytes) = bytes_of(&c);
        let mut reader = IncrementalReader::new(&run);
        let mut yielded = Vec::new();
        let mut settled: Option<VerifyReport> = None;
        for piece in pieces(&c, bytes.len()) {
            let new = reader.push(&bytes[piece.clone()]);
            if settled.is_some() {
                prop_assert!(new.is_empty(), "records yielded after the report settled");
            }
            yielded.extend(new);
            check_against_one_shot(&run, &bytes[..piece.end], &reader, &yielded)?;
            if let Some(s) = &settled {
                prop_assert_eq!(&reader.report(), s, "a settled report changed");
            }
            if reader.settled() && settled.is_none() {
                settled = Some(reader.report());
            }
        }
        // Nothing pushed at all, or only empty pieces: the empty journal.
        if bytes.is_empty() {
            check_against_one_shot(&run, &bytes, &reader, &yielded)?;
        }
    }
}

/// The big journal's bytes, damaged as `case` damages the others.
fn big_bytes(damage: &[Damage], rechain_it: bool, cut: Option<u16>) -> (String, Vec<u8>) {
    let base = &bases()[3];
    let mut bytes = base.bytes.clone();
    for d in damage {
        apply(&mut bytes, d);
    }
    if rechain_it {
        rechain(&mut bytes, &base.run);
    }
    if let Some(cut) = cut {
        bytes.truncate(frac(cut, bytes.len() + 1));
    }
    (base.run.clone(), bytes)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, .. ProptestConfig::default() })]

    /// The one-shot reader reads a journal this large ahead — parsed on
    /// every core, its chain hashed on another — while pushes of 16 KiB
    /// are read line by line: both must say the same, damage and all.
    #[test]
    fn a_big_journal_read_ahead_reads_as_it_reads_line_by_line(
        damage in prop::collection::vec(damage(), 0..3),
        rechain_it in any::<bool>(),
        cut in prop::option::weighted(0.3, any::<u16>()),
    ) {
        let (run, bytes) = big_bytes(&damage, rechain_it, cut);
        let lines = complete_lines(&bytes).len();
        prop_assume!(bytes.len() >= 128 * 1024 && lines >= 2048);
        let mut reader = IncrementalReader::new(&run);
        let mut yielded = Vec::new();
        for piece in bytes.chunks(16 << 10) {
            yielded.extend(reader.push(piece));
        }
        check_against_one_shot(&run, &bytes, &reader, &yielded)?;
    }
}

#[test]
fn the_big_journal_is_read_ahead_and_verifies() {
    let (run, bytes) = big_bytes(&[], false, None);
    assert!(bytes.len() >= 128 * 1024 && complete_lines(&bytes).len() >= 2048);
    let report = verify_bytes(&bytes, &run);
    assert!(report.ok(), "{report:?}");
    assert_eq!(report.records, complete_lines(&bytes).len() as u64);
    // Verifying and keeping some records: those, whole but for their
    // texts, and the same report.
    let scan = scan_journal_bytes(Path::new("j"), &bytes, &run).unwrap();
    let (again, kept) = verify_keeping(&bytes, &run, |r| {
        matches!(r.body, RecordBody::ToolStart(_) | RecordBody::Terminal(_))
    });
    assert_eq!(again, report);
    let want: Vec<&Record> = scan
        .records
        .iter()
        .filter(|r| matches!(r.body, RecordBody::ToolStart(_) | RecordBody::Terminal(_)))
        .collect();
    assert_eq!(kept.iter().collect::<Vec<_>>(), want);
    // Cut inside the last line: what verifies is kept, nothing after.
    let cut = &bytes[..bytes.len() - 10];
    let (torn, kept) = verify_keeping(cut, &run, |_| true);
    assert!(torn.ok() && torn.torn_tail, "{torn:?}");
    assert_eq!(kept.len() as u64, torn.records);
    assert_eq!(kept.last().map(|r| r.seq), Some(torn.records));
}
