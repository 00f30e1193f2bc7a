//! What is captured (DESIGN §5.2): the project's rules, cairn's defaults, and
//! what is always excluded.
//!
//! Matching of one pattern against one path is `globset`'s; which rule
//! decides, and how directories pass decisions down, is this module's.
//! One concern per file: `defaults` (what cairn excludes on its own),
//! `rule` (one line of a rule file into a rule), `reader` (reading rule
//! files), `matcher` (compiled sets, and deciding a path).

mod defaults;
mod matcher;
mod reader;
mod rule;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::Mutex;

use globset::{Candidate, GlobSet};

pub use defaults::{DEFAULT_EXCLUDES, IGNORE_FILES};
pub(crate) use matcher::Chain;

use defaults::always_excluded;
use matcher::{build_set, last_match, Group};
use rule::{compile, compile_file, Rule};

use crate::WorkspaceError;

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
        for text in always_excluded().into_iter().chain(extra) {
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

    /// Records warnings about a rule file found during a walk.
    fn warn(&self, more: Vec<IgnoreWarning>) {
        self.warnings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .extend(more);
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
}
