//! Capture: the stat cache and its racy guard, gaps, limits, dedupe.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::time::Duration;

use cairn_workspace::*;
use common::*;
use filetime::FileTime;

/// Rewrites a file in place (same inode, same size) and puts its mtime back,
/// as a file system with coarse timestamps would show a rewrite within the
/// same tick.
fn rewrite_same_tick(f: &Fixture, rel: &str, content: &str) {
    let p = f.root.join(rel);
    let before = fs::metadata(&p).unwrap();
    fs::write(&p, content).unwrap();
    filetime::set_file_mtime(&p, FileTime::from_last_modification_time(&before)).unwrap();
    let after = fs::metadata(&p).unwrap();
    use std::os::unix::fs::MetadataExt;
    assert_eq!(
        (before.ino(), before.len(), before.mtime_nsec()),
        (after.ino(), after.len(), after.mtime_nsec())
    );
}

#[test]
fn a_same_second_rewrite_of_equal_size_is_detected() {
    // ctime not trusted, so only the racy guard can catch it.
    let f = Fixture::with(CaptureConfig::default().trust_ctime(false));
    f.write("a.txt", "aaaa");
    let first = f.capture("snap:1");
    rewrite_same_tick(&f, "a.txt", "bbbb");
    let second = f.capture("snap:2");
    assert!(!second.deduped, "the rewrite was missed");
    assert_eq!(second.hashed, 1);
    let m = f.ws.manifest(&second.snapshot).unwrap();
    assert_ne!(
        m.entries["a.txt"].hash,
        f.ws.manifest(&first.snapshot).unwrap().entries["a.txt"].hash
    );

    // With the default configuration too.
    let f = Fixture::new();
    f.write("a.txt", "aaaa");
    f.capture("snap:1");
    rewrite_same_tick(&f, "a.txt", "cccc");
    assert!(!f.capture("snap:2").deduped);
}

#[test]
fn the_racy_guard_is_what_catches_it() {
    // Control: without a slack, the same rewrite of a file written just
    // before the capture looks unchanged. This is the failure the guard
    // exists for; if this ever detects the change, the test above proves
    // nothing about the guard.
    let f = Fixture::with(
        CaptureConfig::default()
            .trust_ctime(false)
            .racy_slack(Duration::ZERO),
    );
    f.write("a.txt", "aaaa");
    f.settle(Duration::ZERO);
    f.capture("snap:1");
    rewrite_same_tick(&f, "a.txt", "bbbb");
    assert!(f.capture("snap:2").deduped);
}

#[test]
fn unchanged_files_come_from_the_stat_cache_and_a_same_tree_dedupes() {
    let f = Fixture::with(CaptureConfig::default().racy_slack(Duration::from_millis(50)));
    for i in 0..20 {
        f.write(&format!("src/f{i}.rs"), &format!("fn f{i}() {{}}"));
    }
    // Older than the first capture's start minus the slack: trustworthy.
    f.settle(Duration::from_millis(50));
    let first = f.capture("pre:exec:1");
    assert_eq!((first.files, first.hashed, first.deduped), (20, 20, false));
    let again = f.capture("post:exec:1");
    assert_eq!((again.hashed, again.deduped), (0, true));
    assert_eq!(again.snapshot, first.snapshot);
    assert_eq!(f.manifests().len(), 1);
    let rows = f.ws.list_snapshots().unwrap();
    assert_eq!(rows.len(), 1);
    assert_eq!(
        rows[0].labels,
        vec![label("pre:exec:1"), label("post:exec:1")]
    );

    // One change: one file read, a new snapshot whose parent is the head.
    f.write("src/f3.rs", "changed");
    let third = f.capture("snap:1");
    assert_eq!((third.hashed, third.deduped, third.files), (1, false, 20));
    let m = f.ws.manifest(&third.snapshot).unwrap();
    assert_eq!(m.parent, Some(first.snapshot.clone()));
    assert_eq!(m.label, label("snap:1"));

    // A mode change alone is a change.
    fs::set_permissions(f.root.join("src/f4.rs"), fs::Permissions::from_mode(0o755)).unwrap();
    let fourth = f.capture("snap:2");
    assert!(!fourth.deduped);
    assert_eq!(
        f.ws.manifest(&fourth.snapshot).unwrap().entries["src/f4.rs"].mode,
        0o755
    );

    // A deleted file is a change.
    f.remove("src/f5.rs");
    let fifth = f.capture("snap:3");
    assert_eq!(fifth.files, 19);
}

#[test]
fn symlinks_special_files_and_oversized_files_are_reported_not_captured() {
    let f = Fixture::with(CaptureConfig::default().max_file_bytes(100));
    let outside = f.dir.path().join("outside");
    fs::create_dir(&outside).unwrap();
    fs::write(outside.join("secret.txt"), "not yours").unwrap();
    f.write("ok.txt", &"x".repeat(100));
    f.write("big.bin", &"x".repeat(101));
    std::os::unix::fs::symlink(&outside, f.root.join("linkdir")).unwrap();
    std::os::unix::fs::symlink("ok.txt", f.root.join("link.txt")).unwrap();
    let fifo = f.root.join("pipe");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid path string.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);

    let r = f.capture("snap:1");
    assert_eq!(r.files, 1);
    let gaps: Vec<(&str, &SkipReason)> = r
        .skipped
        .iter()
        .map(|s| (s.path.as_str(), &s.reason))
        .collect();
    assert_eq!(
        gaps,
        vec![
            (
                "big.bin",
                &SkipReason::TooLarge {
                    size: 101,
                    limit: 100
                }
            ),
            ("link.txt", &SkipReason::Symlink),
            ("linkdir", &SkipReason::Symlink),
            ("pipe", &SkipReason::Special),
        ]
    );
    // The gaps are in the manifest too, and nothing behind the link was read.
    let m = f.ws.manifest(&r.snapshot).unwrap();
    assert_eq!(m.skipped, r.skipped);
    assert!(m.entries.keys().all(|p| !p.contains("secret")));
    assert!(r.skipped[0]
        .reason
        .to_string()
        .contains("CAIRN_WORKSPACE_MAX_FILE_MB"));
}

#[test]
fn names_that_are_not_utf8_are_gaps_and_nested_trees_are_walked_whole() {
    use std::os::unix::ffi::OsStrExt;
    let f = Fixture::new();
    for i in 0..30 {
        f.write(
            &format!("a/b{}/c{}/f{i}.txt", i % 3, i % 5),
            &format!("{i}"),
        );
    }
    let bad = std::ffi::OsStr::from_bytes(b"a/b0/caf\xe9.txt");
    fs::write(f.root.join(bad), "latin-1 name").unwrap();
    fs::create_dir_all(f.root.join("node_modules/x")).unwrap();
    fs::write(
        f.root
            .join(std::ffi::OsStr::from_bytes(b"node_modules/x/\xff")),
        "excluded",
    )
    .unwrap();
    let r = f.capture("snap:1");
    assert_eq!(r.files, 30);
    let gaps: Vec<(&str, &SkipReason)> = r
        .skipped
        .iter()
        .map(|s| (s.path.as_str(), &s.reason))
        .collect();
    // The excluded tree is not entered, so its odd name is no gap.
    assert_eq!(gaps, vec![("a/b0/caf\u{fffd}.txt", &SkipReason::NotUtf8)]);
    let m = f.ws.manifest(&r.snapshot).unwrap();
    assert!(m.entries.contains_key("a/b2/c4/f29.txt"));
}

#[test]
fn a_tree_over_the_file_limit_is_refused_before_anything_is_stored() {
    let f = Fixture::with(CaptureConfig::default().max_files(10));
    for i in 0..10 {
        f.write(&format!("f{i}"), "x");
    }
    assert_eq!(f.capture("snap:1").files, 10);
    f.write("f10", "x");
    let before = f.manifests();
    let e = f.ws.capture(&label("snap:2"), &NoProgress).unwrap_err();
    assert!(
        matches!(e, WorkspaceError::TooManyFiles { limit: 10, .. }),
        "{e}"
    );
    assert!(e.is_refusal());
    assert!(e.to_string().contains(".cairnignore"), "{e}");
    // The message says how to raise the limit, and the limit in force.
    assert!(e.to_string().contains("CAIRN_WORKSPACE_MAX_FILES"), "{e}");
    assert!(e.to_string().contains("10"), "{e}");
    assert_eq!(f.manifests(), before);
    assert!(f.ws.resolve(&label("snap:2")).unwrap().is_none());
    // Excluding some files brings it back under the limit.
    f.write(".cairnignore", "f1*\n");
    assert!(f.ws.capture(&label("snap:2"), &NoProgress).is_ok());
}

#[test]
fn bad_rule_lines_are_reported_with_the_capture() {
    let f = Fixture::new();
    f.write(".cairnignore", "[oops\n*.tmp\n");
    f.write("a.tmp", "x");
    let r = f.capture("snap:1");
    assert_eq!(r.files, 1, "only .cairnignore is captured");
    assert_eq!(r.warnings.len(), 1);
    assert!(r.warnings[0].contains(":1:"), "{}", r.warnings[0]);
}

#[test]
fn a_missing_index_is_rebuilt_from_the_manifests() {
    let f = Fixture::new();
    f.write("a.txt", "a");
    let first = f.capture("snap:1");
    fs::remove_file(f.store.workspace_index_path(&f.run)).unwrap();
    assert_eq!(f.ws.head().unwrap(), Some(first.snapshot.clone()));
    let again = f.capture("snap:2");
    assert!(again.deduped, "the rebuilt index lost the head's entries");
    assert_eq!(again.hashed, 1, "nothing may be trusted after a rebuild");

    fs::write(f.store.workspace_index_path(&f.run), b"{ not json").unwrap();
    let e = f.ws.capture(&label("snap:3"), &NoProgress).unwrap_err();
    assert!(
        matches!(e, WorkspaceError::IndexDamaged { .. }) && e.is_integrity(),
        "{e}"
    );
}

#[test]
fn a_file_dated_after_2262_is_captured_without_overflow() {
    // ctime cannot be set back, so only mtimes decide trust here.
    let f = Fixture::with(CaptureConfig::default().trust_ctime(false));
    f.write("future.txt", "from the future");
    f.write("old.txt", "old");
    // 2300-01-01: past the last nanosecond an i64 can count from 1970.
    let year_2300 = FileTime::from_unix_time(10_413_792_000, 0);
    filetime::set_file_times(f.root.join("future.txt"), year_2300, year_2300).unwrap();
    let year_2020 = FileTime::from_unix_time(1_600_000_000, 0);
    filetime::set_file_times(f.root.join("old.txt"), year_2020, year_2020).unwrap();
    let first = f.capture("snap:1");
    assert_eq!(first.files, 2);
    assert!(first.skipped.is_empty(), "{:?}", first.skipped);
    // A saturated time is never trusted (it is not before the capture's
    // start), so the file is read again, and the tree still dedupes.
    let second = f.capture("snap:2");
    assert!(second.deduped);
    assert_eq!(second.hashed, 1);
    let m = f.ws.manifest(&second.snapshot).unwrap();
    assert_eq!(m.entries["future.txt"].size, 15);
}

#[test]
fn changed_paths_name_every_added_changed_and_removed_file_or_fail() {
    let f = Fixture::new();
    f.write("same.txt", "same");
    f.write("edited.txt", "one");
    f.write("removed.txt", "gone soon");
    f.write("mode.sh", "echo");
    let a = f.capture("snap:1").snapshot;
    f.write("edited.txt", "two");
    f.remove("removed.txt");
    f.write("dir/added.txt", "new");
    fs::set_permissions(f.root.join("mode.sh"), fs::Permissions::from_mode(0o755)).unwrap();
    let b = f.capture("snap:2").snapshot;
    let want = vec!["dir/added.txt", "edited.txt", "mode.sh", "removed.txt"];
    assert_eq!(f.ws.changed_paths(&a, &b).unwrap(), want);
    assert_eq!(f.ws.changed_paths(&b, &a).unwrap(), want, "symmetric");
    assert!(f.ws.changed_paths(&a, &a).unwrap().is_empty());
    let (ma, mb) = (f.ws.manifest(&a).unwrap(), f.ws.manifest(&b).unwrap());
    assert_eq!(ma.changed_paths(&mb), want);

    // A snapshot that cannot be read is an error, never "nothing changed".
    let missing = SnapshotId::parse("NOSUCHSNAPSHOT").unwrap();
    let e = f.ws.changed_paths(&a, &missing).unwrap_err();
    assert!(matches!(e, WorkspaceError::NoSuchSnapshot { .. }), "{e}");
    fs::write(
        f.store.snapshots_dir(&f.run).join(format!("{b}.json")),
        b"{ torn",
    )
    .unwrap();
    let e = f.ws.changed_paths(&a, &b).unwrap_err();
    assert!(e.is_integrity(), "{e}");
}
