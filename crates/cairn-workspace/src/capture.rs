//! Capture: walk, reuse what the stat cache may vouch for, hash the rest in
//! parallel, store new objects, write the manifest (or dedupe onto the head),
//! then the stat cache (only when it changed) and the index.

use std::path::Path;

use cairn_objects::{
    open_nofollow, BatchReport, ObjectBatch, ObjectError, ObjectHash, Phase, Progress, StoreLock,
};
use rayon::prelude::*;
use serde::Serialize;

use crate::manifest::{
    Entry, ManifestOut, SkipReason, Skipped, SnapshotId, SortedEntries, MANIFEST_VERSION,
};
use crate::statcache::{CacheEntry, Stat, StatCache, Trust};
use crate::walk::{walk, Found, Limits};
use crate::workspace::{Session, Workspace};
use crate::{Label, WorkspaceError};

/// How often a file that changes while it is read is re-read before it is
/// reported as [`SkipReason::Changing`].
const READ_ATTEMPTS: usize = 3;

/// The outcome of one capture.
#[derive(Clone, Debug, Serialize)]
pub struct CaptureReport {
    /// The snapshot that now holds this state (the head's, when deduped).
    pub snapshot: SnapshotId,
    /// The label this capture added.
    pub label: Label,
    /// True when the tree equalled the head's, so no manifest was written and
    /// the label was added to the head.
    pub deduped: bool,
    /// Files captured.
    pub files: u64,
    /// Their total size.
    pub bytes: u64,
    /// Files read and hashed this time (the rest came from the stat cache).
    pub hashed: u64,
    /// Bytes read and hashed this time.
    pub hashed_bytes: u64,
    /// Objects this capture added to the store.
    pub stored_objects: u64,
    /// Bytes those objects occupy.
    pub stored_bytes: u64,
    /// Coverage gaps: paths present but not captured, with the reason.
    pub skipped: Vec<Skipped>,
    /// Rule-file lines that were skipped, and why.
    pub warnings: Vec<String>,
}

enum Hashed {
    Captured { entry: Entry, stat: Stat },
    Vanished,
    Skip(SkipReason),
}

pub(crate) fn capture(
    s: &mut Session<'_>,
    label: &Label,
    progress: &dyn Progress,
) -> Result<CaptureReport, WorkspaceError> {
    let ws = s.ws;
    let started = crate::clock::store_now(&ws.clock_path())?;
    let rules = ws.ignore_rules()?;
    let config = ws.config();
    let limits = Limits {
        max_files: config.max_files,
        max_file_bytes: config.max_file_bytes,
    };
    // The index may still be loading on another thread while we walk.
    let walked = walk(ws.root(), &rules, limits, progress)?;
    let cache_path = ws.statcache_path();
    // A head whose manifest is not in this run (deleted, or an index naming
    // another run's snapshot) is never deduped onto: the capture starts
    // afresh, trusting no stat, and its parent is the newest snapshot this
    // run can read back (as an index rebuilt from the manifests would have
    // it).
    let mut warnings: Vec<String> = rules.warnings().iter().map(|w| w.to_string()).collect();
    let fresh_parent = match s.head_missing()? {
        false => None,
        true => {
            let missing = s.index()?.head.clone();
            let newest = crate::history::summaries(&ws.snapshots_dir())?
                .pop()
                .map(|m| m.id);
            if let Some(m) = &missing {
                warnings.push(format!(
                    "the workspace index named {m} as the head, but this session has no such snapshot; captured afresh{}",
                    newest.as_ref().map_or(String::new(), |n| format!(" on top of {n}, the newest snapshot it has"))
                ));
            }
            Some(newest)
        }
    };
    let (index, cache, lock) = s.parts()?;
    let trust = Trust {
        started_ns: cache.started_ns,
        slack_ns: i64::try_from(config.racy_slack.as_nanos()).unwrap_or(i64::MAX),
        ctime: config.trust_ctime,
    };

    // Both lists are sorted by path. The common case, every file where the
    // cache has it and trusted, is decided in one pass that copies nothing:
    // the tree is the cache's, which is the head's.
    let all_trusted = walked.files.len() == cache.files.len()
        && walked
            .files
            .iter()
            .zip(&cache.files)
            .all(|(f, (k, c))| f.path == *k && trust.trusts(c, &f.stat));
    let mut skipped = walked.skipped;
    let read = if all_trusted {
        Read::default()
    } else {
        read_changes(
            ws,
            walked.files,
            &cache.files,
            &trust,
            lock,
            limits,
            &mut skipped,
            progress,
        )?
    };
    skipped.sort_by(|a, b| a.path.cmp(&b.path));

    // The stat cache file is rewritten only when its content changed: an
    // entry added, removed or read again (a re-read entry, even with the same
    // stat, becomes trustworthy only against this capture's start). Otherwise
    // it keeps the start of the capture that wrote it, which is what its
    // entries are trusted against. Every entry reused is the old entry
    // itself, so with nothing read the new list is a subset of the old one.
    let new_cache = read
        .list
        .filter(|list| read.hashed > 0 || list.len() != cache.files.len())
        .map(|files| StatCache {
            started_ns: Some(started),
            files,
            on_disk: None,
        });
    if new_cache.is_none() && cache.on_disk.is_none() {
        // Only its file is missing (an older index held it inline).
        index.statcache = Some(cache.save(&cache_path)?);
    }
    let entries: &[(String, CacheEntry)] = match &new_cache {
        Some(c) => &c.files,
        None => &cache.files,
    };
    let files = entries.len() as u64;
    let bytes = entries.iter().map(|(_, c)| c.size).sum();
    let same_as_head = index.head.is_some()
        && fresh_parent.is_none()
        && skipped == index.head_skipped
        && (new_cache.is_none() || same_tree(entries, &cache.files));

    // The manifest (when the tree differs from the head's) and the stat cache
    // (when it changed) are independent files: written side by side. The
    // index, which names both, is written after both are durable.
    let new_id = match (&index.head, same_as_head) {
        (Some(head), true) => Err(head.clone()),
        _ => Ok(SnapshotId::new()),
    };
    let head = match &fresh_parent {
        Some(parent) => parent.as_ref(),
        None => index.head.as_ref(),
    };
    let write_manifest = || -> Result<(), WorkspaceError> {
        let Ok(id) = &new_id else {
            return Ok(());
        };
        ManifestOut {
            version: MANIFEST_VERSION,
            id,
            parent: head,
            label,
            created: &crate::now_rfc3339(),
            files,
            bytes,
            entries: SortedEntries {
                list: entries,
                get: |(p, c)| (p.as_str(), c.entry()),
            },
            skipped: &skipped,
        }
        .write(&ws.manifest_path(id))
    };
    let write_cache = || match &new_cache {
        Some(c) => c.write(&cache_path).map(Some),
        None => Ok(None),
    };
    let (wrote, saved) = rayon::join(write_manifest, write_cache);
    wrote?;
    // Cache first, then the index naming it: a crash in between leaves an
    // index whose checksum does not match the file, so the stale cache is
    // ignored.
    if let (Some(sum), Some(mut c)) = (saved?, new_cache) {
        c.on_disk = Some(sum);
        *cache = c;
        index.statcache = Some(sum);
    }
    // The new snapshot, or the head this capture deduped onto.
    let snapshot = match new_id {
        Ok(id) | Err(id) => id,
    };
    index.head = Some(snapshot.clone());
    index.head_skipped = skipped.clone();
    index.set_label(label, &snapshot);
    s.save()?;

    Ok(CaptureReport {
        snapshot,
        label: label.clone(),
        deduped: same_as_head,
        files,
        bytes,
        hashed: read.hashed,
        hashed_bytes: read.hashed_bytes,
        stored_objects: read.committed.objects,
        stored_bytes: read.committed.stored_bytes,
        skipped,
        warnings,
    })
}

/// What reading the files the stat cache could not vouch for produced.
#[derive(Default)]
struct Read {
    /// Every captured path with its entry, sorted (`None`: nothing was read
    /// and the cache's own list stands).
    list: Option<Vec<(String, CacheEntry)>>,
    hashed: u64,
    hashed_bytes: u64,
    committed: BatchReport,
}

/// Merges the walk with the cache, reads in parallel every file the cache
/// cannot vouch for, and commits the new objects. Gaps found while reading
/// are added to `skipped`.
#[allow(clippy::too_many_arguments)]
fn read_changes(
    ws: &Workspace,
    walked: Vec<Found>,
    cached: &[(String, CacheEntry)],
    trust: &Trust,
    lock: &StoreLock,
    limits: Limits,
    skipped: &mut Vec<Skipped>,
    progress: &dyn Progress,
) -> Result<Read, WorkspaceError> {
    // One merge pass decides what to read. `list` becomes the new stat
    // cache; a file to read holds its place with a placeholder entry.
    let mut list: Vec<(String, CacheEntry)> = Vec::with_capacity(walked.len());
    let mut jobs: Vec<(usize, Found)> = Vec::new();
    let mut cached = cached.iter().peekable();
    for f in walked {
        while cached
            .next_if(|(k, _)| k.as_str() < f.path.as_str())
            .is_some()
        {}
        match cached.peek() {
            Some((k, c)) if *k == f.path && trust.trusts(c, &f.stat) => list.push((f.path, *c)),
            _ => {
                let placeholder = CacheEntry::new(&f.stat, ObjectHash::from_bytes([0; 32]));
                jobs.push((
                    list.len(),
                    Found {
                        path: f.path.clone(),
                        stat: f.stat,
                    },
                ));
                list.push((f.path, placeholder));
            }
        }
    }

    let batch = ws.pool().batch(lock);
    progress.begin(Phase::Hash, Some(jobs.len() as u64));
    let results: Vec<Result<Hashed, WorkspaceError>> = jobs
        .par_iter()
        .map(|(_, f)| {
            let r = hash_one(&batch, ws.root(), f, limits.max_file_bytes);
            if let Ok(Hashed::Captured { entry, .. }) = &r {
                progress.advance(Phase::Hash, 1, entry.size);
            }
            r
        })
        .collect();
    progress.end(Phase::Hash);

    let (mut hashed, mut hashed_bytes) = (0u64, 0u64);
    let mut gone: Vec<usize> = Vec::new(); // ascending: jobs are in list order
    for ((at, f), r) in jobs.into_iter().zip(results) {
        match r? {
            Hashed::Captured { entry, stat } => {
                hashed += 1;
                hashed_bytes += entry.size;
                list[at].1 = CacheEntry::new(&stat, entry.hash);
            }
            Hashed::Skip(reason) => {
                skipped.push(Skipped {
                    path: f.path,
                    reason,
                });
                gone.push(at);
            }
            Hashed::Vanished => gone.push(at),
        }
    }
    if !gone.is_empty() {
        let mut gone = gone.into_iter().peekable();
        let mut i = 0;
        list.retain(|_| {
            let keep = gone.next_if_eq(&i).is_none();
            i += 1;
            keep
        });
    }
    let committed = batch.commit(progress)?;
    Ok(Read {
        list: Some(list),
        hashed,
        hashed_bytes,
        committed,
    })
}

/// True when both lists name the same files with the same content and mode.
fn same_tree(a: &[(String, CacheEntry)], b: &[(String, CacheEntry)]) -> bool {
    a.len() == b.len()
        && a.iter()
            .zip(b)
            .all(|((p, x), (q, y))| p == q && x.entry() == y.entry())
}

/// Reads one file into the batch, with a stat before and after; re-reads a
/// file that changed meanwhile.
fn hash_one(
    batch: &ObjectBatch<'_>,
    root: &Path,
    f: &Found,
    max_bytes: u64,
) -> Result<Hashed, WorkspaceError> {
    let abs = root.join(&f.path);
    let unreadable = |e: &std::io::Error| {
        Hashed::Skip(SkipReason::Unreadable {
            detail: e.to_string(),
        })
    };
    for _ in 0..READ_ATTEMPTS {
        let file = match open_nofollow(&abs) {
            Ok(file) => file,
            Err(e) => {
                return Ok(match e.raw_os_error() {
                    Some(libc::ENOENT) | Some(libc::ENOTDIR) => Hashed::Vanished,
                    Some(libc::ELOOP) => Hashed::Skip(SkipReason::Symlink),
                    _ => unreadable(&e),
                })
            }
        };
        let before = match file.metadata() {
            Ok(m) => Stat::of(&m),
            Err(e) => return Ok(unreadable(&e)),
        };
        if before.mode & libc::S_IFMT != libc::S_IFREG {
            return Ok(Hashed::Skip(SkipReason::Special));
        }
        if before.size > max_bytes {
            return Ok(Hashed::Skip(SkipReason::TooLarge {
                size: before.size,
                limit: max_bytes,
            }));
        }
        let put = match batch.put_open_file(&file, &abs) {
            Ok(p) => p,
            Err(ObjectError::SourceChanged { .. }) => continue,
            Err(ObjectError::Io { path, source, .. }) if path == abs => {
                return Ok(unreadable(&source));
            }
            Err(e) => return Err(e.into()),
        };
        let after = match file.metadata() {
            Ok(m) => Stat::of(&m),
            Err(e) => return Ok(unreadable(&e)),
        };
        let by_path = std::fs::symlink_metadata(&abs).map(|m| Stat::of(&m)).ok();
        if before == after && by_path == Some(after) && put.size == after.size {
            return Ok(Hashed::Captured {
                entry: Entry {
                    hash: put.hash,
                    size: put.size,
                    mode: cairn_store::safe::permission_bits(after.mode),
                },
                stat: after,
            });
        }
    }
    Ok(Hashed::Skip(SkipReason::Changing))
}
