//! What the APIs' renderers share: the rendered answer, SSE framing, the
//! fixed ids and times that make one reply the same bytes every time.

use serde_json::Value;
use sha2::{Digest, Sha256};

use super::script::{Kind, RecordedRequest, Reply, ToolCall, Usage};

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
            hash.update(tool.arguments.to_string().as_bytes());
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

/// A tool call's arguments as the JSON text OpenAI sends.
pub(crate) fn arguments_text(tool: &ToolCall) -> String {
    tool.arguments.to_string()
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
    fn argument_pieces_join_to_the_arguments_and_stay_small() {
        let tool = ToolCall {
            id: "call_1".into(),
            name: "write_file".into(),
            arguments: json!({"path": "ä/b.txt", "content": "ünïcödé text that is long"}),
        };
        let pieces = argument_pieces(&tool);
        assert!(pieces.len() > 3);
        assert!(pieces.iter().all(|p| !p.is_empty() && p.len() <= 16));
        assert_eq!(pieces.concat(), arguments_text(&tool));
    }
}
