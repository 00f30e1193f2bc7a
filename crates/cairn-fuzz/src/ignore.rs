//! Ignore rules: compiling a rule file and deciding paths with it.
//!
//! Input: one flags byte (bit 0: cairn's default excludes on), then the rule
//! file's text, a NUL byte, and the paths to decide, one a line (a trailing
//! `/` marks a directory). `.git/config` and `.cairn-tmp/x` are always
//! decided too.
//!
//! Properties:
//! 1. compiling never fails: unusable lines are warnings naming a line of
//!    the file;
//! 2. `is_excluded` is what `check` says; a rule reported from the file is
//!    that line of the file as written (trailing spaces and `\r` dropped),
//!    and it excludes exactly when it is not a `!` rule;
//! 3. a path below an always-excluded directory is excluded, by an
//!    always-rule; a path `is_always_excluded` names is decided by one;
//! 4. without `!` rules, a path below an excluded directory is excluded;
//! 5. the same rules written with CRLF line endings, or after a byte-order
//!    mark, decide every path the same way, by the same line.

use std::path::Path;

use cairn_workspace::{IgnoreMatch, IgnoreOptions, IgnoreRules, RuleSource};

const RULE_FILE: &str = "/fuzz/.gitignore";

/// Checks the ignore-rule properties (see the module doc) on `data`.
pub fn ignore(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let (text, paths) = match rest.iter().position(|&b| b == 0) {
        Some(i) => (&rest[..i], &rest[i + 1..]),
        None => (rest, &b""[..]),
    };
    let opts = IgnoreOptions::default().default_excludes(flags & 1 == 1);
    let file = Path::new(RULE_FILE);
    let rules = IgnoreRules::parse(Some(file), text, &opts);
    let text_lines: Vec<&[u8]> = text.split(|&b| b == b'\n').collect();
    for w in rules.warnings() {
        assert!(
            (1..=text_lines.len()).contains(&w.line),
            "a warning names line {} of {}",
            w.line,
            text_lines.len()
        );
    }

    let mut queries: Vec<(String, bool)> = String::from_utf8_lossy(paths)
        .split('\n')
        .take(64)
        .map(|p| {
            // As a walk names paths: no empty segments.
            let segs: Vec<&str> = p.split('/').filter(|s| !s.is_empty()).collect();
            (segs.join("/"), p.ends_with('/'))
        })
        .filter(|(p, _)| !p.is_empty())
        .collect();
    queries.push((".git/config".into(), false));
    queries.push((".cairn-tmp/x".into(), false));

    let decided: Vec<Option<IgnoreMatch>> = queries
        .iter()
        .map(|(p, is_dir)| decide(&rules, &text_lines, p, *is_dir))
        .collect();

    let crlf_ok = !text_lines.iter().any(|l| l.ends_with(b"\r"));
    let bom_ok = !text.starts_with(b"\xEF\xBB\xBF");
    if crlf_ok {
        let crlf: Vec<u8> = text_lines.join(&b"\r\n"[..]);
        same_decisions(
            &IgnoreRules::parse(Some(file), &crlf, &opts),
            &queries,
            &decided,
            "CRLF",
        );
    }
    if bom_ok {
        let mut bom = b"\xEF\xBB\xBF".to_vec();
        bom.extend_from_slice(text);
        same_decisions(
            &IgnoreRules::parse(Some(file), &bom, &opts),
            &queries,
            &decided,
            "a BOM",
        );
    }
}

/// Properties 2 to 4 for one path.
fn decide(rules: &IgnoreRules, lines: &[&[u8]], rel: &str, is_dir: bool) -> Option<IgnoreMatch> {
    let m = rules.check(rel, is_dir);
    let excluded = m.as_ref().is_some_and(|m| m.excluded);
    assert_eq!(
        rules.is_excluded(rel, is_dir),
        excluded,
        "is_excluded({rel:?})"
    );
    if let Some(m) = &m {
        match &m.source {
            RuleSource::File(p) => {
                assert_eq!(p, Path::new(RULE_FILE));
                let Some(raw) = m.line.checked_sub(1).and_then(|i| lines.get(i)) else {
                    panic!("{rel:?} decided by line {} of {}", m.line, lines.len());
                };
                let raw = if m.line == 1 {
                    raw.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(raw)
                } else {
                    raw
                };
                let written = String::from_utf8_lossy(raw);
                let written = written.strip_suffix('\r').unwrap_or(&written);
                assert_eq!(m.rule, written.trim_end(), "the rule reported for {rel:?}");
                assert_eq!(
                    m.excluded,
                    !m.rule.starts_with('!'),
                    "{rel:?} by {:?}",
                    m.rule
                );
            }
            RuleSource::Always => assert!(m.excluded, "an always-rule re-included {rel:?}"),
            RuleSource::Default | RuleSource::Evidence(_) => {
                assert!(m.excluded, "a default re-included {rel:?}")
            }
        }
    }
    if rules.is_always_excluded(rel) {
        assert!(
            matches!(
                &m,
                Some(IgnoreMatch {
                    source: RuleSource::Always,
                    excluded: true,
                    ..
                })
            ),
            "{rel:?} is always excluded, but decided by {m:?}"
        );
    }
    let mut end = 0;
    while let Some(i) = rel[end..].find('/') {
        end += i;
        let dir = &rel[..end];
        if !dir.is_empty() && rules.is_excluded(dir, true) {
            if rules.is_always_excluded(dir) {
                assert!(
                    rules.is_always_excluded(rel) && excluded,
                    "{rel:?} is below the always-excluded {dir:?}, decided by {m:?}"
                );
            }
            if !rules.has_negations() {
                assert!(
                    excluded,
                    "{rel:?} is below the excluded {dir:?}, decided by {m:?}"
                );
            }
        }
        end += 1;
    }
    m
}

/// Property 5.
fn same_decisions(
    other: &IgnoreRules,
    queries: &[(String, bool)],
    decided: &[Option<IgnoreMatch>],
    what: &str,
) {
    for ((rel, is_dir), want) in queries.iter().zip(decided) {
        assert_eq!(&other.check(rel, *is_dir), want, "{rel:?} with {what}");
    }
}
