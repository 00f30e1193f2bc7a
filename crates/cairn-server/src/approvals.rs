//! Approvals from the page (DESIGN §11): a run waiting for a person's yes
//! posts its question in the session's directory
//! ([`cairn_agent::questions`]), and a person answers over HTTP — from the
//! viewer, on any device that has the token.
//!
//! Whichever process drives the run: one this server started (its approver
//! asks no one else, [`cairn_agent::AnsweredElsewhere`]) or `cairn run
//! --approve` in a terminal on this host, where the first answer wins,
//! typed or clicked. The agent's rules hold: the question is asked inside a
//! `pause:turn:N` window before the call's `tool_start`; a decline runs
//! nothing; a stop while waiting withdraws the question.

use std::time::{Duration, Instant};

use axum::extract::{Path as UrlPath, State};
use axum::Json;
use cairn_agent::questions::{self, Question, QuestionError};
use cairn_agent::Decision;
use serde::Deserialize;

use crate::api::{blocking, session_id};
use crate::error::ApiError;
use crate::http::Shared;

/// How long an answer waits to hear that the run took it.
const HEARD_WITHIN: Duration = Duration::from_secs(3);

/// `GET /v1/sessions/{id}/approval`: the call waiting for a yes, or `null`.
pub async fn pending(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<Option<Question>>, ApiError> {
    let id = session_id(&state, &id)?;
    let store = state.store.clone();
    Ok(Json(
        blocking(move || Ok(questions::pending(&store, &id))).await?,
    ))
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
/// waiting call. `heard` says whether the run closed the question within a
/// few seconds (it took this answer, or one given at the same moment on its
/// terminal); false when it did not (it stopped, or is wedged).
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
    let (store, run, call) = (state.store.clone(), id.clone(), a.call.clone());
    let asked = blocking(
        move || match questions::answer(&store, &run, &call, decision) {
            Ok(q) => Ok(q.asked),
            Err(e @ QuestionError::NotWaiting { .. }) => Err(ApiError::refused(e.to_string())),
            Err(QuestionError::Store(e)) => Err(ApiError::failed(format!(
                "cannot write the answer: {}",
                cairn_store::text::with_causes(&e)
            ))),
        },
    )
    .await?;
    // The run withdraws its question once it has taken an answer.
    let since = Instant::now();
    let heard = loop {
        let (store, run, asked) = (state.store.clone(), id.clone(), asked.clone());
        if !blocking(move || Ok(questions::still_asked(&store, &run, &asked))).await? {
            break true;
        }
        if since.elapsed() >= HEARD_WITHIN {
            break false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    Ok(Json(serde_json::json!({
        "call": a.call,
        "decision": a.decision,
        "heard": heard,
    })))
}
