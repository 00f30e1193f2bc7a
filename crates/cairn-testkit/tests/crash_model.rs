//! The crash model on `write_atomic`, the durable-write helper every
//! manifest, projection and checkpoint goes through: after any power cut the
//! file holds one whole version no older than the last acknowledged one. And
//! the model itself: with one of the helper's syncs removed, it must find
//! the loss.

use std::path::Path;

use cairn_store::durable;
use cairn_testkit::crash_model::{CrashModel, Report};

const VERSIONS: usize = 5;

fn version(i: usize) -> Vec<u8> {
    // Over 512 bytes, so a torn write can cut one inside.
    format!("version {i}\n").repeat(100 + i).into_bytes()
}

/// Replaces `dir/state.json` with each version in turn, acknowledging each.
fn scenario(model: &CrashModel) {
    let dir = model.root().join("store");
    durable::create_dir_private(&dir).unwrap();
    model.ack("dir");
    for i in 1..=VERSIONS {
        durable::write_atomic(&dir.join("state.json"), &version(i)).unwrap();
        model.ack(format!("{i}"));
    }
}

fn check(root: &Path, acked: &[String]) -> Result<(), String> {
    let newest = acked.iter().filter_map(|a| a.parse::<usize>().ok()).max();
    let path = root.join("store/state.json");
    let Ok(bytes) = std::fs::read(&path) else {
        return match newest {
            None => Ok(()),
            Some(n) => Err(format!(
                "version {n} was acknowledged, and the file is gone"
            )),
        };
    };
    match (1..=VERSIONS).find(|i| version(*i) == bytes) {
        None => Err(format!(
            "the file holds no whole version ({} bytes)",
            bytes.len()
        )),
        Some(v) if newest.is_some_and(|n| v < n) => Err(format!(
            "version {} was acknowledged, and the file holds version {v}",
            newest.unwrap_or(0)
        )),
        Some(_) => Ok(()),
    }
}

fn run(without: Option<&'static str>) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let model = CrashModel::record(dir.path());
    scenario(&model);
    model.without_recorded(without).check(check)
}

#[test]
fn write_atomic_leaves_one_whole_version_no_older_than_acknowledged() {
    let r = run(None);
    eprintln!(
        "write_atomic: {} ops, {} crash points, {} states",
        r.ops, r.points, r.states
    );
    assert!(r.failures.is_empty(), "{:#?}", r.failures);
    assert!(r.points > 5 * VERSIONS, "{r:?}");
    assert!(r.states > r.points, "{r:?}");
}

#[test]
fn without_the_file_sync_a_torn_or_empty_version_is_found() {
    let r = run(Some("atomic.file"));
    assert!(r.failed > 0, "the model missed the lost file sync: {r:?}");
    assert!(
        r.failures.iter().any(|f| f.contains("no whole version")),
        "{:#?}",
        r.failures
    );
}

#[test]
fn without_the_directory_fsync_an_older_version_is_found() {
    let r = run(Some("atomic.dir"));
    assert!(
        r.failed > 0,
        "the model missed the lost directory fsync: {r:?}"
    );
    assert!(
        r.failures.iter().any(|f| f.contains("was acknowledged")),
        "{:#?}",
        r.failures
    );
}
