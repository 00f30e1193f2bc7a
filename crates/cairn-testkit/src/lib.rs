//! Test support shared by cairn's crates (a dev-dependency only).
//!
//! - [`kill_child_after`]: the crash harness. Crash tests re-run their own
//!   test binary as a child that writes in a loop and prints a line for each
//!   thing it has made durable, kill it with SIGKILL at a random moment, and
//!   check what survived against what was acknowledged.
//! - [`crash_model`]: the power-cut model. A scenario runs for real with
//!   every storage operation recorded; each state a power cut may leave at
//!   each point is then built and checked against what was acknowledged.
//! - [`upstream`]: a mock model API (OpenAI Chat Completions and Responses,
//!   Anthropic Messages) that speaks the real wire formats, streamed and not,
//!   and can be told to fail, sleep, or cut the connection after k events.
//! - [`relay`]: a TCP relay that cuts a client's connection after the k-th SSE
//!   event of a response, to cut an SDK off from the gateway for real.
//! - [`nats`]: real `nats-server`s with JetStream (one, or a cluster of
//!   three) on loopback ports, and a relay that loses an acknowledgement.
//! - [`s3`]: a real S3 API (moto in server mode) on a loopback port.
//! - [`pty`]: a program on a pseudo-terminal, its screen kept by a terminal
//!   emulator, for end-to-end tests and benchmarks of a full-screen TUI.
//! - [`python`]: the official `openai` and `anthropic` Python SDKs, pinned,
//!   in a venv made once, and the scripts that use them as real clients.
//!
//! ```no_run
//! use cairn_testkit::upstream::{Reply, Script, Upstream};
//!
//! let upstream = Upstream::start(Script::always(Reply::text("Hi")));
//! let python = cairn_testkit::python::interpreter()?;
//! let out = python
//!     .script("sdk_call.py")
//!     .args(["--api", "openai-chat", "--stream", "--base-url"])
//!     .arg(upstream.openai_base_url())
//!     .run()?;
//! assert_eq!(out.json()?["text"], "Hi");
//! assert_eq!(upstream.count(), 1);
//! # Ok::<(), cairn_testkit::Error>(())
//! ```
//!
//! The servers run on threads of their own, so blocking tests and
//! `#[tokio::test]`s use them alike; the Python runner blocks (call it from
//! `spawn_blocking` in an async test).
#![deny(missing_docs)]

mod crash;
pub mod crash_model;
mod error;
pub mod nats;
pub mod pty;
pub mod python;
pub mod relay;
pub mod s3;
mod serve;
pub mod upstream;

pub use crash::{bench_dir, kill_child_after, quiet_disk};
pub use error::Error;
