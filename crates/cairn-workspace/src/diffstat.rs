//! Per-file line statistics between two states, like `git diff --stat`
//! (what the TUI's `/diff` and rewind confirm screen show, DESIGN §11).
//!
//! Rules, for one path whose entry differs between `from` and `to`:
//! 1. Only in `to`: [`ChangeKind::Added`], every line counted as added.
//!    Only in `from`: [`ChangeKind::Deleted`], every line counted as
//!    removed. Same content (hash and size), another mode:
//!    [`ChangeKind::Mode`], 0/0, content not read. Otherwise
//!    [`ChangeKind::Modified`], lines counted by a line diff.
//! 2. A line is what ends at a `\n` (or the end of the file), as git
//!    counts: `"a"` and `"a\n"` differ by one line removed and one added.
//! 3. Content is binary when it has a NUL byte in its first 8 KiB or is not
//!    UTF-8 (either side of a modification): `binary: true`, 0/0.
//! 4. The work is capped: content above [`MAX_COUNTED_BYTES`] (4 MiB, on
//!    either side) is not read and is reported like binary content
//!    (`binary: true`, 0/0), so a preview of a tree with large files stays
//!    fast.
//! 5. Counts come from the shortest edit script (exact: `removed` is the
//!    old line count minus the longest common subsequence) for up to
//!    8,192 lines, old and new together; above that, from git's bounded
//!    Myers heuristic, as `git diff --stat` counts, which can count a few
//!    more lines on highly repetitive input. A line diff that runs past
//!    one second settles for an approximation. Either way the counts are
//!    those of a valid edit script: never below the exact ones, and
//!    `added - removed` is always the change in line count.
//!
//! Invariants: content is read from the object pool by hash and verified
//! (chunked objects are reassembled chunk by chunk); a missing or damaged
//! object is an error, never a 0/0 row. Rows are sorted by path. Nothing is
//! written.

use std::collections::BTreeMap;
use std::time::Duration;

use cairn_objects::ObjectPool;
use rayon::prelude::*;
use serde::Serialize;
use similar::{Algorithm, DiffTag, TextDiff};

use crate::manifest::Entry;
use crate::WorkspaceError;

/// Content above this many bytes is not line-counted: it is reported
/// `binary`-style (0/0), so a diff stat stays fast.
pub const MAX_COUNTED_BYTES: u64 = 4 << 20;

/// How far into a file a NUL byte makes it binary (as git looks).
const BINARY_PROBE: usize = 8 << 10;

/// Up to this many lines (old and new together) a line diff is the
/// shortest edit script, so its counts are exact.
pub(crate) const EXACT_MAX_LINES: usize = 8192;

/// How long one file's line diff may take before it settles for an
/// approximation.
pub(crate) const DIFF_TIMEOUT: Duration = Duration::from_secs(1);

/// How one file differs between two states.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeKind {
    /// Present only in the newer state.
    Added,
    /// Present in both, with other content.
    Modified,
    /// Present only in the older state.
    Deleted,
    /// The same content, other permission bits.
    Mode,
}

/// One file's difference, with a line count like `git diff --stat`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct FileChange {
    /// The path, relative to the workspace root.
    pub path: String,
    /// How it differs.
    pub change: ChangeKind,
    /// Lines added (0 for binary, too-large and mode-only changes).
    pub added: u64,
    /// Lines removed (0 for binary, too-large and mode-only changes).
    pub removed: u64,
    /// True when the content is binary (a NUL byte in its first 8 KiB, or
    /// not UTF-8), or over [`MAX_COUNTED_BYTES`] and so not counted.
    pub binary: bool,
}

/// One path to describe: its entry before and after.
pub(crate) type Pair<'a> = (&'a str, Option<&'a Entry>, Option<&'a Entry>);

/// Describes every pair (in parallel), sorted by path; pairs whose entries
/// are equal (or both absent) are dropped.
///
/// # Errors
/// An object cannot be read ([`WorkspaceError::Objects`]: missing,
/// damaged, IO).
pub(crate) fn describe_all(
    pool: &ObjectPool,
    pairs: &[Pair<'_>],
) -> Result<Vec<FileChange>, WorkspaceError> {
    let rows: Vec<Option<FileChange>> = pairs
        .par_iter()
        .map(|(path, from, to)| describe(pool, path, *from, *to))
        .collect::<Result<_, _>>()?;
    let mut rows: Vec<FileChange> = rows.into_iter().flatten().collect();
    rows.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(rows)
}

/// Every path whose entry differs between `from` and `to`, as pairs.
pub(crate) fn differing<'a>(
    from: &'a BTreeMap<String, Entry>,
    to: &'a BTreeMap<String, Entry>,
) -> Vec<Pair<'a>> {
    let mut out: Vec<Pair<'a>> = from
        .iter()
        .filter(|(p, e)| to.get(*p) != Some(*e))
        .map(|(p, e)| (p.as_str(), Some(e), to.get(p)))
        .chain(
            to.iter()
                .filter(|(p, _)| !from.contains_key(*p))
                .map(|(p, e)| (p.as_str(), None, Some(e))),
        )
        .collect();
    out.sort_by(|a, b| a.0.cmp(b.0));
    out
}

/// One path's row; `None` when the entries are equal.
fn describe(
    pool: &ObjectPool,
    path: &str,
    from: Option<&Entry>,
    to: Option<&Entry>,
) -> Result<Option<FileChange>, WorkspaceError> {
    let change = match (from, to) {
        (None, None) => return Ok(None),
        (Some(a), Some(b)) if a == b => return Ok(None),
        (None, Some(_)) => ChangeKind::Added,
        (Some(_), None) => ChangeKind::Deleted,
        (Some(a), Some(b)) if a.hash == b.hash && a.size == b.size => ChangeKind::Mode,
        (Some(_), Some(_)) => ChangeKind::Modified,
    };
    let row = |added, removed, binary| FileChange {
        path: path.to_owned(),
        change: change.clone(),
        added,
        removed,
        binary,
    };
    if change == ChangeKind::Mode {
        return Ok(Some(row(0, 0, false)));
    }
    if from
        .into_iter()
        .chain(to)
        .any(|e| e.size > MAX_COUNTED_BYTES)
    {
        return Ok(Some(row(0, 0, true)));
    }
    let old = from.map(|e| pool.get(&e.hash)).transpose()?;
    let new = to.map(|e| pool.get(&e.hash)).transpose()?;
    let (old, new) = match (text(old.as_deref()), text(new.as_deref())) {
        (Some(old), Some(new)) => (old, new),
        _ => return Ok(Some(row(0, 0, true))),
    };
    let (added, removed) = count_lines(old, new);
    Ok(Some(row(added, removed, false)))
}

/// A unified diff (`--- a/PATH`, `+++ b/PATH`, hunks with 3 lines of
/// context) of one path from `from` to `to`, by the same rules as the
/// stats: `None` when the path is equal in both, binary (rule 3) or over
/// [`MAX_COUNTED_BYTES`] (rule 4) on either side.
///
/// # Errors
/// A missing or damaged object.
pub(crate) fn unified(
    pool: &ObjectPool,
    path: &str,
    from: Option<&Entry>,
    to: Option<&Entry>,
) -> Result<Option<String>, WorkspaceError> {
    match (from, to) {
        (None, None) => return Ok(None),
        (Some(a), Some(b)) if a.hash == b.hash && a.size == b.size => return Ok(None),
        _ => {}
    }
    if from
        .into_iter()
        .chain(to)
        .any(|e| e.size > MAX_COUNTED_BYTES)
    {
        return Ok(None);
    }
    let old = from.map(|e| pool.get(&e.hash)).transpose()?;
    let new = to.map(|e| pool.get(&e.hash)).transpose()?;
    let (Some(old), Some(new)) = (text(old.as_deref()), text(new.as_deref())) else {
        return Ok(None);
    };
    let diff = TextDiff::configure()
        .algorithm(Algorithm::Myers)
        .timeout(DIFF_TIMEOUT)
        .diff_lines(old, new);
    let a = if from.is_some() {
        format!("a/{path}")
    } else {
        "/dev/null".into()
    };
    let b = if to.is_some() {
        format!("b/{path}")
    } else {
        "/dev/null".into()
    };
    Ok(Some(
        diff.unified_diff()
            .context_radius(3)
            .header(&a, &b)
            .to_string(),
    ))
}

/// The content as text; `None` when it is binary (rule 3). Absent content
/// is the empty text.
pub(crate) fn text(bytes: Option<&[u8]>) -> Option<&str> {
    let bytes = bytes.unwrap_or_default();
    if bytes[..bytes.len().min(BINARY_PROBE)].contains(&0) {
        return None;
    }
    std::str::from_utf8(bytes).ok()
}

/// Lines added and removed from `old` to `new` (rule 2), by a line diff.
pub(crate) fn count_lines(old: &str, new: &str) -> (u64, u64) {
    let old: Vec<&str> = old.split_inclusive('\n').collect();
    let new: Vec<&str> = new.split_inclusive('\n').collect();
    if old.is_empty() || new.is_empty() {
        return (new.len() as u64, old.len() as u64);
    }
    // Small inputs get the shortest edit script (raw Myers, cheap there);
    // larger ones git's bounded heuristic, which can count a few more
    // lines on repetitive input but never grinds.
    let algorithm = match old.len() + new.len() <= EXACT_MAX_LINES {
        true => Algorithm::RawMyers,
        false => Algorithm::Myers,
    };
    let diff = TextDiff::configure()
        .algorithm(algorithm)
        .timeout(DIFF_TIMEOUT)
        .diff_slices(&old, &new);
    let (mut added, mut removed) = (0u64, 0u64);
    for op in diff.ops() {
        let (tag, o, n) = op.as_tag_tuple();
        match tag {
            DiffTag::Equal => {}
            DiffTag::Delete => removed += o.len() as u64,
            DiffTag::Insert => added += n.len() as u64,
            DiffTag::Replace => {
                removed += o.len() as u64;
                added += n.len() as u64;
            }
        }
    }
    (added, removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_counted_as_git_counts_them() {
        let rows: &[(&str, &str, (u64, u64))] = &[
            ("", "", (0, 0)),
            ("", "a\nb\n", (2, 0)),
            ("a\nb", "", (0, 2)),
            ("a\n", "a\n", (0, 0)),
            ("a", "a\n", (1, 1)),
            ("a\nb\nc\n", "a\nB\nc\n", (1, 1)),
            ("a\nb\nc\n", "a\nc\n", (0, 1)),
            ("a\nc\n", "a\nb\nc\nd\n", (2, 0)),
            ("x\r\ny\r\n", "x\ny\r\n", (1, 1)),
            // A lone CR is not a line end (git's rule, not similar's).
            ("a\rb\n", "a\rc\n", (1, 1)),
        ];
        for (old, new, want) in rows {
            assert_eq!(count_lines(old, new), *want, "{old:?} -> {new:?}");
        }
    }

    #[test]
    fn binary_is_a_nul_in_the_first_8_kib_or_not_utf8() {
        assert!(text(Some(b"plain\n")).is_some());
        assert!(text(None) == Some(""));
        assert!(text(Some(b"a\0b")).is_none());
        assert!(text(Some(&[0xff, 0xfe])).is_none());
        let mut late = vec![b'a'; BINARY_PROBE];
        late.push(0);
        assert!(text(Some(&late)).is_some(), "a NUL past 8 KiB is text");
    }
}
