//! The name of an object: SHA-256 over its plain bytes.

use std::fmt;
use std::str::FromStr;

use sha2::{Digest, Sha256};

/// The SHA-256 of an object's plain (uncompressed) bytes, which is also its
/// name in the pool.
///
/// Shown and parsed as 64 lowercase hex digits; serialized the same way.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectHash([u8; 32]);

/// A string that is not 64 hex digits.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{shown}` is not an object hash: expected 64 lowercase hex digits (a SHA-256)")]
pub struct HashParseError {
    shown: String,
}

impl ObjectHash {
    /// The hash of `bytes`.
    pub fn of(bytes: &[u8]) -> Self {
        ObjectHash(Sha256::digest(bytes).into())
    }

    /// Wraps 32 raw bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        ObjectHash(bytes)
    }

    /// The 32 raw bytes.
    pub fn as_bytes(&self) -> &[u8; 32] {
        &self.0
    }

    /// Lowercase hex, 64 characters.
    pub fn to_hex(&self) -> String {
        String::from_utf8_lossy(&self.hex_bytes()).into_owned()
    }

    /// Lowercase hex into a stack buffer (manifests and indexes hold tens of
    /// thousands of hashes, so this avoids an allocation per hash).
    pub fn hex_bytes(&self) -> [u8; 64] {
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut out = [0u8; 64];
        for (i, b) in self.0.iter().enumerate() {
            out[2 * i] = DIGITS[usize::from(b >> 4)];
            out[2 * i + 1] = DIGITS[usize::from(b & 15)];
        }
        out
    }

    /// Parses 64 hex digits. Uppercase is refused so that one object has
    /// exactly one name.
    ///
    /// # Errors
    /// [`HashParseError`] for anything else.
    pub fn parse(s: &str) -> Result<Self, HashParseError> {
        fn nibble(c: u8) -> Option<u8> {
            match c {
                b'0'..=b'9' => Some(c - b'0'),
                b'a'..=b'f' => Some(c - b'a' + 10),
                _ => None,
            }
        }
        let b = s.as_bytes();
        let mut out = [0u8; 32];
        let ok = b.len() == 64
            && out.iter_mut().enumerate().all(|(i, o)| {
                match (nibble(b[2 * i]), nibble(b[2 * i + 1])) {
                    (Some(h), Some(l)) => {
                        *o = h << 4 | l;
                        true
                    }
                    _ => false,
                }
            });
        if ok {
            return Ok(ObjectHash(out));
        }
        Err(HashParseError {
            shown: s.chars().take(70).collect(),
        })
    }

    /// The fan-out directory name: the first two hex digits.
    pub(crate) fn fan_out(&self) -> String {
        String::from_utf8_lossy(&self.hex_bytes()[..2]).into_owned()
    }

    /// The file name inside the fan-out directory: the remaining 62 digits.
    pub(crate) fn rest(&self) -> String {
        String::from_utf8_lossy(&self.hex_bytes()[2..]).into_owned()
    }
}

impl fmt::Display for ObjectHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let hex = self.hex_bytes();
        f.write_str(std::str::from_utf8(&hex).map_err(|_| fmt::Error)?)
    }
}

impl fmt::Debug for ObjectHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ObjectHash({})", self.to_hex())
    }
}

impl FromStr for ObjectHash {
    type Err = HashParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ObjectHash::parse(s)
    }
}

impl serde::Serialize for ObjectHash {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let hex = self.hex_bytes();
        s.serialize_str(std::str::from_utf8(&hex).map_err(serde::ser::Error::custom)?)
    }
}

impl<'de> serde::Deserialize<'de> for ObjectHash {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = ObjectHash;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("64 lowercase hex digits")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<ObjectHash, E> {
                ObjectHash::parse(v).map_err(E::custom)
            }
        }
        d.deserialize_str(V)
    }
}

/// Incremental hashing, for streams.
#[derive(Clone, Default)]
pub(crate) struct Hasher {
    inner: Sha256,
    len: u64,
}

impl Hasher {
    pub(crate) fn update(&mut self, bytes: &[u8]) {
        self.inner.update(bytes);
        self.len += bytes.len() as u64;
    }

    pub(crate) fn finish(self) -> (ObjectHash, u64) {
        (ObjectHash(self.inner.finalize().into()), self.len)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn known_vector_and_round_trip() {
        let h = ObjectHash::of(b"abc");
        assert_eq!(
            h.to_hex(),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert_eq!(ObjectHash::parse(&h.to_hex()).unwrap(), h);
        assert_eq!(h.fan_out(), "ba");
        assert_eq!(h.rest().len(), 62);
        let json = serde_json::to_string(&h).unwrap();
        assert_eq!(serde_json::from_str::<ObjectHash>(&json).unwrap(), h);
    }

    #[test]
    fn refuses_malformed() {
        for bad in ["", "ab", &"A".repeat(64), &"g".repeat(64), &"a".repeat(65)] {
            assert!(ObjectHash::parse(bad).is_err(), "{bad}");
        }
    }
}
