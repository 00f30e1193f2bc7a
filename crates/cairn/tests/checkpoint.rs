//! Black-box tests of `cairn checkpoint` and `cairn fork --at CHECKPOINT`
//! (DESIGN §6, §10).

mod common;

use common::*;
use serde_json::json;

fn session(s: &Scratch) -> String {
    let script = s.script("t.json", json!([
        {"text": "writing", "tool_calls": [call("w", "write_file", json!({"path": "src.txt", "content": "v1\n"}))]},
        {"text": "done"},
        {"text": "more"},
        {"text": "even more"}
    ]));
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

fn big_file(path: &std::path::Path, mb: usize, seed: u64) {
    let mut x = seed;
    let bytes: Vec<u8> = (0..mb * 1024 * 1024)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn save_ls_show_stats_and_a_small_edit_stores_only_its_chunks() {
    let s = Scratch::new();
    let id = session(&s);
    let image = s.dir.path().join("disk.img");
    big_file(&image, 8, 7);
    let out = s.run(&[
        "checkpoint",
        "save",
        &id,
        "--path",
        image.to_str().unwrap(),
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let first = json(&out.stdout);
    for k in [
        "id",
        "run",
        "seq",
        "snapshot",
        "logical_bytes",
        "stored_bytes",
    ] {
        assert!(first.get(k).is_some(), "{k}");
    }
    assert!(first["id"].as_str().unwrap().starts_with("cp_"));
    // A 4 KiB write in the middle of the image.
    let mut bytes = std::fs::read(&image).unwrap();
    bytes[4 * 1024 * 1024..4 * 1024 * 1024 + 4096].fill(0xAB);
    std::fs::write(&image, &bytes).unwrap();
    let out = s.run(&[
        "checkpoint",
        "save",
        &id,
        "--path",
        image.to_str().unwrap(),
        "--json",
    ]);
    let second = json(&out.stdout);
    let stored = second["stored_bytes"].as_u64().unwrap();
    assert!(stored < 1024 * 1024, "a 4 KiB edit stored {stored} bytes");
    assert!(second["seq"].as_u64() > first["seq"].as_u64());

    let out = s.run(&["checkpoint", "ls", &id, "--json"]);
    let list = json(&out.stdout);
    assert_eq!(list.as_array().unwrap().len(), 2);
    assert_eq!(list[0]["id"], second["id"], "newest first");
    for k in ["id", "created", "seq", "logical_bytes"] {
        assert!(list[0].get(k).is_some(), "{k}");
    }
    let out = s.run(&["checkpoint", "stats", &id, "--json"]);
    let st = json(&out.stdout);
    assert_eq!(st["checkpoints"], 2);
    assert!(st["dedup_ratio"].as_f64().unwrap() > 1.5, "{st}");
    assert!(s
        .run(&["checkpoint", "show", first["id"].as_str().unwrap()])
        .status
        .success());
    // The journal records each checkpoint.
    let recs = s.records(&id);
    assert_eq!(recs.iter().filter(|r| r["kind"] == "checkpoint").count(), 2);
    assert!(s.run(&["verify", &id]).status.success());
}

#[test]
fn a_flipped_byte_in_a_chunk_fails_verify_and_restore_changes_nothing() {
    let s = Scratch::new();
    let id = session(&s);
    let image = s.dir.path().join("disk.img");
    big_file(&image, 3, 11);
    let out = s.run(&[
        "checkpoint",
        "save",
        &id,
        "--path",
        image.to_str().unwrap(),
        "--json",
    ]);
    let cp = json(&out.stdout)["id"].as_str().unwrap().to_string();
    assert!(s.run(&["checkpoint", "verify", &cp]).status.success());
    // Damage one stored object (the largest: a chunk of the image).
    let mut objects: Vec<_> = walk(&s.store.join("objects"));
    objects.sort_by_key(|p| std::fs::metadata(p).unwrap().len());
    let victim = objects.last().unwrap();
    let mut bytes = std::fs::read(victim).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x40;
    std::fs::write(victim, bytes).unwrap();
    let out = s.run(&["checkpoint", "verify", &cp, "--json"]);
    assert_eq!(out.status.code(), Some(3));
    let v = json(&out.stdout);
    assert_eq!(v["id"], cp.as_str());
    assert_eq!(v["ok"], false);
    assert!(!v["bad"].as_array().unwrap().is_empty());
    // Restore refuses before any change.
    std::fs::write(s.ws.join("src.txt"), "edited after\n").unwrap();
    let before = std::fs::read(&image).unwrap();
    std::fs::write(&image, b"replaced").unwrap();
    let out = s.run(&["checkpoint", "restore", &cp]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(s.read("src.txt"), "edited after\n");
    assert_eq!(std::fs::read(&image).unwrap(), b"replaced");
    drop(before);
}

#[test]
fn restore_and_fork_round_trip_byte_for_byte() {
    let s = Scratch::new();
    let id = session(&s);
    let image = s.dir.path().join("disk.img");
    big_file(&image, 2, 3);
    let original = std::fs::read(&image).unwrap();
    let out = s.run(&[
        "checkpoint",
        "save",
        &id,
        "--path",
        image.to_str().unwrap(),
        "--json",
    ]);
    let cp = json(&out.stdout)["id"].as_str().unwrap().to_string();
    std::fs::write(s.ws.join("src.txt"), "changed\n").unwrap();
    std::fs::write(s.ws.join("new.txt"), "new\n").unwrap();
    std::fs::write(&image, b"short").unwrap();
    let out = s.run(&["checkpoint", "restore", &cp, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(s.read("src.txt"), "v1\n");
    assert!(!s.ws.join("new.txt").exists());
    assert_eq!(std::fs::read(&image).unwrap(), original);
    let bank = json(&out.stdout)["bank"].as_str().map(str::to_owned);

    // Fork a new lineage from the checkpoint into its own workspace.
    let dir = s.dir.path().join("forked");
    let out = s.run(&[
        "fork",
        &id,
        "--at",
        &cp,
        "--workspace",
        dir.to_str().unwrap(),
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let child = json(&out.stdout)["id"].as_str().unwrap().to_string();
    assert_eq!(
        std::fs::read_to_string(dir.join("src.txt")).unwrap(),
        "v1\n"
    );
    let recs = s.records(&child);
    assert_eq!(recs[0]["fork"]["parent"], id.as_str());
    assert_eq!(
        recs[0]["workspace"],
        std::fs::canonicalize(&dir).unwrap().to_str().unwrap()
    );
    let out = s.run(&["resume", &child, "go on", "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The fork works in its own directory, not the parent's.
    assert_eq!(s.read("src.txt"), "v1\n");
    // A non-empty directory is refused; so is a checkpoint of another session.
    let out = s.run(&[
        "fork",
        &id,
        "--at",
        &cp,
        "--workspace",
        dir.to_str().unwrap(),
    ]);
    assert_ne!(out.status.code(), Some(0));
    assert_eq!(s.run(&["fork", &id, "--at", &cp]).status.code(), Some(2));
    if let Some(bank) = bank {
        assert!(s.run(&["checkpoint", "restore", &bank]).status.success());
        assert_eq!(std::fs::read(&image).unwrap(), b"short");
    }
}

#[test]
fn prune_keeps_checkpoint_chunks() {
    let s = Scratch::new();
    let id = session(&s);
    let image = s.dir.path().join("disk.img");
    big_file(&image, 2, 5);
    let out = s.run(&[
        "checkpoint",
        "save",
        &id,
        "--path",
        image.to_str().unwrap(),
        "--json",
    ]);
    let cp = json(&out.stdout)["id"].as_str().unwrap().to_string();
    // The image's chunks are named only by the checkpoint manifest.
    let out = s.run(&["prune", "--json"]);
    assert!(out.status.success());
    assert_eq!(json(&out.stdout)["objects"], 0);
    assert!(
        s.run(&["checkpoint", "verify", &cp]).status.success(),
        "the checkpoint's chunks survived prune"
    );
    // A session with checkpoints is not deleted from under them.
    let out = s.run(&["session", "rm", &id]);
    assert_eq!(out.status.code(), Some(4));
    assert!(String::from_utf8_lossy(&out.stderr).contains("checkpoint"));
}

#[test]
fn save_journals_the_manifest_hash_it_reports() {
    let s = Scratch::new();
    let id = session(&s);
    let out = s.run(&["checkpoint", "save", &id, "--json"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let saved = json(&out.stdout);
    let manifest = saved["manifest"].as_str().unwrap().to_owned();
    assert_eq!(manifest.len(), 64, "{saved}");
    let recs = s.records(&id);
    let rec = recs
        .iter()
        .find(|r| r["kind"] == "checkpoint" && r["checkpoint"] == saved["id"])
        .unwrap();
    assert_eq!(rec["manifest"], manifest.as_str());
    let out = s.run(&[
        "checkpoint",
        "verify",
        saved["id"].as_str().unwrap(),
        "--json",
    ]);
    let v = json(&out.stdout);
    assert_eq!(v["ok"], true, "{v}");
    assert_eq!(v["anchored"], true);
    assert_eq!(v["manifest"], manifest.as_str());
}

#[test]
fn a_manifest_pointed_at_another_directory_fails_verify_and_restore_leaves_it_alone() {
    let s = Scratch::new();
    let id = session(&s);
    let state = s.dir.path().join("state");
    std::fs::create_dir(&state).unwrap();
    std::fs::write(state.join("a.json"), "{\"a\":1}").unwrap();
    let out = s.run(&[
        "checkpoint",
        "save",
        &id,
        "--path",
        state.to_str().unwrap(),
        "--json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let cp = json(&out.stdout)["id"].as_str().unwrap().to_string();

    // Someone with write access to the store points the saved path at a
    // directory of theirs choosing; nothing else in the manifest needs to
    // change for it to pass as before.
    let victim = s.dir.path().join("victim");
    std::fs::create_dir(&victim).unwrap();
    std::fs::write(victim.join("precious.txt"), "keep me").unwrap();
    std::fs::write(victim.join("a.json"), "mine").unwrap();
    let path = s.store.join("checkpoints").join(format!("{cp}.json"));
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    m["paths"][0]["path"] = json!(std::fs::canonicalize(&victim).unwrap().to_str().unwrap());
    std::fs::write(&path, serde_json::to_vec(&m).unwrap()).unwrap();

    let out = s.run(&["checkpoint", "verify", &cp]);
    assert_eq!(out.status.code(), Some(3));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("manifest") && text.contains("changed after it was saved"),
        "{text}"
    );
    assert!(!text.contains("bad of"), "{text}");
    let v = json(&s.run(&["checkpoint", "verify", &cp, "--json"]).stdout);
    assert_eq!(v["ok"], false);
    assert_eq!(v["anchored"], false);

    std::fs::write(s.ws.join("src.txt"), "edited after\n").unwrap();
    let out = s.run(&["checkpoint", "restore", &cp]);
    assert_eq!(
        out.status.code(),
        Some(3),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&cp) && err.contains("nothing was changed"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(victim.join("precious.txt")).unwrap(),
        "keep me"
    );
    assert_eq!(
        std::fs::read_to_string(victim.join("a.json")).unwrap(),
        "mine"
    );
    assert_eq!(s.read("src.txt"), "edited after\n");
    // A fork at it is refused too, before anything is written.
    let dir = s.dir.path().join("forked");
    let out = s.run(&[
        "fork",
        &id,
        "--at",
        &cp,
        "--workspace",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(3));
    assert!(!dir.exists());
}

#[test]
fn fork_at_a_checkpoint_into_an_existing_file_is_refused() {
    let s = Scratch::new();
    let id = session(&s);
    let out = s.run(&["checkpoint", "save", &id, "--json"]);
    let cp = json(&out.stdout)["id"].as_str().unwrap().to_string();
    let file = s.dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let out = s.run(&[
        "fork",
        &id,
        "--at",
        &cp,
        "--workspace",
        file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("is not a directory"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "x");
}

#[test]
fn fork_at_another_sessions_checkpoint_is_refused_and_writes_nothing() {
    let s = Scratch::new();
    let first = session(&s);
    let second = session(&s);
    let out = s.run(&["checkpoint", "save", &first, "--json"]);
    let cp = json(&out.stdout)["id"].as_str().unwrap().to_string();
    let before = json(&s.run(&["sessions", "--all", "--json"]).stdout);
    let dir = s.dir.path().join("forked");
    let out = s.run(&[
        "fork",
        &second,
        "--at",
        &cp,
        "--workspace",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("belongs to session {first}, not {second}")),
        "{err}"
    );
    assert!(!dir.exists());
    let after = json(&s.run(&["sessions", "--all", "--json"]).stdout);
    assert_eq!(before, after, "no session was made");
}

#[test]
fn fork_at_a_workspace_checkpoint_needs_a_directory() {
    let s = Scratch::new();
    let id = session(&s);
    let out = s.run(&["checkpoint", "save", &id, "--json"]);
    let cp = json(&out.stdout)["id"].as_str().unwrap().to_string();
    let out = s.run(&["fork", &id, "--at", &cp]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("needs --workspace DIR"), "{err}");
    let list = json(&s.run(&["sessions", "--all", "--json"]).stdout);
    assert_eq!(list.as_array().map(Vec::len), Some(1), "{list}");
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
