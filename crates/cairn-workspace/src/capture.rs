//! Capture: walk, reuse what the stat cache may vouch for, hash the rest in
//! parallel, store new objects, write the manifest (or dedupe onto the head),
//! then the stat cache (only when it changed) and the index.

use std::path::Path;

use cairn_objects::{open_nofollow, ObjectBatch, ObjectError, ObjectHash, Phase, Progress};
use rayon::prelude::*;
use serde::Serialize;

use crate::index::{CacheEntry, Stat, StatCache, Trust};
use crate::manifest::{
    Entry, ManifestOut, SkipReason, Skipped, SnapshotId, SortedEntries, MANIFEST_VERSION,
};
use crate::walk::{walk, Found, Limits};
use crate::workspace::Session;
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

/// One walked file on its way into the manifest.
enum Item {
    /// The stat cache vouched for it.
    Known(Entry, CacheEntry),
    /// It must be read; the index into the hashing jobs.
    Job(usize),
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
    let (index, cache, lock) = s.parts()?;
    let trust = Trust {
        started_ns: cache.started_ns,
        slack_ns: i64::try_from(config.racy_slack.as_nanos()).unwrap_or(i64::MAX),
        ctime: config.trust_ctime,
    };

    // Both lists are sorted by path: one merge pass decides what to read.
    let mut items: Vec<(String, Item)> = Vec::with_capacity(walked.files.len());
    let mut jobs: Vec<Found> = Vec::new();
    let mut cached = cache.files.iter().peekable();
    for f in walked.files {
        while cached
            .next_if(|(k, _)| k.as_str() < f.path.as_str())
            .is_some()
        {}
        let hit = match cached.peek() {
            Some((k, c)) if *k == f.path && trust.trusts(c, &f.stat) => Some(*c),
            _ => None,
        };
        match hit {
            Some(c) => {
                let e = Entry {
                    hash: c.hash,
                    size: c.size,
                    mode: c.mode & 0o777,
                };
                items.push((f.path, Item::Known(e, c)));
            }
            None => {
                items.push((f.path.clone(), Item::Job(jobs.len())));
                jobs.push(f);
            }
        }
    }

    let batch = ws.pool().batch(lock);
    progress.begin(Phase::Hash, Some(jobs.len() as u64));
    let mut results: Vec<Option<Result<Hashed, WorkspaceError>>> = jobs
        .par_iter()
        .map(|f| {
            let r = hash_one(&batch, ws.root(), f, limits.max_file_bytes);
            if let Ok(Hashed::Captured { entry, .. }) = &r {
                progress.advance(Phase::Hash, 1, entry.size);
            }
            Some(r)
        })
        .collect();
    progress.end(Phase::Hash);

    let mut skipped = walked.skipped;
    let (mut hashed, mut hashed_bytes) = (0u64, 0u64);
    let mut list: Vec<(String, Entry, CacheEntry)> = Vec::with_capacity(items.len());
    for (path, item) in items {
        match item {
            Item::Known(e, c) => list.push((path, e, c)),
            Item::Job(i) => match results[i].take().transpose()? {
                Some(Hashed::Captured { entry, stat }) => {
                    hashed += 1;
                    hashed_bytes += entry.size;
                    list.push((path, entry, CacheEntry::new(&stat, entry.hash)));
                }
                Some(Hashed::Skip(reason)) => skipped.push(Skipped { path, reason }),
                Some(Hashed::Vanished) | None => {}
            },
        }
    }
    skipped.sort_by(|a, b| a.path.cmp(&b.path));
    let committed = batch.commit(progress)?;

    let files = list.len() as u64;
    let bytes = list.iter().map(|(_, e, _)| e.size).sum();
    let same_as_head = index.head.is_some()
        && skipped == index.head_skipped
        && list.len() == cache.files.len()
        && list.iter().zip(&cache.files).all(|((p, e, _), (q, c))| {
            p == q && e.hash == c.hash && e.size == c.size && e.mode == c.mode & 0o777
        });
    // The manifest (when the tree differs from the head's) and the stat cache
    // (when it changed) are independent files: written side by side. The
    // index, which names both, is written after both are durable.
    let new_id = match (&index.head, same_as_head) {
        (Some(_), true) => None,
        _ => Some(SnapshotId::new()),
    };
    let head = index.head.as_ref();
    let write_manifest = || -> Result<(), WorkspaceError> {
        let Some(id) = &new_id else {
            return Ok(());
        };
        let json = ManifestOut {
            version: MANIFEST_VERSION,
            id,
            parent: head,
            label,
            created: &crate::now_rfc3339(),
            files,
            bytes,
            entries: SortedEntries {
                list: &list,
                get: |(p, e, _)| (p.as_str(), e),
            },
            skipped: &skipped,
        }
        .encode()?;
        cairn_store::durable::write_atomic(&ws.manifest_path(id), &json)?;
        Ok(())
    };

    // The stat cache file is rewritten only when its content changed: an
    // entry added, removed or read again (a re-read entry, even with the same
    // stat, becomes trustworthy only against this capture's start). Otherwise
    // it keeps the start of the capture that wrote it, which is what its
    // entries are trusted against. Every entry reused above is the old entry
    // itself, so with nothing read the new list is a subset of the old one.
    let changed = cache.on_disk.is_none() || hashed > 0 || list.len() != cache.files.len();
    let save_cache = || -> Result<Option<ObjectHash>, WorkspaceError> {
        if !changed {
            return Ok(None);
        }
        *cache = StatCache {
            started_ns: Some(started),
            // Copies of the paths: the manifest is encoded from the list
            // at the same time.
            files: list.iter().map(|(p, _, c)| (p.clone(), *c)).collect(),
            on_disk: None,
        };
        cache.save(&cache_path).map(Some)
    };
    let (wrote, saved) = rayon::join(write_manifest, save_cache);
    wrote?;
    // Cache first, then the index naming it: a crash in between leaves an
    // index whose checksum does not match the file, so the stale cache is
    // ignored.
    if let Some(sum) = saved? {
        index.statcache = Some(sum);
    }
    let snapshot = match (new_id, &index.head) {
        (Some(id), _) => id,
        (None, Some(head)) => head.clone(),
        (None, None) => unreachable!("a capture deduped onto a head has one"),
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
        hashed,
        hashed_bytes,
        stored_objects: committed.objects,
        stored_bytes: committed.stored_bytes,
        skipped,
        warnings: rules.warnings().iter().map(|w| w.to_string()).collect(),
    })
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
                    mode: after.mode & 0o777,
                },
                stat: after,
            });
        }
    }
    Ok(Hashed::Skip(SkipReason::Changing))
}
