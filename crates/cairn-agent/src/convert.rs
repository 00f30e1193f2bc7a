//! Between the journal and the model: the committed conversation as the
//! provider-neutral messages of a request, a model's response as the
//! `assistant` record, and what an answer's stop means for the loop.
//!
//! Rules:
//! 1. What the model said is sent back as it said it: text, tool calls
//!    (their arguments' own text, spaces and key order included), thinking
//!    blocks (signatures and redacted blocks included) and reasoning, so a
//!    resumed run sends exactly what a continuous one would, and what the
//!    provider produced.
//! 2. A tool call whose arguments are not a JSON object (cut off at the
//!    output limit, or not valid JSON) was never run. It is left out of the
//!    assistant message sent back — its arguments would be an input the model
//!    never produced — and its `tool_result` (which says why it was not run)
//!    is sent as a user message instead, so the API's pairing of calls and
//!    results holds.
//! 3. A call is priced and recorded by the model that answered; the model
//!    asked for is recorded too when it differs.

use std::collections::HashSet;

use cairn_journal::{Assistant, Cost, Entry, Outcome, ToolCall as RecordedCall, Usage};
use cairn_model::{Message, ModelResponse, Stop, ToolCall, ToolSpec};
use cairn_tools::ToolInfo;

/// Messages for a model request, from the fold's conversation.
pub fn messages(conversation: &[Entry]) -> Vec<Message> {
    let mut not_run: HashSet<&str> = HashSet::new();
    let mut out = Vec::with_capacity(conversation.len());
    for e in conversation {
        out.push(match e {
            Entry::User { text, .. } => Message::User { text: text.clone() },
            Entry::Assistant {
                text,
                tool_calls,
                thinking,
                reasoning,
                items,
            } => {
                let mut sent = Vec::with_capacity(tool_calls.len());
                for c in tool_calls {
                    if runnable(c) {
                        sent.push(ToolCall {
                            id: c.id.clone(),
                            name: c.name.clone(),
                            arguments: c.arguments.clone(),
                            raw_arguments: c.raw_arguments.clone(),
                        });
                    } else {
                        not_run.insert(c.id.as_str());
                    }
                }
                Message::Assistant {
                    text: text.clone(),
                    tool_calls: sent,
                    thinking: thinking.iter().map(thinking_to_model).collect(),
                    reasoning: reasoning.as_ref().map(|r| cairn_model::Reasoning {
                        text: r.text.clone(),
                        field: r.field.clone(),
                        details: r.details.clone(),
                    }),
                    items: items.clone(),
                }
            }
            Entry::ToolResult { call, output, .. } if not_run.contains(call.as_str()) => {
                Message::User {
                    text: output.clone(),
                }
            }
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
                    // A declined call is an error to the model, in the words
                    // of its result (which say it was not run).
                    Outcome::Ok | Outcome::Error | Outcome::Refused => output.clone(),
                },
                is_error: *outcome != Outcome::Ok,
            },
        });
    }
    out
}

/// Whether a recorded call may be dispatched: its arguments are a JSON
/// object, as every tool's schema requires.
pub fn runnable(call: &RecordedCall) -> bool {
    call.arguments.is_object()
}

/// What the model is told, as the call's `tool_result`, about a call that
/// is not run ([`runnable`] is false); `stop_reason` is its turn's.
pub fn not_run_message(call: &RecordedCall, stop_reason: Option<&str>) -> String {
    let shown = match &call.arguments {
        serde_json::Value::String(raw) => raw.clone(),
        other => other.to_string(),
    };
    let shown: String = shown.chars().take(200).collect();
    if Stop::from_reason(stop_reason) == Stop::Truncated {
        format!(
            "cairn: your `{}` call ({}) was NOT run: your answer was cut off at the output limit (stop reason `{}`) while you were writing its arguments, so they are incomplete (they began: {shown}). Make the call again with shorter arguments — for a long file, write it in parts.",
            call.name,
            call.id,
            stop_reason.unwrap_or("")
        )
    } else {
        format!(
            "cairn: your `{}` call ({}) was NOT run: its arguments are not a JSON object (they were: {shown}). Make the call again with a JSON object of arguments.",
            call.name, call.id
        )
    }
}

/// Why an answer without tool calls did not finish the task, from its stop
/// reason and refusal; `None` when it did.
pub fn unfinished(stop_reason: Option<&str>, refusal: Option<&str>) -> Option<String> {
    if let Some(r) = refusal {
        return Some(format!("the model refused: {r}"));
    }
    match Stop::from_reason(stop_reason) {
        Stop::Refused => Some("the model refused (stop reason `refusal`)".into()),
        Stop::Filtered => Some(format!(
            "the provider's content filter stopped the answer (stop reason `{}`)",
            stop_reason.unwrap_or("")
        )),
        Stop::Truncated => Some(format!(
            "the model's answer was cut off at its output limit (stop reason `{}`); resume with a follow-up such as \"continue\" to let it go on",
            stop_reason.unwrap_or("")
        )),
        _ => None,
    }
}

/// The usage a provider reported, as the journal records it (`None`: it
/// reported none, and the call's cost is unknown, never zero).
pub(crate) fn usage(reported: Option<cairn_model::Usage>) -> Option<Usage> {
    reported.map(|u| Usage {
        input_tokens: u.input_tokens,
        output_tokens: u.output_tokens,
    })
}

/// The `assistant` record of `response`, asked of model `requested`.
pub fn assistant_record(
    response: ModelResponse,
    requested: &str,
    cost: Cost,
    replay: bool,
) -> Assistant {
    let answered = Some(response.model).filter(|m| !m.is_empty());
    let requested_model = answered
        .as_deref()
        .filter(|a| *a != requested)
        .map(|_| requested.to_owned());
    Assistant {
        text: response.text,
        tool_calls: response
            .tool_calls
            .into_iter()
            .map(|c| RecordedCall {
                id: c.id,
                name: c.name,
                arguments: c.arguments,
                raw_arguments: c.raw_arguments,
            })
            .collect(),
        // No usage reported: zero tokens counted, and the cost says unknown.
        usage: usage(response.usage).unwrap_or_default(),
        cost,
        replay,
        model: answered,
        requested_model,
        stop_reason: response.stop_reason,
        refusal: response.refusal,
        stop_details: response.stop_details,
        thinking: response.thinking.iter().map(thinking_to_record).collect(),
        reasoning: response
            .reasoning
            .filter(|r| !r.is_empty())
            .map(|r| cairn_journal::Reasoning {
                text: r.text,
                field: r.field,
                details: r.details,
            }),
        items: response.items,
    }
}

fn thinking_to_model(t: &cairn_journal::Thinking) -> cairn_model::Thinking {
    match t {
        cairn_journal::Thinking::Thinking {
            thinking,
            signature,
        } => cairn_model::Thinking::Thinking {
            thinking: thinking.clone(),
            signature: signature.clone(),
        },
        cairn_journal::Thinking::RedactedThinking { data } => {
            cairn_model::Thinking::RedactedThinking { data: data.clone() }
        }
    }
}

fn thinking_to_record(t: &cairn_model::Thinking) -> cairn_journal::Thinking {
    match t {
        cairn_model::Thinking::Thinking {
            thinking,
            signature,
        } => cairn_journal::Thinking::Thinking {
            thinking: thinking.clone(),
            signature: signature.clone(),
        },
        cairn_model::Thinking::RedactedThinking { data } => {
            cairn_journal::Thinking::RedactedThinking { data: data.clone() }
        }
    }
}

/// The tool specs the model is offered.
pub fn tool_specs(infos: &[ToolInfo]) -> Vec<ToolSpec> {
    infos
        .iter()
        .map(|i| ToolSpec {
            name: i.name.to_string(),
            description: i.description.to_string(),
            parameters: i.parameters.clone(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn call(id: &str, arguments: serde_json::Value) -> RecordedCall {
        RecordedCall {
            id: id.into(),
            name: "write_file".into(),
            arguments,
            raw_arguments: None,
        }
    }

    #[test]
    fn a_call_that_was_not_run_is_not_sent_back_and_its_result_reaches_the_model() {
        let conversation = vec![
            Entry::User {
                text: "go".into(),
                note: false,
            },
            Entry::Assistant {
                text: "writing".into(),
                tool_calls: vec![
                    call("a", json!({"path": "x", "content": "1"})),
                    call("b", json!("{\"path\": \"y\", \"cont")),
                ],
                thinking: vec![],
                reasoning: None,
                items: Vec::new(),
            },
            Entry::ToolResult {
                call: "a".into(),
                name: "write_file".into(),
                outcome: Outcome::Ok,
                output: "wrote".into(),
            },
            Entry::ToolResult {
                call: "b".into(),
                name: "write_file".into(),
                outcome: Outcome::Error,
                output: "cairn: not run".into(),
            },
        ];
        let m = messages(&conversation);
        match &m[1] {
            Message::Assistant { tool_calls, .. } => {
                assert_eq!(tool_calls.len(), 1);
                assert_eq!(tool_calls[0].id, "a");
            }
            other => panic!("{other:?}"),
        }
        assert!(matches!(&m[2], Message::ToolResult { call_id, .. } if call_id == "a"));
        assert_eq!(m[3], Message::user("cairn: not run"));
    }

    #[test]
    fn a_refused_call_reaches_the_model_as_an_error_in_its_own_words() {
        let declined = "cairn: the user declined this shell call; it was not run.";
        let conversation = vec![
            Entry::Assistant {
                text: String::new(),
                tool_calls: vec![call("a", json!({"command": "rm -rf x"}))],
                thinking: vec![],
                reasoning: None,
                items: Vec::new(),
            },
            Entry::ToolResult {
                call: "a".into(),
                name: "shell".into(),
                outcome: Outcome::Refused,
                output: declined.into(),
            },
        ];
        assert_eq!(
            messages(&conversation)[1],
            Message::ToolResult {
                call_id: "a".into(),
                name: "shell".into(),
                output: declined.into(),
                is_error: true,
            }
        );
    }

    #[test]
    fn the_stop_decides_what_an_answer_without_calls_means() {
        let rows: [(Option<&str>, Option<&str>, Option<&str>); 8] = [
            (Some("stop"), None, None),
            (Some("end_turn"), None, None),
            (None, None, None),
            (
                Some("stop"),
                Some("I can't help with that."),
                Some("refused"),
            ),
            (Some("refusal"), None, Some("refused")),
            (Some("length"), None, Some("cut off")),
            (Some("max_tokens"), None, Some("cut off")),
            (Some("content_filter"), None, Some("content filter")),
        ];
        for (reason, refusal, want) in rows {
            let got = unfinished(reason, refusal);
            match want {
                None => assert_eq!(got, None, "{reason:?}"),
                Some(w) => assert!(
                    got.as_deref().is_some_and(|g| g.contains(w)),
                    "{reason:?}: {got:?}"
                ),
            }
        }
    }

    #[test]
    fn a_cut_off_call_is_explained_as_cut_off() {
        let c = call("b", json!("{\"path\": \"y\", \"cont"));
        assert!(!runnable(&c));
        assert!(not_run_message(&c, Some("length")).contains("cut off"));
        assert!(not_run_message(&c, Some("stop")).contains("not a JSON object"));
        assert!(runnable(&call("a", json!({}))));
    }

    #[test]
    fn the_answering_model_is_recorded_and_the_requested_one_when_it_differs() {
        let response = ModelResponse {
            model: "gpt-4o-mini-2024-07-18".into(),
            ..ModelResponse::default()
        };
        let r = assistant_record(response, "gpt-4o", Cost::ZERO, false);
        assert_eq!(r.model.as_deref(), Some("gpt-4o-mini-2024-07-18"));
        assert_eq!(r.requested_model.as_deref(), Some("gpt-4o"));
        let same = ModelResponse {
            model: "gpt-4o".into(),
            ..ModelResponse::default()
        };
        assert_eq!(
            assistant_record(same, "gpt-4o", Cost::ZERO, false).requested_model,
            None
        );
    }
}
