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

/// What `POST /v1/sessions` asks for: `cairn run`'s arguments.
#[derive(Clone, Debug, Deserialize)]
pub struct StartRequest {
    /// What the agent should do.
    pub task: String,
    /// The workspace: an existing directory (absolute).
    pub workspace: String,
    /// `script:PATH`, `openai:MODEL`, `openai-responses:MODEL`,
    /// `anthropic:MODEL` (default: the
    /// server's `CAIRN_MODEL`).
    pub model: Option<String>,
    /// A name.
    pub name: Option<String>,
    /// Budgets, as `run`'s flags.
    pub max_turns: Option<u64>,
    /// Token budget.
    pub max_tokens: Option<u64>,
}

/// What a run tells the server as it goes. The runner calls `started`
/// once the session exists and before any work, so the server holds the
/// run's stop handle before the run can end; then `text` for each piece
/// of streamed model text, and `ended` when the run is over.
pub trait RunHooks: Send {
    /// The session exists; `stop` stops it (once: after the step in flight).
    fn started(&mut self, run: &RunId, stop: StopHandle);
    /// Streamed model text.
    fn text(&mut self, run: &RunId, delta: &str);
    /// The run is over (whatever its ending).
    fn ended(&mut self, run: &RunId);
}

/// How the server starts and resumes runs; the binary implements it.
pub trait Runner: Send + Sync {
    /// Starts a new session and its run in the background; returns its id
    /// once the session exists.
    ///
    /// # Errors
    /// Whatever stops `cairn run` from starting.
    fn start(&self, req: StartRequest, hooks: Box<dyn RunHooks>) -> Result<RunId, RunError>;

    /// Resumes session `id` in the background with an optional follow-up.
    ///
    /// # Errors
    /// Whatever stops `cairn resume` (the guard, a writer holding it).
    fn resume(
        &self,
        id: &RunId,
        text: Option<String>,
        hooks: Box<dyn RunHooks>,
    ) -> Result<(), RunError>;
}

/// The runs this server drives, by session id.
#[derive(Default)]
pub struct Runs {
    running: Mutex<HashMap<String, StopHandle>>,
}

impl Runs {
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

/// The server's side of a run: its stop handle in [`Runs`], its text into
/// its live stream.
struct Hooks {
    state: Shared,
    stream: Option<Arc<crate::live::Followed>>,
}

impl Hooks {
    fn boxed(state: &Shared) -> Box<dyn RunHooks> {
        Box::new(Hooks {
            state: state.clone(),
            stream: None,
        })
    }
}

impl RunHooks for Hooks {
    fn started(&mut self, run: &RunId, stop: StopHandle) {
        self.state.runs.lock().insert(run.to_string(), stop);
    }

    fn text(&mut self, run: &RunId, delta: &str) {
        if self.stream.is_none() {
            self.stream = crate::live::followed(&self.state, run).ok();
        }
        if let Some(f) = &self.stream {
            f.stream
                .publish_delta(&serde_json::json!({ "text": delta }).to_string());
        }
    }

    fn ended(&mut self, run: &RunId) {
        self.state.runs.lock().remove(run.as_str());
    }
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
    let started =
        crate::api::blocking(move || runner.start(req, Hooks::boxed(&st)).map_err(ApiError::from))
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
    crate::api::MaybeJson(body): crate::api::MaybeJson<ResumeBody>,
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
    let text = body.and_then(|b| b.text).filter(|t| !t.trim().is_empty());
    let st = state.clone();
    let id2 = id.clone();
    crate::api::blocking(move || {
        // The stream exists before the run writes, so it starts at the
        // journal as it is now and every new record is a frame.
        crate::live::followed(&st, &id2)?;
        runner
            .resume(&id2, text, Hooks::boxed(&st))
            .map_err(ApiError::from)?;
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
