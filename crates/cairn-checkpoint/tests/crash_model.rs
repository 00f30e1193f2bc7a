//! Checkpoint saves under the crash model (`cairn_testkit::crash_model`):
//! two checkpoints of a workspace and a named file are saved and journaled
//! for real, every storage operation recorded; then every state a power cut
//! may leave after each operation is checked. Every acknowledged checkpoint
//! is listed and verifies; any other listed one is complete or is only
//! unjournaled; and the next save works.

mod common;

use std::path::Path;

use cairn_checkpoint::*;
use cairn_journal::{CheckpointRef, JournalWriter, RecordBody};
use cairn_store::{RunId, Store};
use cairn_testkit::crash_model::CrashModel;
use cairn_workspace::{CaptureConfig, Workspace};
use common::*;

fn save_one(store: &Store, run: &RunId, root: &Path, w: &mut JournalWriter) -> CheckpointId {
    let ws = Workspace::open(store, run, root.join("ws"), CaptureConfig::default()).unwrap();
    let req = SaveRequest::new(run.clone(), JournalPosition::of(w))
        .capture(&ws)
        .paths([root.join("disk.img")]);
    let r = save(store, &req, &NoProgress).unwrap();
    w.append(&RecordBody::Checkpoint(CheckpointRef {
        checkpoint: r.id.to_string(),
        manifest: Some(r.manifest.clone()),
    }))
    .unwrap();
    r.id
}

#[test]
fn acknowledged_checkpoints_survive_every_power_cut() {
    let d = tempfile::tempdir().unwrap();
    let run = RunId::new();
    let ws_dir = d.path().join("ws");
    std::fs::create_dir(&ws_dir).unwrap();
    for i in 0..4 {
        std::fs::write(
            ws_dir.join(format!("f{i}.txt")),
            format!("file {i}\n").repeat(80),
        )
        .unwrap();
    }
    std::fs::write(d.path().join("disk.img"), noise(64 << 10, 1)).unwrap();
    {
        let store = Store::open(d.path().join("store")).unwrap();
        drop(JournalWriter::create(&store, &run, meta(&ws_dir)).unwrap());
    }

    let model = CrashModel::record(d.path());
    let root = model.root();
    {
        let store = Store::open(root.join("store")).unwrap();
        let (mut w, _) = JournalWriter::open(&store, &run).unwrap();
        let first = save_one(&store, &run, &root, &mut w);
        model.ack(first.to_string());
        let second = save_one(&store, &run, &root, &mut w);
        model.ack(second.to_string());
    }

    let r = model.check(|state, acked| {
        let store = Store::open(state.join("store")).map_err(|e| e.to_string())?;
        let listed = list(&store, &run).map_err(|e| format!("listing: {e}"))?;
        for a in acked {
            if !listed.iter().any(|c| c.id.as_str() == a) {
                return Err(format!("acknowledged checkpoint {a} is not listed"));
            }
        }
        for c in &listed {
            let v = verify(&store, &c.id, &NoProgress).map_err(|e| format!("verify: {e}"))?;
            if v.ok {
                continue;
            }
            if acked.iter().any(|a| a == c.id.as_str()) {
                return Err(format!(
                    "acknowledged {} does not verify: {:?}",
                    c.id, v.bad
                ));
            }
            // Saved, not yet journaled: complete, and only that is wrong.
            if !(v.bad.len() == 1 && v.bad[0].file == "manifest" && !v.anchored) {
                return Err(format!("listed {} is damaged: {:?}", c.id, v.bad));
            }
        }
        // The next save works.
        let (mut w, _) = JournalWriter::open(&store, &run).map_err(|e| format!("reopen: {e}"))?;
        let ws = Workspace::open(&store, &run, state.join("ws"), CaptureConfig::default())
            .map_err(|e| format!("workspace: {e}"))?;
        let req = SaveRequest::new(run.clone(), JournalPosition::of(&w))
            .capture(&ws)
            .paths([state.join("disk.img")]);
        let next = save(&store, &req, &NoProgress).map_err(|e| format!("next save: {e}"))?;
        w.append(&RecordBody::Checkpoint(CheckpointRef {
            checkpoint: next.id.to_string(),
            manifest: Some(next.manifest.clone()),
        }))
        .map_err(|e| format!("journaling the next save: {e}"))?;
        Ok(())
    });
    eprintln!(
        "checkpoint: {} ops, {} crash points, {} states",
        r.ops, r.points, r.states
    );
    assert!(r.failures.is_empty(), "{:#?}", r.failures);
    assert!(r.ops > 30, "{r:?}");
}

/// Materialises a checkpoint's workspace into `forks/new/ws` below the
/// model's root (none of those directories exist yet) and acknowledges it.
fn materialized_once(model: CrashModel, f: &Fixture, cp: &CheckpointId) -> CrashModel {
    let target = model.root().join("forks/new/ws");
    materialize(&f.store, cp, &target, &NoProgress).unwrap();
    model.ack("materialized");
    model
}

/// Once `materialize` returns, a power cut keeps every file of the fork's
/// workspace, in directories it created (each created directory's entry
/// made durable by an fsync of its parent); without those fsyncs the model
/// finds states that lost them.
#[test]
fn a_materialized_workspace_survives_every_power_cut() {
    let mut f = Fixture::new();
    f.write("a.txt", b"alpha\n");
    f.write("sub/deeper/b.txt", b"beta\n");
    let cp = f.save(&[]).id;
    let want = tree(&f.root);
    let check = |state: &Path, acked: &[String]| -> Result<(), String> {
        if acked.is_empty() {
            return Ok(());
        }
        let ws = state.join("forks/new/ws");
        if !ws.is_dir() {
            return Err("the workspace directory is gone".into());
        }
        let got = tree(&ws);
        if got != want {
            return Err(format!(
                "the workspace is {:?}",
                got.keys().collect::<Vec<_>>()
            ));
        }
        Ok(())
    };
    let model = CrashModel::record(f.dir.path());
    let model = materialized_once(model, &f, &cp);
    assert!(
        model.sites().contains("checkpoint.materialize.dir"),
        "the new directories' parents were not synced: {:?}",
        model.sites()
    );
    let r = model.check(check);
    assert!(r.failures.is_empty(), "{:#?}", r.failures);

    // The same without those syncs loses the workspace in some state.
    let again = f.dir.path().join("forks");
    std::fs::remove_dir_all(&again).unwrap();
    let model = CrashModel::record(f.dir.path()).without("checkpoint.materialize.dir");
    let r = materialized_once(model, &f, &cp).check(check);
    assert!(
        r.failed > 0,
        "the model found no loss without the syncs: {r:?}"
    );
}
