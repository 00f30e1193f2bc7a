//! Checkpoint manifests, read by `show`, the listing, and prune.
//!
//! Input: the bytes of `<store>/checkpoints/<id>.json`, for checkpoint
//! [`CHECKPOINT_ID`].
//!
//! Properties:
//! 1. a manifest that `show` reads names itself, has a version this build
//!    reads, names a valid run, gives each named file exactly one entry (with
//!    the empty path), and every path passes the one path rule (a named path
//!    is `/` and a `RelPath`, an entry below a directory a `RelPath`);
//! 2. it is what serde reads from the same bytes, and written again it reads
//!    back as itself;
//! 3. the listing and the question which checkpoints name its run both see
//!    it, with its fields;
//! 4. prune's reader succeeds and marks every object it names;
//! 5. `verify` of any manifest does not panic.

use std::cell::RefCell;
use std::collections::HashSet;

use cairn_checkpoint::{
    list_all, naming_run, show, verify, Checkpoint, CheckpointId, CheckpointManifests, NoProgress,
    PathKind, CHECKPOINT_VERSION,
};
use cairn_objects::{ManifestSource, ObjectHash};
use cairn_store::safe::RelPath;
use cairn_store::{RunId, Store};

use crate::scratch::Scratch;

/// The checkpoint id every fuzzed manifest is read as (the seeds name it).
pub const CHECKPOINT_ID: &str = "cp_01JFUZZCP000000000000000000";

thread_local! {
    static SCRATCH: RefCell<Option<Scratch>> = const { RefCell::new(None) };
}

/// Checks the checkpoint-manifest properties (see the module doc) on `data`.
pub fn checkpoint(data: &[u8]) {
    SCRATCH.with(|cell| {
        let mut cell = cell.borrow_mut();
        let scratch = cell.get_or_insert_with(Scratch::new);
        check(&scratch.store, data);
    });
}

fn put(store: &Store, id: &CheckpointId, bytes: &[u8]) {
    let dir = store.checkpoints_dir();
    let path = dir.join(format!("{id}.json"));
    if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, bytes)) {
        panic!("writing {}: {e}", path.display());
    }
}

fn check(store: &Store, data: &[u8]) {
    let Ok(id) = CheckpointId::parse(CHECKPOINT_ID) else {
        panic!("the fixed id does not parse");
    };
    put(store, &id, data);
    let shown = show(store, &id);
    let _ = verify(store, &id, &NoProgress);
    let Ok(cp) = shown else {
        return;
    };
    // 1.
    assert_eq!(cp.id, id, "a manifest naming another checkpoint was shown");
    assert!(
        cp.version <= CHECKPOINT_VERSION,
        "a newer manifest was shown"
    );
    let run = match RunId::parse(&cp.run) {
        Ok(run) => run,
        Err(e) => panic!("a manifest naming no valid run was shown: {e}"),
    };
    for p in &cp.paths {
        let rest = p.path.strip_prefix('/');
        assert!(
            rest.is_some_and(|r| RelPath::parse(r).is_ok()),
            "an unsafe named path was shown: {:?}",
            p.path
        );
        match p.kind {
            PathKind::File => assert!(
                p.entries.len() == 1 && p.entries[0].path.is_empty(),
                "the file {:?} has {} entries",
                p.path,
                p.entries.len()
            ),
            PathKind::Dir => {
                for e in &p.entries {
                    assert!(
                        RelPath::parse(&e.path).is_ok(),
                        "an unsafe entry: {:?}",
                        e.path
                    );
                }
            }
        }
    }
    // 2.
    match serde_json::from_slice::<Checkpoint>(data) {
        Ok(by_serde) => assert_eq!(by_serde, cp, "serde reads another manifest"),
        Err(e) => panic!("shown, yet serde does not parse it: {e}"),
    }
    // 3.
    match list_all(store) {
        Ok(rows) => {
            assert_eq!(rows.len(), 1, "the listing");
            let r = &rows[0];
            assert_eq!(
                (&r.id, &r.created, r.seq, r.logical_bytes, &r.run, r.kind),
                (
                    &cp.id,
                    &cp.created,
                    cp.journal.seq,
                    cp.logical_bytes,
                    &cp.run,
                    cp.kind
                ),
                "the listing's row"
            );
        }
        Err(e) => panic!("shown, yet the listing fails: {e}"),
    }
    match naming_run(store, &run) {
        Ok(ids) => assert_eq!(
            ids,
            std::slice::from_ref(&id),
            "the checkpoints naming its run"
        ),
        Err(e) => panic!("shown, yet naming_run fails: {e}"),
    }
    // 4.
    let mut marked: HashSet<ObjectHash> = HashSet::new();
    if let Err(e) = CheckpointManifests::new(store).referenced(&mut |h| {
        marked.insert(h);
    }) {
        panic!("shown, yet prune's reader fails: {e}");
    }
    for p in &cp.paths {
        for e in &p.entries {
            assert!(
                marked.contains(&e.hash),
                "prune does not keep {}/{}",
                p.path,
                e.path
            );
        }
    }
    // 2, written again.
    let again = match serde_json::to_vec(&cp) {
        Ok(b) => b,
        Err(e) => panic!("a manifest shown does not serialise: {e}"),
    };
    put(store, &id, &again);
    match show(store, &id) {
        Ok(back) => assert_eq!(back, cp, "written again, the manifest reads differently"),
        Err(e) => panic!("written again, the manifest does not read: {e}"),
    }
}
