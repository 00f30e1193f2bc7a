//! Canonical JSON bytes: object keys sorted (by their UTF-8 bytes) at every
//! depth, no whitespace, so a hash over a value depends neither on the order
//! its keys were written in nor on a serde feature flag.
//!
//! The bytes are a format (call keys and fingerprints hashed over them are
//! stored), so they are specified exactly:
//!
//! 1. `null`, `true`, `false` as themselves.
//! 2. A string as `serde_json` writes it: `"` and `\` escaped, control
//!    characters as `\n`, `\t`, … or `\u00XX`, everything else (non-ASCII
//!    included) as its UTF-8 bytes.
//! 3. A number that is an integer in `u64` or `i64` in decimal; any other
//!    number as the shortest decimal that reads back to the same `f64`
//!    (`ryu`'s form, as `serde_json` writes floats: `1.0`, `0.1`, `1e+300`).
//!    Numbers are written from their value, never from the text they were
//!    parsed from, so `serde_json`'s `arbitrary_precision` feature (which a
//!    dependency could switch on for the whole build) does not change them.
//! 4. An array as `[` elements joined by `,` `]`.
//! 5. An object as `{` `"key":value` pairs joined by `,` `}`, keys in
//!    ascending byte order.

use serde_json::{Number, Value};

/// Writes `v` canonically into `out`.
pub fn write(v: &Value, out: &mut Vec<u8>) {
    write_without_keys(v, &[], out);
}

/// [`write`], with the top-level keys `skip` of an object left out (the
/// value is not copied to drop them).
pub fn write_without_keys(v: &Value, skip: &[&str], out: &mut Vec<u8>) {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(&String, &Value)> = m
                .iter()
                .filter(|(k, _)| !skip.contains(&k.as_str()))
                .collect();
            entries.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push(b'{');
            for (i, (k, x)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_string(k, out);
                out.push(b':');
                write(x, out);
            }
            out.push(b'}');
        }
        Value::Array(a) => {
            out.push(b'[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(x, out);
            }
            out.push(b']');
        }
        Value::String(s) => write_string(s, out),
        Value::Number(n) => write_number(n, out),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Null => out.extend_from_slice(b"null"),
    }
}

/// The canonical bytes of `v`.
pub fn to_vec(v: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write(v, &mut out);
    out
}

/// SHA-256 of `prefix` followed by the canonical bytes of `v`, lowercase hex.
pub fn hash_value(prefix: &str, v: &Value) -> String {
    use sha2::{Digest, Sha256};
    let mut bytes = prefix.as_bytes().to_vec();
    write(v, &mut bytes);
    hex::encode(Sha256::digest(&bytes))
}

/// SHA-256 of `prefix` followed by the canonical bytes of `v` serialised to
/// JSON, lowercase hex.
///
/// # Errors
/// When `v` does not serialise to a JSON value (its `Serialize` fails, or it
/// holds a map whose keys are not strings). A hash is never made of a value
/// that could not be written, since two such values would collide.
pub fn hash<T: serde::Serialize + ?Sized>(
    prefix: &str,
    v: &T,
) -> Result<String, serde_json::Error> {
    Ok(hash_value(prefix, &serde_json::to_value(v)?))
}

fn write_string(s: &str, out: &mut Vec<u8>) {
    // serde_json's string escaping has no feature-dependent variants.
    out.extend_from_slice(Value::String(s.to_owned()).to_string().as_bytes());
}

fn write_number(n: &Number, out: &mut Vec<u8>) {
    if let Some(u) = n.as_u64() {
        out.extend_from_slice(u.to_string().as_bytes());
    } else if let Some(i) = n.as_i64() {
        out.extend_from_slice(i.to_string().as_bytes());
    } else if let Some(f) = n.as_f64().and_then(Number::from_f64) {
        // A finite f64 as serde_json writes it (ryu, shortest round trip).
        out.extend_from_slice(f.to_string().as_bytes());
    } else {
        // Not representable as a finite f64 (only reachable with
        // `arbitrary_precision` and an out-of-range literal): its text.
        out.extend_from_slice(n.to_string().as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn canonical(text: &str) -> String {
        let v: Value = serde_json::from_str(text).unwrap();
        String::from_utf8(to_vec(&v)).unwrap()
    }

    #[test]
    fn key_order_does_not_matter() {
        let a = canonical(r#"{"b":1,"a":{"y":[1,{"q":2,"p":3}],"x":"s"}}"#);
        let b = canonical(r#"{ "a" : { "x":"s", "y":[1,{"p":3,"q":2}] }, "b":1 }"#);
        assert_eq!(a, b);
        assert_eq!(a, r#"{"a":{"x":"s","y":[1,{"p":3,"q":2}]},"b":1}"#);
    }

    #[test]
    fn writes_the_specified_bytes() {
        let rows = [
            ("null", "null"),
            ("[true,false]", "[true,false]"),
            ("0", "0"),
            ("-7", "-7"),
            ("18446744073709551615", "18446744073709551615"),
            ("-9223372036854775808", "-9223372036854775808"),
            ("1.0", "1.0"),
            ("1.50", "1.5"),
            ("1e2", "100.0"),
            ("1e300", "1e+300"),
            ("0.1", "0.1"),
            ("-0", "-0.0"),
            (r#""é\u00e9\n\"\\/""#, "\"éé\\n\\\"\\\\/\""),
            (r#""\u0001""#, r#""\u0001""#),
            (r#"{"é":1,"z":2,"A":3}"#, r#"{"A":3,"z":2,"é":1}"#),
            ("[ ]", "[]"),
            ("{ }", "{}"),
        ];
        for (input, want) in rows {
            assert_eq!(canonical(input), want, "input {input}");
        }
    }

    #[test]
    fn bytes_equal_serde_json_for_sorted_values() {
        // The agent's fingerprints were hashed over serde_json's output of
        // key-sorted values; moving the code here must not change them.
        let text =
            r#"{"a":[1,-2,3.25,1e21,"x\u0007"],"b":{"c":null,"d":true},"e":0.30000000000000004}"#;
        let v: Value = serde_json::from_str(text).unwrap();
        assert_eq!(to_vec(&v), serde_json::to_vec(&v).unwrap());
    }

    #[test]
    fn top_level_keys_can_be_left_out() {
        let v: Value = serde_json::from_str(r#"{"s":1,"b":{"s":2},"a":[{"s":3}]}"#).unwrap();
        let mut out = Vec::new();
        write_without_keys(&v, &["s", "x"], &mut out);
        assert_eq!(out, br#"{"a":[{"s":3}],"b":{"s":2}}"#);
    }

    #[test]
    fn hash_is_prefix_then_canonical_bytes() {
        use sha2::{Digest, Sha256};
        let v: Value = serde_json::from_str(r#"{"b":1,"a":2}"#).unwrap();
        let want = hex::encode(Sha256::digest(b"p\n{\"a\":2,\"b\":1}"));
        assert_eq!(hash_value("p\n", &v), want);
        assert_eq!(hash("p\n", &v).unwrap(), want);
    }

    #[test]
    fn hash_refuses_a_value_that_is_not_json() {
        let mut m = std::collections::BTreeMap::new();
        m.insert((1, 2), "non-string key");
        assert!(hash("p\n", &m).is_err());
    }
}
