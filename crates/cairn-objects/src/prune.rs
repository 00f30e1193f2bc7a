//! Reclaiming disk: mark every object any manifest names, sweep the rest
//! (DESIGN §5.6).

use std::collections::HashSet;
use std::fs;
use std::io;
use std::path::PathBuf;

use crate::{ObjectError, ObjectHash, ObjectPool, Phase, Progress, SourceError, StoreLock};

/// Something that names objects: the snapshot manifests of every run, later
/// checkpoints and the gateway. Prune keeps exactly what its sources name.
pub trait ManifestSource {
    /// A short name for messages, e.g. `workspace snapshots`.
    fn name(&self) -> String;

    /// Calls `mark` with every object hash named by any of this source's
    /// manifests (repeats are fine).
    ///
    /// # Errors
    /// Any manifest that exists but cannot be read or parsed. Prune then
    /// deletes nothing: a partial mark set is how referenced content is lost.
    fn referenced(&self, mark: &mut dyn FnMut(ObjectHash)) -> Result<(), SourceError>;
}

/// How to prune.
#[derive(Clone, Debug, Default)]
#[non_exhaustive]
pub struct PruneOptions {
    /// Report what would be removed and remove nothing. Default: false.
    pub dry_run: bool,
    /// Wait for captures in progress instead of refusing at once with
    /// [`ObjectError::StoreBusy`]. Default: false.
    pub wait: bool,
}

impl PruneOptions {
    /// The defaults: delete, and refuse at once when the store is busy.
    pub fn new() -> Self {
        Self::default()
    }

    /// Sets [`PruneOptions::dry_run`].
    pub fn dry_run(mut self, yes: bool) -> Self {
        self.dry_run = yes;
        self
    }

    /// Sets [`PruneOptions::wait`].
    pub fn wait(mut self, yes: bool) -> Self {
        self.wait = yes;
        self
    }
}

/// What a prune removed, or would remove with `dry_run`.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct PruneReport {
    /// Unreferenced objects removed (or that would be).
    pub objects: u64,
    /// Their size on disk.
    pub bytes: u64,
    /// Objects kept because a manifest names them.
    pub kept: u64,
    /// Their size on disk.
    pub kept_bytes: u64,
    /// Temporary files left by interrupted writes, removed (or that would be).
    pub temporaries: u64,
    /// True when nothing was actually removed.
    pub dry_run: bool,
}

/// Marks every hash the `sources` name and removes every other object, under
/// the exclusive store lock.
///
/// The rules, in order:
/// 1. take the store lock exclusively (waiting only with [`PruneOptions::wait`]),
///    so no capture is between writing objects and naming them;
/// 2. refuse a pool written by a newer cairn;
/// 3. mark: ask every source for its hashes; if any fails, stop and delete
///    nothing ([`ObjectError::ManifestUnreadable`]);
/// 4. sweep: remove each object file whose name is not marked, and each
///    temporary file an interrupted write left (no writer can be active);
///    files that are neither are left alone.
///
/// # Errors
/// As above, plus IO errors while listing or deleting (objects deleted before
/// such an error stay deleted; they were unreferenced).
pub fn prune(
    pool: &ObjectPool,
    sources: &[&dyn ManifestSource],
    opts: &PruneOptions,
    progress: &dyn Progress,
) -> Result<PruneReport, ObjectError> {
    let _lock = if opts.wait {
        StoreLock::exclusive(pool.store())?
    } else {
        StoreLock::try_exclusive(pool.store())?
    };
    pool.check_format()?;

    progress.begin(Phase::Mark, None);
    let mut marked: HashSet<ObjectHash> = HashSet::new();
    for source in sources {
        let mut mark = |h: ObjectHash| {
            if marked.insert(h) {
                progress.advance(Phase::Mark, 1, 0);
            }
        };
        source
            .referenced(&mut mark)
            .map_err(|e| ObjectError::ManifestUnreadable {
                source_name: source.name(),
                source: e,
            })?;
    }
    progress.end(Phase::Mark);

    let mut report = PruneReport {
        dry_run: opts.dry_run,
        ..PruneReport::default()
    };
    progress.begin(Phase::Sweep, None);
    for entry in list_pool(pool)? {
        match entry {
            PoolFile::Object { hash, path, len } if !marked.contains(&hash) => {
                if !opts.dry_run {
                    remove(&path)?;
                }
                report.objects += 1;
                report.bytes += len;
                progress.advance(Phase::Sweep, 1, len);
            }
            PoolFile::Object { len, .. } => {
                report.kept += 1;
                report.kept_bytes += len;
            }
            PoolFile::Temporary { path } => {
                if !opts.dry_run {
                    remove(&path)?;
                }
                report.temporaries += 1;
            }
        }
    }
    progress.end(Phase::Sweep);
    Ok(report)
}

fn remove(path: &PathBuf) -> Result<(), ObjectError> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(ObjectError::io("removing", path, e)),
    }
}

enum PoolFile {
    Object {
        hash: ObjectHash,
        path: PathBuf,
        len: u64,
    },
    Temporary {
        path: PathBuf,
    },
}

/// Every object and temporary file in the pool.
fn list_pool(pool: &ObjectPool) -> Result<Vec<PoolFile>, ObjectError> {
    let read = |dir: &PathBuf| -> Result<Option<fs::ReadDir>, ObjectError> {
        match fs::read_dir(dir) {
            Ok(r) => Ok(Some(r)),
            Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(ObjectError::io("listing", dir, e)),
        }
    };
    let root = pool.dir().to_path_buf();
    let mut out = Vec::new();
    let Some(fans) = read(&root)? else {
        return Ok(out);
    };
    for fan in fans {
        let fan = fan.map_err(|e| ObjectError::io("listing", &root, e))?;
        let name = fan.file_name();
        let Some(prefix) = name.to_str().filter(|n| is_fan_out(n)).map(str::to_owned) else {
            continue;
        };
        let dir = fan.path();
        let Some(entries) = read(&dir)? else {
            continue;
        };
        for entry in entries {
            let entry = entry.map_err(|e| ObjectError::io("listing", &dir, e))?;
            let Some(name) = entry.file_name().to_str().map(str::to_owned) else {
                continue;
            };
            let path = entry.path();
            if name.starts_with('.') && name.ends_with(".tmp") {
                out.push(PoolFile::Temporary { path });
            } else if let Ok(hash) = ObjectHash::parse(&format!("{prefix}{name}")) {
                let len = entry
                    .metadata()
                    .map_err(|e| ObjectError::io("reading metadata of", &path, e))?
                    .len();
                out.push(PoolFile::Object { hash, path, len });
            }
        }
    }
    Ok(out)
}

fn is_fan_out(name: &str) -> bool {
    name.len() == 2 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}
