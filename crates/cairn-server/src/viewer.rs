//! The web viewer (DESIGN §8): one page at `/` and at every session's
//! address `/s/ID` (its script reads the address), built into the binary;
//! nothing is fetched from anywhere but this server. With a token, a browser
//! without the session cookie gets the login page instead.
//!
//! Invariant: the pages run no inline script (the policy allows scripts
//! from this server only: `/viewer.js`, `/login.js`). Model and tool text
//! is inserted as text; the one exception is the HTML the server renders
//! from Markdown and cleans (`crate::markdown`), so even a gap in that
//! cleaning could not run code.

use axum::http::{header, StatusCode};
use axum::response::IntoResponse;

/// The page.
const INDEX: &str = include_str!("viewer/index.html");

/// The page's script.
const SCRIPT: &str = include_str!("viewer/viewer.js");

/// The login page.
const LOGIN: &str = include_str!("viewer/login.html");

/// The login page's script.
const LOGIN_SCRIPT: &str = include_str!("viewer/login.js");

/// The login page's script's path: served without the token, as the login
/// page is.
pub const LOGIN_SCRIPT_PATH: &str = "/login.js";

/// Only this server's own scripts, the pages' own style; never in a frame;
/// forms go nowhere but here.
const POLICY: &str = "default-src 'self'; script-src 'self'; style-src 'unsafe-inline'; img-src 'self'; connect-src 'self'; frame-ancestors 'none'; form-action 'self'; base-uri 'none'; object-src 'none'";

/// Whether `path` is an address of the page (`/`, `/s/ID`): without the
/// token, these get the login page.
pub fn is_page(path: &str) -> bool {
    path == "/"
        || path
            .strip_prefix("/s/")
            .is_some_and(|id| !id.is_empty() && !id.contains('/'))
}

/// `GET /` and `GET /s/{id}`.
pub async fn index() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, POLICY),
        ],
        INDEX,
    )
}

/// `GET /viewer.js`.
pub async fn script() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, POLICY),
        ],
        SCRIPT,
    )
}

/// `GET /login.js`.
pub async fn login_script() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CONTENT_SECURITY_POLICY, POLICY),
        ],
        LOGIN_SCRIPT,
    )
}

/// A page without the token: 401 and a form that posts it to `/v1/login`
/// as JSON.
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pages_addresses_are_the_root_and_one_session_each() {
        for (path, page) in [
            ("/", true),
            ("/s/abc", true),
            ("/s/", false),
            ("/s/a/b", false),
            ("/v1/sessions", false),
            ("/viewer.js", false),
            ("//s/a", false),
        ] {
            assert_eq!(is_page(path), page, "{path}");
        }
    }

    #[test]
    fn the_pages_hold_no_inline_script() {
        for page in [INDEX, LOGIN] {
            let lower = page.to_ascii_lowercase();
            let mut rest = lower.as_str();
            while let Some(at) = rest.find("<script") {
                let tag_end = rest[at..].find('>').unwrap() + at;
                assert!(
                    rest[at..tag_end].contains(" src=\"/"),
                    "{}",
                    &rest[at..tag_end]
                );
                rest = &rest[tag_end..];
                assert!(
                    rest.starts_with("></script>"),
                    "a script with a src has no body"
                );
            }
            assert!(!lower.contains(" onclick=") && !lower.contains(" onload="));
        }
        assert!(!POLICY.contains("script-src 'self' 'unsafe-inline'"));
        assert!(POLICY.contains("script-src 'self';"));
    }
}
