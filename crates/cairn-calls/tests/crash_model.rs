//! The response store under the crash model (`cairn_testkit::crash_model`):
//! responses are put, alone and in groups, marked delivered and taken back,
//! and removed, for real, every storage operation recorded; then every state
//! a power cut may leave after each operation is built and checked. Every
//! acknowledged entry is there with its body, every acknowledged
//! `undelivered` holds, nothing torn reads as a record, and the next writer
//! appends after what a crash cut. With the log's `fdatasync` removed from
//! the model, a lost acknowledged entry must be found.

use std::path::Path;

use cairn_calls::{Barrier, Entry, GroupPut, ResponseStore};
use cairn_store::{RunId, Store};
use cairn_testkit::crash_model::{CrashModel, Report};

/// The entry the scenario removes (with its run).
const REMOVED: usize = 4;

fn key(n: usize) -> String {
    format!("{n:064x}")
}

/// Over 512 bytes, so torn writes cut inside records.
fn body(n: usize) -> Vec<u8> {
    format!("response {n} ").repeat(60).into_bytes()
}

fn entry(n: usize, run: &str) -> Entry {
    Entry::whole_json(key(n), run, "agent:test")
}

fn check(root: &Path, acked: &[String]) -> Result<(), String> {
    let Ok(store) = Store::open(root.join("store")) else {
        return if acked.is_empty() {
            Ok(())
        } else {
            Err("the store does not open".into())
        };
    };
    let rs = ResponseStore::new(&store);
    for a in acked {
        let (what, n) = a.split_once(':').ok_or("bad ack")?;
        let n: usize = n.parse().map_err(|_| "bad ack")?;
        let got = rs
            .get(&key(n))
            .map_err(|e| format!("{a} was acknowledged, and the store does not read: {e}"))?;
        match what {
            "put" => match got {
                Some(s) => {
                    let b = rs
                        .body(&s)
                        .map_err(|e| format!("{a}: its body does not read: {e}"))?;
                    if b != body(n) {
                        return Err(format!("{a}: another body"));
                    }
                }
                // The scenario removes entry 4: once that is under way, its
                // absence is the removal's (acknowledged or not yet).
                None if n == REMOVED => {}
                None => return Err(format!("{a} was acknowledged, and it is gone")),
            },
            "undelivered" if got.as_ref().is_some_and(|s| s.entry.delivered) => {
                return Err(format!("{a} was acknowledged, and it reads delivered"));
            }
            "removed" if got.is_some() => {
                return Err(format!("{a} was acknowledged, and it is there"));
            }
            _ => {}
        }
    }
    // The next writer appends after whatever a crash left.
    rs.put(entry(99, "R9"), &body(99), None)
        .map_err(|e| format!("putting after the crash: {e}"))?;
    let fresh = ResponseStore::new(&store);
    let s = fresh
        .get(&key(99))
        .map_err(|e| format!("rereading: {e}"))?
        .ok_or("the entry put after the crash is gone")?;
    if fresh.body(&s).map_err(|e| e.to_string())? != body(99) {
        return Err("the entry put after the crash has another body".into());
    }
    Ok(())
}

fn scenario(model: &CrashModel) {
    let store = Store::open(model.root().join("store")).unwrap();
    let rs = ResponseStore::new(&store);
    rs.put(entry(1, "R1"), &body(1), None).unwrap();
    model.ack("put:1");
    rs.mark_delivered(&key(1)).unwrap();
    let mut group: Vec<GroupPut> = (2..=4)
        .map(|n| GroupPut {
            entry: Some(entry(n, if n == REMOVED { "R2" } else { "R1" })),
            body: body(n),
            request: format!("request {n}").into_bytes(),
            hashes: None,
        })
        .collect();
    rs.put_group(&rs.lock().unwrap(), &mut group, Barrier::From(0))
        .unwrap();
    for n in 2..=4 {
        model.ack(format!("put:{n}"));
    }
    rs.mark_delivered(&key(2)).unwrap();
    rs.mark_undelivered(&key(1)).unwrap();
    model.ack("undelivered:1");
    let removed = rs.remove_run(&RunId::parse("R2").unwrap()).unwrap();
    assert_eq!(removed, 1);
    model.ack(format!("removed:{REMOVED}"));
}

fn run(without: Option<&'static str>) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let model = CrashModel::record(dir.path());
    scenario(&model);
    model.without_recorded(without).check(check)
}

#[test]
fn every_acknowledged_response_and_mark_survives_every_power_cut() {
    let r = run(None);
    eprintln!(
        "responses: {} ops, {} crash points, {} states",
        r.ops, r.points, r.states
    );
    assert!(r.failures.is_empty(), "{:#?}", r.failures);
    assert!(r.points > 20, "{r:?}");
}

#[test]
fn without_the_logs_fdatasync_a_lost_response_is_found() {
    let r = run(Some("responses.log"));
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
fn a_torn_tail_is_cut_durably_before_the_next_append() {
    // Before recording: a log whose last append was cut by a crash.
    let dir = tempfile::tempdir().unwrap();
    {
        let store = Store::open(dir.path().join("store")).unwrap();
        let rs = ResponseStore::new(&store);
        rs.put(entry(1, "R1"), &body(1), None).unwrap();
        let seg = store.gateway_dir().join("log").join("0000000001.log");
        let mut bytes = std::fs::read(&seg).unwrap();
        bytes.extend_from_slice(br#"{"op":"put","entry":{"key":"00"#);
        std::fs::write(&seg, &bytes).unwrap();
        std::fs::File::open(&seg).unwrap().sync_all().unwrap();
    }
    let model = CrashModel::record(dir.path());
    model.ack("put:1");
    {
        let store = Store::open(model.root().join("store")).unwrap();
        let rs = ResponseStore::new(&store);
        for n in 2..=3 {
            rs.put(entry(n, "R1"), &body(n), None).unwrap();
            model.ack(format!("put:{n}"));
        }
    }
    assert!(model.sites().contains("responses.log.cut"));
    let r = model.check(check);
    assert!(r.failures.is_empty(), "{:#?}", r.failures);
}
