//! The store's layout (DESIGN §1). Every store path is named here.

use std::path::{Path, PathBuf};

use crate::durable_impl::create_dir_private;
use crate::{RunId, StoreError};

/// The default store root: `$XDG_STATE_HOME/cairn`, else `~/.local/state/cairn`.
///
/// `CAIRN_STORE` and `--store` are read by the binary, which passes the result to
/// [`Store::open`]; a library reads no environment beyond this default.
///
/// # Errors
/// [`StoreError::NoLocation`] when neither variable is set.
pub fn default_store_root() -> Result<PathBuf, StoreError> {
    if let Some(x) = std::env::var_os("XDG_STATE_HOME").filter(|v| !v.is_empty()) {
        let p = PathBuf::from(x);
        if p.is_absolute() {
            return Ok(p.join("cairn"));
        }
    }
    match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        Some(home) => Ok(PathBuf::from(home).join(".local/state/cairn")),
        None => Err(StoreError::NoLocation),
    }
}

/// The name of a run's journal in its directory.
const JOURNAL_FILE: &str = "journal.jsonl";

/// The prefix of [`Store::removing_dir`]'s name.
pub const REMOVING_PREFIX: &str = ".removing-";

/// A store: one directory holding every run, its objects and its projections.
#[derive(Clone, Debug)]
pub struct Store {
    root: PathBuf,
}

impl Store {
    /// Opens the store at `root`, creating it (`0700`) and its `runs/` directory
    /// when missing.
    ///
    /// # Errors
    /// The directories cannot be created.
    pub fn open(root: impl Into<PathBuf>) -> Result<Self, StoreError> {
        let root = root.into();
        let root = if root.is_absolute() {
            root
        } else {
            std::env::current_dir()
                .map_err(|e| StoreError::io("reading current directory", &root, e))?
                .join(root)
        };
        create_dir_private(&root.join("runs"))?;
        Ok(Store { root })
    }

    /// Opens a store without creating anything, for read-only commands.
    pub fn at(root: impl Into<PathBuf>) -> Self {
        Store { root: root.into() }
    }

    /// The store root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `<store>/runs`.
    pub fn runs_dir(&self) -> PathBuf {
        self.root.join("runs")
    }

    /// `<store>/runs/<id>`.
    pub fn run_dir(&self, id: &RunId) -> PathBuf {
        self.runs_dir().join(id.as_str())
    }

    /// `<store>/runs/.removing-<id>`: where `cairn session rm` moves a
    /// session's directory before deleting it, so a removal that stopped
    /// part-way is no session to any reader (the name is not a run id) and
    /// the next removal finishes it.
    pub fn removing_dir(&self, id: &RunId) -> PathBuf {
        self.runs_dir()
            .join(format!("{REMOVING_PREFIX}{}", id.as_str()))
    }

    /// `<store>/lineage.lock`: held shared by a fork from before it reads its
    /// parent until the fork's journal exists, and exclusively by a removal
    /// of sessions from before it looks for forks until they are gone, so
    /// no fork ever pins a removed parent.
    pub fn lineage_lock_path(&self) -> PathBuf {
        self.root.join("lineage.lock")
    }

    /// `<store>/runs/<id>/journal.jsonl`.
    pub fn journal_path(&self, id: &RunId) -> PathBuf {
        self.run_dir(id).join(JOURNAL_FILE)
    }

    /// `<store>/runs/<id>/journal.lock`.
    pub fn lock_path(&self, id: &RunId) -> PathBuf {
        self.run_dir(id).join("journal.lock")
    }

    /// `<store>/runs/<id>/meta.json`.
    pub fn meta_path(&self, id: &RunId) -> PathBuf {
        self.run_dir(id).join("meta.json")
    }

    /// `<store>/runs/<id>/workspace`.
    pub fn workspace_dir(&self, id: &RunId) -> PathBuf {
        self.run_dir(id).join("workspace")
    }

    /// `<store>/objects`.
    pub fn objects_dir(&self) -> PathBuf {
        self.root.join("objects")
    }

    /// `<store>/store.lock`: held shared by everything that writes objects or
    /// manifests, and exclusively by prune (DESIGN §5.6).
    pub fn store_lock_path(&self) -> PathBuf {
        self.root.join("store.lock")
    }

    /// `<store>/runs/<id>/workspace/snapshots`.
    pub fn snapshots_dir(&self, id: &RunId) -> PathBuf {
        self.workspace_dir(id).join("snapshots")
    }

    /// `<store>/runs/<id>/workspace/index.json`.
    pub fn workspace_index_path(&self, id: &RunId) -> PathBuf {
        self.workspace_dir(id).join("index.json")
    }

    /// `<store>/sessions.index`.
    pub fn sessions_index(&self) -> PathBuf {
        self.root.join("sessions.index")
    }

    /// `<store>/checkpoints`.
    pub fn checkpoints_dir(&self) -> PathBuf {
        self.root.join("checkpoints")
    }

    /// `<store>/machines`: one directory per VM session (DESIGN §13), its
    /// guest's disks, sockets and console. Working state, never the record:
    /// a machine's checkpoints live in the pool like any other.
    pub fn machines_dir(&self) -> PathBuf {
        self.root.join("machines")
    }

    /// `<store>/machines/<run>`.
    pub fn machine_dir(&self, run: &RunId) -> PathBuf {
        self.machines_dir().join(run.as_str())
    }

    /// `<store>/gateway`.
    pub fn gateway_dir(&self) -> PathBuf {
        self.root.join("gateway")
    }

    /// `runs/`, held open, to open many sessions' files relative to it
    /// (a listing): the kernel then looks up two names per file rather than
    /// every component of the store's path.
    ///
    /// # Errors
    /// `runs/` cannot be opened.
    pub fn open_runs(&self) -> Result<RunsDir, StoreError> {
        let dir = self.runs_dir();
        match std::fs::File::open(&dir) {
            Ok(f) => Ok(RunsDir(f)),
            Err(e) => Err(StoreError::io("opening", dir, e)),
        }
    }

    /// Every run id in the store, in no particular order. Directory entries that
    /// are not valid ids are ignored.
    ///
    /// # Errors
    /// `runs/` exists but cannot be read.
    pub fn run_ids(&self) -> Result<Vec<RunId>, StoreError> {
        let dir = self.runs_dir();
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
            Err(e) => return Err(StoreError::io("reading", dir, e)),
        };
        let mut ids = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| StoreError::io("reading", &dir, e))?;
            if let Some(id) = entry
                .file_name()
                .to_str()
                .and_then(|n| RunId::parse(n).ok())
            {
                ids.push(id);
            }
        }
        Ok(ids)
    }
}

/// The store's `runs/` directory, held open (see [`Store::open_runs`]). The
/// names opened through it are the ones [`Store`] gives, relative to `runs/`,
/// and are followed as the full paths would be.
#[derive(Debug)]
pub struct RunsDir(std::fs::File);

impl RunsDir {
    /// Opens `<id>/journal.jsonl` for reading: the file at
    /// [`Store::journal_path`].
    ///
    /// # Errors
    /// As `open(2)`.
    pub fn open_journal(&self, id: &RunId) -> std::io::Result<std::fs::File> {
        use rustix::fs::{Mode, OFlags};
        let name = format!("{}/{JOURNAL_FILE}", id.as_str());
        let fd = rustix::fs::openat(
            &self.0,
            name,
            OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        Ok(std::fs::File::from(fd))
    }
}

/// `path` with its longest existing prefix resolved (links and `..`
/// followed) and the rest appended as given: where a store that may not
/// exist yet would be, for comparing it with a workspace.
pub fn canonical_prefix(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = path;
    loop {
        if let Ok(c) = std::fs::canonicalize(at) {
            return rest.iter().rev().fold(c, |acc, part| acc.join(part));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                at = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}
