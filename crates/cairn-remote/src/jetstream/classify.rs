//! What a failed JetStream request means, read from the typed error kinds
//! async-nats gives and the API's error codes, never from message text.
//!
//! Three answers, and each caller acts on them alone:
//! - [`Failure::Raced`]: the server refused a write fenced on a revision
//!   or last sequence (`wrong last sequence`, API code 10071; a key
//!   created twice): another writer wrote first. Only this is a lost race.
//! - [`Failure::Transport`]: no answer: timed out, the connection broke,
//!   nobody answered for the stream (a cluster electing a leader), a
//!   socket error. The request may or may not have been carried out; it is
//!   retried or reported as [`RemoteJournalError::Unreachable`], never as
//!   a race or a holder.
//! - [`Failure::Refused`]: the server answered no for another reason (or
//!   the error is of a kind not known here); reported as
//!   [`RemoteJournalError::Failed`] with its message.

use std::error::Error as StdError;

use async_nats::jetstream::context::{
    PublishError, PublishErrorKind, RequestError as JsRequestError,
    RequestErrorKind as JsRequestErrorKind,
};
use async_nats::jetstream::kv::{
    CreateError, CreateErrorKind, EntryError, EntryErrorKind, UpdateError, UpdateErrorKind,
};
use async_nats::jetstream::stream::{
    DirectGetError, DirectGetErrorKind, LastRawMessageError, LastRawMessageErrorKind,
};
use async_nats::jetstream::ErrorCode;
use cairn_journal::RemoteJournalError;

/// What a failed request means (see the module notes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Failure {
    /// A fenced write lost to another writer.
    Raced,
    /// No answer came; the reason.
    Transport(String),
    /// Refused for another reason; the reason.
    Refused(String),
}

impl Failure {
    /// The error for a failure that is not a race (a race here is a
    /// refusal: the caller did not expect one): `action` says what was
    /// being done, e.g. "renew the writer lease of session X".
    pub(crate) fn into_error(self, remote: &str, action: &str) -> RemoteJournalError {
        match self {
            Failure::Transport(reason) => RemoteJournalError::Unreachable {
                remote: remote.to_owned(),
                reason: format!("{action}: {reason}"),
            },
            Failure::Raced => RemoteJournalError::Failed {
                remote: remote.to_owned(),
                action: action.to_owned(),
                reason: "another writer changed it at the same moment; try again".into(),
            },
            Failure::Refused(reason) => RemoteJournalError::Failed {
                remote: remote.to_owned(),
                action: action.to_owned(),
                reason,
            },
        }
    }
}

/// Reads `e` and the errors it was caused by, outermost first, until one
/// says what happened.
pub(crate) fn classify(e: &(dyn StdError + 'static)) -> Failure {
    let whole = e.to_string();
    let mut at: Option<&(dyn StdError + 'static)> = Some(e);
    while let Some(err) = at {
        if let Some(found) = decisive(err, &whole) {
            return found;
        }
        at = err.source();
    }
    Failure::Refused(whole)
}

/// What `err` alone says, or `None` when its kind defers to its cause.
fn decisive(err: &(dyn StdError + 'static), whole: &str) -> Option<Failure> {
    let transport = || Some(Failure::Transport(whole.to_owned()));
    let refused = || Some(Failure::Refused(whole.to_owned()));
    if let Some(e) = err.downcast_ref::<PublishError>() {
        return match e.kind() {
            PublishErrorKind::WrongLastSequence => Some(Failure::Raced),
            PublishErrorKind::TimedOut
            | PublishErrorKind::BrokenPipe
            | PublishErrorKind::StreamNotFound
            | PublishErrorKind::MaxAckPending => transport(),
            PublishErrorKind::WrongLastMessageId | PublishErrorKind::MaxPayloadExceeded => {
                refused()
            }
            // An API error, a client that could not send, a garbled answer:
            // the cause says which.
            _ => None,
        };
    }
    // `kv::DeleteError` is the same type.
    if let Some(e) = err.downcast_ref::<UpdateError>() {
        return match e.kind() {
            UpdateErrorKind::WrongLastRevision => Some(Failure::Raced),
            UpdateErrorKind::TimedOut => transport(),
            UpdateErrorKind::InvalidKey => refused(),
            _ => None,
        };
    }
    if let Some(e) = err.downcast_ref::<CreateError>() {
        return match e.kind() {
            CreateErrorKind::AlreadyExists => Some(Failure::Raced),
            CreateErrorKind::InvalidKey => refused(),
            // `Publish` without a cause is how a timed-out create reads.
            CreateErrorKind::Publish | CreateErrorKind::Ack if e.source().is_none() => transport(),
            _ => None,
        };
    }
    if let Some(e) = err.downcast_ref::<EntryError>() {
        return match e.kind() {
            EntryErrorKind::TimedOut => transport(),
            EntryErrorKind::InvalidKey => refused(),
            _ => None,
        };
    }
    if let Some(e) = err.downcast_ref::<DirectGetError>() {
        return match e.kind() {
            DirectGetErrorKind::TimedOut => transport(),
            DirectGetErrorKind::NotFound
            | DirectGetErrorKind::InvalidSubject
            | DirectGetErrorKind::ErrorResponse(..) => refused(),
            _ => None,
        };
    }
    if let Some(e) = err.downcast_ref::<LastRawMessageError>() {
        return match e.kind() {
            LastRawMessageErrorKind::JetStream(api) => Some(api_failure(api.error_code(), whole)),
            LastRawMessageErrorKind::NoMessageFound | LastRawMessageErrorKind::InvalidSubject => {
                refused()
            }
            _ => None,
        };
    }
    if let Some(e) = err.downcast_ref::<JsRequestError>() {
        return match e.kind() {
            JsRequestErrorKind::TimedOut | JsRequestErrorKind::NoResponders => transport(),
            JsRequestErrorKind::InvalidSubject => refused(),
            _ => None,
        };
    }
    if let Some(e) = err.downcast_ref::<async_nats::RequestError>() {
        return match e.kind() {
            async_nats::RequestErrorKind::TimedOut | async_nats::RequestErrorKind::NoResponders => {
                transport()
            }
            async_nats::RequestErrorKind::Other => None,
            _ => refused(),
        };
    }
    if let Some(e) = err.downcast_ref::<async_nats::jetstream::Error>() {
        return Some(api_failure(e.error_code(), whole));
    }
    if err.is::<std::io::Error>() || err.is::<async_nats::ConnectError>() {
        return transport();
    }
    None
}

/// An answer of the JetStream API: a fence refused is a race, the rest a
/// refusal.
fn api_failure(code: ErrorCode, whole: &str) -> Failure {
    if code == ErrorCode::STREAM_WRONG_LAST_SEQUENCE {
        Failure::Raced
    } else {
        Failure::Refused(whole.to_owned())
    }
}

/// True when `e` is the API's "stream not found" (code 10059).
pub(crate) fn is_stream_not_found(e: &(dyn StdError + 'static)) -> bool {
    let mut at: Option<&(dyn StdError + 'static)> = Some(e);
    while let Some(err) = at {
        if let Some(e) = err.downcast_ref::<async_nats::jetstream::context::GetStreamError>() {
            if let async_nats::jetstream::context::GetStreamErrorKind::JetStream(api) = e.kind() {
                return api.error_code() == ErrorCode::STREAM_NOT_FOUND;
            }
        }
        if let Some(api) = err.downcast_ref::<async_nats::jetstream::Error>() {
            return api.error_code() == ErrorCode::STREAM_NOT_FOUND;
        }
        at = err.source();
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error as the JetStream API sends it.
    fn api(code: u64, description: &str) -> async_nats::jetstream::Error {
        serde_json::from_value(serde_json::json!({
            "code": 400,
            "err_code": code,
            "description": description,
        }))
        .unwrap()
    }

    fn class(e: impl StdError + 'static) -> Failure {
        classify(&e)
    }

    fn is_transport(f: &Failure) -> bool {
        matches!(f, Failure::Transport(_))
    }

    fn is_refused(f: &Failure) -> bool {
        matches!(f, Failure::Refused(_))
    }

    #[test]
    fn fenced_writes_refused_are_races_and_nothing_else_is() {
        // A publish fenced on the last subject sequence.
        assert_eq!(
            class(PublishError::with_source(
                PublishErrorKind::WrongLastSequence,
                api(10071, "wrong last sequence: 4"),
            )),
            Failure::Raced
        );
        // As a key-value update wraps it.
        assert_eq!(
            class(UpdateError::with_source(
                UpdateErrorKind::WrongLastRevision,
                PublishError::new(PublishErrorKind::WrongLastSequence),
            )),
            Failure::Raced
        );
        // The API's code under a kind that does not say.
        assert_eq!(
            class(UpdateError::with_source(
                UpdateErrorKind::Other,
                PublishError::with_source(
                    PublishErrorKind::Other,
                    api(10071, "wrong last sequence")
                ),
            )),
            Failure::Raced
        );
        assert_eq!(
            class(CreateError::new(CreateErrorKind::AlreadyExists)),
            Failure::Raced
        );
        // A duplicate message id or any other API answer is not a race.
        assert!(is_refused(&class(PublishError::with_source(
            PublishErrorKind::Other,
            api(10059, "stream not found"),
        ))));
        assert!(is_refused(&class(PublishError::new(
            PublishErrorKind::WrongLastMessageId
        ))));
        assert!(is_refused(&class(PublishError::new(
            PublishErrorKind::MaxPayloadExceeded
        ))));
    }

    #[test]
    fn no_answer_is_a_transport_error_never_a_race() {
        for f in [
            class(PublishError::new(PublishErrorKind::TimedOut)),
            class(PublishError::new(PublishErrorKind::BrokenPipe)),
            class(PublishError::new(PublishErrorKind::StreamNotFound)),
            class(UpdateError::new(UpdateErrorKind::TimedOut)),
            // A key-value update whose publish timed out, as async-nats
            // converts it.
            class(UpdateError::from(PublishError::new(
                PublishErrorKind::TimedOut,
            ))),
            class(UpdateError::with_source(
                UpdateErrorKind::Other,
                PublishError::new(PublishErrorKind::BrokenPipe),
            )),
            // A create whose first write and whose read-back both timed out.
            class(CreateError::from(EntryError::new(EntryErrorKind::TimedOut))),
            class(CreateError::new(CreateErrorKind::Publish)),
            class(EntryError::new(EntryErrorKind::TimedOut)),
            class(EntryError::with_source(
                EntryErrorKind::Other,
                DirectGetError::new(DirectGetErrorKind::TimedOut),
            )),
            class(JsRequestError::new(JsRequestErrorKind::NoResponders)),
            class(async_nats::RequestError::new(
                async_nats::RequestErrorKind::TimedOut,
            )),
            class(PublishError::with_source(
                PublishErrorKind::Other,
                std::io::Error::from(std::io::ErrorKind::ConnectionReset),
            )),
        ] {
            assert!(is_transport(&f), "{f:?}");
        }
    }

    #[test]
    fn a_failure_becomes_the_error_that_says_what_happened() {
        let e = Failure::Transport("timed out".into()).into_error("nats://a:1/t", "renew a lease");
        assert!(matches!(e, RemoteJournalError::Unreachable { .. }), "{e}");
        let text = e.to_string();
        assert!(
            text.contains("cannot reach") && text.contains("renew a lease"),
            "{text}"
        );
        assert!(!text.contains("another writer"), "{text}");
        let e = Failure::Refused("no".into()).into_error("r", "renew a lease");
        assert!(matches!(e, RemoteJournalError::Failed { .. }), "{e}");
    }

    #[test]
    fn a_missing_stream_is_read_from_its_code() {
        use async_nats::jetstream::context::{GetStreamError, GetStreamErrorKind};
        assert!(is_stream_not_found(&GetStreamError::new(
            GetStreamErrorKind::JetStream(api(10059, "stream not found"))
        )));
        assert!(!is_stream_not_found(&GetStreamError::new(
            GetStreamErrorKind::JetStream(api(10039, "jetstream not enabled"))
        )));
        assert!(!is_stream_not_found(&GetStreamError::new(
            GetStreamErrorKind::Request
        )));
    }
}
