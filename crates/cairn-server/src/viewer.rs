//! The web viewer at `/` (DESIGN §8): one page, built into the binary;
//! nothing is fetched from anywhere but this server. Model and tool text is
//! inserted as text (`textContent`), never as markup.

use axum::http::header;
use axum::response::IntoResponse;

/// The page.
const INDEX: &str = include_str!("viewer/index.html");

/// `GET /`.
pub async fn index() -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            // Only this page's own inline script and this server.
            (
                header::CONTENT_SECURITY_POLICY,
                "default-src 'self'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'",
            ),
        ],
        INDEX,
    )
}
