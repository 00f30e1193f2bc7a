//! Approvals from the page (DESIGN §11): a run this server drives with an
//! approval policy asks here, and a person answers over HTTP — from the
//! viewer, on any device that has the token.
//!
//! The agent's rules hold as they do in the terminal: the question is asked
//! inside a `pause:turn:N` window before the call's `tool_start`; a decline
//! runs nothing; a stop while waiting abandons the question (the pending
//! entry goes with it). One question per session at a time: the loop asks
//! one call after another.

use std::collections::HashMap;
use std::sync::Mutex;

use axum::extract::{Path as UrlPath, State};
use axum::Json;
use cairn_agent::{Approver, Decision};
use cairn_journal::ToolCall;
use serde::{Deserialize, Serialize};
use tokio::sync::oneshot;

use crate::api::session_id;
use crate::error::ApiError;
use crate::http::Shared;

/// The questions waiting for an answer, by session id.
#[derive(Default)]
pub struct Approvals {
    waiting: Mutex<HashMap<String, Waiting>>,
}

struct Waiting {
    question: Question,
    answer: oneshot::Sender<Decision>,
}

/// A call waiting for a person's yes.
#[derive(Clone, Debug, Serialize)]
pub struct Question {
    /// The call.
    pub call: ToolCall,
    /// For a file write or edit, the unified diff it would make (the
    /// model's text: shown as text).
    pub preview: Option<String>,
}

impl Approvals {
    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, Waiting>> {
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The approver of a run this server drives.
pub(crate) struct PageApprover {
    pub(crate) state: Shared,
    pub(crate) run: String,
}

/// Takes the question out of the map when the wait ends, however it ends
/// (an answer, or a stop that drops the waiting future).
struct Asked<'a> {
    approvals: &'a Approvals,
    run: &'a str,
    call: String,
}

impl Drop for Asked<'_> {
    fn drop(&mut self) {
        let mut map = self.approvals.lock();
        if map
            .get(self.run)
            .is_some_and(|w| w.question.call.id == self.call)
        {
            map.remove(self.run);
        }
    }
}

#[async_trait::async_trait]
impl Approver for PageApprover {
    async fn ask(&mut self, call: &ToolCall) -> Decision {
        self.ask_previewed(call, None).await
    }

    async fn ask_previewed(&mut self, call: &ToolCall, preview: Option<String>) -> Decision {
        let (tx, rx) = oneshot::channel();
        let approvals = &self.state.runs.approvals;
        approvals.lock().insert(
            self.run.clone(),
            Waiting {
                question: Question {
                    call: call.clone(),
                    preview,
                },
                answer: tx,
            },
        );
        let _asked = Asked {
            approvals,
            run: &self.run,
            call: call.id.clone(),
        };
        match rx.await {
            Ok(d) => d,
            // The question was dropped unanswered (the server is going
            // away): wait for the stop that comes with it, never decide.
            Err(_) => std::future::pending().await,
        }
    }
}

/// `GET /v1/sessions/{id}/approval`: the call waiting for a yes, or `null`.
pub async fn pending(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<Option<Question>>, ApiError> {
    let id = session_id(&state, &id)?;
    let map = state.runs.approvals.lock();
    Ok(Json(map.get(id.as_str()).map(|w| w.question.clone())))
}

/// `POST /v1/sessions/{id}/approval` body.
#[derive(Debug, Deserialize)]
pub struct Answer {
    /// The id of the call answered (so an answer meant for one call never
    /// lands on the next).
    pub call: String,
    /// `run` or `decline`.
    pub decision: String,
}

/// `POST /v1/sessions/{id}/approval` `{"call", "decision"}`: answers the
/// waiting call.
pub async fn answer(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<String>,
    Json(a): Json<Answer>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let id = session_id(&state, &id)?;
    let decision = match a.decision.as_str() {
        "run" => Decision::Run,
        "decline" => Decision::Decline,
        other => {
            return Err(ApiError::bad_request(format!(
                "decision `{other}`: use run or decline"
            )))
        }
    };
    let waiting = {
        let mut map = state.runs.approvals.lock();
        match map.get(id.as_str()) {
            Some(w) if w.question.call.id == a.call => map.remove(id.as_str()),
            _ => None,
        }
    };
    let Some(w) = waiting else {
        return Err(ApiError::refused(format!(
                "session {id} is not waiting for an answer about call {} (it was answered, or the run stopped)",
                a.call
            )));
    };
    // The run may have stopped in between: then nobody hears the answer.
    let heard = w.answer.send(decision).is_ok();
    Ok(Json(serde_json::json!({
        "call": a.call,
        "decision": a.decision,
        "heard": heard,
    })))
}
