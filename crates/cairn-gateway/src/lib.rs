//! cairn's model gateway (DESIGN §7): every completed model response is kept,
//! so a call interrupted after the provider answered is served from the
//! store instead of being bought twice.
#![deny(missing_docs)]

mod error;
mod journaled;
mod pricing;
mod replay;
mod store;

pub use error::GatewayError;
pub use journaled::{check_model_call_objects, JournaledCalls};
pub use pricing::{is_local, Price, PriceTable, Pricing};
pub use replay::{decide, Decision, Match, ReplayMode, ReplayPolicy};
pub use store::{Entry, ResponseStore, Stored};
