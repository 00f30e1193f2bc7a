//! The crash harness and the benchmarks' directory.
//!
//! The crash tests re-run their own test binary as a child that writes in a
//! loop and prints a line for each thing it has made durable, kill it with
//! SIGKILL at a random moment, and check what survived against what was
//! acknowledged. [`kill_child_after`] is that harness.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Runs the test named `child_test` of the current test binary as a child
/// process with `env` added, sends it SIGKILL after `after`, and returns the
/// lines it printed to standard output before it died (its acknowledgements;
/// a line cut by the kill is returned as far as it got).
///
/// The child test should do nothing unless its environment variables are
/// set, so that the ordinary test run passes over it.
///
/// # Panics
/// The child cannot be started or waited for (a broken test environment).
pub fn kill_child_after<K, V>(child_test: &str, env: &[(K, V)], after: Duration) -> Vec<String>
where
    K: AsRef<OsStr>,
    V: AsRef<OsStr>,
{
    let exe = std::env::current_exe().expect("the test binary's path");
    let mut cmd = Command::new(exe);
    cmd.args(["--exact", child_test, "--nocapture", "--test-threads=1"])
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("starting the child test");
    std::thread::sleep(after);
    // SIGKILL; an error means it already exited, which the caller sees in
    // what it printed.
    let _ = child.kill();
    child.wait().expect("waiting for the child test");
    let out = child.stdout.take().expect("the child's piped stdout");
    BufReader::new(out).lines().map_while(Result::ok).collect()
}

/// Writes out every pending write of the machine (`sync(2)`), so that what
/// a benchmark measures next starts from a disk at rest, as its peer's run
/// does: not from the gigabytes the benchmark's own build left dirty, which
/// a file-system barrier would have to write and which make cairn's group
/// commits fall back to an fsync per file.
pub fn quiet_disk() {
    rustix::fs::sync();
}

/// The directory benchmarks write in: `CAIRN_BENCH_DIR`, else the system
/// temp dir. A relative `CAIRN_BENCH_DIR` is taken from the workspace root —
/// cargo runs a benchmark in its crate's directory, so the directory the
/// command was typed in is not known — and a missing directory is created.
///
/// # Panics
/// The directory cannot be created (a benchmark has no one to return an
/// error to); the message names the path and says what to do.
pub fn bench_dir() -> std::path::PathBuf {
    let Some(given) = std::env::var_os("CAIRN_BENCH_DIR").filter(|v| !v.is_empty()) else {
        return std::env::temp_dir();
    };
    let given = std::path::PathBuf::from(given);
    let dir = if given.is_absolute() {
        given
    } else {
        // crates/cairn-testkit → the workspace root.
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../..")
            .join(given)
    };
    if let Err(e) = std::fs::create_dir_all(&dir) {
        panic!(
            "CAIRN_BENCH_DIR: cannot create {}: {e}; give an existing, writable directory",
            dir.display()
        );
    }
    std::fs::canonicalize(&dir).unwrap_or(dir)
}
