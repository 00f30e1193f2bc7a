//! What a test acknowledged — every command that exited 0 — and the checks
//! that all of it is still there: journals only ever grow, acknowledged
//! manifests are unchanged, and every object they name reads back whole.
//! Shared by the disk-full tests and the SIGKILL soak.

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::path::{Path, PathBuf};
use std::process::Output;

use cairn_objects::{ObjectHash, ObjectPool};
use cairn_store::Store;
use serde_json::Value;

use super::{json, Scratch};

pub type Tree = BTreeMap<String, Vec<u8>>;

/// Every regular file beneath `root`, by its relative path — but not
/// cairn's own temporary files: a process killed between staging a write
/// and renaming it leaves one behind, and captures exclude them by design
/// (`cairn_store::safe::TEMP_PREFIX`).
pub fn read_tree(root: &Path) -> Tree {
    fn walk(root: &Path, dir: &Path, out: &mut Tree) {
        for e in std::fs::read_dir(dir).unwrap() {
            let e = e.unwrap();
            if cairn_store::safe::is_temp_name(&e.file_name().to_string_lossy()) {
                continue;
            }
            let ty = e.file_type().unwrap();
            if ty.is_dir() {
                walk(root, &e.path(), out);
            } else if ty.is_file() {
                let rel = e
                    .path()
                    .strip_prefix(root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                out.insert(rel, std::fs::read(e.path()).unwrap());
            }
        }
    }
    let mut out = Tree::new();
    walk(root, root, &mut out);
    out
}

pub fn journal_bytes(s: &Scratch, run: &str) -> Vec<u8> {
    let path = s.store.join("runs").join(run).join("journal.jsonl");
    std::fs::read(&path).unwrap_or_else(|e| panic!("session {run}: reading its journal: {e}"))
}

/// The bytes up to and including the last newline.
pub fn complete_lines(mut bytes: Vec<u8>) -> Vec<u8> {
    let end = bytes.iter().rposition(|b| *b == b'\n').map_or(0, |i| i + 1);
    bytes.truncate(end);
    bytes
}

pub fn snapshot_path(s: &Scratch, run: &str, id: &str) -> PathBuf {
    s.store
        .join("runs")
        .join(run)
        .join("workspace/snapshots")
        .join(format!("{id}.json"))
}

pub fn checkpoint_path(s: &Scratch, id: &str) -> PathBuf {
    s.store.join("checkpoints").join(format!("{id}.json"))
}

pub fn sha(bytes: &[u8]) -> String {
    ObjectHash::of(bytes).to_hex()
}

/// Everything cairn acknowledged, by a command that exited 0.
#[derive(Default)]
pub struct Ledger {
    /// Per session: its journal's complete lines after its last acknowledged
    /// command (every one of them was durable when that command exited).
    pub journals: BTreeMap<String, Vec<u8>>,
    /// Per acknowledged snapshot (run, id): its manifest's bytes.
    pub snapshots: BTreeMap<(String, String), Vec<u8>>,
    /// Per acknowledged checkpoint: its manifest's bytes.
    pub checkpoints: BTreeMap<String, Vec<u8>>,
    /// Objects read back whole and found right.
    pub good: HashSet<String>,
}

impl Ledger {
    /// A command that wrote to session `run` exited 0.
    pub fn journal(&mut self, s: &Scratch, run: &str) {
        let now = complete_lines(journal_bytes(s, run));
        if let Some(before) = self.journals.get(run) {
            assert!(
                now.starts_with(before),
                "session {run}: an acknowledged record changed or went missing"
            );
        }
        self.journals.insert(run.to_string(), now);
    }

    /// `cairn snapshot` acknowledged snapshot `id` of `run`, taken of `tree`.
    pub fn snapshot(&mut self, s: &Scratch, run: &str, id: &str, tree: &Tree) {
        let path = snapshot_path(s, run, id);
        let bytes = std::fs::read(&path)
            .unwrap_or_else(|e| panic!("acknowledged snapshot {id}: {}: {e}", path.display()));
        let manifest: Value = serde_json::from_slice(&bytes).unwrap();
        let held: BTreeMap<String, String> = manifest["entries"]
            .as_object()
            .unwrap()
            .iter()
            .map(|(p, e)| (p.clone(), e["hash"].as_str().unwrap().to_string()))
            .collect();
        let want: BTreeMap<String, String> =
            tree.iter().map(|(p, c)| (p.clone(), sha(c))).collect();
        assert_eq!(
            held, want,
            "snapshot {id} does not hold the workspace it was taken of"
        );
        for h in held.values() {
            self.object(s, h);
        }
        self.snapshots
            .insert((run.to_string(), id.to_string()), bytes);
    }

    /// `cairn checkpoint save --json` printed `v`, for a workspace of `tree`.
    pub fn checkpoint(&mut self, s: &Scratch, v: &Value, tree: &Tree) {
        let id = v["id"].as_str().unwrap();
        let bytes = std::fs::read(checkpoint_path(s, id))
            .unwrap_or_else(|e| panic!("acknowledged checkpoint {id}: {e}"));
        assert_eq!(
            sha(&bytes),
            v["manifest"].as_str().unwrap(),
            "checkpoint {id}"
        );
        self.checkpoints.insert(id.to_string(), bytes);
        let run = v["run"].as_str().unwrap();
        self.snapshot(s, run, v["snapshot"].as_str().unwrap(), tree);
        self.journal(s, run);
    }

    pub fn object(&mut self, s: &Scratch, hash: &str) {
        if self.good.contains(hash) {
            return;
        }
        let pool = ObjectPool::at(&Store::at(&s.store));
        pool.verify(&ObjectHash::parse(hash).unwrap())
            .unwrap_or_else(|e| panic!("object {hash}, named by an acknowledged snapshot: {e}"));
        self.good.insert(hash.to_string());
    }

    /// Everything acknowledged is still there: every journal still begins
    /// with its acknowledged lines, every snapshot those lines name has its
    /// manifest and (with `full`, read again from scratch) its objects, every
    /// checkpoint they name its manifest, and every acknowledged manifest is
    /// unchanged. `only` limits the journals and snapshots to those of some
    /// sessions (those a trial wrote to).
    pub fn check(&mut self, s: &Scratch, full: bool, only: Option<&BTreeSet<String>>) {
        if full {
            self.good.clear();
        }
        let wanted = |run: &String| only.is_none_or(|o| o.contains(run));
        let mut manifests: Vec<(String, String)> = Vec::new();
        for (run, before) in self.journals.iter().filter(|(r, _)| wanted(r)) {
            let now = journal_bytes(s, run);
            assert!(
                now.starts_with(before),
                "session {run}: an acknowledged record changed or went missing"
            );
            for line in before.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
                let r: Value = serde_json::from_slice(line).unwrap();
                match r["kind"].as_str() {
                    Some("snapshot") => {
                        manifests.push((run.clone(), r["snapshot"].as_str().unwrap().into()))
                    }
                    Some("checkpoint") => {
                        let id = r["checkpoint"].as_str().unwrap();
                        let bytes = std::fs::read(checkpoint_path(s, id)).unwrap_or_else(|e| {
                            panic!("checkpoint {id}, journaled in {run}: its manifest: {e}")
                        });
                        if let Some(m) = r["manifest"].as_str() {
                            assert_eq!(sha(&bytes), m, "checkpoint {id}'s manifest changed");
                        }
                    }
                    _ => {}
                }
            }
        }
        for ((run, id), bytes) in self.snapshots.iter().filter(|((r, _), _)| wanted(r)) {
            let now = std::fs::read(snapshot_path(s, run, id)).ok();
            assert!(
                now.as_ref() == Some(bytes),
                "acknowledged snapshot {id} changed or went missing"
            );
        }
        for (id, bytes) in &self.checkpoints {
            let now = std::fs::read(checkpoint_path(s, id)).ok();
            assert!(
                now.as_ref() == Some(bytes),
                "acknowledged checkpoint {id} changed or went missing"
            );
        }
        manifests.sort();
        manifests.dedup();
        for (run, id) in manifests {
            let path = snapshot_path(s, &run, &id);
            let bytes = std::fs::read(&path).unwrap_or_else(|e| {
                panic!(
                    "snapshot {id}, journaled in {run}: its manifest {}: {e}",
                    path.display()
                )
            });
            if full {
                let m: Value = serde_json::from_slice(&bytes).unwrap();
                for e in m["entries"].as_object().unwrap().values() {
                    self.object(s, e["hash"].as_str().unwrap());
                }
            }
        }
    }
}

pub fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

pub fn ok_json(what: &str, out: &Output) -> Value {
    assert!(out.status.success(), "{what}: {}", stderr(out));
    json(&out.stdout)
}
