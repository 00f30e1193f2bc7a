//! SIGKILL crash test: a child appends as fast as it can and prints each seq
//! after its fsync returned; the parent kills it at random moments. Every
//! printed seq must survive, the chain must verify, and the next writer must
//! cut the torn tail and append cleanly.
//!
//! The child is this same test binary, re-run with `CAIRN_CRASH_CHILD` set.

mod common;

use std::io::Write;
use std::time::Duration;

use cairn_journal::*;
use cairn_store::{RunId, Store};
use rand::Rng;

const TRIALS: usize = 200;

#[test]
fn crash_child_writer() {
    let (Ok(dir), Ok(id)) = (
        std::env::var("CAIRN_CRASH_CHILD"),
        std::env::var("CAIRN_CRASH_RUN"),
    ) else {
        return; // Only does something when the parent test runs it.
    };
    let store = Store::open(&dir).unwrap();
    let id = RunId::parse(&id).unwrap();
    let (mut w, _) = JournalWriter::open(&store, &id).unwrap();
    let out = std::io::stdout();
    let mut out = out.lock();
    let text = "x".repeat(200);
    let mut i = 0u64;
    loop {
        i += 1;
        let a = if i.is_multiple_of(7) {
            let batch: Vec<_> = (0..4).map(|_| common::user(&text)).collect();
            w.append_batch(&batch).unwrap()
        } else {
            w.append(&common::user(&text)).unwrap()
        };
        writeln!(out, "{}", a.seq).unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn sigkill_at_random_moments_loses_no_acknowledged_record() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let id = RunId::new();
    drop(JournalWriter::create(&store, &id, common::meta("/w")).unwrap());
    let path = store.journal_path(&id);
    let mut rng = rand::rng();
    let mut max_acked = 1u64;
    let mut torn_seen = 0;
    for trial in 0..TRIALS {
        let after = Duration::from_micros(rng.random_range(2_000..30_000));
        let env = [
            ("CAIRN_CRASH_CHILD", d.path().as_os_str()),
            ("CAIRN_CRASH_RUN", id.as_str().as_ref()),
        ];
        let acked: Vec<u64> = cairn_testkit::kill_child_after("crash_child_writer", &env, after)
            .iter()
            .filter_map(|l| l.trim().parse().ok())
            .collect();
        if let Some(&m) = acked.iter().max() {
            max_acked = max_acked.max(m);
        }
        let scan = read_journal(&path, id.as_str())
            .unwrap_or_else(|e| panic!("trial {trial}: journal unreadable after SIGKILL: {e}"));
        let n = scan.records.len() as u64;
        assert!(
            n >= max_acked,
            "trial {trial}: acknowledged seq {max_acked} lost, {n} survive"
        );
        if scan.torn.is_some() {
            torn_seen += 1;
        }
        let report = verify_journal(&path, id.as_str()).unwrap();
        assert!(report.ok(), "trial {trial}: {report:?}");
    }
    // The next writer repairs and appends cleanly.
    let (mut w, scan) = JournalWriter::open(&store, &id).unwrap();
    let before = scan.records.len() as u64;
    let a = w.append(&common::user("after the storm")).unwrap();
    assert_eq!(a.seq, before + 1);
    drop(w);
    let report = verify_journal(&path, id.as_str()).unwrap();
    assert!(report.ok() && !report.torn_tail && report.records == before + 1);
    assert!(max_acked > 10, "the child never got going");
    eprintln!("{TRIALS} kills, {max_acked} acknowledged, {torn_seen} torn tails repaired");
}
