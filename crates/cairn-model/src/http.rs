//! What the network providers share: the HTTP client, keys, base URLs, and the
//! retry loop that sends a request and decodes its event stream.
//!
//! When a response is accepted (the rule the retry loop keeps):
//!
//! 1. The decoder returned [`Step::Done`] for the stream's end marker
//!    (`data: [DONE]`, `message_stop`): the response is accepted.
//! 2. The body ended — cleanly, or with a transport error such as a reset or a
//!    read timeout — before the end marker: the response is accepted when
//!    [`Decoder::complete`] says everything that makes it whole has arrived, and
//!    the request is sent again otherwise. A paid answer is never bought twice
//!    for want of a marker.
//! 3. A last event not ended by a blank line is not dispatched (the SSE rules,
//!    [`SseParser`]): it counts only as far as rule 2 says.

use std::fmt;
use std::time::Duration;

use futures_util::StreamExt;
use reqwest::header::{HeaderMap, HeaderValue};
use reqwest::{RequestBuilder, StatusCode, Url};

use crate::error::{body_message, describe_transport, excerpt, ModelError};
use crate::message::StreamSink;
use crate::provider::{ProviderConfig, RetryPolicy};
use crate::sse::{SseEvent, SseParser};

/// An API key, ready to send as a header. Its `Debug` output never shows it.
#[derive(Clone)]
pub(crate) struct ApiKey(HeaderValue);

impl ApiKey {
    /// Makes a header value from `prefix` + `key`, marked sensitive.
    pub(crate) fn new(var: &'static str, prefix: &str, key: &str) -> Result<ApiKey, ModelError> {
        let mut value = HeaderValue::from_str(&format!("{prefix}{}", key.trim()))
            .map_err(|_| ModelError::InvalidApiKey { var })?;
        value.set_sensitive(true);
        Ok(ApiKey(value))
    }

    /// The key a provider sends, the one rule for both: a blank key is no
    /// key; no key is refused when the provider's official host needs one
    /// (`required`), else no key header is sent.
    pub(crate) fn resolve(
        var: &'static str,
        prefix: &str,
        key: Option<String>,
        required: bool,
    ) -> Result<Option<ApiKey>, ModelError> {
        match key.filter(|k| !k.trim().is_empty()) {
            Some(k) => ApiKey::new(var, prefix, &k).map(Some),
            None if required => Err(ModelError::MissingApiKey { var }),
            None => Ok(None),
        }
    }

    pub(crate) fn header(&self) -> HeaderValue {
        self.0.clone()
    }
}

impl fmt::Debug for ApiKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiKey(<redacted>)")
    }
}

/// Parses a base URL, requiring http or https, and returns it with no trailing `/`.
///
/// A base URL is recorded (a session's routing, the gateway's upstream in its
/// errors and records), so it must not carry a secret: one with credentials
/// (`https://user:key@host/v1`), a query or a fragment is refused, and the
/// error shows it with any credentials cut out. The one check for `cairn run
/// --base-url` and the gateway's upstreams alike.
///
/// # Errors
/// [`ModelError::InvalidBaseUrl`], which never contains the credentials.
pub fn parse_base_url(url: &str) -> Result<Url, ModelError> {
    let invalid = |reason: String| ModelError::InvalidBaseUrl {
        url: redact_userinfo(url),
        reason,
    };
    let parsed = Url::parse(url.trim()).map_err(|e| invalid(e.to_string()))?;
    if !matches!(parsed.scheme(), "http" | "https") {
        return Err(invalid(format!(
            "the scheme is `{}`, not http or https",
            parsed.scheme()
        )));
    }
    if parsed.host_str().is_none() {
        return Err(invalid("it has no host".to_owned()));
    }
    if !parsed.username().is_empty() || parsed.password().is_some() {
        return Err(invalid(
            "it carries credentials, which would be recorded in the session; \
             put the key in OPENAI_API_KEY or ANTHROPIC_API_KEY instead"
                .to_owned(),
        ));
    }
    if parsed.query().is_some() || parsed.fragment().is_some() {
        return Err(invalid(
            "it has a query or fragment, which would be recorded in the session and \
             may hold a secret; give the base URL alone"
                .to_owned(),
        ));
    }
    Ok(parsed)
}

/// `url` with anything between `//` and the first `@` of its authority
/// replaced by `…`, so an error never echoes a key typed into a URL.
fn redact_userinfo(url: &str) -> String {
    let Some(start) = url.find("//").map(|i| i + 2) else {
        return url.to_owned();
    };
    let authority_end = url[start..]
        .find(['/', '?', '#'])
        .map_or(url.len(), |i| start + i);
    match url[start..authority_end].rfind('@') {
        Some(at) => format!("{}…{}", &url[..start], &url[start + at..]),
        None => url.to_owned(),
    }
}

/// The URL as text without a trailing `/`.
pub(crate) fn trimmed(url: &Url) -> String {
    url.as_str().trim_end_matches('/').to_owned()
}

/// Whether the URL's host is `host`.
pub(crate) fn is_host(url: &Url, host: &str) -> bool {
    url.host_str().is_some_and(|h| h.eq_ignore_ascii_case(host))
}

/// Builds the HTTP client for a provider.
pub(crate) fn build_client(config: &ProviderConfig) -> Result<reqwest::Client, ModelError> {
    reqwest::Client::builder()
        .user_agent(concat!("cairn/", env!("CARGO_PKG_VERSION")))
        .timeout(config.timeout)
        .connect_timeout(config.connect_timeout)
        .read_timeout(config.read_timeout)
        .build()
        .map_err(|e| ModelError::HttpClient {
            message: describe_transport(&e),
        })
}

/// What a decoder wants after one event.
pub(crate) enum Step {
    /// Keep reading.
    Continue,
    /// The response is complete.
    Done,
}

/// Why one attempt failed.
pub(crate) enum Failure {
    /// A transient failure: try again after a pause.
    Retry {
        /// The status and body excerpt, or the transport error.
        detail: String,
        /// The server's `Retry-After`, when it sent one.
        retry_after: Option<Duration>,
    },
    /// A failure retrying cannot fix.
    Fatal(ModelError),
}

impl Failure {
    /// A provider's error event inside a stream: retried when `transient`
    /// (an overload, a rate limit, a server error), else the provider's
    /// error with its `kind` and message (cut to an excerpt).
    pub(crate) fn in_stream(
        provider: &'static str,
        kind: String,
        message: &str,
        transient: bool,
    ) -> Failure {
        let message = crate::error::excerpt(message);
        if transient {
            Failure::Retry {
                detail: format!("error in stream ({kind}): {message}"),
                retry_after: None,
            }
        } else {
            Failure::Fatal(ModelError::Api {
                provider,
                kind,
                message,
            })
        }
    }
}

impl From<ModelError> for Failure {
    fn from(error: ModelError) -> Failure {
        Failure::Fatal(error)
    }
}

/// Turns the events of one streamed response into a result.
pub(crate) trait Decoder {
    /// The decoded response.
    type Output;

    /// How the end of a complete stream is marked, for error messages.
    const END_MARKER: &'static str;

    /// Handles one event, forwarding text to the sink.
    fn event(&mut self, event: SseEvent, sink: &mut dyn StreamSink) -> Result<Step, Failure>;

    /// Whether everything that makes the response whole has arrived, so that a
    /// stream ending without its end marker can be accepted as it is.
    fn complete(&self) -> bool;

    /// The response, once [`Step::Done`] was returned or [`Decoder::complete`]
    /// holds.
    fn finish(self) -> Self::Output;
}

/// What feeding a chunk of a stream gave.
pub(crate) enum Fed {
    /// The end marker has not arrived yet.
    More,
    /// The decoder saw the end marker: later bytes are ignored.
    Done,
}

/// One response stream being decoded: the SSE parser and the decoder together,
/// so the network path and the tests drive exactly the same steps.
pub(crate) struct Decoding<D> {
    parser: SseParser,
    decoder: D,
}

impl<D: Decoder> Decoding<D> {
    pub(crate) fn new(decoder: D) -> Decoding<D> {
        Decoding {
            parser: SseParser::new(),
            decoder,
        }
    }

    /// Feeds the next bytes of the body, dispatching every event they complete.
    pub(crate) fn feed(&mut self, bytes: &[u8], sink: &mut dyn StreamSink) -> Result<Fed, Failure> {
        let events = self.parser.feed(bytes).map_err(Failure::Fatal)?;
        for event in events {
            if let Step::Done = self.decoder.event(event, sink)? {
                return Ok(Fed::Done);
            }
        }
        Ok(Fed::More)
    }

    /// The response after the end marker.
    pub(crate) fn finish(self) -> D::Output {
        self.decoder.finish()
    }

    /// The body ended before the end marker (`broken`: with a transport
    /// error): the response when the decoder holds it complete, else `broken`
    /// or a retry naming the missing marker.
    pub(crate) fn ended(self, broken: Option<Failure>) -> Result<D::Output, Failure> {
        if self.decoder.complete() {
            tracing::debug!(
                marker = D::END_MARKER,
                "the stream ended before its end marker but the response is complete; accepted"
            );
            return Ok(self.decoder.finish());
        }
        Err(broken.unwrap_or_else(|| Failure::Retry {
            detail: format!("the response stream ended before {}", D::END_MARKER),
            retry_after: None,
        }))
    }
}

/// Sends requests for one provider, with retries.
#[derive(Debug)]
pub(crate) struct Http {
    client: reqwest::Client,
    retry: RetryPolicy,
    provider: &'static str,
    key_var: &'static str,
}

impl Http {
    pub(crate) fn new(
        config: &ProviderConfig,
        provider: &'static str,
        key_var: &'static str,
    ) -> Result<Http, ModelError> {
        Ok(Http {
            client: build_client(config)?,
            retry: config.retry.clone(),
            provider,
            key_var,
        })
    }

    /// A POST of `body` as JSON to `url`, with `headers`.
    pub(crate) fn post<B: serde::Serialize + ?Sized>(
        &self,
        url: &str,
        headers: &HeaderMap,
        body: &B,
    ) -> RequestBuilder {
        self.client
            .post(url)
            .headers(headers.clone())
            .header(reqwest::header::ACCEPT, "text/event-stream")
            .json(body)
    }

    /// Sends the request built by `request` and decodes the stream with a fresh
    /// decoder from `decoder`, retrying transient failures per the policy.
    pub(crate) async fn stream<D: Decoder>(
        &self,
        request: impl Fn() -> RequestBuilder,
        decoder: impl Fn() -> D,
        sink: &mut dyn StreamSink,
    ) -> Result<D::Output, ModelError> {
        let mut attempt: u32 = 0;
        loop {
            attempt += 1;
            tracing::debug!(provider = self.provider, attempt, "sending model request");
            let mut counted = Counted {
                inner: &mut *sink,
                delivered: false,
            };
            let failure = match self.attempt(request(), decoder(), &mut counted).await {
                Ok(output) => return Ok(output),
                Err(failure) => failure,
            };
            let delivered = counted.delivered;
            let (detail, retry_after) = match failure {
                Failure::Fatal(error) => return Err(error),
                Failure::Retry {
                    detail,
                    retry_after,
                } => (detail, retry_after),
            };
            if attempt > self.retry.max_retries {
                return Err(ModelError::RetriesExhausted {
                    provider: self.provider,
                    attempts: attempt,
                    last: detail,
                });
            }
            let delay = backoff(&self.retry, attempt, retry_after);
            tracing::info!(
                provider = self.provider,
                attempt,
                delay_ms = delay.as_millis() as u64,
                error = %detail,
                "model request failed; retrying"
            );
            tokio::time::sleep(delay).await;
            if delivered {
                sink.restart();
            }
        }
    }

    async fn attempt<D: Decoder>(
        &self,
        request: RequestBuilder,
        decoder: D,
        sink: &mut dyn StreamSink,
    ) -> Result<D::Output, Failure> {
        let response = request.send().await.map_err(transport)?;
        let status = response.status();
        if !status.is_success() {
            let retry_after = retry_after(response.headers());
            let body = response.text().await.unwrap_or_default();
            return Err(self.classify(status, &body, retry_after));
        }
        let content_type = response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_ascii_lowercase();
        if content_type.starts_with("application/json") {
            let body = response.text().await.unwrap_or_default();
            return Err(Failure::Fatal(ModelError::Protocol {
                provider: self.provider,
                message: format!(
                    "expected a text/event-stream response but got JSON: {}",
                    excerpt(&body)
                ),
            }));
        }
        let mut decoding = Decoding::new(decoder);
        let mut chunks = response.bytes_stream();
        while let Some(chunk) = chunks.next().await {
            let chunk = match chunk {
                Ok(chunk) => chunk,
                Err(error) => return decoding.ended(Some(transport(error))),
            };
            if let Fed::Done = decoding.feed(&chunk, sink)? {
                return Ok(decoding.finish());
            }
        }
        decoding.ended(None)
    }

    fn classify(&self, status: StatusCode, body: &str, retry_after: Option<Duration>) -> Failure {
        let code = status.as_u16();
        let message = body_message(body);
        tracing::debug!(provider = self.provider, status = code, %message, "model request refused");
        match code {
            401 | 403 => Failure::Fatal(ModelError::Unauthorized {
                provider: self.provider,
                status: code,
                key_var: self.key_var,
                message,
            }),
            408 | 409 | 429 | 500..=599 => Failure::Retry {
                detail: format!("HTTP {code}: {message}"),
                retry_after,
            },
            404 => Failure::Fatal(ModelError::Rejected {
                provider: self.provider,
                status: code,
                message,
                hint: "check the model name and the base URL",
            }),
            _ => Failure::Fatal(ModelError::Rejected {
                provider: self.provider,
                status: code,
                message,
                hint: "check the model name, the options and the size of the conversation",
            }),
        }
    }
}

/// Passes text on, noting whether any was delivered.
struct Counted<'a> {
    inner: &'a mut dyn StreamSink,
    delivered: bool,
}

impl StreamSink for Counted<'_> {
    fn text(&mut self, delta: &str) {
        self.delivered = true;
        self.inner.text(delta);
    }

    fn restart(&mut self) {
        self.inner.restart();
    }
}

/// A transport error: connection refused, reset, timed out, or a broken body.
fn transport(error: reqwest::Error) -> Failure {
    Failure::Retry {
        detail: describe_transport(&error),
        retry_after: None,
    }
}

/// The server's requested pause: `retry-after-ms`, else `retry-after` in seconds.
/// An HTTP date in `retry-after` is not understood and is ignored.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| -> Option<f64> {
        let value = headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()?;
        (value.is_finite() && value >= 0.0).then_some(value)
    };
    number("retry-after-ms")
        .map(|ms| ms / 1000.0)
        .or_else(|| number("retry-after"))
        .map(|secs| Duration::from_secs_f64(secs.min(86_400.0)))
}

/// The pause before retry number `attempt` (1-based), per [`RetryPolicy`].
pub(crate) fn backoff(
    policy: &RetryPolicy,
    attempt: u32,
    retry_after: Option<Duration>,
) -> Duration {
    if let Some(wait) = retry_after {
        return wait.min(policy.max_delay);
    }
    let exponent = attempt.saturating_sub(1).min(30);
    let full = policy
        .base_delay
        .saturating_mul(1u32 << exponent)
        .min(policy.max_delay);
    let factor: f64 = rand::Rng::random_range(&mut rand::rng(), 0.5..=1.0);
    full.mul_f64(factor)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_is_capped() {
        let policy = RetryPolicy {
            max_retries: 10,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_secs(1),
        };
        for _ in 0..50 {
            let first = backoff(&policy, 1, None);
            assert!(first >= Duration::from_millis(50) && first <= Duration::from_millis(100));
            let third = backoff(&policy, 3, None);
            assert!(third >= Duration::from_millis(200) && third <= Duration::from_millis(400));
            assert!(backoff(&policy, 40, None) <= Duration::from_secs(1));
        }
        let told = Some(Duration::from_secs(7));
        assert_eq!(backoff(&policy, 1, told), Duration::from_secs(1));
        assert_eq!(backoff(&policy, 1, Some(Duration::ZERO)), Duration::ZERO);
    }

    #[test]
    fn retry_after_reads_both_headers() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(250)));
        let mut dated = HeaderMap::new();
        dated.insert(
            "retry-after",
            HeaderValue::from_static("Wed, 21 Oct 2015 07:28:00 GMT"),
        );
        assert_eq!(retry_after(&dated), None);
    }

    #[test]
    fn api_keys_are_redacted() {
        let key = ApiKey::new("OPENAI_API_KEY", "Bearer ", "sk-secret").unwrap();
        assert!(!format!("{key:?}").contains("sk-secret"));
        assert!(key.header().is_sensitive());
        assert!(ApiKey::new("OPENAI_API_KEY", "", "bad\nkey").is_err());
    }
}

#[cfg(test)]
mod base_url_tests {
    use super::{parse_base_url, redact_userinfo};

    #[test]
    fn base_urls_that_would_record_a_secret_are_refused_without_echoing_it() {
        let rows = [
            ("https://:sk-secret@api.example.com/v1", "credentials"),
            ("https://user:sk-secret@api.example.com/v1", "credentials"),
            ("https://sk-secret@api.example.com/v1", "credentials"),
            ("https://api.example.com/v1?key=sk-secret", "query"),
            ("https://api.example.com/v1#sk-secret", "fragment"),
        ];
        for (url, why) in rows {
            let e = parse_base_url(url).unwrap_err().to_string();
            assert!(e.contains(why), "{url}: {e}");
            if why == "credentials" {
                assert!(!e.contains("sk-secret"), "{url}: {e}");
            }
        }
        assert!(parse_base_url("http://localhost:11434/v1").is_ok());
        assert!(parse_base_url("https://openrouter.ai/api/v1").is_ok());
    }

    #[test]
    fn redaction_cuts_only_the_userinfo() {
        assert_eq!(redact_userinfo("https://a:b@h/v1"), "https://…@h/v1");
        assert_eq!(redact_userinfo("https://h/v1@x"), "https://h/v1@x");
        assert_eq!(redact_userinfo("not a url"), "not a url");
        assert_eq!(redact_userinfo("h://x:y@z"), "h://…@z");
    }
}
