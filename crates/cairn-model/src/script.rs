//! The scripted provider: replays a file of turns, for tests, demos and offline use.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::error::ModelError;
use crate::message::{
    ModelRequest, ModelResponse, Reasoning, Stop, StreamSink, Thinking, ToolCall, Usage,
};
use crate::provider::{env_var, Provider, ProviderConfig};

/// One turn of a script file.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct Turn {
    #[serde(default)]
    text: String,
    #[serde(default)]
    tool_calls: Vec<ScriptCall>,
    #[serde(default)]
    usage: Usage,
    #[serde(default)]
    stop_reason: Option<String>,
    #[serde(default)]
    refusal: Option<String>,
    #[serde(default)]
    thinking: Vec<Thinking>,
    #[serde(default)]
    reasoning: Option<Reasoning>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptCall {
    #[serde(default)]
    id: Option<String>,
    name: String,
    #[serde(default = "empty_object")]
    arguments: serde_json::Value,
}

fn empty_object() -> serde_json::Value {
    serde_json::Value::Object(serde_json::Map::new())
}

#[derive(Debug, Deserialize)]
struct Script {
    turns: Vec<Turn>,
}

/// Replays a script file: model call `k` of a run (the request's
/// [`ModelRequest::turn`]) is answered with turn `k` of the file.
///
/// The file is `{"turns": [TURN, ...]}` with TURN `{"text": "...", "tool_calls":
/// [{"id": "...", "name": "...", "arguments": {...}}], "usage": {"input_tokens": N,
/// "output_tokens": N}}`. Every field of a turn is optional (empty text, no calls,
/// zero usage); a call without an `id` gets `call_{turn}_{n}`, without `arguments`
/// gets `{}` (any other JSON value is replayed as it is, so a string stands for
/// arguments that are not a JSON object). Unknown fields in a turn are an error,
/// so that a typo such as `tool_call` is caught rather than silently replayed as
/// a final turn.
///
/// A turn may also say what a real provider adds beside the text, so that an
/// agent's handling of it can be tested offline:
///
/// - `"stop_reason": "..."`, in a provider's words (`max_tokens`, `length`,
///   `content_filter`, `refusal`, ...). Without it the stop reason is
///   `refusal` when the turn has a refusal, `tool_use` when it calls tools,
///   else `end_turn`. The [`Stop`] is derived from it ([`Stop::from_reason`]).
/// - `"refusal": "..."`: the model's refusal; the stop is then
///   [`Stop::Refused`] whatever the stop reason says.
/// - `"thinking": [{"type": "thinking", "thinking": "...", "signature": "..."},
///   {"type": "redacted_thinking", "data": "..."}]`: [`Thinking`] blocks.
/// - `"reasoning": {"text": "...", "field": "reasoning_content", "details":
///   [...]}`: [`Reasoning`].
///
/// The file is read and checked once, when the provider is built. The text is sent
/// to the sink word by word, with an optional pause between words.
#[derive(Debug)]
pub struct ScriptProvider {
    path: PathBuf,
    model: String,
    turns: Vec<Turn>,
    delay: Duration,
}

impl ScriptProvider {
    /// Reads the script at `path`. The pause between words is
    /// [`ProviderConfig::script_delay`], else `CAIRN_SCRIPT_DELAY_MS`, else none.
    ///
    /// # Errors
    ///
    /// As [`ScriptProvider::open`].
    pub fn from_env(
        path: impl AsRef<Path>,
        config: &ProviderConfig,
    ) -> Result<ScriptProvider, ModelError> {
        let delay = config.script_delay.unwrap_or_else(|| {
            env_var("CAIRN_SCRIPT_DELAY_MS")
                .and_then(|ms| ms.trim().parse::<u64>().ok())
                .map(Duration::from_millis)
                .unwrap_or(Duration::ZERO)
        });
        ScriptProvider::open(path, delay)
    }

    /// Reads the script at `path`, pausing `delay` between streamed words.
    ///
    /// # Errors
    ///
    /// [`ModelError::ScriptRead`] when the file cannot be read,
    /// [`ModelError::ScriptParse`] when it is not a valid script.
    pub fn open(path: impl AsRef<Path>, delay: Duration) -> Result<ScriptProvider, ModelError> {
        let path = path.as_ref().to_path_buf();
        let bytes = std::fs::read(&path).map_err(|source| ModelError::ScriptRead {
            path: path.clone(),
            source,
        })?;
        let script: Script =
            serde_json::from_slice(&bytes).map_err(|e| ModelError::ScriptParse {
                path: path.clone(),
                message: e.to_string(),
            })?;
        Ok(ScriptProvider {
            model: path.display().to_string(),
            path,
            turns: script.turns,
            delay,
        })
    }

    /// How many turns the script holds.
    pub fn turns(&self) -> usize {
        self.turns.len()
    }
}

#[async_trait::async_trait]
impl Provider for ScriptProvider {
    fn kind(&self) -> &'static str {
        "script"
    }

    fn model(&self) -> &str {
        &self.model
    }

    fn base_url(&self) -> Option<&str> {
        None
    }

    async fn complete(
        &self,
        request: &ModelRequest,
        sink: &mut dyn StreamSink,
    ) -> Result<ModelResponse, ModelError> {
        if request.turn == 0 {
            return Err(ModelError::InvalidRequest {
                reason: "turn 0 requested, but turns are counted from 1".to_owned(),
            });
        }
        let turn = usize::try_from(request.turn - 1)
            .ok()
            .and_then(|index| self.turns.get(index))
            .ok_or_else(|| ModelError::ScriptExhausted {
                path: self.path.clone(),
                turn: request.turn,
                turns: self.turns.len(),
            })?;
        for (n, word) in turn.text.split_inclusive(' ').enumerate() {
            if n > 0 && !self.delay.is_zero() {
                tokio::time::sleep(self.delay).await;
            }
            sink.text(word);
        }
        let tool_calls: Vec<ToolCall> = turn
            .tool_calls
            .iter()
            .enumerate()
            .map(|(n, call)| {
                let id = call
                    .id
                    .clone()
                    .unwrap_or_else(|| format!("call_{}_{}", request.turn, n + 1));
                ToolCall::new(id, call.name.clone(), call.arguments.clone())
            })
            .collect();
        let stop_reason = match (&turn.stop_reason, &turn.refusal) {
            (Some(given), _) => given.clone(),
            (None, Some(_)) => "refusal".to_owned(),
            (None, None) if tool_calls.is_empty() => "end_turn".to_owned(),
            (None, None) => "tool_use".to_owned(),
        };
        let stop = match turn.refusal {
            Some(_) => Stop::Refused,
            None => Stop::from_reason(Some(&stop_reason)),
        };
        let refusal = match (&turn.refusal, stop) {
            (Some(refusal), _) => Some(refusal.clone()),
            (None, Stop::Refused) => Some(crate::message::refusal_from_text(&turn.text, None)),
            (None, _) => None,
        };
        Ok(ModelResponse {
            text: turn.text.clone(),
            tool_calls,
            usage: Some(turn.usage),
            model: self.model.clone(),
            stop,
            stop_reason: Some(stop_reason),
            refusal,
            thinking: turn.thinking.clone(),
            reasoning: turn.reasoning.clone(),
            stop_details: None,
            items: Vec::new(),
        })
    }
}
