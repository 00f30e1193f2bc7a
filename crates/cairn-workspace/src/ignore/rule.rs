//! One line of a rule file into a rule (git's syntax in globset's terms).

use std::path::Path;

use globset::GlobBuilder;

use super::{IgnoreWarning, Marker, RuleSource};

#[derive(Clone, Debug)]
pub(super) struct Rule {
    pub(super) source: RuleSource,
    pub(super) line: usize,
    pub(super) text: String,
    pub(super) negated: bool,
    pub(super) dir_only: bool,
    /// Literal leading segments of an anchored rule; empty when it can match
    /// at any depth.
    pub(super) prefix: Vec<String>,
    /// Number of segments every match has, when the rule has no `**`.
    pub(super) depth: Option<usize>,
}

impl Rule {
    /// The default rule that excludes a directory holding marker `m`. It
    /// has no glob: the walk and the check test the directory's markers.
    pub(super) fn marker(m: Marker) -> Rule {
        Rule {
            source: RuleSource::Default,
            line: 0,
            text: m.file_name().to_owned(),
            negated: false,
            dir_only: true,
            prefix: Vec::new(),
            depth: None,
        }
    }
}

/// Compiles the lines of a rule file found in directory `base` (relative to
/// the root, `""` for the root); unusable lines become warnings. A UTF-8
/// byte-order mark before the first line is dropped (as git does).
pub(super) fn compile_file(
    src: &Path,
    text: &[u8],
    base: &str,
    warnings: &mut Vec<IgnoreWarning>,
) -> Vec<(Rule, globset::Glob)> {
    let mut out = Vec::new();
    let text = text.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(text);
    for (i, raw) in text.split(|b| *b == b'\n').enumerate() {
        let line = i + 1;
        let Ok(s) = std::str::from_utf8(raw) else {
            warnings.push(IgnoreWarning {
                source: src.to_owned(),
                line,
                reason: "the line is not UTF-8".into(),
            });
            continue;
        };
        let s = s.strip_suffix('\r').unwrap_or(s);
        match compile(RuleSource::File(src.to_owned()), line, s, base) {
            Ok(rule) => out.push(rule),
            Err(None) => {}
            Err(Some(reason)) => warnings.push(IgnoreWarning {
                source: src.to_owned(),
                line,
                reason,
            }),
        }
    }
    out
}

/// Turns one line into a rule. `Err(None)`: blank or comment; `Err(Some)`:
/// unusable, with the reason. `base` is the directory of the rule file
/// (relative to the root, `""` for the root): the rule is relative to it and
/// matches only below it.
pub(super) fn compile(
    source: RuleSource,
    line: usize,
    text: &str,
    base: &str,
) -> Result<(Rule, globset::Glob), Option<String>> {
    let mut pat = trim_trailing_spaces(text);
    if pat.is_empty() || pat.starts_with('#') {
        return Err(None);
    }
    let negated = pat.starts_with('!');
    if negated {
        pat = &pat[1..];
    }
    let dir_only = pat.ends_with('/') && !pat.ends_with("\\/");
    if dir_only {
        pat = &pat[..pat.len() - 1];
    }
    let anchored = pat.contains('/');
    let pat = pat.strip_prefix('/').unwrap_or(pat);
    if pat.is_empty() {
        return Err(Some("the rule matches nothing".into()));
    }
    let segments: Vec<String> = pat.split('/').map(normalise_segment).collect();
    let has_globstar = segments.iter().any(|s| s == "**");
    let mut glob = segments.join("/");
    if !anchored {
        glob = format!("**/{glob}");
    }
    let base_segs: Vec<&str> = base.split('/').filter(|s| !s.is_empty()).collect();
    if !base_segs.is_empty() {
        // The directory's own name is matched literally, whatever it holds.
        let escaped: Vec<String> = base_segs.iter().map(|s| globset::escape(s)).collect();
        glob = format!("{}/{glob}", escaped.join("/"));
    }
    if glob.ends_with("/**") {
        // `dir/**` matches what is inside `dir`, not `dir` itself.
        glob.push_str("/*");
    }
    let mut prefix: Vec<String> = base_segs.iter().map(|s| s.to_string()).collect();
    if anchored {
        prefix.extend(
            segments
                .iter()
                .take_while(|s| !s.contains(['*', '?', '[', '\\']))
                .cloned(),
        );
    }
    let depth = (anchored && !has_globstar).then_some(base_segs.len() + segments.len());
    let compiled = GlobBuilder::new(&glob)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|e| Some(format!("`{}`: {}", text.trim_end(), e.kind())))?;
    Ok((
        Rule {
            source,
            line,
            text: text.trim_end().to_owned(),
            negated,
            dir_only,
            prefix,
            depth,
        },
        compiled,
    ))
}

/// Git drops trailing spaces unless the last one is escaped with `\`.
fn trim_trailing_spaces(s: &str) -> &str {
    let mut end = s.len();
    while end > 0 && s.as_bytes()[end - 1] == b' ' {
        let backslashes = s.as_bytes()[..end - 1]
            .iter()
            .rev()
            .take_while(|b| **b == b'\\')
            .count();
        if backslashes % 2 == 1 {
            break;
        }
        end -= 1;
    }
    &s[..end]
}

/// Git's segment rules in globset's syntax: `**` inside a segment is a plain
/// `*`, and braces are literal (globset would read `{a,b}` as alternatives).
fn normalise_segment(seg: &str) -> String {
    let mut out = String::with_capacity(seg.len());
    let mut chars = seg.chars().peekable();
    let whole_globstar = seg == "**";
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                out.push('\\');
                if let Some(n) = chars.next() {
                    out.push(n);
                }
            }
            '*' if !whole_globstar => {
                out.push('*');
                while chars.peek() == Some(&'*') {
                    chars.next();
                }
            }
            '{' | '}' => {
                out.push('\\');
                out.push(c);
            }
            _ => out.push(c),
        }
    }
    out
}
