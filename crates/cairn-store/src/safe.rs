//! The file-system safety rules, each in one place.
//!
//! Paths inside a workspace come from untrusted sources — a model's tool
//! call, a manifest on disk that may have been tampered with, a checkpoint
//! of another machine. Every crate that turns such a path into a file
//! operation goes through the rules here, so they cannot drift apart:
//!
//! 1. **[`RelPath`]**: a validated relative path. Not empty, not absolute,
//!    no NUL, no backslash-separated `..`, no empty, `.` or `..` component,
//!    and no `.git` component (in any letter case: a write there cannot be
//!    rewound, and `.git/hooks` executes code). [`RelPath::parse`] takes the
//!    strict form manifests store; [`RelPath::normalize`] first drops the
//!    `.` components and repeated or trailing `/` a person or a model may
//!    write, then applies the same rule.
//! 2. **[`permission_bits`]**: only the permission bits (`0o777`) of a
//!    recorded mode are ever applied. setuid, setgid and sticky bits from a
//!    manifest are dropped, whoever wrote it.
//! 3. **[`mtime_ns`]**: a file time as nanoseconds since the epoch, saturating
//!    instead of overflowing (a file dated after 2262 does not wrap).
//! 4. **[`temp_name`]**: every temporary file cairn stages inside a workspace
//!    is named [`TEMP_PREFIX`] followed by a unique suffix, so captures can
//!    exclude crash leftovers by one pattern.
//!
//! Reaching a validated path below a directory without following links is
//! the job of [`crate::nofollow`].

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// Why a text is not a safe relative path.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PathRule {
    /// Nothing left after normalisation.
    #[error("the path is empty")]
    Empty,
    /// Starts at a root (`/`, `\`, `~`, or a drive such as `C:`).
    #[error("the path is absolute; give it relative to the workspace")]
    Absolute,
    /// Contains a NUL byte.
    #[error("the path contains a NUL byte")]
    Nul,
    /// Has a `..` component, which would leave the directory it is relative to.
    #[error("the path has a `..` component, which would leave the workspace")]
    Parent,
    /// Has a `.` or empty component (only the strict form refuses these).
    #[error("the path has an empty or `.` component")]
    NotPlain,
    /// Goes into `.git`.
    #[error("the path is inside `.git`, which cairn never touches")]
    Git,
}

/// A validated, normalised relative path: `/`-separated plain components,
/// none of them `.`, `..`, empty or `.git`. See the module doc for the rule.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct RelPath(String);

impl RelPath {
    /// Checks the strict form, as manifests store it: every component plain.
    ///
    /// # Errors
    /// The [`PathRule`] broken first.
    pub fn parse(text: &str) -> Result<RelPath, PathRule> {
        check_common(text)?;
        for c in text.split('/') {
            check_component(c, true)?;
        }
        Ok(RelPath(text.to_owned()))
    }

    /// Normalises a path as a person or a model writes it (`./a//b/`) and
    /// checks it. `.` components and repeated or trailing `/` are dropped;
    /// `..` is refused, never resolved.
    ///
    /// # Errors
    /// The [`PathRule`] broken first; [`PathRule::Empty`] when nothing is
    /// left (the caller decides whether the root itself is acceptable).
    pub fn normalize(text: &str) -> Result<RelPath, PathRule> {
        check_common(text)?;
        let mut out = String::with_capacity(text.len());
        for c in text.split('/') {
            if c.is_empty() || c == "." {
                continue;
            }
            check_component(c, false)?;
            if !out.is_empty() {
                out.push('/');
            }
            out.push_str(c);
        }
        if out.is_empty() {
            return Err(PathRule::Empty);
        }
        Ok(RelPath(out))
    }

    /// The path as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Its components, first to last.
    pub fn components(&self) -> impl Iterator<Item = &str> {
        self.0.split('/')
    }

    /// The directory part (`""` for a top-level name) and the last component.
    pub fn split_last(&self) -> (&str, &str) {
        self.0.rsplit_once('/').unwrap_or(("", &self.0))
    }

    /// True when `self` is `prefix` or lies below it, component-wise.
    pub fn is_within(&self, prefix: &RelPath) -> bool {
        self.0 == prefix.0
            || (self.0.starts_with(&prefix.0)
                && self.0.as_bytes().get(prefix.0.len()) == Some(&b'/'))
    }
}

impl fmt::Display for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl fmt::Debug for RelPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.0, f)
    }
}

impl AsRef<str> for RelPath {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

fn check_common(text: &str) -> Result<(), PathRule> {
    if text.is_empty() {
        return Err(PathRule::Empty);
    }
    if text.contains('\0') {
        return Err(PathRule::Nul);
    }
    let b = text.as_bytes();
    let drive = b.len() >= 2 && b[0].is_ascii_alphabetic() && b[1] == b':';
    if text.starts_with(['/', '\\', '~']) || drive {
        return Err(PathRule::Absolute);
    }
    Ok(())
}

fn check_component(c: &str, strict: bool) -> Result<(), PathRule> {
    if c == ".." || c.split('\\').any(|piece| piece == "..") {
        return Err(PathRule::Parent);
    }
    if strict && (c.is_empty() || c == ".") {
        return Err(PathRule::NotPlain);
    }
    if c.eq_ignore_ascii_case(".git") {
        return Err(PathRule::Git);
    }
    Ok(())
}

/// The only mode bits cairn ever applies to a file it restores or writes
/// from a record: the permission bits. setuid, setgid and sticky bits in a
/// manifest are dropped.
pub const PERMISSION_BITS: u32 = 0o777;

/// `mode` reduced to [`PERMISSION_BITS`].
pub fn permission_bits(mode: u32) -> u32 {
    mode & PERMISSION_BITS
}

/// A file time as nanoseconds since the Unix epoch, saturating at the ends
/// of `i64` (about the years 1677 and 2262) instead of overflowing.
pub fn mtime_ns(secs: i64, nsec: i64) -> i64 {
    let ns = i128::from(secs) * 1_000_000_000 + i128::from(nsec);
    i64::try_from(ns).unwrap_or(if ns < 0 { i64::MIN } else { i64::MAX })
}

/// Prefix of every temporary file cairn stages inside a workspace or a
/// directory it restores into. Captures always exclude names that start
/// with it.
pub const TEMP_PREFIX: &str = ".cairn-tmp-";

/// A fresh temporary file name, unique in this process and across
/// processes: [`TEMP_PREFIX`], the pid, a counter and a random part.
pub fn temp_name() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    let random = ulid::Ulid::new().random() as u64;
    format!("{TEMP_PREFIX}{}-{n}-{random:016x}", std::process::id())
}

/// True when `name` (one component) is one of cairn's temporary files.
pub fn is_temp_name(name: &str) -> bool {
    name.starts_with(TEMP_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn strict_and_normalised_forms() {
        use PathRule::*;
        type Row = (
            &'static str,
            Result<&'static str, PathRule>,
            Result<&'static str, PathRule>,
        );
        let table: &[Row] = &[
            // text, parse, normalize
            ("a", Ok("a"), Ok("a")),
            ("a/b/c", Ok("a/b/c"), Ok("a/b/c")),
            ("./a//b/./c/", Err(NotPlain), Ok("a/b/c")),
            ("", Err(Empty), Err(Empty)),
            (".", Err(NotPlain), Err(Empty)),
            ("./", Err(NotPlain), Err(Empty)),
            ("/etc/passwd", Err(Absolute), Err(Absolute)),
            ("\\x", Err(Absolute), Err(Absolute)),
            ("~/x", Err(Absolute), Err(Absolute)),
            ("c:x", Err(Absolute), Err(Absolute)),
            ("a/~", Ok("a/~"), Ok("a/~")),
            ("..", Err(Parent), Err(Parent)),
            ("a/../b", Err(Parent), Err(Parent)),
            ("a\\..\\b", Err(Parent), Err(Parent)),
            ("...", Ok("..."), Ok("...")),
            ("..a", Ok("..a"), Ok("..a")),
            ("a\0b", Err(Nul), Err(Nul)),
            (".git", Err(Git), Err(Git)),
            (".git/hooks/pre-commit", Err(Git), Err(Git)),
            ("sub/.GIT/config", Err(Git), Err(Git)),
            (".gitignore", Ok(".gitignore"), Ok(".gitignore")),
            ("a/.github/x", Ok("a/.github/x"), Ok("a/.github/x")),
        ];
        for (text, strict, lenient) in table {
            let got = RelPath::parse(text);
            assert_eq!(
                got.as_ref().map(RelPath::as_str).map_err(|e| *e),
                *strict,
                "parse {text:?}"
            );
            let got = RelPath::normalize(text);
            assert_eq!(
                got.as_ref().map(RelPath::as_str).map_err(|e| *e),
                *lenient,
                "normalize {text:?}"
            );
        }
    }

    #[test]
    fn within_is_by_component() {
        let p = |s| RelPath::parse(s).unwrap();
        assert!(p("a/b").is_within(&p("a")));
        assert!(p("a").is_within(&p("a")));
        assert!(!p("ab").is_within(&p("a")));
        assert_eq!(p("a/b/c").split_last(), ("a/b", "c"));
        assert_eq!(p("c").split_last(), ("", "c"));
    }

    #[test]
    fn modes_and_times() {
        assert_eq!(permission_bits(0o106_777), 0o777);
        assert_eq!(permission_bits(0o4755), 0o755);
        assert_eq!(mtime_ns(1, 5), 1_000_000_005);
        assert_eq!(mtime_ns(i64::MAX, 0), i64::MAX);
        assert_eq!(mtime_ns(-i64::MAX, 0), i64::MIN);
        // 2300-01-01 is past i64 nanoseconds; it saturates instead of wrapping.
        assert_eq!(mtime_ns(10_413_792_000, 0), i64::MAX);
    }

    #[test]
    fn temp_names_are_unique_and_recognised() {
        let a = temp_name();
        let b = temp_name();
        assert_ne!(a, b);
        assert!(is_temp_name(&a) && is_temp_name(&b));
        assert!(!is_temp_name("notes.txt"));
        assert!(RelPath::parse(&a).is_ok());
    }
}
