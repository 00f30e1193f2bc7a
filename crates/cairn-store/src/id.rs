use std::fmt;
use std::str::FromStr;

/// The identifier of a run (a "session" to users).
///
/// Invariant: 1–128 characters, each from `[0-9A-Za-z_-]`, so an id is always a
/// single safe path component. New ids are ULIDs: time-sortable, so "most recent"
/// needs no replay.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RunId(String);

/// A string that is not a valid run id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{shown}` is not a session id: ids are 1-128 characters of 0-9, A-Z, a-z, `_` and `-` (see `cairn sessions --all`)")]
pub struct RunIdError {
    shown: String,
}

impl RunId {
    /// The longest accepted id.
    pub const MAX_LEN: usize = 128;

    /// A fresh ULID-based id.
    pub fn new() -> Self {
        RunId(ulid::Ulid::new().to_string())
    }

    /// Validates `s` as a run id.
    ///
    /// # Errors
    /// [`RunIdError`] when `s` is empty, longer than 128 bytes, or holds any
    /// character outside `[0-9A-Za-z_-]`.
    pub fn parse(s: &str) -> Result<Self, RunIdError> {
        let ok = !s.is_empty()
            && s.len() <= Self::MAX_LEN
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if ok {
            Ok(RunId(s.to_owned()))
        } else {
            let shown: String = s.chars().take(40).collect();
            Err(RunIdError { shown })
        }
    }

    /// The id as a string.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for RunId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for RunId {
    type Err = RunIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        RunId::parse(s)
    }
}

impl AsRef<str> for RunId {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_and_refuses() {
        for ok in ["a", "01JABC", "run_1-x", &"x".repeat(128)] {
            assert!(RunId::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            ".",
            "..",
            "a/b",
            "a b",
            "é",
            "a.b",
            &"x".repeat(129),
            "a\0",
        ] {
            assert!(RunId::parse(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn new_ids_are_valid_and_sort_by_time() {
        let a = RunId::new();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = RunId::new();
        assert!(RunId::parse(a.as_str()).is_ok());
        assert!(a < b);
    }
}
