//! Runs the server drives (DESIGN §8): start a session, resume one with a
//! follow-up, suspend one — through a [`Runner`] the binary implements
//! with the same code as `cairn run` and `cairn resume`, so a run started
//! over HTTP is planned, guarded, journaled and versioned exactly as one
//! started on the command line.
//!
//! Invariants: the server holds the stop handle of every run it started
//! until the run ends; a suspend asks the run to stop after the step in
//! flight (as Ctrl-C once); a run of another process is never stopped from
//! here (its journal lock says who holds it).

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use cairn_agent::StopHandle;
use cairn_store::RunId;
use serde::{Deserialize, Serialize};

use crate::api::session_id;
use crate::error::{ApiError, Class};
use crate::http::Shared;

/// Why a run could not start: what to say, and its exit-code class (the
/// binary classifies its errors as the CLI does).
#[derive(Clone, Debug, thiserror::Error)]
#[error("{message}")]
pub struct RunError {
    /// The class.
    pub class: Class,
    /// The message, with its causes.
    pub message: String,
}

impl From<RunError> for ApiError {
    fn from(e: RunError) -> ApiError {
        let (status, code) = match e.class {
            Class::Usage => (StatusCode::BAD_REQUEST, "bad_request"),
            Class::Refused => (StatusCode::CONFLICT, "refused"),
            Class::Integrity => (StatusCode::INTERNAL_SERVER_ERROR, "integrity"),
            Class::Failure => (StatusCode::INTERNAL_SERVER_ERROR, "failed"),
        };
        ApiError {
            status,
            code,
            class: e.class,
            message: e.message,
        }
    }
}

/// Streamed model text of a run, for its live stream.
pub type TextSink = Box<dyn FnMut(&str) + Send>;

/// What `POST /v1/sessions` asks for: `cairn run`'s arguments.
#[derive(Clone, Debug, Deserialize)]
pub struct StartRequest {
    /// What the agent should do.
    pub task: String,
    /// The workspace: an existing directory (absolute).
    pub workspace: String,
    /// `script:PATH`, `openai:MODEL`, `anthropic:MODEL` (default: the
    /// server's `CAIRN_MODEL`).
    pub model: Option<String>,
    /// A name.
    pub name: Option<String>,
    /// Budgets, as `run`'s flags.
    pub max_turns: Option<u64>,
    /// Token budget.
    pub max_tokens: Option<u64>,
}

/// A run the runner started: its session, and how to stop it.
pub struct Started {
    /// The session.
    pub id: RunId,
    /// Stops it (once: after the step in flight).
    pub stop: StopHandle,
}

/// How the server starts and resumes runs; the binary implements it.
pub trait Runner: Send + Sync {
    /// Starts a new session and its run in the background; returns once
    /// the session exists. `text` receives the model's streamed text;
    /// `done` is called when the run ends.
    ///
    /// # Errors
    /// Whatever stops `cairn run` from starting.
    fn start(
        &self,
        req: StartRequest,
        text: TextSink,
        done: Box<dyn FnOnce() + Send>,
    ) -> Result<Started, RunError>;

    /// Resumes session `id` in the background with an optional follow-up.
    ///
    /// # Errors
    /// Whatever stops `cairn resume` (the guard, a writer holding it).
    fn resume(
        &self,
        id: &RunId,
        text: Option<String>,
        stream: TextSink,
        done: Box<dyn FnOnce() + Send>,
    ) -> Result<Started, RunError>;
}

/// The runs this server drives, by session id.
#[derive(Default)]
pub struct Runs {
    running: Mutex<HashMap<String, StopHandle>>,
}

impl Runs {
    fn insert(&self, id: &RunId, stop: StopHandle) {
        self.lock().insert(id.to_string(), stop);
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, StopHandle>> {
        self.running.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// True while this server runs session `id`.
    pub fn is_running(&self, id: &str) -> bool {
        self.lock().contains_key(id)
    }
}

fn runner(state: &Shared) -> Result<Arc<dyn Runner>, ApiError> {
    state.runner.clone().ok_or_else(|| ApiError {
        status: StatusCode::CONFLICT,
        code: "refused",
        class: Class::Refused,
        message: "this server was started without a runner, so it cannot run sessions".into(),
    })
}

/// The sink publishing a run's streamed text into its live stream.
fn text_sink(state: &Shared, id: &str) -> TextSink {
    let state = state.clone();
    let id = id.to_owned();
    Box::new(move |delta: &str| {
        let Ok(run) = RunId::parse(&id) else { return };
        if let Ok(f) = crate::live::followed(&state, &run) {
            f.stream
                .publish_delta(&serde_json::json!({ "text": delta }).to_string());
        }
    })
}

/// What a start or resume answers.
#[derive(Debug, Serialize)]
pub struct Accepted {
    /// The session.
    pub id: String,
    /// `running`.
    pub status: &'static str,
}

/// `POST /v1/sessions`: `cairn run` in the background.
pub async fn start(
    State(state): State<Shared>,
    Json(req): Json<StartRequest>,
) -> Result<Response, ApiError> {
    let runner = runner(&state)?;
    if req.task.trim().is_empty() {
        return Err(ApiError::bad_request(
            "task is empty: say what the agent should do",
        ));
    }
    let st = state.clone();
    let started = crate::api::blocking(move || {
        // The session's id is not known until it exists: the text sink
        // finds it through a slot filled right after.
        let slot: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
        let sink_slot = slot.clone();
        let sink_state = st.clone();
        let mut inner: Option<TextSink> = None;
        let text: TextSink = Box::new(move |d: &str| {
            if inner.is_none() {
                if let Some(id) = sink_slot.lock().ok().and_then(|s| s.clone()) {
                    inner = Some(text_sink(&sink_state, &id));
                }
            }
            if let Some(f) = inner.as_mut() {
                f(d);
            }
        });
        let done_state = st.clone();
        let done_slot = slot.clone();
        let done = Box::new(move || {
            if let Some(id) = done_slot.lock().ok().and_then(|s| s.clone()) {
                done_state.runs.lock().remove(&id);
            }
        });
        let s = runner.start(req, text, done).map_err(ApiError::from)?;
        if let Ok(mut g) = slot.lock() {
            *g = Some(s.id.to_string());
        }
        st.runs.insert(&s.id, s.stop.clone());
        Ok(s.id)
    })
    .await?;
    Ok((
        StatusCode::CREATED,
        Json(Accepted {
            id: started.to_string(),
            status: "running",
        }),
    )
        .into_response())
}

/// `POST /v1/sessions/{id}/resume` body.
#[derive(Debug, Default, Deserialize)]
pub struct ResumeBody {
    /// A follow-up message.
    pub text: Option<String>,
}

/// `POST /v1/sessions/{id}/resume`: `cairn resume ID [TEXT]` in the
/// background.
pub async fn resume(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<String>,
    body: Option<Json<ResumeBody>>,
) -> Result<Response, ApiError> {
    let id = session_id(&state, &id)?;
    let runner = runner(&state)?;
    if state.runs.is_running(id.as_str()) {
        return Err(ApiError {
            status: StatusCode::CONFLICT,
            code: "refused",
            class: Class::Refused,
            message: format!("session {id} is running here; suspend it first"),
        });
    }
    let text = body.and_then(|b| b.0.text).filter(|t| !t.trim().is_empty());
    let st = state.clone();
    let id2 = id.clone();
    crate::api::blocking(move || {
        // The stream exists before the run writes, so it starts at the
        // journal as it is now and every new record is a frame.
        crate::live::followed(&st, &id2)?;
        let done_state = st.clone();
        let key = id2.to_string();
        let done = Box::new(move || {
            done_state.runs.lock().remove(&key);
        });
        let s = runner
            .resume(&id2, text, text_sink(&st, id2.as_str()), done)
            .map_err(ApiError::from)?;
        st.runs.insert(&s.id, s.stop);
        Ok(())
    })
    .await?;
    Ok((
        StatusCode::ACCEPTED,
        Json(Accepted {
            id: id.to_string(),
            status: "running",
        }),
    )
        .into_response())
}

/// `POST /v1/sessions/{id}/suspend`: the run stops after the step in
/// flight and journals `terminal: suspended` (as Ctrl-C once).
pub async fn suspend(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<String>,
) -> Result<Response, ApiError> {
    let id = session_id(&state, &id)?;
    let stop = state.runs.lock().get(id.as_str()).cloned();
    match stop {
        Some(stop) => {
            stop.escalate();
            Ok((
                StatusCode::ACCEPTED,
                Json(serde_json::json!({"id": id.to_string(), "status": "suspending"})),
            )
                .into_response())
        }
        None => Err(ApiError {
            status: StatusCode::CONFLICT,
            code: "refused",
            class: Class::Refused,
            message: format!(
                "session {id} is not running in this server (a run of another process is stopped where it runs)"
            ),
        }),
    }
}
