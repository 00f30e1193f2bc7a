//! cairn's model gateway (DESIGN §7): every completed model response is kept,
//! so a call interrupted after the provider answered is served from the
//! store instead of being bought twice.
//!
//! It also holds the one bounded connection loop cairn's other HTTP servers
//! (`cairn serve`, `cairn mcp --listen`) serve through: [`serve_router`].
#![deny(missing_docs)]

mod agents;
mod commit;
mod delivery;
mod error;
mod filing;
mod forms;
mod inflight;
mod key;
mod listen;
mod path;
mod purchase;
mod replay;
mod serve;
mod server;

pub use agents::{Agent, AgentLaunch, UnknownAgent};
pub use error::GatewayError;

/// True in builds with the `fault-injection` feature (the binary's tests):
/// only then does [`GatewayConfig::stall_before_final`] do anything.
pub const FAULT_INJECTION: bool = cfg!(feature = "fault-injection");
pub use filing::{Filing, SharedSession};
pub use forms::{
    parse_whole, stream_to_whole, whole_to_stream, Api, FormError, Parsed, StreamWatch,
};
pub use inflight::InFlightPurchase;
pub use key::{
    client_session, idempotency_key, requested_model, retry_marker, strip_credentials,
    wants_stream, ClientSession, Key, KeyParseError, RequestFacts, SessionHeader,
};
pub use listen::{serve_router, ListenBounds, DEFAULT_MAX_CONNECTIONS};
pub use replay::{decide, Decision, Match, ReplayMode, ReplayPolicy};
pub use serve::{Activity, Stopped};
pub use server::{
    Gateway, GatewayConfig, DEFAULT_MAX_BODY, DEFAULT_MAX_EVENT, DEFAULT_MAX_OPEN_SESSIONS,
    DEFAULT_MAX_RESPONSE,
};
