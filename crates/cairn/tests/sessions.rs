//! Black-box tests of `cairn sessions`, `session show|rm` and `verify`.

use assert_cmd::Command;
use cairn_journal::*;
use cairn_store::{RunId, Store};
use predicates::prelude::*;
use serde_json::Value;

fn cairn(store: &std::path::Path) -> Command {
    let mut c = Command::cargo_bin("cairn").unwrap();
    c.env("CAIRN_STORE", store).env_remove("XDG_STATE_HOME");
    c
}

fn meta(workspace: &std::path::Path, name: &str) -> Meta {
    Meta {
        run: String::new(),
        created: now_rfc3339(),
        workspace: std::fs::canonicalize(workspace)
            .unwrap()
            .to_string_lossy()
            .into_owned(),
        name: Some(name.into()),
        fingerprint: None,
        fork: None,
        routing: None,
        system_file: None,
    }
}

/// A finished run with two turns and a known cost.
fn finished(store: &Store, ws: &std::path::Path, name: &str) -> RunId {
    let id = RunId::new();
    let mut w = JournalWriter::create(store, &id, meta(ws, name)).unwrap();
    w.append(&RecordBody::User(User {
        text: "task".into(),
        origin: None,
    }))
    .unwrap();
    let turn = RecordBody::Assistant(Assistant {
        text: "ok".into(),
        tool_calls: vec![],
        usage: Usage {
            input_tokens: 100,
            output_tokens: 10,
        },
        cost: Cost::known(0.25),
        replay: false,
        model: None,
        ..Assistant::default()
    });
    w.append(&turn).unwrap();
    w.append(&turn).unwrap();
    w.append(&RecordBody::Terminal(Terminal {
        reason: TerminalReason::Completed,
        totals: Totals {
            turns: 2,
            input_tokens: 200,
            output_tokens: 20,
            cost: Cost::known(0.5),
            tool_calls: 0,
            tool_calls_unstated: false,
        },
        detail: None,
    }))
    .unwrap();
    id
}

fn json(out: &[u8]) -> Value {
    serde_json::from_slice(out).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(out)))
}

#[test]
fn sessions_lists_this_repository_newest_first_and_all_with_all() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path().join("store")).unwrap();
    let repo_a = d.path().join("a");
    let repo_b = d.path().join("b");
    std::fs::create_dir_all(repo_a.join(".git")).unwrap();
    std::fs::create_dir_all(repo_a.join("sub/dir")).unwrap();
    std::fs::create_dir_all(&repo_b).unwrap();
    let a1 = finished(&store, &repo_a, "first");
    let a2 = finished(&store, &repo_a.join("sub"), "second");
    let b1 = finished(&store, &repo_b, "other");

    let out = cairn(store.root())
        .args(["-C"])
        .arg(repo_a.join("sub/dir"))
        .args(["sessions", "--json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v = json(&out.stdout);
    let ids: Vec<_> = v
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, [a2.to_string(), a1.to_string()]);
    let s = &v[0];
    for key in [
        "id",
        "name",
        "status",
        "created",
        "updated",
        "workspace",
        "turns",
        "records",
        "tail",
        "cost",
        "parent",
        "valid",
    ] {
        assert!(s.get(key).is_some(), "missing {key}");
    }
    assert_eq!(s["status"], "completed");
    assert_eq!(s["turns"], 2);
    assert_eq!(s["records"], 5);
    assert_eq!(s["cost"]["state"], "known");
    assert_eq!(s["cost"]["usd"], 0.5);
    assert_eq!(s["parent"], Value::Null);
    assert_eq!(s["valid"], true);

    let out = cairn(store.root())
        .args(["session", "ls", "--all", "--json"])
        .output()
        .unwrap();
    let v = json(&out.stdout);
    assert_eq!(v.as_array().unwrap().len(), 3);
    assert_eq!(v[0]["id"], b1.to_string());

    // The alias and the table.
    cairn(store.root())
        .arg("-C")
        .arg(&repo_b)
        .arg("--sessions")
        .assert()
        .success()
        .stdout(predicate::str::contains(b1.as_str()).and(predicate::str::contains("$0.5000")));
}

#[test]
fn listing_reads_a_running_session_in_full() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path().join("store")).unwrap();
    let id = RunId::new();
    let mut w = JournalWriter::create(&store, &id, meta(d.path(), "live")).unwrap();
    w.append(&RecordBody::Assistant(Assistant {
        text: "t".into(),
        tool_calls: vec![],
        usage: Usage {
            input_tokens: 7,
            output_tokens: 3,
        },
        cost: Cost::UNKNOWN,
        replay: false,
        model: None,
        ..Assistant::default()
    }))
    .unwrap();
    let out = cairn(store.root())
        .args(["sessions", "--all", "--json"])
        .output()
        .unwrap();
    let v = json(&out.stdout);
    assert_eq!(v[0]["status"], "running");
    assert_eq!(v[0]["turns"], 1);
    assert_eq!(v[0]["cost"]["state"], "unknown");
    assert_eq!(v[0]["cost"]["usd"], Value::Null);
}

#[test]
fn show_with_transcript_prints_every_record() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path().join("store")).unwrap();
    let id = finished(&store, d.path(), "shown");
    let out = cairn(store.root())
        .args(["session", "show", id.as_str(), "--json", "--transcript"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v = json(&out.stdout);
    assert_eq!(v["id"], id.to_string());
    assert_eq!(v["records"].as_array().unwrap().len(), 5);
    assert_eq!(v["records"][0]["kind"], "meta");
    assert_eq!(v["records"][4]["kind"], "terminal");
    let out = cairn(store.root())
        .args(["session", "show", id.as_str(), "--json"])
        .output()
        .unwrap();
    assert_eq!(json(&out.stdout)["records"], 5);
    cairn(store.root())
        .args(["session", "show", id.as_str(), "--transcript"])
        .assert()
        .success()
        .stdout(predicate::str::contains("terminal").and(predicate::str::contains("completed")));
}

#[test]
fn verify_names_the_first_bad_seq_and_exits_3() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path().join("store")).unwrap();
    let good = finished(&store, d.path(), "good");
    let bad = finished(&store, d.path(), "bad");
    let out = cairn(store.root())
        .args(["verify", good.as_str(), "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v = json(&out.stdout);
    assert_eq!(v["ok"], true);
    assert_eq!(v["records"], 5);
    assert_eq!(v["first_bad_seq"], Value::Null);
    assert_eq!(v["torn_tail"], false);
    assert_eq!(v["tail"].as_str().unwrap().len(), 64);

    // Change "task" to "tusk" in record 2.
    let path = store.journal_path(&bad);
    let text = std::fs::read_to_string(&path)
        .unwrap()
        .replacen("\"task\"", "\"tusk\"", 1);
    std::fs::write(&path, text).unwrap();
    let out = cairn(store.root())
        .args(["verify", bad.as_str(), "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let v = json(&out.stdout);
    assert_eq!(v["ok"], false);
    assert_eq!(v["first_bad_seq"], 2);

    let out = cairn(store.root())
        .args(["verify", "--all", "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    assert_eq!(json(&out.stdout).as_array().unwrap().len(), 2);

    cairn(store.root())
        .args(["verify", bad.as_str()])
        .assert()
        .code(3)
        .stdout(predicate::str::contains("first bad seq 2"));

    // The damaged session is listed as invalid, not dropped.
    let out = cairn(store.root())
        .args(["sessions", "--all", "--json"])
        .output()
        .unwrap();
    let v = json(&out.stdout);
    let listed = v
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == bad.to_string())
        .unwrap()
        .clone();
    // A finished run is listed from its tail; `show` reads it all and says why.
    let out = cairn(store.root())
        .args(["session", "show", bad.as_str(), "--transcript"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3), "{listed}");
}

#[test]
fn a_torn_tail_is_reported_not_failed() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path().join("store")).unwrap();
    let id = finished(&store, d.path(), "torn");
    let mut f = std::fs::OpenOptions::new()
        .append(true)
        .open(store.journal_path(&id))
        .unwrap();
    std::io::Write::write_all(&mut f, b"{\"v\":1,\"seq\":6,\"pr").unwrap();
    let out = cairn(store.root())
        .args(["verify", id.as_str(), "--json"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0));
    let v = json(&out.stdout);
    assert_eq!(
        (
            v["ok"].clone(),
            v["torn_tail"].clone(),
            v["records"].clone()
        ),
        (Value::Bool(true), Value::Bool(true), Value::from(5))
    );
    let out = cairn(store.root())
        .args(["sessions", "--all", "--json"])
        .output()
        .unwrap();
    assert_eq!(json(&out.stdout)[0]["status"], "completed");
}

#[test]
fn rm_deletes_the_session_and_refuses_while_it_is_written() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path().join("store")).unwrap();
    let id = finished(&store, d.path(), "doomed");
    let (w, _) = JournalWriter::open(&store, &id).unwrap();
    cairn(store.root())
        .args(["session", "rm", id.as_str()])
        .assert()
        .code(4)
        .stderr(predicate::str::contains(format!(
            "pid {}",
            std::process::id()
        )));
    drop(w);
    cairn(store.root())
        .args(["session", "rm", id.as_str()])
        .assert()
        .success();
    assert!(!store.run_dir(&id).exists());
    cairn(store.root())
        .args(["session", "show", id.as_str()])
        .assert()
        .code(2);
}

#[test]
fn bad_input_is_exit_2_with_a_message() {
    let d = tempfile::tempdir().unwrap();
    cairn(d.path())
        .args(["session", "show", "../etc"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("not a session id"));
    cairn(d.path())
        .args(["session", "show", "NOSUCH"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("cairn sessions --all"));
    cairn(d.path())
        .args(["sessions", "--bogus"])
        .assert()
        .code(2);
    cairn(d.path()).args(["verify"]).assert().code(2);
    cairn(d.path()).args(["frobnicate"]).assert().code(2);
}

#[test]
fn a_closed_pipe_is_not_an_error() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path().join("store")).unwrap();
    // More output than a pipe buffers, so the write really hits the closed pipe.
    for i in 0..200 {
        finished(
            &store,
            d.path(),
            &format!("session number {i} with a long name"),
        );
    }
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"))
        .args(["sessions", "--all", "--json"])
        .env("CAIRN_STORE", store.root())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut first = [0u8; 1];
    std::io::Read::read_exact(child.stdout.as_mut().unwrap(), &mut first).unwrap();
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{out:?}");
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn rm_is_refused_when_any_checkpoint_manifest_cannot_be_read() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path().join("store")).unwrap();
    let ws = d.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    std::fs::write(ws.join("a.txt"), "a\n").unwrap();
    let keep = finished(&store, &ws, "has a checkpoint");
    let doomed = finished(&store, &ws, "has none");
    let out = cairn(store.root())
        .args(["checkpoint", "save", keep.as_str(), "--json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cp = json(&out.stdout)["id"].as_str().unwrap().to_string();
    // Damage that checkpoint's manifest: whether it names `doomed` can no
    // longer be told, so `doomed` is not removed.
    let manifest = store.root().join("checkpoints").join(format!("{cp}.json"));
    std::fs::write(&manifest, b"{ damaged").unwrap();
    cairn(store.root())
        .args(["session", "rm", doomed.as_str()])
        .assert()
        .failure()
        .stderr(predicate::str::contains(&cp));
    assert!(store.journal_path(&doomed).is_file());
}

/// The keys of the store's stored responses, sorted.
fn stored_responses(store: &std::path::Path) -> Vec<String> {
    let store = Store::open(store).unwrap();
    let mut keys: Vec<String> = cairn_calls::ResponseStore::new(&store)
        .entries()
        .unwrap()
        .into_iter()
        .map(|s| s.entry.key)
        .collect();
    keys.sort();
    keys
}

/// A scripted session of one turn: its model response is stored.
fn scripted(d: &std::path::Path, store: &std::path::Path) -> String {
    let ws = d.join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let script = d.join("script.json");
    std::fs::write(
        &script,
        r#"{"turns":[{"text":"the secret plan is ready"}]}"#,
    )
    .unwrap();
    let out = cairn(store)
        .current_dir(&ws)
        .env("CAIRN_PRICES", d.join("no-prices.json"))
        .args(["run", "--json", "--model"])
        .arg(format!("script:{}", script.display()))
        .arg("the secret plan")
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    json(&out.stdout)["id"].as_str().unwrap().to_string()
}

/// `session rm` removes the stored responses (they hold prompts) before the
/// session: when that fails, the session is kept, and a second `rm` after
/// the cause is gone removes both.
#[test]
fn rm_that_fails_on_the_stored_responses_keeps_the_session_and_runs_again_to_the_end() {
    let d = tempfile::tempdir().unwrap();
    let store = d.path().join("store");
    let id = scripted(d.path(), &store);
    let entries = stored_responses(&store);
    assert_eq!(entries.len(), 1, "{entries:?}");
    // Something in the response log that cannot be read: a segment that is
    // a directory.
    let obstacle = store.join("gateway/log/0000000002.log");
    std::fs::create_dir(&obstacle).unwrap();
    let out = cairn(&store).args(["session", "rm", &id]).output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains(&format!("cairn session rm {id}")), "{err}");
    assert!(store.join("runs").join(&id).join("journal.jsonl").is_file());
    cairn(&store).args(["verify", &id]).assert().success();

    std::fs::remove_dir(&obstacle).unwrap();
    assert_eq!(stored_responses(&store), entries);
    cairn(&store)
        .args(["session", "rm", &id])
        .assert()
        .success()
        .stdout(predicate::str::contains(format!(
            "removed session {id}, and 1 stored model response(s)"
        )));
    assert!(stored_responses(&store).is_empty());
    assert!(!store.join("runs").join(&id).exists());
    cairn(&store)
        .args(["session", "show", &id])
        .assert()
        .code(2);
}

/// A removal that stopped after the session's directory was moved aside
/// (a crash there leaves `runs/.removing-ID`) lists nothing, and `rm`
/// finishes it.
#[test]
fn rm_finishes_a_removal_that_stopped_part_way() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path().join("store")).unwrap();
    let ws = d.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let id = finished(&store, &ws, "half gone");
    std::fs::rename(store.run_dir(&id), store.removing_dir(&id)).unwrap();
    let out = cairn(store.root())
        .args(["sessions", "--all", "--json"])
        .output()
        .unwrap();
    assert_eq!(json(&out.stdout), serde_json::json!([]));
    cairn(store.root())
        .args(["session", "rm", id.as_str()])
        .assert()
        .success()
        .stdout(predicate::str::contains(
            "finishing its interrupted removal",
        ));
    assert!(!store.removing_dir(&id).exists());
    cairn(store.root())
        .args(["session", "rm", id.as_str()])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(format!("no session {id}")));
}

/// `cairn sessions --json` into a pipe of the default size; returns the
/// pipe's size when the command is done and everything it printed.
fn listing_through_a_pipe(store: &std::path::Path, args: &[&str]) -> (usize, Vec<u8>) {
    use std::io::Read;
    let (r, w) = rustix::pipe::pipe().unwrap();
    assert_eq!(rustix::pipe::fcntl_getpipe_size(&r).unwrap(), 65536);
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("cairn"))
        .args(["sessions", "--all", "--json"])
        .args(args)
        .env("CAIRN_STORE", store)
        .env_remove("XDG_STATE_HOME")
        .stdout(std::process::Stdio::from(w))
        .spawn()
        .unwrap();
    let mut out = Vec::new();
    std::fs::File::from(r.try_clone().unwrap())
        .read_to_end(&mut out)
        .unwrap();
    assert!(child.wait().unwrap().success());
    (rustix::pipe::fcntl_getpipe_size(&r).unwrap(), out)
}

#[test]
fn a_long_json_listing_widens_its_pipe_and_arrives_whole() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path().join("store")).unwrap();
    let ws = d.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let n = 1030; // a listing of 1,024 or more widens the pipe
    let mut ids = std::collections::BTreeSet::new();
    for i in 0..n {
        let id = RunId::new();
        let mut w = JournalWriter::create(&store, &id, meta(&ws, &format!("s{i}"))).unwrap();
        w.append_batch(&[
            RecordBody::User(User {
                text: "task".into(),
                origin: None,
            }),
            RecordBody::Terminal(Terminal {
                reason: TerminalReason::Completed,
                totals: Totals::default(),
                detail: None,
            }),
        ])
        .unwrap();
        ids.insert(id.to_string());
    }
    let (size, out) = listing_through_a_pipe(store.root(), &[]);
    assert_eq!(size, 1 << 20, "the pipe is widened to 1 MiB");
    let listed = json(&out);
    let listed = listed.as_array().unwrap();
    let got: std::collections::BTreeSet<String> = listed
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(got, ids, "every session, once");
    assert_eq!(listed.len(), n);
    assert!(out.ends_with(b"]\n"));

    // A short listing leaves the pipe as it was.
    let (size, out) = listing_through_a_pipe(store.root(), &["--limit", "5"]);
    assert_eq!(size, 65536);
    assert_eq!(json(&out).as_array().unwrap().len(), 5);
}
