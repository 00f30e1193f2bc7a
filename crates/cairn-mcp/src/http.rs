//! `cairn mcp --listen ADDR`: MCP over streamable HTTP (the SDK's
//! transport, at `/mcp`), kept by the rule `cairn serve` and the gateway
//! keep ([`cairn_store::access`]).
//!
//! # Invariants
//! - Without a token it listens on loopback only, and answers only a
//!   `Host` that is `localhost` or a loopback IP literal; a token, when
//!   given, is not empty, and every request carries it (compared in
//!   constant time by the rule).
//! - A request carrying another site's `Origin` (or `Sec-Fetch-Site`) is
//!   refused, and a `POST` must be `application/json`: a web page can
//!   neither read from nor drive the server. (`DELETE`, which ends an MCP
//!   session and carries no body, needs no type: a page cannot send it
//!   without asking first, which this server does not answer.)
//! - The rule is applied here, once, before the SDK's transport sees the
//!   request; the transport's own host list is off, so there is one rule.
//! - A request body is bounded ([`MAX_BODY`]), as the SDK bounds it too.
//! - So are the connections open at once and how long a request's head and
//!   body may take to arrive ([`HttpConfig::bounds`]), by the connection
//!   loop `cairn serve` uses too ([`cairn_gateway::serve_router`]).

use std::net::SocketAddr;
use std::sync::Arc;

use axum::extract::{Request, State};
use axum::http::{HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use cairn_store::access::{self, Policy};
use cairn_store::Store;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use crate::{CairnMcp, McpError};

/// The largest request body taken.
pub const MAX_BODY: usize = 4 << 20;

/// Where and how `cairn mcp` listens on HTTP.
#[derive(Clone, Debug)]
pub struct HttpConfig {
    /// The address (loopback unless there is a token).
    pub listen: SocketAddr,
    /// The token every request must carry.
    pub token: Option<String>,
    /// Connections open at once and the request timeouts.
    pub bounds: cairn_gateway::ListenBounds,
}

/// Binds `config.listen` and returns the address bound and the server,
/// which runs until `stop` resolves.
///
/// # Errors
/// An empty token, a non-loopback address without a token, the bind.
pub async fn bind(
    store: Store,
    config: HttpConfig,
    stop: impl std::future::Future<Output = ()> + Send + 'static,
) -> Result<
    (
        SocketAddr,
        impl std::future::Future<Output = Result<(), McpError>>,
    ),
    McpError,
> {
    access::may_listen(config.listen, config.token.as_deref()).map_err(|r| {
        McpError::Usage(match r {
            access::ListenRefused::EmptyToken => "the token is empty (--token, or CAIRN_MCP_TOKEN set to nothing): it would admit anyone who sends an empty one; give a token that is hard to guess, or leave it out to serve loopback only".into(),
            access::ListenRefused::NeedsToken => format!(
                "--listen {} is not a loopback address: serving it needs --token (or CAIRN_MCP_TOKEN), which every client must then send, or listen on 127.0.0.1",
                config.listen
            ),
        })
    })?;
    let listener = tokio::net::TcpListener::bind(config.listen)
        .await
        .map_err(|e| McpError::Usage(format!("cannot listen on {}: {e}", config.listen)))?;
    let addr = listener
        .local_addr()
        .map_err(|e| McpError::Failed(e.to_string()))?;
    let cancel = tokio_util::sync::CancellationToken::new();
    // Stateless: each request is answered on its own, with plain JSON, and
    // nothing is kept between requests, so no client can make the server
    // hold sessions without bound (the tools need no server-sent events).
    let mut transport = StreamableHttpServerConfig::default()
        .disable_allowed_hosts()
        .with_cancellation_token(cancel.child_token());
    transport.legacy_session_mode = false;
    transport.json_response = true;
    transport.max_request_body_bytes = MAX_BODY;
    let service = StreamableHttpService::new(
        move || Ok(CairnMcp::new(store.clone())),
        Arc::new(LocalSessionManager::default()),
        transport,
    );
    let token: Arc<Option<String>> = Arc::new(config.token);
    let router = axum::Router::new()
        .nest_service("/mcp", service)
        .layer(axum::middleware::from_fn_with_state(token, admit))
        .layer(axum::extract::DefaultBodyLimit::max(MAX_BODY));
    let bounds = config.bounds;
    let serve = async move {
        let stop = async move {
            stop.await;
            cancel.cancel();
        };
        cairn_gateway::serve_router(listener, router, bounds, stop).await;
        Ok(())
    };
    Ok((addr, serve))
}

/// The access rule, before any route.
async fn admit(State(token): State<Arc<Option<String>>>, req: Request, next: Next) -> Response {
    let method = req.method().as_str().to_owned();
    let verdict = {
        let headers = req.headers();
        access::Request::read(&method, |name| {
            headers
                .get_all(name)
                .iter()
                .map(HeaderValue::as_bytes)
                .collect::<Vec<_>>()
        })
        .and_then(|asked| {
            let mut policy = Policy::new("MCP server", token.as_deref());
            policy.json_only = method != "DELETE";
            access::admit(&policy, &asked)
        })
    };
    match verdict {
        Ok(_) => next.run(req).await,
        Err(denied) => {
            let status = StatusCode::from_u16(denied.status).unwrap_or(StatusCode::FORBIDDEN);
            let body = serde_json::json!({
                "error": {"code": denied.code, "message": denied.message}
            });
            let json = [(
                axum::http::header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )];
            (status, json, body.to_string()).into_response()
        }
    }
}
