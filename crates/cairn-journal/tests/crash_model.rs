//! The journal under the crash model (`cairn_testkit::crash_model`): a run
//! is created and appended to for real, every storage operation recorded;
//! then every state a power cut may leave after each operation is built and
//! checked. Every acknowledged record is there and intact, nothing partial
//! reads as a record, and the next writer cuts what is torn and appends.
//! With the append's `fdatasync` removed from the model, a lost
//! acknowledged record must be found.

mod common;

use std::io::Write;
use std::path::Path;

use cairn_journal::*;
use cairn_store::{RunId, Store};
use cairn_testkit::crash_model::{CrashModel, Report};

/// Over 512 bytes per line, so torn writes cut inside records.
fn text(seq: u64) -> String {
    format!("record {seq} ").repeat(60)
}

/// What a state must hold: every acknowledged seq, each record the one
/// written; then the next writer recovers.
fn check(root: &Path, acked: &[String], id: &RunId) -> Result<(), String> {
    let newest = acked.iter().filter_map(|a| a.parse::<u64>().ok()).max();
    let Some(newest) = newest else {
        // Not created yet as far as anyone was told: whatever is there must
        // read as a journal or as damage, never panic.
        if let Ok(store) = Store::open(root.join("store")) {
            let _ = read_journal(&store.journal_path(id), id.as_str());
        }
        return Ok(());
    };
    let store = Store::open(root.join("store")).map_err(|e| e.to_string())?;
    let path = store.journal_path(id);
    let scan = read_journal(&path, id.as_str()).map_err(|e| {
        format!("seq {newest} was acknowledged, and the journal does not read: {e}")
    })?;
    if (scan.records.len() as u64) < newest {
        return Err(format!(
            "seq {newest} was acknowledged, and the journal holds {} records",
            scan.records.len()
        ));
    }
    for r in &scan.records[1..] {
        match &r.body {
            RecordBody::User(u) if u.text == text(r.seq) => {}
            other => {
                return Err(format!(
                    "record {} is not the one written: {other:?}",
                    r.seq
                ))
            }
        }
    }
    // The next writer: cuts a torn tail, appends, and the result verifies.
    let (mut w, _) = JournalWriter::open(&store, id).map_err(|e| format!("reopening: {e}"))?;
    let next = scan.records.len() as u64 + 1;
    w.append(&common::user(&text(next)))
        .map_err(|e| format!("appending after the crash: {e}"))?;
    drop(w);
    let again = read_journal(&path, id.as_str()).map_err(|e| format!("rereading: {e}"))?;
    if again.records.len() as u64 != next || again.torn.is_some() {
        return Err(format!(
            "after the next append: {} records, torn {:?}",
            again.records.len(),
            again.torn
        ));
    }
    Ok(())
}

/// Creates a run and appends to it (single records, a batch, a reopen).
fn appends(model: &CrashModel, id: &RunId) {
    let store = Store::open(model.root().join("store")).unwrap();
    let mut w = JournalWriter::create(&store, id, common::meta("/w")).unwrap();
    model.ack("1");
    for seq in 2..=5 {
        let a = w.append(&common::user(&text(seq))).unwrap();
        model.ack(a.seq.to_string());
    }
    let batch: Vec<RecordBody> = (6..=8).map(|s| common::user(&text(s))).collect();
    let a = w.append_batch(&batch).unwrap();
    model.ack(a.seq.to_string());
    drop(w);
    let (mut w, _) = JournalWriter::open(&store, id).unwrap();
    let a = w.append(&common::user(&text(9))).unwrap();
    model.ack(a.seq.to_string());
}

fn run(without: Option<&'static str>) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let id = RunId::new();
    let model = CrashModel::record(dir.path());
    appends(&model, &id);
    model
        .without_recorded(without)
        .check(|root, acked| check(root, acked, &id))
}

#[test]
fn every_acknowledged_record_survives_every_power_cut() {
    let r = run(None);
    eprintln!(
        "journal: {} ops, {} crash points, {} states",
        r.ops, r.points, r.states
    );
    assert!(r.failures.is_empty(), "{:#?}", r.failures);
    assert!(r.points > 20, "{r:?}");
}

#[test]
fn without_the_append_fdatasync_a_lost_record_is_found() {
    let r = run(Some("journal.append"));
    assert!(
        r.failed > 0,
        "the model missed the removed fdatasync: {r:?}"
    );
    assert!(
        r.failures.iter().any(|f| f.contains("was acknowledged")),
        "{:#?}",
        r.failures
    );
}

#[test]
fn without_the_run_directory_fsync_a_lost_run_is_found() {
    let r = run(Some("journal.create"));
    assert!(
        r.failed > 0,
        "the model missed the removed directory fsync: {r:?}"
    );
}

#[test]
fn a_torn_tail_is_cut_durably_before_the_next_append() {
    // Before recording: a run whose last append was cut by a crash.
    let dir = tempfile::tempdir().unwrap();
    let id = RunId::new();
    {
        let store = Store::open(dir.path().join("store")).unwrap();
        let mut w = JournalWriter::create(&store, &id, common::meta("/w")).unwrap();
        for seq in 2..=3 {
            w.append(&common::user(&text(seq))).unwrap();
        }
        drop(w);
        let mut f = std::fs::OpenOptions::new()
            .append(true)
            .open(store.journal_path(&id))
            .unwrap();
        f.write_all(br#"{"v":1,"seq":4,"prev":"00"#).unwrap();
        f.sync_all().unwrap();
    }
    let model = CrashModel::record(dir.path());
    model.ack("3");
    {
        let store = Store::open(model.root().join("store")).unwrap();
        let (mut w, scan) = JournalWriter::open(&store, &id).unwrap();
        assert!(scan.torn.is_some());
        for seq in 4..=5 {
            let a = w.append(&common::user(&text(seq))).unwrap();
            model.ack(a.seq.to_string());
        }
    }
    assert!(model.sites().contains("journal.cut"));
    let r = model.check(|root, acked| check(root, acked, &id));
    assert!(r.failures.is_empty(), "{:#?}", r.failures);
}
