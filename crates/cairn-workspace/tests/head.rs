//! A capture, a `pre:` mark or a label never reports a snapshot whose
//! manifest cannot be read back from this run: a head whose manifest is
//! missing, or an index naming another run's snapshot, is captured afresh
//! (or, for a bare label, refused as an integrity error); a damaged head is
//! an integrity error.

mod common;

use std::fs;

use cairn_store::RunId;
use cairn_workspace::*;
use common::*;

fn manifest_path(f: &Fixture, id: &SnapshotId) -> std::path::PathBuf {
    f.store.snapshots_dir(&f.run).join(format!("{id}.json"))
}

/// The snapshot named is this run's, with the id it claims.
fn readable(f: &Fixture, id: &SnapshotId) -> Manifest {
    let m = Manifest::read(&f.store, &f.run, id)
        .unwrap_or_else(|e| panic!("{id} was reported but cannot be read back: {e}"));
    assert_eq!(&m.id, id);
    m
}

#[test]
fn a_head_whose_manifest_was_deleted_is_captured_afresh() {
    let f = Fixture::new();
    f.write("a.txt", "a");
    let first = f.capture("snap:1");
    f.write("b.txt", "b");
    let second = f.capture("snap:2");
    fs::remove_file(manifest_path(&f, &second.snapshot)).unwrap();

    // The tree is unchanged, and the stat cache still describes the lost
    // head: a dedupe would name a snapshot that does not exist.
    let r = f.capture("snap:3");
    assert!(!r.deduped);
    assert_ne!(r.snapshot, second.snapshot);
    let m = readable(&f, &r.snapshot);
    assert_eq!(m.parent, Some(first.snapshot.clone()));
    assert_eq!(m.entries.len(), 2);
    assert_eq!(r.hashed, 2, "nothing may be trusted for a fresh capture");
    assert!(
        r.warnings
            .iter()
            .any(|w| w.contains(second.snapshot.as_str())),
        "{:?}",
        r.warnings
    );
    assert_eq!(f.ws.head().unwrap(), Some(r.snapshot.clone()));
    // The next capture trusts its own cache again and dedupes onto it.
    let again = f.capture("snap:4");
    assert!(again.deduped && again.snapshot == r.snapshot);
    assert!(f.ws.intervals().is_ok(), "the chain is whole again");
}

#[test]
fn a_pre_mark_or_a_label_is_never_put_on_a_missing_head() {
    let f = Fixture::new();
    f.write("a.txt", "a");
    let first = f.capture("snap:1");
    fs::remove_file(manifest_path(&f, &first.snapshot)).unwrap();

    let e = f.ws.label_head(&label("gate:1")).unwrap_err();
    assert!(matches!(e, WorkspaceError::HeadMissing { .. }), "{e}");
    assert!(e.is_integrity(), "exit 3");
    assert!(f.ws.resolve(&label("gate:1")).unwrap().is_none());

    let at = NodeIter::new(node("turn"), 1);
    let entry = f.ws.mark_pre(&at, &NoProgress).unwrap();
    assert!(entry.first.is_some(), "captured, not labelled");
    readable(&f, &entry.pre);
    assert_eq!(f.ws.resolve(&label("pre:turn:1")).unwrap(), Some(entry.pre));
}

#[test]
fn an_index_naming_another_runs_snapshot_is_never_deduped_onto() {
    let f = Fixture::new();
    f.write("a.txt", "a");
    let own = f.capture("snap:1");
    // Another run of the same store, same tree.
    let other_run = RunId::new();
    let other = Workspace::open(&f.store, &other_run, &f.root, CaptureConfig::default()).unwrap();
    let foreign = other.capture(&label("snap:1"), &NoProgress).unwrap();
    // This run's index now names the other run's snapshot as its head.
    let index = f.store.workspace_index_path(&f.run);
    let text = fs::read_to_string(&index).unwrap();
    let swapped = text.replace(own.snapshot.as_str(), foreign.snapshot.as_str());
    assert_ne!(text, swapped);
    fs::write(&index, swapped).unwrap();

    for (n, with_cache) in [(2, true), (3, false)] {
        if !with_cache {
            // Also without a stat cache (it is only a cache).
            fs::remove_file(f.store.workspace_dir(&f.run).join("statcache.bin")).ok();
            let text = fs::read_to_string(&index).unwrap();
            let head = f.ws.head().unwrap().unwrap();
            fs::write(
                &index,
                text.replace(head.as_str(), foreign.snapshot.as_str()),
            )
            .unwrap();
        }
        let r = f.capture(&format!("snap:{n}"));
        assert!(!r.deduped, "round {n}");
        assert_ne!(r.snapshot, foreign.snapshot);
        let m = readable(&f, &r.snapshot);
        assert_ne!(m.parent.as_ref(), Some(&foreign.snapshot));
    }
    // The other run is untouched.
    assert_eq!(other.head().unwrap(), Some(foreign.snapshot));
}

#[test]
fn a_damaged_head_manifest_is_an_integrity_error_not_a_snapshot() {
    let f = Fixture::new();
    f.write("a.txt", "a");
    let first = f.capture("snap:1");
    fs::write(
        manifest_path(&f, &first.snapshot),
        b"{\"version\":1,\"id\":",
    )
    .unwrap();
    let e = f.ws.capture(&label("snap:2"), &NoProgress).unwrap_err();
    assert!(e.is_integrity(), "{e}");
    let e =
        f.ws.mark_pre(&NodeIter::new(node("turn"), 1), &NoProgress)
            .unwrap_err();
    assert!(e.is_integrity(), "{e}");
    assert!(f.ws.resolve(&label("snap:2")).unwrap().is_none());
    assert!(f.ws.resolve(&label("pre:turn:1")).unwrap().is_none());
}
