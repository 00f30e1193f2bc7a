//! Reclaiming disk: mark every object any manifest names, sweep the rest
//! (DESIGN §5.6).

use std::collections::{BTreeMap, HashSet};
use std::io;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use cairn_store::nofollow::{self, FileKind};

use crate::dirs::Dir;
use crate::{
    ObjectError, ObjectHash, ObjectKind, ObjectPool, Phase, Progress, SourceError, StoreLock,
};

/// Something that names objects: the snapshot manifests of every run,
/// checkpoints, the gateway. Prune keeps exactly what its sources name, plus
/// every chunk of every chunk list among them (a source names a large file
/// by its content hash and need not know how it is stored).
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
///    so no capture is between writing objects and naming them — a dry run
///    takes it shared, as captures do, since it deletes nothing;
/// 2. refuse a pool written by a newer cairn;
/// 3. mark: ask every source for its hashes; if any fails, stop and delete
///    nothing ([`ObjectError::ManifestUnreadable`]);
/// 4. mark the chunks of every marked chunk list; a marked object whose
///    header or list cannot be read (or whose kind this build does not know)
///    stops the prune the same way, since its chunks cannot be known;
/// 5. sweep: remove each unmarked chunk list, fsync their directories, then
///    every other object whose name is not marked (so no crash leaves a
///    chunk list whose chunks are gone), and each temporary file an
///    interrupted write left (no writer can be active); files that are
///    neither are left alone.
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
    // A dry run deletes nothing, so it shares the lock with captures (its
    // count is then what a prune would have removed at that moment); a
    // real prune must exclude them.
    let _lock = if opts.dry_run {
        StoreLock::shared(pool.store())?
    } else if opts.wait {
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
    mark_chunks(pool, &mut marked, progress)?;
    progress.end(Phase::Mark);

    let mut report = PruneReport {
        dry_run: opts.dry_run,
        ..PruneReport::default()
    };
    progress.begin(Phase::Sweep, None);
    let mut doomed = Vec::new();
    for entry in list_pool(pool)? {
        match entry {
            PoolFile::Object { hash, at, len, .. } if !marked.contains(&hash) => {
                doomed.push((hash, at, len));
            }
            PoolFile::Object { len, .. } => {
                report.kept += 1;
                report.kept_bytes += len;
            }
            PoolFile::Temporary { at } => {
                if !opts.dry_run {
                    remove(&at)?;
                }
                report.temporaries += 1;
            }
        }
    }
    // Chunk lists first, made durable, then the rest.
    let (lists, rest): (Vec<_>, Vec<_>) = doomed
        .into_iter()
        .partition(|(h, _, _)| matches!(pool.info(h), Ok(i) if i.kind == ObjectKind::ChunkList));
    for (i, group) in [lists, rest].into_iter().enumerate() {
        let mut dirs = BTreeMap::new();
        for (_, at, len) in group {
            if !opts.dry_run {
                remove(&at)?;
                dirs.insert(at.dir.path.clone(), Arc::clone(&at.dir));
            }
            report.objects += 1;
            report.bytes += len;
            progress.advance(Phase::Sweep, 1, len);
        }
        if i == 0 {
            for d in dirs.values() {
                d.sync("prune.dir")?;
            }
        }
    }
    progress.end(Phase::Sweep);
    Ok(report)
}

/// Adds the chunks of every marked chunk list to `marked`, reading the
/// headers of the marked objects on a few threads.
fn mark_chunks(
    pool: &ObjectPool,
    marked: &mut HashSet<ObjectHash>,
    progress: &dyn Progress,
) -> Result<(), ObjectError> {
    const THREADS: usize = 8;
    let roots: Vec<ObjectHash> = marked.iter().copied().collect();
    if roots.is_empty() {
        return Ok(());
    }
    let per = roots.len().div_ceil(THREADS);
    let found: Vec<Result<Vec<ObjectHash>, ObjectError>> = std::thread::scope(|scope| {
        let handles: Vec<_> = roots
            .chunks(per)
            .map(|part| {
                scope.spawn(move || -> Result<Vec<ObjectHash>, ObjectError> {
                    let mut out = Vec::new();
                    for h in part {
                        match pool.chunk_list(h) {
                            Ok(Some(list)) => out.extend(list.iter().map(|c| c.hash)),
                            Ok(None) | Err(ObjectError::Missing { .. }) => {}
                            Err(e) => {
                                return Err(ObjectError::ManifestUnreadable {
                                    source_name: "chunk lists".into(),
                                    source: Box::new(e),
                                })
                            }
                        }
                    }
                    Ok(out)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join().unwrap_or_else(|_| {
                    Err(ObjectError::io(
                        "reading chunk lists",
                        pool.dir(),
                        io::Error::other("a reader thread panicked"),
                    ))
                })
            })
            .collect()
    });
    for r in found {
        for h in r? {
            if marked.insert(h) {
                progress.advance(Phase::Mark, 1, 0);
            }
        }
    }
    Ok(())
}

/// Removes a file the listing found, in the directory it found it in.
fn remove(at: &Found) -> Result<(), ObjectError> {
    match nofollow::unlink_at(&at.dir.fd, &at.name) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(ObjectError::io("removing", at.path(), e)),
    }
}

/// A file found in a fan-out directory held open.
pub(crate) struct Found {
    pub(crate) dir: Arc<Dir>,
    pub(crate) name: String,
}

impl Found {
    pub(crate) fn path(&self) -> PathBuf {
        self.dir.path.join(&self.name)
    }
}

pub(crate) enum PoolFile {
    Object {
        hash: ObjectHash,
        at: Found,
        len: u64,
        modified: Option<SystemTime>,
    },
    Temporary {
        at: Found,
    },
}

/// Every object and temporary file in the pool, each directory reached
/// without following a link (a fan-out directory that is a link is
/// refused, never listed: what it points at is not the store's).
pub(crate) fn list_pool(pool: &ObjectPool) -> Result<Vec<PoolFile>, ObjectError> {
    let mut out = Vec::new();
    let Some(objects) = pool.objects_dir()? else {
        return Ok(out);
    };
    let fans = nofollow::read_dir_at(&objects.fd)
        .map_err(|e| ObjectError::io("listing", &objects.path, e))?;
    for fan in fans {
        let Some(prefix) = fan.name.to_str().filter(|n| is_fan_out(n)) else {
            continue;
        };
        if fan.kind != FileKind::Dir {
            return Err(ObjectError::NotPlain {
                path: objects.path.join(prefix),
                what: fan.kind.describe(),
                expected: "directory",
            });
        }
        let Some(dir) = pool.fan_dir(prefix)? else {
            continue;
        };
        let dir = Arc::new(dir);
        let entries =
            nofollow::read_dir_at(&dir.fd).map_err(|e| ObjectError::io("listing", &dir.path, e))?;
        for entry in entries {
            let Some(name) = entry.name.to_str().map(str::to_owned) else {
                continue;
            };
            let at = Found {
                dir: Arc::clone(&dir),
                name,
            };
            if at.name.starts_with('.') && at.name.ends_with(".tmp") {
                out.push(PoolFile::Temporary { at });
            } else if let Ok(hash) = ObjectHash::parse(&format!("{prefix}{}", at.name)) {
                if entry.kind != FileKind::File {
                    // Not an object file (a link named like one): not the
                    // pool's, and never followed.
                    continue;
                }
                let st = match nofollow::lstat_if_exists(&dir.fd, &at.name) {
                    Ok(Some(st)) => st,
                    Ok(None) => continue,
                    Err(e) => return Err(ObjectError::io("reading metadata of", at.path(), e)),
                };
                let modified = mtime(&st);
                out.push(PoolFile::Object {
                    hash,
                    len: st.st_size as u64,
                    at,
                    modified,
                });
            }
        }
    }
    Ok(out)
}

/// The modification time in a `stat` result.
// The widths of the time fields differ between platforms.
#[allow(clippy::unnecessary_cast)]
fn mtime(st: &libc::stat) -> Option<SystemTime> {
    let secs = u64::try_from(st.st_mtime).ok()?;
    let nanos = u32::try_from(st.st_mtime_nsec).ok()?;
    SystemTime::UNIX_EPOCH.checked_add(std::time::Duration::new(secs, nanos))
}

fn is_fan_out(name: &str) -> bool {
    name.len() == 2 && name.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}
