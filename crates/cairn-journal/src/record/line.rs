//! One pass over a record line in the order cairn writes it.
//!
//! [`Record::from_line`](super::Record::from_line) is defined by its two-pass
//! reading: the header (`v`, `seq`, `prev`, `ts`, `kind`, other fields
//! ignored), then the body struct `kind` names, read from the whole line
//! (the header's fields ignored). That reads every line twice. A writer puts
//! the header first, in that order ([`super::write_line`]), so most lines
//! can be read once: the five header fields in order, then the rest of the
//! object handed to the body struct.
//!
//! Invariants:
//! - this pass gives a record only where the two-pass reading gives the same
//!   record; anywhere else it gives `None` and the caller makes the two
//!   passes, so every error (and its message, which damage reports quote)
//!   is theirs. It gives `None` for a header out of order or missing, a key
//!   or `kind` written with escapes (not borrowed from the line), a header
//!   field again after `kind` (the two passes refuse the duplicate), a body
//!   that does not parse, and anything but whitespace after the object;
//! - that equivalence needs every body struct to ignore unknown fields (the
//!   two-pass body read sees the header's) and to have no field named as a
//!   header field (it would read the header's value there, and not here);
//!   the fuzz target's property 1 holds `from_line` to serde's reading of
//!   [`super::Record`], which the two passes equal.

use serde::de::value::{BorrowedStrDeserializer, MapAccessDeserializer};
use serde::de::{DeserializeSeed, Deserializer, Error as _, MapAccess, Visitor};
use serde::Deserialize;

use super::Record;
use crate::chain::ChainHash;

/// The header's fields, in the order a writer puts them.
const HEADER: [&str; 5] = ["v", "seq", "prev", "ts", "kind"];

/// The record on `line` read in one pass, or `None` where only the two
/// passes may say what it is (see the module doc).
pub(super) fn in_order(line: &str) -> Option<Record> {
    let mut de = serde_json::Deserializer::from_str(line);
    let record = de.deserialize_map(InOrder).ok()?;
    de.end().ok()?;
    Some(record)
}

struct InOrder;

impl<'de> Visitor<'de> for InOrder {
    type Value = Record;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a record whose header comes first, in order")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Record, A::Error> {
        fn field<'de, A: MapAccess<'de>>(map: &mut A, name: &str) -> Result<(), A::Error> {
            match map.next_key::<&'de str>()? {
                Some(k) if k == name => Ok(()),
                _ => Err(A::Error::custom("the header is not first, in order")),
            }
        }
        field(&mut map, "v")?;
        let v: u32 = map.next_value()?;
        field(&mut map, "seq")?;
        let seq: u64 = map.next_value()?;
        field(&mut map, "prev")?;
        let prev: ChainHash = map.next_value()?;
        field(&mut map, "ts")?;
        let ts: String = map.next_value()?;
        field(&mut map, "kind")?;
        let kind: &'de str = map.next_value()?;
        let rest = MapAccessDeserializer::new(Rest(map));
        let body = super::body(kind, rest)?.ok_or_else(|| A::Error::custom("an unknown kind"))?;
        Ok(Record {
            v,
            seq,
            prev,
            ts,
            body,
        })
    }
}

/// The object's fields after `kind`, for a body struct; a header field among
/// them is refused.
struct Rest<A>(A);

impl<'de, A: MapAccess<'de>> MapAccess<'de> for Rest<A> {
    type Error = A::Error;

    fn next_key_seed<K: DeserializeSeed<'de>>(
        &mut self,
        seed: K,
    ) -> Result<Option<K::Value>, A::Error> {
        self.0.next_key_seed(NotHeader(seed))
    }

    fn next_value_seed<V: DeserializeSeed<'de>>(&mut self, seed: V) -> Result<V::Value, A::Error> {
        self.0.next_value_seed(seed)
    }
}

/// A key, seen before the body's own key reader gets it.
struct NotHeader<K>(K);

impl<'de, K: DeserializeSeed<'de>> DeserializeSeed<'de> for NotHeader<K> {
    type Value = K::Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<K::Value, D::Error> {
        let key = <&'de str>::deserialize(d)?;
        if HEADER.contains(&key) {
            return Err(D::Error::custom("a header field after `kind`"));
        }
        self.0
            .deserialize(BorrowedStrDeserializer::<D::Error>::new(key))
    }
}

#[cfg(test)]
mod tests {
    use super::super::two_passes;
    use super::*;

    const PREV: &str = "0000000000000000000000000000000000000000000000000000000000000000";

    #[test]
    fn a_line_as_written_is_read_in_one_pass_as_the_two_passes_read_it() {
        let lines = [
            format!(r#"{{"v":1,"seq":2,"prev":"{PREV}","ts":"t","kind":"user","text":"a"}}"#),
            format!(
                r#"{{"v":1,"seq":9,"prev":"{PREV}","ts":"t","kind":"terminal","reason":"completed","totals":{{"turns":1,"input_tokens":3,"output_tokens":2,"cost":{{"state":"known","usd":0.5}},"tool_calls":0}}}}"#
            ),
            format!(
                r#"{{"v":1,"seq":2,"prev":"{PREV}","ts":"t","kind":"user","text":"a","extra":[1,{{"x":2}}]}}  "#
            ),
        ];
        for line in &lines {
            let one = in_order(line).unwrap_or_else(|| panic!("not read in one pass: {line}"));
            assert_eq!(Some(one), two_passes(line).ok(), "{line}");
        }
    }

    #[test]
    fn a_line_the_one_pass_cannot_vouch_for_is_left_to_the_two_passes() {
        let cases = [
            // Out of order, or a field before the header ends.
            format!(r#"{{"seq":2,"v":1,"prev":"{PREV}","ts":"t","kind":"user","text":"a"}}"#),
            format!(r#"{{"v":1,"seq":2,"prev":"{PREV}","text":"a","ts":"t","kind":"user"}}"#),
            // Escapes in a key or in the kind.
            format!(r#"{{"\u0076":1,"seq":2,"prev":"{PREV}","ts":"t","kind":"user","text":"a"}}"#),
            format!(r#"{{"v":1,"seq":2,"prev":"{PREV}","ts":"t","kind":"us\u0065r","text":"a"}}"#),
            // A header field again: the two passes refuse the duplicate.
            format!(
                r#"{{"v":1,"seq":2,"prev":"{PREV}","ts":"t","kind":"user","text":"a","seq":3}}"#
            ),
            format!(
                r#"{{"v":1,"seq":2,"prev":"{PREV}","ts":"t","kind":"user","text":"a","kind":"meta"}}"#
            ),
            // A body that does not parse, an unknown kind, trailing bytes.
            format!(r#"{{"v":1,"seq":2,"prev":"{PREV}","ts":"t","kind":"user"}}"#),
            format!(r#"{{"v":1,"seq":2,"prev":"{PREV}","ts":"t","kind":"nope","text":"a"}}"#),
            format!(r#"{{"v":1,"seq":2,"prev":"{PREV}","ts":"t","kind":"user","text":"a"}} x"#),
        ];
        for line in &cases {
            assert!(in_order(line).is_none(), "read in one pass: {line}");
        }
        // Where the two passes read such a line, `from_line` gives their record.
        let reordered = &cases[0];
        let two = two_passes(reordered).expect("the two passes read a reordered header");
        assert_eq!(Record::from_line(reordered.as_bytes()).ok(), Some(two));
        for dup in &cases[4..6] {
            assert!(two_passes(dup).is_err(), "{dup}");
            assert!(Record::from_line(dup.as_bytes()).is_err(), "{dup}");
        }
    }
}
