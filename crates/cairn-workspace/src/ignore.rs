//! What is captured (DESIGN §5.2): the project's rules, cairn's defaults, and
//! what is always excluded.
//!
//! Matching of one pattern against one path is `globset`'s; which rule
//! decides, and how directories pass decisions down, is this module's.

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use globset::{Candidate, GlobBuilder, GlobSet, GlobSetBuilder};

use crate::WorkspaceError;

/// The project rule files, in order of preference: the first that exists at
/// the workspace root is the one used, there and in every directory below.
pub const IGNORE_FILES: [&str; 2] = [".cairnignore", ".gitignore"];

/// A nested rule file larger than this is not read (a warning says so).
const NESTED_FILE_MAX: u64 = 4 << 20;

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
    /// A project rule file (`.cairnignore` or `.gitignore`), at the root or
    /// in a directory below it.
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

/// A decision about one path: which rule (its number among every rule read
/// so far, or an always-rule) and whether it excludes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// No rule applies to the path or any ancestor: captured.
    Unmatched,
    /// Rule number `i` decided: the defaults and the root file's rules are
    /// numbered from 0, and each nested file's after every file read before
    /// it, so a deeper file's rules always number after its ancestors'.
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
///    default excludes come first, then the root rule file's rules in file
///    order (so the project can override a default), then those of each
///    rule file of the same name in the directories above the path, outer
///    first (as git reads nested `.gitignore` files: a rule there is
///    relative to its directory, and a deeper file overrides a shallower);
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
/// does the rule reported for it. As in git, the rule file of a directory
/// that is excluded is not read.
#[derive(Debug)]
pub struct IgnoreRules {
    /// The defaults and the root file's rules, numbered from 0.
    top: Group,
    always: Vec<Rule>,
    always_set: GlobSet,
    file: Option<PathBuf>,
    /// The rule file name read in directories below the root.
    name: &'static str,
    /// Where nested rule files are read from; `None` for rules parsed from
    /// text, which read nothing.
    root: Option<PathBuf>,
    /// The number the next nested file's first rule gets.
    next: AtomicUsize,
    warnings: Mutex<Vec<IgnoreWarning>>,
}

/// The rules of one rule file (and, for the root, the defaults before
/// them), numbered from `base`.
#[derive(Debug)]
struct Group {
    base: usize,
    rules: Vec<Rule>,
    set: GlobSet,
}

impl Group {
    fn new(base: usize, compiled: Vec<(Rule, globset::Glob)>) -> Group {
        let (rules, globs): (Vec<Rule>, Vec<globset::Glob>) = compiled.into_iter().unzip();
        Group {
            base,
            rules,
            set: build_set(globs),
        }
    }

    /// The last rule of this group matching `cand`, by its number.
    fn last_match(&self, cand: &Candidate<'_>, is_dir: bool) -> Option<usize> {
        last_match(&self.set, &self.rules, cand, is_dir).map(|i| self.base + i)
    }

    fn get(&self, i: usize) -> Option<&Rule> {
        i.checked_sub(self.base).and_then(|k| self.rules.get(k))
    }
}

/// The nested rule files in force in one directory: its ancestors' and its
/// own, deepest first. The root's file is not in it (it is always in force).
#[derive(Clone, Debug, Default)]
pub(crate) struct Chain(Option<Arc<Link>>);

#[derive(Debug)]
struct Link {
    group: Group,
    up: Chain,
}

impl Chain {
    fn groups(&self) -> impl Iterator<Item = &Group> {
        let mut at = self.0.as_deref();
        std::iter::from_fn(move || {
            let link = at?;
            at = link.up.0.as_deref();
            Some(&link.group)
        })
    }
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
                Ok(bytes) => {
                    let mut rules = Self::parse(Some(&path), &bytes, opts);
                    rules.name = name;
                    rules.root = Some(root.to_owned());
                    return Ok(rules);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(WorkspaceError::IgnoreFile { path, source: e }),
            }
        }
        let mut rules = Self::parse(None, b"", opts);
        rules.name = IGNORE_FILES[1];
        rules.root = Some(root.to_owned());
        Ok(rules)
    }

    /// Compiles rules from the text of a rule file (`file` names it in
    /// matches and warnings).
    /// Nested rule files are not read by rules made this way.
    pub fn parse(file: Option<&Path>, text: &[u8], opts: &IgnoreOptions) -> Self {
        let mut warnings = Vec::new();
        let mut compiled = Vec::new();
        if opts.default_excludes {
            for d in DEFAULT_EXCLUDES {
                if let Ok(rule) = compile(RuleSource::Default, 0, d, "") {
                    compiled.push(rule);
                }
            }
        }
        let file_path = file.map(Path::to_path_buf);
        let src = file_path.clone().unwrap_or_default();
        compiled.extend(compile_file(&src, text, "", &mut warnings));
        let mut always = Vec::new();
        let mut always_globs = Vec::new();
        let extra = opts
            .always_excluded
            .iter()
            .map(|p| format!("/{}", p.trim_matches('/')));
        for text in ALWAYS_EXCLUDED.iter().map(|s| s.to_string()).chain(extra) {
            if let Ok((rule, glob)) = compile(RuleSource::Always, 0, &text, "") {
                always.push(rule);
                always_globs.push(glob);
            }
        }
        let top = Group::new(0, compiled);
        IgnoreRules {
            next: AtomicUsize::new(top.rules.len()),
            top,
            always_set: build_set(always_globs),
            always,
            file: file_path,
            name: IGNORE_FILES[1],
            root: None,
            warnings: Mutex::new(warnings),
        }
    }

    /// The rule file name read in every directory (`.cairnignore` when the
    /// root has one, else `.gitignore`).
    pub(crate) fn file_name(&self) -> &'static str {
        self.name
    }

    /// The chain in force inside directory `dir` (relative, not the root),
    /// given its parent's, after the text of its own rule file: the file's
    /// rules apply below `dir` only, after every rule read before them.
    /// `source` names the file in matches and warnings.
    fn enter(&self, dir: &str, source: &Path, text: &[u8], up: &Chain) -> Chain {
        let mut warnings = Vec::new();
        let compiled = compile_file(source, text, dir, &mut warnings);
        if !warnings.is_empty() {
            self.warn(warnings);
        }
        if compiled.is_empty() {
            return up.clone();
        }
        let base = self.next.fetch_add(compiled.len(), Ordering::Relaxed);
        Chain(Some(Arc::new(Link {
            group: Group::new(base, compiled),
            up: up.clone(),
        })))
    }

    /// Records warnings about a rule file found during a walk.
    fn warn(&self, more: Vec<IgnoreWarning>) {
        self.warnings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(more);
    }

    /// Reads the rule file of directory `dir` (relative) from the root, for
    /// a check outside a walk. A missing file, or one that is not a regular
    /// file, is none; an unreadable one is a warning.
    fn read_nested(&self, dir: &str, up: &Chain) -> Chain {
        let Some(root) = &self.root else {
            return up.clone();
        };
        let path = root.join(dir).join(self.name);
        let opened = cairn_objects::open_nofollow(&path);
        self.read_opened(dir, &path, opened, up)
    }

    /// The chain in force in `dir` once its rule file is read, given the
    /// file as opened without following a symlink (the walk opens it in
    /// the directory, a check by path). The one rule for every nested file:
    /// missing, a symlink (never followed, as git does) or not a regular
    /// file is no file; unreadable or over [`NESTED_FILE_MAX`] bytes is a
    /// warning and adds no rules.
    pub(crate) fn read_opened(
        &self,
        dir: &str,
        path: &Path,
        opened: std::io::Result<std::fs::File>,
        up: &Chain,
    ) -> Chain {
        use std::io::Read;
        let warn = |w| {
            self.warn(vec![w]);
            up.clone()
        };
        let file = match opened {
            Ok(f) => f,
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ENOENT | libc::ELOOP | libc::ENOTDIR)
                ) =>
            {
                return up.clone()
            }
            Err(e) => return warn(unreadable(path, &e)),
        };
        let meta = match file.metadata() {
            Ok(m) => m,
            Err(e) => return warn(unreadable(path, &e)),
        };
        if !meta.is_file() {
            return up.clone();
        }
        if meta.len() > NESTED_FILE_MAX {
            return warn(too_large(path, meta.len()));
        }
        let mut text = Vec::new();
        if let Err(e) = file.take(NESTED_FILE_MAX).read_to_end(&mut text) {
            return warn(unreadable(path, &e));
        }
        self.enter(dir, path, &text, up)
    }

    /// The rule file in use, if any.
    pub fn file(&self) -> Option<&Path> {
        self.file.as_deref()
    }

    /// Lines of rule files that were skipped, and why (nested files count
    /// once a walk or a check has read them).
    pub fn warnings(&self) -> Vec<IgnoreWarning> {
        self.warnings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// True when any rule of the root file is a negation (a `!` rule).
    pub fn has_negations(&self) -> bool {
        self.top.rules.iter().any(|r| r.negated)
    }

    /// The rule that decides `rel` (a `/`-separated path relative to the
    /// root), or `None` when no rule applies to it or any ancestor (it is
    /// captured). `is_dir` says whether the path is a directory.
    /// Rule files of the directories above `rel` are read from the root
    /// (for rules made by [`IgnoreRules::load`]).
    pub fn check(&self, rel: &str, is_dir: bool) -> Option<IgnoreMatch> {
        let (d, chain) = self.decision(rel, is_dir);
        self.describe(d, &chain)
    }

    /// True when `rel` or an ancestor is always excluded (`.git`, the store,
    /// cairn's temporaries): no rule can re-include it and no restore may
    /// write there.
    pub fn is_always_excluded(&self, rel: &str) -> bool {
        // Always-rules are the root's: no rule file needs reading.
        let rel = rel.trim_matches('/');
        let cand = |p: &str| {
            last_match(&self.always_set, &self.always, &Candidate::new(p), true).is_some()
        };
        let mut end = 0;
        while let Some(pos) = rel[end..].find('/') {
            end += pos;
            if cand(&rel[..end]) {
                return true;
            }
            end += 1;
        }
        last_match(&self.always_set, &self.always, &Candidate::new(rel), false).is_some()
    }

    /// Decides `rel` from the root down, reading the rule file of each
    /// directory on the way that is not excluded.
    fn decision(&self, rel: &str, is_dir: bool) -> (Decision, Chain) {
        let rel = rel.trim_matches('/');
        let mut decision = Decision::Unmatched;
        let mut chain = Chain::default();
        let mut end = 0;
        while let Some(pos) = rel[end..].find('/') {
            end += pos;
            decision = self.decide(&rel[..end], true, decision, &chain);
            if !self.excludes(decision, &chain) {
                chain = self.read_nested(&rel[..end], &chain);
            }
            end += 1;
        }
        (self.decide(rel, is_dir, decision, &chain), chain)
    }

    /// True when `rel` is excluded.
    pub fn is_excluded(&self, rel: &str, is_dir: bool) -> bool {
        self.check(rel, is_dir).is_some_and(|m| m.excluded)
    }

    /// The rule numbered `i`, among the root's and the chain's.
    fn rule<'a>(&'a self, i: usize, chain: &'a Chain) -> Option<&'a Rule> {
        self.top
            .get(i)
            .or_else(|| chain.groups().find_map(|g| g.get(i)))
    }

    /// True when rule `i` excludes (is not a `!` rule).
    fn excluding(&self, i: usize, chain: &Chain) -> bool {
        self.rule(i, chain).is_some_and(|r| !r.negated)
    }

    /// Decides `rel` given its parent's decision and the nested rule files
    /// in force in its directory (the walk's entry point).
    pub(crate) fn decide(
        &self,
        rel: &str,
        is_dir: bool,
        parent: Decision,
        chain: &Chain,
    ) -> Decision {
        if let Decision::Always(_) = parent {
            return parent;
        }
        let cand = Candidate::new(rel);
        if let Some(i) = last_match(&self.always_set, &self.always, &cand, is_dir) {
            return Decision::Always(i);
        }
        let nested = chain
            .groups()
            .filter_map(|g| g.last_match(&cand, is_dir))
            .max();
        let Some(i) = self.top.last_match(&cand, is_dir).max(nested) else {
            return parent;
        };
        match parent {
            // Under an excluded directory a path stays excluded, and the
            // directory's rule is the one reported (as git does) ...
            Decision::Rule(j) if self.excluding(j, chain) && self.excluding(i, chain) => parent,
            // ... unless a `!` rule LATER than that directory's rule matches
            // the path itself: the last match wins.
            Decision::Rule(j) if self.excluding(j, chain) && j > i => parent,
            _ => Decision::Rule(i),
        }
    }

    /// True when a decision excludes.
    pub(crate) fn excludes(&self, d: Decision, chain: &Chain) -> bool {
        match d {
            Decision::Unmatched => false,
            Decision::Always(_) => true,
            Decision::Rule(i) => self.excluding(i, chain),
        }
    }

    /// Whether the walk must descend into the excluded directory `rel`: only
    /// when some `!` rule could match a path below it. Always-excluded
    /// directories are never entered.
    pub(crate) fn may_reinclude_below(&self, rel: &str, d: Decision, chain: &Chain) -> bool {
        let after = match d {
            Decision::Always(_) => return false,
            Decision::Rule(j) => j,
            Decision::Unmatched => 0,
        };
        let segs: Vec<&str> = rel.split('/').collect();
        // Only a `!` rule after the one that excluded the directory can win.
        let groups = std::iter::once(&self.top).chain(chain.groups());
        groups
            .flat_map(|g| {
                g.rules
                    .iter()
                    .enumerate()
                    .map(move |(k, r)| (g.base + k, r))
            })
            .filter(|(n, r)| *n >= after && r.negated)
            .any(|(_, r)| {
                if r.depth.is_some_and(|n| n <= segs.len()) {
                    return false;
                }
                r.prefix.iter().zip(&segs).all(|(p, s)| p == s)
            })
    }

    pub(crate) fn describe(&self, d: Decision, chain: &Chain) -> Option<IgnoreMatch> {
        let (rule, excluded) = match d {
            Decision::Unmatched => return None,
            Decision::Always(i) => (self.always.get(i)?, true),
            Decision::Rule(i) => {
                let r = self.rule(i, chain)?;
                (r, !r.negated)
            }
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

/// Compiles the lines of a rule file found in directory `base` (relative to
/// the root, `""` for the root); unusable lines become warnings.
fn compile_file(
    src: &Path,
    text: &[u8],
    base: &str,
    warnings: &mut Vec<IgnoreWarning>,
) -> Vec<(Rule, globset::Glob)> {
    let mut out = Vec::new();
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

fn too_large(path: &Path, len: u64) -> IgnoreWarning {
    IgnoreWarning {
        source: path.to_owned(),
        line: 0,
        reason: format!("the file ({len} bytes) is over {NESTED_FILE_MAX} bytes; not read"),
    }
}

fn unreadable(path: &Path, e: &std::io::Error) -> IgnoreWarning {
    IgnoreWarning {
        source: path.to_owned(),
        line: 0,
        reason: format!("the file cannot be read ({e}); its rules do not apply"),
    }
}

/// Turns one line into a rule. `Err(None)`: blank or comment; `Err(Some)`:
/// unusable, with the reason. `base` is the directory of the rule file
/// (relative to the root, `""` for the root): the rule is relative to it and
/// matches only below it.
fn compile(
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
