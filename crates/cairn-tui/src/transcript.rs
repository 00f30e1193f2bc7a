//! The transcript as the screen shows it: one [`Cell`] per block (a
//! message, a tool call with its outcome, a notice, a command's answer),
//! built from a session's conversation, and the cost lines of `/cost`.

use cairn_journal::{Entry, Outcome, Totals};

/// One block of the transcript.
#[derive(Clone, Debug, PartialEq)]
pub enum Cell {
    /// What the user sent.
    User(String),
    /// What the model said; `streaming` while it arrives.
    Assistant {
        /// The text.
        text: String,
        /// Still arriving.
        streaming: bool,
    },
    /// A tool call.
    Tool {
        /// Call id.
        id: String,
        /// Tool name.
        name: String,
        /// Arguments, as one line of JSON.
        args: String,
        /// `None` while it runs.
        outcome: Option<Outcome>,
        /// Its output.
        output: String,
    },
    /// Something cairn says.
    Notice(String),
    /// A command's answer.
    Info {
        /// Title.
        title: String,
        /// Lines.
        lines: Vec<String>,
    },
    /// A failure.
    Error(String),
}

/// The transcript of a conversation, as cells.
pub fn cells_of(conversation: &[Entry], pending: &[cairn_journal::PendingCall]) -> Vec<Cell> {
    let mut cells = Vec::with_capacity(conversation.len());
    let mut names: std::collections::HashMap<&str, usize> = std::collections::HashMap::new();
    for e in conversation {
        match e {
            Entry::User { text, note: true } => cells.push(Cell::Notice(
                text.strip_prefix(cairn_journal::NOTE_PREFIX)
                    .unwrap_or(text)
                    .to_owned(),
            )),
            Entry::User { text, .. } => cells.push(Cell::User(text.clone())),
            Entry::Assistant {
                text, tool_calls, ..
            } => {
                if !text.is_empty() {
                    cells.push(Cell::Assistant {
                        text: text.clone(),
                        streaming: false,
                    });
                }
                for c in tool_calls {
                    names.insert(c.id.as_str(), cells.len());
                    cells.push(Cell::Tool {
                        id: c.id.clone(),
                        name: c.name.clone(),
                        args: c.arguments.to_string(),
                        outcome: None,
                        output: String::new(),
                    });
                }
            }
            Entry::ToolResult {
                call,
                outcome,
                output,
                ..
            } => {
                if let Some(&i) = names.get(call.as_str()) {
                    if let Some(Cell::Tool {
                        outcome: o,
                        output: out,
                        ..
                    }) = cells.get_mut(i)
                    {
                        *o = Some(*outcome);
                        *out = output.clone();
                    }
                }
            }
        }
    }
    for p in pending {
        if let Some(&i) = names.get(p.call.id.as_str()) {
            if let Some(Cell::Tool { output, .. }) = cells.get_mut(i) {
                *output = if p.started {
                    "in flight when the last process stopped: not resolved yet (continue the session)".into()
                } else {
                    "never started: it runs when the session continues".into()
                };
            }
        }
    }
    cells
}

/// What `/cost` shows.
pub fn cost_lines(t: &Totals) -> Vec<String> {
    vec![
        format!("{} model turn(s), {} tool call(s)", t.turns, t.tool_calls),
        format!(
            "{} input + {} output = {} tokens",
            t.input_tokens,
            t.output_tokens,
            t.tokens()
        ),
        format!("cost {}", cost(t)),
    ]
}

/// The cost of `t` for people ([`cairn_journal::Cost::for_people`]).
pub fn cost(t: &Totals) -> String {
    t.cost.for_people()
}
