//! Object batches under the crash model (`cairn_testkit::crash_model`):
//! after any power cut, every object a committed batch acknowledged reads
//! back whole, and every object visible under its name is complete (its
//! bytes hash to its name) — by per-file fsyncs, and by the `syncfs`
//! barrier of large batches. With either sync removed from the model, a
//! visible damaged object must be found.

use std::path::Path;

use cairn_objects::*;
use cairn_store::Store;
use cairn_testkit::crash_model::{CrashModel, Report};

/// Deterministic bytes that compress somewhat, like source text.
fn text(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            b"abcdefgh ijklm\n"[(x >> 60) as usize % 15]
        })
        .collect()
}

/// Small ones, and one large enough to be chunked (a chunk list and its
/// chunks).
fn contents() -> &'static [Vec<u8>] {
    static ALL: std::sync::OnceLock<Vec<Vec<u8>>> = std::sync::OnceLock::new();
    ALL.get_or_init(|| vec![text(700, 1), text(3000, 2), text(40, 3), text(300_000, 4)])
}

fn pool_of(store: &Store) -> ObjectPool {
    ObjectPool::at(store).with_chunking(ChunkConfig::default().threshold(0))
}

/// Two batches, each acknowledged once it committed.
fn scenario(model: &CrashModel, barrier_from: usize) {
    let store = Store::open(model.root().join("store")).unwrap();
    ObjectPool::open(&store).unwrap();
    let pool = pool_of(&store);
    let lock = StoreLock::shared(&store).unwrap();
    // Sources outside the recorded directory: only the pool is modelled.
    let sources = tempfile::tempdir().unwrap();
    for (i, part) in contents().chunks(2).enumerate() {
        let batch = pool.batch(&lock).barrier(Barrier::From(barrier_from));
        let hashes: Vec<ObjectHash> = part
            .iter()
            .enumerate()
            .map(|(j, b)| {
                let src = sources.path().join(format!("{i}-{j}"));
                std::fs::write(&src, b).unwrap();
                let f = std::fs::File::open(&src).unwrap();
                batch.put_open_file(&f, &src).unwrap().hash
            })
            .collect();
        batch.commit(&NoProgress).unwrap();
        for h in hashes {
            model.ack(h.to_hex());
        }
    }
}

fn check(root: &Path, acked: &[String]) -> Result<(), String> {
    let store_dir = root.join("store");
    if !store_dir.exists() {
        return if acked.is_empty() {
            Ok(())
        } else {
            Err("objects were acknowledged, and the store is gone".into())
        };
    }
    let store = Store::open(&store_dir).map_err(|e| e.to_string())?;
    let pool = pool_of(&store);
    let by_hash: Vec<(ObjectHash, &Vec<u8>)> =
        contents().iter().map(|b| (ObjectHash::of(b), b)).collect();
    for a in acked {
        let h = ObjectHash::parse(a).map_err(|e| e.to_string())?;
        let want = by_hash.iter().find(|(x, _)| *x == h).map(|(_, b)| *b);
        match pool.get(&h) {
            Ok(got) if Some(&got) == want => {}
            Ok(_) => return Err(format!("acknowledged object {a} reads other bytes")),
            Err(e) => return Err(format!("acknowledged object {a} is lost: {e}")),
        }
    }
    // Whatever is visible under a name is whole, acknowledged or not.
    let Ok(fans) = std::fs::read_dir(pool.dir()) else {
        return Ok(());
    };
    for fan in fans.flatten() {
        let Ok(files) = std::fs::read_dir(fan.path()) else {
            continue;
        };
        for f in files.flatten() {
            let name = f.file_name().to_string_lossy().into_owned();
            if name.starts_with('.') {
                continue; // a temporary file: invisible
            }
            let hex = format!("{}{name}", fan.file_name().to_string_lossy());
            let Ok(h) = ObjectHash::parse(&hex) else {
                continue;
            };
            if let Err(e) = pool.verify(&h) {
                return Err(format!("a visible object is damaged: {hex}: {e}"));
            }
        }
    }
    Ok(())
}

fn run(barrier_from: usize, without: Option<&'static str>) -> Report {
    let dir = tempfile::tempdir().unwrap();
    let model = CrashModel::record(dir.path());
    scenario(&model, barrier_from);
    model.without_recorded(without).check(check)
}

#[test]
fn committed_objects_survive_and_visible_objects_are_whole_with_fsyncs() {
    let r = run(usize::MAX, None);
    eprintln!(
        "objects (fsyncs): {} ops, {} crash points, {} states",
        r.ops, r.points, r.states
    );
    assert!(r.failures.is_empty(), "{:#?}", r.failures);
}

#[test]
fn committed_objects_survive_and_visible_objects_are_whole_with_the_barrier() {
    let r = run(1, None);
    eprintln!(
        "objects (barrier): {} ops, {} crash points, {} states",
        r.ops, r.points, r.states
    );
    assert!(r.failures.is_empty(), "{:#?}", r.failures);
}

#[test]
fn without_the_object_fsync_a_damaged_visible_object_is_found() {
    let r = run(usize::MAX, Some("objects.file"));
    assert!(r.failed > 0, "the model missed the removed fsync: {r:?}");
}

#[test]
fn without_the_barrier_a_damaged_visible_object_is_found() {
    let r = run(1, Some("syncfs"));
    assert!(r.failed > 0, "the model missed the removed barrier: {r:?}");
}

#[test]
fn without_the_fan_out_directory_fsync_a_lost_object_is_found() {
    let r = run(usize::MAX, Some("objects.dir"));
    assert!(
        r.failed > 0,
        "the model missed the removed directory fsync: {r:?}"
    );
}
