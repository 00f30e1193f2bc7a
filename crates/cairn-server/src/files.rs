//! What a session's snapshots hold, read without changing anything: the
//! list, a diff between two, a snapshot's tree, one file as it was.
//!
//! These read the store's snapshot manifests and objects only: the
//! workspace directory is not touched (a checkout that is gone still shows
//! its history), and the session's journal is not read, so a diff of a session
//! of 100,000 records costs what a diff of a short one does.

use axum::extract::{Path as UrlPath, Query, State};
use axum::Json;
use serde::{Deserialize, Serialize};

use crate::api::{blocking, session_id};
use crate::{ApiError, Shared};

fn snapshot(s: &str) -> Result<cairn_workspace::SnapshotId, ApiError> {
    cairn_workspace::SnapshotId::parse(s)
        .map_err(|e| ApiError::bad_request(format!("`{s}` is not a snapshot id: {e}")))
}

/// `GET /v1/sessions/{id}/snapshots`: `cairn rewind ID --list-snapshots`.
pub async fn snapshots(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<String>,
) -> Result<Json<Vec<cairn_workspace::SnapshotInfo>>, ApiError> {
    let id = session_id(&state, &id)?;
    let store = state.store.clone();
    let list =
        blocking(move || cairn_workspace::list_snapshots(&store, &id).map_err(ApiError::workspace))
            .await?;
    Ok(Json(list))
}

/// `GET /v1/sessions/{id}/diff` query.
#[derive(Debug, Deserialize)]
pub struct DiffQuery {
    /// The snapshot to compare from.
    pub from: String,
    /// The snapshot to compare to.
    pub to: String,
}

/// One file of a diff.
#[derive(Debug, Serialize)]
pub struct DiffFile {
    /// The change and its line counts.
    #[serde(flatten)]
    pub change: cairn_workspace::FileChange,
    /// The unified diff, for a text file (`null` when binary or too large).
    pub unified: Option<String>,
}

/// `GET /v1/sessions/{id}/diff?from=SNAP&to=SNAP`: every file that
/// differs, with line counts and a unified diff for text files.
pub async fn diff(
    State(state): State<Shared>,
    UrlPath(id): UrlPath<String>,
    Query(q): Query<DiffQuery>,
) -> Result<Json<Vec<DiffFile>>, ApiError> {
    let id = session_id(&state, &id)?;
    let (from, to) = (snapshot(&q.from)?, snapshot(&q.to)?);
    let store = state.store.clone();
    let files = blocking(move || {
        let ws = cairn_workspace::Snapshots::of(&store, &id);
        let changes = ws.diff_stat(&from, &to).map_err(ApiError::workspace)?;
        changes
            .into_iter()
            .map(|c| {
                let unified = ws
                    .unified_diff(&from, &to, &c.path)
                    .map_err(ApiError::workspace)?;
                Ok(DiffFile { change: c, unified })
            })
            .collect()
    })
    .await?;
    Ok(Json(files))
}

/// `GET /v1/sessions/{id}/snapshots/{snap}/tree`: the files of a snapshot.
pub async fn tree(
    State(state): State<Shared>,
    UrlPath((id, snap)): UrlPath<(String, String)>,
) -> Result<Json<Vec<cairn_workspace::TreeEntry>>, ApiError> {
    let id = session_id(&state, &id)?;
    let snap = snapshot(&snap)?;
    let store = state.store.clone();
    let tree = blocking(move || {
        cairn_workspace::Snapshots::of(&store, &id)
            .tree(&snap)
            .map_err(ApiError::workspace)
    })
    .await?;
    Ok(Json(tree))
}

/// `GET /v1/sessions/{id}/snapshots/{snap}/file` query.
#[derive(Debug, Deserialize)]
pub struct FileQuery {
    /// The file's path in the snapshot.
    pub path: String,
}

/// `GET /v1/sessions/{id}/snapshots/{snap}/file?path=P`: one file as the
/// snapshot holds it (its text, or that it is binary or too large).
pub async fn file(
    State(state): State<Shared>,
    UrlPath((id, snap)): UrlPath<(String, String)>,
    Query(q): Query<FileQuery>,
) -> Result<Json<cairn_workspace::FileAt>, ApiError> {
    let id = session_id(&state, &id)?;
    let snap = snapshot(&snap)?;
    let store = state.store.clone();
    let path = q.path;
    let shown = blocking(move || {
        cairn_workspace::Snapshots::of(&store, &id)
            .file_at(&snap, &path)
            .map_err(ApiError::workspace)?
            .ok_or_else(|| ApiError::not_found(format!("snapshot {snap} holds no file {path}")))
    })
    .await?;
    Ok(Json(shown))
}
