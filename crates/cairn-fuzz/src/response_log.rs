//! The response log (`<store>/gateway/log/<n>.log`, `cairn_calls`).
//!
//! Input: a segment's bytes, written as the store's only segment.
//!
//! Properties:
//! 1. reading the store never panics: its entries either read, or the read
//!    is an error (damage is never a miss, never a crash);
//! 2. when they read, a response put next is appended after whatever the
//!    bytes ended with (a torn tail cut first) and reads back, with its
//!    body, beside every entry read before.

use cairn_calls::{Entry, ResponseStore};

use crate::scratch::Scratch;

/// Checks the response-log properties (see the module doc) on `data`.
pub fn response_log(data: &[u8]) {
    let scratch = Scratch::new();
    let dir = scratch.store.gateway_dir().join("log");
    std::fs::create_dir_all(&dir).unwrap_or_else(|e| panic!("{e}"));
    std::fs::write(dir.join("0000000001.log"), data).unwrap_or_else(|e| panic!("{e}"));
    let rs = ResponseStore::new(&scratch.store);
    let Ok(before) = rs.entries() else {
        return; // property 1: damage is an error
    };
    let key = "f".repeat(64);
    let put = rs
        .put(
            Entry::whole_json(key.as_str(), "R", "agent:fuzz"),
            b"fuzz body",
            None,
        )
        .unwrap_or_else(|e| panic!("the log read, and a put after it failed: {e}"));
    let fresh = ResponseStore::new(&scratch.store);
    let got = fresh
        .get(&key)
        .unwrap_or_else(|e| panic!("the entry just put does not read: {e}"))
        .unwrap_or_else(|| panic!("the entry just put is gone"));
    assert_eq!(got.entry.body, put.body);
    assert_eq!(
        fresh.body(&got).ok().as_deref(),
        Some(&b"fuzz body"[..]),
        "the body of the entry just put"
    );
    let after = fresh
        .entries()
        .unwrap_or_else(|e| panic!("the log does not read after a put: {e}"));
    let had_key = before.iter().any(|s| s.entry.key == key);
    assert_eq!(
        after.len(),
        before.len() + usize::from(!had_key),
        "the entries read before, and the one put"
    );
}
