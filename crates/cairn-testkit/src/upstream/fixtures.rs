//! Providers' errors inside a `200` response, byte for byte: the shapes of
//! `fixtures/provider_errors/` (their sources are in that directory's
//! README), each with the message the official SDK shows for it when called
//! directly. Serve one with [`ProviderError::reply`].

use super::Reply;

/// Which API a fixture answers, as `sdk_call.py --api` names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Api {
    /// OpenAI Chat Completions (and the servers compatible with it).
    OpenAiChat,
    /// OpenAI Responses.
    OpenAiResponses,
    /// Anthropic Messages.
    Anthropic,
}

impl Api {
    /// The name `sdk_call.py --api` takes.
    pub fn sdk_name(self) -> &'static str {
        match self {
            Api::OpenAiChat => "openai-chat",
            Api::OpenAiResponses => "openai-responses",
            Api::Anthropic => "anthropic",
        }
    }

    /// The route the gateway records it on.
    pub fn path(self) -> &'static str {
        match self {
            Api::OpenAiChat => "/v1/chat/completions",
            Api::OpenAiResponses => "/v1/responses",
            Api::Anthropic => "/v1/messages",
        }
    }
}

/// One provider's error, as it sends it.
#[derive(Clone, Copy, Debug)]
pub struct ProviderError {
    /// The file's name in `fixtures/provider_errors/`.
    pub name: &'static str,
    /// The API it answers.
    pub api: Api,
    /// Whether it is a stream (`text/event-stream`) or a whole JSON body;
    /// both come with status 200.
    pub stream: bool,
    /// The provider's own message in it.
    pub message: &'static str,
    /// The bytes.
    pub body: &'static [u8],
}

impl ProviderError {
    /// A reply that sends exactly [`ProviderError::body`] with status 200.
    pub fn reply(&self) -> Reply {
        if self.stream {
            Reply::raw_stream(self.body)
        } else {
            Reply::raw_body(200, self.body)
        }
    }
}

macro_rules! fixture {
    ($name:literal, $api:expr, $stream:expr, $message:literal) => {
        ProviderError {
            name: $name,
            api: $api,
            stream: $stream,
            message: $message,
            body: include_bytes!(concat!("../../fixtures/provider_errors/", $name)),
        }
    };
}

/// Every fixture of `fixtures/provider_errors/`.
pub const PROVIDER_ERRORS: &[ProviderError] = &[
    fixture!(
        "openrouter_error_chunk.sse",
        Api::OpenAiChat,
        true,
        "Provider disconnected unexpectedly"
    ),
    fixture!(
        "vllm_error_chunk.sse",
        Api::OpenAiChat,
        true,
        "EngineCore encountered an issue. See stack trace (above) for the root cause."
    ),
    fixture!(
        "groq_error_event.sse",
        Api::OpenAiChat,
        true,
        "Invalid tool_call: tool \"name_unknown\" does not exist."
    ),
    fixture!(
        "openai_error_chunk.sse",
        Api::OpenAiChat,
        true,
        "The server had an error while processing your request. Sorry about that!"
    ),
    fixture!(
        "anthropic_overloaded.sse",
        Api::Anthropic,
        true,
        "Overloaded"
    ),
    fixture!(
        "responses_error_then_failed.sse",
        Api::OpenAiResponses,
        true,
        "An error occurred while processing your request. You can retry your request, or contact us through our help center at help.openai.com if the error persists. Please include the request ID req_0mock5d2e8f1a3c7b9e0d4f6a8c2e1b in your message."
    ),
    fixture!(
        "responses_failed.sse",
        Api::OpenAiResponses,
        true,
        "The model failed to generate a response."
    ),
    fixture!(
        "openai_error_body_200.json",
        Api::OpenAiChat,
        false,
        "The server had an error while processing your request. Sorry about that!"
    ),
    fixture!(
        "openrouter_choice_error_200.json",
        Api::OpenAiChat,
        false,
        "This model is currently experiencing high demand."
    ),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_file_of_the_directory_is_listed_and_holds_its_message() {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/fixtures/provider_errors");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .filter(|n| n != "README.md")
            .collect();
        files.sort();
        let mut listed: Vec<String> = PROVIDER_ERRORS.iter().map(|f| f.name.into()).collect();
        listed.sort();
        assert_eq!(files, listed);
        for f in PROVIDER_ERRORS {
            let text = String::from_utf8_lossy(f.body);
            let escaped = f.message.replace('"', "\\\"");
            assert!(text.contains(&escaped), "{}: {}", f.name, f.message);
        }
    }
}
