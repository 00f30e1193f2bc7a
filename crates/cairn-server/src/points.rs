//! The rewind of the TUI, over HTTP (DESIGN §11): the person's messages as
//! points to go back to, a preview of what going back would change, and
//! the rewind itself — code, conversation or both — whose bank undoes it.
//!
//! Each route is one call into the session service
//! (`cairn_sessions::rewind_points`, `preview`, `rewind_to_point`); like
//! every change to a session, the preview and the rewind are refused (409)
//! while the session runs, because both take its journal's lock.

use axum::extract::{Path as UrlPath, State};
use axum::Json;
use serde::{Deserialize, Serialize};

use crate::api::{blocking, session_id, tracker};
use crate::{ApiError, Shared};

/// A point, as the page shows it.
#[derive(Debug, Serialize)]
pub struct Point {
    /// 1 for the first message of this session's own journal.
    pub number: usize,
    /// Seq of its `user` record.
    pub seq: u64,
    /// What the person wrote.
    pub text: String,
    /// The model turn it started (`null` when none ran after it).
    pub turn: Option<u64>,
    /// How the command line names it (`turn:N`, or `message K`).
    pub name: String,
    /// The files its turns changed.
    pub files: Vec<String>,
}

/// `GET /v1/sessions/{id}/rewind-points`: the person's messages, first
/// first.
pub async fn list(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<Vec<Point>>, ApiError> {
    let id = session_id(&state, &id)?;
    let store = state.store.clone();
    let points = blocking(move || {
        let points =
            cairn_sessions::points_of(&store, &id, cairn_workspace::CaptureConfig::default())
                .map_err(|e| ApiError::session(&e))?;
        Ok(points
            .into_iter()
            .map(|p| Point {
                name: p.name(),
                number: p.number,
                seq: p.seq,
                text: p.text,
                turn: p.turn,
                files: p.files,
            })
            .collect())
    })
    .await?;
    Ok(Json(points))
}

/// Which point, and how to go back to it.
#[derive(Debug, Deserialize)]
pub struct PointBody {
    /// The seq of the point's `user` record.
    pub seq: u64,
    /// `code`, `conversation` or `both` (default `both`); not read by the
    /// preview.
    pub action: Option<String>,
}

/// Opens session `id` for a rewind, with its workspace versioning and the
/// point whose user record is `seq`: one read of the journal, under the
/// session's lock.
fn open_at(
    store: &cairn_store::Store,
    id: &cairn_store::RunId,
    seq: u64,
) -> Result<
    (
        cairn_sessions::Session,
        cairn_workspace::Workspace,
        cairn_sessions::RewindPoint,
    ),
    ApiError,
> {
    let (session, records) =
        cairn_sessions::Session::open_with_records(store, id).map_err(|e| ApiError::session(&e))?;
    let ws = tracker(&session)?;
    let point = cairn_sessions::points_in(&records, &ws)
        .map_err(|e| ApiError::session(&e))?
        .into_iter()
        .find(|p| p.seq == seq)
        .ok_or_else(|| {
            ApiError::bad_request(format!(
                "record {seq} of session {id} is not a message of yours to go back to (see rewind-points)"
            ))
        })?;
    Ok((session, ws, point))
}

/// `POST /v1/sessions/{id}/rewind-preview` `{"seq"}`: what going back to
/// the point in the files would change now, and what it would leave alone
/// (your own edits among them). Banks and journals the current state, as
/// every rewind does; changes no file.
pub async fn preview(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<String>,
    Json(body): Json<PointBody>,
) -> Result<Json<cairn_workspace::RewindPreview>, ApiError> {
    let id = session_id(&state, &id)?;
    let store = state.store.clone();
    let preview = blocking(move || {
        let (mut session, ws, p) = open_at(&store, &id, body.seq)?;
        let node = p.node().ok_or_else(|| {
            ApiError::bad_request(format!(
                "no model turn ran after message {} of session {id}, so there are no files to put back",
                p.number
            ))
        })?;
        cairn_sessions::preview(
            &mut session,
            &ws,
            &node,
            cairn_workspace::RestoreScope::Run,
            &cairn_workspace::NoProgress,
        )
        .map_err(|e| ApiError::session(&e))
    })
    .await?;
    Ok(Json(preview))
}

/// What a rewind to a point did.
#[derive(Debug, Serialize)]
pub struct PointRewound {
    /// The restore of the files (`bank` undoes it), when they went back.
    pub report: Option<cairn_workspace::RestoreReport>,
    /// The fork before the message, when the conversation went back.
    pub fork: Option<String>,
    /// Why that fork could not be made after the files were restored.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fork_error: Option<String>,
}

/// `POST /v1/sessions/{id}/rewind-point` `{"seq", "action"}`: goes back
/// to the point — the files (`code`), the conversation as a fork before
/// the message (`conversation`), or both.
pub async fn rewind(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<String>,
    Json(body): Json<PointBody>,
) -> Result<Json<PointRewound>, ApiError> {
    let action = match body.action.as_deref() {
        None | Some("both") => cairn_sessions::RewindAction::Both,
        Some("code") => cairn_sessions::RewindAction::Code,
        Some("conversation") => cairn_sessions::RewindAction::Conversation,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "action `{other}`: use code, conversation or both"
            )))
        }
    };
    let id = session_id(&state, &id)?;
    let store = state.store.clone();
    let done = blocking(move || {
        let (mut session, ws, p) = open_at(&store, &id, body.seq)?;
        let done = cairn_sessions::rewind_to_point(
            &mut session,
            &ws,
            &p,
            action,
            &cairn_workspace::NoProgress,
        )
        .map_err(|e| ApiError::session(&e))?;
        let (fork, fork_error) = match done.fork {
            Some(Ok(child)) => (Some(child.to_string()), None),
            Some(Err(e)) => (None, Some(e.to_string())),
            None => (None, None),
        };
        Ok(PointRewound {
            report: done.report,
            fork,
            fork_error,
        })
    })
    .await?;
    Ok(Json(done))
}
