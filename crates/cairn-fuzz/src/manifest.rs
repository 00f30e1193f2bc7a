//! Snapshot manifests, read as a workspace and as prune read them.
//!
//! Input: the bytes of `<run>/workspace/snapshots/<id>.json`, for snapshot
//! [`SNAPSHOT_ID`] of run [`crate::RUN`].
//!
//! Properties:
//! 1. a manifest that reads names itself, has a version this build reads,
//!    and every entry path passes the one path rule (`RelPath::parse`);
//! 2. it is what serde reads from the same bytes, and written again it reads
//!    back as itself; its label prints and parses back as itself;
//! 3. prune's reader of the same store succeeds and marks every object the
//!    manifest names (a manifest that reads but whose objects prune does not
//!    keep would lose content);
//! 4. a manifest compared with itself has no changed path and the same tree.

use std::cell::RefCell;
use std::collections::HashSet;

use cairn_objects::ManifestSource;
use cairn_store::safe::RelPath;
use cairn_store::{RunId, Store};
use cairn_workspace::{Label, Manifest, SnapshotId, SnapshotManifests, MANIFEST_VERSION};

use crate::scratch::Scratch;
use crate::RUN;

/// The snapshot id every fuzzed manifest is read as (the seeds name it).
pub const SNAPSHOT_ID: &str = "01JFUZZSNAP000000000000000";

thread_local! {
    static SCRATCH: RefCell<Option<Scratch>> = const { RefCell::new(None) };
}

/// Checks the snapshot-manifest properties (see the module doc) on `data`.
pub fn manifest(data: &[u8]) {
    SCRATCH.with(|cell| {
        let mut cell = cell.borrow_mut();
        let scratch = cell.get_or_insert_with(Scratch::new);
        check(&scratch.store, data);
    });
}

fn ids() -> (RunId, SnapshotId) {
    match (RunId::parse(RUN), SnapshotId::parse(SNAPSHOT_ID)) {
        (Ok(run), Ok(id)) => (run, id),
        _ => panic!("the fixed ids do not parse"),
    }
}

fn put(store: &Store, run: &RunId, id: &SnapshotId, bytes: &[u8]) {
    let dir = store.snapshots_dir(run);
    let path = dir.join(format!("{id}.json"));
    if let Err(e) = std::fs::create_dir_all(&dir).and_then(|()| std::fs::write(&path, bytes)) {
        panic!("writing {}: {e}", path.display());
    }
}

fn check(store: &Store, data: &[u8]) {
    let (run, id) = ids();
    put(store, &run, &id, data);
    let read = Manifest::read(store, &run, &id);
    let marked = referenced(store);
    let Ok(m) = read else {
        return;
    };
    assert_eq!(m.id, id, "a manifest naming another snapshot was read");
    assert!(m.version <= MANIFEST_VERSION, "a newer manifest was read");
    for p in m.entries.keys() {
        assert!(RelPath::parse(p).is_ok(), "an unsafe path was read: {p:?}");
    }
    match serde_json::from_slice::<Manifest>(data) {
        Ok(by_serde) => assert_eq!(by_serde, m, "serde reads another manifest"),
        Err(e) => panic!("read, yet serde does not parse it: {e}"),
    }
    let label = m.label.to_string();
    match Label::parse(&label) {
        Ok(back) => assert_eq!(back, m.label, "the label {label:?} does not parse back"),
        Err(e) => panic!("the label {label:?} does not parse back: {e}"),
    }
    match marked {
        Ok(marked) => {
            for (p, e) in &m.entries {
                assert!(
                    marked.contains(e.hash.as_bytes()),
                    "prune does not keep {p:?}"
                );
            }
        }
        Err(e) => panic!("the manifest reads, prune's reader fails: {e}"),
    }
    assert!(m.changed_paths(&m).is_empty());
    assert!(m.same_tree(&m));

    let again = match serde_json::to_vec(&m) {
        Ok(b) => b,
        Err(e) => panic!("a manifest read does not serialise: {e}"),
    };
    put(store, &run, &id, &again);
    match Manifest::read(store, &run, &id) {
        Ok(back) => assert_eq!(back, m, "written again, the manifest reads differently"),
        Err(e) => panic!("written again, the manifest does not read: {e}"),
    }
}

/// What prune's reader of snapshot manifests marks in `store`.
fn referenced(store: &Store) -> Result<HashSet<[u8; 32]>, String> {
    let mut marked = HashSet::new();
    SnapshotManifests::new(store)
        .referenced(&mut |h| {
            marked.insert(*h.as_bytes());
        })
        .map_err(|e| e.to_string())?;
    Ok(marked)
}
