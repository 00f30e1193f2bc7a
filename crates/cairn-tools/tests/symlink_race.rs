//! A process that keeps swapping a workspace directory with a symlink to a directory
//! outside (renameat2 RENAME_EXCHANGE) while the model calls the file tools on paths under
//! it: nothing outside is created, changed or read.
#![cfg(target_os = "linux")]

use std::collections::BTreeMap;
use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use cairn_tools::{Outcome, ToolConfig, Toolbox, Workspace};
use serde_json::json;

const SECRET: &str = "TOP-SECRET-OUTSIDE";
const CALLS: usize = 3000;

/// Everything about a tree that a write, a rename or a mkdir would change.
fn snapshot(root: &Path) -> BTreeMap<String, (u64, u64, i64, Vec<u8>)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).expect("read outside") {
            let path = entry.expect("entry").path();
            let meta = fs::symlink_metadata(&path).expect("lstat outside");
            let bytes = if meta.is_file() {
                fs::read(&path).expect("read outside file")
            } else {
                Vec::new()
            };
            if meta.is_dir() {
                stack.push(path.clone());
            }
            let rel = path
                .strip_prefix(root)
                .expect("below")
                .display()
                .to_string();
            out.insert(rel, (meta.ino(), meta.size(), meta.mtime_nsec(), bytes));
        }
    }
    out
}

fn cstring(path: &Path) -> CString {
    CString::new(path.as_os_str().as_bytes()).expect("no NUL")
}

/// Swaps `a` and `b` atomically until `stop`; counts the swaps.
fn swapper(a: &Path, b: &Path, stop: &AtomicBool, swaps: &AtomicU64) {
    let (a, b) = (cstring(a), cstring(b));
    while !stop.load(Ordering::Relaxed) {
        // SAFETY: two valid NUL-terminated paths; renameat2 touches no memory of ours.
        let rc = unsafe {
            libc::syscall(
                libc::SYS_renameat2,
                libc::AT_FDCWD,
                a.as_ptr(),
                libc::AT_FDCWD,
                b.as_ptr(),
                libc::RENAME_EXCHANGE,
            )
        };
        assert_eq!(rc, 0, "renameat2: {}", std::io::Error::last_os_error());
        swaps.fetch_add(1, Ordering::Relaxed);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_directory_swapped_for_a_symlink_never_lets_a_tool_outside() {
    let top = tempfile::tempdir().expect("tempdir");
    let ws_dir = top.path().join("ws");
    let outside = top.path().join("outside");
    for dir in [ws_dir.join("sub"), outside.clone()] {
        fs::create_dir_all(&dir).expect("mkdir");
    }
    // The same names on both sides, so any escape would find its target.
    for (dir, secret) in [(&ws_dir.join("sub"), "inside"), (&outside, SECRET)] {
        fs::write(dir.join("secret.txt"), secret).expect("write");
        fs::write(dir.join("edit.txt"), "before MARK after\n").expect("write");
        fs::write(dir.join("w0.txt"), "original").expect("write");
    }
    fs::write(outside.join("outside-marker.txt"), SECRET).expect("write");
    std::os::unix::fs::symlink(&outside, ws_dir.join("sub_link")).expect("symlink");
    let before = snapshot(&outside);

    // Half the calls without a protected directory (on Linux one openat2 resolves each
    // path), half with one (every directory is then opened and checked in turn).
    let elsewhere = top.path().join("elsewhere");
    fs::create_dir(&elsewhere).expect("mkdir");
    let plain = Workspace::new(&ws_dir).expect("workspace");
    let guarded = plain.clone().protect(&elsewhere).expect("protect");
    let tools = Toolbox::builtin(ToolConfig::default());
    let stop = Arc::new(AtomicBool::new(false));
    let swaps = Arc::new(AtomicU64::new(0));
    let swapping = {
        let (a, b) = (ws_dir.join("sub"), ws_dir.join("sub_link"));
        let (stop, swaps) = (Arc::clone(&stop), Arc::clone(&swaps));
        std::thread::spawn(move || swapper(&a, &b, &stop, &swaps))
    };

    let mut ok = [0usize; 7];
    let mut leaks = Vec::new();
    for i in 0..CALLS {
        let kind = i % 7;
        let (tool, args) = match kind {
            0 => (
                "write_file",
                json!({"path": format!("sub/w{}.txt", i % 3), "content": "written"}),
            ),
            1 => (
                "write_file",
                json!({"path": format!("sub/new{}/deep/x.txt", i % 4), "content": "x"}),
            ),
            2 => (
                "edit_file",
                json!({"path": "sub/edit.txt", "old": "MARK", "new": "MARK"}),
            ),
            3 => ("read_file", json!({"path": "sub/secret.txt"})),
            4 => ("list_dir", json!({"path": "sub"})),
            5 => ("search", json!({"pattern": SECRET, "path": "sub"})),
            _ => ("search", json!({"pattern": SECRET, "path": ""})),
        };
        let ws = if i % 2 == 0 { &plain } else { &guarded };
        let out = tools.call(ws, tool, &args).await;
        if out.outcome == Outcome::Ok {
            ok[kind] += 1;
        }
        let leaked = match kind {
            3 => out.output.contains(SECRET),
            4 => out.output.contains("outside-marker.txt"),
            5 | 6 => out.output.contains(".txt:1:"),
            _ => false,
        };
        if leaked {
            leaks.push(format!("{tool} {args}: {}", out.output));
        }
    }
    stop.store(true, Ordering::Relaxed);
    swapping.join().expect("swapper");

    let after = snapshot(&outside);
    let changed: Vec<_> = after
        .iter()
        .filter(|(k, v)| before.get(*k) != Some(*v))
        .map(|(k, _)| k.clone())
        .chain(before.keys().filter(|k| !after.contains_key(*k)).cloned())
        .collect();
    assert!(
        changed.is_empty() && leaks.is_empty(),
        "after {} swaps, outside changed: {changed:?}; read outside ({} times): {:#?}",
        swaps.load(Ordering::Relaxed),
        leaks.len(),
        &leaks[..leaks.len().min(3)]
    );
    // The race was real: the swapper ran, and calls got through while `sub` was a
    // directory as well as refused while it was a link.
    assert!(
        swaps.load(Ordering::Relaxed) > 100,
        "the swapper barely ran"
    );
    assert!(
        ok.iter().all(|&n| n > 0),
        "some tool never got through: {ok:?}"
    );
    assert!(
        ok.iter().sum::<usize>() < CALLS,
        "no call was ever refused: {ok:?}"
    );
}
