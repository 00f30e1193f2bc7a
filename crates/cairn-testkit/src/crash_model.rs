//! The crash model: what a power cut may leave of a scenario's writes.
//!
//! A [`CrashModel`] is installed as the storage recorder
//! (`cairn_store::storage`) for a directory. The scenario then runs for real,
//! in that directory, and acknowledges what it made durable
//! ([`CrashModel::ack`]). Afterwards [`CrashModel::check`] replays the
//! operations and, at every crash point (after each operation), builds each
//! state a power cut may leave in a fresh directory and runs the scenario's
//! check on it:
//! - file data written since the file's last sync dropped, kept, torn at a
//!   512-byte boundary inside a write, or the size kept with zeros in place
//!   of the data (delayed allocation);
//! - directory entries (creates, renames, removals) made since their
//!   directory's last fsync lost, kept, or lost in one directory only, or
//!   kept up to some point of their order.
//!
//! What it assumes of the disk is what the crates' DESIGN.md files assume:
//! a file sync makes that file's content and size durable, a directory fsync
//! makes its entries durable, `syncfs` makes everything durable. It does not
//! model a disk that lies about flushes.
//!
//! A sync can be removed from the model by its site ([`CrashModel::without`])
//! to show that the checks then find the loss.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use cairn_store::storage::{self, Op, Recorder};

/// Process-wide: one model at a time (the recorder is global).
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

#[derive(Clone, Debug)]
enum Logged {
    CreateFile(PathBuf),
    CreateDir(PathBuf),
    Write {
        path: PathBuf,
        offset: u64,
        bytes: Vec<u8>,
    },
    SetLen {
        path: PathBuf,
        len: u64,
    },
    SyncFile(PathBuf, &'static str),
    SyncDir(PathBuf, &'static str),
    SyncFs(&'static str),
    Rename {
        from: PathBuf,
        to: PathBuf,
    },
    Remove(PathBuf),
}

struct Log {
    root: PathBuf,
    ops: Vec<Logged>,
    acks: Vec<(usize, String)>,
}

struct Shared(Mutex<Log>);

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Log> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Recorder for Shared {
    fn record(&self, op: Op<'_>) {
        let mut log = self.lock();
        let rel = |p: &Path| p.strip_prefix(&log.root).ok().map(normal);
        let logged = match op {
            Op::CreateFile(p) => rel(p).map(Logged::CreateFile),
            Op::CreateDir(p) => rel(p).map(Logged::CreateDir),
            Op::Write {
                path,
                offset,
                bytes,
            } => rel(path).map(|path| Logged::Write {
                path,
                offset,
                bytes: bytes.to_vec(),
            }),
            Op::SetLen { path, len } => rel(path).map(|path| Logged::SetLen { path, len }),
            Op::SyncFile { path, site } => rel(path).map(|p| Logged::SyncFile(p, site)),
            Op::SyncDir { path, site } => rel(path).map(|p| Logged::SyncDir(p, site)),
            Op::SyncFs { path, site } => rel(path).map(|_| Logged::SyncFs(site)),
            Op::Rename { from, to } => match (rel(from), rel(to)) {
                (Some(from), Some(to)) => Some(Logged::Rename { from, to }),
                _ => None,
            },
            Op::Remove(p) => rel(p).map(Logged::Remove),
        };
        if let Some(l) = logged {
            log.ops.push(l);
        }
    }
}

fn normal(p: &Path) -> PathBuf {
    p.components()
        .filter(|c| !matches!(c, Component::CurDir))
        .collect()
}

/// A scenario's recorder and, afterwards, its checker.
pub struct CrashModel {
    shared: Arc<Shared>,
    baseline: Vec<(PathBuf, Option<Vec<u8>>)>,
    dropped: BTreeSet<&'static str>,
    _installed: Option<storage::Installed>,
    _turn: MutexGuard<'static, ()>,
}

/// What [`CrashModel::check`] found.
#[derive(Debug, Default)]
pub struct Report {
    /// Crash points examined (one after each operation, and one before any).
    pub points: usize,
    /// Distinct states built and checked (a state met again at a later
    /// point with the same acknowledgements is checked once).
    pub states: usize,
    /// Operations recorded.
    pub ops: usize,
    /// The failed checks: where, which state, and why (the first 20).
    pub failures: Vec<String>,
    /// How many checks failed.
    pub failed: usize,
}

impl CrashModel {
    /// Starts recording every storage operation under `root`, an existing
    /// directory whose present content counts as durable.
    ///
    /// # Panics
    /// `root` cannot be read (a broken test environment).
    pub fn record(root: &Path) -> CrashModel {
        let turn = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
        let root = root.canonicalize().expect("the scenario's directory");
        let mut baseline = Vec::new();
        walk(&root, &root, &mut baseline);
        let shared = Arc::new(Shared(Mutex::new(Log {
            root,
            ops: Vec::new(),
            acks: Vec::new(),
        })));
        let installed = storage::install(shared.clone());
        CrashModel {
            shared,
            baseline,
            dropped: BTreeSet::new(),
            _installed: Some(installed),
            _turn: turn,
        }
    }

    /// The recorded directory (canonical): the scenario works beneath it.
    pub fn root(&self) -> PathBuf {
        self.shared.lock().root.clone()
    }

    /// Acknowledges `what`: from this point on, every crash state must
    /// still hold it.
    pub fn ack(&self, what: impl Into<String>) {
        let mut log = self.shared.lock();
        let at = log.ops.len();
        log.acks.push((at, what.into()));
    }

    /// Removes the syncs of `site` from the model, as if the code did not
    /// make them (a test that the checks find what that sync prevents).
    pub fn without(mut self, site: &'static str) -> Self {
        self.dropped.insert(site);
        self
    }

    /// After the scenario: removes the syncs of `site`, when one is given,
    /// which the scenario must have made (so a test that drops a sync
    /// cannot pass by naming one that never happened).
    ///
    /// # Panics
    /// No sync was recorded at `site`.
    pub fn without_recorded(self, site: Option<&'static str>) -> Self {
        let Some(site) = site else {
            return self;
        };
        let sites = self.sites();
        assert!(
            sites.contains(site),
            "the scenario syncs at {site}: {sites:?}"
        );
        self.without(site)
    }

    /// The sites of the syncs recorded.
    pub fn sites(&self) -> BTreeSet<&'static str> {
        self.shared
            .lock()
            .ops
            .iter()
            .filter_map(|o| match o {
                Logged::SyncFile(_, s) | Logged::SyncDir(_, s) | Logged::SyncFs(s) => Some(*s),
                _ => None,
            })
            .collect()
    }

    /// Stops recording, then checks every crash state: `check` gets the
    /// state's directory (standing for the scenario's root) and what was
    /// acknowledged before that point, and returns why the state is wrong.
    ///
    /// # Panics
    /// A state cannot be written to a temporary directory.
    pub fn check(
        mut self,
        mut check: impl FnMut(&Path, &[String]) -> Result<(), String>,
    ) -> Report {
        self._installed = None;
        let (ops, acks) = {
            let log = self.shared.lock();
            (log.ops.clone(), log.acks.clone())
        };
        let mut report = Report {
            ops: ops.len(),
            ..Report::default()
        };
        let mut fs = Fs::new(&self.baseline);
        let mut seen = std::collections::HashSet::new();
        for point in 0..=ops.len() {
            if point > 0 {
                fs.apply(&ops[point - 1], &self.dropped);
            }
            report.points += 1;
            let acked: Vec<String> = acks
                .iter()
                .filter(|(at, _)| *at <= point)
                .map(|(_, a)| a.clone())
                .collect();
            for (name, state) in fs.crash_states() {
                let entries = state.build();
                // The same state with the same acknowledgements passes or
                // fails the same way: check it once.
                if !seen.insert((fingerprint(&entries), acked.len())) {
                    continue;
                }
                report.states += 1;
                let dir = scratch();
                let root = dir.path().join("root");
                materialize(&entries, &root);
                if let Err(why) = check(&root, &acked) {
                    report.failed += 1;
                    if report.failures.len() < 20 {
                        let after = match point {
                            0 => "before any operation".to_string(),
                            p => format!("after op {p} ({})", describe(&ops[p - 1])),
                        };
                        report
                            .failures
                            .push(format!("{after}, state {name}: {why}"));
                    }
                }
            }
        }
        report
    }
}

fn describe(op: &Logged) -> String {
    match op {
        Logged::CreateFile(p) => format!("create {}", p.display()),
        Logged::CreateDir(p) => format!("mkdir {}", p.display()),
        Logged::Write {
            path,
            offset,
            bytes,
        } => format!(
            "write {} bytes at {offset} of {}",
            bytes.len(),
            path.display()
        ),
        Logged::SetLen { path, len } => format!("set_len {} to {len}", path.display()),
        Logged::SyncFile(p, s) => format!("sync {} [{s}]", p.display()),
        Logged::SyncDir(p, s) => format!("fsync dir {} [{s}]", p.display()),
        Logged::SyncFs(s) => format!("syncfs [{s}]"),
        Logged::Rename { from, to } => format!("rename {} -> {}", from.display(), to.display()),
        Logged::Remove(p) => format!("remove {}", p.display()),
    }
}

fn walk(root: &Path, dir: &Path, out: &mut Vec<(PathBuf, Option<Vec<u8>>)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        let rel = p.strip_prefix(root).map(normal).unwrap_or_default();
        match e.file_type() {
            Ok(t) if t.is_dir() => {
                out.push((rel, None));
                walk(root, &p, out);
            }
            Ok(t) if t.is_file() => out.push((rel, Some(std::fs::read(&p).unwrap_or_default()))),
            _ => {}
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Node {
    File(usize),
    Dir,
}

#[derive(Clone, Debug)]
enum Pending {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

#[derive(Clone, Debug, Default)]
struct Inode {
    durable: Vec<u8>,
    current: Vec<u8>,
    pending: Vec<Pending>,
}

#[derive(Clone, Debug)]
enum EntryOp {
    Add(PathBuf, Node),
    Remove(PathBuf),
    Rename(PathBuf, PathBuf),
}

/// The modelled file system: what is written, and what is durable.
struct Fs {
    inodes: Vec<Inode>,
    current: BTreeMap<PathBuf, Node>,
    durable: BTreeMap<PathBuf, Node>,
    /// Entry operations not yet durable, in order, with their directory.
    pending: Vec<(PathBuf, EntryOp)>,
}

fn parent(p: &Path) -> PathBuf {
    p.parent().map(Path::to_path_buf).unwrap_or_default()
}

fn apply_write(buf: &mut Vec<u8>, p: &Pending) {
    match p {
        Pending::Write(offset, bytes) => {
            let at = usize::try_from(*offset).unwrap_or(usize::MAX);
            let end = at.saturating_add(bytes.len());
            if buf.len() < end {
                buf.resize(end, 0);
            }
            buf[at..end].copy_from_slice(bytes);
        }
        Pending::SetLen(len) => buf.resize(usize::try_from(*len).unwrap_or(usize::MAX), 0),
    }
}

fn apply_entry(names: &mut BTreeMap<PathBuf, Node>, op: &EntryOp) {
    match op {
        EntryOp::Add(p, n) => {
            names.insert(p.clone(), *n);
        }
        EntryOp::Remove(p) => {
            names.remove(p);
        }
        EntryOp::Rename(from, to) => {
            let moved: Vec<(PathBuf, Node)> = names
                .iter()
                .filter(|(k, _)| k.starts_with(from))
                .map(|(k, v)| (k.clone(), *v))
                .collect();
            // Renaming over an existing name replaces it (and, for a
            // directory, what was beneath it).
            names.retain(|k, _| !k.starts_with(to));
            for (k, v) in moved {
                names.remove(&k);
                let rest = k
                    .strip_prefix(from)
                    .map(Path::to_path_buf)
                    .unwrap_or_default();
                let dest = if rest.as_os_str().is_empty() {
                    to.clone()
                } else {
                    to.join(rest)
                };
                names.insert(dest, v);
            }
        }
    }
}

/// How one file's unsynced data ends up.
#[derive(Clone, Debug)]
enum Data {
    Durable,
    Current,
    /// The first `n` pending operations, then the next write cut after
    /// `cut` of its bytes.
    Torn(usize, usize),
    /// The size reached, the unsynced bytes zero.
    Zeroed,
}

/// One crash state: which pending entry operations survive, and how each
/// file's data does.
struct State<'a> {
    fs: &'a Fs,
    keep: Vec<bool>,
    data: BTreeMap<usize, Data>,
    default: Data,
}

impl State<'_> {
    fn content(&self, ino: usize) -> Vec<u8> {
        let i = &self.fs.inodes[ino];
        match self.data.get(&ino).unwrap_or(&self.default) {
            Data::Durable => i.durable.clone(),
            Data::Current => i.current.clone(),
            Data::Torn(n, cut) => {
                let mut buf = i.durable.clone();
                for p in &i.pending[..*n] {
                    apply_write(&mut buf, p);
                }
                if let Some(Pending::Write(offset, bytes)) = i.pending.get(*n) {
                    apply_write(&mut buf, &Pending::Write(*offset, bytes[..*cut].to_vec()));
                }
                buf
            }
            Data::Zeroed => {
                let mut buf = i.durable.clone();
                if buf.len() < i.current.len() {
                    buf.resize(i.current.len(), 0);
                } else {
                    buf.truncate(i.current.len());
                }
                buf
            }
        }
    }

    /// The state's entries, parents first: a directory (`None`) or a file
    /// and its bytes. An entry whose directory did not survive is left out.
    fn build(&self) -> Vec<(PathBuf, Option<Vec<u8>>)> {
        let mut names = self.fs.durable.clone();
        for ((_, op), keep) in self.fs.pending.iter().zip(&self.keep) {
            if *keep {
                apply_entry(&mut names, op);
            }
        }
        let mut dirs: BTreeSet<PathBuf> = BTreeSet::new();
        let mut out = Vec::new();
        // Parents sort before their children.
        for (rel, node) in &names {
            let parent = parent(rel);
            if !parent.as_os_str().is_empty() && !dirs.contains(&parent) {
                continue;
            }
            match node {
                Node::Dir => {
                    dirs.insert(rel.clone());
                    out.push((rel.clone(), None));
                }
                Node::File(ino) => out.push((rel.clone(), Some(self.content(*ino)))),
            }
        }
        out
    }
}

/// A fingerprint of a built state, to check each distinct state once.
fn fingerprint(entries: &[(PathBuf, Option<Vec<u8>>)]) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    entries.hash(&mut h);
    h.finish()
}

fn materialize(entries: &[(PathBuf, Option<Vec<u8>>)], root: &Path) {
    std::fs::create_dir_all(root).expect("the state's root");
    for (rel, content) in entries {
        let path = root.join(rel);
        match content {
            None => std::fs::create_dir(&path).expect("a directory of the state"),
            Some(bytes) => std::fs::write(&path, bytes).expect("a file of the state"),
        }
    }
}

/// Where crash states are built: memory when there is a tmpfs, so the
/// checks' own fsyncs cost nothing.
fn scratch() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(d) = tempfile::tempdir_in(shm) {
            return d;
        }
    }
    tempfile::tempdir().expect("a directory for a crash state")
}

impl Fs {
    fn new(baseline: &[(PathBuf, Option<Vec<u8>>)]) -> Fs {
        let mut fs = Fs {
            inodes: Vec::new(),
            current: BTreeMap::new(),
            durable: BTreeMap::new(),
            pending: Vec::new(),
        };
        for (rel, content) in baseline {
            let node = match content {
                None => Node::Dir,
                Some(bytes) => {
                    fs.inodes.push(Inode {
                        durable: bytes.clone(),
                        current: bytes.clone(),
                        pending: Vec::new(),
                    });
                    Node::File(fs.inodes.len() - 1)
                }
            };
            fs.current.insert(rel.clone(), node);
            fs.durable.insert(rel.clone(), node);
        }
        fs
    }

    fn inode_of(&mut self, p: &Path) -> Option<&mut Inode> {
        match self.current.get(p) {
            Some(Node::File(i)) => self.inodes.get_mut(*i),
            _ => None,
        }
    }

    fn entry(&mut self, dir: PathBuf, op: EntryOp) {
        apply_entry(&mut self.current, &op);
        self.pending.push((dir, op));
    }

    fn apply(&mut self, op: &Logged, dropped: &BTreeSet<&'static str>) {
        match op {
            Logged::CreateFile(p) => {
                self.inodes.push(Inode::default());
                let n = Node::File(self.inodes.len() - 1);
                self.entry(parent(p), EntryOp::Add(p.clone(), n));
            }
            Logged::CreateDir(p) => self.entry(parent(p), EntryOp::Add(p.clone(), Node::Dir)),
            Logged::Write {
                path,
                offset,
                bytes,
            } => {
                if let Some(i) = self.inode_of(path) {
                    let w = Pending::Write(*offset, bytes.clone());
                    apply_write(&mut i.current, &w);
                    i.pending.push(w);
                }
            }
            Logged::SetLen { path, len } => {
                if let Some(i) = self.inode_of(path) {
                    let w = Pending::SetLen(*len);
                    apply_write(&mut i.current, &w);
                    i.pending.push(w);
                }
            }
            Logged::SyncFile(p, site) => {
                if !dropped.contains(site) {
                    if let Some(i) = self.inode_of(p) {
                        i.durable = i.current.clone();
                        i.pending.clear();
                    }
                }
            }
            Logged::SyncDir(d, site) => {
                if !dropped.contains(site) {
                    let (now, later): (Vec<_>, Vec<_>) = std::mem::take(&mut self.pending)
                        .into_iter()
                        .partition(|(dir, _)| dir == d);
                    for (_, op) in &now {
                        apply_entry(&mut self.durable, op);
                    }
                    self.pending = later;
                }
            }
            Logged::SyncFs(site) => {
                if !dropped.contains(site) {
                    for i in &mut self.inodes {
                        i.durable = i.current.clone();
                        i.pending.clear();
                    }
                    for (_, op) in std::mem::take(&mut self.pending) {
                        apply_entry(&mut self.durable, &op);
                    }
                }
            }
            Logged::Rename { from, to } => {
                self.entry(parent(to), EntryOp::Rename(from.clone(), to.clone()));
            }
            Logged::Remove(p) => self.entry(parent(p), EntryOp::Remove(p.clone())),
        }
    }

    /// The states a power cut may leave now, each with a name.
    fn crash_states(&self) -> Vec<(String, State<'_>)> {
        let n = self.pending.len();
        let state = |keep: Vec<bool>, default: Data| State {
            fs: self,
            keep,
            data: BTreeMap::new(),
            default,
        };
        let mut out = vec![
            (
                "nothing unsynced survives".to_string(),
                state(vec![false; n], Data::Durable),
            ),
            (
                "everything written survives".to_string(),
                state(vec![true; n], Data::Current),
            ),
        ];
        // One file's unsynced data lost, torn or zeroed; the rest survives.
        for (ino, i) in self.inodes.iter().enumerate() {
            if i.pending.is_empty() {
                continue;
            }
            let mut variants = vec![("lost", Data::Durable), ("zeroed", Data::Zeroed)];
            let last = i.pending.len() - 1;
            for k in last.saturating_sub(2)..=last {
                if let Pending::Write(offset, bytes) = &i.pending[k] {
                    let cuts: BTreeSet<usize> = (1..bytes.len())
                        .filter(|c| (offset + *c as u64).is_multiple_of(512))
                        .collect();
                    let cuts: Vec<usize> = cuts.into_iter().collect();
                    let picks = [cuts.first(), cuts.get(cuts.len() / 2), cuts.last()];
                    for c in picks.into_iter().flatten().collect::<BTreeSet<_>>() {
                        variants.push(("torn", Data::Torn(k, *c)));
                    }
                    // A write that reached no sector boundary can still be
                    // lost with those before it kept.
                    variants.push(("cut before a write", Data::Torn(k, 0)));
                }
            }
            for (what, d) in variants {
                let mut s = state(vec![true; n], Data::Current);
                s.data.insert(ino, d.clone());
                out.push((format!("inode {ino}: unsynced data {what} ({d:?})"), s));
            }
        }
        // One directory's unsynced entries lost, the rest kept; and only
        // one directory's kept.
        let dirs: BTreeSet<&PathBuf> = self.pending.iter().map(|(d, _)| d).collect();
        for d in dirs {
            let keep: Vec<bool> = self.pending.iter().map(|(x, _)| x != d).collect();
            let only: Vec<bool> = keep.iter().map(|k| !k).collect();
            out.push((
                format!("entries in {} lost", d.display()),
                state(keep, Data::Current),
            ));
            out.push((
                format!("only the entries in {} survive", d.display()),
                state(only, Data::Durable),
            ));
        }
        // Entries kept up to some point of their order.
        for k in 1..n {
            out.push((
                format!("the first {k} of {n} unsynced entries survive"),
                state((0..n).map(|i| i < k).collect(), Data::Current),
            ));
        }
        out
    }
}
