//! What cairn keeps of model calls (DESIGN §4.5, §7), below the sessions
//! crate and free of any HTTP stack: the response store that serves a call
//! again instead of buying it twice, the pool objects journaled
//! `model_call` records keep alive, the canonical JSON hashing that request
//! keys and resume fingerprints are computed over, and pricing.
//!
//! The proxy (`cairn-gateway`) and cairn's own agent loop write and read the
//! same store through this crate; `cairn-sessions` asks it what a
//! `model_call` names when it copies, prunes or verifies a session.
#![deny(missing_docs)]

pub mod canonical;
mod error;
mod journaled;
mod log;
mod pricing;
mod store;

/// When a group commit takes the file-system barrier ([`ResponseStore::put_group`]).
pub use cairn_objects::Barrier;
pub use error::CallsError;
pub use journaled::{check_model_call_objects, model_call_objects, JournaledCalls};
pub use pricing::{is_local, Price, PriceTable, Pricing};
pub use store::{Entry, GroupPut, ResponseStore, Stored};
