//! The call key and the other facts a request carries (DESIGN §7).
//!
//! A [`Key`] names a model call by what it asks: two requests with the same
//! key would be answered by the same kind of sample, so a stored response to
//! one may serve the other. Everything a client changes between attempts of
//! one call without changing its meaning (timeouts, user agents, the
//! `x-stainless-*` family, `idempotency-key`, `accept-encoding`,
//! `content-length`, client session headers, cookies, JSON key order and
//! whitespace, and the `stream` flag — Claude Code re-sends a cut stream
//! without streaming) is left out; everything that changes the answer or who
//! pays for it is in.
//!
//! # The key's bytes (a format: keys are stored)
//!
//! key = lowercase hex of SHA-256 over
//!
//! ```text
//! cairn/gateway/key/v1\n
//! FIELD*
//! ```
//!
//! where each FIELD is `NAME=LEN:VALUE\n`: NAME in ASCII, LEN the decimal byte
//! length of VALUE, VALUE raw bytes (so no value can be mistaken for another
//! field). The fields, in this order, absent ones omitted:
//!
//! | NAME | VALUE |
//! |---|---|
//! | `method` | the method as sent (`POST`) |
//! | `path` | the path, up to the first `?`, byte for byte |
//! | `query` | the query's `&`-separated parameters, empty ones dropped, sorted by bytes, joined with `&`; not decoded; omitted when there is none |
//! | `credential` | lowercase hex SHA-256 of `cairn/gateway/credential/v1\n` then a FIELD for each of `authorization`, `x-api-key`, `api-key` that is present (its values trimmed and joined with `,`); omitted when none is present. The credential itself is never part of the key's input, only its hash |
//! | `anthropic-version` | values trimmed, joined with `,` |
//! | `anthropic-beta` | every comma-separated value of every `anthropic-beta` header, trimmed, empty ones dropped, de-duplicated and sorted by bytes, joined with `,` (a set: order and repetition do not matter) |
//! | `openai-beta` | values trimmed, joined with `,` |
//! | `openai-organization` | values trimmed, joined with `,` |
//! | `openai-project` | values trimmed, joined with `,` |
//! | `body-json` | when the body parses as JSON: its canonical bytes ([`cairn_calls::canonical`]), after the top-level keys `stream` and `stream_options` of an object are removed |
//! | `body-raw` | otherwise: the body's bytes as received (always present, possibly empty) |
//!
//! A header absent and a header present with an empty value differ (the
//! latter is a FIELD with LEN 0). Header names are case-insensitive, as HTTP
//! says; values are compared as bytes.

use std::fmt;
use std::str::FromStr;

use http::HeaderMap;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The domain prefix of a key's hashed bytes.
const KEY_DOMAIN: &[u8] = b"cairn/gateway/key/v1\n";

/// The domain prefix of the credential's hash inside a key.
const CREDENTIAL_DOMAIN: &[u8] = b"cairn/gateway/credential/v1\n";

/// The headers that carry the caller's credential, in key order.
const CREDENTIAL_HEADERS: [&str; 3] = ["authorization", "x-api-key", "api-key"];

/// The headers that change what a request means, in key order
/// (`anthropic-beta` is the one read as a set).
const MEANING_HEADERS: [&str; 5] = [
    "anthropic-version",
    "anthropic-beta",
    "openai-beta",
    "openai-organization",
    "openai-project",
];

/// The top-level body keys that only say how the answer is delivered.
const DELIVERY_KEYS: [&str; 2] = ["stream", "stream_options"];

/// The key of a model call: 64 lowercase hex digits (the layout is in the
/// module doc).
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Key(String);

/// The error of parsing a [`Key`] from text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a call key: expected 64 lowercase hex digits")]
pub struct KeyParseError;

impl Key {
    /// The key of a request: `method`, the request target `path_and_query`
    /// (`/v1/messages?beta=true`), its headers and its body.
    pub fn of(method: &str, path_and_query: &str, headers: &HeaderMap, body: &[u8]) -> Key {
        Key::with_body(
            method,
            path_and_query,
            headers,
            body,
            parse_json(body).as_ref(),
        )
    }

    /// [`Key::of`] with the body already parsed (`None`: not JSON).
    fn with_body(
        method: &str,
        path_and_query: &str,
        headers: &HeaderMap,
        body: &[u8],
        json: Option<&Value>,
    ) -> Key {
        let mut bytes = KEY_DOMAIN.to_vec();
        field(&mut bytes, "method", method.as_bytes());
        let (path, query) = match path_and_query.split_once('?') {
            Some((p, q)) => (p, Some(q)),
            None => (path_and_query, None),
        };
        field(&mut bytes, "path", path.as_bytes());
        if let Some(query) = query.map(sorted_query).filter(|q| !q.is_empty()) {
            field(&mut bytes, "query", query.as_bytes());
        }
        if let Some(credential) = credential_hash(headers) {
            field(&mut bytes, "credential", credential.as_bytes());
        }
        for name in MEANING_HEADERS {
            let value = if name == "anthropic-beta" {
                beta_set(headers, name)
            } else {
                joined(headers, name)
            };
            if let Some(value) = value {
                field(&mut bytes, name, &value);
            }
        }
        match json {
            Some(v) => {
                let mut canonical = Vec::with_capacity(body.len());
                cairn_calls::canonical::write_without_keys(v, &DELIVERY_KEYS, &mut canonical);
                field(&mut bytes, "body-json", &canonical);
            }
            None => field(&mut bytes, "body-raw", body),
        }
        Key(hex::encode(Sha256::digest(&bytes)))
    }

    /// Parses a key from its text (64 lowercase hex digits).
    ///
    /// # Errors
    /// [`KeyParseError`] for anything else (uppercase included).
    pub fn parse(s: &str) -> Result<Key, KeyParseError> {
        let ok = s.len() == 64 && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'));
        if ok {
            Ok(Key(s.to_owned()))
        } else {
            Err(KeyParseError)
        }
    }

    /// The key's 64 hex digits.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for Key {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Key({})", self.0)
    }
}

impl FromStr for Key {
    type Err = KeyParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Key::parse(s)
    }
}

impl Serialize for Key {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        Key::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// Appends `NAME=LEN:VALUE\n`.
fn field(out: &mut Vec<u8>, name: &str, value: &[u8]) {
    out.extend_from_slice(name.as_bytes());
    out.push(b'=');
    out.extend_from_slice(value.len().to_string().as_bytes());
    out.push(b':');
    out.extend_from_slice(value);
    out.push(b'\n');
}

fn sorted_query(query: &str) -> String {
    let mut params: Vec<&str> = query.split('&').filter(|p| !p.is_empty()).collect();
    params.sort_unstable();
    params.join("&")
}

/// Every value of header `name`, trimmed, joined with `,`; `None` when absent.
fn joined(headers: &HeaderMap, name: &str) -> Option<Vec<u8>> {
    let mut values = headers.get_all(name).iter().peekable();
    values.peek()?;
    let parts: Vec<&[u8]> = values.map(|v| v.as_bytes().trim_ascii()).collect();
    Some(parts.join(&b","[..]))
}

/// The comma-separated values of every header `name` as a sorted set.
fn beta_set(headers: &HeaderMap, name: &str) -> Option<Vec<u8>> {
    let mut values = headers.get_all(name).iter().peekable();
    values.peek()?;
    let mut set: Vec<&[u8]> = values
        .flat_map(|v| v.as_bytes().split(|&b| b == b','))
        .map(<[u8]>::trim_ascii)
        .filter(|s| !s.is_empty())
        .collect();
    set.sort_unstable();
    set.dedup();
    Some(set.join(&b","[..]))
}

fn credential_hash(headers: &HeaderMap) -> Option<String> {
    let mut bytes = CREDENTIAL_DOMAIN.to_vec();
    let mut any = false;
    for name in CREDENTIAL_HEADERS {
        if let Some(value) = joined(headers, name) {
            field(&mut bytes, name, &value);
            any = true;
        }
    }
    any.then(|| hex::encode(Sha256::digest(&bytes)))
}

fn parse_json(body: &[u8]) -> Option<Value> {
    serde_json::from_slice(body).ok()
}

/// Which client header named a [`ClientSession`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SessionHeader {
    /// Claude Code's `X-Claude-Code-Session-Id`.
    ClaudeCode,
    /// Codex's `session-id`.
    CodexSession,
    /// Codex's `thread-id` (read when `session-id` is absent).
    CodexThread,
}

impl SessionHeader {
    /// The header's name, lowercase.
    pub fn name(self) -> &'static str {
        match self {
            SessionHeader::ClaudeCode => "x-claude-code-session-id",
            SessionHeader::CodexSession => "session-id",
            SessionHeader::CodexThread => "thread-id",
        }
    }
}

/// A session named by the client itself (DESIGN §7, "Client sessions").
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ClientSession {
    /// The header it came from.
    pub header: SessionHeader,
    /// Its value, trimmed (never empty).
    pub id: String,
}

/// Whether the request says it is a retry: `x-stainless-retry-count` is a
/// number above 0. (Claude Code keeps it at 0 on its retries and Codex sends
/// none, so a missing marker proves nothing.)
pub fn retry_marker(headers: &HeaderMap) -> bool {
    headers
        .get_all("x-stainless-retry-count")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(|v| v.trim().parse::<u64>().ok())
        .any(|n| n > 0)
}

/// The request's `Idempotency-Key` (any case), trimmed; `None` when absent or
/// empty. Bytes that are not UTF-8 become U+FFFD.
pub fn idempotency_key(headers: &HeaderMap) -> Option<String> {
    let v = headers.get("idempotency-key")?;
    let s = String::from_utf8_lossy(v.as_bytes()).trim().to_owned();
    (!s.is_empty()).then_some(s)
}

/// The client's own session: `X-Claude-Code-Session-Id`, else Codex's
/// `session-id`, else its `thread-id`. A header whose value is empty or not
/// visible ASCII is skipped.
pub fn client_session(headers: &HeaderMap) -> Option<ClientSession> {
    [
        SessionHeader::ClaudeCode,
        SessionHeader::CodexSession,
        SessionHeader::CodexThread,
    ]
    .into_iter()
    .find_map(|header| {
        let id = headers.get(header.name())?.to_str().ok()?.trim();
        (!id.is_empty()).then(|| ClientSession {
            header,
            id: id.to_owned(),
        })
    })
}

/// Whether the body asks for a streamed answer (top-level `"stream": true`).
pub fn wants_stream(body: &[u8]) -> bool {
    stream_of(parse_json(body).as_ref())
}

/// The model the body asks for (top-level `"model"` string).
pub fn requested_model(body: &[u8]) -> Option<String> {
    model_of(parse_json(body).as_ref())
}

fn stream_of(json: Option<&Value>) -> bool {
    json.and_then(|v| v.get("stream")).and_then(Value::as_bool) == Some(true)
}

fn model_of(json: Option<&Value>) -> Option<String> {
    Some(json?.get("model")?.as_str()?.to_owned())
}

/// Whether a header may be stored: not a credential, a cookie or anything
/// whose name says it holds a secret.
fn storable(name: &str) -> bool {
    const NEVER: [&str; 7] = [
        "authorization",
        "proxy-authorization",
        "x-api-key",
        "api-key",
        "cookie",
        "set-cookie",
        "x-cairn-token",
    ];
    const SECRET_WORDS: [&str; 5] = ["key", "token", "secret", "auth", "cookie"];
    let name = name.to_ascii_lowercase();
    !NEVER.contains(&name.as_str()) && !SECRET_WORDS.iter().any(|w| name.contains(w))
}

/// The request headers that are safe to store, in order, names lowercase.
///
/// Dropped: `authorization`, `proxy-authorization`, `x-api-key`, `api-key`,
/// `cookie`, `set-cookie`, `x-cairn-token`, and every header whose name
/// contains `key`, `token`, `secret`, `auth` or `cookie` (so a provider's own
/// `x-goog-api-key` is dropped too, and so is `idempotency-key`). Kept:
/// everything else (`anthropic-version`, `anthropic-beta`, `openai-beta`,
/// `content-type`, `user-agent`, …). Values that are not UTF-8 are kept with
/// U+FFFD in place of the bad bytes.
pub fn strip_credentials(headers: &HeaderMap) -> Vec<(String, String)> {
    headers
        .iter()
        .filter(|(name, _)| storable(name.as_str()))
        .map(|(name, value)| {
            (
                name.as_str().to_owned(),
                String::from_utf8_lossy(value.as_bytes()).into_owned(),
            )
        })
        .collect()
}

/// Everything the gateway reads from one request, with its body parsed once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RequestFacts {
    /// The call key ([`Key::of`]).
    pub key: Key,
    /// [`wants_stream`].
    pub stream: bool,
    /// [`requested_model`].
    pub model: Option<String>,
    /// [`retry_marker`].
    pub retry: bool,
    /// [`idempotency_key`].
    pub idempotency_key: Option<String>,
    /// [`client_session`].
    pub client_session: Option<ClientSession>,
}

impl RequestFacts {
    /// The facts of a request (the same answers as the functions named on
    /// each field, the body parsed once).
    pub fn of(method: &str, path_and_query: &str, headers: &HeaderMap, body: &[u8]) -> Self {
        let json = parse_json(body);
        RequestFacts {
            key: Key::with_body(method, path_and_query, headers, body, json.as_ref()),
            stream: stream_of(json.as_ref()),
            model: model_of(json.as_ref()),
            retry: retry_marker(headers),
            idempotency_key: idempotency_key(headers),
            client_session: client_session(headers),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (n, v) in pairs {
            h.append(
                http::HeaderName::from_bytes(n.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    #[test]
    fn the_layout_is_the_documented_one() {
        let h = headers(&[
            ("x-api-key", "sk-ant-1"),
            ("anthropic-version", "2023-06-01"),
            ("anthropic-beta", "b2, a1"),
            ("anthropic-beta", "a1"),
            ("user-agent", "ignored"),
        ]);
        let body = br#"{"stream":true,"model":"m","max_tokens":5}"#;
        let key = Key::of("POST", "/v1/messages?z=1&beta=true", &h, body);

        let credential = hex::encode(Sha256::digest(
            b"cairn/gateway/credential/v1\nx-api-key=8:sk-ant-1\n",
        ));
        let canonical = br#"{"max_tokens":5,"model":"m"}"#;
        let mut want = b"cairn/gateway/key/v1\n".to_vec();
        want.extend_from_slice(b"method=4:POST\npath=12:/v1/messages\nquery=13:beta=true&z=1\n");
        want.extend_from_slice(format!("credential=64:{credential}\n").as_bytes());
        want.extend_from_slice(b"anthropic-version=10:2023-06-01\nanthropic-beta=5:a1,b2\n");
        want.extend_from_slice(format!("body-json={}:", canonical.len()).as_bytes());
        want.extend_from_slice(canonical);
        want.push(b'\n');
        assert_eq!(key.as_str(), hex::encode(Sha256::digest(&want)));
    }

    #[test]
    fn a_body_that_is_not_json_is_keyed_by_its_bytes() {
        let h = HeaderMap::new();
        let key = Key::of("POST", "/v1/x", &h, b"{not json");
        let want = b"cairn/gateway/key/v1\nmethod=4:POST\npath=5:/v1/x\nbody-raw=9:{not json\n";
        assert_eq!(key.as_str(), hex::encode(Sha256::digest(want)));
    }

    #[test]
    fn parse_is_strict() {
        let k = Key::of("POST", "/", &HeaderMap::new(), b"");
        assert_eq!(Key::parse(k.as_str()), Ok(k.clone()));
        assert_eq!(k.to_string(), k.as_str());
        assert_eq!(Key::parse(&k.as_str().to_uppercase()), Err(KeyParseError));
        assert_eq!(Key::parse(&k.as_str()[1..]), Err(KeyParseError));
        assert_eq!(Key::parse(&format!("{}0", k.as_str())), Err(KeyParseError));
        assert_eq!(Key::parse(&"g".repeat(64)), Err(KeyParseError));
        let json = serde_json::to_string(&k).unwrap();
        assert_eq!(serde_json::from_str::<Key>(&json).unwrap(), k);
        assert!(serde_json::from_str::<Key>("\"abc\"").is_err());
    }

    #[test]
    fn storable_headers() {
        let rows = [
            ("authorization", false),
            ("Proxy-Authorization", false),
            ("x-api-key", false),
            ("api-key", false),
            ("cookie", false),
            ("x-cairn-token", false),
            ("x-goog-api-key", false),
            ("x-my-secret", false),
            ("x-auth-user", false),
            ("idempotency-key", false),
            ("anthropic-version", true),
            ("anthropic-beta", true),
            ("openai-beta", true),
            ("openai-organization", true),
            ("content-type", true),
            ("user-agent", true),
            ("x-stainless-retry-count", true),
            ("x-claude-code-session-id", true),
        ];
        for (name, want) in rows {
            assert_eq!(storable(name), want, "{name}");
        }
    }
}
