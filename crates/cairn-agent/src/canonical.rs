//! Canonical JSON bytes (object keys sorted at every depth, no whitespace), so
//! a hash over a value does not depend on a serde feature flag or on insertion
//! order.

use serde_json::Value;

/// Writes `v` canonically into `out`.
pub fn write(v: &Value, out: &mut Vec<u8>) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push(b'{');
            for (i, k) in keys.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write(&Value::String((*k).clone()), out);
                out.push(b':');
                if let Some(x) = m.get(*k) {
                    write(x, out);
                }
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
        // Scalars have one serialisation already.
        other => out.extend_from_slice(other.to_string().as_bytes()),
    }
}

/// SHA-256 of the canonical bytes of `v`, hex.
pub fn hash<T: serde::Serialize>(prefix: &str, v: &T) -> String {
    use sha2::{Digest, Sha256};
    let value = serde_json::to_value(v).unwrap_or(Value::Null);
    let mut bytes = prefix.as_bytes().to_vec();
    write(&value, &mut bytes);
    hex::encode(Sha256::digest(&bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_does_not_matter() {
        let a: Value =
            serde_json::from_str(r#"{"b":1,"a":{"y":[1,{"q":2,"p":3}],"x":"s"}}"#).unwrap();
        let b: Value =
            serde_json::from_str(r#"{"a":{"x":"s","y":[1,{"p":3,"q":2}]},"b":1}"#).unwrap();
        let (mut x, mut y) = (vec![], vec![]);
        write(&a, &mut x);
        write(&b, &mut y);
        assert_eq!(x, y);
        assert_eq!(
            String::from_utf8(x).unwrap(),
            r#"{"a":{"x":"s","y":[1,{"p":3,"q":2}]},"b":1}"#
        );
    }
}
