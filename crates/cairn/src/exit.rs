//! Exit codes (DESIGN §10), decided in one place.
//!
//! 0 success; 1 failure while working; 2 bad usage or bad input; 3 integrity
//! failure; 4 refused on purpose. `cairn exec` exits with its command's status
//! and uses 125 for its own failures.

use cairn_agent::AgentError;
use cairn_calls::CallsError;
use cairn_journal::JournalError;
use cairn_model::ModelError;
use cairn_sessions::SessionError;
use cairn_store::ErrorKind;

/// A process exit code of the contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Code {
    /// Success.
    Ok = 0,
    /// Failure while working.
    Failure = 1,
    /// Bad usage or bad input.
    Usage = 2,
    /// Something does not verify.
    Integrity = 3,
    /// Refused on purpose.
    Refused = 4,
}

impl Code {
    /// The code's name in `--json` errors: `ok`, `failure`, `usage`,
    /// `integrity`, `refused`.
    pub fn class(self) -> &'static str {
        match self {
            Code::Ok => "ok",
            Code::Failure => "failure",
            Code::Usage => "usage",
            Code::Integrity => "integrity",
            Code::Refused => "refused",
        }
    }
}

/// An error that carries its exit code explicitly.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Coded {
    /// The code.
    pub code: Code,
    /// What to tell the user.
    pub message: String,
}

/// Shorthand for a coded error.
pub fn coded(code: Code, message: impl Into<String>) -> anyhow::Error {
    Coded {
        code,
        message: message.into(),
    }
    .into()
}

/// The exit code for an error, from the first typed error in its chain. A
/// full disk (ENOSPC, or an exhausted quota) is a failure while working,
/// whatever error carries it: nothing was wrong with the input, and the same
/// command works once there is space again.
pub fn classify(err: &anyhow::Error) -> Code {
    if is_disk_full(err) {
        return Code::Failure;
    }
    for cause in err.chain() {
        if let Some(c) = cause.downcast_ref::<Coded>() {
            return c.code;
        }
        if let Some(j) = cause.downcast_ref::<JournalError>() {
            return kind_code(j.kind());
        }
        if let Some(s) = cause.downcast_ref::<SessionError>() {
            return kind_code(s.kind());
        }
        if let Some(a) = cause.downcast_ref::<AgentError>() {
            return kind_code(a.kind());
        }
        if let Some(CallsError::StoredResponse { .. }) = cause.downcast_ref::<CallsError>() {
            return Code::Integrity;
        }
        if let Some(m) = cause.downcast_ref::<ModelError>() {
            return kind_code(cairn_agent::model_error_kind(m));
        }
        if let Some(w) = cause.downcast_ref::<cairn_workspace::WorkspaceError>() {
            return flags(w.is_integrity(), w.is_refusal(), w.is_usage());
        }
        if let Some(c) = cause.downcast_ref::<cairn_checkpoint::CheckpointError>() {
            return flags(c.is_integrity(), c.is_refusal(), c.is_usage());
        }
        if let Some(o) = cause.downcast_ref::<cairn_objects::ObjectError>() {
            return flags(o.is_integrity(), o.is_refusal(), false);
        }
        if let Some(v) = cause.downcast_ref::<cairn_vm::VmError>() {
            return match v {
                cairn_vm::VmError::Session(s) => kind_code(s.kind()),
                cairn_vm::VmError::Journal(j) => kind_code(j.kind()),
                cairn_vm::VmError::Checkpoint(c) => {
                    flags(c.is_integrity(), c.is_refusal(), c.is_usage())
                }
                v => flags(v.is_integrity(), v.is_refusal(), v.is_usage()),
            };
        }
        if cause.downcast_ref::<cairn_store::RunIdError>().is_some() {
            return Code::Usage;
        }
    }
    Code::Failure
}

fn flags(integrity: bool, refusal: bool, usage: bool) -> Code {
    kind_code(ErrorKind::from_flags(integrity, refusal, usage))
}

/// The exit code of an error's kind (DESIGN §10).
fn kind_code(kind: ErrorKind) -> Code {
    match kind {
        ErrorKind::Usage => Code::Usage,
        ErrorKind::Refused => Code::Refused,
        ErrorKind::Integrity => Code::Integrity,
        _ => Code::Failure,
    }
}

/// True when the error comes from a full file system (ENOSPC) or an exhausted
/// disk quota (EDQUOT). The IO error is looked for in the chain, and in the
/// causes' text too: some errors carry an IO error's message, not the error.
pub fn is_disk_full(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        let io = c.downcast_ref::<std::io::Error>().is_some_and(|e| {
            matches!(e.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT))
                || e.kind() == std::io::ErrorKind::StorageFull
        });
        let text = c.to_string();
        io || text.contains("No space left on device") || text.contains("Disk quota exceeded")
    })
}

/// What to do about an error, when cairn knows more than its message says:
/// printed after the error and its causes.
pub fn hint(err: &anyhow::Error) -> Option<&'static str> {
    is_disk_full(err).then_some(
        "the disk is full (no space is left on the file system of the store or the \
         workspace): free some space there (`cairn prune` deletes stored objects that \
         nothing names any more) and run the command again; what cairn acknowledged \
         before is kept, and a session this stopped goes on with `cairn resume ID`",
    )
}

/// True when the error is a closed stdout (`cairn sessions | head`): not a failure.
pub fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|c| {
        let io = c.downcast_ref::<std::io::Error>().map(|e| e.kind());
        let json = c
            .downcast_ref::<serde_json::Error>()
            .and_then(|e| e.io_error_kind());
        io.or(json) == Some(std::io::ErrorKind::BrokenPipe)
    })
}
