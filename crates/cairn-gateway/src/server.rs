//! The gateway as an HTTP server (DESIGN §7): the routes, who may call, and
//! where each request goes.
//!
//! Rules, in order, for every request:
//! 1. **Who** ([`cairn_store::access`], the rule `cairn serve` keeps too).
//!    With a token, a request must carry it (`x-cairn-token`, or as the
//!    client's key: `Authorization: Bearer TOKEN` or `x-api-key: TOKEN`,
//!    which is then replaced by the gateway's own key for the upstream; the
//!    token itself never goes upstream); an empty token is refused at start.
//!    Without one, the gateway listens on loopback only and refuses a `Host`
//!    that is not exactly `localhost` or a loopback IP literal (a web page
//!    cannot rebind a name to it); the guest's name for the host
//!    (`10.0.2.2`) only in a gateway started for a VM session. Another
//!    site's page is refused either way (a foreign `Origin`, or
//!    `Sec-Fetch-Site` other than `same-origin`/`none`): SDKs send neither.
//!    Then the path: one another server could read as a different one
//!    (dot or empty segments, escaped separators, a recorded route in
//!    disguise) is refused with 400 before routing (see `path`).
//! 2. **Probes.** `HEAD /` and `GET /` answer 200; a WebSocket upgrade on
//!    `/v1/responses` (Codex tries one first) answers 426, so the client
//!    falls back to POST.
//! 3. **Recorded calls.** `POST /v1/chat/completions`, `/v1/responses` and
//!    `/v1/messages` (any query) are journaled and kept (see `purchase`).
//! 4. **Everything else under `/v1`** is passed through to the upstream
//!    unrecorded: Anthropic's when the path is `/v1/messages…` or the request
//!    carries `anthropic-version` or `x-api-key`, else OpenAI's. Under
//!    `--offline` nothing goes upstream: these answer 503.
//! 5. Anything else is 404.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::extract::Request;
use axum::response::{IntoResponse, Response};
use cairn_store::Store;
use futures_util::StreamExt;
use http::{HeaderMap, HeaderName, HeaderValue, Method, StatusCode};

use crate::filing::{Filing, Sessions};
use crate::forms::Api;
use crate::inflight::{InFlight, Running};
use crate::replay::ReplayPolicy;
use cairn_calls::{Pricing, ResponseStore};

use crate::GatewayError;

/// The largest request body accepted by default: 32 MiB.
pub const DEFAULT_MAX_BODY: usize = 32 << 20;
/// How many client sessions are held open by default.
pub const DEFAULT_MAX_OPEN_SESSIONS: usize = 64;
/// The largest upstream response kept by default: 128 MiB.
pub const DEFAULT_MAX_RESPONSE: usize = 128 << 20;
/// The largest server-sent event of a streamed response by default: 32 MiB.
pub const DEFAULT_MAX_EVENT: usize = 32 << 20;

/// How a gateway runs.
#[derive(Clone, Debug)]
pub struct GatewayConfig {
    /// Where to listen. Default `127.0.0.1:0` (an ephemeral loopback port).
    pub listen: SocketAddr,
    /// Required of every client when set; needed for a non-loopback address.
    pub token: Option<String>,
    /// Whether the name a qemu guest reaches the host's loopback at
    /// ([`cairn_store::access::GUEST_HOST`]) is a loopback name here: set
    /// only for a gateway started for a VM session. Default no.
    pub admit_guest_host: bool,
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
    /// An upstream response is held in memory until it is durable: one
    /// larger than this is not read further, not kept, and journaled as a
    /// failed call. Default [`DEFAULT_MAX_RESPONSE`].
    pub max_response: usize,
    /// A streamed response's event (its unterminated line and `data`) larger
    /// than this stops the stream the same way. Default [`DEFAULT_MAX_EVENT`].
    pub max_event: usize,
    /// At most this many of the sessions the gateway makes for client
    /// sessions are held open (two descriptors each); the least recently
    /// used idle one is ended and closed past it, and continued when its
    /// client calls again. Default [`DEFAULT_MAX_OPEN_SESSIONS`].
    pub max_open_sessions: usize,
    /// A client must send a request's head within this, counted from when
    /// its connection is accepted or, on a kept-alive connection, from the
    /// previous response;
    /// else the connection is closed. Default 30 s.
    pub header_timeout: Duration,
    /// A client must send a request's body within this of its head; else
    /// it gets 408 and the connection is closed. Default 60 s.
    pub body_timeout: Duration,
    /// At most this many client connections are open at once; the next
    /// waits to be accepted until one closes. Default
    /// [`DEFAULT_MAX_CONNECTIONS`](crate::DEFAULT_MAX_CONNECTIONS).
    pub max_connections: usize,
    /// Test builds only: stop for ever after a response is durable, before
    /// its final event is released (`CAIRN_FAULT=stall-before-final-event`).
    pub stall_before_final: bool,
}

impl Default for GatewayConfig {
    fn default() -> Self {
        GatewayConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            token: None,
            admit_guest_host: false,
            openai_upstream: "https://api.openai.com/v1".into(),
            anthropic_upstream: "https://api.anthropic.com".into(),
            openai_key: None,
            anthropic_key: None,
            replay: ReplayPolicy::default(),
            max_body: DEFAULT_MAX_BODY,
            max_response: DEFAULT_MAX_RESPONSE,
            max_event: DEFAULT_MAX_EVENT,
            max_open_sessions: DEFAULT_MAX_OPEN_SESSIONS,
            header_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(60),
            max_connections: crate::DEFAULT_MAX_CONNECTIONS,
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

/// A gateway bound to its address, not yet serving (it serves in
/// `crate::serve`).
pub struct Gateway {
    pub(crate) inner: Arc<Inner>,
    pub(crate) listener: tokio::net::TcpListener,
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
        use cairn_store::access;
        if let Err(refused) = access::may_listen(config.listen, config.token.as_deref()) {
            let reason = match refused {
                access::ListenRefused::EmptyToken => "--token is empty (or CAIRN_GATEWAY_TOKEN is set to nothing): it would admit anyone who sends an empty one; give a token that is hard to guess, e.g. --token \"$(openssl rand -hex 16)\"".into(),
                access::ListenRefused::NeedsToken => format!(
                    "--listen {} is not a loopback address: anyone who can reach it could spend your keys; give --token TOKEN (clients then send it as `x-cairn-token`), or listen on 127.0.0.1",
                    config.listen
                ),
            };
            return Err(GatewayError::Config { reason });
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
            (OPENAI_FLAG, &config.openai_upstream),
            (ANTHROPIC_FLAG, &config.anthropic_upstream),
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
        // One response store for the requests and the committer: its clones
        // share one index of the response log.
        let responses = ResponseStore::new(store);
        Ok(Gateway {
            inner: Arc::new(Inner {
                committer: crate::commit::Committer::start(responses.clone())?,
                responses,
                sessions: Sessions::new(store, filing, config.max_open_sessions),
                config,
                pricing,
                client,
                inflight: InFlight::default(),
                running: Arc::default(),
                local,
            }),
            listener,
        })
    }

    /// Where it listens.
    pub fn local_addr(&self) -> SocketAddr {
        self.inner.local
    }
}

/// An upstream must be a base URL without a secret in it (the one rule of
/// [`cairn_model::parse_base_url`]: it would reach the journal's errors, a
/// client's 502 and the log), and must not point back at the gateway, which
/// would call itself for ever.
fn check_upstream(flag: &str, url: &str, local: SocketAddr) -> Result<(), GatewayError> {
    let parsed = upstream_url(flag, url)?;
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

/// The upstream URL `url`, given as `flag`, parsed and checked; the error
/// never repeats credentials written into it.
fn upstream_url(flag: &str, url: &str) -> Result<reqwest::Url, GatewayError> {
    cairn_model::parse_base_url(url).map_err(|e| GatewayError::Config {
        reason: format!("{flag}: {e}"),
    })
}

impl GatewayConfig {
    /// Checks the upstream URLs without binding anything (what
    /// [`Gateway::bind`] checks of them, less the loop back to itself), so
    /// a caller can refuse a bad one before it starts work.
    ///
    /// # Errors
    /// [`GatewayError::Config`] for an upstream that is not an http(s) URL
    /// or carries credentials, a query or a fragment.
    pub fn check_upstreams(&self) -> Result<(), GatewayError> {
        upstream_url(OPENAI_FLAG, &self.openai_upstream)?;
        upstream_url(ANTHROPIC_FLAG, &self.anthropic_upstream)?;
        Ok(())
    }
}

const OPENAI_FLAG: &str = "the OpenAI upstream (--openai-upstream, else $OPENAI_BASE_URL)";
const ANTHROPIC_FLAG: &str =
    "the Anthropic upstream (--anthropic-upstream, else $ANTHROPIC_BASE_URL)";

/// One request, by the rules of the module doc.
pub(crate) async fn handle(g: Arc<Inner>, req: Request) -> Response {
    // A recorded route buys and journals a call: it takes JSON only, which
    // no page's form can send without the preflight this server never
    // grants. Other routes pass through as they are (an SDK's file upload
    // is multipart).
    let recorded = req.method() == Method::POST && Api::of_path(req.uri().path()).is_some();
    if let Some(refused) = admit(&g, req.method(), req.headers(), recorded) {
        return refused;
    }
    let path = req.uri().path().to_owned();
    if let Some(why) = crate::path::refusal(&path) {
        return error(
            StatusCode::BAD_REQUEST,
            "cairn_bad_path",
            &format!(
                "cairn's gateway refuses this request path: {why}; send the route's plain path (e.g. /v1/chat/completions)"
            ),
        );
    }
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

/// Rule 1 of the module doc ([`cairn_store::access::admit`]): `None` when
/// the request may go on.
fn admit(g: &Inner, method: &Method, headers: &HeaderMap, json_only: bool) -> Option<Response> {
    use cairn_store::access;
    let policy = access::Policy {
        api_key: true,
        guest_host: g.config.admit_guest_host,
        json_only,
        ..access::Policy::new("gateway", g.config.token.as_deref())
    };
    access::Request::read(method.as_str(), |name| {
        headers.get_all(name).iter().map(|v| v.as_bytes())
    })
    .and_then(|req| access::admit(&policy, &req))
    .err()
    .map(|d| {
        let status = StatusCode::from_u16(d.status).unwrap_or(StatusCode::FORBIDDEN);
        error(status, d.code, &d.message)
    })
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
/// token used as the client's key (`Authorization: Bearer` or
/// `x-api-key`): the token never goes upstream.
pub(crate) fn upstream_headers(g: &Inner, up: &Upstream, from: &HeaderMap) -> HeaderMap {
    use cairn_store::access::{bearer, same_secret};
    let mut out = HeaderMap::new();
    let is_token = |given: Option<&str>| {
        g.config
            .token
            .as_deref()
            .zip(given)
            .is_some_and(|(t, given)| same_secret(t, given))
    };
    let bearer_is_token = is_token(header(from, "authorization").as_deref().and_then(bearer));
    let api_key_is_token = is_token(header(from, "x-api-key").as_deref());
    let token_as_key = bearer_is_token || api_key_is_token;
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
        if hop
            || (bearer_is_token && n == "authorization")
            || (api_key_is_token && n == "x-api-key")
        {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    if token_as_key {
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
    if g.config.replay.offline {
        return error(
            StatusCode::SERVICE_UNAVAILABLE,
            "cairn_offline",
            &format!(
                "the gateway is offline and {} is not a recorded route: under --offline nothing goes upstream",
                req.uri().path()
            ),
        );
    }
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
        Err(e) => unreachable_upstream(&up, e),
    }
}

/// A request's head, its whole body (refused with 413 over the limit, from
/// its declared length before reading when it has one; with 408 when it
/// does not arrive within the body timeout) and its path with query.
pub(crate) async fn read_request(
    g: &Inner,
    req: Request,
) -> Result<(http::request::Parts, axum::body::Bytes, String), Response> {
    let (parts, body) = req.into_parts();
    let declared = header(&parts.headers, "content-length").and_then(|l| l.parse::<usize>().ok());
    if declared.is_some_and(|l| l > g.config.max_body) {
        return Err(too_large(g.config.max_body));
    }
    let read = axum::body::to_bytes(body, g.config.max_body);
    let body = match tokio::time::timeout(g.config.body_timeout, read).await {
        Ok(read) => read.map_err(|_| too_large(g.config.max_body))?,
        Err(_) => {
            let mut r = error(
                StatusCode::REQUEST_TIMEOUT,
                "request_timeout",
                &format!(
                    "the request body did not arrive within {} s; send it whole, or raise the gateway's --body-timeout",
                    g.config.body_timeout.as_secs_f64()
                ),
            );
            // The rest of the body may still come: the connection cannot
            // carry another request.
            r.headers_mut()
                .insert(http::header::CONNECTION, HeaderValue::from_static("close"));
            return Err(r);
        }
    };
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

pub(crate) fn unreachable_upstream(up: &Upstream, e: reqwest::Error) -> Response {
    // Without the URL: it holds the client's query string, and the reply
    // may be logged or stored by whoever reads it.
    let e = e.without_url();
    error(
        StatusCode::BAD_GATEWAY,
        "upstream_unreachable",
        &format!(
            "cairn's gateway could not reach the upstream {} ({e}); check the upstream URL and that it is up",
            up.shown
        ),
    )
}
