//! Black-box tests of `cairn push` and `cairn pull` between store
//! directories (DESIGN §12): sessions arrive whole (journal byte for byte,
//! snapshots, checkpoints, objects, a fork's parent), repeating a copy
//! writes nothing, new records are appended, and damaged, incomplete or
//! diverged sources change nothing in the destination.

mod common;

use std::path::{Path, PathBuf};
use std::process::Output;

use common::*;
use serde_json::{json, Value};

/// A finished session that wrote a file, with a checkpoint holding a 3 MiB
/// file (stored as chunks). Its script has turns left for two resumes.
fn session(s: &Scratch) -> (String, String) {
    let script = s.script("t.json", json!([
        {"text": "writing", "tool_calls": [call("w", "write_file", json!({"path": "a.txt", "content": "v1\n"}))]},
        {"text": "done"},
        {"text": "writing more", "tool_calls": [call("w2", "write_file", json!({"path": "b.txt", "content": "v2\n"}))]},
        {"text": "done again"},
        {"text": "and more", "tool_calls": [call("w3", "write_file", json!({"path": "c.txt", "content": "v3\n"}))]},
        {"text": "done a third time"}
    ]));
    let out = s.run(&[
        "run",
        "--model",
        &format!("script:{}", script.display()),
        "--json",
        "task",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let id = json(&out.stdout)["id"].as_str().unwrap().to_string();
    let image = s.dir.path().join("disk.img");
    std::fs::write(&image, noise(3 << 20, 5)).unwrap();
    let out = s.run(&[
        "checkpoint",
        "save",
        &id,
        "--path",
        image.to_str().unwrap(),
        "--json",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let cp = json(&out.stdout)["id"].as_str().unwrap().to_string();
    (id, cp)
}

fn noise(len: usize, mut x: u64) -> Vec<u8> {
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// cairn with `--store STORE`.
fn at(s: &Scratch, store: &Path, args: &[&str]) -> Output {
    s.cmd()
        .arg("--store")
        .arg(store)
        .args(args)
        .output()
        .unwrap()
}

/// `cairn [--store FROM] push|pull … --json`, which must succeed.
fn copy(s: &Scratch, store: &Path, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = at(s, store, &all);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    json(&out.stdout)
}

fn push(s: &Scratch, id: &str, remote: &Path) -> Value {
    copy(s, &s.store, &["push", id, remote.to_str().unwrap()])
}

fn journal(store: &Path, id: &str) -> Vec<u8> {
    std::fs::read(store.join("runs").join(id).join("journal.jsonl")).unwrap()
}

/// Every directory and file below `dir`: kind, length, mtime, bytes.
fn tree(dir: &Path) -> Vec<(PathBuf, bool, u64, std::time::SystemTime, Vec<u8>)> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let bytes = if m.is_file() {
                std::fs::read(&p).unwrap()
            } else {
                Vec::new()
            };
            if m.is_dir() {
                todo.push(p.clone());
            }
            out.push((p, m.is_dir(), m.len(), m.modified().unwrap(), bytes));
        }
    }
    out.sort();
    out
}

/// Every object hash the session's snapshot and checkpoint manifests name.
fn named_objects(store: &Path, id: &str) -> Vec<String> {
    let mut out = Vec::new();
    let snaps = store.join("runs").join(id).join("workspace/snapshots");
    for e in std::fs::read_dir(snaps).unwrap() {
        let m: Value = serde_json::from_slice(&std::fs::read(e.unwrap().path()).unwrap()).unwrap();
        for entry in m["entries"].as_object().unwrap().values() {
            out.push(entry["hash"].as_str().unwrap().to_string());
        }
    }
    for e in std::fs::read_dir(store.join("checkpoints")).unwrap() {
        let m: Value = serde_json::from_slice(&std::fs::read(e.unwrap().path()).unwrap()).unwrap();
        if m["run"] != id {
            continue;
        }
        for p in m["paths"].as_array().unwrap() {
            for entry in p["entries"].as_array().unwrap() {
                out.push(entry["hash"].as_str().unwrap().to_string());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

fn object_path(store: &Path, hash: &str) -> PathBuf {
    store.join("objects").join(&hash[..2]).join(&hash[2..])
}

fn listed(s: &Scratch, store: &Path, id: &str) -> Value {
    let out = at(s, store, &["sessions", "--all", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    json(&out.stdout)
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["id"] == id)
        .unwrap_or_else(|| panic!("{id} not listed in {}", store.display()))
        .clone()
}

fn resume(s: &Scratch, store: &Path, id: &str, text: &str) {
    let out = at(s, store, &["resume", id, text, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
}

#[test]
fn push_to_a_new_store_copies_the_session_whole() {
    let s = Scratch::new();
    let (id, cp) = session(&s);
    // A directory that does not exist yet is created as a store.
    let remote = s.dir.path().join("remote/store");
    let r = push(&s, &id, &remote);
    let t = &r["sessions"][0];
    let records = s.records(&id).len() as u64;
    assert_eq!(t["id"], id.as_str());
    assert_eq!(t["status"], "copied");
    assert_eq!(t["records_copied"], records);
    assert_eq!(t["records"], records);
    // a.txt and the 3 MiB file, a chunk list whose chunks come with it:
    // every object now in the new store's pool was copied, and counted.
    let objects = remote.join("objects");
    let in_pool = tree(&objects)
        .iter()
        .filter(|(p, is_dir, ..)| !is_dir && p.parent() != Some(objects.as_path()))
        .count() as u64;
    assert!(in_pool > 2, "the chunks did not come: {in_pool}");
    assert_eq!(t["objects_copied"], in_pool, "{r}");
    assert!(t["manifests_copied"].as_u64().unwrap() >= 2, "{r}");
    assert_eq!(r["objects_copied"], t["objects_copied"]);
    assert_eq!(r["bytes_copied"], t["bytes_copied"]);

    assert_eq!(journal(&s.store, &id), journal(&remote, &id));
    assert!(at(&s, &remote, &["verify", &id]).status.success());
    let here = listed(&s, &s.store, &id);
    let there = listed(&s, &remote, &id);
    assert_eq!(there["tail"], here["tail"]);
    assert_eq!(there["tail"], t["tail"]);
    assert_eq!(there["valid"], true);
    let out = at(&s, &remote, &["checkpoint", "verify", &cp, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(json(&out.stdout)["ok"], true);
    let snaps = |store: &Path| {
        let out = at(&s, store, &["rewind", &id, "--list-snapshots", "--json"]);
        assert!(out.status.success(), "{}", stderr(&out));
        json(&out.stdout)
    };
    assert_eq!(snaps(&remote), snaps(&s.store));
    let named = named_objects(&s.store, &id);
    assert_eq!(named.len(), 2);
    for h in &named {
        assert!(object_path(&remote, h).is_file(), "object {h} not copied");
    }
}

#[test]
fn a_second_push_reads_no_object_and_writes_nothing() {
    let s = Scratch::new();
    let (id, _) = session(&s);
    let remote = s.dir.path().join("remote");
    push(&s, &id, &remote);
    let before = tree(&remote);
    // Were a body read, it would not verify now.
    for h in named_objects(&s.store, &id) {
        std::fs::write(object_path(&s.store, &h), b"garbage").unwrap();
    }
    let r = push(&s, &id, &remote);
    let t = &r["sessions"][0];
    assert_eq!(t["status"], "up_to_date");
    for k in [
        "records_copied",
        "objects_copied",
        "bytes_copied",
        "manifests_copied",
    ] {
        assert_eq!(t[k], 0, "{k}: {r}");
    }
    assert_eq!(
        (&r["objects_copied"], &r["bytes_copied"]),
        (&json!(0), &json!(0))
    );
    assert_eq!(
        tree(&remote),
        before,
        "the second push changed the destination"
    );
    // Said in words without --json.
    let out = at(&s, &s.store, &["push", &id, remote.to_str().unwrap()]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("up to date"));
}

#[test]
fn only_new_records_are_pushed_after_a_resume() {
    let s = Scratch::new();
    let (id, _) = session(&s);
    let remote = s.dir.path().join("remote");
    push(&s, &id, &remote);
    let old = s.records(&id).len() as u64;
    resume(&s, &s.store, &id, "more");
    let new = s.records(&id).len() as u64;
    assert!(new > old);
    let r = push(&s, &id, &remote);
    let t = &r["sessions"][0];
    assert_eq!(t["status"], "copied");
    assert_eq!(t["records_copied"], new - old);
    assert_eq!(t["records"], new);
    assert!(t["manifests_copied"].as_u64().unwrap() >= 1, "{r}");
    assert_eq!(journal(&s.store, &id), journal(&remote, &id));
    assert!(at(&s, &remote, &["verify", &id]).status.success());
    assert_eq!(
        listed(&s, &remote, &id)["tail"],
        listed(&s, &s.store, &id)["tail"]
    );
}

#[test]
fn pull_into_a_third_store_round_trips_byte_for_byte() {
    let s = Scratch::new();
    let (id, cp) = session(&s);
    let remote = s.dir.path().join("remote");
    push(&s, &id, &remote);
    let third = s.dir.path().join("third");
    let url = format!("file://{}", remote.display());
    let r = copy(&s, &third, &["pull", &id, &url]);
    assert_eq!(r["sessions"][0]["status"], "copied");
    assert_eq!(journal(&third, &id), journal(&s.store, &id));
    assert!(at(&s, &third, &["verify", &id]).status.success());
    assert!(at(&s, &third, &["checkpoint", "verify", &cp])
        .status
        .success());
    let again = copy(&s, &third, &["pull", &id, &url]);
    assert_eq!(again["sessions"][0]["status"], "up_to_date");

    // Resumed over there, pulled back here: the new records are appended.
    resume(&s, &remote, &id, "go on there");
    let r = copy(&s, &s.store, &["pull", &id, remote.to_str().unwrap()]);
    assert_eq!(r["sessions"][0]["status"], "copied");
    assert!(r["sessions"][0]["records_copied"].as_u64().unwrap() > 0);
    assert_eq!(journal(&s.store, &id), journal(&remote, &id));
    assert!(s.run(&["verify", &id]).status.success());
    // And this store may resume it from there.
    resume(&s, &s.store, &id, "and here");
}

#[test]
fn pushing_a_fork_brings_its_parent() {
    let s = Scratch::new();
    let (id, _) = session(&s);
    let out = s.run(&["fork", &id, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let child = json(&out.stdout)["id"].as_str().unwrap().to_string();
    let remote = s.dir.path().join("remote");
    let r = push(&s, &child, &remote);
    let ids: Vec<&str> = r["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, [id.as_str(), child.as_str()], "the parent first");
    for run in [&id, &child] {
        assert!(at(&s, &remote, &["verify", run]).status.success(), "{run}");
        assert_eq!(journal(&remote, run), journal(&s.store, run));
    }
    let kid = listed(&s, &remote, &child);
    assert_eq!(kid["valid"], true, "{kid}");
    assert_eq!(kid["parent"]["id"], id.as_str());
}

#[test]
fn diverged_histories_are_refused_and_change_nothing() {
    let s = Scratch::new();
    let (id, _) = session(&s);
    let remote = s.dir.path().join("remote");
    push(&s, &id, &remote);
    let shared = s.records(&id).len();
    resume(&s, &s.store, &id, "here");
    resume(&s, &remote, &id, "there");
    let before = tree(&remote);
    let out = at(&s, &s.store, &["push", &id, remote.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "different histories of session {id} from seq {}",
            shared + 1
        )),
        "{err}"
    );
    assert!(err.contains("nothing was copied"), "{err}");
    assert_eq!(tree(&remote), before);
}

#[test]
fn a_damaged_source_journal_is_refused_and_the_destination_untouched() {
    let s = Scratch::new();
    let (id, _) = session(&s);
    let remote = s.dir.path().join("remote");
    std::fs::create_dir_all(remote.join("runs")).unwrap();
    let path = s.store.join("runs").join(&id).join("journal.jsonl");
    let mut bytes = std::fs::read(&path).unwrap();
    let at_text = bytes
        .windows(b"\"done\"".len())
        .position(|w| w == b"\"done\"")
        .unwrap();
    bytes[at_text + 1] = b'D';
    std::fs::write(&path, &bytes).unwrap();
    let bad_seq = s.records(&id).iter().find(|r| r["text"] == "Done").unwrap()["seq"]
        .as_u64()
        .unwrap();
    let before = tree(&remote);
    let out = at(&s, &s.store, &["push", &id, remote.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    let err = stderr(&out);
    assert!(err.contains(&id), "{err}");
    assert!(err.contains(&format!("seq {bad_seq}")), "{err}");
    assert_eq!(tree(&remote), before);
}

#[test]
fn a_missing_source_object_is_refused_before_the_journal() {
    let s = Scratch::new();
    let (id, _) = session(&s);
    let gone = named_objects(&s.store, &id).remove(0);
    std::fs::remove_file(object_path(&s.store, &gone)).unwrap();
    let remote = s.dir.path().join("remote");
    let out = at(&s, &s.store, &["push", &id, remote.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(3), "{}", stderr(&out));
    assert!(stderr(&out).contains(&gone), "{}", stderr(&out));
    assert!(!remote.join("runs").join(&id).join("journal.jsonl").exists());
}

#[test]
fn push_all_copies_every_session() {
    let s = Scratch::new();
    let (id, _) = session(&s);
    let out = s.run(&["fork", &id, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let child = json(&out.stdout)["id"].as_str().unwrap().to_string();
    let out = s.run(&["exec", "--json", "--", "sh", "-c", "echo x > exec.txt"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let exec = json(&out.stdout)["id"].as_str().unwrap().to_string();
    let remote = s.dir.path().join("remote");
    let r = copy(&s, &s.store, &["push", "--all", remote.to_str().unwrap()]);
    let mut ids: Vec<String> = r["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 3, "{r}");
    ids.sort();
    let mut want = vec![id.clone(), child.clone(), exec.clone()];
    want.sort();
    assert_eq!(ids, want);
    for run in [&id, &child, &exec] {
        assert_eq!(journal(&remote, run), journal(&s.store, run));
        assert_eq!(listed(&s, &remote, run)["valid"], true);
    }
    let again = copy(&s, &s.store, &["push", "--all", remote.to_str().unwrap()]);
    assert_eq!(again["objects_copied"], 0);
    assert!(again["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .all(|t| t["status"] == "up_to_date"));
}

#[test]
fn a_destination_being_written_is_refused_naming_it() {
    let s = Scratch::new();
    let (id, _) = session(&s);
    let remote = s.dir.path().join("remote");
    push(&s, &id, &remote);
    resume(&s, &s.store, &id, "more");
    let lock = remote.join("runs").join(&id).join("journal.lock");
    // `-o`: the lock is held by flock itself, not by the command it runs.
    let mut holder = std::process::Command::new("flock")
        .arg("-o")
        .arg(&lock)
        .args(["sleep", "30"])
        .spawn()
        .unwrap();
    wait_until(10, "flock to hold the lock", || {
        std::process::Command::new("flock")
            .args(["-n"])
            .arg(&lock)
            .arg("true")
            .status()
            .unwrap()
            .code()
            == Some(1)
    });
    let before = journal(&remote, &id);
    let out = at(&s, &s.store, &["push", &id, remote.to_str().unwrap()]);
    kill(&mut holder, libc::SIGKILL);
    let _ = holder.wait();
    assert_eq!(out.status.code(), Some(4), "{}", stderr(&out));
    assert!(stderr(&out).contains("being written by another process"));
    assert_eq!(journal(&remote, &id), before);
    push(&s, &id, &remote);
    assert_eq!(journal(&remote, &id), journal(&s.store, &id));
}

#[test]
fn bad_remotes_are_bad_usage() {
    let s = Scratch::new();
    let (id, _) = session(&s);
    let file = s.dir.path().join("a-file");
    std::fs::write(&file, "not a store").unwrap();
    let missing = s.dir.path().join("nowhere");
    let store = s.store.to_str().unwrap().to_string();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (
            vec!["push".into(), id.clone(), "nats://x".into()],
            "--objects s3://BUCKET/PREFIX",
        ),
        (
            vec!["push".into(), id.clone(), "s3://bucket/p".into()],
            "not a s3:// location",
        ),
        (
            vec!["pull".into(), id.clone(), "http://host/x".into()],
            "not a http:// location",
        ),
        (
            vec![
                "push".into(),
                "--all".into(),
                "nats://x".into(),
                "--objects".into(),
                "s3://b/p".into(),
            ],
            "nats://HOST:PORT/PREFIX",
        ),
        (
            vec!["push".into(), id.clone(), "file://relative/dir".into()],
            "absolute path",
        ),
        (
            vec!["pull".into(), id.clone(), missing.display().to_string()],
            "cannot pull from",
        ),
        (
            vec!["push".into(), id.clone(), file.display().to_string()],
            "not a directory",
        ),
        (
            vec!["pull".into(), id.clone(), file.display().to_string()],
            "not a directory",
        ),
        (
            vec!["push".into(), id.clone(), store.clone()],
            "this store itself",
        ),
        (
            vec!["push".into(), "--all".into(), id.clone(), "x".into()],
            "--all",
        ),
        (vec!["push".into(), id.clone()], "push ID REMOTE"),
        (
            vec!["push".into(), "NOSUCH".into(), "r".into()],
            "no session matches `NOSUCH`",
        ),
    ];
    for (args, says) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let out = s.run(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", stderr(&out));
        assert!(stderr(&out).contains(says), "{args:?}: {}", stderr(&out));
    }
    // Pull from a store that lacks the session.
    let empty = s.dir.path().join("empty");
    std::fs::create_dir(&empty).unwrap();
    let out = s.run(&["pull", &id, empty.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains(&format!("no session {id}")));
    assert!(!s.dir.path().join("r").exists());
}

/// Moves `store/rel` to `outside/rel` and puts a symbolic link to it in
/// its place; returns the directory it now lives in.
fn link_out(store: &Path, rel: &str, outside: &Path) -> PathBuf {
    let real = outside.join(rel.replace('/', "_"));
    let at = store.join(rel);
    if at.exists() {
        std::fs::rename(&at, &real).unwrap();
    } else {
        std::fs::create_dir_all(&real).unwrap();
    }
    std::os::unix::fs::symlink(&real, &at).unwrap();
    real
}

/// No symbolic link inside either store is followed: a copy whose source
/// reaches an object through a linked `objects/aa`, or whose destination's
/// `objects/`, `runs/` or session directory is a link out of the store, is
/// refused (exit 4, naming the link) in both directions, and nothing is
/// written outside either store nor any record of the session into the
/// destination.
#[test]
fn links_inside_either_store_are_refused_and_nothing_lands_outside() {
    let s = Scratch::new();
    let (id, _) = session(&s);
    let hash = named_objects(&s.store, &id).remove(0);
    // A clean copy of the session, to link things in.
    let clean = s.dir.path().join("clean");
    push(&s, &id, &clean);
    let cases: [(&str, bool, String); 4] = [
        (
            "a linked objects/aa in the source",
            true,
            format!("objects/{}", &hash[..2]),
        ),
        (
            "a linked objects/ in the destination",
            false,
            "objects".into(),
        ),
        ("a linked runs/ in the destination", false, "runs".into()),
        (
            "a linked session directory in the destination",
            false,
            format!("runs/{id}"),
        ),
    ];
    let mut failures = Vec::new();
    for (n, (what, in_source, rel)) in cases.into_iter().enumerate() {
        let case = s.dir.path().join(format!("case{n}"));
        let outside = case.join("outside");
        std::fs::create_dir_all(&outside).unwrap();
        let (src, dst) = (case.join("src"), case.join("dst"));
        copy(&s, &src, &["pull", &id, clean.to_str().unwrap()]);
        std::fs::create_dir_all(dst.join("runs")).unwrap();
        if in_source {
            link_out(&src, &rel, &outside);
        } else {
            link_out(&dst, &rel, &outside);
        }
        let before = (tree(&outside), tree(&dst));
        let src_s = src.to_str().unwrap();
        let dst_s = dst.to_str().unwrap();
        for (store, args) in [
            (&src, ["push", id.as_str(), dst_s]),
            (&dst, ["pull", id.as_str(), src_s]),
        ] {
            let out = at(&s, store, &args);
            let err = stderr(&out);
            let mut wrong = Vec::new();
            if out.status.code() != Some(4) {
                wrong.push(format!("exit {:?}", out.status.code()));
            }
            if !(err.contains("symbolic link") && err.contains(&rel)) {
                wrong.push("the link is not named".to_string());
            }
            if tree(&outside) != before.0 {
                wrong.push("written outside".to_string());
            }
            if tree(&dst) != before.1 {
                wrong.push("the destination changed".to_string());
            }
            if !wrong.is_empty() {
                failures.push(format!("{what}, {}: {}: {err}", args[0], wrong.join(", ")));
            }
        }
    }
    assert!(failures.is_empty(), "{failures:#?}");
}
