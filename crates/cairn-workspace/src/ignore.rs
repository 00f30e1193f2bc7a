//! What is captured (DESIGN §5.2): the project's rules, cairn's defaults, and
//! what is always excluded.
//!
//! Matching of one pattern against one path is `globset`'s; which rule
//! decides, and how directories pass decisions down, is this module's.

use std::fmt;
use std::path::{Path, PathBuf};

use globset::{Candidate, GlobBuilder, GlobSet, GlobSetBuilder};

use crate::WorkspaceError;

/// The project rule files, in order of preference: the first that exists is
/// the one used.
pub const IGNORE_FILES: [&str; 2] = [".cairnignore", ".gitignore"];

/// Trees excluded by default because they are heavy and regenerable.
///
/// `vendor/` is deliberately absent (committed source in Go projects), and so
/// are `dist/` and `build/`: they are often exactly what a run was asked to
/// produce, and rebuilding them needs a toolchain the operator may not have;
/// a `.gitignore` listing them is a packaging policy, not a recovery one. A
/// project re-includes any of these with a `!` rule (e.g. `!target/`).
pub const DEFAULT_EXCLUDES: [&str; 16] = [
    "node_modules/",
    ".venv/",
    "venv/",
    "__pycache__/",
    ".pytest_cache/",
    ".mypy_cache/",
    ".ruff_cache/",
    ".tox/",
    ".nox/",
    ".next/",
    ".nuxt/",
    ".svelte-kit/",
    ".parcel-cache/",
    ".turbo/",
    ".gradle/",
    "target/",
];

/// Names excluded whatever the rules say: git's database (a directory, or a
/// file in a worktree or submodule) and cairn's own restore temporaries.
const ALWAYS_EXCLUDED: [&str; 2] = [".git", ".cairn-tmp-*"];

/// Where a rule comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RuleSource {
    /// The project's `.cairnignore` or `.gitignore`.
    File(PathBuf),
    /// cairn's default excludes ([`DEFAULT_EXCLUDES`]).
    Default,
    /// Always excluded: `.git`, the store when it lies inside the workspace,
    /// cairn's temporaries. No rule can re-include these.
    Always,
}

impl fmt::Display for RuleSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuleSource::File(p) => write!(f, "{}", p.display()),
            RuleSource::Default => f.write_str("<cairn defaults>"),
            RuleSource::Always => f.write_str("<cairn always>"),
        }
    }
}

/// The rule that decided a path, as `cairn check-ignore -v` prints it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IgnoreMatch {
    /// Where the rule is written.
    pub source: RuleSource,
    /// Its line, from 1 (0 for built-in rules).
    pub line: usize,
    /// The rule as written (with its `!`, its trailing `/`).
    pub rule: String,
    /// True when the path is excluded; false when a `!` rule re-included it.
    pub excluded: bool,
}

/// A line of a rule file that could not be used; the other lines still apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IgnoreWarning {
    /// The file.
    pub source: PathBuf,
    /// The line, from 1.
    pub line: usize,
    /// Why it was skipped.
    pub reason: String,
}

impl fmt::Display for IgnoreWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{}:{}: rule skipped: {}",
            self.source.display(),
            self.line,
            self.reason
        )
    }
}

#[derive(Clone, Debug)]
struct Rule {
    source: RuleSource,
    line: usize,
    text: String,
    negated: bool,
    dir_only: bool,
    /// Literal leading segments of an anchored rule; empty when it can match
    /// at any depth.
    prefix: Vec<String>,
    /// Number of segments every match has, when the rule has no `**`.
    depth: Option<usize>,
}

/// A decision about one path: which rule (index into the rule list, or an
/// always-rule) and whether it excludes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// No rule applies to the path or any ancestor: captured.
    Unmatched,
    /// Rule `i` of the ordinary list decided.
    Rule(usize),
    /// Always-excluded rule `i` matched the path or an ancestor.
    Always(usize),
}

/// The compiled rules of one workspace.
///
/// How a path is decided, in order:
/// 1. if the path or any ancestor matches an always-excluded rule (`.git`,
///    the store inside the workspace, cairn's temporaries), it is excluded;
/// 2. otherwise the LAST rule that matches the path itself decides: cairn's
///    default excludes come first, then the project file's rules in file
///    order, so the project can override a default;
/// 3. except that below an excluded directory a path stays excluded (and the
///    directory's rule is reported, as git does) unless a `!` rule that comes
///    AFTER the directory's rule matches the path itself;
/// 4. a path no rule matches takes its parent directory's decision.
///
/// A rule matches as in git: `*`, `?` and `[…]` never match `/`; `**`
/// spans any number of segments; a rule with a `/` before its end is anchored
/// to the workspace root, one without matches at any depth; a trailing `/`
/// matches directories only; `!` negates. Unlike git, rule 3 lets a later
/// `!` rule re-include a path below an excluded directory, so an allowlist
/// can be written; where no `!` does that, every answer equals git's, and so
/// does the rule reported for it. Only the rule
/// file at the workspace root is read (git also reads nested `.gitignore`s).
#[derive(Clone, Debug)]
pub struct IgnoreRules {
    rules: Vec<Rule>,
    set: GlobSet,
    always: Vec<Rule>,
    always_set: GlobSet,
    file: Option<PathBuf>,
    warnings: Vec<IgnoreWarning>,
}

/// Which rules besides the project's apply.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct IgnoreOptions {
    /// Apply [`DEFAULT_EXCLUDES`]. Default: true.
    pub default_excludes: bool,
    /// More always-excluded directories, relative to the root (the store,
    /// when it lies inside the workspace). Default: none.
    pub always_excluded: Vec<String>,
}

impl Default for IgnoreOptions {
    fn default() -> Self {
        IgnoreOptions {
            default_excludes: true,
            always_excluded: Vec::new(),
        }
    }
}

impl IgnoreOptions {
    /// Sets [`IgnoreOptions::default_excludes`].
    pub fn default_excludes(mut self, yes: bool) -> Self {
        self.default_excludes = yes;
        self
    }

    /// Adds a directory (relative to the root) to the always-excluded ones.
    pub fn always_exclude(mut self, rel: impl Into<String>) -> Self {
        self.always_excluded.push(rel.into());
        self
    }
}

impl IgnoreRules {
    /// Loads the rules of the workspace at `root`: `.cairnignore` if it
    /// exists, else `.gitignore`, else none.
    ///
    /// # Errors
    /// [`WorkspaceError::IgnoreFile`] when the file exists but cannot be read.
    /// A line that cannot be used is a warning ([`IgnoreRules::warnings`]).
    pub fn load(root: &Path, opts: &IgnoreOptions) -> Result<Self, WorkspaceError> {
        for name in IGNORE_FILES {
            let path = root.join(name);
            match std::fs::read(&path) {
                Ok(bytes) => return Ok(Self::parse(Some(&path), &bytes, opts)),
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(WorkspaceError::IgnoreFile { path, source: e }),
            }
        }
        Ok(Self::parse(None, b"", opts))
    }

    /// Compiles rules from the text of a rule file (`file` names it in
    /// matches and warnings).
    pub fn parse(file: Option<&Path>, text: &[u8], opts: &IgnoreOptions) -> Self {
        let mut warnings = Vec::new();
        let mut rules = Vec::new();
        let mut globs = Vec::new();
        if opts.default_excludes {
            for d in DEFAULT_EXCLUDES {
                if let Ok((rule, glob)) = compile(RuleSource::Default, 0, d) {
                    rules.push(rule);
                    globs.push(glob);
                }
            }
        }
        let file_path = file.map(Path::to_path_buf);
        let src = file_path.clone().unwrap_or_default();
        for (i, raw) in text.split(|b| *b == b'\n').enumerate() {
            let line = i + 1;
            let Ok(s) = std::str::from_utf8(raw) else {
                warnings.push(IgnoreWarning {
                    source: src.clone(),
                    line,
                    reason: "the line is not UTF-8".into(),
                });
                continue;
            };
            let s = s.strip_suffix('\r').unwrap_or(s);
            match compile(RuleSource::File(src.clone()), line, s) {
                Ok((rule, glob)) => {
                    rules.push(rule);
                    globs.push(glob);
                }
                Err(None) => {}
                Err(Some(reason)) => warnings.push(IgnoreWarning {
                    source: src.clone(),
                    line,
                    reason,
                }),
            }
        }
        let mut always = Vec::new();
        let mut always_globs = Vec::new();
        let extra = opts
            .always_excluded
            .iter()
            .map(|p| format!("/{}", p.trim_matches('/')));
        for text in ALWAYS_EXCLUDED.iter().map(|s| s.to_string()).chain(extra) {
            if let Ok((rule, glob)) = compile(RuleSource::Always, 0, &text) {
                always.push(rule);
                always_globs.push(glob);
            }
        }
        IgnoreRules {
            set: build_set(globs),
            rules,
            always_set: build_set(always_globs),
            always,
            file: file_path,
            warnings,
        }
    }

    /// The rule file in use, if any.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// Lines of the rule file that were skipped, and why.
    pub fn warnings(&self) -> &[IgnoreWarning] {
        &self.warnings
    }

    /// True when any rule is a negation (a `!` rule).
    pub fn has_negations(&self) -> bool {
        self.rules.iter().any(|r| r.negated)
    }

    /// The rule that decides `rel` (a `/`-separated path relative to the
    /// root), or `None` when no rule applies to it or any ancestor (it is
    /// captured). `is_dir` says whether the path is a directory.
    pub fn check(&self, rel: &str, is_dir: bool) -> Option<IgnoreMatch> {
        self.describe(self.decision(rel, is_dir))
    }

    /// True when `rel` or an ancestor is always excluded (`.git`, the store,
    /// cairn's temporaries): no rule can re-include it and no restore may
    /// write there.
    pub fn is_always_excluded(&self, rel: &str) -> bool {
        matches!(self.decision(rel, false), Decision::Always(_))
    }

    fn decision(&self, rel: &str, is_dir: bool) -> Decision {
        let rel = rel.trim_matches('/');
        let mut decision = Decision::Unmatched;
        let mut end = 0;
        while let Some(pos) = rel[end..].find('/') {
            end += pos;
            decision = self.decide(&rel[..end], true, decision);
            end += 1;
        }
        self.decide(rel, is_dir, decision)
    }

    /// True when `rel` is excluded.
    pub fn is_excluded(&self, rel: &str, is_dir: bool) -> bool {
        self.check(rel, is_dir).is_some_and(|m| m.excluded)
    }

    /// Decides `rel` given its parent's decision (the walk's entry point).
    pub(crate) fn decide(&self, rel: &str, is_dir: bool, parent: Decision) -> Decision {
        if let Decision::Always(_) = parent {
            return parent;
        }
        let cand = Candidate::new(rel);
        if let Some(i) = last_match(&self.always_set, &self.always, &cand, is_dir) {
            return Decision::Always(i);
        }
        let Some(i) = last_match(&self.set, &self.rules, &cand, is_dir) else {
            return parent;
        };
        match parent {
            // Under an excluded directory a path stays excluded, and the
            // directory's rule is the one reported (as git does) ...
            Decision::Rule(j) if !self.rules[j].negated && !self.rules[i].negated => parent,
            // ... unless a `!` rule LATER than that directory's rule matches
            // the path itself: the last match wins.
            Decision::Rule(j) if !self.rules[j].negated && j > i => parent,
            _ => Decision::Rule(i),
        }
    }

    /// True when a decision excludes.
    pub(crate) fn excludes(&self, d: Decision) -> bool {
        match d {
            Decision::Unmatched => false,
            Decision::Always(_) => true,
            Decision::Rule(i) => !self.rules[i].negated,
        }
    }

    /// Whether the walk must descend into the excluded directory `rel`: only
    /// when some `!` rule could match a path below it. Always-excluded
    /// directories are never entered.
    pub(crate) fn may_reinclude_below(&self, rel: &str, d: Decision) -> bool {
        let after = match d {
            Decision::Always(_) => return false,
            Decision::Rule(j) => j,
            Decision::Unmatched => 0,
        };
        let segs: Vec<&str> = rel.split('/').collect();
        // Only a `!` rule after the one that excluded the directory can win.
        self.rules[after..].iter().filter(|r| r.negated).any(|r| {
            if r.depth.is_some_and(|n| n <= segs.len()) {
                return false;
            }
            r.prefix.iter().zip(&segs).all(|(p, s)| p == s)
        })
    }

    pub(crate) fn describe(&self, d: Decision) -> Option<IgnoreMatch> {
        let (rule, excluded) = match d {
            Decision::Unmatched => return None,
            Decision::Always(i) => (&self.always[i], true),
            Decision::Rule(i) => (&self.rules[i], !self.rules[i].negated),
        };
        Some(IgnoreMatch {
            source: rule.source.clone(),
            line: rule.line,
            rule: rule.text.clone(),
            excluded,
        })
    }
}

fn build_set(globs: Vec<globset::Glob>) -> GlobSet {
    let mut b = GlobSetBuilder::new();
    for g in globs {
        b.add(g);
    }
    // Every glob already compiled on its own, so the set compiles too; an
    // empty set is the fallback that can never hide a rule silently.
    b.build().unwrap_or_else(|_| GlobSet::empty())
}

fn last_match(set: &GlobSet, rules: &[Rule], cand: &Candidate<'_>, is_dir: bool) -> Option<usize> {
    set.matches_candidate(cand)
        .into_iter()
        .filter(|&i| is_dir || !rules[i].dir_only)
        .max()
}

/// Turns one line into a rule. `Err(None)`: blank or comment; `Err(Some)`:
/// unusable, with the reason.
fn compile(
    source: RuleSource,
    line: usize,
    text: &str,
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
    if glob.ends_with("/**") {
        // `dir/**` matches what is inside `dir`, not `dir` itself.
        glob.push_str("/*");
    }
    let prefix = if anchored {
        segments
            .iter()
            .take_while(|s| !s.contains(['*', '?', '[', '\\']))
            .cloned()
            .collect()
    } else {
        Vec::new()
    };
    let depth = (anchored && !has_globstar).then_some(segments.len());
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
