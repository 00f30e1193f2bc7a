//! The `Provider` trait, model specs, configuration, and building a provider.

use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::time::Duration;

use crate::anthropic::AnthropicProvider;
use crate::error::ModelError;
use crate::message::{ModelRequest, ModelResponse, StreamSink};
use crate::openai::OpenAiProvider;
use crate::responses::OpenAiResponsesProvider;
use crate::script::ScriptProvider;

/// A source of model turns.
///
/// Implementations stream text to the sink as it arrives and return the whole
/// response once it is complete. Transient failures are retried inside `complete`
/// according to the provider's [`RetryPolicy`]; an error returned from it is final.
#[async_trait::async_trait]
pub trait Provider: Send + Sync {
    /// `script`, `openai`, `openai-responses` or `anthropic`.
    fn kind(&self) -> &'static str;

    /// Whose prices apply, as a price table names them: the kind, except
    /// `openai` for both of OpenAI's APIs.
    fn vendor(&self) -> &'static str {
        self.kind()
    }

    /// The model name sent to the provider (for `script`, the script's path).
    fn model(&self) -> &str;

    /// The base URL requests go to; `None` for providers that do no networking.
    fn base_url(&self) -> Option<&str>;

    /// Asks the model for its next turn.
    ///
    /// # Errors
    ///
    /// A [`ModelError`] when the request is refused, the key is rejected, the
    /// response cannot be read, or every retry failed.
    async fn complete(
        &self,
        request: &ModelRequest,
        sink: &mut dyn StreamSink,
    ) -> Result<ModelResponse, ModelError>;
}

/// The kind of provider a [`ModelSpec`] names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ProviderKind {
    /// Replays a file of turns.
    Script,
    /// OpenAI-compatible Chat Completions.
    OpenAi,
    /// OpenAI's Responses API.
    OpenAiResponses,
    /// Anthropic Messages.
    Anthropic,
}

impl ProviderKind {
    /// The environment variable that sets this provider's base URL, if any.
    pub fn base_url_var(self) -> Option<&'static str> {
        match self {
            ProviderKind::Script => None,
            ProviderKind::OpenAi | ProviderKind::OpenAiResponses => Some("OPENAI_BASE_URL"),
            ProviderKind::Anthropic => Some("ANTHROPIC_BASE_URL"),
        }
    }

    /// The base URL the environment sets for this provider, if any.
    pub fn base_url_from_env(self) -> Option<String> {
        self.base_url_var().and_then(env_var)
    }

    /// `given` when there is one, else the environment's base URL.
    pub(crate) fn base_url_or_env(self, given: Option<&str>) -> Option<String> {
        given
            .map(str::to_owned)
            .or_else(|| self.base_url_from_env())
    }

    /// The spelling used in specs and [`Provider::kind`].
    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Script => "script",
            ProviderKind::OpenAi => "openai",
            ProviderKind::OpenAiResponses => "openai-responses",
            ProviderKind::Anthropic => "anthropic",
        }
    }
}

impl fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which provider and model to use, as written on the command line:
/// `script:PATH`, `openai:MODEL` (Chat Completions), `openai-responses:MODEL`
/// (the Responses API) or `anthropic:MODEL`.
///
/// The text after the first `:` is taken whole, so model names and paths may
/// themselves contain colons (`openai:llama3:8b`).
///
/// ```
/// use cairn_model::{ModelSpec, ProviderKind};
///
/// let spec: ModelSpec = "openai:gpt-4o-mini".parse().unwrap();
/// assert_eq!(spec.kind, ProviderKind::OpenAi);
/// assert_eq!(spec.model, "gpt-4o-mini");
/// assert_eq!(spec.to_string(), "openai:gpt-4o-mini");
/// assert!("gpt-4o".parse::<ModelSpec>().is_err());
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ModelSpec {
    /// The provider.
    pub kind: ProviderKind,
    /// The model name; for [`ProviderKind::Script`], the path of the script file.
    pub model: String,
}

impl ModelSpec {
    /// The script file, when this is a `script:` spec.
    pub fn script_path(&self) -> Option<&Path> {
        (self.kind == ProviderKind::Script).then(|| Path::new(&self.model))
    }
}

impl fmt::Display for ModelSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.kind, self.model)
    }
}

impl FromStr for ModelSpec {
    type Err = ModelError;

    fn from_str(spec: &str) -> Result<ModelSpec, ModelError> {
        let invalid = |reason: String| ModelError::InvalidSpec {
            spec: spec.to_owned(),
            reason,
        };
        let Some((kind, model)) = spec.split_once(':') else {
            return Err(invalid("it names no provider".to_owned()));
        };
        let kind = match kind.trim() {
            "script" => ProviderKind::Script,
            "openai" => ProviderKind::OpenAi,
            "openai-responses" => ProviderKind::OpenAiResponses,
            "anthropic" => ProviderKind::Anthropic,
            other => return Err(invalid(format!("unknown provider `{other}`"))),
        };
        if model.trim().is_empty() {
            let what = match kind {
                ProviderKind::Script => "path",
                _ => "model name",
            };
            return Err(invalid(format!("the {what} after `{kind}:` is empty")));
        }
        Ok(ModelSpec {
            kind,
            model: model.to_owned(),
        })
    }
}

/// How transient failures are retried.
///
/// Retried: HTTP 408, 409, 429 and 5xx (Anthropic's 529 included), connection
/// failures and timeouts, a stream that ends before its end marker with its
/// response incomplete (a complete one is accepted as it is), and in-stream
/// errors the provider marks as overload or server trouble. The wait before retry
/// `n` (1-based) is `base_delay * 2^(n-1)` scaled by a random factor in `[0.5, 1]`,
/// or the server's `Retry-After` when it sent one, and never more than `max_delay`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Retries after the first attempt. Default 4 (five attempts in all).
    pub max_retries: u32,
    /// The wait before the first retry, before jitter. Default 500 ms.
    pub base_delay: Duration,
    /// The longest wait between attempts. Default 30 s.
    pub max_delay: Duration,
}

impl Default for RetryPolicy {
    fn default() -> RetryPolicy {
        RetryPolicy {
            max_retries: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(30),
        }
    }
}

/// Settings shared by every provider.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProviderConfig {
    /// Retries of transient failures. Default [`RetryPolicy::default`].
    pub retry: RetryPolicy,
    /// The longest one attempt may take, streaming included. Default 10 minutes.
    pub timeout: Duration,
    /// The longest wait to connect. Default 10 s.
    pub connect_timeout: Duration,
    /// The longest silence between two pieces of a response. Default 5 minutes.
    pub read_timeout: Duration,
    /// The pause between words of the script provider. Default `None`, which reads
    /// `CAIRN_SCRIPT_DELAY_MS` (milliseconds) from the environment, else no pause.
    pub script_delay: Option<Duration>,
}

impl Default for ProviderConfig {
    fn default() -> ProviderConfig {
        ProviderConfig {
            retry: RetryPolicy::default(),
            timeout: Duration::from_secs(600),
            connect_timeout: Duration::from_secs(10),
            read_timeout: Duration::from_secs(300),
            script_delay: None,
        }
    }
}

impl ProviderConfig {
    /// The default configuration with another retry policy.
    pub fn with_retry(retry: RetryPolicy) -> ProviderConfig {
        ProviderConfig {
            retry,
            ..ProviderConfig::default()
        }
    }
}

/// Builds the provider a spec names.
///
/// The base URL is `base_url` when given, else `OPENAI_BASE_URL` (for both
/// OpenAI APIs) or `ANTHROPIC_BASE_URL`, else the official endpoint. The key is read from
/// `OPENAI_API_KEY` or `ANTHROPIC_API_KEY` now, once. `script:` reads and checks
/// its file now, so a malformed script fails before the run starts.
///
/// # Errors
///
/// [`ModelError::MissingApiKey`] when the official endpoint is used without a key,
/// [`ModelError::InvalidBaseUrl`], and the script errors
/// ([`ModelError::ScriptRead`], [`ModelError::ScriptParse`]).
pub fn provider_from_spec(
    spec: &ModelSpec,
    base_url: Option<&str>,
    config: &ProviderConfig,
) -> Result<Box<dyn Provider>, ModelError> {
    Ok(match spec.kind {
        ProviderKind::Script => Box::new(ScriptProvider::from_env(&spec.model, config)?),
        ProviderKind::OpenAi => Box::new(OpenAiProvider::from_env(&spec.model, base_url, config)?),
        ProviderKind::OpenAiResponses => Box::new(OpenAiResponsesProvider::from_env(
            &spec.model,
            base_url,
            config,
        )?),
        ProviderKind::Anthropic => {
            Box::new(AnthropicProvider::from_env(&spec.model, base_url, config)?)
        }
    })
}

/// Reads an environment variable, treating an empty value as unset.
pub(crate) fn env_var(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.trim().is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_parse() {
        let ok = [
            ("script:turns.json", ProviderKind::Script, "turns.json"),
            ("openai:gpt-4o", ProviderKind::OpenAi, "gpt-4o"),
            ("openai:llama3:8b", ProviderKind::OpenAi, "llama3:8b"),
            (
                "openai-responses:gpt-5-codex",
                ProviderKind::OpenAiResponses,
                "gpt-5-codex",
            ),
            (
                "anthropic:claude-sonnet-4-5",
                ProviderKind::Anthropic,
                "claude-sonnet-4-5",
            ),
        ];
        for (text, kind, model) in ok {
            let spec: ModelSpec = text.parse().unwrap();
            assert_eq!(
                spec,
                ModelSpec {
                    kind,
                    model: model.into()
                }
            );
            assert_eq!(spec.to_string(), text);
        }
        let bad = [
            ("gpt-4o", "names no provider"),
            ("gemini:pro", "unknown provider `gemini`"),
            ("openai:", "model name after `openai:` is empty"),
            ("script: ", "path after `script:` is empty"),
        ];
        for (text, reason) in bad {
            let message = text.parse::<ModelSpec>().unwrap_err().to_string();
            assert!(message.contains(reason), "{text}: {message}");
            assert!(message.contains("script:PATH"), "{text}: {message}");
        }
    }
}
