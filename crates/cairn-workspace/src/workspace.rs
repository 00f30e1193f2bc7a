//! [`Workspace`]: one run's view of one workspace directory.

use std::fs::File;
use std::path::{Component, Path, PathBuf};

use cairn_objects::{ObjectPool, Progress, StoreLock};
use cairn_store::durable::create_dir_private;
use cairn_store::{RunId, Store};

use crate::attribution;
use crate::capture::{capture, CaptureReport};
use crate::diffstat::{self, FileChange};
use crate::history::{self, Interval, SnapshotInfo};
use crate::ignore::{IgnoreMatch, IgnoreOptions, IgnoreRules};
use crate::index::{Index, INDEX_VERSION};
use crate::manifest::{Manifest, SnapshotId};
use crate::preview::{preview, RewindPreview};
use crate::restore::{restore, RestoreReport, RestoreScope, Target};
use crate::statcache::{StatCache, STATCACHE_FILE};
use crate::{CaptureConfig, Label, NodeIter, NodeName, NodeRef, WorkspaceError};

/// How a node's execution ended, for [`Workspace::leave_node`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NodeEnd {
    /// It completed this iteration: `post:`.
    Completed,
    /// It did not (failure, interruption, cancel): `fail:`, which opens a window.
    Failed,
    /// It waits on a human: `pause:`, which opens a window. Capture
    /// `resume:` with [`Workspace::capture`] on the way back in.
    Paused,
}

/// What [`Workspace::enter_node`] recorded.
#[derive(Clone, Debug)]
pub struct NodeEntry {
    /// The node and the iteration it was given.
    pub at: NodeIter,
    /// The `resume:` capture taken first when the run already had a head
    /// (deduped onto it when nothing moved).
    pub resume: Option<CaptureReport>,
    /// The `pre:` capture, only when the run had no snapshot yet.
    pub first: Option<CaptureReport>,
    /// The snapshot `pre:<node>:<iter>` now points at.
    pub pre: SnapshotId,
}

/// One run's versioned view of a workspace directory.
///
/// Writers ([`capture`](Workspace::capture), [`label_head`](Workspace::label_head),
/// [`enter_node`](Workspace::enter_node), [`leave_node`](Workspace::leave_node),
/// the restores) take the run's workspace lock (one writer per run at a time;
/// others wait) and the store lock shared (so prune waits for them). Readers
/// take no lock: manifests are immutable and the index is replaced atomically.
#[derive(Clone, Debug)]
pub struct Workspace {
    store: Store,
    run: RunId,
    root: PathBuf,
    config: CaptureConfig,
    pool: ObjectPool,
    ignore: IgnoreOptions,
}

/// A writer's hold on a run's workspace: both locks and the index.
pub(crate) struct Session<'w> {
    pub(crate) ws: &'w Workspace,
    index: IndexSlot,
    /// Held shared for the whole session: objects are written and named
    /// under it, so prune never runs in between.
    store_lock: StoreLock,
    _ws_lock: File,
}

/// The index (and, for a capture, the stat cache), read on a helper thread
/// so that parsing them overlaps the walk.
enum IndexSlot {
    Loading(std::thread::JoinHandle<Result<Loaded, WorkspaceError>>),
    Ready(Box<Loaded>),
    Failed,
}

/// What the helper thread read.
struct Loaded {
    index: Index,
    /// The index file's bytes as read (`None`: rebuilt), so that an unchanged
    /// index is not rewritten.
    on_disk: Option<Vec<u8>>,
    /// The stat cache, once read (only captures need it).
    cache: Option<StatCache>,
    /// The index names a head whose manifest is not in this run
    /// ([`Index::head_missing`]).
    head_missing: bool,
}

impl Session<'_> {
    fn loaded(&mut self) -> Result<&mut Loaded, WorkspaceError> {
        if let IndexSlot::Loading(_) = self.index {
            let slot = std::mem::replace(&mut self.index, IndexSlot::Failed);
            if let IndexSlot::Loading(h) = slot {
                let loaded = h.join().unwrap_or_else(|_| {
                    Err(WorkspaceError::io(
                        "reading",
                        self.ws.index_path(),
                        std::io::Error::other("the index reader panicked"),
                    ))
                })?;
                self.index = IndexSlot::Ready(Box::new(loaded));
            }
        }
        match &mut self.index {
            IndexSlot::Ready(l) => Ok(l),
            _ => Err(WorkspaceError::io(
                "reading",
                self.ws.index_path(),
                std::io::Error::other("an earlier read of the index failed"),
            )),
        }
    }

    /// The index, the stat cache and the store lock (borrowed at once).
    pub(crate) fn parts(
        &mut self,
    ) -> Result<(&mut Index, &mut StatCache, &StoreLock), WorkspaceError> {
        let (cache_path, snaps) = (self.ws.statcache_path(), self.ws.snapshots_dir());
        self.loaded()?;
        let IndexSlot::Ready(l) = &mut self.index else {
            unreachable!("loaded() leaves the slot ready or fails")
        };
        if l.cache.is_none() {
            l.cache = Some(l.index.take_cache(&cache_path, &snaps, l.head_missing)?);
        }
        let Loaded { index, cache, .. } = &mut **l;
        let cache = cache.as_mut().expect("read above");
        Ok((index, cache, &self.store_lock))
    }

    /// The index.
    pub(crate) fn index(&mut self) -> Result<&mut Index, WorkspaceError> {
        Ok(&mut self.loaded()?.index)
    }

    /// True when the index names a head whose manifest is not in this run:
    /// a capture then starts afresh, a label on the head is refused.
    pub(crate) fn head_missing(&mut self) -> Result<bool, WorkspaceError> {
        Ok(self.loaded()?.head_missing)
    }

    /// The head, checked: `None` before the first capture.
    ///
    /// # Errors
    /// [`WorkspaceError::HeadMissing`] when its manifest is not in this run.
    pub(crate) fn verified_head(&mut self) -> Result<Option<SnapshotId>, WorkspaceError> {
        let path = self.ws.index_path();
        let l = self.loaded()?;
        match (&l.index.head, l.head_missing) {
            (Some(id), true) => Err(WorkspaceError::HeadMissing {
                snapshot: id.to_string(),
                index: path,
            }),
            (head, false) => Ok(head.clone()),
            (None, true) => Ok(None),
        }
    }

    /// Writes the index if it differs from the file (a v1 or rebuilt index
    /// first moves its inline stat cache to its own file).
    pub(crate) fn save(&mut self) -> Result<(), WorkspaceError> {
        let (path, cache_path) = (self.ws.index_path(), self.ws.statcache_path());
        let l = self.loaded()?;
        if let Some(files) = l.index.files.take() {
            let mut cache = StatCache {
                started_ns: l.index.started_ns.take(),
                files: files.into_iter().collect(),
                on_disk: None,
            };
            l.index.statcache = Some(cache.save(&cache_path)?);
        }
        l.index.version = INDEX_VERSION;
        let bytes = l.index.encode()?;
        if l.on_disk.as_deref() != Some(&bytes[..]) {
            cairn_store::durable::write_atomic(&path, &bytes)?;
            l.on_disk = Some(bytes);
        }
        Ok(())
    }
}

impl Workspace {
    /// A view of the workspace at `root` for run `run` of `store`. Creates
    /// nothing; the first capture creates `<run>/workspace/`.
    ///
    /// # Errors
    /// `root` is not a directory that can be resolved.
    pub fn open(
        store: &Store,
        run: &RunId,
        root: impl AsRef<Path>,
        config: CaptureConfig,
    ) -> Result<Self, WorkspaceError> {
        let given = root.as_ref();
        let root = given
            .canonicalize()
            .map_err(|e| WorkspaceError::io("resolving the workspace", given, e))?;
        if !root.is_dir() {
            return Err(WorkspaceError::io(
                "opening the workspace",
                &root,
                std::io::Error::new(std::io::ErrorKind::NotADirectory, "not a directory"),
            ));
        }
        let mut ignore = IgnoreOptions {
            default_excludes: config.default_excludes,
            ..IgnoreOptions::default()
        };
        let store_root = store
            .root()
            .canonicalize()
            .unwrap_or_else(|_| store.root().to_path_buf());
        if let Ok(inside) = store_root.strip_prefix(&root) {
            if let Some(rel) = inside.to_str().filter(|r| !r.is_empty()) {
                ignore.always_excluded.push(rel.to_owned());
            }
        }
        Ok(Workspace {
            store: store.clone(),
            run: run.clone(),
            pool: ObjectPool::at(store).with_chunking(config.chunking()),
            root,
            config,
            ignore,
        })
    }

    /// The workspace root (canonical).
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The run.
    pub fn run(&self) -> &RunId {
        &self.run
    }

    /// The capture settings.
    pub fn config(&self) -> &CaptureConfig {
        &self.config
    }

    pub(crate) fn store(&self) -> &Store {
        &self.store
    }

    pub(crate) fn pool(&self) -> &ObjectPool {
        &self.pool
    }

    pub(crate) fn snapshots_dir(&self) -> PathBuf {
        self.store.snapshots_dir(&self.run)
    }

    pub(crate) fn manifest_path(&self, id: &SnapshotId) -> PathBuf {
        crate::show::manifest_path(&self.store, &self.run, id)
    }

    pub(crate) fn index_path(&self) -> PathBuf {
        self.store.workspace_index_path(&self.run)
    }

    pub(crate) fn statcache_path(&self) -> PathBuf {
        self.store.workspace_dir(&self.run).join(STATCACHE_FILE)
    }

    pub(crate) fn clock_path(&self) -> PathBuf {
        self.store.workspace_dir(&self.run).join("clock")
    }

    /// Takes both locks and starts reading the index (and the stat cache,
    /// `with_cache`, for a session that will capture).
    fn session(&self, with_cache: bool) -> Result<Session<'_>, WorkspaceError> {
        let pool = ObjectPool::open(&self.store)?;
        let ws_lock = self.lock()?;
        let store_lock = StoreLock::shared(pool.store())?;
        let (path, snaps) = (self.index_path(), self.snapshots_dir());
        let cache_path = self.statcache_path();
        let index = IndexSlot::Loading(std::thread::spawn(move || {
            let (mut index, on_disk) = Index::load(&path, &snaps)?;
            let head_missing = index.head_missing(&snaps)?;
            let cache = match with_cache {
                true => Some(index.take_cache(&cache_path, &snaps, head_missing)?),
                false => None,
            };
            Ok(Loaded {
                index,
                on_disk,
                cache,
                head_missing,
            })
        }));
        Ok(Session {
            ws: self,
            index,
            store_lock,
            _ws_lock: ws_lock,
        })
    }

    /// Takes the run's workspace lock ([`lock_run`]).
    pub(crate) fn lock(&self) -> Result<File, WorkspaceError> {
        lock_run(&self.store, &self.run)
    }

    fn read_index(&self) -> Result<Index, WorkspaceError> {
        Ok(Index::load(&self.index_path(), &self.snapshots_dir())?.0)
    }

    /// The rules in force now (re-read on every capture).
    ///
    /// # Errors
    /// The rule file exists but cannot be read.
    pub fn ignore_rules(&self) -> Result<IgnoreRules, WorkspaceError> {
        IgnoreRules::load(&self.root, &self.ignore)
    }

    /// The rule deciding `path` (absolute, or relative to the root), as
    /// `cairn check-ignore -v` reports it; `None` when no rule applies (the
    /// path is captured). A path ending in `/`, or naming an existing
    /// directory, is matched as a directory.
    ///
    /// # Errors
    /// [`WorkspaceError::OutsideWorkspace`] for a path outside the root.
    pub fn check_ignore(&self, path: &Path) -> Result<Option<IgnoreMatch>, WorkspaceError> {
        let outside = || WorkspaceError::OutsideWorkspace {
            path: path.to_owned(),
            root: self.root.clone(),
        };
        let rel = if path.is_absolute() {
            let parent = path.parent().and_then(|p| p.canonicalize().ok());
            match (path.strip_prefix(&self.root), parent) {
                (Ok(r), _) => r.to_path_buf(),
                (Err(_), Some(p)) => match (p.strip_prefix(&self.root), path.file_name()) {
                    (Ok(r), Some(name)) => r.join(name),
                    _ => return Err(outside()),
                },
                _ => return Err(outside()),
            }
        } else {
            path.to_path_buf()
        };
        let mut parts = Vec::new();
        for c in rel.components() {
            match c {
                Component::Normal(s) => parts.push(s.to_str().ok_or_else(outside)?.to_owned()),
                Component::CurDir => {}
                _ => return Err(outside()),
            }
        }
        if parts.is_empty() {
            return Ok(None);
        }
        let rel = parts.join("/");
        let is_dir = path.as_os_str().to_string_lossy().ends_with('/')
            || std::fs::symlink_metadata(self.root.join(&rel)).is_ok_and(|m| m.is_dir());
        Ok(self.ignore_rules()?.check(&rel, is_dir))
    }

    /// Captures the workspace under `label`: a new snapshot whose parent is
    /// the head, or, when the tree equals the head's, the label added to the
    /// head. Every gap is in the report.
    ///
    /// # Errors
    /// [`WorkspaceError::TooManyFiles`] (nothing captured), store and IO errors.
    pub fn capture(
        &self,
        label: &Label,
        progress: &dyn Progress,
    ) -> Result<CaptureReport, WorkspaceError> {
        let mut s = self.session(true)?;
        capture(&mut s, label, progress)
    }

    /// `cairn snapshot [--label LABEL]`: captures under `label`, or under the
    /// next `snap:<n>` when none is given.
    ///
    /// # Errors
    /// As [`Workspace::capture`].
    pub fn snapshot(
        &self,
        label: Option<&Label>,
        progress: &dyn Progress,
    ) -> Result<CaptureReport, WorkspaceError> {
        let mut s = self.session(true)?;
        let label = match label {
            Some(l) => l.clone(),
            None => Label::Snap(history::next_number(s.index()?, false)),
        };
        capture(&mut s, &label, progress)
    }

    /// Points `label` at the head without capturing (how `pre:` costs
    /// nothing between two nodes of a running loop).
    ///
    /// # Errors
    /// [`WorkspaceError::NoSnapshots`] when nothing was captured yet;
    /// [`WorkspaceError::HeadMissing`] (an integrity error) when the head's
    /// manifest is not in this run: a label is never put on a snapshot that
    /// cannot be read back.
    pub fn label_head(&self, label: &Label) -> Result<SnapshotId, WorkspaceError> {
        let mut s = self.session(false)?;
        let head = s.verified_head()?.ok_or(WorkspaceError::NoSnapshots)?;
        s.index()?.set_label(label, &head);
        s.save()?;
        Ok(head)
    }

    /// Marks the start of iteration `at` inside a running loop (the agent
    /// loop's `pre:turn:N`): nothing touches the workspace between two nodes,
    /// so `pre:` is a label on the head; only a run's very first boundary is a
    /// capture (and one whose head's manifest is not in this run: it is
    /// captured afresh, see [`Workspace::capture`]).
    ///
    /// # Errors
    /// As [`Workspace::capture`].
    pub fn mark_pre(
        &self,
        at: &NodeIter,
        progress: &dyn Progress,
    ) -> Result<NodeEntry, WorkspaceError> {
        let mut s = self.session(false)?;
        let pre = Label::Pre(at.clone());
        // A head whose manifest is not in this run is not labelled: the
        // boundary is captured afresh instead.
        let head = match s.head_missing()? {
            true => None,
            false => s.index()?.head.clone(),
        };
        if let Some(head) = head {
            s.index()?.set_label(&pre, &head);
            s.save()?;
            return Ok(NodeEntry {
                at: at.clone(),
                resume: None,
                first: None,
                pre: head,
            });
        }
        let first = capture(&mut s, &pre, progress)?;
        Ok(NodeEntry {
            at: at.clone(),
            resume: None,
            pre: first.snapshot.clone(),
            first: Some(first),
        })
    }

    /// Starts the next iteration of `node` from outside the run's process
    /// (`cairn exec`): captures `resume:<node>:<iter>` when the run has a head
    /// (deduped when nothing moved; what moved came from outside the run),
    /// then points `pre:<node>:<iter>` at the head. The first capture of a run
    /// is taken under `pre:` itself.
    ///
    /// # Errors
    /// As [`Workspace::capture`].
    pub fn enter_node(
        &self,
        node: &NodeName,
        progress: &dyn Progress,
    ) -> Result<NodeEntry, WorkspaceError> {
        let mut s = self.session(true)?;
        let at = NodeIter::new(node.clone(), history::next_iteration(s.index()?, node));
        let pre = Label::Pre(at.clone());
        if s.index()?.head.is_none() {
            let first = capture(&mut s, &pre, progress)?;
            return Ok(NodeEntry {
                at,
                resume: None,
                pre: first.snapshot.clone(),
                first: Some(first),
            });
        }
        let resume = capture(&mut s, &Label::Resume(at.clone()), progress)?;
        s.index()?.set_label(&pre, &resume.snapshot);
        s.save()?;
        Ok(NodeEntry {
            at,
            pre: resume.snapshot.clone(),
            resume: Some(resume),
            first: None,
        })
    }

    /// Ends an iteration: captures `post:`, `fail:` or `pause:` of `at`.
    ///
    /// # Errors
    /// As [`Workspace::capture`].
    pub fn leave_node(
        &self,
        at: &NodeIter,
        end: NodeEnd,
        progress: &dyn Progress,
    ) -> Result<CaptureReport, WorkspaceError> {
        let label = match end {
            NodeEnd::Completed => Label::Post(at.clone()),
            NodeEnd::Failed => Label::Fail(at.clone()),
            NodeEnd::Paused => Label::Pause(at.clone()),
        };
        self.capture(&label, progress)
    }

    /// The next iteration of `node` in this run (iterations count from 1 per
    /// node name within the run).
    ///
    /// # Errors
    /// A manifest or the index cannot be read.
    pub fn next_iteration(&self, node: &NodeName) -> Result<u32, WorkspaceError> {
        Ok(history::next_iteration(&self.read_index()?, node))
    }

    /// The newest capture, if any.
    ///
    /// # Errors
    /// The index cannot be read.
    pub fn head(&self) -> Result<Option<SnapshotId>, WorkspaceError> {
        Ok(self.read_index()?.head)
    }

    /// The snapshot `label` points at in the label map.
    ///
    /// # Errors
    /// The index cannot be read.
    pub fn resolve(&self, label: &Label) -> Result<Option<SnapshotId>, WorkspaceError> {
        Ok(self.read_index()?.labels.get(label).cloned())
    }

    /// The `pre:` boundary that [`Workspace::rewind_to`] would restore for
    /// `to` now (its latest iteration when none is given), without changing
    /// anything: what a caller checks before a rewind it must not start in
    /// vain.
    ///
    /// # Errors
    /// [`WorkspaceError::NoSuchBoundary`]; the index cannot be read.
    pub fn boundary_of(&self, to: &NodeRef) -> Result<(Label, SnapshotId), WorkspaceError> {
        history::resolve_pre(&self.read_index()?, to)
    }

    /// A snapshot's manifest, with every path checked.
    ///
    /// # Errors
    /// [`WorkspaceError::NoSuchSnapshot`], a damaged manifest, an unsafe path.
    pub fn manifest(&self, id: &SnapshotId) -> Result<Manifest, WorkspaceError> {
        Manifest::load(&self.manifest_path(id), id)
    }

    /// The paths added, changed (content or mode) or removed from snapshot
    /// `a` to snapshot `b` of this run, sorted ([`Manifest::changed_paths`]).
    ///
    /// # Errors
    /// Either manifest cannot be read ([`WorkspaceError::NoSuchSnapshot`],
    /// a damaged manifest, an unsafe path): never an empty list instead.
    pub fn changed_paths(
        &self,
        a: &SnapshotId,
        b: &SnapshotId,
    ) -> Result<Vec<String>, WorkspaceError> {
        Ok(self.manifest(a)?.changed_paths(&self.manifest(b)?))
    }

    /// Per-file line stats from snapshot `from` to snapshot `to` of this
    /// run: every path whose entry differs, sorted, like `git diff --stat`
    /// (the rules, and the 4 MiB cap on counted content, are
    /// [`FileChange`]'s and [`MAX_COUNTED_BYTES`](crate::MAX_COUNTED_BYTES)).
    /// Takes no lock and writes nothing.
    ///
    /// # Errors
    /// Either manifest cannot be read ([`WorkspaceError::NoSuchSnapshot`],
    /// a damaged manifest, an unsafe path), or an object cannot be read
    /// ([`WorkspaceError::Objects`]): never a shorter list instead.
    pub fn diff_stat(
        &self,
        from: &SnapshotId,
        to: &SnapshotId,
    ) -> Result<Vec<FileChange>, WorkspaceError> {
        self.snapshots().diff_stat(from, to)
    }

    /// Like [`Workspace::diff_stat`], but only the paths the run itself
    /// changed between them: those that differ across some interval on the
    /// chain from `from` to `to` that the run was executing in (the rule
    /// of the `run` restore scope), so "what the session changed" leaves
    /// out the operator's edits made in pause/fail windows. Each row is the
    /// net change from `from` to `to`; a path the run changed and then
    /// changed back is not listed.
    ///
    /// # Errors
    /// As [`Workspace::diff_stat`], and [`WorkspaceError::BrokenChain`]
    /// when `from` is not an ancestor of `to` (or `to` itself).
    pub fn run_diff_stat(
        &self,
        from: &SnapshotId,
        to: &SnapshotId,
    ) -> Result<Vec<FileChange>, WorkspaceError> {
        let (a, b) = (self.manifest(from)?, self.manifest(to)?);
        let pairs = self.run_pairs(&a, &b)?;
        diffstat::describe_all(&self.pool, &pairs)
    }

    /// The paths [`Workspace::run_diff_stat`] lists, without reading any
    /// file's content (what a list of "files this turn changed" needs).
    ///
    /// # Errors
    /// As [`Workspace::run_diff_stat`], but for object errors.
    pub fn run_changed_paths(
        &self,
        from: &SnapshotId,
        to: &SnapshotId,
    ) -> Result<Vec<String>, WorkspaceError> {
        let (a, b) = (self.manifest(from)?, self.manifest(to)?);
        Ok(self
            .run_pairs(&a, &b)?
            .into_iter()
            .map(|(p, _, _)| p.to_owned())
            .collect())
    }

    /// The differing entries from `a` to `b` that the run itself changed.
    fn run_pairs<'m>(
        &self,
        a: &'m Manifest,
        b: &'m Manifest,
    ) -> Result<Vec<diffstat::Pair<'m>>, WorkspaceError> {
        let run = attribution::attribute(self, &a.id, &b.id)?.run;
        Ok(diffstat::differing(&a.entries, &b.entries)
            .into_iter()
            .filter(|(p, _, _)| run.contains(*p))
            .collect())
    }

    /// A unified diff of `path` from snapshot `from` to snapshot `to`
    /// (the rules of [`Workspace::diff_stat`]): `None` when it is equal in
    /// both, binary, or too large to diff.
    ///
    /// # Errors
    /// A manifest cannot be read; a missing or damaged object.
    pub fn unified_diff(
        &self,
        from: &SnapshotId,
        to: &SnapshotId,
        path: &str,
    ) -> Result<Option<String>, WorkspaceError> {
        self.snapshots().unified_diff(from, to, path)
    }

    /// This run's snapshots, read from the store alone.
    pub fn snapshots(&self) -> crate::Snapshots {
        crate::Snapshots::of(&self.store, &self.run)
    }

    /// Every snapshot, newest first, with every label each carries.
    ///
    /// # Errors
    /// A manifest or the index cannot be read.
    pub fn list_snapshots(&self) -> Result<Vec<SnapshotInfo>, WorkspaceError> {
        list_snapshots(&self.store, &self.run)
    }

    /// Every interval on the chain to the head, oldest first, each judged by
    /// its closing snapshot's own label.
    ///
    /// # Errors
    /// A manifest or the index cannot be read, or the chain is broken.
    pub fn intervals(&self) -> Result<Vec<Interval>, WorkspaceError> {
        let all = history::summaries(&self.snapshots_dir())?;
        let Some(head) = self.read_index()?.head else {
            return Ok(Vec::new());
        };
        Ok(history::intervals(&history::chain(&all, &head)?))
    }

    /// The non-executing windows: intervals whose changes did not come from
    /// the run (closed by `resume:`, a bank, or an operator's capture).
    ///
    /// # Errors
    /// As [`Workspace::intervals`].
    pub fn windows(&self) -> Result<Vec<Interval>, WorkspaceError> {
        Ok(self
            .intervals()?
            .into_iter()
            .filter(|i| !i.by_run)
            .collect())
    }

    /// `cairn rewind --to NODE[:ITER]`: restores the `pre:` state of that node
    /// (its latest iteration when none is given), within `scope`. Banks the
    /// current state first. The run must not be executing.
    ///
    /// # Errors
    /// [`WorkspaceError::NoSuchBoundary`]; integrity errors (nothing changed);
    /// [`WorkspaceError::RestoreIncomplete`] when applying failed part-way.
    pub fn rewind_to(
        &self,
        to: &NodeRef,
        scope: RestoreScope,
        progress: &dyn Progress,
    ) -> Result<RestoreReport, WorkspaceError> {
        let mut s = self.session(true)?;
        restore(&mut s, Target::Node(to), scope, progress)
    }

    /// What [`rewind_to(to, scope)`](Workspace::rewind_to) would do now,
    /// without changing any file of the workspace: the files it would
    /// write, delete or chmod, with line stats, and the paths it would
    /// leave alone, with why (the TUI's confirm screen, DESIGN §11).
    ///
    /// It banks the current state first, as every rewind does (and closes
    /// an interrupted node with `fail:`): those captures are in the preview
    /// so the caller can journal them. It then plans exactly as the restore
    /// would, through the same code; a rewind right after (nothing changed
    /// in between) lands its bank on the same snapshot and does exactly
    /// what the preview lists.
    ///
    /// # Errors
    /// As [`Workspace::rewind_to`] before it changes anything (an unknown
    /// boundary, an unsafe path, a missing object), and an object that
    /// cannot be read for its line stats.
    pub fn preview_rewind(
        &self,
        to: &NodeRef,
        scope: RestoreScope,
        progress: &dyn Progress,
    ) -> Result<RewindPreview, WorkspaceError> {
        let mut s = self.session(true)?;
        preview(&mut s, Target::Node(to), scope, progress)
    }

    /// `cairn rewind --restore-snapshot SNAP`: restores the whole tree of a
    /// snapshot (always full scope). Banks the current state first.
    ///
    /// # Errors
    /// As [`Workspace::rewind_to`].
    pub fn restore_snapshot(
        &self,
        id: &SnapshotId,
        progress: &dyn Progress,
    ) -> Result<RestoreReport, WorkspaceError> {
        let mut s = self.session(true)?;
        restore(&mut s, Target::Snapshot(id), RestoreScope::Full, progress)
    }
}

/// Takes the workspace lock of run `run` (one writer per run; waits),
/// creating `<run>/workspace/snapshots/` if needed.
pub(crate) fn lock_run(store: &Store, run: &RunId) -> Result<File, WorkspaceError> {
    create_dir_private(&store.snapshots_dir(run))?;
    let lock_path = store.workspace_dir(run).join("lock");
    let ws_lock = cairn_store::durable::open_or_create_private(&lock_path)
        .map_err(|e| WorkspaceError::io("opening", &lock_path, e))?;
    ws_lock
        .lock()
        .map_err(|e| WorkspaceError::io("locking", &lock_path, e))?;
    Ok(ws_lock)
}

/// Every snapshot of run `run`, newest first, with every label each
/// carries: what [`Workspace::list_snapshots`] answers, read from the store
/// alone. It needs no workspace directory (the session's may be on another
/// machine, or gone) and no lock (manifests are immutable and the index is
/// replaced atomically).
///
/// # Errors
/// A manifest or the index cannot be read.
pub fn list_snapshots(store: &Store, run: &RunId) -> Result<Vec<SnapshotInfo>, WorkspaceError> {
    let snapshots = store.snapshots_dir(run);
    let all = history::summaries(&snapshots)?;
    let index = Index::load(&store.workspace_index_path(run), &snapshots)?.0;
    Ok(history::list(&all, &index))
}
