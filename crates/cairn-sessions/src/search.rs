//! Text search across sessions: which records of which sessions say a
//! text — your messages, the model's answers, tool output — newest session
//! first.
//!
//! Invariants: only verified records are searched (each journal is read
//! through the one reader, as a resume reads it; a journal that does not
//! verify is skipped and counted, never half-read); the search is bounded
//! by a number of hits and a deadline, and says when it stopped early.

use std::time::Instant;

use cairn_journal::RecordBody;
use cairn_store::{RunId, Store};
use serde::Serialize;

use crate::error::SessionError;

/// Where a text was found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Hit {
    /// The session.
    pub id: String,
    /// Its name.
    pub name: Option<String>,
    /// The record's journal seq.
    pub seq: u64,
    /// The record's kind (`user`, `assistant`, `tool_result`).
    pub kind: String,
    /// The text around the match (at most about 160 characters).
    pub excerpt: String,
}

/// What a search found.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Found {
    /// The hits, newest session first, each session's in journal order.
    pub hits: Vec<Hit>,
    /// Sessions searched.
    pub searched: usize,
    /// Sessions skipped because their journal does not verify.
    pub unreadable: usize,
    /// Every session was searched (false: the hits or the deadline ran
    /// out first).
    pub complete: bool,
}

/// Searches the sessions of `store`, newest first, for `text` (ignoring
/// ASCII case), up to `limit` hits or until `deadline`.
///
/// # Errors
/// The store's sessions cannot be listed.
pub fn search(
    store: &Store,
    text: &str,
    limit: usize,
    deadline: Instant,
) -> Result<Found, SessionError> {
    let needle = text.to_ascii_lowercase();
    let mut found = Found {
        hits: Vec::new(),
        searched: 0,
        unreadable: 0,
        complete: limit > 0,
    };
    if limit == 0 {
        return Ok(found);
    }
    for s in crate::list(store)? {
        if Instant::now() >= deadline {
            found.complete = false;
            break;
        }
        let Ok(id) = RunId::parse(&s.id) else {
            continue;
        };
        found.searched += 1;
        let Ok(scan) = cairn_journal::read_journal(&store.journal_path(&id), id.as_str()) else {
            found.unreadable += 1;
            continue;
        };
        for r in &scan.records {
            let (kind, said) = match &r.body {
                RecordBody::User(u) => ("user", u.text.as_str()),
                RecordBody::Assistant(a) => ("assistant", a.text.as_str()),
                RecordBody::ToolResult(t) => ("tool_result", t.output.as_str()),
                _ => continue,
            };
            if let Some(at) = said.to_ascii_lowercase().find(&needle) {
                found.hits.push(Hit {
                    id: s.id.clone(),
                    name: s.name.clone(),
                    seq: r.seq,
                    kind: kind.into(),
                    excerpt: excerpt(said, at, needle.len()),
                });
                if found.hits.len() >= limit {
                    // More may follow, in this session or the next.
                    found.complete = false;
                    return Ok(found);
                }
            }
        }
    }
    Ok(found)
}

/// About 60 characters either side of the match at byte `at` (of `len`
/// bytes), on character boundaries, with `…` where it was cut.
fn excerpt(text: &str, at: usize, len: usize) -> String {
    const SIDE: usize = 60;
    let mut start = at.saturating_sub(SIDE);
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = (at + len + SIDE).min(text.len());
    while !text.is_char_boundary(end) {
        end += 1;
    }
    let mut out = String::new();
    if start > 0 {
        out.push('…');
    }
    out.push_str(&text[start..end].replace(['\n', '\r', '\t'], " "));
    if end < text.len() {
        out.push('…');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_excerpt_is_cut_on_character_boundaries_around_the_match() {
        let text = format!("{}needle{}", "é".repeat(100), "ü".repeat(100));
        let at = text.find("needle").unwrap();
        let e = excerpt(&text, at, 6);
        assert!(e.starts_with('…') && e.ends_with('…'), "{e}");
        assert!(e.contains("needle"));
        assert_eq!(excerpt("a\nneedle\tb", 2, 6), "a needle b");
    }
}
