//! A snapshot as a reader sees it (`tree`, `file_at`): its files, text as
//! text, binary and oversized files said rather than shown, and a damaged
//! object refused rather than shown.

mod common;

use std::fs;

use cairn_workspace::*;
use common::*;

#[test]
fn a_snapshot_shows_its_tree_and_each_file_as_it_was() {
    let f = Fixture::new();
    f.write("src/lib.rs", "pub fn one() {}\n");
    fs::write(f.root.join("blob.bin"), b"\0\x01\x02").unwrap();
    let first = f.capture("snap:1").snapshot;
    f.write("src/lib.rs", "pub fn two() {}\n");
    let big = "x".repeat(MAX_COUNTED_BYTES as usize + 1);
    f.write("big.txt", &big);
    let second = f.capture("snap:2").snapshot;

    let paths = |id| -> Vec<(String, u64)> {
        f.ws.snapshots()
            .tree(id)
            .unwrap()
            .into_iter()
            .map(|e| (e.path, e.size))
            .collect()
    };
    assert_eq!(
        paths(&first),
        [("blob.bin".into(), 3), ("src/lib.rs".into(), 16)]
    );
    assert_eq!(
        paths(&second),
        [
            ("big.txt".into(), MAX_COUNTED_BYTES + 1),
            ("blob.bin".into(), 3),
            ("src/lib.rs".into(), 16)
        ]
    );

    let at = |id, path| f.ws.snapshots().file_at(id, path).unwrap();
    assert_eq!(
        at(&first, "src/lib.rs").unwrap().text.as_deref(),
        Some("pub fn one() {}\n")
    );
    assert_eq!(
        at(&second, "src/lib.rs").unwrap().text.as_deref(),
        Some("pub fn two() {}\n")
    );
    let bin = at(&first, "blob.bin").unwrap();
    assert!(bin.binary && bin.text.is_none() && !bin.too_large);
    let large = at(&second, "big.txt").unwrap();
    assert!(large.too_large && large.text.is_none());
    assert!(at(&first, "big.txt").is_none(), "not in the first snapshot");
    assert!(at(&first, "../etc/passwd").is_none());
}

#[test]
fn a_damaged_object_is_refused_not_shown() {
    let f = Fixture::new();
    f.write("a.txt", "the original text\n");
    let id = f.capture("snap:1").snapshot;
    // Every object file of the pool, damaged in place.
    let mut damaged = 0;
    for entry in walk(&f.store.root().join("objects")) {
        let mut bytes = fs::read(&entry).unwrap();
        if bytes.is_empty() {
            continue;
        }
        let last = bytes.len() - 1;
        bytes[last] ^= 0x55;
        fs::write(&entry, bytes).unwrap();
        damaged += 1;
    }
    assert!(damaged > 0);
    assert!(Snapshots::of(&f.store, &f.run)
        .file_at(&id, "a.txt")
        .is_err());
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = fs::read_dir(dir) else {
        return out;
    };
    for e in rd {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else if p.file_name().is_some_and(|n| n != "lock") {
            out.push(p);
        }
    }
    out
}
