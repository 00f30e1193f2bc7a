//! The stat cache file (`statcache.bin`): ignored when damaged or stale,
//! written only when it changed, migrated from an index v1.

mod common;

use std::fs;
use std::os::unix::fs::MetadataExt;
use std::path::PathBuf;
use std::time::Duration;

use cairn_workspace::*;
use common::*;
use sha2::{Digest, Sha256};

const N: u64 = 12;

/// The racy guard's slack in these tests: long enough that a file written
/// just before a capture is inside it however slow the machine is.
const SLACK: Duration = Duration::from_secs(1);

fn fixture() -> Fixture {
    let f = Fixture::with(CaptureConfig::default().racy_slack(SLACK));
    for i in 0..N {
        f.write(&format!("d/f{i}.txt"), &format!("file {i}"));
    }
    // Older than the first capture's start minus the slack: trustworthy.
    f.settle(SLACK);
    f
}

fn cache_path(f: &Fixture) -> PathBuf {
    f.store.workspace_dir(&f.run).join("statcache.bin")
}

fn index_path(f: &Fixture) -> PathBuf {
    f.store.workspace_index_path(&f.run)
}

/// Inode, mtime and bytes: a rewrite (temp file + rename) changes the inode.
fn identity(p: &PathBuf) -> (u64, i64, i64, Vec<u8>) {
    let m = fs::metadata(p).unwrap();
    (m.ino(), m.mtime(), m.mtime_nsec(), fs::read(p).unwrap())
}

#[test]
fn an_unchanged_capture_does_not_rewrite_the_stat_cache() {
    let f = fixture();
    let first = f.capture("snap:1");
    assert_eq!((first.hashed, first.files), (N, N));
    let cache = identity(&cache_path(&f));

    let second = f.capture("snap:2");
    assert_eq!((second.hashed, second.deduped), (0, true));
    assert_eq!(
        identity(&cache_path(&f)),
        cache,
        "the stat cache was rewritten"
    );
    // The index was (a new label), and names the same cache.
    assert_eq!(
        f.ws.resolve(&label("snap:2")).unwrap(),
        Some(first.snapshot.clone())
    );

    // Nothing new at all (the label already points at the head): neither
    // file is written.
    let index = identity(&index_path(&f));
    f.ws.label_head(&label("snap:2")).unwrap();
    let third = f.capture("snap:2");
    assert_eq!((third.hashed, third.deduped), (0, true));
    assert_eq!(identity(&index_path(&f)), index, "the index was rewritten");
    assert_eq!(
        identity(&cache_path(&f)),
        cache,
        "the stat cache was rewritten"
    );

    // A change rewrites it, and the new cache is trusted afterwards.
    f.write("d/f3.txt", "changed");
    let fourth = f.capture("snap:4");
    assert_eq!((fourth.hashed, fourth.deduped), (1, false));
    assert_ne!(identity(&cache_path(&f)).0, cache.0);
    f.settle(SLACK);
    // f3 was written within the slack of snap:4's start: re-read once...
    let fifth = f.capture("snap:5");
    assert_eq!((fifth.hashed, fifth.deduped), (1, true));
    // ...and that re-read is recorded against snap:5's start, so it is
    // trusted now.
    let sixth = f.capture("snap:6");
    assert_eq!((sixth.hashed, sixth.deduped), (0, true));

    // A removed file changes the cache too.
    f.remove("d/f0.txt");
    let seventh = f.capture("snap:7");
    assert_eq!(
        (seventh.hashed, seventh.deduped, seventh.files),
        (0, false, N - 1)
    );
    let eighth = f.capture("snap:8");
    assert_eq!(
        (eighth.hashed, eighth.deduped, eighth.files),
        (0, true, N - 1)
    );
}

#[test]
fn a_damaged_stat_cache_is_ignored_and_everything_is_read_again() {
    let f = fixture();
    let first = f.capture("snap:1");
    let good = fs::read(cache_path(&f)).unwrap();
    assert_eq!(f.capture("snap:2").hashed, 0);

    let mut flipped = good.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x40;
    let mut newer = good.clone();
    newer[8] = 99; // the format version
    let damaged: Vec<(&str, Option<Vec<u8>>)> = vec![
        ("truncated", Some(good[..good.len() - 7].to_vec())),
        ("torn in half", Some(good[..good.len() / 2].to_vec())),
        ("empty", Some(Vec::new())),
        ("a flipped byte", Some(flipped)),
        ("a newer version", Some(newer)),
        ("garbage", Some(b"not a stat cache at all".to_vec())),
        ("missing", None),
    ];
    for (i, (what, bytes)) in damaged.into_iter().enumerate() {
        match bytes {
            Some(b) => fs::write(cache_path(&f), b).unwrap(),
            None => fs::remove_file(cache_path(&f)).unwrap(),
        }
        let r = f.capture(&format!("snap:{}", 10 + i));
        assert_eq!(
            (r.hashed, r.deduped, r.files, &r.snapshot),
            (N, true, N, &first.snapshot),
            "{what}"
        );
        // Written again, and trusted again.
        let again = f.capture(&format!("snap:{}", 20 + i));
        assert_eq!((again.hashed, again.deduped), (0, true), "{what}");
    }

    // A same-size same-tick rewrite hidden behind a damaged cache is found.
    fs::write(cache_path(&f), &good[..10]).unwrap();
    let p = f.root.join("d/f1.txt");
    let before = fs::metadata(&p).unwrap();
    fs::write(&p, "FILE 1").unwrap();
    filetime::set_file_mtime(&p, filetime::FileTime::from_last_modification_time(&before)).unwrap();
    let r = f.capture("snap:40");
    assert!(!r.deduped);
    assert_eq!(f.tree()["d/f1.txt"].0, "FILE 1");
    let m = f.ws.manifest(&r.snapshot).unwrap();
    assert_eq!(
        m.entries["d/f1.txt"].hash.to_hex(),
        hex(&Sha256::digest(b"FILE 1"))
    );
}

#[test]
fn a_stale_stat_cache_is_not_used() {
    // A crash after the cache was written and before the index: the cache
    // file on disk does not go with the index. Here, the reverse: an older
    // cache file put back under a newer index.
    let f = fixture();
    f.capture("snap:1");
    let old = fs::read(cache_path(&f)).unwrap();
    f.remove("d/f5.txt");
    f.write("d/new.txt", "new");
    let second = f.capture("snap:2");
    assert!(!second.deduped);
    fs::write(cache_path(&f), &old).unwrap();
    let third = f.capture("snap:3");
    assert_eq!(
        (third.hashed, third.deduped, third.files, &third.snapshot),
        (N, true, N, &second.snapshot)
    );
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// Rewrites the index in the v1 shape: version 1, `started_ns` and `files`
/// inside, no cache file.
fn downgrade_to_v1(f: &Fixture, started_ns: i64) {
    let mut v: serde_json::Value =
        serde_json::from_slice(&fs::read(index_path(f)).unwrap()).unwrap();
    let o = v.as_object_mut().unwrap();
    o.remove("statcache");
    o.insert("version".into(), 1.into());
    o.insert("started_ns".into(), started_ns.into());
    let mut files = serde_json::Map::new();
    for i in 0..N {
        let rel = format!("d/f{i}.txt");
        let p = f.root.join(&rel);
        let m = fs::metadata(&p).unwrap();
        files.insert(
            rel,
            serde_json::json!({
                "size": m.size(),
                "mtime_ns": m.mtime() * 1_000_000_000 + m.mtime_nsec(),
                "ctime_ns": m.ctime() * 1_000_000_000 + m.ctime_nsec(),
                "inode": m.ino(),
                "mode": m.mode(),
                "hash": hex(&Sha256::digest(fs::read(&p).unwrap())),
            }),
        );
    }
    o.insert("files".into(), files.into());
    fs::write(index_path(f), serde_json::to_vec(&v).unwrap()).unwrap();
    fs::remove_file(cache_path(f)).unwrap();
}

fn now_ns() -> i64 {
    let d = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap();
    i64::try_from(d.as_nanos()).unwrap()
}

#[test]
fn an_index_v1_with_the_stat_cache_inside_is_migrated() {
    for via_label in [false, true] {
        let f = fixture();
        let first = f.capture("pre:exec:1");
        downgrade_to_v1(&f, now_ns());
        assert_eq!(f.ws.head().unwrap(), Some(first.snapshot.clone()));
        if via_label {
            // A session that does not capture migrates it too.
            f.ws.label_head(&label("gate:1")).unwrap();
            assert!(cache_path(&f).exists());
        }
        // The v1 cache and its start are used: nothing is read.
        let r = f.capture("snap:1");
        assert_eq!(
            (r.hashed, r.deduped, &r.snapshot),
            (0, true, &first.snapshot),
            "via label: {via_label}"
        );
        let v: serde_json::Value =
            serde_json::from_slice(&fs::read(index_path(&f)).unwrap()).unwrap();
        assert_eq!(v["version"], 2);
        assert!(v.get("files").is_none() && v.get("started_ns").is_none());
        assert!(v["statcache"].is_string());
        assert!(cache_path(&f).exists());
        assert_eq!(
            f.ws.resolve(&label("pre:exec:1")).unwrap(),
            Some(first.snapshot.clone())
        );
        assert_eq!(f.ws.next_iteration(&node("exec")).unwrap(), 2);
        let again = f.capture("snap:2");
        assert_eq!((again.hashed, again.deduped), (0, true));
    }

    // A v1 cache with a start that makes its entries racy is not trusted.
    let f = fixture();
    f.capture("snap:1");
    downgrade_to_v1(&f, 0);
    let r = f.capture("snap:2");
    assert_eq!((r.hashed, r.deduped), (N, true));
}
