//! Following a journal another process writes: every record once, in
//! order, however the bytes arrive; damage is an error naming its seq, as
//! `cairn verify` names it.

use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cairn_journal::{
    now_rfc3339, read_journal, verify_bytes, Assistant, ChainHash, ForkPin, JournalWriter, Meta,
    Outcome, Record, RecordBody, ToolResult, ToolStart, User,
};
use cairn_journal::{JournalError as FollowError, JournalFollower as Follower};
use cairn_store::{RunId, Store};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

fn meta(fork: Option<ForkPin>) -> Meta {
    Meta {
        run: String::new(),
        created: now_rfc3339(),
        workspace: "/work/ws".into(),
        name: Some("followed".into()),
        fingerprint: None,
        fork,
        routing: None,
        system_file: None,
    }
}

/// Body `i` of a varied run: users (some long, some unicode), assistant
/// turns, tool calls.
fn body(i: usize) -> RecordBody {
    match i % 4 {
        0 => RecordBody::User(User {
            text: if i.is_multiple_of(7) {
                "long line ".repeat(500)
            } else {
                format!("user {i}: \"quoted\", ünïcode 😀")
            },
            origin: None,
        }),
        1 => RecordBody::Assistant(Assistant {
            text: format!("turn {i}"),
            ..Assistant::default()
        }),
        2 => RecordBody::ToolStart(ToolStart {
            call: format!("c{i}"),
            name: "read_file".into(),
            mcp: None,
        }),
        _ => RecordBody::ToolResult(ToolResult {
            call: format!("c{}", i - 1),
            outcome: Outcome::Ok,
            output: format!("output {i}\nsecond line"),
        }),
    }
}

/// A journal of `meta` plus `records` records, written by the real writer;
/// returns its run id, path and bytes.
fn journal(store: &Store, records: usize, fork: Option<ForkPin>) -> (RunId, PathBuf, Vec<u8>) {
    journal_of(store, (0..records).map(body).collect(), fork)
}

fn journal_of(
    store: &Store,
    bodies: Vec<RecordBody>,
    fork: Option<ForkPin>,
) -> (RunId, PathBuf, Vec<u8>) {
    let id = RunId::new();
    let mut w = JournalWriter::create(store, &id, meta(fork)).unwrap();
    for b in &bodies {
        w.append(b).unwrap();
    }
    drop(w);
    let path = store.journal_path(&id);
    let bytes = std::fs::read(&path).unwrap();
    (id, path, bytes)
}

/// The lines of `bytes`, without their newlines.
fn lines(bytes: &[u8]) -> Vec<&[u8]> {
    bytes
        .split(|&b| b == b'\n')
        .take_while(|l| !l.is_empty())
        .collect()
}

/// Polls until an error or until nothing new comes.
fn follow_all(path: &Path, run: &str) -> (Vec<(Record, String)>, Option<FollowError>) {
    let mut f = Follower::open(path, run).unwrap();
    let mut got = Vec::new();
    loop {
        match f.poll() {
            Ok(batch) if batch.is_empty() => return (got, None),
            Ok(batch) => got.extend(batch),
            Err(e) => return (got, Some(e)),
        }
    }
}

fn damaged_seq(e: &FollowError) -> u64 {
    match e {
        FollowError::Damaged { seq, .. } => *seq,
        other => panic!("expected damage, got {other}"),
    }
}

fn append(path: &Path, bytes: &[u8]) {
    OpenOptions::new()
        .append(true)
        .open(path)
        .unwrap()
        .write_all(bytes)
        .unwrap();
}

#[test]
fn a_file_written_in_pieces_by_another_thread_is_followed_to_the_end_with_every_record_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path().join("store")).unwrap();
    let (id, path, bytes) = journal(&store, 300, None);
    let want = read_journal(&path, id.as_str()).unwrap();
    let want_lines: Vec<String> = lines(&bytes)
        .iter()
        .map(|l| String::from_utf8(l.to_vec()).unwrap())
        .collect();
    assert_eq!(want.records.len(), 301);

    for seed in 0..5u64 {
        let target = dir.path().join(format!("followed-{seed}.jsonl"));
        File::create(&target).unwrap();
        let mut follower = Follower::open(&target, id.as_str()).unwrap();
        let writer = {
            let (target, bytes) = (target.clone(), bytes.clone());
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed);
                let mut file = OpenOptions::new().append(true).open(&target).unwrap();
                let mut pos = 0;
                while pos < bytes.len() {
                    // Pieces of any size: lines arrive half-written.
                    let n = rng.random_range(1..400).min(bytes.len() - pos);
                    file.write_all(&bytes[pos..pos + n]).unwrap();
                    pos += n;
                    if rng.random_bool(0.3) {
                        std::thread::sleep(Duration::from_micros(rng.random_range(0..300)));
                    }
                }
            })
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        let mut got = Vec::new();
        let mut polls = 0;
        while got.len() < want.records.len() {
            assert!(
                Instant::now() < deadline,
                "seed {seed}: stalled at {}",
                got.len()
            );
            let batch = follower.poll().unwrap();
            polls += 1;
            if batch.is_empty() {
                std::thread::sleep(Duration::from_micros(100));
            }
            got.extend(batch);
        }
        writer.join().unwrap();
        assert!(follower.poll().unwrap().is_empty());
        assert!(polls > 10, "seed {seed}: the file was followed as it grew");
        let (records, texts): (Vec<Record>, Vec<String>) = got.into_iter().unzip();
        assert_eq!(records, want.records, "seed {seed}");
        assert_eq!(texts, want_lines, "seed {seed}: the exact lines");
        assert_eq!(follower.seq(), 301);
        assert_eq!(follower.tail(), Some(want.tail));
        assert_eq!(follower.offset(), bytes.len() as u64);
    }
}

#[test]
fn a_half_written_line_waits_for_its_newline() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (id, _, bytes) = journal(&store, 20, None);
    let ends: Vec<usize> = bytes
        .iter()
        .enumerate()
        .filter(|(_, &b)| b == b'\n')
        .map(|(i, _)| i + 1)
        .collect();
    let target = dir.path().join("j.jsonl");
    let cut = ends[9] + (ends[10] - ends[9]) / 2; // inside line 11
    std::fs::write(&target, &bytes[..cut]).unwrap();
    let mut f = Follower::open(&target, id.as_str()).unwrap();
    let first = f.poll().unwrap();
    assert_eq!(first.len(), 10);
    assert_eq!(f.offset(), ends[9] as u64);
    // Up to the byte before the newline: still waiting.
    append(&target, &bytes[cut..ends[10] - 1]);
    assert!(f.poll().unwrap().is_empty());
    append(&target, &bytes[ends[10] - 1..]);
    let rest = f.poll().unwrap();
    assert_eq!(rest.len(), 11);
    assert_eq!(rest[0].0.seq, 11);
    assert!(f.poll().unwrap().is_empty());
}

#[test]
fn a_modified_earlier_byte_is_an_error_naming_its_seq() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let bodies: Vec<RecordBody> = (0..30)
        .map(|i| {
            RecordBody::User(User {
                text: format!("message number {i}"),
                origin: None,
            })
        })
        .collect();
    let (id, _, bytes) = journal_of(&store, bodies, None);
    let ends: Vec<usize> = std::iter::once(0)
        .chain(
            bytes
                .iter()
                .enumerate()
                .filter(|(_, &b)| b == b'\n')
                .map(|(i, _)| i + 1),
        )
        .collect();
    // Line k occupies ends[k-1]..ends[k].
    let line_at = |k: usize| ends[k - 1]..ends[k];
    let target = dir.path().join("damaged.jsonl");

    // A changed letter of the text: the line parses, its own `prev` holds,
    // the next line's `prev` no longer matches it.
    for k in [2usize, 5, 17, 29] {
        let mut damaged = bytes.clone();
        let r = line_at(k);
        let at = r.start + find(&damaged[r.clone()], b"message").expect("the text is in the line");
        damaged[at] = b'M';
        std::fs::write(&target, &damaged).unwrap();
        let (got, err) = follow_all(&target, id.as_str());
        let err = err.expect("damage is an error");
        assert_eq!(damaged_seq(&err), k as u64, "text changed in line {k}");
        assert_eq!(
            verify_bytes(&damaged, id.as_str()).first_bad_seq,
            Some(k as u64)
        );
        assert!(
            err.to_string().contains(&format!("damaged at seq {k}")),
            "{err}"
        );
        // The records before it were returned (the changed one too: only the
        // line after it could show the change).
        assert_eq!(got.len(), k);
    }

    // A changed `prev`: the line does not continue the chain.
    for k in [3usize, 12] {
        let mut damaged = bytes.clone();
        let r = line_at(k);
        let at = r.start + find(&damaged[r.clone()], b"\"prev\":\"").unwrap() + 8;
        damaged[at] = if damaged[at] == b'0' { b'1' } else { b'0' };
        std::fs::write(&target, &damaged).unwrap();
        let (got, err) = follow_all(&target, id.as_str());
        assert_eq!(
            damaged_seq(&err.unwrap()),
            k as u64,
            "prev changed in line {k}"
        );
        assert_eq!(
            verify_bytes(&damaged, id.as_str()).first_bad_seq,
            Some(k as u64)
        );
        assert_eq!(got.len(), k - 1);
    }

    // A line that is no longer JSON, with good lines after it.
    let mut damaged = bytes.clone();
    damaged[line_at(8).start] = b'x';
    std::fs::write(&target, &damaged).unwrap();
    let (got, err) = follow_all(&target, id.as_str());
    assert_eq!(damaged_seq(&err.unwrap()), 8);
    assert_eq!(got.len(), 7);

    // A follower that reported damage keeps reporting it.
    let mut f = Follower::open(&target, id.as_str()).unwrap();
    assert_eq!(f.poll().unwrap().len(), 7);
    for _ in 0..3 {
        assert_eq!(damaged_seq(&f.poll().unwrap_err()), 8);
    }
}

#[test]
fn a_newer_schema_is_refused_at_its_seq() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (id, _, bytes) = journal(&store, 6, None);
    // The last line, so the chain still holds up to it.
    let text = String::from_utf8(bytes).unwrap();
    let last_start = text[..text.len() - 1].rfind('\n').unwrap() + 1;
    let newer = format!(
        "{}{}",
        &text[..last_start],
        text[last_start..].replacen("{\"v\":1,", "{\"v\":99,", 1)
    );
    assert_ne!(newer, text);
    let target = dir.path().join("newer.jsonl");
    std::fs::write(&target, newer).unwrap();
    let (got, err) = follow_all(&target, id.as_str());
    assert_eq!(got.len(), 6);
    match err {
        Some(FollowError::NewerSchema {
            seq: 7, found: 99, ..
        }) => {}
        other => panic!("expected a newer schema at seq 7, got {other:?}"),
    }
}

#[test]
fn a_fork_is_followed_from_its_own_genesis() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (parent, _, parent_bytes) = journal(&store, 5, None);
    let mut at = ChainHash::genesis(parent.as_str());
    for line in &lines(&parent_bytes)[..3] {
        at = at.next(line);
    }
    let pin = ForkPin {
        parent: parent.to_string(),
        seq: 3,
        hash: at,
    };
    let (child, path, bytes) = journal(&store, 8, Some(pin));
    let want = read_journal(&path, child.as_str()).unwrap();
    let (got, err) = follow_all(&path, child.as_str());
    assert!(err.is_none(), "{err:?}");
    let records: Vec<Record> = got.into_iter().map(|(r, _)| r).collect();
    assert_eq!(records, want.records);
    assert_eq!(
        records[0].prev,
        ChainHash::fork_genesis(parent.as_str(), 3, &at)
    );

    // The fork's meta names its own run.
    let (got, err) = follow_all(&path, parent.as_str());
    assert!(got.is_empty());
    match err {
        Some(FollowError::WrongRun {
            expected, found, ..
        }) => {
            assert_eq!(expected, parent.as_str());
            assert_eq!(found, child.as_str());
        }
        other => panic!("expected the wrong run, got {other:?}"),
    }

    // A pin changed by hand no longer gives the genesis line 1 was chained to.
    let text = String::from_utf8(bytes).unwrap();
    let moved = text.replacen("\"seq\":3,\"hash\"", "\"seq\":4,\"hash\"", 1);
    assert_ne!(moved, text);
    let target = dir.path().join("moved-pin.jsonl");
    std::fs::write(&target, &moved).unwrap();
    let (got, err) = follow_all(&target, child.as_str());
    assert!(got.is_empty());
    assert_eq!(damaged_seq(&err.unwrap()), 1);
    assert_eq!(
        verify_bytes(moved.as_bytes(), child.as_str()).first_bad_seq,
        Some(1)
    );
}

#[test]
fn a_torn_tail_cut_by_the_next_writer_is_read_again() {
    let dir = tempfile::tempdir().unwrap();
    let store = Store::open(dir.path()).unwrap();
    let (id, _, bytes) = journal(&store, 20, None);
    let ends: Vec<usize> = bytes
        .iter()
        .enumerate()
        .filter(|(_, &b)| b == b'\n')
        .map(|(i, _)| i + 1)
        .collect();
    let valid = ends[9];
    let target = dir.path().join("torn.jsonl");
    // A writer died mid-line ...
    let mut torn = bytes[..valid].to_vec();
    torn.extend_from_slice(b"{\"v\":1,\"seq\":11,\"prev\":\"00");
    std::fs::write(&target, &torn).unwrap();
    let mut f = Follower::open(&target, id.as_str()).unwrap();
    assert_eq!(f.poll().unwrap().len(), 10);
    assert!(f.poll().unwrap().is_empty());
    // ... the next one cut the torn tail and appended.
    OpenOptions::new()
        .write(true)
        .open(&target)
        .unwrap()
        .set_len(valid as u64)
        .unwrap();
    append(&target, &bytes[valid..]);
    let rest = f.poll().unwrap();
    assert_eq!(rest.len(), 11);
    assert_eq!(rest[0].0.seq, 11);
    assert_eq!(f.offset(), bytes.len() as u64);

    // A file cut below what was followed is an error.
    OpenOptions::new()
        .write(true)
        .open(&target)
        .unwrap()
        .set_len(valid as u64)
        .unwrap();
    assert!(matches!(f.poll(), Err(FollowError::Shrank { .. })));
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}
