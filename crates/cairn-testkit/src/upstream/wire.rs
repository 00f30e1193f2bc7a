//! What the APIs' renderers share: the rendered answer, SSE framing, the
//! fixed ids and times that make one reply the same bytes every time.

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::script::{Kind, Reasoning, RecordedRequest, Reply, ToolCall, Usage};

/// The `created` time of every answer (2026-01-01T00:00:00Z): fixed, so the
/// same reply is the same bytes.
pub(crate) const CREATED: u64 = 1_767_225_600;

/// An answer ready to send.
pub(crate) enum Rendered {
    /// One body with its status and content type.
    Whole {
        status: u16,
        content_type: &'static str,
        body: Vec<u8>,
    },
    /// SSE events, each complete with its blank line, sent one by one.
    Stream { events: Vec<Vec<u8>> },
}

impl Rendered {
    pub(crate) fn json(status: u16, body: &Value) -> Rendered {
        Rendered::Whole {
            status,
            content_type: "application/json",
            body: body.to_string().into_bytes(),
        }
    }
}

/// `data: {json}` and its blank line (Chat Completions' framing).
pub(crate) fn data_event(data: &Value) -> Vec<u8> {
    format!("data: {data}\n\n").into_bytes()
}

/// `event: NAME`, `data: {json}` and the blank line (Responses' and
/// Messages' framing).
pub(crate) fn named_event(name: &str, data: &Value) -> Vec<u8> {
    format!("event: {name}\ndata: {data}\n\n").into_bytes()
}

/// `body` cut into its SSE blocks, each with the blank line that ends it
/// (`\n\n`, `\r\n\r\n` or `\r\r`); bytes after the last blank line are a
/// last piece. The pieces join to `body`.
pub(crate) fn sse_blocks(body: &[u8]) -> Vec<Vec<u8>> {
    let mut blocks = Vec::new();
    let mut start = 0;
    let mut i = 0;
    while i < body.len() {
        let ends = match &body[i..] {
            [b'\n', b'\n', ..] | [b'\r', b'\r', ..] => Some(i + 2),
            [b'\r', b'\n', b'\r', b'\n', ..] => Some(i + 4),
            _ => None,
        };
        match ends {
            Some(end) => {
                blocks.push(body[start..end].to_vec());
                start = end;
                i = end;
            }
            None => i += 1,
        }
    }
    if start < body.len() {
        blocks.push(body[start..].to_vec());
    }
    blocks
}

/// The content of an answer, with its defaults filled in from the request.
pub(crate) struct Answer<'a> {
    pub(crate) pieces: &'a [String],
    pub(crate) tools: &'a [ToolCall],
    pub(crate) model: String,
    pub(crate) usage: Usage,
    /// 12 hex digits of the content's hash: the default id's tail.
    pub(crate) tag: String,
    pub(crate) id: Option<&'a str>,
    pub(crate) stop: Option<&'a str>,
    pub(crate) reasoning: Option<&'a Reasoning>,
}

impl<'a> Answer<'a> {
    /// `None` for a failing reply.
    pub(crate) fn of(reply: &'a Reply, req: &RecordedRequest) -> Option<Answer<'a>> {
        let Kind::Answer { pieces, tools } = &reply.kind else {
            return None;
        };
        let mut hash = Sha256::new();
        for piece in pieces {
            hash.update(piece.as_bytes());
            hash.update([0]);
        }
        for tool in tools {
            hash.update(tool.id.as_bytes());
            hash.update(tool.name.as_bytes());
            hash.update(arguments_text(tool).as_bytes());
        }
        if let Some(r) = &reply.reasoning {
            hash.update(r.summary.as_bytes());
            hash.update([0]);
            hash.update(r.encrypted_content.as_bytes());
        }
        let arg_pieces: usize = tools.iter().map(|t| argument_pieces(t).len()).sum();
        let usage = reply.usage.unwrap_or(Usage {
            input_tokens: 25,
            output_tokens: (pieces.len() + arg_pieces).max(1) as u64,
            cached_input_tokens: 0,
        });
        Some(Answer {
            pieces,
            tools,
            model: reply
                .model
                .clone()
                .or_else(|| req.model())
                .unwrap_or_else(|| "mock-model".to_owned()),
            usage,
            tag: hex::encode(&hash.finalize()[..6]),
            id: reply.id.as_deref(),
            stop: reply.stop.as_deref(),
            reasoning: reply.reasoning.as_ref(),
        })
    }

    pub(crate) fn text(&self) -> String {
        self.pieces.concat()
    }

    /// The reply's id, or `prefix` and the content's tag.
    pub(crate) fn id_or(&self, prefix: &str) -> String {
        match self.id {
            Some(id) => id.to_owned(),
            None => format!("{prefix}{}", self.tag),
        }
    }
}

/// A tool call's arguments as the JSON text OpenAI sends: the raw text
/// when the reply gave one.
pub(crate) fn arguments_text(tool: &ToolCall) -> String {
    match &tool.raw {
        Some(raw) => raw.clone(),
        None => tool.arguments.to_string(),
    }
}

/// The arguments' text in pieces of at most 16 bytes, cut at character
/// boundaries: streamed tool input arrives in pieces, never whole.
pub(crate) fn argument_pieces(tool: &ToolCall) -> Vec<String> {
    let text = arguments_text(tool);
    let mut pieces = Vec::new();
    let mut current = String::new();
    for c in text.chars() {
        if current.len() + c.len_utf8() > 16 {
            pieces.push(std::mem::take(&mut current));
        }
        current.push(c);
    }
    if !current.is_empty() {
        pieces.push(current);
    }
    pieces
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn sse_blocks_cut_after_each_blank_line_and_join_to_the_body() {
        let rows: &[(&[u8], &[&[u8]])] = &[
            (b"", &[]),
            (b"data: a\n\ndata: b\n\n", &[b"data: a\n\n", b"data: b\n\n"]),
            (
                b"event: x\r\ndata: 1\r\n\r\ndata: 2",
                &[b"event: x\r\ndata: 1\r\n\r\n", b"data: 2"],
            ),
            (b"data: a\r\rtail", &[b"data: a\r\r", b"tail"]),
        ];
        for (body, want) in rows {
            let got = sse_blocks(body);
            assert_eq!(got, *want, "{:?}", String::from_utf8_lossy(body));
            assert_eq!(got.concat(), *body);
        }
    }

    #[test]
    fn argument_pieces_join_to_the_arguments_and_stay_small() {
        let tool = ToolCall {
            id: "call_1".into(),
            name: "write_file".into(),
            arguments: json!({"path": "ä/b.txt", "content": "ünïcödé text that is long"}),
            raw: None,
        };
        let pieces = argument_pieces(&tool);
        assert!(pieces.len() > 3);
        assert!(pieces.iter().all(|p| !p.is_empty() && p.len() <= 16));
        assert_eq!(pieces.concat(), arguments_text(&tool));
    }
}
