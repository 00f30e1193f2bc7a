//! What `cairn sessions`, `cairn continue`, `cairn snapshot` and `cairn
//! verify` decide from a listing comes from the record: a finished session
//! stays finished when bookkeeping follows its terminal, a projection's bytes
//! cannot move a session into another repository, and a terminal whose
//! totals disagree with its records is damage, reported the same way by
//! every command, every time.

mod common;

use cairn_journal::*;
use cairn_store::{RunId, Store};
use common::*;
use serde_json::{json, Value};

fn meta(ws: &std::path::Path, name: &str) -> Meta {
    Meta {
        run: String::new(),
        created: now_rfc3339(),
        workspace: ws.to_string_lossy().into_owned(),
        name: Some(name.into()),
        fingerprint: None,
        fork: None,
        routing: None,
        system_file: None,
    }
}

fn turn(cost: Cost) -> RecordBody {
    RecordBody::Assistant(Assistant {
        text: "done".into(),
        tool_calls: vec![],
        usage: Usage {
            input_tokens: 7,
            output_tokens: 3,
        },
        cost,
        replay: false,
        model: Some("some-model".into()),
        ..Assistant::default()
    })
}

/// A finished session of one turn whose terminal says `turns`.
fn finished(s: &Scratch, cost: Cost, turns: u64) -> String {
    let store = Store::open(&s.store).unwrap();
    let id = RunId::new();
    let mut w = JournalWriter::create(&store, &id, meta(&s.ws, "finished")).unwrap();
    w.append(&RecordBody::User(User {
        text: "task".into(),
        origin: None,
    }))
    .unwrap();
    w.append(&turn(cost)).unwrap();
    w.append(&RecordBody::Terminal(Terminal {
        reason: TerminalReason::Completed,
        totals: Totals {
            turns,
            input_tokens: 7,
            output_tokens: 3,
            cost,
            tool_calls: 0,
            tool_calls_unstated: false,
        },
        detail: None,
    }))
    .unwrap();
    id.to_string()
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

fn entry(s: &Scratch, id: &str) -> Value {
    listing(s)
        .into_iter()
        .find(|e| e["id"] == id)
        .unwrap_or_else(|| panic!("{id} not listed"))
}

#[test]
fn a_finished_session_stays_finished_after_snapshots_and_checkpoints() {
    let s = Scratch::new();
    std::fs::write(s.ws.join("a.txt"), "one").unwrap();
    let id = finished(&s, Cost::UNKNOWN, 1);
    // `cairn snapshot` without --run adds to the newest finished session of
    // this directory; it must keep finding the same one.
    for round in 0..3 {
        std::fs::write(s.ws.join("a.txt"), format!("round {round}")).unwrap();
        let out = s.run(&["snapshot", "--json"]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(json(&out.stdout)["run"], id.as_str(), "round {round}");
        let e = entry(&s, &id);
        assert_eq!(e["status"], "completed", "round {round}: {e}");
        assert_eq!(e["cost"]["state"], "unknown");
        assert_eq!(e["turns"], 1);
    }
    let out = s.run(&["checkpoint", "save", &id, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let e = entry(&s, &id);
    assert_eq!(e["status"], "completed", "{e}");
    assert_eq!(listing(&s).len(), 1);
    let out = s.run(&["session", "show", &id, "--json"]);
    assert!(out.status.success());
    assert_eq!(json(&out.stdout)["status"], "completed");
}

#[test]
fn a_forged_workspace_in_a_projection_does_not_make_continue_pick_the_session() {
    let s = Scratch::new();
    let repo_a = s.ws.join("a");
    let repo_b = s.ws.join("b");
    for r in [&repo_a, &repo_b] {
        std::fs::create_dir_all(r.join(".git")).unwrap();
    }
    let script = s.script("c.json", json!([{"text": "1"}, {"text": "2"}]));
    let out = s
        .cmd()
        .current_dir(&repo_b)
        .args([
            "run",
            "--model",
            &format!("script:{}", script.display()),
            "--json",
            "t",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let b = json(&out.stdout)["id"].as_str().unwrap().to_string();
    // Move it to repository a in its projections only, binding intact.
    let meta_json = s.store.join("runs").join(&b).join("meta.json");
    let mut p: Value = serde_json::from_slice(&std::fs::read(&meta_json).unwrap()).unwrap();
    p["summary"]["workspace"] = json!(repo_a.to_string_lossy());
    std::fs::write(&meta_json, serde_json::to_vec(&p).unwrap()).unwrap();
    let _ = std::fs::remove_file(s.store.join("sessions.index"));
    let out = s
        .cmd()
        .current_dir(&repo_a)
        .args(["continue", "next", "--json"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "continued {} in the wrong repository",
        String::from_utf8_lossy(&out.stdout)
    );
    let out = s
        .cmd()
        .current_dir(&repo_a)
        .args(["sessions", "--json"])
        .output()
        .unwrap();
    assert_eq!(json(&out.stdout), json!([]));
}

#[test]
fn a_terminal_that_disagrees_with_its_records_is_damage_everywhere_every_time() {
    let s = Scratch::new();
    let id = finished(&s, Cost::known(0.5), 5);
    let out = s.run(&["verify", &id, "--json"]);
    assert_eq!(out.status.code(), Some(3));
    let v = json(&out.stdout);
    assert_eq!(v["ok"], false);
    assert_eq!(v["first_bad_seq"], 4);
    assert_eq!(v["records"], 3);
    assert!(v["problem"].as_str().unwrap().contains("turns = 5"), "{v}");
    // Listings never alternate between the terminal's figures and the fold's.
    for _ in 0..3 {
        let e = entry(&s, &id);
        assert_eq!(e["valid"], false, "{e}");
        assert!(e["problem"].as_str().unwrap().contains("seq 4"), "{e}");
    }
    let out = s.run(&["session", "show", &id, "--json"]);
    assert_eq!(out.status.code(), Some(3));
    let out = s.run(&["resume", &id, "more"]);
    assert_eq!(out.status.code(), Some(3));
}

/// A journal another writer made, with a valid chain, whose terminal totals
/// leave out `tool_calls` (DESIGN §2 does not list it): it verifies, and is
/// listed valid with its status and figures.
#[test]
fn a_terminal_that_does_not_state_tool_calls_is_not_damage() {
    let s = Scratch::new();
    let id = RunId::new().to_string();
    let ws = s.ws.to_string_lossy().into_owned();
    let bodies = [
        json!({"kind": "meta", "run": id, "created": "2026-01-01T00:00:00Z", "workspace": ws,
               "name": "by hand", "fingerprint": null, "fork": null}),
        json!({"kind": "user", "text": "list the files"}),
        json!({"kind": "assistant", "text": "looking",
               "tool_calls": [{"id": "c1", "name": "shell", "arguments": "{\"cmd\":\"ls\"}"}],
               "usage": {"input_tokens": 10, "output_tokens": 4},
               "cost": {"state": "known", "usd": 0.5}}),
        json!({"kind": "tool_start", "call": "c1", "name": "shell"}),
        json!({"kind": "tool_result", "call": "c1", "outcome": "ok", "output": "a.txt"}),
        json!({"kind": "terminal", "reason": "completed",
               "totals": {"turns": 1, "input_tokens": 10, "output_tokens": 4,
                          "cost": {"state": "known", "usd": 0.5}}}),
    ];
    let mut h = ChainHash::genesis(&id);
    let mut bytes = Vec::new();
    for (i, body) in bodies.iter().enumerate() {
        let mut line =
            json!({"v": 1, "seq": i + 1, "prev": h.to_hex(), "ts": "2026-01-01T00:00:00Z"});
        for (k, v) in body.as_object().unwrap() {
            line[k] = v.clone();
        }
        let line = serde_json::to_vec(&line).unwrap();
        h = h.next(&line);
        bytes.extend_from_slice(&line);
        bytes.push(b'\n');
    }
    let dir = s.store.join("runs").join(&id);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("journal.jsonl"), &bytes).unwrap();

    let out = s.run(&["verify", &id]);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let e = entry(&s, &id);
    assert_eq!(e["valid"], true, "{e}");
    assert_eq!(e["status"], "completed", "{e}");
    assert_eq!(e["turns"], 1, "{e}");
    assert_eq!(e["tail"], h.to_hex(), "{e}");
}
