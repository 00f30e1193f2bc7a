//! cairn's model gateway (DESIGN §7): every completed model response is kept,
//! so a call interrupted after the provider answered is served from the
//! store instead of being bought twice.
#![deny(missing_docs)]

pub mod canonical;
mod forms;
mod key;

pub use forms::{
    parse_whole, stream_to_whole, whole_to_stream, Api, FormError, Parsed, StreamWatch,
};
pub use key::{
    client_session, idempotency_key, requested_model, retry_marker, strip_credentials,
    wants_stream, ClientSession, Key, KeyParseError, RequestFacts, SessionHeader,
};
