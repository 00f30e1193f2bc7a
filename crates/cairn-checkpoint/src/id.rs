//! Checkpoint ids and journal positions.

use std::fmt;
use std::str::FromStr;

use cairn_journal::{ChainHash, JournalWriter};
use serde::{Deserialize, Serialize};

/// A checkpoint's id: `cp_` followed by a ULID for new checkpoints (so ids
/// sort by creation time and are unique in the store); when reading, `cp_`
/// followed by 1–64 characters of `[0-9A-Za-z_-]`, so an id is always one
/// safe path component.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CheckpointId(String);

/// A string that is not a checkpoint id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{shown}` is not a checkpoint id: ids look like cp_01J… (list them with `cairn checkpoint ls ID`)")]
pub struct CheckpointIdError {
    shown: String,
}

impl CheckpointId {
    const PREFIX: &'static str = "cp_";

    /// A fresh id: `cp_` + a new ULID.
    pub fn new() -> Self {
        CheckpointId(format!("{}{}", Self::PREFIX, ulid::Ulid::new()))
    }

    /// Validates an id.
    ///
    /// # Errors
    /// [`CheckpointIdError`] for anything but `cp_` + 1–64 of `[0-9A-Za-z_-]`.
    pub fn parse(s: &str) -> Result<Self, CheckpointIdError> {
        let ok = s.strip_prefix(Self::PREFIX).is_some_and(|rest| {
            !rest.is_empty()
                && rest.len() <= 64
                && rest
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        });
        if ok {
            Ok(CheckpointId(s.to_owned()))
        } else {
            Err(CheckpointIdError {
                shown: s.chars().take(80).collect(),
            })
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for CheckpointId {
    fn default() -> Self {
        Self::new()
    }
}

impl fmt::Display for CheckpointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for CheckpointId {
    type Err = CheckpointIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        CheckpointId::parse(s)
    }
}

impl Serialize for CheckpointId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for CheckpointId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        CheckpointId::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// A point in a run's journal: the seq of its last record and that record's
/// chain hash `h(seq)`. A checkpoint records where the journal stood when it
/// was saved; a fork at the checkpoint pins exactly this.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct JournalPosition {
    /// Seq of the last record at save time.
    pub seq: u64,
    /// Its chain hash.
    pub hash: ChainHash,
}

impl JournalPosition {
    /// Where `writer`'s journal stands now (its last durable record).
    pub fn of(writer: &JournalWriter) -> Self {
        JournalPosition {
            seq: writer.seq(),
            hash: writer.tail(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_parse_and_refuse() {
        let id = CheckpointId::new();
        assert!(id.as_str().starts_with("cp_"));
        assert_eq!(CheckpointId::parse(id.as_str()).unwrap(), id);
        for ok in ["cp_a", "cp_01J-x_y", &format!("cp_{}", "x".repeat(64))] {
            assert!(CheckpointId::parse(ok).is_ok(), "{ok}");
        }
        for bad in [
            "",
            "cp_",
            "01JABC",
            "cp_../x",
            "cp_a.json",
            ".cp_a",
            "cp_a b",
            &format!("cp_{}", "x".repeat(65)),
        ] {
            assert!(CheckpointId::parse(bad).is_err(), "{bad:?}");
        }
        let a = CheckpointId::new();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(a < CheckpointId::new());
    }
}
