//! Which request paths the gateway routes at all (DESIGN §7): a path that
//! an upstream (or the URL parser on the way to it) could read as another
//! path is refused before routing, so no recorded call can be disguised as
//! a pass-through one and bought unjournaled.
//!
//! Rules, for every path but `/` (the probe), on the path without its query:
//! 1. it starts with `/` and no segment is empty (`//`, a trailing `/`);
//! 2. every `%` starts a two-digit hex escape, and no escape decodes to `%`
//!    (a double encoding another hop would decode again);
//! 3. no segment decodes to a control character, `/` or `\` (separators
//!    hidden from this router but not from the next one), or to anything
//!    but printable ASCII (a server that folds Unicode reads `％２ｅ` or a
//!    fullwidth `．．` as a dot);
//! 4. no segment, decoded and cut at its first `;` (a parameter some
//!    servers strip), is made of dots only (`.`, `..`, `%2e%2e`, `..;x`);
//! 5. a path that is not exactly a recorded route but reads as one once
//!    decoded, cut at `;` and lower-cased (`/v1/Chat/Completions`,
//!    `/v1/chat/c%6fmpletions`, `/v1/messages;x`) is refused, not passed
//!    through.

use crate::forms::Api;

/// Why `path` is refused, or `None` when it may be routed.
pub(crate) fn refusal(path: &str) -> Option<&'static str> {
    if path == "/" {
        return None;
    }
    let Some(rest) = path.strip_prefix('/') else {
        return Some("it does not start with /");
    };
    let mut normal = String::with_capacity(path.len());
    for segment in rest.split('/') {
        if segment.is_empty() {
            return Some("it has an empty segment (// or a trailing /)");
        }
        let Some(decoded) = decode(segment) else {
            return Some("it has a % that is not a two-digit hex escape");
        };
        if decoded.contains(&b'%') {
            return Some("it has an escaped % (a double encoding)");
        }
        if decoded
            .iter()
            .any(|&b| b == b'/' || b == b'\\' || b < 0x20 || b == 0x7f)
        {
            return Some("it has an escaped separator or control character");
        }
        if !decoded.is_ascii() {
            return Some("it has a character that is not ASCII");
        }
        let bare = decoded.split(|&b| b == b';').next().unwrap_or(&decoded[..]);
        if bare.iter().all(|&b| b == b'.') {
            return Some("it has a dot segment (. or ..)");
        }
        normal.push('/');
        normal.push_str(&String::from_utf8_lossy(bare).to_ascii_lowercase());
    }
    if Api::of_path(path).is_none() && Api::of_path(&normal).is_some() {
        return Some("it reads as a recorded route without being one exactly");
    }
    None
}

/// `segment` with its percent escapes decoded; `None` when a `%` is not
/// followed by two hex digits.
fn decode(segment: &str) -> Option<Vec<u8>> {
    let bytes = segment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = bytes.get(i + 1..i + 3)?;
            let hex = std::str::from_utf8(hex).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::refusal;

    #[test]
    fn paths_that_could_be_read_as_another_are_refused() {
        let allowed = [
            "/",
            "/v1",
            "/v1/models",
            "/v1/models/gpt-4o-mini",
            "/v1/models/ft:gpt-4o-mini:org::abc",
            "/v1/chat/completions",
            "/v1/responses",
            "/v1/messages",
            "/v1/messages/count_tokens",
            "/v1/files/file-abc/content",
            "/v1/models/meta-llama/Llama-3-8B",
            "/v1/models/a%20b",
            "/v1/x.y",
            "/v1/.well-known",
            "/v1/chat/completions/chatcmpl-1",
            "/other",
        ];
        for p in allowed {
            assert_eq!(refusal(p), None, "{p}");
        }
        let refused = [
            ("", "start"),
            ("*", "start"),
            ("/v1/x/../chat/completions", "dot"),
            ("/v1/./chat/completions", "dot"),
            ("/v1/..", "dot"),
            ("/v1/...", "dot"),
            ("/v1/x/%2e%2e/chat/completions", "dot"),
            ("/v1/x/%2E%2E/chat/completions", "dot"),
            ("/v1/x/.%2e/chat/completions", "dot"),
            ("/v1/%2e/chat/completions", "dot"),
            ("/v1/x/..;/chat/completions", "dot"),
            ("/v1/x/%2e%2e%3b/chat/completions", "dot"),
            ("/v1//chat/completions", "empty"),
            ("//v1/chat/completions", "empty"),
            ("/v1/chat/completions/", "empty"),
            ("/v1/models/", "empty"),
            ("/v1/chat%2Fcompletions", "separator"),
            ("/v1/chat%2fcompletions", "separator"),
            ("/v1/chat%5Ccompletions", "separator"),
            ("/v1/x%00/models", "separator"),
            ("/v1/x/%252e%252e/chat/completions", "double"),
            ("/v1/chat/completions%", "hex"),
            ("/v1/chat/completions%2", "hex"),
            ("/v1/chat/completions%zz", "hex"),
            ("/v1/Chat/Completions", "reads as"),
            ("/V1/messages", "reads as"),
            ("/v1/chat/c%6fmpletions", "reads as"),
            ("/v1/messages;x", "reads as"),
            ("/v1/responses;", "reads as"),
            ("/v1/x/%EF%BC%8E%EF%BC%8E/chat/completions", "ASCII"),
            ("/v1/x/\u{ff0e}\u{ff0e}/chat/completions", "ASCII"),
            ("/v1/models/caf%C3%A9", "ASCII"),
        ];
        for (p, why) in refused {
            let got = refusal(p).unwrap_or_else(|| panic!("{p} was allowed"));
            assert!(got.contains(why), "{p}: {got}");
        }
    }
}
