//! SIGKILL at random moments of a save: a child saves checkpoints of a
//! workspace and a multi-MiB image in a loop (changing both between saves),
//! journals each, and prints each id once its record is durable; the parent
//! kills it at random moments. Afterwards every acknowledged checkpoint is
//! listed and verifies, every listed one is complete (it verifies, or — the
//! one killed between its manifest and its record — is reported as not
//! journaled and nothing else), and the next save works.
//!
//! The child is this same test binary, re-run with `CAIRN_CP_CRASH_DIR` set.

mod common;

use std::collections::HashSet;
use std::io::Write;
use std::path::Path;
use std::time::{Duration, Instant};

use cairn_checkpoint::*;
use cairn_journal::{CheckpointRef, JournalWriter, RecordBody};
use cairn_store::{RunId, Store};
use cairn_workspace::{CaptureConfig, Workspace};
use common::*;
use rand::Rng;

const TRIALS: usize = 36;
const IMAGE: usize = 4 << 20;

#[test]
fn crash_child_saver() {
    let (Ok(dir), Ok(run)) = (
        std::env::var("CAIRN_CP_CRASH_DIR"),
        std::env::var("CAIRN_CP_CRASH_RUN"),
    ) else {
        return; // Only does something when the parent test runs it.
    };
    let dir = Path::new(&dir);
    let store = Store::open(dir.join("store")).unwrap();
    let run = RunId::parse(&run).unwrap();
    let ws = Workspace::open(&store, &run, dir.join("ws"), CaptureConfig::default()).unwrap();
    let (mut w, _) = JournalWriter::open(&store, &run).unwrap();
    let image = dir.join("disk.img");
    let mut out = std::io::stdout().lock();
    let seed: u64 = rand::rng().random();
    for i in 0.. {
        poke(&image, 4, seed.wrapping_add(i));
        std::fs::write(dir.join("ws/counter.txt"), format!("{seed} {i}")).unwrap();
        let req = SaveRequest::new(run.clone(), JournalPosition::of(&w))
            .capture(&ws)
            .paths([&image]);
        let r = save(&store, &req, &NoProgress).unwrap();
        w.append(&RecordBody::Checkpoint(CheckpointRef {
            checkpoint: r.id.to_string(),
            manifest: Some(r.manifest.clone()),
        }))
        .unwrap();
        // The harness may have printed `test … ` without a newline first.
        writeln!(out, "\nsaved {}", r.id).unwrap();
        out.flush().unwrap();
    }
}

#[test]
fn sigkill_during_saves_never_leaves_a_partial_checkpoint() {
    let d = tempfile::tempdir().unwrap();
    let root = d.path().join("ws");
    std::fs::create_dir(&root).unwrap();
    for i in 0..20 {
        std::fs::write(root.join(format!("f{i}.txt")), format!("file {i}\n")).unwrap();
    }
    std::fs::write(d.path().join("disk.img"), noise(IMAGE, 1)).unwrap();
    let store = Store::open(d.path().join("store")).unwrap();
    let run = RunId::new();
    drop(JournalWriter::create(&store, &run, meta(&root)).unwrap());

    let mut rng = rand::rng();
    let mut acked: HashSet<String> = HashSet::new();
    let mut verified: HashSet<CheckpointId> = HashSet::new();
    let mut unjournaled: HashSet<CheckpointId> = HashSet::new();
    let started = Instant::now();
    for trial in 0..TRIALS {
        // Mostly early kills (starting up, the first save); every fourth
        // child lives a second or two longer, so that even on a loaded
        // machine some saves complete and later ones are cut.
        let longer = if trial % 4 == 3 { 1000 } else { 0 };
        let after = Duration::from_millis(longer + rng.random_range(10..300));
        let env = [
            ("CAIRN_CP_CRASH_DIR", d.path().as_os_str()),
            ("CAIRN_CP_CRASH_RUN", run.as_str().as_ref()),
        ];
        acked.extend(
            cairn_testkit::kill_child_after("crash_child_saver", &env, after)
                .iter()
                .filter_map(|l| l.strip_prefix("saved ").map(str::to_owned)),
        );

        let listed = list(&store, &run)
            .unwrap_or_else(|e| panic!("trial {trial}: listing failed after SIGKILL: {e}"));
        let ids: HashSet<String> = listed.iter().map(|c| c.id.to_string()).collect();
        for a in &acked {
            assert!(
                ids.contains(a),
                "trial {trial}: acknowledged {a} not listed"
            );
        }
        for c in listed {
            if verified.contains(&c.id) {
                continue;
            }
            let v = verify(&store, &c.id, &NoProgress).unwrap();
            let cp = show(&store, &c.id).unwrap();
            assert_eq!(cp.paths[0].bytes, IMAGE as u64);
            assert!(cp.workspace.is_some());
            if v.ok {
                verified.insert(c.id.clone());
                continue;
            }
            // Killed after the manifest, before its record: complete, but
            // nothing vouches for it, and it was never acknowledged.
            assert!(
                !acked.contains(c.id.as_str()),
                "trial {trial}: acknowledged {} does not verify: {:?}",
                c.id,
                v.bad
            );
            assert!(
                v.bad.len() == 1 && v.bad[0].file == "manifest" && !v.anchored,
                "trial {trial}: {} is damaged: {:?}",
                c.id,
                v.bad
            );
            unjournaled.insert(c.id.clone());
        }
    }
    assert!(
        verified.len() >= 3,
        "the child never completed enough saves ({})",
        verified.len()
    );

    // The next save works, and so does a restore of the last checkpoint.
    let (mut w, _) = JournalWriter::open(&store, &run).unwrap();
    let ws = Workspace::open(&store, &run, &root, CaptureConfig::default()).unwrap();
    let image = d.path().join("disk.img");
    let req = SaveRequest::new(run.clone(), JournalPosition::of(&w))
        .capture(&ws)
        .paths([&image]);
    let r = save(&store, &req, &NoProgress).unwrap();
    w.append(&RecordBody::Checkpoint(CheckpointRef {
        checkpoint: r.id.to_string(),
        manifest: Some(r.manifest.clone()),
    }))
    .unwrap();
    assert!(verify(&store, &r.id, &NoProgress).unwrap().ok);
    let expect = std::fs::read(&image).unwrap();
    std::fs::write(&image, b"gone").unwrap();
    restore(&store, &r.id, &ws, &mut w, &NoProgress).unwrap();
    assert_eq!(std::fs::read(&image).unwrap(), expect);
    let temps = std::fs::read_dir(store.checkpoints_dir())
        .unwrap()
        .filter(|e| {
            e.as_ref()
                .is_ok_and(|e| e.file_name().to_string_lossy().ends_with(".tmp"))
        })
        .count();
    eprintln!(
        "{TRIALS} kills in {:?}: {} checkpoints complete and verified, {} acknowledged, {} killed before their record, {temps} stray manifest temporaries ignored",
        started.elapsed(),
        verified.len(),
        acked.len(),
        unjournaled.len()
    );
}
