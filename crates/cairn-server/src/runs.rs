//! Runs the server drives (DESIGN §8): start a session, resume one with a
//! follow-up, suspend one — with the session service's launcher
//! ([`cairn_agent::Launcher`]), so a run started over HTTP is planned,
//! guarded, journaled and versioned exactly as one started on the command
//! line.
//!
//! Invariants: the server holds the stop handle of every run it started
//! from before the run's first step until the run ends; a suspend asks the
//! run to stop after the step in flight (as Ctrl-C once); a run of another
//! process is never stopped from here (its journal lock says who holds
//! it); each run works on a thread of its own, so no run holds up the
//! server's runtime.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::extract::{Path as UrlPath, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use cairn_agent::{stop_pair, Agent, AgentError, Events, Launcher, NewSession, Request, Stop};
use cairn_agent::{ApprovePolicy, StopHandle};
use cairn_store::RunId;
use serde::{Deserialize, Serialize};

use crate::api::session_id;
use crate::error::ApiError;
use crate::http::Shared;

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
    /// `shell` or `writes`: those calls wait for a person's yes, asked on
    /// `GET /v1/sessions/{id}/approval` (default `never`).
    pub approve: Option<String>,
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

fn launcher(state: &Shared) -> Result<Launcher, ApiError> {
    state.launcher.clone().ok_or_else(|| {
        ApiError::refused("this server was started without a launcher, so it cannot run sessions")
    })
}

/// A run's streamed text, into its live stream (made on the first piece).
struct Streamed {
    state: Shared,
    run: RunId,
    stream: Option<Arc<crate::live::Followed>>,
}

impl Events for Streamed {
    fn text(&mut self, delta: &str) {
        if self.stream.is_none() {
            self.stream = crate::live::followed(&self.state, &self.run).ok();
        }
        // After every record the run wrote before this text (one ordered
        // stream: a tool's result never arrives after the next turn's text).
        if let Some(f) = &self.stream {
            f.publish_delta(&serde_json::json!({ "text": delta }).to_string());
        }
    }
}

/// Makes an agent with `make` and drives it with `text` on a thread of its
/// own; returns the session's id once the agent exists (or why it could
/// not be made). The run's stop handle is in [`Runs`] before its first
/// step, and leaves when the run ends.
fn spawn(
    state: &Shared,
    text: Option<String>,
    make: impl FnOnce(Stop) -> Result<Agent, AgentError> + Send + 'static,
) -> Result<RunId, ApiError> {
    let (tx, rx) = std::sync::mpsc::channel::<Result<RunId, ApiError>>();
    let state = state.clone();
    std::thread::Builder::new()
        .name("cairn-serve-run".into())
        .spawn(move || {
            let rt = match tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
            {
                Ok(rt) => rt,
                Err(e) => {
                    let _ = tx.send(Err(ApiError::failed(e.to_string())));
                    return;
                }
            };
            rt.block_on(async {
                let (handle, stop) = stop_pair();
                let mut agent = match make(stop) {
                    Ok(agent) => agent,
                    Err(e) => {
                        let _ = tx.send(Err(ApiError::agent(&e)));
                        return;
                    }
                };
                let run = agent.session().id().clone();
                state.runs.lock().insert(run.to_string(), handle);
                let _ = tx.send(Ok(run.clone()));
                let mut ev = Streamed {
                    state: state.clone(),
                    run: run.clone(),
                    stream: None,
                };
                if let Err(e) = agent.drive(text, &mut ev).await {
                    tracing::warn!("a served run of session {run} stopped: {e}");
                }
                state.runs.lock().remove(run.as_str());
                // The run no longer keeps its stream awake: with nobody
                // watching, it sleeps.
                crate::live::run_ended(&state, run.as_str());
            });
        })
        .map_err(|e| ApiError::failed(format!("cannot start the run's thread: {e}")))?;
    rx.recv()
        .map_err(|_| ApiError::failed("the run's thread ended before the session existed"))?
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
    let launcher = launcher(&state)?;
    if req.task.trim().is_empty() {
        return Err(ApiError::bad_request(
            "task is empty: say what the agent should do",
        ));
    }
    let st = state.clone();
    let started = crate::api::blocking(move || {
        let workspace = std::fs::canonicalize(&req.workspace)
            .map_err(|e| ApiError::bad_request(format!("workspace {}: {e}", req.workspace)))?;
        if !workspace.is_dir() {
            return Err(ApiError::bad_request(format!(
                "workspace {}: not a directory",
                req.workspace
            )));
        }
        let spec = NewSession {
            request: Request {
                model: req.model,
                max_turns: req.max_turns,
                max_tokens: req.max_tokens,
                ..Request::default()
            },
            system: None::<PathBuf>,
            name: req.name,
            workspace,
        };
        let task = req.task;
        let policy = policy(req.approve.as_deref())?;
        spawn(&st, Some(task.clone()), move |stop| {
            launcher.check_new(&spec)?;
            Ok(asking(launcher.create(&spec, &task, stop)?, policy))
        })
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

/// An approval policy as a request names it (`never` when it does not).
fn policy(name: Option<&str>) -> Result<ApprovePolicy, ApiError> {
    name.map_or(Ok(ApprovePolicy::Never), |p| {
        p.parse::<ApprovePolicy>()
            .map_err(|e| ApiError::bad_request(e.to_string()))
    })
}

/// `agent`, asking under `policy`: the question is answered from the page
/// (`approvals`), as no one here can.
fn asking(agent: Agent, policy: ApprovePolicy) -> Agent {
    match policy {
        ApprovePolicy::Never => agent,
        policy => agent.with_approval(policy, Box::new(cairn_agent::AnsweredElsewhere)),
    }
}

/// `POST /v1/sessions/{id}/resume` body.
#[derive(Debug, Default, Deserialize)]
pub struct ResumeBody {
    /// A follow-up message.
    pub text: Option<String>,
    /// `never`, `shell` or `writes`: which calls wait for an answer from
    /// the page (default `never`).
    pub approve: Option<String>,
}

/// `POST /v1/sessions/{id}/resume`: `cairn resume ID [TEXT]` in the
/// background.
pub async fn resume(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<String>,
    crate::api::MaybeJson(body): crate::api::MaybeJson<ResumeBody>,
) -> Result<Response, ApiError> {
    let id = session_id(&state, &id)?;
    let launcher = launcher(&state)?;
    if state.runs.is_running(id.as_str()) {
        return Err(ApiError::refused(format!(
            "session {id} is running here; suspend it first"
        )));
    }
    let body = body.unwrap_or_default();
    let policy = policy(body.approve.as_deref())?;
    let text = body.text.filter(|t| !t.trim().is_empty());
    let st = state.clone();
    let id2 = id.clone();
    crate::api::blocking(move || {
        // The stream exists before the run writes, so it starts at the
        // journal as it is now and every new record is a frame.
        crate::live::followed(&st, &id2)?;
        spawn(&st, text, move |stop| {
            let agent = launcher.open(
                &id2,
                &Request::default(),
                false,
                stop,
                &mut cairn_agent::Silent,
            )?;
            Ok(asking(agent, policy))
        })
        .map(drop)
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
        None => Err(ApiError::refused(format!(
                "session {id} is not running in this server (a run of another process is stopped where it runs)"
            ))),
    }
}
