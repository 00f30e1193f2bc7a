//! Black-box tests of a shared store (DESIGN §12): `cairn push` and `cairn
//! pull` with `nats://HOST:PORT/PREFIX` (journals on a real nats-server with
//! JetStream) and `--objects s3://BUCKET/PREFIX` (objects and manifests on
//! moto's real S3 API), between hosts with stores of their own.
//!
//! The tests that need the servers are `#[ignore]`d: `cargo test --test
//! shared_store -- --ignored` runs them, with nats-server on PATH (or
//! `CAIRN_NATS_SERVER`) and `CAIRN_MOTO_SERVER` naming moto's server
//! (`.ci/run` installs both); they fail when either is missing. The
//! bad-usage and unreachable-server tests need no server and always run.

mod common;

use std::path::Path;
use std::process::Output;

use cairn_testkit::nats::{free_port, Nats};
use cairn_testkit::s3::{Moto, SECRET};
use common::*;
use serde_json::{json, Value};

fn require() {
    cairn_testkit::nats::require();
    cairn_testkit::s3::require();
}

/// A nats-server and an S3 server with a bucket, as a team would run them.
struct Shared {
    nats: Nats,
    moto: Moto,
}

impl Shared {
    fn start() -> Shared {
        let nats = Nats::single();
        let moto = Moto::start();
        moto.create_bucket("team");
        Shared { nats, moto }
    }

    fn url(&self) -> String {
        self.nats.url("team")
    }
}

/// cairn with `--store STORE` and the S3 environment of `shared`.
fn at(s: &Scratch, shared: Option<&Shared>, store: &Path, args: &[&str]) -> Output {
    let mut c = s.cmd();
    c.arg("--store").arg(store).args(args);
    if let Some(sh) = shared {
        c.envs(sh.moto.env())
            .env("CAIRN_OBJECTS", "s3://team/cairn");
    }
    c.output().unwrap()
}

fn ok(s: &Scratch, shared: &Shared, store: &Path, args: &[&str]) -> Value {
    let mut all = args.to_vec();
    all.push("--json");
    let out = at(s, Some(shared), store, &all);
    assert!(out.status.success(), "{args:?}: {}", stderr(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(!text.contains(SECRET) && !stderr(&out).contains(SECRET));
    json(&out.stdout)
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A finished session that wrote a file, with a checkpoint of a 3 MiB
/// file (stored as chunks); its script has turns left for resumes.
fn session(s: &Scratch, image: &Path) -> (String, String) {
    let script = s.script("t.json", json!([
        {"text": "writing", "tool_calls": [call("w", "write_file", json!({"path": "a.txt", "content": "v1\n"}))]},
        {"text": "done"},
        {"text": "writing more", "tool_calls": [call("w2", "write_file", json!({"path": "b.txt", "content": "v2\n"}))]},
        {"text": "done again"},
        {"text": "and more", "tool_calls": [call("w3", "write_file", json!({"path": "c.txt", "content": "v3\n"}))]},
        {"text": "done a third time"},
        {"text": "one more"},
        {"text": "and another"}
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
    std::fs::write(image, noise(3 << 20, 5)).unwrap();
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

fn journal(store: &Path, id: &str) -> Vec<u8> {
    std::fs::read(store.join("runs").join(id).join("journal.jsonl")).unwrap()
}

/// The whole lines of a journal file (a preallocated tail cut).
fn lines(bytes: &[u8]) -> &[u8] {
    let end = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    &bytes[..end]
}

fn files_below(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                todo.push(p);
            } else if m.is_file() {
                out.push(p);
            }
        }
    }
    out
}

fn verify(s: &Scratch, store: &Path, id: &str) {
    let out = at(s, None, store, &["verify", id]);
    assert!(
        out.status.success(),
        "verify {id} in {}: {}",
        store.display(),
        stderr(&out)
    );
}

#[test]
#[ignore = "needs nats-server and moto: .ci/run installs them"]
fn file_to_jetstream_and_s3_to_file_round_trips_byte_for_byte() {
    require();
    let shared = Shared::start();
    let s = Scratch::new();
    let image = s.dir.path().join("disk.img");
    let (id, cp) = session(&s, &image);
    let r = ok(&s, &shared, &s.store, &["push", &id, &shared.url()]);
    let t = &r["sessions"][0];
    assert_eq!(t["status"], "copied");
    assert!(t["objects_copied"].as_u64().unwrap() > 10, "{r}");
    assert!(
        t["manifests_copied"].as_u64().unwrap() >= 2,
        "snapshots and a checkpoint: {r}"
    );
    // The second push publishes nothing and uploads nothing.
    let again = ok(&s, &shared, &s.store, &["push", &id, &shared.url()]);
    assert_eq!(again["sessions"][0]["status"], "up_to_date");
    assert_eq!(again["objects_copied"], 0);
    assert_eq!(again["bytes_copied"], 0);

    let other = s.dir.path().join("other");
    let p = ok(&s, &shared, &other, &["pull", &id, &shared.url()]);
    assert_eq!(p["sessions"][0]["status"], "copied");
    assert_eq!(lines(&journal(&other, &id)), lines(&journal(&s.store, &id)));
    verify(&s, &other, &id);
    let rel = format!("checkpoints/{cp}.json");
    assert_eq!(
        std::fs::read(other.join(&rel)).unwrap(),
        std::fs::read(s.store.join(&rel)).unwrap()
    );
    let snaps = |root: &Path| {
        let dir = root.join("runs").join(&id).join("workspace/snapshots");
        let mut v: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().to_string_lossy().into_owned(),
                    std::fs::read(e.path()).unwrap(),
                )
            })
            .collect();
        v.sort();
        v
    };
    assert_eq!(snaps(&other), snaps(&s.store));
    // A pull again changes nothing.
    let again = ok(&s, &shared, &other, &["pull", &id, &shared.url()]);
    assert_eq!(again["sessions"][0]["status"], "up_to_date");
    assert_eq!(again["bytes_copied"], 0);
    // The checkpoint's file comes back from objects that came from S3.
    std::fs::remove_file(&image).unwrap();
    let out = at(&s, None, &other, &["checkpoint", "restore", &cp]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read(&image).unwrap(), noise(3 << 20, 5));
    // No credential is written to either store.
    for root in [&s.store, &other] {
        for f in files_below(root) {
            let bytes = std::fs::read(&f).unwrap();
            assert!(
                !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
                "{} holds the secret",
                f.display()
            );
        }
    }
}

/// Host A runs a session; host B pulls it, resumes it, forks it and
/// pushes both; A pulls them back and sees both.
#[test]
#[ignore = "needs nats-server and moto: .ci/run installs them"]
fn two_hosts_share_sessions_and_forks() {
    require();
    let shared = Shared::start();
    let s = Scratch::new();
    let image = s.dir.path().join("disk.img");
    let (id, _cp) = session(&s, &image);
    let a = s.store.clone();
    let b = s.dir.path().join("host-b");
    ok(&s, &shared, &a, &["push", &id, &shared.url()]);

    ok(&s, &shared, &b, &["pull", &id, &shared.url()]);
    let out = at(&s, None, &b, &["resume", &id, "go on on host b", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = at(&s, None, &b, &["fork", &id, "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let fork = json(&out.stdout)["id"].as_str().unwrap().to_string();
    let r = ok(&s, &shared, &b, &["push", &fork, &shared.url()]);
    let pushed: Vec<(&str, &str)> = r["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| (t["id"].as_str().unwrap(), t["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        pushed,
        vec![(id.as_str(), "copied"), (fork.as_str(), "copied")],
        "{r}"
    );

    let r = ok(&s, &shared, &a, &["pull", &fork, &shared.url()]);
    assert_eq!(r["sessions"].as_array().unwrap().len(), 2, "{r}");
    let out = at(&s, None, &a, &["sessions", "--all", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let listed: Vec<String> = json(&out.stdout)
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap().to_string())
        .collect();
    assert!(listed.contains(&id) && listed.contains(&fork), "{listed:?}");
    for run in [&id, &fork] {
        verify(&s, &a, run);
        assert_eq!(lines(&journal(&a, run)), lines(&journal(&b, run)));
    }
}

/// Two hosts resume one session differently and push at once, round after
/// round: each time exactly one push wins and the other is refused with
/// exit 4, and the shared journal verifies.
#[test]
#[ignore = "needs nats-server and moto: .ci/run installs them"]
fn racing_pushes_have_one_winner_and_the_loser_exits_4() {
    require();
    let shared = Shared::start();
    let s = Scratch::new();
    let image = s.dir.path().join("disk.img");
    let (id, _cp) = session(&s, &image);
    let hosts = [s.store.clone(), s.dir.path().join("host-b")];
    ok(&s, &shared, &hosts[0], &["push", &id, &shared.url()]);
    ok(&s, &shared, &hosts[1], &["pull", &id, &shared.url()]);
    for round in 0..2 {
        for (i, h) in hosts.iter().enumerate() {
            let out = at(
                &s,
                None,
                h,
                &["resume", &id, &format!("host {i} round {round}"), "--json"],
            );
            assert!(out.status.success(), "{}", stderr(&out));
        }
        let url = shared.url();
        let children: Vec<_> = hosts
            .iter()
            .map(|h| {
                let mut c = s.cmd();
                c.arg("--store").arg(h).args(["push", &id, &url]);
                c.envs(shared.moto.env())
                    .env("CAIRN_OBJECTS", "s3://team/cairn");
                c.stdout(std::process::Stdio::piped())
                    .stderr(std::process::Stdio::piped())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let outs: Vec<Output> = children
            .into_iter()
            .map(|c| c.wait_with_output().unwrap())
            .collect();
        let codes: Vec<Option<i32>> = outs.iter().map(|o| o.status.code()).collect();
        let won: Vec<usize> = (0..2).filter(|&i| codes[i] == Some(0)).collect();
        assert_eq!(
            won.len(),
            1,
            "round {round}: {codes:?}\n{}\n{}",
            stderr(&outs[0]),
            stderr(&outs[1])
        );
        let lost = 1 - won[0];
        assert_eq!(codes[lost], Some(4), "{}", stderr(&outs[lost]));
        let e = stderr(&outs[lost]);
        assert!(e.contains(&id), "{e}");
        // The loser takes the shared history in place of its own (its
        // checkpoint keeps `session rm` from removing the session).
        std::fs::remove_dir_all(hosts[lost].join("runs").join(&id)).unwrap();
        ok(&s, &shared, &hosts[lost], &["pull", &id, &shared.url()]);
        verify(&s, &hosts[lost], &id);
        assert_eq!(
            lines(&journal(&hosts[lost], &id)),
            lines(&journal(&hosts[won[0]], &id))
        );
    }
}

#[test]
fn a_nats_remote_without_objects_is_bad_usage() {
    let s = Scratch::new();
    let out = s
        .cmd()
        .env_remove("CAIRN_OBJECTS")
        .args(["push", "--all", "nats://127.0.0.1:4222/team"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    assert!(stderr(&out).contains("--objects"), "{}", stderr(&out));
    for bad in [
        "nats://127.0.0.1:4222",
        "nats://127.0.0.1/x",
        "nats://h:1/a.b",
    ] {
        let out = s
            .cmd()
            .args([
                "pull",
                "01J00000000000000000000000",
                bad,
                "--objects",
                "s3://b/p",
            ])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad}: {}", stderr(&out));
        assert!(
            stderr(&out).contains("nats://HOST:PORT/PREFIX"),
            "{}",
            stderr(&out)
        );
    }
}

#[test]
fn an_unreachable_server_is_named_and_changes_nothing() {
    let s = Scratch::new();
    let script = s.script("t.json", json!([{"text": "hi"}]));
    let out = s.run(&[
        "run",
        "--model",
        &format!("script:{}", script.display()),
        "--json",
        "task",
    ]);
    assert!(out.status.success(), "{}", stderr(&out));
    let id = json(&out.stdout)["id"].as_str().unwrap().to_string();
    let before = journal(&s.store, &id);
    let port = free_port();
    let url = format!("nats://127.0.0.1:{port}/team");
    for args in [
        vec!["push", id.as_str(), url.as_str()],
        vec!["pull", id.as_str(), url.as_str()],
    ] {
        let out = s
            .cmd()
            .args(&args)
            .args(["--objects", "s3://team/cairn"])
            .env(
                "AWS_ENDPOINT_URL",
                format!("http://127.0.0.1:{}", free_port()),
            )
            .env("AWS_ALLOW_HTTP", "true")
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ACCESS_KEY_ID", "k")
            .env("AWS_SECRET_ACCESS_KEY", "s")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{args:?}: {}", stderr(&out));
        assert!(
            stderr(&out).contains(&format!("127.0.0.1:{port}")),
            "{}",
            stderr(&out)
        );
    }
    assert_eq!(journal(&s.store, &id), before);
}

/// cairn on "host" `cache` (its own cache directory) with `--store` the
/// shared store itself.
fn on(s: &Scratch, shared: &Shared, host: &str, args: &[&str]) -> Output {
    let mut c = s.cmd();
    c.env("CAIRN_STORE", shared.url())
        .env("CAIRN_OBJECTS", "s3://team/cairn")
        .env("XDG_CACHE_HOME", s.dir.path().join(host))
        .envs(shared.moto.env())
        .args(args);
    c.output().unwrap()
}

fn on_ok(s: &Scratch, shared: &Shared, host: &str, args: &[&str]) -> Value {
    let out = on(s, shared, host, args);
    assert!(out.status.success(), "{host} {args:?}: {}", stderr(&out));
    json(&out.stdout)
}

/// `--store nats://…` on two hosts: A runs a session and saves a
/// checkpoint; B lists it, resumes it to completion, restores the
/// checkpoint from objects it fetched from S3, and forks it; A sees both,
/// with B's turns, and every journal verifies.
#[test]
#[ignore = "needs nats-server and moto: .ci/run installs them"]
fn a_shared_store_is_one_store_for_two_hosts() {
    require();
    let shared = Shared::start();
    let s = Scratch::new();
    let script = s.script("t.json", json!([
        {"text": "writing", "tool_calls": [call("w", "write_file", json!({"path": "a.txt", "content": "v1\n"}))]},
        {"text": "done"},
        {"text": "finished on host b"}
    ]));
    let model = format!("script:{}", script.display());
    let r = on_ok(
        &s,
        &shared,
        "a",
        &["run", "--model", &model, "--json", "task"],
    );
    let id = r["id"].as_str().unwrap().to_string();
    let image = s.dir.path().join("disk.img");
    std::fs::write(&image, noise(2 << 20, 9)).unwrap();
    let cp = on_ok(
        &s,
        &shared,
        "a",
        &[
            "checkpoint",
            "save",
            &id,
            "--path",
            image.to_str().unwrap(),
            "--json",
        ],
    );
    let cp = cp["id"].as_str().unwrap().to_string();

    // Host B sees it without any copy step.
    let listed = on_ok(&s, &shared, "b", &["sessions", "--all", "--json"]);
    assert_eq!(listed[0]["id"], id.as_str(), "{listed}");
    let r = on_ok(&s, &shared, "b", &["resume", &id, "go on", "--json"]);
    assert_eq!(r["status"], "completed", "{r}");
    std::fs::remove_file(&image).unwrap();
    let out = on(&s, &shared, "b", &["checkpoint", "restore", &cp]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert_eq!(std::fs::read(&image).unwrap(), noise(2 << 20, 9));
    let fork = on_ok(&s, &shared, "b", &["fork", &id, "--json"]);
    let fork = fork["id"].as_str().unwrap().to_string();

    // Host A sees B's turns and B's fork.
    let listed = on_ok(&s, &shared, "a", &["sessions", "--all", "--json"]);
    let ids: Vec<&str> = listed
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["id"].as_str().unwrap())
        .collect();
    assert!(
        ids.contains(&id.as_str()) && ids.contains(&fork.as_str()),
        "{ids:?}"
    );
    // A's cache held the session as A left it: the listing shows it as B
    // left it (listed again once the newer records were brought in).
    let entry = |listed: &Value| {
        listed
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["id"] == id.as_str())
            .cloned()
            .unwrap()
    };
    let theirs = entry(&on_ok(&s, &shared, "b", &["sessions", "--all", "--json"]));
    let mine = entry(&listed);
    assert_eq!(mine["status"], "completed", "{mine}");
    for field in ["records", "tail", "turns"] {
        assert_eq!(
            mine[field], theirs[field],
            "{field}: {mine} against B's {theirs}"
        );
    }
    let out = on(&s, &shared, "a", &["session", "show", &id]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("finished on host b"));
    for run in [&id, &fork] {
        let out = on(&s, &shared, "a", &["verify", run]);
        assert!(out.status.success(), "{}", stderr(&out));
    }
    // What a shared store keeps whole is not removed from one host.
    let out = on(&s, &shared, "a", &["session", "rm", &fork]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    // And its cache holds no credential.
    for f in files_below(&s.dir.path().join("b")) {
        let bytes = std::fs::read(&f).unwrap();
        assert!(
            !bytes.windows(SECRET.len()).any(|w| w == SECRET.as_bytes()),
            "{}",
            f.display()
        );
    }
}

/// A cache whose copy of a session holds a record the shared store does
/// not (never acknowledged) is not trusted: the copy is set aside, not
/// deleted, and the shared store's records are used.
#[test]
#[ignore = "needs nats-server and moto: .ci/run installs them"]
fn an_unacknowledged_cached_record_is_set_aside() {
    require();
    let shared = Shared::start();
    let s = Scratch::new();
    let script = s.script("t.json", json!([{"text": "hi"}, {"text": "again"}]));
    let model = format!("script:{}", script.display());
    let r = on_ok(
        &s,
        &shared,
        "a",
        &["run", "--model", &model, "--json", "task"],
    );
    let id = r["id"].as_str().unwrap().to_string();
    let cache = std::fs::read_dir(s.dir.path().join("a/cairn/shared"))
        .unwrap()
        .next()
        .unwrap()
        .unwrap()
        .path();
    let held = journal(&cache, &id);
    // A record made durable here whose publish never happened: another
    // store's copy of the session with one more turn, as if this host had
    // crashed between its fsync and its publish.
    let other = s.dir.path().join("other");
    let out = at(&s, None, &other, &["pull", &id, cache.to_str().unwrap()]);
    assert!(out.status.success(), "{}", stderr(&out));
    let out = at(&s, None, &other, &["resume", &id, "local only", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    std::fs::write(
        cache.join("runs").join(&id).join("journal.jsonl"),
        journal(&other, &id),
    )
    .unwrap();

    let out = on(&s, &shared, "a", &["session", "show", &id]);
    assert!(out.status.success(), "{}", stderr(&out));
    assert!(stderr(&out).contains("moved to"), "{}", stderr(&out));
    assert!(!String::from_utf8_lossy(&out.stdout).contains("local only"));
    assert_eq!(lines(&journal(&cache, &id)), lines(&held));
    let aside: Vec<_> = std::fs::read_dir(cache.join("unpublished"))
        .unwrap()
        .collect();
    assert_eq!(aside.len(), 1);
}

/// `cairn prune` on a shared store races captures on another host: prunes
/// that meet an upload in flight are refused (exit 4) or wait, none
/// deletes an object a session names (every session pulls whole, every
/// object verified, on a third host), and an object nothing names, older
/// than the grace period, is deleted.
#[test]
#[ignore = "needs nats-server and moto: .ci/run installs them"]
fn a_shared_prune_racing_captures_on_another_host_loses_nothing() {
    require();
    use cairn_objects::RemoteObjects as _;
    let shared = Shared::start();
    let s = Scratch::new();
    // An object nothing names, uploaded as an interrupted capture leaves one.
    let scratch = tempfile::tempdir().unwrap();
    let store = cairn_store::Store::open(scratch.path()).unwrap();
    let pool = cairn_objects::ObjectPool::open(&store).unwrap();
    let lock = cairn_objects::StoreLock::shared(&store).unwrap();
    let orphan = pool.put_bytes(&lock, b"nothing names me").unwrap().hash;
    let s3 = cairn_remote::S3Config::new()
        .endpoint(shared.moto.endpoint())
        .region("us-east-1")
        .credentials(cairn_testkit::s3::KEY_ID, SECRET)
        .allow_http(true)
        .open("s3://team/cairn")
        .unwrap();
    cairn_objects::upload(&pool, &s3, &[orphan], &cairn_objects::NoProgress).unwrap();
    assert!(s3.contains(&orphan).unwrap());

    let captures = 12;
    let writer = {
        let s_ws = s.ws.clone();
        let url = shared.url();
        let env = shared.moto.env();
        let cache = s.dir.path().join("a");
        let bin = assert_cmd::cargo::cargo_bin("cairn");
        std::thread::spawn(move || {
            let mut ids = Vec::new();
            for i in 0..captures {
                std::fs::write(
                    s_ws.join(format!("f{i}.txt")),
                    format!("capture {i}\n").repeat(50 + i),
                )
                .unwrap();
                let out = std::process::Command::new(&bin)
                    .args(["exec", "--json", "--", "true"])
                    .env("CAIRN_STORE", &url)
                    .env("CAIRN_OBJECTS", "s3://team/cairn")
                    .env("XDG_CACHE_HOME", &cache)
                    .env_remove("CAIRN_FAULT")
                    .envs(env.iter().map(|(k, v)| (k, v.as_str())))
                    .current_dir(&s_ws)
                    .output()
                    .unwrap();
                assert!(
                    out.status.success(),
                    "capture {i}: {}",
                    String::from_utf8_lossy(&out.stderr)
                );
                ids.push(json(&out.stdout)["id"].as_str().unwrap().to_string());
            }
            ids
        })
    };
    let mut codes = Vec::new();
    while !writer.is_finished() {
        let out = on(&s, &shared, "b", &["prune", "--grace", "0s", "--json"]);
        codes.push(out.status.code());
        assert!(
            matches!(out.status.code(), Some(0) | Some(4)),
            "{}",
            stderr(&out)
        );
    }
    let ids = writer.join().unwrap();
    let last = on_ok(&s, &shared, "b", &["prune", "--grace", "0s", "--json"]);
    assert!(last["kept"].as_u64().unwrap() > 0, "{last}");
    assert!(
        !s3.contains(&orphan).unwrap(),
        "the unnamed object was deleted: {codes:?}"
    );

    // Every session pulls whole on a third host: every object it names is
    // there and verifies.
    let third = s.dir.path().join("third");
    for id in &ids {
        let out = at(&s, Some(&shared), &third, &["pull", id, &shared.url()]);
        assert!(
            out.status.success(),
            "pull {id} after {codes:?}: {}",
            stderr(&out)
        );
        verify(&s, &third, id);
    }
}

/// A 3-node cluster, streams of 3 replicas: one node is killed while a
/// run writes its records; the run finishes, and every record it
/// acknowledged is in the shared store, which verifies from another host.
#[test]
#[ignore = "needs nats-server and moto: .ci/run installs them"]
fn a_run_goes_on_when_a_node_of_the_cluster_dies() {
    require();
    let mut nats = Nats::cluster();
    let moto = Moto::start();
    moto.create_bucket("team");
    let url = format!("{}?replicas=3", nats.url("ha"));
    let s = Scratch::new();
    let turns: Vec<Value> = (0..12)
        .map(|i| json!({"text": format!("turn {i}"), "tool_calls": [call(&format!("w{i}"), "write_file", json!({"path": format!("f{i}.txt"), "content": format!("{i}\n")}))]}))
        .chain([json!({"text": "done"})])
        .collect();
    let script = s.script("t.json", Value::Array(turns));
    let cmd = |host: &str| {
        let mut c = s.cmd();
        c.env("CAIRN_STORE", &url)
            .env("CAIRN_OBJECTS", "s3://team/cairn")
            .env("XDG_CACHE_HOME", s.dir.path().join(host))
            .envs(moto.env());
        c
    };
    // The cluster elects its JetStream leader first.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while !cmd("a")
        .args(["sessions", "--all"])
        .output()
        .unwrap()
        .status
        .success()
    {
        assert!(
            std::time::Instant::now() < deadline,
            "the cluster did not come up:\n{}",
            nats.logs()
        );
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    let child = cmd("a")
        .env("CAIRN_SCRIPT_DELAY_MS", "150")
        .args([
            "run",
            "--model",
            &format!("script:{}", script.display()),
            "--json",
            "task",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(1500));
    nats.nodes[0].kill();
    let out = child.wait_with_output().unwrap();
    assert!(out.status.success(), "{}\n{}", stderr(&out), nats.logs());
    let r = json(&out.stdout);
    assert_eq!(r["status"], "completed", "{r}");
    let id = r["id"].as_str().unwrap();
    let out = cmd("b").args(["verify", id, "--json"]).output().unwrap();
    assert!(out.status.success(), "{}", stderr(&out));
    let v = json(&out.stdout);
    assert_eq!(v["records"], r["records"], "every acknowledged record: {v}");
}

/// `cairn serve` on a shared store lists what another host writes, within
/// seconds, without any command run on its own host.
#[test]
#[ignore = "needs nats-server and moto: .ci/run installs them"]
fn serve_on_a_shared_store_lists_what_another_host_writes() {
    require();
    use std::io::{Read, Write};
    let shared = Shared::start();
    let s = Scratch::new();
    let url = shared.url();
    let cache = s.dir.path().join("server");
    let mut env: Vec<(&str, String)> = shared.moto.env();
    env.push(("CAIRN_STORE", url.clone()));
    env.push(("CAIRN_OBJECTS", "s3://team/cairn".into()));
    env.push(("XDG_CACHE_HOME", cache.display().to_string()));
    let pairs: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    let served = common::Served::start(&s, &pairs);

    let script = s.script("t.json", json!([{"text": "hi from host a"}]));
    let model = format!("script:{}", script.display());
    let r = on_ok(
        &s,
        &shared,
        "a",
        &["run", "--model", &model, "--json", "task"],
    );
    let id = r["id"].as_str().unwrap().to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let mut c = std::net::TcpStream::connect(&served.addr).unwrap();
        write!(
            c,
            "GET /v1/sessions HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n",
            served.addr
        )
        .unwrap();
        let mut reply = String::new();
        c.read_to_string(&mut reply).unwrap();
        if reply.contains(&id) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{id} never listed: {reply}"
        );
        std::thread::sleep(std::time::Duration::from_millis(300));
    }
    served.stop();
}

/// A new host's first listing of a store brings every session in, sessions
/// side by side and forks after them: each arrives whole (the same records
/// and tail as on the host that made it, every journal verifying, every
/// snapshot manifest byte for byte), the objects the sessions share fetched
/// once however many ask for them. A few stale sessions are read one by
/// one.
#[test]
#[ignore = "needs nats-server and moto: .ci/run installs them"]
fn a_new_hosts_first_listing_brings_in_every_session_and_fork() {
    first_listing_brings_in(12);
}

/// The same with enough stale sessions (64 or more) that they are read in
/// one pass over the stream, their snapshot manifests found by one listing.
#[test]
#[ignore = "needs nats-server and moto: .ci/run installs them"]
fn a_first_listing_of_many_sessions_reads_them_in_one_pass() {
    first_listing_brings_in(70);
}

/// `sessions` sessions that each wrote a file, three forks, pushed from one
/// host and listed on a new one.
fn first_listing_brings_in(sessions: usize) {
    require();
    let shared = Shared::start();
    let s = Scratch::new();
    let script = s.script("t.json", json!([
        {"text": "writing", "tool_calls": [call("w", "write_file", json!({"path": "a.txt", "content": "the same in every session\n"}))]},
        {"text": "done"},
        {"text": "more"},
        {"text": "and more"}
    ]));
    let model = format!("script:{}", script.display());
    let a = s.store.clone();
    let mut ids = Vec::new();
    for i in 0..sessions {
        let out = at(
            &s,
            None,
            &a,
            &["run", "--model", &model, "--json", &format!("task {i}")],
        );
        assert!(out.status.success(), "{}", stderr(&out));
        ids.push(json(&out.stdout)["id"].as_str().unwrap().to_string());
    }
    // A fork, a fork of that fork, and a fork of another session.
    for parent in [ids[0].clone(), String::new(), ids[5].clone()] {
        let parent = if parent.is_empty() {
            ids.last().unwrap().clone()
        } else {
            parent
        };
        let out = at(&s, None, &a, &["fork", &parent, "--json"]);
        assert!(out.status.success(), "{}", stderr(&out));
        ids.push(json(&out.stdout)["id"].as_str().unwrap().to_string());
    }
    ok(&s, &shared, &a, &["push", "--all", &shared.url()]);

    let out = at(&s, None, &a, &["sessions", "--all", "--json"]);
    assert!(out.status.success(), "{}", stderr(&out));
    let here = json(&out.stdout);
    let there = on_ok(&s, &shared, "b", &["sessions", "--all", "--json"]);
    let by_id = |v: &Value| -> std::collections::BTreeMap<String, Value> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|e| (e["id"].as_str().unwrap().to_string(), e.clone()))
            .collect()
    };
    let (here, there) = (by_id(&here), by_id(&there));
    assert_eq!(here.len(), ids.len());
    assert_eq!(
        here.keys().collect::<Vec<_>>(),
        there.keys().collect::<Vec<_>>()
    );
    let cache = only_cache(&s.dir.path().join("b"));
    let mut snapshots = 0;
    for (id, mine) in &here {
        let theirs = &there[id];
        assert_eq!(theirs["valid"], true, "{theirs}");
        for field in ["records", "tail", "turns", "status", "parent"] {
            assert_eq!(
                mine[field], theirs[field],
                "{id} {field}: {mine} against {theirs}"
            );
        }
        let out = on(&s, &shared, "b", &["verify", id]);
        assert!(out.status.success(), "{id}: {}", stderr(&out));
        let rel = Path::new("runs").join(id).join("workspace/snapshots");
        let (made, came) = (files_in(&a.join(&rel)), files_in(&cache.join(&rel)));
        assert_eq!(made, came, "{id}: snapshot manifests");
        snapshots += made.len();
    }
    assert!(snapshots >= sessions, "{snapshots} snapshot manifests");
}

/// The one shared store's cache below a host's `XDG_CACHE_HOME`.
fn only_cache(home: &Path) -> std::path::PathBuf {
    let mut dirs: Vec<_> = std::fs::read_dir(home.join("cairn/shared"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(dirs.len(), 1, "{dirs:?}");
    dirs.pop().unwrap()
}

/// The files of a directory, by name, with their bytes (none when it is not
/// there).
fn files_in(dir: &Path) -> std::collections::BTreeMap<String, Vec<u8>> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Default::default();
    };
    entries
        .map(|e| e.unwrap())
        .filter(|e| e.file_type().unwrap().is_file())
        .map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect()
}

/// `cairn exec` gives up what it held when it exits, as every command
/// does: its command's status kept (7), another host resumes the session
/// right after, where a writer lease left to lapse would refuse it for a
/// minute.
#[test]
#[ignore = "needs nats-server and moto: .ci/run installs them"]
fn an_exec_lets_another_host_resume_right_after_it_exits() {
    require();
    let shared = Shared::start();
    let s = Scratch::new();
    let script = s.script(
        "t.json",
        json!([{"text": "first"}, {"text": "finished on host b"}]),
    );
    let model = format!("script:{}", script.display());
    let r = on_ok(
        &s,
        &shared,
        "a",
        &["run", "--model", &model, "--json", "task"],
    );
    let id = r["id"].as_str().unwrap().to_string();
    let out = on(
        &s,
        &shared,
        "a",
        &["exec", "--run", &id, "--json", "--", "sh", "-c", "exit 7"],
    );
    assert_eq!(out.status.code(), Some(7), "{}", stderr(&out));
    let started = std::time::Instant::now();
    let r = on_ok(&s, &shared, "b", &["resume", &id, "go on", "--json"]);
    assert_eq!(r["status"], "completed", "{r}");
    assert!(
        started.elapsed() < std::time::Duration::from_secs(20),
        "the resume waited {:?}",
        started.elapsed()
    );
}
