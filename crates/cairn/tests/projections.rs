//! Projections (DESIGN §3.1): stale, malformed, missing, oversized and
//! falsified projections never break or falsify a listing; concurrent
//! finishers never lose each other's index entries; reindex rebuilds.

mod common;

use common::*;
use serde_json::{json, Value};

fn finished_session(s: &Scratch, turns: Value) -> String {
    let script = s.script(&format!("s{}.json", rand_suffix()), turns);
    let out = s.run(&[
        "run",
        "--model",
        &format!("script:{}", script.display()),
        "--json",
        "task",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json(&out.stdout)["id"].as_str().unwrap().to_string()
}

fn rand_suffix() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

fn listing(s: &Scratch) -> Vec<Value> {
    let out = s.run(&["sessions", "--all", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json(&out.stdout).as_array().unwrap().clone()
}

fn entry<'a>(list: &'a [Value], id: &str) -> &'a Value {
    list.iter().find(|e| e["id"] == id).unwrap()
}

fn meta_json(s: &Scratch, id: &str) -> std::path::PathBuf {
    s.store.join("runs").join(id).join("meta.json")
}

#[test]
fn the_writer_keeps_projections_that_match_the_record() {
    let s = Scratch::new();
    let id = finished_session(
        &s,
        json!([{"text": "a", "usage": {"input_tokens": 3, "output_tokens": 4}}]),
    );
    let meta: Value = serde_json::from_slice(&std::fs::read(meta_json(&s, &id)).unwrap()).unwrap();
    let journal = s.store.join("runs").join(&id).join("journal.jsonl");
    assert_eq!(
        meta["binding"]["len"],
        std::fs::metadata(&journal).unwrap().len()
    );
    let lines = std::fs::read_to_string(&journal).unwrap().lines().count();
    assert_eq!(meta["binding"]["records"], lines);
    assert_eq!(meta["summary"]["status"], "completed");
    let index = std::fs::read_to_string(s.store.join("sessions.index")).unwrap();
    assert!(index.contains(&id));
    let l = listing(&s);
    assert_eq!(entry(&l, &id)["tail"], meta["binding"]["tail"]);
    assert_eq!(entry(&l, &id)["turns"], 1);
}

#[test]
fn stale_missing_malformed_and_oversized_projections_are_rebuilt_from_the_record() {
    let s = Scratch::new();
    let id = finished_session(&s, json!([{"text": "a"}, {"text": "b"}]));
    let truth = entry(&listing(&s), &id).clone();
    let index = s.store.join("sessions.index");

    // Missing: both gone.
    std::fs::remove_file(meta_json(&s, &id)).unwrap();
    std::fs::remove_file(&index).unwrap();
    assert_eq!(entry(&listing(&s), &id), &truth);
    assert!(
        meta_json(&s, &id).exists(),
        "the rebuilt projection is written back"
    );

    // Malformed.
    std::fs::write(meta_json(&s, &id), b"{not json").unwrap();
    std::fs::write(&index, b"garbage\n{\"id\": 5}\n\xff\xfe\n").unwrap();
    assert_eq!(entry(&listing(&s), &id), &truth);

    // Oversized (and otherwise plausible).
    std::fs::remove_file(&index).unwrap();
    let mut big: Value =
        serde_json::from_slice(&std::fs::read(meta_json(&s, &id)).unwrap()).unwrap();
    big["summary"]["name"] = Value::String("x".repeat(300 * 1024));
    std::fs::write(meta_json(&s, &id), serde_json::to_vec(&big).unwrap()).unwrap();
    let l = listing(&s);
    assert_eq!(entry(&l, &id)["name"], truth["name"]);

    // Stale: the session moved on after its projection was written.
    let saved = std::fs::read(meta_json(&s, &id)).unwrap();
    std::fs::remove_file(&index).unwrap();
    let out = s.run(&["resume", &id, "more", "--json"]);
    assert!(out.status.success());
    std::fs::write(meta_json(&s, &id), saved).unwrap();
    let _ = std::fs::remove_file(&index);
    let l = listing(&s);
    assert_eq!(entry(&l, &id)["turns"], 2);
    assert!(entry(&l, &id)["records"].as_u64().unwrap() > truth["records"].as_u64().unwrap());
}

#[test]
fn a_projection_cannot_lie_about_cost_or_status() {
    let s = Scratch::new();
    let id = finished_session(&s, json!([{"text": "a"}]));
    std::fs::remove_file(s.store.join("sessions.index")).unwrap();
    // Keep the binding, falsify the figures.
    let mut p: Value = serde_json::from_slice(&std::fs::read(meta_json(&s, &id)).unwrap()).unwrap();
    p["summary"]["cost"] = json!({"state": "known", "usd": 999.0});
    p["summary"]["status"] = json!("failed");
    p["summary"]["turns"] = json!(77);
    std::fs::write(meta_json(&s, &id), serde_json::to_vec(&p).unwrap()).unwrap();
    let l = listing(&s);
    let e = entry(&l, &id);
    assert_eq!(e["cost"]["state"], "zero");
    assert_eq!(e["status"], "completed");
    assert_eq!(e["turns"], 1);
    // A binding that does not match is not used at all.
    p["binding"]["tail"] = json!("0".repeat(64));
    p["summary"]["name"] = json!("forged");
    std::fs::write(meta_json(&s, &id), serde_json::to_vec(&p).unwrap()).unwrap();
    let _ = std::fs::remove_file(s.store.join("sessions.index"));
    assert_ne!(entry(&listing(&s), &id)["name"], "forged");
}

#[test]
fn concurrent_finishers_do_not_lose_each_others_index_entries() {
    let s = Scratch::new();
    let script = s.script(
        "many.json",
        json!([{"text": "one", "tool_calls": [shell("c", "true")]}, {"text": "done"}]),
    );
    let model = format!("script:{}", script.display());
    for round in 0..3 {
        let children: Vec<_> = (0..8)
            .map(|_| s.spawn(&["run", "--model", &model, "--json", "task"]))
            .collect();
        let ids: Vec<String> = children
            .into_iter()
            .map(|c| {
                let out = c.wait_with_output().unwrap();
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                json(&out.stdout)["id"].as_str().unwrap().to_string()
            })
            .collect();
        let index = std::fs::read_to_string(s.store.join("sessions.index")).unwrap();
        for id in &ids {
            // The newest line for each id is its completed state.
            let last = index
                .lines()
                .rfind(|l| l.contains(id.as_str()))
                .unwrap_or_else(|| panic!("round {round}: {id} lost"));
            // Bound to every record of its journal, the terminal included.
            let v: Value = serde_json::from_str(last).unwrap();
            let journal = s.store.join("runs").join(id).join("journal.jsonl");
            let journal = std::fs::read_to_string(journal).unwrap();
            assert_eq!(
                v["binding"]["records"],
                journal.lines().count(),
                "round {round}"
            );
            assert!(journal
                .lines()
                .last()
                .unwrap()
                .contains("\"kind\":\"terminal\""));
        }
    }
    assert_eq!(listing(&s).len(), 24);
}

#[test]
fn reindex_rebuilds_every_projection() {
    let s = Scratch::new();
    let a = finished_session(&s, json!([{"text": "a"}]));
    let b = finished_session(&s, json!([{"text": "b"}]));
    std::fs::remove_file(meta_json(&s, &a)).unwrap();
    std::fs::write(s.store.join("sessions.index"), b"junk\n").unwrap();
    let out = s.run(&["reindex"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("reindexed 2 session"));
    assert!(meta_json(&s, &a).exists());
    let index = std::fs::read_to_string(s.store.join("sessions.index")).unwrap();
    assert_eq!(index.lines().count(), 2);
    assert!(index.contains(&a) && index.contains(&b));
}
