//! Where OpenAI-compatible servers put the token usage of a chat completion:
//! the one reading of it, for the chat decoder here and for the gateway's
//! record of a call (chunk by chunk, or a whole `chat.completion` body).
//!
//! The rules, in order (the first that holds gives the usage):
//!
//! 1. the object's `usage`, when it is a JSON object (OpenAI, Azure,
//!    OpenRouter, DeepSeek, xAI, vLLM, …; `null` is no usage);
//! 2. else the `usage` object of one of its `choices` (Moonshot's Kimi puts
//!    the last chunk's usage on the choice);
//! 3. else `x_groq.usage` (Groq sends only that when the request did not ask
//!    for `stream_options.include_usage`).
//!
//! From the object found: input tokens are `prompt_tokens` (cached ones
//! included), or, when that is missing, DeepSeek's
//! `prompt_cache_hit_tokens` + `prompt_cache_miss_tokens`; output tokens are
//! `completion_tokens` (reasoning included). A count that is missing is 0;
//! counts add up saturating (they are the server's word). No usage object
//! anywhere is `None`: the call's cost is then unknown, never a zero.

use serde_json::Value;

use crate::message::Usage;

/// `v` when it is a JSON object.
fn object(v: Option<&Value>) -> Option<&Value> {
    v.filter(|u| u.is_object())
}

/// The usage a chat completion chunk or body reports (module doc), if any.
///
/// ```
/// use serde_json::json;
///
/// let groq = json!({"choices": [], "x_groq": {"usage": {"prompt_tokens": 20, "completion_tokens": 3}}});
/// let usage = cairn_model::chat_completion_usage(&groq).unwrap();
/// assert_eq!((usage.input_tokens, usage.output_tokens), (20, 3));
/// assert_eq!(cairn_model::chat_completion_usage(&json!({"usage": null})), None);
/// ```
pub fn chat_completion_usage(value: &Value) -> Option<Usage> {
    let in_choice = || {
        value
            .get("choices")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find_map(|choice| object(choice.get("usage")))
    };
    let found = object(value.get("usage"))
        .or_else(in_choice)
        .or_else(|| object(value.get("x_groq").and_then(|x| x.get("usage"))))?;
    let count = |field: &str| found.get(field).and_then(Value::as_u64);
    let input = count("prompt_tokens").unwrap_or_else(|| {
        count("prompt_cache_hit_tokens")
            .unwrap_or(0)
            .saturating_add(count("prompt_cache_miss_tokens").unwrap_or(0))
    });
    Some(Usage {
        input_tokens: input,
        output_tokens: count("completion_tokens").unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn usage(input_tokens: u64, output_tokens: u64) -> Option<Usage> {
        Some(Usage {
            input_tokens,
            output_tokens,
        })
    }

    #[test]
    fn each_documented_place_is_read_in_order() {
        let rows = [
            (json!({}), None),
            (json!({"usage": null, "choices": []}), None),
            (json!({"x_groq": {"id": "req_1"}}), None),
            (
                json!({"usage": {"prompt_tokens": 5, "completion_tokens": 2}}),
                usage(5, 2),
            ),
            (
                json!({"usage": {"prompt_cache_hit_tokens": 256, "prompt_cache_miss_tokens": 56, "completion_tokens": 9}}),
                usage(312, 9),
            ),
            (
                json!({"usage": {"prompt_tokens": 312, "prompt_cache_hit_tokens": 256, "prompt_cache_miss_tokens": 56}}),
                usage(312, 0),
            ),
            (
                json!({"choices": [{"index": 0, "usage": {"prompt_tokens": 19, "completion_tokens": 13}}]}),
                usage(19, 13),
            ),
            (
                json!({"x_groq": {"usage": {"prompt_tokens": 20, "completion_tokens": 3}}}),
                usage(20, 3),
            ),
            (
                json!({"usage": {"prompt_tokens": 1, "completion_tokens": 1},
                       "x_groq": {"usage": {"prompt_tokens": 20, "completion_tokens": 3}}}),
                usage(1, 1),
            ),
            (
                json!({"usage": {"prompt_cache_hit_tokens": u64::MAX, "prompt_cache_miss_tokens": 2}}),
                usage(u64::MAX, 0),
            ),
        ];
        for (value, want) in rows {
            assert_eq!(chat_completion_usage(&value), want, "{value}");
        }
    }
}
