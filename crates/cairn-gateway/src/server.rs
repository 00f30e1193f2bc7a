//! The gateway as an HTTP server (DESIGN §7): the routes, who may call, and
//! where each request goes.
//!
//! Rules, in order, for every request:
//! 1. **Who.** With a token, a request must carry it (`x-cairn-token`, or
//!    `Authorization: Bearer TOKEN`, which is then replaced by the
//!    gateway's own key for the upstream); without one, the gateway listens
//!    on loopback only and refuses a `Host` that is not a loopback name (a
//!    web page cannot rebind a name to it).
//! 2. **Probes.** `HEAD /` and `GET /` answer 200; a WebSocket upgrade on
//!    `/v1/responses` (Codex tries one first) answers 426, so the client
//!    falls back to POST.
//! 3. **Recorded calls.** `POST /v1/chat/completions`, `/v1/responses` and
//!    `/v1/messages` (any query) are journaled and kept (see `purchase`).
//! 4. **Everything else under `/v1`** is passed through to the upstream
//!    unrecorded: Anthropic's when the path is `/v1/messages…` or the request
//!    carries `anthropic-version` or `x-api-key`, else OpenAI's.
//! 5. Anything else is 404.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use axum::Router;
use cairn_store::Store;
use futures_util::StreamExt;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};

use crate::filing::{Filing, Sessions};
use crate::forms::Api;
use crate::inflight::{InFlight, Running};
use crate::replay::ReplayPolicy;
use crate::{GatewayError, Pricing, ResponseStore};

/// The largest request body accepted by default: 32 MiB.
pub const DEFAULT_MAX_BODY: usize = 32 << 20;

/// How a gateway runs.
#[derive(Clone, Debug)]
pub struct GatewayConfig {
    /// Where to listen. Default `127.0.0.1:0` (an ephemeral loopback port).
    pub listen: SocketAddr,
    /// Required of every client when set; needed for a non-loopback address.
    pub token: Option<String>,
    /// The OpenAI-compatible upstream's base URL (with or without `/v1`).
    pub openai_upstream: String,
    /// The Anthropic upstream's base URL.
    pub anthropic_upstream: String,
    /// The key sent to the OpenAI upstream when a client authenticates with
    /// the gateway's token instead of its own key.
    pub openai_key: Option<String>,
    /// The same for Anthropic.
    pub anthropic_key: Option<String>,
    /// Which stored responses are served.
    pub replay: ReplayPolicy,
    /// Larger request bodies are refused with 413. Default [`DEFAULT_MAX_BODY`].
    pub max_body: usize,
    /// Test builds only: stop for ever after a response is durable, before
    /// its final event is released (`CAIRN_FAULT=stall-before-final-event`).
    pub stall_before_final: bool,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            token: None,
            openai_upstream: "https://api.openai.com/v1".into(),
            anthropic_upstream: "https://api.anthropic.com".into(),
            openai_key: None,
            anthropic_key: None,
            replay: ReplayPolicy::default(),
            max_body: DEFAULT_MAX_BODY,
            stall_before_final: false,
        }
    }
}

/// What every handler shares.
pub(crate) struct Inner {
    pub(crate) config: GatewayConfig,
    pub(crate) responses: ResponseStore,
    pub(crate) sessions: Sessions,
    pub(crate) pricing: Arc<dyn Pricing>,
    pub(crate) client: reqwest::Client,
    pub(crate) inflight: InFlight,
    pub(crate) running: Arc<Running>,
    pub(crate) committer: crate::commit::Committer,
    pub(crate) local: SocketAddr,
}

/// A gateway bound to its address, not yet serving.
pub struct Gateway {
    inner: Arc<Inner>,
    listener: tokio::net::TcpListener,
}

impl Gateway {
    /// Checks `config` and binds its address.
    ///
    /// # Errors
    /// [`GatewayError::Config`] for a non-loopback address without a token
    /// or an upstream that points back at the gateway; [`GatewayError::Listen`].
    pub async fn bind(
        config: GatewayConfig,
        store: &Store,
        filing: Filing,
        pricing: Arc<dyn Pricing>,
    ) -> Result<Gateway, GatewayError> {
        if !config.listen.ip().is_loopback() && config.token.is_none() {
            return Err(GatewayError::Config {
                reason: format!(
                    "--listen {} is not a loopback address: anyone who can reach it could spend your keys; give --token TOKEN (clients then send it as `x-cairn-token`), or listen on 127.0.0.1",
                    config.listen
                ),
            });
        }
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|source| GatewayError::Listen {
                addr: config.listen.to_string(),
                source,
            })?;
        let local = listener
            .local_addr()
            .map_err(|source| GatewayError::Listen {
                addr: config.listen.to_string(),
                source,
            })?;
        for (name, up) in [
            ("--openai-upstream", &config.openai_upstream),
            ("--anthropic-upstream", &config.anthropic_upstream),
        ] {
            check_upstream(name, up, local)?;
        }
        let client = reqwest::Client::builder()
            .user_agent(concat!("cairn-gateway/", env!("CARGO_PKG_VERSION")))
            .connect_timeout(Duration::from_secs(30))
            .tcp_nodelay(true)
            .read_timeout(Duration::from_secs(600))
            .build()
            .map_err(|e| GatewayError::Config {
                reason: format!("cannot build the HTTP client: {e}"),
            })?;
        Ok(Gateway {
            inner: Arc::new(Inner {
                responses: ResponseStore::new(store),
                sessions: Sessions::new(store, filing),
                config,
                pricing,
                client,
                inflight: InFlight::default(),
                running: Arc::default(),
                committer: crate::commit::Committer::start(ResponseStore::new(store))?,
                local,
            }),
            listener,
        })
    }

    /// Where it listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local
    }

    /// Serves until `shutdown` completes and every purchase still reading its
    /// upstream is kept, then ends the sessions it made (a `terminal` each).
    ///
    /// # Errors
    /// The server fails, or the sessions cannot be closed.
    pub async fn serve(
        self,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) -> Result<(), GatewayError> {
        use axum::serve::ListenerExt;
        let inner = self.inner.clone();
        let app = Router::new().fallback(handle).with_state(self.inner);
        // Events go out as they arrive: no Nagle delay on small writes.
        let listener = self.listener.tap_io(|tcp| {
            if let Err(e) = tcp.set_nodelay(true) {
                tracing::debug!("TCP_NODELAY not set on a client connection: {e}");
            }
        });
        axum::serve(listener, app)
            .with_graceful_shutdown(shutdown)
            .await
            .map_err(|source| GatewayError::Listen {
                addr: inner.local.to_string(),
                source,
            })?;
        // A purchase whose client went away is still reading its upstream:
        // what was paid for is kept before the sessions close.
        inner.running.idle().await;
        let closing = inner.clone();
        tokio::task::spawn_blocking(move || closing.sessions.close())
            .await
            .map_err(|e| GatewayError::Internal {
                reason: e.to_string(),
            })?
    }
}

/// An upstream pointing back at the gateway would call itself for ever.
fn check_upstream(flag: &str, url: &str, local: SocketAddr) -> Result<(), GatewayError> {
    let parsed = reqwest::Url::parse(url).map_err(|e| GatewayError::Config {
        reason: format!("{flag} {url:?} is not a URL ({e}); give e.g. https://api.openai.com/v1"),
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(GatewayError::Config {
            reason: format!("{flag} {url:?} is not http or https"),
        });
    }
    let port = parsed.port_or_known_default();
    let host = parsed.host_str().unwrap_or("");
    let loopback =
        matches!(host, "localhost" | "127.0.0.1" | "[::1]" | "::1") || host.starts_with("127.");
    if loopback && port == Some(local.port()) {
        return Err(GatewayError::Config {
            reason: format!(
                "{flag} {url} points back at this gateway ({local}); give the real upstream"
            ),
        });
    }
    Ok(())
}

async fn handle(State(g): State<Arc<Inner>>, req: Request) -> Response {
    if let Some(refused) = admit(&g, req.headers()) {
        return refused;
    }
    let path = req.uri().path().to_owned();
    let method = req.method().clone();
    if path == "/" && (method == Method::GET || method == Method::HEAD) {
        return (StatusCode::OK, "cairn gateway\n").into_response();
    }
    if path == "/v1/responses" && is_upgrade(req.headers()) {
        return error(
            StatusCode::UPGRADE_REQUIRED,
            "websocket_not_supported",
            "cairn's gateway speaks HTTP only: POST /v1/responses instead",
        );
    }
    if method == Method::POST {
        if let Some(api) = Api::of_path(&path) {
            return crate::purchase::recorded(g, api, req).await;
        }
    }
    if path == "/v1" || path.starts_with("/v1/") {
        return pass_through(g, req).await;
    }
    error(
        StatusCode::NOT_FOUND,
        "not_found",
        "cairn's gateway serves /v1/… only",
    )
}

/// Rule 1 of the module doc ([`crate::access::admit`]): `None` when the
/// request may go on.
fn admit(g: &Inner, headers: &HeaderMap) -> Option<Response> {
    crate::access::admit(g.config.token.as_deref(), headers, "gateway")
        .err()
        .map(|d| error(d.status, d.code, &d.message))
}

fn is_upgrade(headers: &HeaderMap) -> bool {
    header(headers, "upgrade").is_some_and(|u| u.eq_ignore_ascii_case("websocket"))
}

/// One request header as text.
pub(crate) fn header(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(|v| v.trim().to_owned())
}

/// Which upstream a request goes to (rule 4 of the module doc).
pub(crate) fn upstream_for(g: &Inner, path: &str, headers: &HeaderMap) -> Upstream {
    let anthropic = path.starts_with("/v1/messages")
        || headers.contains_key("anthropic-version")
        || headers.contains_key("x-api-key");
    if anthropic {
        Upstream {
            provider: "anthropic",
            base: base_without_v1(&g.config.anthropic_upstream),
            shown: g.config.anthropic_upstream.clone(),
        }
    } else {
        Upstream {
            provider: "openai",
            base: base_without_v1(&g.config.openai_upstream),
            shown: g.config.openai_upstream.clone(),
        }
    }
}

/// An upstream: its provider name (for pricing) and base URL, to which the
/// client's `/v1/…` path is appended.
pub(crate) struct Upstream {
    pub(crate) provider: &'static str,
    pub(crate) base: String,
    pub(crate) shown: String,
}

fn base_without_v1(url: &str) -> String {
    let t = url.trim_end_matches('/');
    t.strip_suffix("/v1").unwrap_or(t).to_owned()
}

/// The headers sent upstream: the client's, less hop-by-hop ones, the
/// gateway's token and `host`; with the gateway's own key in place of a
/// token used as the bearer.
pub(crate) fn upstream_headers(g: &Inner, up: &Upstream, from: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    let token_as_bearer = g.config.token.as_ref().is_some_and(|t| {
        header(from, "authorization").as_deref() == Some(format!("Bearer {t}").as_str())
    });
    for (name, value) in from {
        let n = name.as_str();
        let hop = matches!(
            n,
            "connection"
                | "keep-alive"
                | "proxy-connection"
                | "proxy-authorization"
                | "te"
                | "trailer"
                | "transfer-encoding"
                | "upgrade"
                | "host"
                | "content-length"
                | "accept-encoding"
                | "x-cairn-token"
        );
        if hop || (token_as_bearer && n == "authorization") {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    if token_as_bearer {
        let (name, value) = match up.provider {
            "anthropic" => ("x-api-key", g.config.anthropic_key.clone()),
            _ => (
                "authorization",
                g.config.openai_key.clone().map(|k| format!("Bearer {k}")),
            ),
        };
        if let Some(v) = value.and_then(|v| HeaderValue::from_str(&v).ok()) {
            out.insert(HeaderName::from_static(name), v);
        }
    }
    // The gateway reads the stream: it must not be compressed.
    out.insert(
        http::header::ACCEPT_ENCODING,
        HeaderValue::from_static("identity"),
    );
    out
}

/// The upstream's response headers a client gets: all but hop-by-hop ones
/// and the length (the body is re-framed).
pub(crate) fn client_headers(from: &HeaderMap) -> HeaderMap {
    let mut out = HeaderMap::new();
    for (name, value) in from {
        let drop = matches!(
            name.as_str(),
            "connection"
                | "keep-alive"
                | "transfer-encoding"
                | "content-length"
                | "content-encoding"
        );
        if !drop {
            out.append(name.clone(), value.clone());
        }
    }
    out
}

/// Rule 4: a request forwarded as it is, its response streamed back.
async fn pass_through(g: Arc<Inner>, req: Request) -> Response {
    let (parts, body, path_and_query) = match read_request(&g, req).await {
        Ok(r) => r,
        Err(refused) => return refused,
    };
    let up = upstream_for(&g, parts.uri.path(), &parts.headers);
    let url = format!("{}{path_and_query}", up.base);
    let sent = g
        .client
        .request(parts.method, &url)
        .headers(upstream_headers(&g, &up, &parts.headers))
        .body(body)
        .send()
        .await;
    match sent {
        Ok(resp) => {
            let status = resp.status();
            let headers = client_headers(resp.headers());
            let stream = resp
                .bytes_stream()
                .map(|c| c.map_err(std::io::Error::other));
            let mut out = Response::new(Body::from_stream(stream));
            *out.status_mut() = status;
            *out.headers_mut() = headers;
            out
        }
        Err(e) => unreachable_upstream(&up, &e),
    }
}

/// A request's head, its whole body (refused with 413 over the limit, from
/// its declared length before reading when it has one) and its path with
/// query.
pub(crate) async fn read_request(
    g: &Inner,
    req: Request,
) -> Result<(http::request::Parts, axum::body::Bytes, String), Response> {
    let (parts, body) = req.into_parts();
    let declared = header(&parts.headers, "content-length").and_then(|l| l.parse::<usize>().ok());
    if declared.is_some_and(|l| l > g.config.max_body) {
        return Err(too_large(g.config.max_body));
    }
    let body = axum::body::to_bytes(body, g.config.max_body)
        .await
        .map_err(|_| too_large(g.config.max_body))?;
    let path_and_query = parts
        .uri
        .path_and_query()
        .map_or("/", |p| p.as_str())
        .to_owned();
    Ok((parts, body, path_and_query))
}

/// A JSON error a client's SDK can show.
pub(crate) fn error(status: StatusCode, kind: &str, message: &str) -> Response {
    let body = serde_json::json!({"error": {"type": kind, "message": message}});
    let mut r = (status, body.to_string()).into_response();
    r.headers_mut().insert(
        http::header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    r
}

pub(crate) fn too_large(limit: usize) -> Response {
    error(
        StatusCode::PAYLOAD_TOO_LARGE,
        "request_too_large",
        &format!(
            "the request body is over the gateway's limit of {} MiB; raise it with --max-body-mb",
            limit >> 20
        ),
    )
}

pub(crate) fn unreachable_upstream(up: &Upstream, e: &reqwest::Error) -> Response {
    error(
        StatusCode::BAD_GATEWAY,
        "upstream_unreachable",
        &format!(
            "cairn's gateway could not reach the upstream {} ({e}); check the upstream URL and that it is up",
            up.shown
        ),
    )
}
