//! Push benchmark (run on demand: `cargo bench -p cairn --bench push`).
//!
//! A store of N sessions (CAIRN_BENCH_PUSH_SESSIONS, default 1,000), each a
//! `cairn exec` node that changed one file of a 40-file workspace, so each
//! has its own snapshots and a few new objects and shares the rest. Then, in
//! one run, on the same disk (CAIRN_BENCH_DIR, else the system temp dir):
//!   - `cairn push --all` into an empty store, against `cp -a` of the store
//!     (which copies bytes and fsyncs nothing, where push verifies every
//!     chain and object and fsyncs what it writes);
//!   - a second, no-op `cairn push --all` (it must read no object body: the
//!     black-box test `a_second_push_reads_no_object_and_writes_nothing`
//!     proves that), against a no-op `rsync -a` of the store when rsync is
//!     installed.
//!
//! With a shared store at hand (`nats-server` on PATH or in
//! CAIRN_NATS_SERVER, and CAIRN_MOTO_SERVER naming moto's server, as
//! `.ci/run` installs them),
//! also `cairn push --all nats://…` (journals on JetStream, objects and
//! manifests on S3, both on loopback) and its no-op repeat, against the
//! push into a directory.
//!
//! Medians; ratios against the peers.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn cairn(bin: &str, store: &Path, ws: &Path, args: &[&str]) -> std::process::Output {
    let out = Command::new(bin)
        .args(args)
        .env("CAIRN_STORE", store)
        .env_remove("CAIRN_FAULT")
        .current_dir(ws)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cairn {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn timed(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64() * 1e3
}

fn run(program: &str, args: &[&Path]) {
    let status = Command::new(program).args(args).status().unwrap();
    assert!(status.success(), "{program} failed");
}

fn size_of(dir: &Path) -> (u64, u64) {
    let (mut files, mut bytes) = (0, 0);
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let e = e.unwrap();
            let m = e.metadata().unwrap();
            if m.is_dir() {
                stack.push(e.path());
            } else {
                files += 1;
                bytes += m.len();
            }
        }
    }
    (files, bytes)
}

fn main() {
    if std::env::args().any(|a| a == "--list") {
        return;
    }
    let n: usize = std::env::var("CAIRN_BENCH_PUSH_SESSIONS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1_000);
    let bin = env!("CARGO_BIN_EXE_cairn");
    let base = cairn_testkit::bench_dir();
    let tmp = tempfile::tempdir_in(&base).unwrap();
    let (src, ws) = (tmp.path().join("store"), tmp.path().join("ws"));
    std::fs::create_dir_all(&ws).unwrap();
    for f in 0..40 {
        let text = format!("file {f}\n").repeat(200 + f * 50);
        std::fs::write(ws.join(format!("f{f:02}.txt")), text).unwrap();
    }
    let t = Instant::now();
    for i in 0..n {
        let script = format!("echo {i} >> f{:02}.txt", i % 40);
        cairn(
            bin,
            &src,
            &ws,
            &["exec", "--json", "--", "sh", "-c", &script],
        );
    }
    let (files, bytes) = size_of(&src);
    println!(
        "{n} sessions written by cairn exec in {:.1} s: {files} files, {:.1} MB (in {})",
        t.elapsed().as_secs_f64(),
        bytes as f64 / 1e6,
        base.display()
    );

    let rounds = 3;
    let mut first = Vec::new();
    let mut cp = Vec::new();
    for r in 0..rounds {
        let dst = tmp.path().join(format!("push-{r}"));
        let dst_s = dst.to_str().unwrap().to_owned();
        first.push(timed(|| {
            cairn(bin, &src, &ws, &["push", "--all", &dst_s, "--json"]);
        }));
        let copy = tmp.path().join(format!("cp-{r}"));
        cp.push(timed(|| run("cp", &[Path::new("-a"), &src, &copy])));
        std::fs::remove_dir_all(&copy).unwrap();
        if r + 1 < rounds {
            std::fs::remove_dir_all(&dst).unwrap();
        }
    }
    let dst = tmp.path().join(format!("push-{}", rounds - 1));
    let dst_s = dst.to_str().unwrap().to_owned();
    let noop = median(
        (0..5)
            .map(|_| {
                timed(|| {
                    let out = cairn(bin, &src, &ws, &["push", "--all", &dst_s, "--json"]);
                    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
                    assert_eq!(v["objects_copied"], 0, "a repeat copied objects");
                })
            })
            .collect(),
    );
    let (first, cp) = (median(first), median(cp));
    println!("cairn push --all into an empty store (median of {rounds})   {first:>9.0} ms");
    println!("cp -a of the store (median of {rounds})                      {cp:>9.0} ms   push/cp = {:.2}", first / cp);
    println!("cairn push --all again, a no-op (median of 5)          {noop:>9.0} ms   noop/first = {:.3}", noop / first);
    let rsync = Command::new("rsync").arg("--version").output().is_ok();
    if rsync {
        let mirror = tmp.path().join("rsync");
        let (from, to) = (format!("{}/", src.display()), mirror.clone());
        run("rsync", &[Path::new("-a"), Path::new(&from), &to]);
        let again = median(
            (0..5)
                .map(|_| timed(|| run("rsync", &[Path::new("-a"), Path::new(&from), &to])))
                .collect(),
        );
        println!("rsync -a again, a no-op (median of 5)                  {again:>9.0} ms   noop push/rsync = {:.2}", noop / again);
    } else {
        println!("rsync is not installed: no peer for the no-op push");
    }
    shared(bin, &src, &ws, first);
}

/// The push into a shared store, when nats-server and moto are here.
fn shared(bin: &str, src: &Path, ws: &Path, file_push: f64) {
    let nats = cairn_testkit::nats::version();
    if nats.is_empty() || std::env::var_os("CAIRN_MOTO_SERVER").is_none() {
        println!(
            "no nats-server or CAIRN_MOTO_SERVER: the push into a shared store is not measured"
        );
        return;
    }
    let server = cairn_testkit::nats::Nats::single();
    let moto = cairn_testkit::s3::Moto::start();
    let env = moto.env();
    let push = |prefix: &str| {
        let url = server.url(prefix);
        let out = Command::new(bin)
            .args(["push", "--all", &url, "--json"])
            .env("CAIRN_STORE", src)
            .env("CAIRN_OBJECTS", format!("s3://{prefix}/cairn"))
            .envs(env.iter().map(|(k, v)| (k, v.as_str())))
            .current_dir(ws)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "push to {url}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        serde_json::from_slice::<serde_json::Value>(&out.stdout).unwrap()
    };
    let rounds = 3;
    let first = median(
        (0..rounds)
            .map(|r| {
                let prefix = format!("bench{r}");
                moto.create_bucket(&prefix);
                timed(|| {
                    push(&prefix);
                })
            })
            .collect(),
    );
    let noop = median(
        (0..5)
            .map(|_| {
                timed(|| {
                    let v = push("bench0");
                    assert_eq!(v["objects_copied"], 0, "a repeat copied objects");
                    assert_eq!(v["bytes_copied"], 0, "a repeat wrote bytes");
                })
            })
            .collect(),
    );
    println!("cairn push --all to nats+s3 (nats-server {nats}, moto; median of {rounds})  {first:>9.0} ms   shared/directory = {:.2}", first / file_push);
    println!("cairn push --all to nats+s3 again, a no-op (median of 5) {noop:>7.0} ms   noop/first = {:.3}", noop / first);
}
