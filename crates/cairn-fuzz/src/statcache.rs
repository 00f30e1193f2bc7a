//! The stat cache file (`<run>/workspace/statcache.bin`).
//!
//! Input: the file's bytes. Each input is decoded twice: as it is, and
//! sealed (its SHA-256 appended, as the writer ends the file), so the
//! fuzzer reaches the decoder past the checksum.
//!
//! Properties:
//! 1. the decoder accepts exactly what a model of the documented layout
//!    accepts (magic, version 1, a count the bytes can hold, UTF-8 paths
//!    strictly sorted, nothing after the entries, the checksum of everything
//!    before it);
//! 2. what it accepts encodes back to the same bytes, byte for byte, and the
//!    checksum it records is the file's last 32 bytes.

use cairn_objects::ObjectHash;
use cairn_workspace::statcache_round_trip;

/// Checks the stat-cache properties (see the module doc) on `data`.
pub fn statcache(data: &[u8]) {
    check(data);
    let mut sealed = data.to_vec();
    sealed.extend_from_slice(ObjectHash::of(data).as_bytes());
    check(&sealed);
}

fn check(bytes: &[u8]) {
    let got = statcache_round_trip(bytes);
    let want = model(bytes);
    assert_eq!(
        got.is_some(),
        want.is_some(),
        "the decoder {} a file the model {}",
        if got.is_some() { "accepts" } else { "refuses" },
        if want.is_some() { "accepts" } else { "refuses" },
    );
    if let Some((encoded, on_disk)) = got {
        assert_eq!(
            encoded, bytes,
            "a decoded cache does not encode to its file"
        );
        let sum = &bytes[bytes.len() - 32..];
        assert_eq!(
            on_disk.map(|h| *h.as_bytes()),
            sum.try_into().ok(),
            "the checksum recorded"
        );
    }
}

/// The layout of `statcache.rs`, read independently: `Some(count)` when
/// the file is a version-1 cache.
fn model(bytes: &[u8]) -> Option<u64> {
    let body = bytes.get(..bytes.len().checked_sub(32)?)?;
    if ObjectHash::of(body).as_bytes()[..] != bytes[body.len()..] {
        return None;
    }
    let mut at = 0usize;
    let mut take = |n: usize| -> Option<&[u8]> {
        let s = body.get(at..at.checked_add(n)?)?;
        at += n;
        Some(s)
    };
    if take(8)? != b"cairnSC\n" {
        return None;
    }
    if u32::from_le_bytes(take(4)?.try_into().ok()?) != 1 {
        return None;
    }
    take(8)?; // started_ns, any value
    let count = u64::from_le_bytes(take(8)?.try_into().ok()?);
    let mut last: Option<&str> = None;
    for _ in 0..count {
        let len = u32::from_le_bytes(take(4)?.try_into().ok()?);
        let path = std::str::from_utf8(take(usize::try_from(len).ok()?)?).ok()?;
        if last.is_some_and(|l| l >= path) {
            return None;
        }
        last = Some(path);
        take(8 + 8 + 8 + 8 + 4 + 32)?;
    }
    (at == body.len()).then_some(count)
}
