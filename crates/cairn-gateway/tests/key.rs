//! The key matrix of DESIGN §7: what a client changes between attempts of one
//! call gives the same key; what changes the answer, or who pays, gives
//! another. Plus the request facts read beside the key.

use cairn_gateway::{
    client_session, idempotency_key, requested_model, retry_marker, strip_credentials,
    wants_stream, ClientSession, Key, RequestFacts, SessionHeader,
};
use http::{HeaderMap, HeaderName, HeaderValue};
use proptest::prelude::*;
use serde_json::Value;

/// A request as the key sees it.
#[derive(Clone)]
struct Req {
    method: &'static str,
    target: String,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Req {
    fn key(&self) -> Key {
        Key::of(
            self.method,
            &self.target,
            &header_map(&self.headers),
            &self.body,
        )
    }
    fn header(mut self, name: &str, value: &str) -> Req {
        self.headers.push((name.into(), value.into()));
        self
    }
    fn without(mut self, name: &str) -> Req {
        self.headers.retain(|(n, _)| !n.eq_ignore_ascii_case(name));
        self
    }
    fn set(self, name: &str, value: &str) -> Req {
        self.without(name).header(name, value)
    }
    fn body(mut self, body: &str) -> Req {
        self.body = body.as_bytes().to_vec();
        self
    }
    fn target(mut self, target: &str) -> Req {
        self.target = target.into();
        self
    }
}

/// Header pairs in a table row.
type Headers = &'static [(&'static str, &'static str)];

fn header_map(pairs: &[(String, String)]) -> HeaderMap {
    let mut h = HeaderMap::new();
    for (n, v) in pairs {
        h.append(
            HeaderName::from_bytes(n.as_bytes()).unwrap(),
            HeaderValue::from_str(v).unwrap(),
        );
    }
    h
}

const MESSAGES_BODY: &str = r#"{"model":"claude-sonnet-4-5","max_tokens":1024,"stream":true,"system":[{"type":"text","text":"You are a coding agent."}],"tools":[{"name":"read","description":"Read a file","input_schema":{"type":"object","properties":{"path":{"type":"string"}}}}],"messages":[{"role":"user","content":"hi"}]}"#;

/// Claude Code's first attempt, as measured (DESIGN §7).
fn claude_code() -> Req {
    Req {
        method: "POST",
        target: "/v1/messages?beta=true".into(),
        headers: vec![
            ("x-api-key".into(), "sk-ant-api03-secret".into()),
            ("anthropic-version".into(), "2023-06-01".into()),
            (
                "anthropic-beta".into(),
                "claude-code-20250219,interleaved-thinking-2025-05-14,fine-grained-tool-streaming-2025-05-14".into(),
            ),
            ("user-agent".into(), "claude-cli/2.1.197 (external, cli)".into()),
            ("x-stainless-retry-count".into(), "0".into()),
            ("x-stainless-timeout".into(), "600".into()),
            ("x-stainless-lang".into(), "js".into()),
            ("x-stainless-package-version".into(), "0.60.0".into()),
            ("x-claude-code-session-id".into(), "5f0c9a4e-session".into()),
            ("content-type".into(), "application/json".into()),
            ("accept-encoding".into(), "gzip, deflate".into()),
            ("content-length".into(), MESSAGES_BODY.len().to_string()),
        ],
        body: MESSAGES_BODY.as_bytes().to_vec(),
    }
}

const CHAT_BODY: &str = r#"{"model":"gpt-4.1","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"read","parameters":{"type":"object"}}}]}"#;

fn openai_sdk() -> Req {
    Req {
        method: "POST",
        target: "/v1/chat/completions".into(),
        headers: vec![
            ("authorization".into(), "Bearer sk-proj-secret".into()),
            ("openai-beta".into(), "assistants=v2".into()),
            ("user-agent".into(), "OpenAI/Python 1.99.0".into()),
            ("x-stainless-retry-count".into(), "0".into()),
            ("x-stainless-read-timeout".into(), "600".into()),
            ("content-type".into(), "application/json".into()),
        ],
        body: CHAT_BODY.as_bytes().to_vec(),
    }
}

#[test]
fn what_a_retry_changes_leaves_the_key_alone() {
    let rows: Vec<(&str, Req, Req)> = vec![
        (
            "x-stainless-retry-count",
            claude_code(),
            claude_code().set("x-stainless-retry-count", "1"),
        ),
        (
            "x-stainless-timeout",
            claude_code(),
            claude_code().set("x-stainless-timeout", "300"),
        ),
        (
            "other x-stainless headers",
            claude_code(),
            claude_code()
                .without("x-stainless-lang")
                .header("x-stainless-os", "Linux"),
        ),
        (
            "user agent",
            claude_code(),
            claude_code().set("user-agent", "claude-cli/2.2.0"),
        ),
        (
            "x-stainless-read-timeout",
            openai_sdk(),
            openai_sdk().set("x-stainless-read-timeout", "30"),
        ),
        (
            "idempotency-key",
            openai_sdk(),
            openai_sdk().header("idempotency-key", "stainless-python-retry-1"),
        ),
        (
            "accept-encoding",
            claude_code(),
            claude_code().without("accept-encoding"),
        ),
        (
            "content-length",
            claude_code(),
            claude_code().set("content-length", "1"),
        ),
        (
            "client session headers",
            openai_sdk(),
            openai_sdk()
                .header("session-id", "s1")
                .header("thread-id", "t1")
                .header("x-client-request-id", "r1"),
        ),
        (
            "claude code session",
            claude_code(),
            claude_code().set("x-claude-code-session-id", "another"),
        ),
        (
            "cookies",
            openai_sdk(),
            openai_sdk().header("cookie", "__cf_bm=abc"),
        ),
        (
            "header name case",
            openai_sdk(),
            openai_sdk()
                .without("openai-beta")
                .header("OpenAI-Beta", "assistants=v2"),
        ),
        (
            "JSON key order",
            claude_code(),
            claude_code().body(r#"{"messages":[{"content":"hi","role":"user"}],"tools":[{"input_schema":{"properties":{"path":{"type":"string"}},"type":"object"},"description":"Read a file","name":"read"}],"system":[{"text":"You are a coding agent.","type":"text"}],"stream":true,"max_tokens":1024,"model":"claude-sonnet-4-5"}"#),
        ),
        (
            "whitespace",
            openai_sdk(),
            openai_sdk().body(&format!(
                "{}\n",
                serde_json::to_string_pretty(&serde_json::from_str::<Value>(CHAT_BODY).unwrap())
                    .unwrap()
            )),
        ),
        (
            "the stream flag removed (Claude Code's retry of a cut stream)",
            claude_code(),
            claude_code().body(&MESSAGES_BODY.replace(r#""stream":true,"#, "")),
        ),
        (
            "stream false",
            claude_code(),
            claude_code().body(&MESSAGES_BODY.replace(r#""stream":true"#, r#""stream":false"#)),
        ),
        (
            "stream_options",
            openai_sdk(),
            openai_sdk().body(
                &CHAT_BODY.replace(r#""stream":true,"stream_options":{"include_usage":true},"#, ""),
            ),
        ),
        (
            "anthropic-beta order",
            claude_code(),
            claude_code().set(
                "anthropic-beta",
                "fine-grained-tool-streaming-2025-05-14, claude-code-20250219,interleaved-thinking-2025-05-14",
            ),
        ),
        (
            "anthropic-beta split over headers and repeated",
            claude_code(),
            claude_code()
                .set("anthropic-beta", "interleaved-thinking-2025-05-14,claude-code-20250219")
                .header("anthropic-beta", "fine-grained-tool-streaming-2025-05-14, claude-code-20250219,"),
        ),
        (
            "query parameter order",
            claude_code().target("/v1/messages?beta=true&a=1"),
            claude_code().target("/v1/messages?a=1&beta=true"),
        ),
    ];
    for (what, a, b) in rows {
        assert_eq!(a.key(), b.key(), "{what} changed the key");
    }
}

#[test]
fn what_changes_the_answer_or_the_payer_changes_the_key() {
    let rows: Vec<(&str, Req, Req)> = vec![
        (
            "model",
            claude_code(),
            claude_code().body(&MESSAGES_BODY.replace("claude-sonnet-4-5", "claude-opus-4-1")),
        ),
        (
            "tools",
            claude_code(),
            claude_code().body(&MESSAGES_BODY.replace("Read a file", "Read one file")),
        ),
        (
            "no tools",
            openai_sdk(),
            openai_sdk().body(r#"{"model":"gpt-4.1","stream":true,"messages":[{"role":"user","content":"hi"}]}"#),
        ),
        (
            "messages",
            claude_code(),
            claude_code().body(&MESSAGES_BODY.replace(r#""content":"hi""#, r#""content":"hello""#)),
        ),
        (
            "message order",
            openai_sdk().body(r#"{"model":"m","messages":[{"role":"user","content":"a"},{"role":"user","content":"b"}]}"#),
            openai_sdk().body(r#"{"model":"m","messages":[{"role":"user","content":"b"},{"role":"user","content":"a"}]}"#),
        ),
        (
            "a nested stream key",
            openai_sdk().body(r#"{"model":"m","metadata":{"stream":"a"}}"#),
            openai_sdk().body(r#"{"model":"m","metadata":{"stream":"b"}}"#),
        ),
        (
            "anthropic-beta values",
            claude_code(),
            claude_code().set("anthropic-beta", "claude-code-20250219,interleaved-thinking-2025-05-14"),
        ),
        (
            "anthropic-beta absent",
            claude_code(),
            claude_code().without("anthropic-beta"),
        ),
        (
            "anthropic-version",
            claude_code(),
            claude_code().set("anthropic-version", "2024-01-01"),
        ),
        (
            "openai-beta",
            openai_sdk(),
            openai_sdk().set("openai-beta", "responses=experimental"),
        ),
        (
            "openai-organization",
            openai_sdk(),
            openai_sdk().header("openai-organization", "org-1"),
        ),
        (
            "openai-project",
            openai_sdk(),
            openai_sdk().header("openai-project", "proj-1"),
        ),
        (
            "credential",
            claude_code(),
            claude_code().set("x-api-key", "sk-ant-api03-other"),
        ),
        (
            "credential absent",
            claude_code(),
            claude_code().without("x-api-key"),
        ),
        (
            "bearer credential",
            openai_sdk(),
            openai_sdk().set("authorization", "Bearer sk-proj-other"),
        ),
        (
            "the same credential in another header",
            openai_sdk(),
            openai_sdk()
                .without("authorization")
                .header("api-key", "Bearer sk-proj-secret"),
        ),
        (
            "path",
            openai_sdk(),
            openai_sdk().target("/v1/responses"),
        ),
        (
            "query",
            claude_code(),
            claude_code().target("/v1/messages"),
        ),
        (
            "query value",
            claude_code(),
            claude_code().target("/v1/messages?beta=false"),
        ),
        (
            "method",
            openai_sdk(),
            Req { method: "PUT", ..openai_sdk() },
        ),
        (
            "a body that is not JSON",
            openai_sdk().body("{oops"),
            openai_sdk().body("{oops "),
        ),
        (
            "JSON text against the same bytes unparsed",
            openai_sdk().body("[1]"),
            openai_sdk().body("[1"),
        ),
        (
            "an empty header against none",
            openai_sdk().header("openai-project", ""),
            openai_sdk(),
        ),
    ];
    for (what, a, b) in rows {
        assert_ne!(a.key(), b.key(), "{what} did not change the key");
    }
}

#[test]
fn request_facts() {
    let h = header_map(&claude_code().headers);
    assert!(!retry_marker(&h));
    assert!(wants_stream(MESSAGES_BODY.as_bytes()));
    assert_eq!(
        requested_model(MESSAGES_BODY.as_bytes()).as_deref(),
        Some("claude-sonnet-4-5")
    );
    assert_eq!(
        client_session(&h),
        Some(ClientSession {
            header: SessionHeader::ClaudeCode,
            id: "5f0c9a4e-session".into()
        })
    );
    let facts = RequestFacts::of("POST", &claude_code().target, &h, MESSAGES_BODY.as_bytes());
    assert_eq!(facts.key, claude_code().key());
    assert!(facts.stream);
    assert_eq!(facts.model.as_deref(), Some("claude-sonnet-4-5"));
    assert!(!facts.retry);
    assert_eq!(facts.idempotency_key, None);
    assert_eq!(facts.client_session, client_session(&h));
}

#[test]
fn retry_marker_rows() {
    let rows: &[(Headers, bool)] = &[
        (&[], false),
        (&[("x-stainless-retry-count", "0")], false),
        (&[("x-stainless-retry-count", "1")], true),
        (&[("X-Stainless-Retry-Count", " 2 ")], true),
        (&[("x-stainless-retry-count", "one")], false),
        (&[("x-stainless-retry-count", "-1")], false),
        (&[("retry-count", "3")], false),
    ];
    for (pairs, want) in rows {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        assert_eq!(retry_marker(&header_map(&pairs)), *want, "{pairs:?}");
    }
}

#[test]
fn idempotency_key_rows() {
    let rows: &[(Headers, Option<&str>)] = &[
        (&[], None),
        (
            &[("Idempotency-Key", "stainless-python-retry-abc")],
            Some("stainless-python-retry-abc"),
        ),
        (&[("idempotency-key", " k1 ")], Some("k1")),
        (&[("IDEMPOTENCY-KEY", "k2")], Some("k2")),
        (&[("idempotency-key", "")], None),
        (&[("x-idempotency-key", "k3")], None),
    ];
    for (pairs, want) in rows {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        assert_eq!(
            idempotency_key(&header_map(&pairs)).as_deref(),
            *want,
            "{pairs:?}"
        );
    }
}

#[test]
fn client_session_rows() {
    use SessionHeader::*;
    let rows: &[(Headers, Option<(SessionHeader, &str)>)] = &[
        (&[], None),
        (
            &[("X-Claude-Code-Session-Id", "cc-1")],
            Some((ClaudeCode, "cc-1")),
        ),
        (
            &[("session-id", "cx-1"), ("thread-id", "th-1")],
            Some((CodexSession, "cx-1")),
        ),
        (&[("thread-id", "th-1")], Some((CodexThread, "th-1"))),
        (
            &[("thread-id", "th-1"), ("x-claude-code-session-id", "cc-2")],
            Some((ClaudeCode, "cc-2")),
        ),
        (
            &[("session-id", " "), ("thread-id", "th-2")],
            Some((CodexThread, "th-2")),
        ),
        (&[("x-client-request-id", "r1")], None),
    ];
    for (pairs, want) in rows {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(n, v)| (n.to_string(), v.to_string()))
            .collect();
        let got = client_session(&header_map(&pairs)).map(|s| (s.header, s.id));
        assert_eq!(got, want.map(|(h, id)| (h, id.to_owned())), "{pairs:?}");
    }
    assert_eq!(ClaudeCode.name(), "x-claude-code-session-id");
    assert_eq!(CodexSession.name(), "session-id");
    assert_eq!(CodexThread.name(), "thread-id");
}

#[test]
fn body_fact_rows() {
    let rows: &[(&str, bool, Option<&str>)] = &[
        (r#"{"model":"m","stream":true}"#, true, Some("m")),
        (r#"{"model":"m","stream":false}"#, false, Some("m")),
        (r#"{"model":"m"}"#, false, Some("m")),
        (r#"{"stream":"true","model":7}"#, false, None),
        (r#"{"input":{"stream":true,"model":"m"}}"#, false, None),
        (r#"[{"stream":true}]"#, false, None),
        ("not json", false, None),
        ("", false, None),
    ];
    for (body, stream, model) in rows {
        assert_eq!(wants_stream(body.as_bytes()), *stream, "{body}");
        assert_eq!(
            requested_model(body.as_bytes()).as_deref(),
            *model,
            "{body}"
        );
    }
}

#[test]
fn stored_headers_hold_no_credential() {
    let req = claude_code()
        .header("authorization", "Bearer sk-ant-oauth-secret")
        .header("cookie", "session=secret")
        .header("x-cairn-token", "secret-token")
        .header("x-goog-api-key", "secret-goog")
        .header("proxy-authorization", "Basic secret");
    let kept = strip_credentials(&header_map(&req.headers));
    for (name, value) in &kept {
        assert!(!value.contains("secret"), "{name}: {value} was kept");
    }
    let names: Vec<&str> = kept.iter().map(|(n, _)| n.as_str()).collect();
    for want in [
        "anthropic-version",
        "anthropic-beta",
        "user-agent",
        "content-type",
        "x-stainless-retry-count",
        "x-claude-code-session-id",
    ] {
        assert!(names.contains(&want), "{want} was dropped: {names:?}");
    }
    let kept = strip_credentials(&header_map(&openai_sdk().headers));
    assert!(kept
        .iter()
        .any(|(n, v)| n == "openai-beta" && v == "assistants=v2"));
    assert!(!kept.iter().any(|(n, _)| n == "authorization"));
}

/// Any JSON value, with objects deep enough to reorder.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1.0e6f64..1.0e6).prop_map(Value::from),
        "[ -~é\u{1F600}\n\t\"\\\\]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_é]{0,6}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// `v` written with object keys in an order chosen by `seed` and whitespace
/// chosen by `seed` too.
fn render(v: &Value, seed: &mut u64, out: &mut String) {
    fn next(seed: &mut u64, n: u64) -> u64 {
        *seed = seed
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (*seed >> 33) % n
    }
    let ws = |seed: &mut u64| [" ", "", "\n", "\t", "  ", "\r\n"][next(seed, 6) as usize];
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            for i in (1..entries.len()).rev() {
                entries.swap(i, next(seed, i as u64 + 1) as usize);
            }
            out.push('{');
            for (i, (k, x)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(ws(seed));
                out.push_str(&serde_json::to_string(k).unwrap());
                out.push_str(ws(seed));
                out.push(':');
                out.push_str(ws(seed));
                render(x, seed, out);
            }
            out.push_str(ws(seed));
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(ws(seed));
                render(x, seed, out);
            }
            out.push_str(ws(seed));
            out.push(']');
        }
        scalar => out.push_str(&serde_json::to_string(scalar).unwrap()),
    }
}

proptest! {
    #[test]
    fn the_key_of_a_json_body_ignores_key_order_and_whitespace(
        v in json_value(),
        seed_a in any::<u64>(),
        seed_b in any::<u64>(),
    ) {
        let (mut a, mut b) = (String::new(), String::new());
        render(&v, &mut seed_a.clone(), &mut a);
        render(&v, &mut seed_b.clone(), &mut b);
        // (Compared re-read, not with `v`: serde_json's default float
        // parsing may be one ulp off the value written.)
        prop_assert_eq!(
            serde_json::from_str::<Value>(&a).unwrap(),
            serde_json::from_str::<Value>(&b).unwrap()
        );
        let h = header_map(&openai_sdk().headers);
        prop_assert_eq!(
            Key::of("POST", "/v1/chat/completions", &h, a.as_bytes()),
            Key::of("POST", "/v1/chat/completions", &h, b.as_bytes())
        );
    }
}
