//! The hash chain (DESIGN §2), an open format.
//!
//! - `h(0)` = SHA-256(`cairn/genesis\n` ‖ run id) for a root run, or
//!   SHA-256(`cairn/fork\n` ‖ parent id ‖ `\n` ‖ fork seq in decimal ‖ `\n` ‖
//!   parent's `h(seq)` in lowercase hex) for a fork;
//! - `h(n)` = SHA-256(raw 32 bytes of `h(n-1)` ‖ line n without its `\n`).
//!
//! The bytes hashed are the bytes written, never a re-serialisation.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};

/// One link of the chain: a SHA-256 value, shown as 64 lowercase hex digits.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ChainHash(pub [u8; 32]);

impl ChainHash {
    /// `h(0)` of a root run.
    pub fn genesis(run: &str) -> Self {
        let mut h = Sha256::new();
        h.update(b"cairn/genesis\n");
        h.update(run.as_bytes());
        ChainHash(h.finalize().into())
    }

    /// `h(0)` of a fork of `parent` at `seq`, whose chain hash there is `at`.
    pub fn fork_genesis(parent: &str, seq: u64, at: &ChainHash) -> Self {
        let mut h = Sha256::new();
        h.update(b"cairn/fork\n");
        h.update(parent.as_bytes());
        h.update(b"\n");
        h.update(seq.to_string().as_bytes());
        h.update(b"\n");
        h.update(at.to_hex().as_bytes());
        ChainHash(h.finalize().into())
    }

    /// `h(n)` from `h(n-1)` (self) and the bytes of line n without its newline.
    pub fn next(&self, line: &[u8]) -> Self {
        let mut h = Sha256::new();
        h.update(self.0);
        h.update(line);
        ChainHash(h.finalize().into())
    }

    /// Lowercase hex.
    pub fn to_hex(&self) -> String {
        // Two digits per byte from a table; a listing writes one per session.
        const DIGITS: &[u8; 16] = b"0123456789abcdef";
        let mut s = String::with_capacity(64);
        for b in self.0 {
            s.push(char::from(DIGITS[usize::from(b >> 4)]));
            s.push(char::from(DIGITS[usize::from(b & 0xF)]));
        }
        s
    }

    /// Parses exactly 64 lowercase hex digits; anything else is `None`, so an
    /// upper-case or padded `prev` never compares equal to the computed link.
    pub fn from_hex(s: &str) -> Option<Self> {
        // One pass without a branch per digit, no second validation: every
        // record's `prev` is read through here, so it is on the hot path of
        // every read. A digit's value has its high nibble clear; anything
        // else is marked by one (`NOT_HEX`), collected in `bad`.
        let b = s.as_bytes();
        if b.len() != 64 {
            return None;
        }
        let mut out = [0u8; 32];
        let mut bad = 0u8;
        for (o, pair) in out.iter_mut().zip(b.chunks_exact(2)) {
            let (hi, lo) = (
                HEX_VALUE[usize::from(pair[0])],
                HEX_VALUE[usize::from(pair[1])],
            );
            bad |= hi | lo;
            *o = (hi << 4) | lo;
        }
        (bad & NOT_HEX == 0).then_some(ChainHash(out))
    }
}

/// Marks a byte that is not a lowercase hex digit in [`HEX_VALUE`].
const NOT_HEX: u8 = 0xF0;

/// The value of each lowercase hex digit; [`NOT_HEX`] for every other byte.
const HEX_VALUE: [u8; 256] = {
    let mut t = [NOT_HEX; 256];
    let mut i = 0;
    while i < 10 {
        t[b'0' as usize + i] = i as u8;
        i += 1;
    }
    let mut i = 0;
    while i < 6 {
        t[b'a' as usize + i] = 10 + i as u8;
        i += 1;
    }
    t
};

impl fmt::Display for ChainHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.to_hex())
    }
}

impl fmt::Debug for ChainHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "ChainHash({})", self.to_hex())
    }
}

/// The error of parsing a [`ChainHash`] from text.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("not a chain hash: expected 64 lowercase hex digits")]
pub struct ChainHashParseError;

impl FromStr for ChainHash {
    type Err = ChainHashParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ChainHash::from_hex(s).ok_or(ChainHashParseError)
    }
}

impl Serialize for ChainHash {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.to_hex())
    }
}

impl<'de> Deserialize<'de> for ChainHash {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        ChainHash::from_hex(&s).ok_or_else(|| serde::de::Error::custom(ChainHashParseError))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn genesis_matches_an_independent_computation() {
        let g = ChainHash::genesis("01ABC");
        let want: [u8; 32] = Sha256::digest(b"cairn/genesis\n01ABC").into();
        assert_eq!(g.0, want);
        let f = ChainHash::fork_genesis("P", 7, &g);
        let text = format!("cairn/fork\nP\n7\n{}", g.to_hex());
        let want: [u8; 32] = Sha256::digest(text.as_bytes()).into();
        assert_eq!(f.0, want);
    }

    #[test]
    fn hex_is_strict() {
        let g = ChainHash::genesis("x");
        assert_eq!(ChainHash::from_hex(&g.to_hex()), Some(g));
        assert_eq!(ChainHash::from_hex(&g.to_hex().to_uppercase()), None);
        assert_eq!(ChainHash::from_hex("ab"), None);
        for bad in ["g", "G", "A", " ", "-", "é"] {
            let mut h = g.to_hex();
            h.replace_range(63..64, bad);
            assert_eq!(ChainHash::from_hex(&h), None, "{h}");
        }
        let all = "0123456789abcdef".repeat(4);
        assert_eq!(ChainHash::from_hex(&all).map(|h| h.to_hex()), Some(all));
    }

    #[test]
    fn every_ascii_byte_in_every_position_is_read_as_a_lowercase_digit_or_refused() {
        let base = "0".repeat(64);
        for c in 0u8..128 {
            let digit = match c {
                b'0'..=b'9' => Some(c - b'0'),
                b'a'..=b'f' => Some(c - b'a' + 10),
                _ => None,
            };
            for at in 0..64 {
                let mut h = base.clone().into_bytes();
                h[at] = c;
                let h = String::from_utf8(h).unwrap();
                let want = digit.map(|d| {
                    let mut out = [0u8; 32];
                    out[at / 2] = if at % 2 == 0 { d << 4 } else { d };
                    ChainHash(out)
                });
                assert_eq!(ChainHash::from_hex(&h), want, "byte {c} at {at}");
            }
        }
    }
}
