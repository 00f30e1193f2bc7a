//! The HTTP surface of `cairn serve` (DESIGN §8): the router, who may call
//! it, and the server's shared state.
//!
//! Invariants:
//! - every route, the viewer's and the API's alike, passes the one
//!   admission rule ([`cairn_store::access`], through [`crate::access`]):
//!   the token (or the browser's session cookie) when one is set, else a
//!   loopback `Host`; never another origin's request; JSON only for what
//!   changes something;
//! - a non-loopback address is refused at start unless a token is given,
//!   and an empty token is refused;
//! - what a client can make the server hold is bounded: connections open at
//!   once, and how long a request's head and body may take to arrive
//!   ([`cairn_gateway::serve_router`], [`ServeConfig::bounds`]);
//! - the handlers read the store through the same library calls as the CLI
//!   (`cairn_sessions`, `cairn_workspace`, `cairn_checkpoint`), and the
//!   blocking ones run off the async workers.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::extract::Request;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::Router;
use cairn_store::Store;

use crate::error::ApiError;
use crate::live::Followed;

/// How the server is started.
#[derive(Clone)]
pub struct ServeConfig {
    /// The store it serves.
    pub store: Store,
    /// Where it listens.
    pub listen: SocketAddr,
    /// The token every request must carry; required off loopback.
    pub token: Option<String>,
    /// Starts and resumes runs; without one, the server only reads,
    /// forks, rewinds and checkpoints.
    pub launcher: Option<cairn_agent::Launcher>,
    /// The bounds of the live streams (subscribers, a client's time to
    /// take an event, streams kept asleep).
    pub live: crate::live::LiveLimits,
    /// Connections open at once and the request timeouts. Each live stream
    /// a client follows holds a connection for as long as it follows it.
    pub bounds: cairn_gateway::ListenBounds,
}

/// Why the server could not start.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ServeError {
    /// A non-loopback address without a token.
    #[error("--listen {0} is not a loopback address: anyone who can reach it could read and drive your sessions; give --token TOKEN (clients send it as `Authorization: Bearer TOKEN`), or listen on 127.0.0.1")]
    NeedsToken(SocketAddr),
    /// An empty token (it would admit anyone who sends an empty one).
    #[error("--token is empty (or CAIRN_SERVE_TOKEN is set to nothing): it would admit anyone who sends an empty one; give a token that is hard to guess, e.g. --token \"$(openssl rand -hex 16)\"")]
    EmptyToken,
    /// The address could not be bound.
    #[error("cannot listen on {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The server stopped with an error.
    #[error("the server stopped: {0}")]
    Io(#[from] std::io::Error),
}

/// What every handler shares.
pub struct AppState {
    /// The store.
    pub store: Store,
    /// The token, if any.
    pub token: Option<String>,
    /// A browser's login, with a token.
    pub login: Option<crate::access::Login>,
    /// The live streams of the sessions being watched (awake) or watched
    /// lately (asleep), by id.
    pub streams: Mutex<HashMap<String, Arc<Followed>>>,
    /// Starts and resumes runs.
    pub launcher: Option<cairn_agent::Launcher>,
    /// The runs this server drives.
    pub runs: crate::runs::Runs,
    /// The live streams' bounds and permits.
    pub live: crate::live::LiveState,
}

/// The shared state.
pub type Shared = Arc<AppState>;

/// The router of every route, for a server or a test.
pub fn router(state: Shared) -> Router {
    Router::new()
        .route("/", get(crate::viewer::index))
        .route("/s/{id}", get(crate::viewer::index))
        .route("/viewer.js", get(crate::viewer::script))
        .route(
            crate::viewer::LOGIN_SCRIPT_PATH,
            get(crate::viewer::login_script),
        )
        .route("/openapi.json", get(crate::openapi::document))
        .route("/v1/login", post(crate::access::login))
        .route(
            "/v1/sessions",
            get(crate::api::list).post(crate::runs::start),
        )
        .route("/v1/sessions/{id}/resume", post(crate::runs::resume))
        .route("/v1/sessions/{id}/suspend", post(crate::runs::suspend))
        .route(
            "/v1/sessions/{id}/approval",
            get(crate::approvals::pending).post(crate::approvals::answer),
        )
        .route("/v1/sessions/{id}/rewind", post(crate::api::rewind))
        .route("/v1/sessions/{id}/rewind-points", get(crate::points::list))
        .route(
            "/v1/sessions/{id}/rewind-preview",
            post(crate::points::preview),
        )
        .route(
            "/v1/sessions/{id}/rewind-point",
            post(crate::points::rewind),
        )
        .route(
            "/v1/checkpoints/{cp}/restore",
            post(crate::api::restore_checkpoint),
        )
        .route("/v1/search", get(crate::api::search))
        .route("/v1/sessions/{id}", get(crate::api::show))
        .route("/v1/sessions/{id}/records", get(crate::api::records))
        .route("/v1/sessions/{id}/events", get(crate::live::events))
        .route("/v1/sessions/{id}/fork", post(crate::api::fork))
        .route("/v1/sessions/{id}/snapshots", get(crate::files::snapshots))
        .route(
            "/v1/sessions/{id}/snapshots/{snap}/tree",
            get(crate::files::tree),
        )
        .route(
            "/v1/sessions/{id}/snapshots/{snap}/file",
            get(crate::files::file),
        )
        .route("/v1/sessions/{id}/diff", get(crate::files::diff))
        .route(
            "/v1/sessions/{id}/checkpoints",
            get(crate::api::checkpoints).post(crate::api::save_checkpoint),
        )
        .fallback(|| async { ApiError::not_found("no such route; see /openapi.json") })
        .layer(axum::middleware::from_fn(json_errors))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::access::admit,
        ))
        .layer(axum::middleware::from_fn(crate::access::guard_headers))
        .with_state(state)
}

/// Every error is the API's JSON error: the plain-text rejections of the
/// HTTP layer (a query or body that does not parse, a wrong method) are
/// rewritten with their status and words.
async fn json_errors(req: Request, next: Next) -> Response {
    let resp = next.run(req).await;
    let status = resp.status();
    let is_json = resp
        .headers()
        .get(http::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json") || v.starts_with("text/event-stream"));
    if !(status.is_client_error() || status.is_server_error()) || is_json {
        return resp;
    }
    let body = axum::body::to_bytes(resp.into_body(), 64 * 1024)
        .await
        .unwrap_or_default();
    let words = String::from_utf8_lossy(&body).trim().to_string();
    // A body that is not JSON, or JSON of the wrong shape, is bad input
    // like any other: 400, as the API documents.
    let (status, code, class) = match status {
        http::StatusCode::NOT_FOUND => (status, "not_found", crate::error::Class::Usage),
        http::StatusCode::UNPROCESSABLE_ENTITY | http::StatusCode::UNSUPPORTED_MEDIA_TYPE => (
            http::StatusCode::BAD_REQUEST,
            "bad_request",
            crate::error::Class::Usage,
        ),
        s if s.is_client_error() => (s, "bad_request", crate::error::Class::Usage),
        s => (s, "failed", crate::error::Class::Failure),
    };
    ApiError {
        status,
        code,
        class,
        message: if words.is_empty() {
            status.to_string()
        } else {
            words
        },
    }
    .into_response()
}

/// Binds `config.listen` (refusing an empty token, and a non-loopback
/// address without a token) and returns the bound address with the
/// server's future.
///
/// # Errors
/// [`ServeError::EmptyToken`], [`ServeError::NeedsToken`],
/// [`ServeError::Bind`].
pub async fn bind(
    config: ServeConfig,
) -> Result<
    (
        SocketAddr,
        impl std::future::Future<Output = Result<(), ServeError>>,
    ),
    ServeError,
> {
    cairn_store::access::may_listen(config.listen, config.token.as_deref()).map_err(
        |r| match r {
            cairn_store::access::ListenRefused::EmptyToken => ServeError::EmptyToken,
            cairn_store::access::ListenRefused::NeedsToken => ServeError::NeedsToken(config.listen),
        },
    )?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|source| ServeError::Bind {
            addr: config.listen,
            source,
        })?;
    let addr = listener.local_addr()?;
    let login = match config.token {
        Some(_) => Some(crate::access::Login::new(addr.port())?),
        None => None,
    };
    let state = Arc::new(AppState {
        store: config.store,
        token: config.token,
        login,
        streams: Mutex::new(HashMap::new()),
        launcher: config.launcher,
        runs: crate::runs::Runs::default(),
        live: crate::live::LiveState::new(config.live),
    });
    let app = router(state);
    let bounds = config.bounds;
    Ok((addr, async move {
        cairn_gateway::serve_router(listener, app, bounds, std::future::pending()).await;
        Ok(())
    }))
}
