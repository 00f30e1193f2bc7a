//! The web viewer at `/` (DESIGN §8): one page, built into the binary;
//! nothing is fetched from anywhere but this server. Model and tool text is
//! inserted as text (`textContent`), never as markup. With a token, a
//! browser without the session cookie gets the login page instead.

use axum::http::{header, StatusCode};
use axum::response::IntoResponse;

/// The page.
const INDEX: &str = include_str!("viewer/index.html");

/// The login page.
const LOGIN: &str = include_str!("viewer/login.html");

/// Only the page's own inline script and style and this server; never in
/// a frame; forms go nowhere but here.
const POLICY: &str = "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'";

/// `GET /`.
pub async fn index() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, POLICY),
        ],
        INDEX,
    )
}

/// `GET /` without the token: 401 and a form that posts it to
/// `/v1/login` as JSON.
pub fn login() -> impl IntoResponse {
    (
        StatusCode::UNAUTHORIZED,
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, POLICY),
            (header::CACHE_CONTROL, "no-store"),
        ],
        LOGIN,
    )
}
