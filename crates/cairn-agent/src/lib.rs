//! cairn's agent loop: model turns and tool calls, journaled so that a run
//! survives crashes, suspends and restarts without buying a model call twice
//! or silently repeating a side effect.
//!
//! # Guarantees
//! - Journal order within a turn (DESIGN §4.1): the response is stored, the
//!   `assistant` record is written before any tool runs, `tool_start` before
//!   dispatch, `tool_result` the instant a tool completes.
//! - A resume completes the cut-short turn exactly: journaled results are
//!   reused, undispatched calls run once, an in-flight read-only call runs
//!   again, an in-flight effectful call is recorded `unknown` and not re-run.
//! - A clean suspend repeats nothing on resume.
//! - A response bought but not journaled before a crash is served from the
//!   [`ResponseStore`] on resume, and the `assistant` record says `replay`.
//! - The resume guard refuses a changed configuration, naming each field,
//!   unless forced; a forced resume is recorded (`override`).
//! - Counters and costs come only from the journal's fold; an unknown cost is
//!   never turned into a number.
//! - Approvals (DESIGN §11): a call the [`ApprovePolicy`] names is asked
//!   about before its `tool_start`, inside a `pause:`/`resume:` window, so
//!   edits made while the person decides are reconciled as theirs; a
//!   declined call runs nothing and is journaled `refused`.
//!
//! # Not guaranteed
//! Effects outside the workspace (a pushed commit, a sent mail) are not undone
//! or deduplicated: an effectful call in flight at a crash is reported
//! `unknown`, and the model or the user decides.
//!
//! ```no_run
//! # async fn demo(store: cairn_store::Store, agent: &mut cairn_agent::Agent) -> Result<(), cairn_agent::AgentError> {
//! let ending = agent.drive(Some("fix the failing test".into()), &mut cairn_agent::Silent).await?;
//! println!("{}", ending.reason.as_str());
//! # Ok(()) }
//! ```
#![deny(missing_docs)]

mod agent;
mod approve;
mod boundaries;
mod budget;
mod convert;
mod error;
mod events;
mod fingerprint;
mod launch;
mod offload;
mod plan;
pub mod questions;
mod responses;
mod stop;

pub use agent::{Agent, Config, Ending, Faults};
pub use approve::{AnsweredElsewhere, ApprovePolicy, Approver, Decision, UnknownPolicy};
pub use cairn_calls::ResponseStore;
pub use cairn_calls::{is_local, Price, PriceTable, Pricing};
pub use cairn_sessions::Session;
pub use error::{model_error_kind, AgentError};
pub use events::{Events, Silent};
pub use fingerprint::{compare, fingerprint, Verdict};
pub use launch::{refuse_store_inside, Launch, Launcher, NewSession};
pub use plan::{Plan, Request, SystemPrompt};
pub use stop::{stop_pair, Stop, StopHandle, StopLevel};
