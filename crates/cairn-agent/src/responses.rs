//! The agent loop's use of the response store (DESIGN §7): the one store of
//! `cairn-gateway`, shared with the proxy.
//!
//! Invariant: a completed model response is made durable under its key
//! BEFORE the assistant record that uses it is written. So if the process
//! dies between the two, the retry finds the response in the store and is
//! served from it instead of being bought again, and the journal says it was
//! a replay.
//!
//! The key is derived from the run, the turn and the exact request
//! (canonical JSON of provider, model, base URL and request): a different
//! request is a different call and is never served a stored answer. The body
//! stored is the response as JSON.

use cairn_calls::{Entry, ResponseStore};
use cairn_model::{ModelRequest, ModelResponse};
use serde::Serialize;

use crate::AgentError;

/// What identifies one model call of the loop.
#[derive(Serialize)]
struct KeyParts<'a> {
    run: &'a str,
    turn: u64,
    provider: &'a str,
    model: &'a str,
    base_url: Option<&'a str>,
    request: &'a ModelRequest,
}

/// The key of a call.
pub(crate) fn key(
    run: &str,
    turn: u64,
    provider: &str,
    model: &str,
    base_url: Option<&str>,
    request: &ModelRequest,
) -> Result<String, AgentError> {
    cairn_calls::canonical::hash(
        "cairn/response/v1\n",
        &KeyParts {
            run,
            turn,
            provider,
            model,
            base_url,
            request,
        },
    )
    .map_err(|e| AgentError::StoredResponse {
        path: std::path::PathBuf::from("the response key"),
        reason: format!("the request does not serialise: {e}"),
    })
}

/// The stored response for `key`, if any.
///
/// # Errors
/// [`AgentError::Calls`] when an entry exists but does not read.
pub(crate) fn get(store: &ResponseStore, key: &str) -> Result<Option<ModelResponse>, AgentError> {
    let Some(stored) = store.get(key)? else {
        return Ok(None);
    };
    let body = store.body(&stored)?;
    serde_json::from_slice(&body)
        .map(Some)
        .map_err(|e| AgentError::StoredResponse {
            path: std::path::PathBuf::from(format!("stored response {key}")),
            reason: e.to_string(),
        })
}

/// Stores `response` durably under `key`, bought by `run` from `provider`.
///
/// # Errors
/// The store's write fails.
pub(crate) fn put(
    store: &ResponseStore,
    key: &str,
    run: &str,
    provider: &str,
    response: &ModelResponse,
) -> Result<(), AgentError> {
    let body = serde_json::to_vec(response).map_err(|e| AgentError::StoredResponse {
        path: std::path::PathBuf::from(format!("stored response {key}")),
        reason: e.to_string(),
    })?;
    let entry = Entry::whole_json(key, run, format!("agent:{provider}"));
    store.put(entry, &body, None)?;
    Ok(())
}
