//! FIFOs and other non-regular files: the file tools refuse them at once instead of
//! blocking on them, and search skips them.
//!
//! Each call runs under a deadline on a runtime that is shut down without waiting, so a
//! tool that blocks fails the test instead of hanging it.

use std::ffi::CString;
use std::fs;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::time::Duration;

use cairn_tools::{Outcome, ToolConfig, ToolOutput, Toolbox, Workspace};
use serde_json::{json, Value};

fn mkfifo(path: &Path) {
    let c = CString::new(path.as_os_str().as_bytes()).expect("no NUL");
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
}

/// Runs each call with a deadline of a few seconds; `None` when it did not return.
fn calls(ws: &Workspace, calls: &[(&str, Value)]) -> Vec<Option<ToolOutput>> {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .expect("runtime");
    let tools = Toolbox::builtin(ToolConfig::default());
    let out = calls
        .iter()
        .map(|(tool, args)| {
            rt.block_on(async {
                tokio::time::timeout(Duration::from_secs(3), tools.call(ws, tool, args))
                    .await
                    .ok()
            })
        })
        .collect();
    // A blocked tool thread must not hold the test up.
    rt.shutdown_background();
    out
}

#[test]
fn a_fifo_is_refused_at_once_and_search_skips_it() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::create_dir(dir.path().join("d")).expect("mkdir");
    mkfifo(&dir.path().join("d/pipe"));
    fs::write(dir.path().join("d/text.txt"), "needle\n").expect("write");
    let ws = Workspace::new(dir.path()).expect("workspace");

    let got = calls(
        &ws,
        &[
            ("read_file", json!({"path": "d/pipe"})),
            (
                "edit_file",
                json!({"path": "d/pipe", "old": "a", "new": "b"}),
            ),
            ("write_file", json!({"path": "d/pipe", "content": "x"})),
            ("search", json!({"pattern": "needle", "path": "d/pipe"})),
            ("search", json!({"pattern": "needle", "path": "d"})),
        ],
    );
    let [read, edit, write, search_file, search_dir] = got.as_slice() else {
        panic!("{got:?}");
    };
    for (name, out) in [
        ("read_file", read),
        ("edit_file", edit),
        ("write_file", write),
    ] {
        let out = out
            .as_ref()
            .unwrap_or_else(|| panic!("{name} on a FIFO hung"));
        assert_eq!(out.outcome, Outcome::Error, "{name}: {}", out.output);
        assert!(
            out.output
                .contains("`d/pipe` is a FIFO (named pipe), not a regular file"),
            "{name}: {}",
            out.output
        );
    }
    let out = search_file.as_ref().expect("search on a FIFO hung");
    assert_eq!(out.outcome, Outcome::Error, "{}", out.output);
    assert!(out.output.contains("not a regular file"), "{}", out.output);
    let out = search_dir
        .as_ref()
        .expect("search of a directory with a FIFO hung");
    assert_eq!(
        out.output,
        "d/text.txt:1: needle\n(1 file that is not a regular file was skipped)"
    );
    // The FIFO is still a FIFO: write_file did not replace it.
    use std::os::unix::fs::FileTypeExt;
    let kind = fs::symlink_metadata(dir.path().join("d/pipe")).expect("lstat");
    assert!(kind.file_type().is_fifo());
}

#[test]
fn a_socket_is_refused_by_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let _listener = std::os::unix::net::UnixListener::bind(dir.path().join("sock")).expect("bind");
    let ws = Workspace::new(dir.path()).expect("workspace");
    let got = calls(&ws, &[("read_file", json!({"path": "sock"}))]);
    let out = got[0].as_ref().expect("read_file on a socket hung");
    assert_eq!(out.outcome, Outcome::Error);
    assert!(
        out.output
            .contains("`sock` is a socket, not a regular file"),
        "{}",
        out.output
    );
}
