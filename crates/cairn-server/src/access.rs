//! Who may call the server, as HTTP: the adapter from a request's headers
//! to the one rule ([`cairn_store::access`]), a browser's login, and the
//! headers that keep every response out of another site's page.
//!
//! Invariants:
//! - every request passes [`admit`] before any route sees it: the loopback
//!   `Host` rule without a token, another origin refused, JSON only for a
//!   method that changes something, and the token with one;
//! - the session cookie's value is a secret made at start
//!   ([`Login::new`]), never the token; it is `HttpOnly; SameSite=Strict`,
//!   and named after the server's port, so two servers on one host (which
//!   share cookies) never take each other's;
//! - a token given in the URL (`GET /?token=T`) is exchanged for the
//!   cookie by a 303 to the same URL without it, so it stays in no address
//!   bar or history entry; a wrong one is 401 like a missing one;
//! - without credentials, `GET /` is the login page (401), and `POST
//!   /v1/login` is the one route that checks the token itself;
//! - every response forbids framing (`frame-ancestors 'none'`,
//!   `X-Frame-Options: DENY`) and reading from another origin
//!   (`Cross-Origin-Resource-Policy: same-origin`).

use axum::extract::{Query, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use cairn_store::access::{self, Denied, Policy, SessionCookie};
use serde::Deserialize;

use crate::error::{ApiError, Class};
use crate::http::Shared;

/// The login of a server with a token: the cookie's name and the secret
/// its value must be.
pub struct Login {
    cookie: String,
    secret: String,
}

impl Login {
    /// A new login for the server on `port`: 32 random bytes, in hex.
    ///
    /// # Errors
    /// The system has no randomness to give.
    pub fn new(port: u16) -> std::io::Result<Login> {
        let mut bytes = [0u8; 32];
        getrandom::fill(&mut bytes)
            .map_err(|e| std::io::Error::other(format!("no random bytes for the login: {e}")))?;
        let secret = bytes.iter().map(|b| format!("{b:02x}")).collect();
        Ok(Login {
            cookie: format!("cairn_session_{port}"),
            secret,
        })
    }

    /// The `Set-Cookie` value that logs a browser in.
    fn set_cookie(&self) -> HeaderValue {
        let v = format!(
            "{}={}; HttpOnly; SameSite=Strict; Path=/",
            self.cookie, self.secret
        );
        HeaderValue::from_str(&v).unwrap_or_else(|_| HeaderValue::from_static(""))
    }
}

/// The rule's policy for this server.
fn policy(state: &Shared) -> Policy<'_> {
    Policy {
        session: state.login.as_ref().map(|l| SessionCookie {
            name: &l.cookie,
            secret: &l.secret,
        }),
        json_only: true,
        ..Policy::new("server", state.token.as_deref())
    }
}

/// The rule's answer for `req`.
fn verdict(state: &Shared, req: &Request) -> Result<access::Carrier, Denied> {
    let headers = req.headers();
    let asked = access::Request::read(req.method().as_str(), |name| {
        headers.get_all(name).iter().map(|v| v.as_bytes())
    })?;
    access::admit(&policy(state), &asked)
}

fn refused(d: Denied) -> Response {
    // A malformed request is bad input; the rest is a refusal on purpose.
    let class = match d.status {
        400 | 415 => Class::Usage,
        _ => Class::Refused,
    };
    ApiError {
        status: StatusCode::from_u16(d.status).unwrap_or(StatusCode::FORBIDDEN),
        code: d.code,
        class,
        message: d.message,
    }
    .into_response()
}

/// The middleware every request passes (the invariants of the module doc).
pub async fn admit(State(state): State<Shared>, req: Request, next: Next) -> Response {
    let missing = match verdict(&state, &req) {
        Ok(_) => None,
        Err(d) if d.wants_token() => Some(d),
        Err(d) => return refused(d),
    };
    if req.method() == Method::GET {
        if let (Some(token), Some(login)) = (state.token.as_deref(), state.login.as_ref()) {
            if let Some(given) = token_in_url(&req) {
                if access::same_secret(token, &given) {
                    return exchanged(&req, login);
                }
                let wrong = Denied {
                    status: 401,
                    code: Denied::TOKEN,
                    message: "the token in the URL is not this server's".into(),
                };
                return unauthorized(&req, wrong);
            }
        }
    }
    match missing {
        None => next.run(req).await,
        Some(_) if req.method() == Method::POST && req.uri().path() == "/v1/login" => {
            next.run(req).await
        }
        // The login page's script: public, holds nothing of the store.
        Some(_)
            if req.method() == Method::GET
                && req.uri().path() == crate::viewer::LOGIN_SCRIPT_PATH =>
        {
            next.run(req).await
        }
        Some(d) => unauthorized(&req, d),
    }
}

/// 401: the login page for the page's addresses (`GET /`, `/s/ID`), the
/// API's error elsewhere.
fn unauthorized(req: &Request, d: Denied) -> Response {
    if req.method() == Method::GET && crate::viewer::is_page(req.uri().path()) {
        return crate::viewer::login().into_response();
    }
    refused(d)
}

/// The `token` of a request's query, if it has one.
fn token_in_url(req: &Request) -> Option<String> {
    req.uri().query()?;
    let Query(pairs) = Query::<Vec<(String, String)>>::try_from_uri(req.uri()).ok()?;
    pairs
        .into_iter()
        .find(|(k, _)| k == "token")
        .map(|(_, v)| v)
}

/// 303 to the same URL without its token, logging the browser in.
fn exchanged(req: &Request, login: &Login) -> Response {
    let rest: Vec<&str> = req
        .uri()
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty() && *p != "token" && !p.starts_with("token="))
        .collect();
    // A path of two slashes would be read as another host's address.
    let path = req.uri().path();
    let mut to = if path.starts_with("//") || path.contains('\\') {
        "/".to_owned()
    } else {
        path.to_owned()
    };
    if !rest.is_empty() {
        to.push('?');
        to.push_str(&rest.join("&"));
    }
    let location = HeaderValue::from_str(&to).unwrap_or_else(|_| HeaderValue::from_static("/"));
    (
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, location),
            (header::SET_COOKIE, login.set_cookie()),
        ],
    )
        .into_response()
}

/// `POST /v1/login` body.
#[derive(Debug, Deserialize)]
pub struct LoginBody {
    /// The server's token.
    pub token: String,
}

/// `POST /v1/login`: the token, once, for the session cookie (204); 401
/// when it is wrong. A server without a token has nothing to log in to:
/// 204 without a cookie.
pub async fn login(State(state): State<Shared>, Json(body): Json<LoginBody>) -> Response {
    match (state.token.as_deref(), state.login.as_ref()) {
        (Some(token), Some(login)) if access::same_secret(token, &body.token) => (
            StatusCode::NO_CONTENT,
            [(header::SET_COOKIE, login.set_cookie())],
        )
            .into_response(),
        (Some(_), _) => refused(Denied {
            status: 401,
            code: Denied::TOKEN,
            message: "that is not this server's token".into(),
        }),
        (None, _) => StatusCode::NO_CONTENT.into_response(),
    }
}

/// The headers every response carries; a page's own fuller CSP is kept.
pub async fn guard_headers(req: Request, next: Next) -> Response {
    let mut resp = next.run(req).await;
    let h = resp.headers_mut();
    h.entry(header::CONTENT_SECURITY_POLICY)
        .or_insert(HeaderValue::from_static("frame-ancestors 'none'"));
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        "cross-origin-resource-policy",
        HeaderValue::from_static("same-origin"),
    );
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    resp
}
