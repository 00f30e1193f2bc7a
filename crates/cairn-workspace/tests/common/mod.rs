#![allow(dead_code)]
//! Shared fixtures: a store and a workspace in a temp dir, and helpers to
//! read and write the tree.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use cairn_store::{RunId, Store};
use cairn_workspace::*;

pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub store: Store,
    pub root: PathBuf,
    pub run: RunId,
    pub ws: Workspace,
}

impl Fixture {
    pub fn new() -> Self {
        Self::with(CaptureConfig::default())
    }

    pub fn with(config: CaptureConfig) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        fs::create_dir(&root).unwrap();
        let store = Store::open(dir.path().join("store")).unwrap();
        let run = RunId::new();
        let ws = Workspace::open(&store, &run, &root, config).unwrap();
        Fixture {
            dir,
            store,
            root,
            run,
            ws,
        }
    }

    pub fn write(&self, rel: &str, content: &str) {
        let p = self.root.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, content).unwrap();
    }

    /// Waits until the file system's clock has passed every file's mtime
    /// and ctime under the root by more than `slack`: from then on a
    /// capture's racy guard trusts what it caches. A condition, not a
    /// sleep: a loaded machine only makes it wait longer.
    pub fn settle(&self, slack: std::time::Duration) {
        use std::os::unix::fs::MetadataExt;
        fn newest(dir: &Path, out: &mut i128) {
            for e in fs::read_dir(dir).unwrap() {
                let e = e.unwrap();
                let m = fs::symlink_metadata(e.path()).unwrap();
                for (s, ns) in [(m.mtime(), m.mtime_nsec()), (m.ctime(), m.ctime_nsec())] {
                    *out = (*out).max(i128::from(s) * 1_000_000_000 + i128::from(ns));
                }
                if m.is_dir() {
                    newest(&e.path(), out);
                }
            }
        }
        let mut latest = i128::MIN;
        newest(&self.root, &mut latest);
        let probe = self.dir.path().join("clock-probe");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            fs::write(&probe, b"").unwrap();
            let m = fs::metadata(&probe).unwrap();
            let now = i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec());
            if now > latest + slack.as_nanos() as i128 {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the file system's clock did not move"
            );
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    }

    pub fn read(&self, rel: &str) -> Option<String> {
        fs::read_to_string(self.root.join(rel)).ok()
    }

    pub fn remove(&self, rel: &str) {
        fs::remove_file(self.root.join(rel)).unwrap();
    }

    pub fn capture(&self, label: &str) -> CaptureReport {
        self.ws
            .capture(&Label::parse(label).unwrap(), &NoProgress)
            .unwrap()
    }

    /// Every file and directory under the root: path -> (content or "<dir>"
    /// or "-> target", mode).
    pub fn tree(&self) -> BTreeMap<String, (String, u32)> {
        fn go(base: &Path, dir: &Path, out: &mut BTreeMap<String, (String, u32)>) {
            for e in fs::read_dir(dir).unwrap() {
                let e = e.unwrap();
                let p = e.path();
                let rel = p.strip_prefix(base).unwrap().to_str().unwrap().to_owned();
                let m = fs::symlink_metadata(&p).unwrap();
                let mode = m.permissions().mode() & 0o777;
                if m.file_type().is_symlink() {
                    let t = fs::read_link(&p).unwrap();
                    out.insert(rel, (format!("-> {}", t.display()), 0));
                } else if m.is_dir() {
                    out.insert(rel.clone(), ("<dir>".into(), mode));
                    go(base, &p, out);
                } else {
                    out.insert(rel, (fs::read_to_string(&p).unwrap_or_default(), mode));
                }
            }
        }
        let mut out = BTreeMap::new();
        go(&self.root, &self.root, &mut out);
        out
    }

    /// The raw text of the store's files for this run and its objects, to
    /// prove an operation wrote nothing.
    pub fn manifests(&self) -> Vec<String> {
        let mut v: Vec<String> = fs::read_dir(self.store.snapshots_dir(&self.run))
            .map(|r| {
                r.map(|e| e.unwrap().file_name().to_str().unwrap().to_owned())
                    .collect()
            })
            .unwrap_or_default();
        v.sort();
        v
    }
}

pub fn label(s: &str) -> Label {
    Label::parse(s).unwrap()
}

pub fn node(s: &str) -> NodeName {
    NodeName::parse(s).unwrap()
}
