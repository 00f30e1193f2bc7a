//! The JSON API's read routes and fork (DESIGN §8): each handler is the
//! library call the CLI makes for the same question, run off the async
//! workers because the store is read with blocking IO.

use std::path::Path;

use axum::extract::{Path as UrlPath, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use cairn_store::RunId;
use serde::{Deserialize, Serialize};

use crate::error::ApiError;
use crate::http::Shared;

/// Runs blocking store work off the async workers.
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, ApiError> + Send + 'static,
) -> Result<T, ApiError> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|e| ApiError::failed(format!("the request's work stopped: {e}")))?
}

/// A JSON body that may be empty: `None` for no bytes (a client with
/// nothing to say still sends `Content-Type: application/json`, which the
/// admission rule asks of every state-changing request), else the body
/// parsed (400 when it is not the JSON the route takes).
pub struct MaybeJson<T>(pub Option<T>);

impl<T, S> axum::extract::FromRequest<S> for MaybeJson<T>
where
    T: serde::de::DeserializeOwned,
    S: Send + Sync,
{
    type Rejection = ApiError;

    async fn from_request(req: axum::extract::Request, state: &S) -> Result<Self, ApiError> {
        let bytes = axum::body::Bytes::from_request(req, state)
            .await
            .map_err(|e| ApiError::bad_request(format!("the request body: {e}")))?;
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return Ok(MaybeJson(None));
        }
        serde_json::from_slice(&bytes)
            .map(|v| MaybeJson(Some(v)))
            .map_err(|e| {
                ApiError::bad_request(format!(
                    "the request body is not the JSON this route takes: {e}"
                ))
            })
    }
}

/// A session id from the URL, and that the session exists.
pub(crate) fn session_id(state: &Shared, id: &str) -> Result<RunId, ApiError> {
    let id = RunId::parse(id)
        .map_err(|e| ApiError::bad_request(format!("`{id}` is not a session id: {e}")))?;
    if !state.store.journal_path(&id).exists() {
        return Err(ApiError::not_found(format!(
            "no session {id} in this store"
        )));
    }
    Ok(id)
}

/// `GET /v1/sessions` filters.
#[derive(Debug, Deserialize)]
pub struct ListQuery {
    /// Only the sessions of this repository (a directory; its git top-level
    /// when inside a work tree, as `cairn sessions` scopes).
    pub repo: Option<String>,
    /// Only sessions with this status (`running`, `interrupted`, `completed`, …, or `invalid` for one that does not verify).
    pub status: Option<String>,
}

/// `GET /v1/sessions`: every session, newest first, as `cairn sessions
/// --all --json` lists them.
pub async fn list(
    State(state): State<Shared>,
    Query(q): Query<ListQuery>,
) -> Result<Json<Vec<cairn_sessions::Summary>>, ApiError> {
    let store = state.store.clone();
    let list =
        blocking(move || cairn_sessions::list(&store).map_err(|e| ApiError::failed(e.to_string())))
            .await?;
    // The filter `cairn sessions --repo --status` applies, so both agree.
    let filter = cairn_sessions::ListFilter {
        repository: q
            .repo
            .as_deref()
            .map(|r| cairn_sessions::repository_root(Path::new(r))),
        statuses: q.status.iter().cloned().collect(),
        limit: None,
    };
    Ok(Json(filter.apply(list)))
}

/// `GET /v1/sessions/{id}`: the summary `cairn session show --json` prints.
pub async fn show(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<cairn_sessions::Summary>, ApiError> {
    let id = session_id(&state, &id)?;
    let store = state.store.clone();
    let s = blocking(move || Ok(cairn_sessions::summarize(&store, &id))).await?;
    Ok(Json(s))
}

/// `GET /v1/sessions/{id}/records` paging.
#[derive(Debug, Deserialize)]
pub struct RecordsQuery {
    /// Records after this journal seq (default 0: from the first).
    pub after: Option<u64>,
    /// At most this many (default 200, at most 1,000).
    pub limit: Option<usize>,
    /// Records before this journal seq: the page is the last `limit` of
    /// them (after `after`), for reading a session backwards.
    pub before: Option<u64>,
    /// `true`: the last `limit` records (a viewer opens a session at its
    /// end, whatever its length).
    #[serde(default)]
    pub tail: bool,
    /// `html`: each user and assistant record also carries its text as
    /// safe HTML (`crate::markdown`), for the viewer.
    pub render: Option<Render>,
}

/// What `render` asks for.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Render {
    /// The text as Markdown rendered to safe HTML.
    Html,
}

/// One record of a page: as the journal holds it, and with `render=html`
/// the HTML of its text.
#[derive(Debug, Serialize)]
pub struct PageRecord {
    /// The record.
    #[serde(flatten)]
    pub record: cairn_journal::Record,
    /// Its text as safe HTML (user and assistant records, with
    /// `render=html`, text under `crate::markdown::MAX_MARKDOWN`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub html: Option<String>,
}

/// A page of records.
#[derive(Debug, Serialize)]
pub struct RecordsPage {
    /// The records, in journal order, as the journal holds them.
    pub records: Vec<PageRecord>,
    /// The journal seq of the last record in the journal.
    pub last_seq: u64,
    /// `after` for the next page; `null` when this page reaches the end.
    pub next_after: Option<u64>,
    /// `before` for the page before this one; `null` when this page starts
    /// at the journal's first record.
    pub prev_before: Option<u64>,
}

/// The most records one page holds.
pub const MAX_PAGE: usize = 1000;

/// `GET /v1/sessions/{id}/records?after=N&limit=M` (or `before=N`, or
/// `tail=true`): a page of the verified records.
pub async fn records(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<String>,
    Query(q): Query<RecordsQuery>,
) -> Result<Json<RecordsPage>, ApiError> {
    let id = session_id(&state, &id)?;
    let limit = q.limit.unwrap_or(200);
    if limit == 0 || limit > MAX_PAGE {
        return Err(ApiError::bad_request(format!(
            "limit must be between 1 and {MAX_PAGE}"
        )));
    }
    if q.before.is_some() && q.tail {
        return Err(ApiError::bad_request(
            "give before or tail, not both: tail is the page before the end",
        ));
    }
    let window = Window {
        after: q.after.unwrap_or(0),
        before: if q.tail { Some(u64::MAX) } else { q.before },
        limit,
    };
    let store = state.store.clone();
    let page = blocking(move || {
        let scan = cairn_journal::read_journal(&store.journal_path(&id), id.as_str())
            .map_err(ApiError::journal)?;
        Ok(page_of(scan.records, window, q.render))
    })
    .await?;
    Ok(Json(page))
}

/// Which records a page holds: after `after`, before `before` if given;
/// the first `limit` of them, or with `before` the last `limit`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Window {
    pub after: u64,
    pub before: Option<u64>,
    pub limit: usize,
}

/// The page of `records` that `w` names.
pub(crate) fn page_of(
    records: Vec<cairn_journal::Record>,
    w: Window,
    render: Option<Render>,
) -> RecordsPage {
    let last_seq = records.last().map_or(0, |r| r.seq);
    let mut inside: Vec<cairn_journal::Record> = records
        .into_iter()
        .filter(|r| r.seq > w.after && w.before.is_none_or(|b| r.seq < b))
        .collect();
    if w.before.is_some() {
        let cut = inside.len().saturating_sub(w.limit);
        inside.drain(..cut);
    } else {
        inside.truncate(w.limit);
    }
    let page: Vec<_> = inside
        .into_iter()
        .map(|record| {
            let html = match (&record.body, render) {
                (cairn_journal::RecordBody::User(u), Some(Render::Html)) => {
                    crate::markdown::render(&u.text)
                }
                (cairn_journal::RecordBody::Assistant(a), Some(Render::Html)) => {
                    crate::markdown::render(&a.text)
                }
                _ => None,
            };
            PageRecord { record, html }
        })
        .collect();
    let next_after = page.last().map(|r| r.record.seq).filter(|&s| s < last_seq);
    let prev_before = page.first().map(|r| r.record.seq).filter(|&s| s > 1);
    RecordsPage {
        records: page,
        last_seq,
        next_after,
        prev_before,
    }
}

/// `POST /v1/sessions/{id}/fork` body.
#[derive(Debug, Default, Deserialize)]
pub struct ForkBody {
    /// The last record to share (default: the parent's last).
    pub at: Option<u64>,
}

/// What a fork made.
#[derive(Debug, Serialize)]
pub struct Forked {
    /// The new session.
    pub id: String,
    /// Its parent.
    pub parent: String,
    /// The last parent record it shares.
    pub seq: u64,
}

/// `POST /v1/sessions/{id}/fork`: `cairn fork ID [--at SEQ]`.
pub async fn fork(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<String>,
    MaybeJson(body): MaybeJson<ForkBody>,
) -> Result<Response, ApiError> {
    let parent = session_id(&state, &id)?;
    let at = body.and_then(|b| b.at);
    let store = state.store.clone();
    let forked = blocking(move || {
        let (child, writer, _) =
            cairn_sessions::fork(&store, &parent, at, None).map_err(|e| ApiError::session(&e))?;
        let seq = match &cairn_journal::read_head_record(&store.journal_path(&child))
            .map_err(ApiError::journal)?
            .body
        {
            cairn_journal::RecordBody::Meta(m) => m.fork.as_ref().map_or(0, |f| f.seq),
            _ => 0,
        };
        drop(writer);
        Ok(Forked {
            id: child.to_string(),
            parent: parent.to_string(),
            seq,
        })
    })
    .await?;
    Ok((StatusCode::CREATED, Json(forked)).into_response())
}

/// The workspace versioning of an open session ([`cairn_sessions::Session::tracker`]).
pub(crate) fn tracker(
    session: &cairn_sessions::Session,
) -> Result<cairn_workspace::Workspace, ApiError> {
    session
        .tracker(cairn_workspace::CaptureConfig::default())
        .map_err(|e| ApiError::session(&e))
}

/// `GET /v1/sessions/{id}/checkpoints`: `cairn checkpoint ls ID --json`.
pub async fn checkpoints(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let id = session_id(&state, &id)?;
    let store = state.store.clone();
    let list = blocking(move || {
        let list =
            cairn_checkpoint::list(&store, &id).map_err(|e| ApiError::failed(e.to_string()))?;
        serde_json::to_value(list).map_err(|e| ApiError::failed(e.to_string()))
    })
    .await?;
    Ok(Json(list))
}

/// `POST /v1/sessions/{id}/rewind` body: `cairn rewind ID --to NODE[:ITER]
/// [--restore-scope run|full] [--fork]` or `--restore-snapshot SNAP`.
#[derive(Debug, Deserialize)]
pub struct RewindBody {
    /// The node whose `pre:` state to restore (`turn:3`, `exec:2`).
    pub to: Option<String>,
    /// A snapshot to restore whole (a bank, to undo a rewind).
    pub snapshot: Option<String>,
    /// `run` (default: only what the session changed) or `full`.
    pub scope: Option<String>,
    /// Also fork the conversation at that boundary.
    #[serde(default)]
    pub fork: bool,
}

/// What a rewind did.
#[derive(Debug, Serialize)]
pub struct Rewound {
    /// The restore report (`target`, `bank`, `written`, `deleted`,
    /// `left_alone`, `failed`, …).
    #[serde(flatten)]
    pub report: cairn_workspace::RestoreReport,
    /// The fork made with `fork: true`.
    pub fork: Option<String>,
    /// Why the fork asked for could not be made after the files were
    /// restored (the report's `bank` undoes the restore).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fork_error: Option<String>,
}

/// `POST /v1/sessions/{id}/rewind`: the restore of `cairn rewind`, with
/// its bank journaled first (the library call the CLI and the TUI make).
/// Refused (409) while the session runs.
pub async fn rewind(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<String>,
    Json(body): Json<RewindBody>,
) -> Result<Json<Rewound>, ApiError> {
    let id = session_id(&state, &id)?;
    let scope = match body.scope.as_deref() {
        None | Some("run") => cairn_workspace::RestoreScope::Run,
        Some("full") => cairn_workspace::RestoreScope::Full,
        Some(other) => {
            return Err(ApiError::bad_request(format!(
                "scope `{other}`: use run or full"
            )))
        }
    };
    let store = state.store.clone();
    let out = blocking(move || {
        let node = body
            .to
            .as_deref()
            .map(cairn_workspace::NodeRef::parse)
            .transpose()
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        let snap = body
            .snapshot
            .as_deref()
            .map(cairn_workspace::SnapshotId::parse)
            .transpose()
            .map_err(|e| ApiError::bad_request(e.to_string()))?;
        let mut session =
            cairn_sessions::Session::open(&store, &id).map_err(|e| ApiError::session(&e))?;
        let ws = tracker(&session)?;
        let progress = &cairn_workspace::NoProgress;
        // With `fork`, every check comes before the first change, and a
        // fork that fails after the restore is reported beside its bank
        // (the library call `cairn rewind --fork` makes).
        let (report, fork, fork_error) = match (&node, &snap, body.fork) {
            (Some(n), None, true) => {
                let done = cairn_sessions::rewind_and_fork(&mut session, &ws, n, scope, progress)
                    .map_err(|e| ApiError::session(&e))?;
                match done.fork {
                    Ok(child) => (done.report, Some(child.to_string()), None),
                    Err(e) => (done.report, None, Some(e.to_string())),
                }
            }
            (Some(n), None, false) => {
                let target = cairn_sessions::RewindTarget::Node(n, scope);
                let report = cairn_sessions::rewind(&mut session, &ws, target, progress)
                    .map_err(|e| ApiError::session(&e))?;
                (report, None, None)
            }
            (None, Some(_), true) => {
                return Err(ApiError::bad_request(
                    "`fork` needs `to` (a node): a snapshot is not a point of the conversation",
                ))
            }
            (None, Some(s), false) => {
                let target = cairn_sessions::RewindTarget::Snapshot(s);
                let report = cairn_sessions::rewind(&mut session, &ws, target, progress)
                    .map_err(|e| ApiError::session(&e))?;
                (report, None, None)
            }
            _ => {
                return Err(ApiError::bad_request(
                    "give exactly one of `to` (a node, e.g. turn:3) or `snapshot`",
                ))
            }
        };
        Ok(Rewound {
            report,
            fork,
            fork_error,
        })
    })
    .await?;
    Ok(Json(out))
}

/// `POST /v1/sessions/{id}/checkpoints`: `cairn checkpoint save ID`.
pub async fn save_checkpoint(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<String>,
) -> Result<Response, ApiError> {
    let id = session_id(&state, &id)?;
    let store = state.store.clone();
    let out = blocking(move || {
        let mut session =
            cairn_sessions::Session::open(&store, &id).map_err(|e| ApiError::session(&e))?;
        let ws = tracker(&session)?;
        let r = cairn_sessions::save_checkpoint(
            &mut session,
            Some(&ws),
            Vec::new(),
            &cairn_workspace::NoProgress,
        )
        .map_err(|e| ApiError::session(&e))?;
        Ok(serde_json::json!({
            "id": r.id.to_string(), "manifest": r.manifest, "run": r.run, "seq": r.seq,
            "snapshot": r.snapshot.as_ref().map(|s| s.to_string()),
            "logical_bytes": r.logical_bytes, "stored_bytes": r.stored_bytes,
        }))
    })
    .await?;
    Ok((StatusCode::CREATED, Json(out)).into_response())
}

/// `POST /v1/checkpoints/{cp}/restore`: `cairn checkpoint restore CP`.
pub async fn restore_checkpoint(
    State(state): State<Shared>,
    UrlPath(cp): UrlPath<String>,
) -> Result<Json<serde_json::Value>, ApiError> {
    let cpid = cairn_checkpoint::CheckpointId::parse(&cp)
        .map_err(|e| ApiError::bad_request(format!("`{cp}`: {e}")))?;
    let store = state.store.clone();
    let out = blocking(move || {
        let manifest = cairn_checkpoint::show(&store, &cpid).map_err(|e| {
            if e.is_usage() {
                ApiError::not_found(e.to_string())
            } else {
                ApiError::failed(e.to_string())
            }
        })?;
        let run = manifest
            .run_id()
            .map_err(|e| ApiError::failed(e.to_string()))?;
        let mut session =
            cairn_sessions::Session::open(&store, &run).map_err(|e| ApiError::session(&e))?;
        let ws = tracker(&session)?;
        let r = cairn_sessions::restore_checkpoint(
            &mut session,
            &cpid,
            &ws,
            &cairn_workspace::NoProgress,
        )
        .map_err(|e| ApiError::session(&e))?;
        serde_json::to_value(r).map_err(|e| ApiError::failed(e.to_string()))
    })
    .await?;
    Ok(Json(out))
}

/// `GET /v1/search` query.
#[derive(Debug, Deserialize)]
pub struct SearchQuery {
    /// The text to find (1 to 200 characters; ASCII case ignored).
    pub q: String,
    /// At most this many hits (default 50, at most 200).
    pub limit: Option<usize>,
}

/// How long one search may read journals before it answers with what it
/// found (`complete: false`).
const SEARCH_TIME: std::time::Duration = std::time::Duration::from_secs(3);

/// `GET /v1/search?q=TEXT`: the records of every session that say `TEXT`,
/// newest session first (`cairn_sessions::search`).
pub async fn search(
    State(state): State<Shared>,
    Query(q): Query<SearchQuery>,
) -> Result<Json<cairn_sessions::Found>, ApiError> {
    let text = q.q.trim().to_owned();
    if text.is_empty() || text.chars().count() > 200 {
        return Err(ApiError::bad_request(
            "q must be 1 to 200 characters of text to find",
        ));
    }
    let limit = q.limit.unwrap_or(50);
    if limit == 0 || limit > 200 {
        return Err(ApiError::bad_request("limit must be between 1 and 200"));
    }
    let store = state.store.clone();
    let found = blocking(move || {
        cairn_sessions::search(
            &store,
            &text,
            limit,
            std::time::Instant::now() + SEARCH_TIME,
        )
        .map_err(|e| ApiError::session(&e))
    })
    .await?;
    Ok(Json(found))
}
