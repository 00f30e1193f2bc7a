//! Captures and restores under the crash model
//! (`cairn_testkit::crash_model`): a snapshot is captured and an older one
//! restored for real, every storage operation recorded; then every state a
//! power cut may leave after each operation is checked. Every acknowledged
//! snapshot is listed and names only objects that verify; during the
//! restore each file is one whole version, never torn; after the restore is
//! acknowledged the workspace is exactly the restored snapshot.

use std::collections::BTreeMap;
use std::path::Path;

use cairn_objects::ObjectPool;
use cairn_store::{RunId, Store};
use cairn_testkit::crash_model::CrashModel;
use cairn_workspace::*;

fn open(root: &Path, run: &RunId) -> (Store, Workspace) {
    let store = Store::open(root.join("store")).unwrap();
    let ws = Workspace::open(&store, run, root.join("ws"), CaptureConfig::default()).unwrap();
    (store, ws)
}

fn version(tag: &str, i: usize) -> String {
    format!("{tag} file {i}\n").repeat(50 + i)
}

fn write_all(ws: &Path, tag: &str, files: usize) {
    for i in 0..files {
        std::fs::write(ws.join(format!("f{i}.txt")), version(tag, i)).unwrap();
    }
}

#[test]
fn acknowledged_snapshots_and_restores_survive_every_power_cut() {
    let d = tempfile::tempdir().unwrap();
    let run = RunId::new();
    std::fs::create_dir_all(d.path().join("ws")).unwrap();
    // Before recording: snapshot A of three files, then the files at B (and
    // a fourth that only B has).
    let a = {
        write_all(&d.path().join("ws"), "A", 3);
        let (_s, ws) = open(d.path(), &run);
        ws.snapshot(None, &NoProgress).unwrap().snapshot
    };
    write_all(&d.path().join("ws"), "B", 4);

    let model = CrashModel::record(d.path());
    let root = model.root();
    let (_s, ws) = open(&root, &run);
    let b = ws.snapshot(None, &NoProgress).unwrap().snapshot;
    model.ack(format!("snapshot {b}"));
    ws.restore_snapshot(&a, &NoProgress).unwrap();
    model.ack("restored");
    drop(ws);

    let versions = |tag: &str| -> BTreeMap<String, String> {
        let n = if tag == "A" { 3 } else { 4 };
        (0..n)
            .map(|i| (format!("f{i}.txt"), version(tag, i)))
            .collect()
    };
    let (va, vb) = (versions("A"), versions("B"));
    let r = model.check(|state, acked| {
        let (store, ws) = {
            let store = Store::open(state.join("store")).map_err(|e| e.to_string())?;
            let ws = Workspace::open(&store, &run, state.join("ws"), CaptureConfig::default())
                .map_err(|e| format!("opening the workspace: {e}"))?;
            (store, ws)
        };
        let pool = ObjectPool::at(&store);
        let listed = ws.list_snapshots().map_err(|e| format!("listing: {e}"))?;
        for ack in acked.iter().filter_map(|a| a.strip_prefix("snapshot ")) {
            let s = listed
                .iter()
                .find(|s| s.id.as_str() == ack)
                .ok_or_else(|| format!("acknowledged snapshot {ack} is not listed"))?;
            let m = ws
                .manifest(&s.id)
                .map_err(|e| format!("manifest of {ack}: {e}"))?;
            for (path, e) in &m.entries {
                pool.verify(&e.hash)
                    .map_err(|err| format!("{ack} names {path}, which does not verify: {err}"))?;
            }
        }
        let restored = acked.iter().any(|a| a == "restored");
        for i in 0..4 {
            let name = format!("f{i}.txt");
            let now = std::fs::read_to_string(state.join("ws").join(&name)).ok();
            let ok = match (&now, restored) {
                (None, true) => !va.contains_key(&name),
                (Some(t), true) => va.get(&name) == Some(t),
                // Mid-restore: a whole A or B version, or (for the file only
                // B has) already removed.
                (None, false) => !va.contains_key(&name),
                (Some(t), false) => va.get(&name) == Some(t) || vb.get(&name) == Some(t),
            };
            if !ok {
                return Err(format!(
                    "{name} holds {:?} (restore acknowledged: {restored})",
                    now.map(|t| t.chars().take(24).collect::<String>())
                ));
            }
        }
        Ok(())
    });
    eprintln!(
        "workspace: {} ops, {} crash points, {} states",
        r.ops, r.points, r.states
    );
    assert!(r.failures.is_empty(), "{:#?}", r.failures);
    assert!(r.ops > 20, "{r:?}");
}
