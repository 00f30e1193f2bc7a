//! The open format: journals written by hand verify, the crate's output
//! verifies with an independent checker, and damage is named by seq.

mod common;

use cairn_journal::*;
use sha2::{Digest, Sha256};

/// An independent checker, in the spirit of "twenty lines of any language":
/// it knows only the chain spec, not the crate.
fn independent_check(bytes: &[u8], run: &str) -> Result<usize, usize> {
    let text = std::str::from_utf8(bytes).map_err(|_| 0usize)?;
    let mut h: [u8; 32] = Sha256::digest(format!("cairn/genesis\n{run}")).into();
    let mut n = 0;
    for line in text.split_terminator('\n') {
        n += 1;
        let v: serde_json::Value = serde_json::from_str(line).map_err(|_| n)?;
        let prev_ok = v["prev"].as_str() == Some(hex::encode(h).as_str());
        if !prev_ok || v["seq"].as_u64() != Some(n as u64) {
            return Err(n);
        }
        let mut s = Sha256::new();
        s.update(h);
        s.update(line.as_bytes());
        h = s.finalize().into();
    }
    Ok(n)
}

#[test]
fn crate_output_verifies_with_an_independent_checker() {
    let d = tempfile::tempdir().unwrap();
    let (_store, id, path) = common::sample(d.path());
    let bytes = std::fs::read(&path).unwrap();
    assert_eq!(independent_check(&bytes, id.as_str()), Ok(7));
    let report = verify_journal(&path, id.as_str()).unwrap();
    assert!(report.ok());
    assert_eq!(report.records, 7);
    // The tail the crate reports is the one the checker computes.
    let last = std::str::from_utf8(&bytes).unwrap().lines().last().unwrap();
    let v: serde_json::Value = serde_json::from_str(last).unwrap();
    let mut s = Sha256::new();
    s.update(hex::decode(v["prev"].as_str().unwrap()).unwrap());
    s.update(last.as_bytes());
    assert_eq!(report.tail.to_hex(), hex::encode(s.finalize()));
}

#[test]
fn a_journal_written_by_hand_verifies_and_folds() {
    let run = "handmade-run";
    let bodies = [
        r#"{"kind":"meta","run":"handmade-run","created":"2026-01-01T00:00:00Z","workspace":"/w","name":null,"fingerprint":null,"fork":null,"extra":"ignored"}"#,
        r#"{"kind":"user","text":"hi"}"#,
        r#"{"kind":"assistant","text":"hello","tool_calls":[],"usage":{"input_tokens":3,"output_tokens":2},"cost":{"state":"known","usd":0.5}}"#,
        r#"{"kind":"terminal","reason":"completed","totals":{"turns":1,"input_tokens":3,"output_tokens":2,"cost":{"state":"known","usd":0.5}}}"#,
    ];
    let mut h: [u8; 32] = Sha256::digest(format!("cairn/genesis\n{run}")).into();
    let mut out = String::new();
    for (i, body) in bodies.iter().enumerate() {
        // Field order differs from the crate's on purpose.
        let line = format!(
            r#"{{"ts":"2026-01-01T00:00:0{i}Z","seq":{},"v":1,"prev":"{}",{}"#,
            i + 1,
            hex::encode(h),
            &body[1..]
        );
        let mut s = Sha256::new();
        s.update(h);
        s.update(line.as_bytes());
        h = s.finalize().into();
        out.push_str(&line);
        out.push('\n');
    }
    let report = verify_bytes(out.as_bytes(), run);
    assert!(report.ok(), "{report:?}");
    assert_eq!(report.records, 4);
    assert_eq!(report.tail.0, h);
    let scan = scan_journal_bytes(std::path::Path::new("x"), out.as_bytes(), run).unwrap();
    let state = fold(&scan.records).unwrap();
    assert_eq!(state.totals.turns, 1);
    assert_eq!(state.totals.cost, Cost::known(0.5));
    assert_eq!(state.status, Status::Ended(TerminalReason::Completed));
}

#[test]
fn truncation_at_every_offset_yields_a_prefix_or_a_torn_tail_never_a_wrong_record() {
    let d = tempfile::tempdir().unwrap();
    let (_store, id, path) = common::sample(d.path());
    let full = std::fs::read(&path).unwrap();
    let all = scan_journal_bytes(&path, &full, id.as_str())
        .unwrap()
        .records;
    let line_ends: Vec<usize> = full
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .map(|(i, _)| i + 1)
        .collect();
    for cut in 0..=full.len() {
        let bytes = &full[..cut];
        match scan_journal_bytes(&path, bytes, id.as_str()) {
            Ok(scan) => {
                let complete = line_ends.iter().filter(|&&e| e <= cut).count();
                assert_eq!(scan.records.len(), complete, "cut at {cut}");
                assert_eq!(scan.records[..], all[..complete], "cut at {cut}");
                assert_eq!(
                    scan.torn.is_some(),
                    !line_ends.contains(&cut),
                    "cut at {cut}"
                );
                assert_eq!(
                    scan.valid_len as usize,
                    if complete == 0 {
                        0
                    } else {
                        line_ends[complete - 1]
                    }
                );
            }
            Err(JournalError::Damaged { seq: 1, .. }) => {
                // Only when not even the meta line is complete.
                assert!(cut < line_ends[0], "cut at {cut}");
            }
            Err(e) => panic!("cut at {cut}: {e}"),
        }
    }
}

#[test]
fn every_single_byte_change_before_the_last_record_is_detected_with_its_seq() {
    let d = tempfile::tempdir().unwrap();
    let (_store, id, path) = common::sample(d.path());
    let full = std::fs::read(&path).unwrap();
    let line_ends: Vec<usize> = full
        .iter()
        .enumerate()
        .filter(|(_, b)| **b == b'\n')
        .map(|(i, _)| i + 1)
        .collect();
    let last_start = line_ends[line_ends.len() - 2];
    let mut checked = 0;
    for at in 0..last_start {
        let seq = line_ends.iter().filter(|&&e| e <= at).count() as u64 + 1;
        for replacement in [b'0', b'x', b'"', b'\n', b'{', 0u8, 0xff] {
            if full[at] == replacement {
                continue;
            }
            let mut bytes = full.clone();
            bytes[at] = replacement;
            let report = verify_bytes(&bytes, id.as_str());
            assert!(!report.ok(), "byte {at} -> {replacement:#x} not detected");
            assert_eq!(
                report.first_bad_seq,
                Some(seq),
                "byte {at} -> {replacement:#x}: {:?}",
                report.problem
            );
            assert!(
                scan_journal_bytes(&path, &bytes, id.as_str()).is_err(),
                "reader accepted byte {at} -> {replacement:#x}"
            );
            checked += 1;
        }
    }
    assert!(checked > 1000);
}

#[test]
fn an_invalid_line_followed_by_valid_ones_is_damage_not_a_torn_tail() {
    let d = tempfile::tempdir().unwrap();
    let (_store, id, path) = common::sample(d.path());
    let mut text = std::fs::read_to_string(&path).unwrap();
    let second_nl = text.match_indices('\n').nth(1).unwrap().0;
    text.insert_str(second_nl + 1, "garbage\n");
    let err = scan_journal_bytes(&path, text.as_bytes(), id.as_str()).unwrap_err();
    assert!(matches!(err, JournalError::Damaged { seq: 3, .. }), "{err}");
}

#[test]
fn nul_and_garbage_tails_are_torn_not_damage() {
    let d = tempfile::tempdir().unwrap();
    let (_store, id, path) = common::sample(d.path());
    let full = std::fs::read(&path).unwrap();
    for tail in [
        &[0u8; 4096][..],
        b"\x00\x00{\"v\":1,\"se",
        b"}}}\n\x00garbage\n\n",
        b"\n",
    ] {
        let mut bytes = full.clone();
        bytes.extend_from_slice(tail);
        let scan = scan_journal_bytes(&path, &bytes, id.as_str()).unwrap();
        assert_eq!(scan.records.len(), 7);
        assert_eq!(scan.torn.unwrap().offset as usize, full.len());
    }
}

#[test]
fn a_newer_schema_is_refused_with_a_clear_message() {
    let run = "r";
    let genesis: [u8; 32] = Sha256::digest(format!("cairn/genesis\n{run}")).into();
    let line = format!(
        r#"{{"v":{},"seq":1,"prev":"{}","ts":"t","kind":"meta","run":"r","created":"c","workspace":"/w"}}"#,
        SCHEMA_VERSION + 1,
        hex::encode(genesis)
    );
    let bytes = format!("{line}\n");
    let err = scan_journal_bytes(std::path::Path::new("j"), bytes.as_bytes(), run).unwrap_err();
    assert!(
        matches!(
            err,
            JournalError::NewerSchema { found, supported, .. }
                if found == SCHEMA_VERSION + 1 && supported == SCHEMA_VERSION
        ),
        "{err}"
    );
    assert!(err.to_string().contains("upgrade cairn"));
}

#[test]
fn a_journal_under_the_wrong_id_is_refused() {
    let d = tempfile::tempdir().unwrap();
    let (_store, _id, path) = common::sample(d.path());
    let err = read_journal(&path, "someone-else").unwrap_err();
    assert!(err.is_integrity(), "{err}");
}

#[test]
fn tail_and_head_are_read_from_the_ends() {
    let d = tempfile::tempdir().unwrap();
    let (_store, id, path) = common::sample(d.path());
    let tail = read_tail_record(&path).unwrap().unwrap();
    assert_eq!(tail.record.seq, 7);
    assert_eq!(tail.hash, verify_journal(&path, id.as_str()).unwrap().tail);
    let head = read_head_record(&path).unwrap();
    assert!(matches!(head.body, RecordBody::Meta(_)));
    // A torn tail makes the quick path decline.
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    std::io::Write::write_all(&mut f, b"{\"v\":1").unwrap();
    assert!(read_tail_record(&path).unwrap().is_none());
}

#[test]
fn from_line_agrees_with_serde_on_every_kind() {
    let d = tempfile::tempdir().unwrap();
    let (_store, _id, path) = common::sample(d.path());
    let text = std::fs::read_to_string(&path).unwrap();
    for line in text.lines() {
        let a = Record::from_line(line.as_bytes()).unwrap();
        let b: Record = serde_json::from_str(line).unwrap();
        assert_eq!(a, b);
    }
    assert!(Record::from_line(br#"{"v":1,"seq":1,"prev":"00","ts":"t","kind":"nope"}"#).is_err());
}

#[test]
fn each_record_is_written_with_the_oldest_version_that_can_say_it() {
    let d = tempfile::tempdir().unwrap();
    let store = cairn_store::Store::open(d.path()).unwrap();
    let id = cairn_store::RunId::new();
    let meta = Meta {
        run: String::new(),
        created: now_rfc3339(),
        workspace: "/w".into(),
        name: None,
        fingerprint: None,
        fork: None,
        routing: None,
        system_file: None,
    };
    let mut w = JournalWriter::create(&store, &id, meta).unwrap();
    let known = RecordBody::Reconcile(Reconcile {
        changed: vec!["a".into()],
        snapshot: None,
        unknown: None,
        machine: None,
    });
    let unknown = RecordBody::Reconcile(Reconcile {
        changed: vec![],
        snapshot: None,
        unknown: Some("the manifest did not read".into()),
        machine: None,
    });
    let off = RecordBody::Versioning(Versioning {
        state: VersioningState::Off,
        at: Some("pre:turn:1".into()),
        reason: "over the file limit".into(),
    });
    for body in [&known, &unknown, &off] {
        w.append(body).unwrap();
    }
    drop(w);
    let text = std::fs::read_to_string(store.journal_path(&id)).unwrap();
    let versions: Vec<u64> = text
        .lines()
        .map(|l| {
            serde_json::from_str::<serde_json::Value>(l).unwrap()["v"]
                .as_u64()
                .unwrap()
        })
        .collect();
    // An older cairn reads what it understands and refuses what it would
    // misread (an empty change list that means "unknown").
    assert_eq!(versions, [1, 1, 2, 2]);
    let scan = read_journal(&store.journal_path(&id), id.as_str()).unwrap();
    assert_eq!(scan.records[2].body, unknown);
    assert_eq!(scan.records[3].body, off);
    assert!(scan.records[3].body.is_bookkeeping());
    for line in text.lines() {
        let by_hand = Record::from_line(line.as_bytes()).unwrap();
        let by_serde: Record = serde_json::from_str(line).unwrap();
        assert_eq!(by_hand, by_serde);
    }
}

/// A journal long enough to be parsed in parallel reads exactly as one read
/// line by line: every record, and damage at the same seq.
#[test]
fn a_long_journal_reads_the_same_whatever_the_parsing_order() {
    let d = tempfile::tempdir().unwrap();
    let store = cairn_store::Store::open(d.path()).unwrap();
    let id = cairn_store::RunId::new();
    let mut w = JournalWriter::create(&store, &id, common::meta("/w")).unwrap();
    let bodies: Vec<RecordBody> = (0..6000)
        .map(|i| common::user(&format!("message {i}")))
        .collect();
    w.append_batch(&bodies).unwrap();
    drop(w);
    let path = store.journal_path(&id);
    let full = std::fs::read(&path).unwrap();
    let scan = scan_journal_bytes(&path, &full, id.as_str()).unwrap();
    assert_eq!(scan.records.len(), 6001);
    for (i, r) in scan.records.iter().enumerate().skip(1) {
        assert_eq!(r.seq, i as u64 + 1);
        assert!(matches!(&r.body, RecordBody::User(u) if u.text == format!("message {}", i - 1)));
    }
    // A record that no longer matches its schema, deep inside: damage at
    // its seq, nothing after it read.
    let text = String::from_utf8(full).unwrap();
    let bad = text.replacen("\"text\":\"message 4321\"", "\"text\":4321", 1);
    let err = scan_journal_bytes(&path, bad.as_bytes(), id.as_str()).unwrap_err();
    assert!(
        matches!(err, JournalError::Damaged { seq: 4323, .. }),
        "{err}"
    );
    let report = verify_bytes(bad.as_bytes(), id.as_str());
    assert_eq!(report.first_bad_seq, Some(4323), "{:?}", report.problem);
}

/// Who wrote a `user` record: `origin: "cairn"` is cairn's note in any
/// version; without it, a record of version 5 or later is the person's
/// whatever its text, and an older one is cairn's note only when its text
/// starts with `cairn: ` (the rule of the cairns that wrote it). Each is
/// written with the oldest version that tells it right.
#[test]
fn who_wrote_a_user_record_is_its_origin_and_before_v5_its_prefix() {
    let rows: [(u64, &str, bool); 9] = [
        (1, r#""text":"cairn: 2 file(s) changed""#, true),
        (4, r#""text":"cairn: 2 file(s) changed""#, true),
        (4, r#""text":"fix the test""#, false),
        (5, r#""text":"fix the test""#, false),
        (5, r#""text":"cairn: fix the test""#, false),
        (
            5,
            r#""text":"cairn: 2 file(s) changed","origin":"cairn""#,
            true,
        ),
        (
            1,
            r#""text":"cairn: 2 file(s) changed","origin":"cairn""#,
            true,
        ),
        (
            5,
            r#""text":"a note without the prefix","origin":"cairn""#,
            true,
        ),
        (4, r#""text":"cairn:without the space""#, false),
    ];
    let lines: Vec<String> = std::iter::once(
        r#"{"v":1,"seq":1,"prev":"ZERO","ts":"t","kind":"meta","run":"r","created":"t","workspace":"/w","name":null,"fingerprint":null,"fork":null}"#.replace("ZERO", &"0".repeat(64)),
    )
    .chain(rows.iter().enumerate().map(|(i, (v, body, _))| {
        format!(
            r#"{{"v":{v},"seq":{},"prev":"{}","ts":"t","kind":"user",{body}}}"#,
            i + 2,
            "0".repeat(64)
        )
    }))
    .collect();
    let records: Vec<Record> = lines
        .iter()
        .map(|l| Record::from_line(l.as_bytes()).unwrap())
        .collect();
    for (r, (v, body, note)) in records[1..].iter().zip(rows) {
        let RecordBody::User(u) = &r.body else {
            panic!("{body}")
        };
        assert_eq!(u.is_note(r.v), note, "v{v} {body}");
    }
    let state = fold(&records).unwrap();
    let notes: Vec<bool> = state
        .conversation
        .iter()
        .map(|e| match e {
            Entry::User { note, .. } => *note,
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(notes, rows.map(|r| r.2));

    let written = [
        (User::person("fix the test"), 1),
        (User::person("cairn: fix the test"), 5),
        (User::note("cairn: 2 file(s) changed"), 1),
        (User::note("a note without the prefix"), 5),
    ];
    for (user, v) in written {
        let body = RecordBody::User(user.clone());
        assert_eq!(body.version(), v, "{user:?}");
        // The person's words carry no `origin`.
        let json = serde_json::to_value(&body).unwrap();
        assert_eq!(json.get("origin").is_some(), user.origin.is_some());
        assert!(!user.is_note(v) || user.origin.is_some());
    }
}

#[test]
fn a_cost_for_people_is_never_a_number_when_unknown() {
    assert_eq!(cairn_journal::Cost::ZERO.for_people(), "free");
    assert_eq!(cairn_journal::Cost::known(0.01234).for_people(), "$0.0123");
    assert_eq!(cairn_journal::Cost::UNKNOWN.for_people(), "unknown");
}
