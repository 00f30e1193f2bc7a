//! SIGKILL at random moments of captures large enough to take the
//! file-system barrier path of the object pool (one `syncfs` instead of an
//! fsync per object). A child rewrites 300 files with new content and
//! captures, in a loop, printing each snapshot id once `capture` returned;
//! the parent kills it at random moments. Afterwards:
//!
//! - every object file under its final name decodes and hashes to its name
//!   (a torn object is never visible, only temporary files are);
//! - every snapshot that can be listed names only objects that are present
//!   and verify, and every acknowledged one is listed;
//! - the next capture works, and restoring the last acknowledged snapshot
//!   brings back exactly its files.
//!
//! The child is this same test binary, re-run with `CAIRN_WS_CRASH_DIR` set.

use std::collections::{BTreeMap, HashSet};
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use cairn_objects::{ObjectHash, ObjectPool};
use cairn_store::{RunId, Store};
use cairn_workspace::*;
use rand::Rng;

const TRIALS: usize = 30;
const FILES: usize = 300;

fn open(dir: &Path, run: &RunId) -> (Store, Workspace) {
    let store = Store::open(dir.join("store")).unwrap();
    let ws = Workspace::open(&store, run, dir.join("ws"), CaptureConfig::default()).unwrap();
    (store, ws)
}

/// Rewrites every file with content no earlier round had.
fn rewrite(root: &Path, round: &str) {
    for i in 0..FILES {
        let body = format!("round {round} file {i}\n").repeat(40 + i % 7);
        std::fs::write(root.join(format!("d{}/f{i}.txt", i % 5)), body).unwrap();
    }
}

#[test]
fn crash_child_capturer() {
    let (Ok(dir), Ok(run)) = (
        std::env::var("CAIRN_WS_CRASH_DIR"),
        std::env::var("CAIRN_WS_CRASH_RUN"),
    ) else {
        return; // Only does something when the parent test runs it.
    };
    let dir = Path::new(&dir);
    let run = RunId::parse(&run).unwrap();
    let (_store, ws) = open(dir, &run);
    let seed: u64 = rand::rng().random();
    let mut out = std::io::stdout().lock();
    for i in 0.. {
        rewrite(&dir.join("ws"), &format!("{seed}-{i}"));
        let r = ws.snapshot(None, &NoProgress).unwrap();
        // The harness may have printed `test … ` without a newline first.
        writeln!(out, "\ncaptured {}", r.snapshot).unwrap();
        out.flush().unwrap();
    }
}

/// Every object file under its final name in the pool.
fn pool_objects(store: &Store) -> Vec<ObjectHash> {
    let mut out = Vec::new();
    for fan in std::fs::read_dir(store.objects_dir()).unwrap() {
        let fan = fan.unwrap();
        if !fan.file_type().unwrap().is_dir() {
            continue;
        }
        let prefix = fan.file_name().to_string_lossy().into_owned();
        for obj in std::fs::read_dir(fan.path()).unwrap() {
            let name = obj.unwrap().file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue; // a temporary file: never named by anything
            }
            out.push(ObjectHash::parse(&format!("{prefix}{name}")).unwrap());
        }
    }
    out
}

#[test]
fn sigkill_during_large_captures_never_exposes_a_torn_object() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("ws");
    for k in 0..5 {
        std::fs::create_dir_all(root.join(format!("d{k}"))).unwrap();
    }
    rewrite(&root, "start");
    let run = RunId::new();
    let (store, ws) = open(d.path(), &run);
    let pool = ObjectPool::at(&store);

    let mut rng = rand::rng();
    let mut acked: HashSet<String> = HashSet::new();
    let mut checked: HashSet<SnapshotId> = HashSet::new();
    let mut verified_objects: HashSet<ObjectHash> = HashSet::new();
    // Kills land within a few captures' time as this machine runs them now
    // (it may be slow or shared): one round, measured here, sets the window.
    let probe = Instant::now();
    rewrite(&root, "probe");
    ws.snapshot(None, &NoProgress).unwrap();
    let round = u64::try_from(probe.elapsed().as_millis()).unwrap_or(u64::MAX);
    let window = 20..round.saturating_mul(3).saturating_add(200).max(400);
    let started = Instant::now();
    for trial in 0..TRIALS {
        let after = Duration::from_millis(rng.random_range(window.clone()));
        let env = [
            ("CAIRN_WS_CRASH_DIR", d.path().as_os_str()),
            ("CAIRN_WS_CRASH_RUN", run.as_str().as_ref()),
        ];
        acked.extend(
            cairn_testkit::kill_child_after("crash_child_capturer", &env, after)
                .iter()
                .filter_map(|l| l.strip_prefix("captured ").map(str::to_owned)),
        );

        for hash in pool_objects(&store) {
            if verified_objects.insert(hash) {
                pool.verify(&hash)
                    .unwrap_or_else(|e| panic!("trial {trial}: object {hash} is torn: {e}"));
            }
        }
        let listed = ws
            .list_snapshots()
            .unwrap_or_else(|e| panic!("trial {trial}: listing failed after SIGKILL: {e}"));
        let ids: HashSet<String> = listed.iter().map(|s| s.id.to_string()).collect();
        for a in &acked {
            assert!(
                ids.contains(a),
                "trial {trial}: acknowledged {a} not listed"
            );
        }
        for s in listed {
            if checked.insert(s.id.clone()) {
                let m = ws.manifest(&s.id).unwrap();
                for (path, e) in &m.entries {
                    assert!(
                        verified_objects.contains(&e.hash) || pool.verify(&e.hash).is_ok(),
                        "trial {trial}: {} names {path} as {}, which does not verify",
                        s.id,
                        e.hash
                    );
                }
            }
        }
    }
    assert!(
        acked.len() >= 3,
        "the child never completed enough captures ({})",
        acked.len()
    );

    // The next capture works, and a restore of the newest acknowledged
    // snapshot brings back exactly its files.
    let last = ws
        .list_snapshots()
        .unwrap()
        .into_iter()
        .find(|s| acked.contains(s.id.as_str()))
        .unwrap();
    rewrite(&root, "after");
    ws.snapshot(None, &NoProgress).unwrap();
    ws.restore_snapshot(&last.id, &NoProgress).unwrap();
    let m = ws.manifest(&last.id).unwrap();
    let mut expect: BTreeMap<String, Vec<u8>> = BTreeMap::new();
    for (path, e) in &m.entries {
        expect.insert(path.clone(), pool.get(&e.hash).unwrap());
    }
    for (path, bytes) in &expect {
        assert_eq!(&std::fs::read(root.join(path)).unwrap(), bytes, "{path}");
    }
    eprintln!(
        "{TRIALS} kills in {:?}: {} snapshots listed and checked, {} acknowledged, {} objects verified",
        started.elapsed(),
        checked.len(),
        acked.len(),
        verified_objects.len()
    );
}
