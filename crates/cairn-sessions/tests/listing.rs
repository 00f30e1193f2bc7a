//! Listing tells what the record attests: the last terminal's reason when
//! only bookkeeping follows it, the workspace, name and fork origin of the
//! `meta` record, validity from the record and the lineage — never the
//! projection's own bytes, and never an allocation sized by them.

mod common;

use cairn_journal::{Cost, TerminalReason};
use cairn_sessions::{list, summarize, Summary};
use cairn_store::{RunId, Store};
use common::*;
use serde_json::json;

fn listed(store: &Store, id: &RunId) -> Summary {
    list(store)
        .unwrap()
        .into_iter()
        .find(|s| s.id == id.as_str())
        .unwrap()
}

#[test]
fn a_finished_session_ending_in_bookkeeping_lists_its_last_terminal() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let costs = [Cost::UNKNOWN, Cost::known(0.25), Cost::ZERO];
    let tails: [&[fn() -> cairn_journal::RecordBody]; 4] = [
        &[|| snapshot("post:turn:1")],
        &[checkpoint],
        &[reconcile],
        &[
            || snapshot("pause:turn:1"),
            checkpoint,
            reconcile,
            checkpoint,
        ],
    ];
    for cost in costs {
        for tail in tails {
            let mut w = Writer::create(&store, "/ws", "bookkeeping");
            w.append(user("task"));
            w.append(turn(3, 4, cost, false, &[]));
            w.end(TerminalReason::Completed);
            for b in tail {
                w.append(b());
            }
            // As `cairn snapshot` and `cairn checkpoint save` do when done.
            w.refresh();
            let want = (
                w.state.status.as_str(),
                w.state.totals.turns,
                w.state.totals.cost,
            );
            assert_eq!(want.0, "completed");
            let id = w.id.clone();
            drop(w);
            for from in ["projection", "record"] {
                if from == "record" {
                    remove_projections(&store);
                }
                for s in [listed(&store, &id), summarize(&store, &id)] {
                    assert!(s.valid, "{from}: {s:?}");
                    assert_eq!(
                        (s.status.as_str(), s.turns, s.cost),
                        want,
                        "{from}, cost {cost:?}, {} bookkeeping record(s)",
                        tail.len()
                    );
                }
            }
        }
    }
}

#[test]
fn work_after_the_last_terminal_lists_the_session_running_while_its_writer_lives() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let mut w = Writer::create(&store, "/ws", "resumed");
    w.append(turn(1, 1, Cost::UNKNOWN, false, &[]));
    w.end(TerminalReason::Suspended);
    w.append(snapshot("resume:turn:1"));
    w.append(reconcile());
    w.append(user("more"));
    w.append(snapshot("pre:turn:2"));
    w.refresh();
    let id = w.id.clone();
    // While its writer holds it, running; once the writer is gone without
    // a terminal (a crash), interrupted — from the projection or the record.
    assert_eq!(listed(&store, &id).status, "running");
    assert_eq!(summarize(&store, &id).status, "running");
    drop(w);
    assert_eq!(listed(&store, &id).status, "interrupted");
    assert_eq!(summarize(&store, &id).status, "interrupted");
    remove_projections(&store);
    assert_eq!(listed(&store, &id).status, "interrupted");
    let _again = Writer::open(&store, &id);
    assert_eq!(listed(&store, &id).status, "running");
}

#[test]
fn a_projection_cannot_move_rename_invalidate_or_reparent_a_session() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let mut w = Writer::create(&store, "/repo/a", "truth");
    w.append(turn(1, 1, Cost::ZERO, false, &[]));
    w.end(TerminalReason::Completed);
    let id = w.id.clone();
    drop(w);
    let truth = listed(&store, &id);
    let other = RunId::new();
    let forge = |v: &mut serde_json::Value| {
        let s = &mut v["summary"];
        s["workspace"] = json!("/repo/elsewhere");
        s["name"] = json!("forged");
        s["created"] = json!("1999-01-01T00:00:00Z");
        s["parent"] = json!({"id": other.as_str(), "seq": 1});
        s["valid"] = json!(false);
        s["problem"] = json!("forged problem");
        s["status"] = json!("failed");
    };
    // The sidecar alone, then the index alone: the binding fields are kept.
    let text = std::fs::read_to_string(store.sessions_index()).unwrap();
    edit_json(&store.meta_path(&id), forge);
    std::fs::remove_file(store.sessions_index()).unwrap();
    let s = listed(&store, &id);
    assert_eq!(s, truth, "meta.json");
    // The index's lines hold no texts to forge; a line as an older cairn
    // wrote it (the whole projection) still has them, and is read.
    let line: serde_json::Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    let mut projection: serde_json::Value =
        serde_json::from_slice(&std::fs::read(store.meta_path(&id)).unwrap()).unwrap();
    assert_eq!(projection["summary"]["workspace"], json!("/repo/elsewhere"));
    assert_eq!(projection["binding"], line["binding"], "the same binding");
    forge(&mut projection);
    let old = json!({"id": id.as_str(), "projection": projection});
    std::fs::write(store.sessions_index(), format!("{old}\n")).unwrap();
    std::fs::remove_file(store.meta_path(&id)).unwrap();
    assert_eq!(listed(&store, &id), truth, "sessions.index");
}

#[test]
fn a_changed_meta_line_is_caught_by_the_projections_head_hash() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let mut w = Writer::create(&store, "/repo/a", "truth");
    w.append(turn(1, 1, Cost::ZERO, false, &[]));
    w.end(TerminalReason::Completed);
    let id = w.id.clone();
    drop(w);
    assert!(listed(&store, &id).valid);
    // Same length, same mtime: only the first line's bytes differ.
    let path = store.journal_path(&id);
    let mtime = std::fs::metadata(&path).unwrap().modified().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let text = String::from_utf8(bytes)
        .unwrap()
        .replacen("/repo/a", "/repo/b", 1);
    std::fs::write(&path, text).unwrap();
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(mtime)
        .unwrap();
    let s = listed(&store, &id);
    assert!(!s.valid, "{s:?}");
    assert_eq!(s.first_bad_seq, Some(1), "{s:?}");
}

/// A parent of two turns, a fork of it, and the fork's projection path.
fn parent_and_fork(store: &Store) -> (RunId, RunId) {
    let mut p = Writer::create(store, "/ws", "parent");
    p.append(user("task"));
    p.append(turn(5, 5, Cost::known(0.5), false, &[]));
    p.append(turn(5, 5, Cost::known(0.5), false, &[]));
    p.end(TerminalReason::Completed);
    let parent = p.id.clone();
    drop(p);
    let mut f = Writer::fork(store, &parent, Some(3));
    f.append(user("diverge"));
    f.append(turn(1, 1, Cost::known(0.25), false, &[]));
    f.end(TerminalReason::Completed);
    let fork = f.id.clone();
    drop(f);
    (parent, fork)
}

#[test]
fn a_receipt_that_does_not_follow_the_forks_pins_is_not_believed() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let (parent, fork) = parent_and_fork(&store);
    assert!(listed(&store, &fork).valid);
    // Break the parent's prefix (seq 2), then drop the fork's receipt so a
    // lister that believed it would check nothing.
    let ppath = store.journal_path(&parent);
    let text = std::fs::read_to_string(&ppath)
        .unwrap()
        .replacen("task", "tusk", 1);
    std::fs::write(&ppath, text).unwrap();
    std::fs::remove_file(store.sessions_index()).unwrap();
    edit_json(&store.meta_path(&fork), |v| v["receipt"] = json!([]));
    let s = listed(&store, &fork);
    assert!(!s.valid, "{s:?}");
    assert_eq!(s.parent.unwrap().id, parent.as_str());
}

#[test]
fn a_receipt_length_or_offset_out_of_bounds_is_ignored_not_allocated() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let (parent, fork) = parent_and_fork(&store);
    let truth = listed(&store, &fork);
    assert!(truth.valid);
    for (field, value) in [
        ("len", u64::MAX),
        ("len", u64::MAX - 1),
        ("len", 1 << 40),
        ("offset", u64::MAX),
        ("offset", u64::MAX - 3),
    ] {
        std::fs::remove_file(store.sessions_index()).unwrap();
        edit_json(&store.meta_path(&fork), |v| {
            v["receipt"][0][field] = json!(value);
        });
        // The projection is rebuilt from the record: the fork is intact.
        assert_eq!(listed(&store, &fork), truth, "{field} = {value}");
        assert_eq!(summarize(&store, &fork), truth, "{field} = {value}");
        let receipt: Vec<cairn_sessions::Pin> = {
            let v: serde_json::Value =
                serde_json::from_slice(&std::fs::read(store.meta_path(&fork)).unwrap()).unwrap();
            let mut r: Vec<cairn_sessions::Pin> =
                serde_json::from_value(v["receipt"].clone()).unwrap();
            match field {
                "len" => r[0].len = value,
                _ => r[0].offset = value,
            }
            r
        };
        assert!(cairn_sessions::check_receipt(&store, &receipt).is_err());
    }
    assert!(listed(&store, &parent).valid);
}
