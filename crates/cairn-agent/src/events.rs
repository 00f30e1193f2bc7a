//! What the loop tells its caller as it works. The library draws nothing; the
//! binary implements [`Events`] to print.

use cairn_journal::{Outcome, ToolCall};

/// Receives the loop's progress.
pub trait Events: Send {
    /// A piece of model text, as it streams.
    fn text(&mut self, delta: &str);
    /// A stream broke and is being retried: discard the partial text.
    fn text_restart(&mut self) {}
    /// A model turn starts; `replay` when it is served from the response store.
    fn turn_started(&mut self, _turn: u64, _replay: bool) {}
    /// The model refused, in these words (journaled with its turn).
    fn refusal(&mut self, _text: &str) {}
    /// A model turn was journaled.
    fn turn_finished(&mut self, _turn: u64) {}
    /// A tool call waits for a person's yes (DESIGN §11); the approver is
    /// asked next, inside a `pause:` window.
    fn approval_needed(&mut self, _call: &ToolCall) {}
    /// A tool call is being dispatched.
    fn tool_started(&mut self, _call: &ToolCall) {}
    /// A tool call's outcome was journaled.
    fn tool_finished(&mut self, _call: &ToolCall, _outcome: Outcome, _output: &str) {}
    /// Something the user should know (recovery decisions, overrides).
    fn notice(&mut self, _message: &str) {}
}

/// Events that go nowhere.
#[derive(Debug, Default)]
pub struct Silent;

impl Events for Silent {
    fn text(&mut self, _delta: &str) {}
}

/// Adapts [`Events`] to the provider's stream sink.
pub(crate) struct Sink<'a>(pub &'a mut dyn Events);

impl cairn_model::StreamSink for Sink<'_> {
    fn text(&mut self, delta: &str) {
        self.0.text(delta);
    }
    fn restart(&mut self) {
        self.0.text_restart();
    }
}
