//! The committed conversation, as the provider-neutral messages of a request.

use cairn_journal::{Entry, Outcome};
use cairn_model::{Message, ToolCall, ToolSpec};
use cairn_tools::ToolInfo;

/// Messages for a model request, from the fold's conversation.
pub fn messages(conversation: &[Entry]) -> Vec<Message> {
    conversation
        .iter()
        .map(|e| match e {
            Entry::User { text } => Message::User { text: text.clone() },
            Entry::Assistant { text, tool_calls } => Message::Assistant {
                text: text.clone(),
                tool_calls: tool_calls
                    .iter()
                    .map(|c| ToolCall {
                        id: c.id.clone(),
                        name: c.name.clone(),
                        arguments: c.arguments.clone(),
                    })
                    .collect(),
                thinking: Vec::new(),
                reasoning: None,
            },
            Entry::ToolResult {
                call,
                name,
                outcome,
                output,
            } => Message::ToolResult {
                call_id: call.clone(),
                name: name.clone(),
                output: match outcome {
                    Outcome::Unknown => format!("[outcome unknown] {output}"),
                    _ => output.clone(),
                },
                is_error: *outcome != Outcome::Ok,
            },
        })
        .collect()
}

/// The tool specs the model is offered.
pub fn tool_specs(infos: &[ToolInfo]) -> Vec<ToolSpec> {
    infos
        .iter()
        .map(|i| ToolSpec {
            name: i.name.to_owned(),
            description: i.description.to_owned(),
            parameters: i.parameters.clone(),
        })
        .collect()
}
