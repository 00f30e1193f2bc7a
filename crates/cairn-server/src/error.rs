//! Errors as the API answers them: JSON with a stable `code` and the
//! exit-code class of DESIGN §10 (usage → 400, or 404 for what does not
//! exist; refused → 409; integrity → 500 with code `integrity`; failure →
//! 500).

use axum::response::{IntoResponse, Response};
use http::StatusCode;
use serde::Serialize;

/// The exit-code class of §10.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Class {
    /// Bad input (exit 2).
    Usage,
    /// Refused on purpose (exit 4): a writer holds the session, the guard.
    Refused,
    /// Something does not verify (exit 3).
    Integrity,
    /// A failure while working (exit 1).
    Failure,
}

/// An API error.
#[derive(Clone, Debug, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// A stable code (`not_found`, `bad_request`, `cursor_ahead`,
    /// `cursor_forgotten`, `busy`, `integrity`, `refused`, `failed`,
    /// `cairn_token`, `cairn_host`).
    pub code: &'static str,
    /// The class.
    pub class: Class,
    /// What went wrong and what to do.
    pub message: String,
}

impl ApiError {
    /// 400.
    pub fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::BAD_REQUEST,
            code: "bad_request",
            class: Class::Usage,
            message: message.into(),
        }
    }

    /// 404.
    pub fn not_found(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::NOT_FOUND,
            code: "not_found",
            class: Class::Usage,
            message: message.into(),
        }
    }

    /// A session error, by its class.
    pub fn session(e: &cairn_sessions::SessionError) -> ApiError {
        use cairn_journal::JournalError;
        use cairn_sessions::SessionError as S;
        let message = e.to_string();
        let (status, code, class) = match e {
            S::Journal(JournalError::Locked { .. })
            | S::PinnedByForks { .. }
            | S::NamedByCheckpoints { .. } => (StatusCode::CONFLICT, "refused", Class::Refused),
            S::Journal(JournalError::Damaged { .. }) | S::ForkPrefix { .. } => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "integrity",
                Class::Integrity,
            ),
            S::Journal(JournalError::NotFound { .. }) => {
                (StatusCode::NOT_FOUND, "not_found", Class::Usage)
            }
            S::BadForkPoint { .. } => (StatusCode::BAD_REQUEST, "bad_request", Class::Usage),
            S::Workspace(w) if w.is_integrity() => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "integrity",
                Class::Integrity,
            ),
            S::Workspace(w) if w.is_usage() => {
                (StatusCode::BAD_REQUEST, "bad_request", Class::Usage)
            }
            S::Workspace(w) if w.is_refusal() => (StatusCode::CONFLICT, "refused", Class::Refused),
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "failed", Class::Failure),
        };
        ApiError {
            status,
            code,
            class,
            message,
        }
    }

    /// An error of the session service, by its kind.
    pub fn agent(e: &cairn_agent::AgentError) -> ApiError {
        use cairn_store::ErrorKind;
        let (status, code, class) = match e.kind() {
            ErrorKind::Usage => (StatusCode::BAD_REQUEST, "bad_request", Class::Usage),
            ErrorKind::Refused => (StatusCode::CONFLICT, "refused", Class::Refused),
            ErrorKind::Integrity => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "integrity",
                Class::Integrity,
            ),
            _ => (StatusCode::INTERNAL_SERVER_ERROR, "failed", Class::Failure),
        };
        ApiError {
            status,
            code,
            class,
            message: cairn_store::text::with_causes(e),
        }
    }

    /// A journal error, by its class.
    pub fn journal(e: cairn_journal::JournalError) -> ApiError {
        ApiError::session(&cairn_sessions::SessionError::Journal(e))
    }

    /// A workspace error, by its class.
    pub fn workspace(e: cairn_workspace::WorkspaceError) -> ApiError {
        ApiError::session(&cairn_sessions::SessionError::Workspace(e))
    }

    /// A refusal (409): the request is sound, but the session's state does
    /// not allow it now.
    pub fn refused(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::CONFLICT,
            code: "refused",
            class: Class::Refused,
            message: message.into(),
        }
    }

    /// A failure while working.
    pub fn failed(message: impl Into<String>) -> ApiError {
        ApiError {
            status: StatusCode::INTERNAL_SERVER_ERROR,
            code: "failed",
            class: Class::Failure,
            message: message.into(),
        }
    }
}

#[derive(Serialize)]
struct Body<'a> {
    error: Inner<'a>,
}

#[derive(Serialize)]
struct Inner<'a> {
    code: &'a str,
    class: Class,
    message: &'a str,
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let body = Body {
            error: Inner {
                code: self.code,
                class: self.class,
                message: &self.message,
            },
        };
        (self.status, axum::Json(body)).into_response()
    }
}
