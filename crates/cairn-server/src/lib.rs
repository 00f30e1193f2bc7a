//! cairn's app server (DESIGN §8): the store over HTTP — a JSON API with
//! an OpenAPI document, a per-session live event stream whose reconnect
//! never loses or repeats a frame, and a web viewer, all in one process.
//!
//! - [`stream`]: one session's live stream, the cursor table (dense live
//!   seqs, the bounded ring, reconnect, slow clients, the watermark);
//! - `http`: the router, starting the server ([`bind`], [`router`]);
//! - `access`: who may call it (the one rule of `cairn_store::access`),
//!   a browser's login;
//! - [`markdown`]: model text as safe HTML (the one place it becomes
//!   markup);
//! - `api`, `approvals` (a waiting run's question, answered from the
//!   page), `files` (what snapshots hold), `points` (the rewind of the
//!   TUI), `live`, `openapi`, `viewer`, `runs`: the routes; a journal
//!   another process writes is followed by `cairn_journal::JournalFollower`,
//!   runs are started through `cairn_agent::Launcher`.
#![deny(missing_docs)]

mod access;
mod api;
mod approvals;
mod error;
mod files;
mod http;
mod live;
pub mod markdown;
mod openapi;
mod points;
mod runs;
pub mod stream;
mod viewer;

pub use error::{ApiError, Class};
pub use http::{bind, router, AppState, ServeConfig, ServeError, Shared};
pub use live::{Followed, LiveLimits, LiveState};
pub use runs::StartRequest;
