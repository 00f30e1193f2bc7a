//! cairn's app server (DESIGN §8): the store over HTTP — a JSON API with
//! an OpenAPI document, a per-session live event stream whose reconnect
//! never loses or repeats a frame, and a web viewer, all in one process.
//!
//! - [`stream`]: one session's live stream, the cursor table (dense live
//!   seqs, the bounded ring, reconnect, slow clients, the watermark);
//! - [`follow`]: reading a journal as another process writes it;
//! - [`http`]: the router, starting the server;
//! - [`access`]: who may call it (the one rule of `cairn_store::access`),
//!   a browser's login;
//! - [`api`], [`live`], [`openapi`], [`viewer`]: the routes.

pub mod access;
pub mod api;
pub mod error;
pub mod follow;
pub mod http;
pub mod live;
pub mod openapi;
pub mod runs;
pub mod stream;
pub mod viewer;

pub use error::{ApiError, Class};
pub use http::{bind, router, AppState, ServeConfig, ServeError, Shared};
pub use runs::StartRequest;
