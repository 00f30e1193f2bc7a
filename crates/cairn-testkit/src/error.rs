//! The crate's one error type.
//!
//! Policy: the servers ([`crate::upstream::Upstream`], [`crate::relay::Relay`])
//! panic when they cannot start (a loopback port that cannot be bound is a
//! broken test machine, and a test has no one to return an error to); the
//! Python harness returns an [`Error`], since a missing `python3 -m venv` or an
//! unreachable package registry is an environment problem the message must
//! explain.

use std::path::PathBuf;
use std::time::Duration;

/// What went wrong in the test harness; each message says what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A file or directory of the harness could not be read or written.
    #[error("{}: {source}; check that the directory exists and is writable", path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// A program could not be started.
    #[error("cannot start {}: {source}; is it installed and on PATH?", program.display())]
    Spawn {
        /// The program.
        program: PathBuf,
        /// The underlying error.
        source: std::io::Error,
    },
    /// `python3 -m venv` or `pip install` failed.
    #[error(
        "setting up the SDK venv in {}: `{step}` failed ({status}):\n{output}\n\
         install python3-venv (apt-get install python3-venv), check that PyPI is \
         reachable, or set CAIRN_TEST_PYTHON to an interpreter that has the packages \
         of crates/cairn-testkit/python/requirements.txt",
        dir.display()
    )]
    Venv {
        /// The venv directory.
        dir: PathBuf,
        /// The command that failed.
        step: String,
        /// Its exit status.
        status: String,
        /// What it printed.
        output: String,
    },
    /// An interpreter (`CAIRN_TEST_PYTHON`'s, or the venv's) lacks the pinned
    /// SDKs.
    #[error(
        "the Python {}: {problem}; install crates/cairn-testkit/python/requirements.txt \
         into it, or leave CAIRN_TEST_PYTHON unset to let the tests make their own venv",
        interpreter.display()
    )]
    Interpreter {
        /// The interpreter.
        interpreter: PathBuf,
        /// What is wrong with it.
        problem: String,
    },
    /// A script ran longer than its time limit and was killed.
    #[error("{script} ran longer than {after:?} and was killed; stderr so far:\n{stderr}")]
    Timeout {
        /// The script's name.
        script: String,
        /// The limit.
        after: Duration,
        /// What it had printed to stderr.
        stderr: String,
    },
    /// A script's standard output was not the JSON document it promises.
    #[error("{script} printed no JSON ({source}); stdout:\n{stdout}\nstderr:\n{stderr}")]
    Json {
        /// The script's name.
        script: String,
        /// The parse error.
        source: serde_json::Error,
        /// What it printed.
        stdout: String,
        /// What it printed to stderr.
        stderr: String,
    },
}
