//! The fuzz properties of cairn's parsers of untrusted bytes (DESIGN §14):
//! one function per target, each feeding its bytes to the real decoder and
//! checking what must hold, by panicking when it does not.
//!
//! The logic lives here, on stable Rust, so that the corpora in
//! `fuzz/corpus/<target>/` (and the crashes kept in `fuzz/regressions/`) run
//! as an ordinary test (`tests/corpus.rs`); the cargo-fuzz project in `fuzz/`
//! only calls these functions.
//!
//! | target         | decoder                                                      |
//! |----------------|--------------------------------------------------------------|
//! | [`journal`]    | `Record::from_line`, the reader's walk, the ends readers     |
//! | [`sse`]        | `SseParser`                                                  |
//! | [`openai_stream`] | OpenAI chat-completion streams (SSE + `ChatDecoder`)      |
//! | [`anthropic_stream`] | Anthropic message streams (SSE + `MessagesDecoder`)    |
//! | [`gateway_stream`] | the gateway's reading of a response body (`StreamWatch`, the form conversions) |
//! | [`responses_stream`] | OpenAI Responses streams (SSE + `ResponsesDecoder`)    |
//! | [`ignore`]     | `IgnoreRules::parse` and its decisions                       |
//! | [`manifest`]   | snapshot manifests (`Manifest::read`, prune's reader)        |
//! | [`statcache`]  | the stat cache file                                          |
//! | [`chunks`]     | object files, chunk lists among them (`ObjectPool`)          |
//! | [`checkpoint`] | checkpoint manifests (`show`, `list_all`, prune's reader)    |
//! | [`markdown`]   | the viewer's Markdown renderer (`cairn_server::markdown`)     |
//! | [`response_log`] | the response store's log segments (`cairn_calls`)          |
//! | [`sessions_index`] | `sessions.index` as a lister reads it (`cairn_sessions`)   |
//!
//! # Guarantees
//! Every function accepts any bytes. A panic means a property of the
//! decoder failed (or the decoder itself panicked); nothing else panics,
//! except a scratch directory that cannot be created.
//!
//! # Not guaranteed
//! The targets that read through the file system (journal ends, manifests,
//! objects, checkpoints) keep one scratch store per thread in the system's
//! temporary directory; a process that exits without unwinding (libFuzzer
//! does) leaves it behind.
//!
//! # Example
//! ```
//! cairn_fuzz::sse(b"event: ping\ndata: {}\n\n");
//! cairn_fuzz::statcache(b"not a stat cache");
//! ```
#![deny(missing_docs)]

mod checkpoint;
mod chunks;
mod gateway;
mod ignore;
mod journal;
mod manifest;
mod markdown;
mod response_log;
mod scratch;
mod sessions_index;
mod sse;
mod statcache;
mod stream;

pub use checkpoint::{checkpoint, CHECKPOINT_ID};
pub use chunks::{chunked_content, chunks, SMALL_BLOBS};
pub use gateway::gateway_stream;
pub use ignore::ignore;
pub use journal::{journal, RUN};
pub use manifest::{manifest, SNAPSHOT_ID};
pub use markdown::markdown;
pub use response_log::response_log;
pub use sessions_index::sessions_index;
pub use sse::sse;
pub use statcache::statcache;
pub use stream::{anthropic_stream, openai_stream, responses_stream};

/// A fuzz target: bytes in, a panic when a property does not hold.
pub type Target = fn(&[u8]);

/// Every target, by name, as the corpus directories and `fuzz/fuzz_targets/`
/// name them.
pub const TARGETS: [(&str, Target); 14] = [
    ("journal", journal),
    ("sse", sse),
    ("openai_stream", openai_stream),
    ("anthropic_stream", anthropic_stream),
    ("gateway_stream", gateway_stream),
    ("responses_stream", responses_stream),
    ("ignore", ignore),
    ("manifest", manifest),
    ("statcache", statcache),
    ("chunks", chunks),
    ("checkpoint", checkpoint),
    ("markdown", markdown),
    ("response_log", response_log),
    ("sessions_index", sessions_index),
];
