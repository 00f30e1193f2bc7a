//! The crate's one error type.
//!
//! Policy: every message says what went wrong and what to do next. No message ever
//! contains an API key: keys are held in a redacting wrapper and the request
//! headers never reach an error. Bodies returned by a provider are quoted only as a
//! short excerpt (see [`excerpt`]).

use std::path::PathBuf;

/// Everything that can go wrong while building a provider or calling a model.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ModelError {
    /// A model spec was not `script:PATH`, `openai:MODEL`,
    /// `openai-responses:MODEL` or `anthropic:MODEL`.
    #[error(
        "invalid model spec `{spec}`: {reason}; use script:PATH, openai:MODEL, openai-responses:MODEL or anthropic:MODEL"
    )]
    InvalidSpec {
        /// The spec as given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },

    /// The environment variable holding the API key is unset or empty.
    #[error("{var} is not set: export it, or use --model script:PATH for an offline run")]
    MissingApiKey {
        /// The variable that was read, e.g. `OPENAI_API_KEY`.
        var: &'static str,
    },

    /// The API key cannot be sent in an HTTP header (it holds a newline or a
    /// control character).
    #[error("{var} holds characters that cannot be sent in an HTTP header: export it again without newlines or control characters")]
    InvalidApiKey {
        /// The variable the key came from.
        var: &'static str,
    },

    /// A base URL could not be parsed or is not http(s).
    #[error("invalid base URL `{url}`: {reason}; pass a URL such as http://localhost:11434/v1")]
    InvalidBaseUrl {
        /// The URL as given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },

    /// A server-sent event grew past the parser's limit without ending (one
    /// unterminated line, or the `data` lines of one event): the stream is
    /// malformed or hostile, and is not read further.
    #[error("a server-sent event in the model's response stream is over {limit} bytes without ending; the response was abandoned: the endpoint's stream is malformed (check the base URL points at a model API)")]
    EventTooLarge {
        /// The limit, in bytes.
        limit: usize,
    },

    /// The HTTP client could not be constructed (for example, no TLS roots).
    #[error("could not set up the HTTP client: {message}; check the system's TLS configuration")]
    HttpClient {
        /// The client library's explanation.
        message: String,
    },

    /// The script file could not be read.
    #[error("cannot read script {}: {source}; check the path given to --model script:PATH", path.display())]
    ScriptRead {
        /// The script file.
        path: PathBuf,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },

    /// The script file is not valid `{"turns": [...]}` JSON.
    #[error("script {} is malformed: {message}; expected {{\"turns\": [{{\"text\": ..., \"tool_calls\": [...], \"usage\": {{...}}}}]}}", path.display())]
    ScriptParse {
        /// The script file.
        path: PathBuf,
        /// serde's message, with line and column.
        message: String,
    },

    /// A model call asked for a turn the script does not have.
    #[error("script {} has {turns} turn(s) but turn {turn} was requested; add turns to the script or end the run sooner", path.display())]
    ScriptExhausted {
        /// The script file.
        path: PathBuf,
        /// The 1-based turn that was requested.
        turn: u64,
        /// How many turns the script holds.
        turns: usize,
    },

    /// The request itself is unusable (for example, turn 0).
    #[error("invalid model request: {reason}")]
    InvalidRequest {
        /// What is wrong with it.
        reason: String,
    },

    /// The provider rejected the API key (HTTP 401 or 403).
    #[error("the API key was rejected by {provider} (HTTP {status}): check {key_var}; the provider said: {message}")]
    Unauthorized {
        /// `openai` or `anthropic`.
        provider: &'static str,
        /// The HTTP status.
        status: u16,
        /// The variable the key is read from.
        key_var: &'static str,
        /// The provider's error message, truncated.
        message: String,
    },

    /// The provider refused the request and retrying would not help (HTTP 4xx).
    #[error("{provider} rejected the request (HTTP {status}): {message}; {hint}")]
    Rejected {
        /// `openai` or `anthropic`.
        provider: &'static str,
        /// The HTTP status.
        status: u16,
        /// The provider's error message, truncated.
        message: String,
        /// What to do about it.
        hint: &'static str,
    },

    /// The provider reported an error inside the response stream.
    #[error("{provider} reported an error mid-response ({kind}): {message}; try again, or choose another model")]
    Api {
        /// `openai`, `openai-responses` or `anthropic`.
        provider: &'static str,
        /// The provider's error type or code.
        kind: String,
        /// The provider's message, truncated.
        message: String,
    },

    /// The response stream could not be understood.
    #[error("{provider} sent a response cairn cannot read: {message}; check that the base URL points at a compatible API")]
    Protocol {
        /// `openai` or `anthropic`.
        provider: &'static str,
        /// What was wrong.
        message: String,
    },

    /// The response carried more than one choice (`n` above 1). cairn's loop
    /// takes one answer a turn; keeping one of several paid-for answers and
    /// dropping the rest would record less than the provider said, so the
    /// response is refused rather than used (and not requested again: the
    /// same request would get several again).
    #[error("{provider} answered with more than one choice (choice {index} arrived), but cairn's loop takes exactly one answer a turn and asks for one: a proxy or the server's defaults set `n` above 1; set it to 1 there and resume the session")]
    SeveralChoices {
        /// `openai`.
        provider: &'static str,
        /// The index of the first choice other than 0 that arrived.
        index: u64,
    },

    /// Every attempt failed with a transient error.
    #[error("{provider} request failed after {attempts} attempt(s); last error: {last}; wait and try again, or check the provider's status")]
    RetriesExhausted {
        /// `openai` or `anthropic`.
        provider: &'static str,
        /// How many requests were sent.
        attempts: u32,
        /// The last failure: status and body excerpt, or the transport error.
        last: String,
    },
}

/// The longest body excerpt quoted in an error, in characters.
pub(crate) const EXCERPT_CHARS: usize = 300;

/// Shortens `text` to at most [`EXCERPT_CHARS`] characters, marking the cut.
pub(crate) fn excerpt(text: &str) -> String {
    let text = text.trim();
    match text.char_indices().nth(EXCERPT_CHARS) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// Extracts the human-readable message from an error body.
///
/// Both providers answer `{"error": {"message": ...}}`; some compatible servers
/// answer `{"error": "..."}` or `{"message": "..."}`. Anything else is quoted raw.
pub(crate) fn body_message(body: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let message = parsed.as_ref().and_then(|value| {
        let error = value.get("error");
        error
            .and_then(|e| e.get("message"))
            .or_else(|| error.filter(|e| e.is_string()))
            .or_else(|| value.get("message"))
            .and_then(|m| m.as_str())
            .map(str::to_owned)
    });
    let message = message.unwrap_or_else(|| body.to_owned());
    if message.trim().is_empty() {
        "(empty body)".to_owned()
    } else {
        excerpt(&message)
    }
}

/// Formats a transport error with its chain of causes.
pub(crate) fn describe_transport(error: &reqwest::Error) -> String {
    let mut text = error.to_string();
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpt_cuts_on_a_char_boundary() {
        let long = "é".repeat(EXCERPT_CHARS + 10);
        let cut = excerpt(&long);
        assert_eq!(cut.chars().count(), EXCERPT_CHARS + 1);
        assert!(cut.ends_with('…'));
        assert_eq!(excerpt(" short "), "short");
    }

    #[test]
    fn messages_say_what_to_do() {
        let rows = [
            (
                ModelError::MissingApiKey { var: "OPENAI_API_KEY" },
                "OPENAI_API_KEY is not set: export it, or use --model script:PATH for an offline run",
            ),
            (
                ModelError::ScriptParse {
                    path: "t.json".into(),
                    message: "missing field `turns` at line 1 column 2".into(),
                },
                "script t.json is malformed: missing field `turns` at line 1 column 2; \
                 expected {\"turns\": [{\"text\": ..., \"tool_calls\": [...], \"usage\": {...}}]}",
            ),
            (
                ModelError::RetriesExhausted {
                    provider: "anthropic",
                    attempts: 5,
                    last: "HTTP 529: Overloaded".into(),
                },
                "anthropic request failed after 5 attempt(s); last error: HTTP 529: Overloaded; \
                 wait and try again, or check the provider's status",
            ),
        ];
        for (error, want) in rows {
            assert_eq!(error.to_string(), want);
        }
    }

    #[test]
    fn body_message_finds_the_message() {
        let rows = [
            (r#"{"error":{"message":"bad key","type":"x"}}"#, "bad key"),
            (
                r#"{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: required"}}"#,
                "max_tokens: required",
            ),
            (r#"{"error":"model not found"}"#, "model not found"),
            (r#"{"message":"nope"}"#, "nope"),
            ("plain text", "plain text"),
            ("", "(empty body)"),
        ];
        for (body, want) in rows {
            assert_eq!(body_message(body), want, "body: {body}");
        }
    }
}
