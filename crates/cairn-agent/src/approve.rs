//! Approvals (DESIGN §11): which tool calls wait for a person's yes, and the
//! trait through which the loop asks.
//!
//! Rules the loop applies to a call the policy names ([`ApprovePolicy::needs`]):
//! 1. The question is asked before the call's `tool_start`: a call that was
//!    never approved was never dispatched, so a resume asks again.
//! 2. The wait is a `pause:turn:N` window (§5.3), closed by `resume:turn:N`
//!    when the answer comes: files that changed while the person decided are
//!    theirs, journaled in a `reconcile` record and told to the model.
//! 3. A decline runs nothing: the call's `tool_result` says `refused`, with no
//!    `tool_start`, and the model reads that it was not run.
//! 4. An immediate stop while waiting abandons the question; nothing is
//!    journaled for the call.
//! 5. Every question is also posted in the session's directory
//!    ([`crate::questions`]), so the viewer can answer it; the first answer
//!    wins, wherever it was given.

use std::str::FromStr;

use cairn_journal::ToolCall;

/// Which tool calls wait for a person's yes (DESIGN §11).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ApprovePolicy {
    /// No call waits (the default).
    #[default]
    Never,
    /// Calls of the `shell` tool wait.
    Shell,
    /// Every call of a tool that is not read-only waits, shell included.
    Writes,
}

/// A policy name that is none of `never`, `shell`, `writes`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown approval policy `{given}`: use never, shell or writes")]
pub struct UnknownPolicy {
    /// What was given.
    pub given: String,
}

impl FromStr for ApprovePolicy {
    type Err = UnknownPolicy;

    /// `never`, `shell` or `writes`, as written on the command line.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "never" => Ok(ApprovePolicy::Never),
            "shell" => Ok(ApprovePolicy::Shell),
            "writes" => Ok(ApprovePolicy::Writes),
            other => Err(UnknownPolicy {
                given: other.to_owned(),
            }),
        }
    }
}

impl ApprovePolicy {
    /// Whether a call of `tool` waits for a person: `Shell` — the `shell`
    /// tool; `Writes` — every tool that is not `read_only`, shell included
    /// (an MCP tool that declared `destructiveHint` among them, and one that
    /// declared no hints at all); `Never` — none.
    pub fn needs(&self, tool: &str, read_only: bool) -> bool {
        match self {
            ApprovePolicy::Never => false,
            ApprovePolicy::Shell => tool == "shell",
            ApprovePolicy::Writes => tool == "shell" || !read_only,
        }
    }

    /// The name as written on the command line.
    pub fn as_str(&self) -> &'static str {
        match self {
            ApprovePolicy::Never => "never",
            ApprovePolicy::Shell => "shell",
            ApprovePolicy::Writes => "writes",
        }
    }
}

/// A person's answer (`run` or `decline` when written down).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// Run the call.
    Run,
    /// Do not run it; the model is told it was declined.
    Decline,
}

/// Asks a person. An answer may take as long as the person takes.
#[async_trait::async_trait]
pub trait Approver: Send {
    /// Whether `call` may run.
    async fn ask(&mut self, call: &ToolCall) -> Decision;

    /// Whether `call` may run, with what it would change shown: for
    /// `write_file` and `edit_file`, the unified diff of the file
    /// (`cairn_tools::preview`; the model's text, to be escaped before it
    /// reaches a terminal). The loop asks through this; by default it is
    /// [`Approver::ask`].
    async fn ask_previewed(&mut self, call: &ToolCall, preview: Option<String>) -> Decision {
        let _ = preview;
        self.ask(call).await
    }

    /// The question about `call` was answered elsewhere (the viewer; see
    /// [`crate::questions`]) while this approver was asking: its question
    /// is withdrawn (the future of its ask was dropped) and it may say so.
    fn answered_elsewhere(&mut self, call: &ToolCall, decision: Decision) {
        let _ = (call, decision);
    }
}

/// An approver that asks no one in this process: the answer comes only
/// through the question the loop posts ([`crate::questions`]), from the
/// viewer of `cairn serve`. The approver of runs a server drives.
#[derive(Debug, Default)]
pub struct AnsweredElsewhere;

#[async_trait::async_trait]
impl Approver for AnsweredElsewhere {
    async fn ask(&mut self, _call: &ToolCall) -> Decision {
        std::future::pending().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_policy_names_the_calls_that_wait() {
        use ApprovePolicy::{Never, Shell, Writes};
        // (policy, tool, idempotent, waits)
        let rows = [
            (Never, "shell", false, false),
            (Never, "write_file", false, false),
            (Never, "read_file", true, false),
            (Shell, "shell", false, true),
            (Shell, "write_file", false, false),
            (Shell, "edit_file", false, false),
            (Shell, "read_file", true, false),
            (Writes, "shell", false, true),
            (Writes, "write_file", false, true),
            (Writes, "edit_file", false, true),
            (Writes, "read_file", true, false),
            (Writes, "list_dir", true, false),
            (Writes, "search", true, false),
            (Writes, "some_plugin", false, true),
        ];
        for (policy, tool, idempotent, waits) in rows {
            assert_eq!(
                policy.needs(tool, idempotent),
                waits,
                "{policy:?} {tool} idempotent={idempotent}"
            );
        }
    }

    #[test]
    fn policies_parse_from_their_names_and_nothing_else() {
        for p in [
            ApprovePolicy::Never,
            ApprovePolicy::Shell,
            ApprovePolicy::Writes,
        ] {
            assert_eq!(p.as_str().parse::<ApprovePolicy>(), Ok(p));
        }
        assert_eq!(ApprovePolicy::default(), ApprovePolicy::Never);
        for bad in ["", "Shell", "always", "write"] {
            let e = bad.parse::<ApprovePolicy>();
            assert_eq!(
                e,
                Err(UnknownPolicy {
                    given: bad.to_owned()
                })
            );
        }
        let msg = "bogus"
            .parse::<ApprovePolicy>()
            .err()
            .map(|e| e.to_string());
        assert_eq!(
            msg.as_deref(),
            Some("unknown approval policy `bogus`: use never, shell or writes")
        );
    }
}
