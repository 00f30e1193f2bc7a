#![allow(dead_code)]
//! Shared fixtures: a store, a run with a journal, a workspace and a place
//! for named paths, in one temp dir.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use cairn_checkpoint::*;
use cairn_journal::{now_rfc3339, JournalWriter, Meta};
use cairn_store::{RunId, Store};
use cairn_workspace::{CaptureConfig, Workspace};

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub store: Store,
    pub run: RunId,
    pub root: PathBuf,
    /// Where named paths live (outside the workspace).
    pub outside: PathBuf,
    pub ws: Workspace,
    pub writer: Option<JournalWriter>,
}

pub fn meta(workspace: &Path) -> Meta {
    Meta {
        run: String::new(),
        created: now_rfc3339(),
        workspace: workspace.display().to_string(),
        name: Some("test".into()),
        fingerprint: None,
        fork: None,
        routing: None,
        system_file: None,
    }
}

impl Fixture {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        let outside = dir.path().join("outside");
        fs::create_dir(&root).unwrap();
        fs::create_dir(&outside).unwrap();
        let store = Store::open(dir.path().join("store")).unwrap();
        let run = RunId::new();
        let writer = JournalWriter::create(&store, &run, meta(&root)).unwrap();
        let ws = Workspace::open(&store, &run, &root, CaptureConfig::default()).unwrap();
        Fixture {
            dir,
            store,
            run,
            root,
            outside,
            ws,
            writer: Some(writer),
        }
    }

    pub fn position(&self) -> JournalPosition {
        JournalPosition::of(self.writer.as_ref().unwrap())
    }

    /// Saves the workspace and `paths`, and journals the checkpoint.
    pub fn save(&mut self, paths: &[&Path]) -> SaveReport {
        let req = SaveRequest::new(self.run.clone(), self.position())
            .capture(&self.ws)
            .paths(paths.iter().copied());
        let r = save(&self.store, &req, &NoProgress).unwrap();
        self.journal(&r.id);
        r
    }

    /// The manifest file of checkpoint `id`.
    pub fn manifest_path(&self, id: &CheckpointId) -> PathBuf {
        self.store.checkpoints_dir().join(format!("{id}.json"))
    }

    /// Journals a `checkpoint` record naming `id`, carrying the SHA-256 of
    /// its manifest file as it is now (as the CLI does after a save).
    pub fn journal(&mut self, id: &CheckpointId) {
        use sha2::Digest;
        let bytes = fs::read(self.manifest_path(id)).unwrap();
        let hash: String = sha2::Sha256::digest(&bytes)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        self.append_checkpoint_record(
            serde_json::json!({"checkpoint": id.to_string(), "manifest": hash}),
        );
    }

    /// Journals a `checkpoint` record naming `id` as cairn wrote them before
    /// it recorded the manifest's hash.
    pub fn journal_legacy(&mut self, id: &CheckpointId) {
        self.append_checkpoint_record(serde_json::json!({"checkpoint": id.to_string()}));
    }

    fn append_checkpoint_record(&mut self, body: serde_json::Value) {
        let body: cairn_journal::CheckpointRef = serde_json::from_value(body).unwrap();
        let w = self.writer.as_mut().unwrap();
        w.append(&cairn_journal::RecordBody::Checkpoint(body))
            .unwrap();
    }

    /// Reads checkpoint `id`'s manifest, lets `change` edit it, writes it
    /// back (as someone with write access to the store could).
    pub fn tamper(&self, id: &CheckpointId, change: impl FnOnce(&mut serde_json::Value)) {
        let path = self.manifest_path(id);
        let mut v: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        change(&mut v);
        fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    }

    /// The same for the workspace snapshot manifest `snapshot` of this run.
    pub fn tamper_snapshot(&self, snapshot: &str, change: impl FnOnce(&mut serde_json::Value)) {
        let path = self
            .store
            .snapshots_dir(&self.run)
            .join(format!("{snapshot}.json"));
        let mut v: serde_json::Value = serde_json::from_slice(&fs::read(&path).unwrap()).unwrap();
        change(&mut v);
        fs::write(&path, serde_json::to_vec(&v).unwrap()).unwrap();
    }

    /// Restores checkpoint `id` into this run's workspace.
    pub fn restore(&mut self, id: &CheckpointId) -> Result<RestoreReport, CheckpointError> {
        self.restore_with(id, &NoProgress)
    }

    /// The same, reporting to `progress`.
    pub fn restore_with(
        &mut self,
        id: &CheckpointId,
        progress: &dyn Progress,
    ) -> Result<RestoreReport, CheckpointError> {
        restore_in(self, None, id, progress)
    }

    pub fn write(&self, rel: &str, content: &[u8]) {
        let p = self.root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    }

    pub fn out(&self, rel: &str) -> PathBuf {
        self.outside.join(rel)
    }
}

/// Restores checkpoint `id` of `f`'s run into `ws` (default: `f.ws`).
pub fn restore_in(
    f: &mut Fixture,
    ws: Option<&Workspace>,
    id: &CheckpointId,
    progress: &dyn Progress,
) -> Result<RestoreReport, CheckpointError> {
    let ws = ws.unwrap_or(&f.ws);
    restore(&f.store, id, ws, f.writer.as_mut().unwrap(), progress)
}

/// Incompressible, deterministic bytes.
pub fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    let mut out = Vec::with_capacity(n + 8);
    while out.len() < n {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(n);
    out
}

/// Overwrites `count` 4 KiB pages of `path` at offsets derived from `seed`.
pub fn poke(path: &Path, count: usize, seed: u64) {
    use std::os::unix::fs::FileExt;
    let f = fs::OpenOptions::new().write(true).open(path).unwrap();
    let pages = f.metadata().unwrap().len() / 4096;
    for i in 0..count as u64 {
        let page = seed.wrapping_mul(2654435761).wrapping_add(i * 7919) % pages;
        f.write_all_at(
            &noise(4096, seed.wrapping_mul(31).wrapping_add(i)),
            page * 4096,
        )
        .unwrap();
    }
}

/// Every file and directory below `dir`: relative path -> (bytes or
/// "<dir>", mode).
pub fn tree(dir: &Path) -> BTreeMap<String, (Vec<u8>, u32)> {
    fn go(base: &Path, dir: &Path, out: &mut BTreeMap<String, (Vec<u8>, u32)>) {
        for e in fs::read_dir(dir).unwrap() {
            let p = e.unwrap().path();
            let rel = p.strip_prefix(base).unwrap().to_str().unwrap().to_owned();
            let m = fs::symlink_metadata(&p).unwrap();
            let mode = m.permissions().mode() & 0o777;
            if m.is_dir() {
                out.insert(rel, (b"<dir>".to_vec(), 0));
                go(base, &p, out);
            } else {
                out.insert(rel, (fs::read(&p).unwrap(), mode));
            }
        }
    }
    let mut out = BTreeMap::new();
    go(dir, dir, &mut out);
    out
}

pub fn chmod(p: &Path, mode: u32) {
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
}
