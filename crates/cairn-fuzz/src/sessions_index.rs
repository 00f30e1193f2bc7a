//! `sessions.index`, as a lister reads it (`cairn_sessions`' index lines).
//!
//! Input: the file's bytes.
//!
//! Properties:
//! 1. each id is keyed from a line of the input, no longer than a line may
//!    be, and once (the newest line wins);
//! 2. a line that vouches for anything names that id, exactly, in its `id`
//!    field (read on its own: the parser skips the fields a lister does not
//!    use without checking their escapes, so the line need not be valid
//!    JSON everywhere, only where it is read);
//! 3. what it vouches for, written back as cairn writes a line, is read
//!    back the same under the same id.

use cairn_sessions::{index_entries_of, index_line_of};

/// The `id` of a line, the rest skipped.
#[derive(serde::Deserialize)]
struct Named {
    id: String,
}

/// Checks the index properties (see the module doc) on `data`.
pub fn sessions_index(data: &[u8]) {
    let lines: Vec<&[u8]> = data.split(|&b| b == b'\n').collect();
    let entries = index_entries_of(data);
    for pair in entries.windows(2) {
        assert!(pair[0].0 < pair[1].0, "an id keyed twice: {}", pair[0].0);
    }
    for (id, line, vouched) in entries {
        assert!(
            lines.contains(&line.as_slice()),
            "{id} keyed from bytes that are no line of the index"
        );
        let Some(v) = vouched else { continue };
        let named: Named = serde_json::from_slice(&line).expect("a line that vouches names an id");
        assert_eq!(
            named.id, id,
            "a line vouches under another id than it names"
        );
        let mut again = index_line_of(&id, &v);
        again.push(b'\n');
        let back = index_entries_of(&again);
        assert_eq!(back.len(), 1, "one line written, one entry read");
        assert_eq!(back[0].0, id);
        assert_eq!(back[0].2.as_ref(), Some(&v), "written back, read the same");
    }
}
