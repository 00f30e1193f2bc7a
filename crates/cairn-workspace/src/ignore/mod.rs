//! What is captured (DESIGN §5.2): the project's rules, cairn's defaults, and
//! what is always excluded.
//!
//! Matching of one pattern against one path is `globset`'s; which rule
//! decides, and how directories pass decisions down, is this module's.
//! One concern per file: `defaults` (what cairn excludes on its own, by
//! name), `evidence` (what it excludes by what a directory holds), `rule`
//! (one line of a rule file into a rule), `reader` (the one reader of rule
//! files and markers), `matcher` (compiled sets, and deciding a path).

mod defaults;
mod evidence;
mod matcher;
mod reader;
mod rule;

use std::fmt;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicUsize;
use std::sync::Mutex;

use globset::Candidate;
use rustix::fs::{Mode, OFlags};

pub use defaults::{DEFAULT_EXCLUDES, IGNORE_FILES};
pub(crate) use evidence::Markers;
pub use evidence::{Evidence, Marker, CACHEDIR_TAG_SIGNATURE, DEFAULT_MARKERS};
pub(crate) use matcher::Chain;

use defaults::always_excluded;
use matcher::Group;
use reader::RuleText;
use rule::{compile, compile_file, Rule};

use crate::WorkspaceError;

/// Where a rule comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RuleSource {
    /// A project rule file (`.cairnignore` or `.gitignore`), at the root or
    /// in a directory below it.
    File(PathBuf),
    /// cairn's default excludes by name ([`DEFAULT_EXCLUDES`]).
    Default,
    /// cairn's default excludes by evidence ([`DEFAULT_MARKERS`]): the
    /// directory holds this marker. [`IgnoreMatch::rule`] names it as
    /// `CACHEDIR.TAG in target/`.
    Evidence(Evidence),
    /// Always excluded: `.git`, the store when it lies inside the workspace,
    /// cairn's temporaries. No rule can re-include these.
    Always,
}

impl fmt::Display for RuleSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RuleSource::File(p) => write!(f, "{}", p.display()),
            RuleSource::Default | RuleSource::Evidence(_) => f.write_str("<cairn defaults>"),
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
    /// The rule as written (with its `!`, its trailing `/`); for a default
    /// by evidence, the evidence (`CACHEDIR.TAG in target/`).
    pub rule: String,
    /// True when the path is excluded; false when a `!` rule re-included it.
    pub excluded: bool,
}

impl IgnoreMatch {
    /// The marker and directory that decided, when a default by evidence did.
    pub fn evidence(&self) -> Option<&Evidence> {
        match &self.source {
            RuleSource::Evidence(e) => Some(e),
            _ => None,
        }
    }
}

/// A line of a rule file that could not be used; the other lines still apply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IgnoreWarning {
    /// The file.
    pub source: PathBuf,
    /// The line, from 1; 0 when the whole file is not read.
    pub line: usize,
    /// Why it was skipped.
    pub reason: String,
}

impl fmt::Display for IgnoreWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            // The whole file, not one line of it.
            return write!(f, "{}: {}", self.source.display(), self.reason);
        }
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
    /// Rule number `i` decided: the defaults (by evidence, then by name) and
    /// the root file's rules are numbered from 0, and each nested file's
    /// after every file read before it, so a deeper file's rules always
    /// number after its ancestors'.
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
///    default excludes come first (by evidence: a directory holding a valid
///    `CACHEDIR.TAG` or a `pyvenv.cfg`, see [`Marker`]; then by name, see
///    [`DEFAULT_EXCLUDES`]), then the root rule file's rules in file
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
    /// The defaults by evidence, numbered from 0 (none without the
    /// defaults).
    markers: Vec<(Marker, Rule)>,
    /// The defaults by name and the root file's rules, numbered after the
    /// markers.
    top: Group,
    always: Group,
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
    /// Apply [`DEFAULT_EXCLUDES`] (by name) and [`DEFAULT_MARKERS`] (by
    /// evidence). Default: true.
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
    /// is there, else `.gitignore`, else none. The file is read by the one
    /// reader of rule files (no symlink followed, regular files only, at most
    /// 4 MiB); a directory of that name is no file, as git treats it.
    ///
    /// # Errors
    /// [`WorkspaceError::IgnoreFile`] when the file is there but cannot be
    /// read, or is over the size limit. A symlink or special file there,
    /// and a line that cannot be used, are warnings
    /// ([`IgnoreRules::warnings`]).
    pub fn load(root: &Path, opts: &IgnoreOptions) -> Result<Self, WorkspaceError> {
        let dir = open_dir(None, root)
            .map_err(|e| WorkspaceError::io("opening the workspace", root, e))?;
        for name in IGNORE_FILES {
            let path = root.join(name);
            let (text, unusable) = match reader::read(dir.as_fd(), name) {
                RuleText::Absent => continue,
                RuleText::Text(text) => (text, None),
                RuleText::Unusable(u) if u.is_error_at_root() => {
                    return Err(WorkspaceError::IgnoreFile {
                        path,
                        source: u.into_io(),
                    })
                }
                RuleText::Unusable(u) => (Vec::new(), Some(u)),
            };
            let mut rules = Self::parse(Some(&path), &text, opts);
            if let Some(u) = unusable {
                rules.warn(vec![u.warning(&path)]);
            }
            rules.name = name;
            rules.root = Some(root.to_owned());
            return Ok(rules);
        }
        let mut rules = Self::parse(None, b"", opts);
        rules.name = IGNORE_FILES[1];
        rules.root = Some(root.to_owned());
        Ok(rules)
    }

    /// Compiles rules from the text of a rule file (`file` names it in
    /// matches and warnings). A UTF-8 byte-order mark before the first line
    /// is dropped; a line that cannot be used (not UTF-8, matching nothing,
    /// a glob that does not compile) is a warning and the others still
    /// apply. Nested rule files and markers are not read by rules made this
    /// way.
    pub fn parse(file: Option<&Path>, text: &[u8], opts: &IgnoreOptions) -> Self {
        let mut warnings = Vec::new();
        let mut compiled = Vec::new();
        let mut markers = Vec::new();
        if opts.default_excludes {
            for m in DEFAULT_MARKERS {
                markers.push((m, Rule::marker(m)));
            }
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
        // The store's path is matched literally, whatever characters it holds.
        let extra = opts
            .always_excluded
            .iter()
            .map(|p| format!("/{}", globset::escape(p.trim_matches('/'))));
        for text in always_excluded().into_iter().chain(extra) {
            if let Ok(rule) = compile(RuleSource::Always, 0, &text, "") {
                always.push(rule);
            }
        }
        let top = Group::new(markers.len(), compiled, &mut warnings);
        let always = Group::new(0, always, &mut warnings);
        IgnoreRules {
            next: AtomicUsize::new(top.base + top.rules.len()),
            markers,
            top,
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
    /// For rules made by [`IgnoreRules::load`], the rule files of the
    /// directories above `rel` and the markers of those directories (and
    /// of `rel` itself, when it is a directory) are read from the root, each
    /// directory opened without following a symlink, as a walk reads them.
    pub fn check(&self, rel: &str, is_dir: bool) -> Option<IgnoreMatch> {
        let (d, chain, evidence_at) = self.decision(rel, is_dir);
        self.describe(d, &chain, evidence_at.as_deref())
    }

    /// True when `rel` or an ancestor is always excluded (`.git`, the store,
    /// cairn's temporaries): no rule can re-include it and no restore may
    /// write there.
    pub fn is_always_excluded(&self, rel: &str) -> bool {
        // Always-rules are the root's: no rule file needs reading.
        let rel = rel.trim_matches('/');
        let hit = |p: &str, is_dir| self.always.last_match(&Candidate::new(p), is_dir).is_some();
        let mut end = 0;
        while let Some(pos) = rel[end..].find('/') {
            end += pos;
            if hit(&rel[..end], true) {
                return true;
            }
            end += 1;
        }
        hit(rel, false)
    }

    /// Decides `rel` from the root down, reading the rule file and the
    /// markers of each directory on the way that is not excluded. Also
    /// returns the directory whose markers decided, if any did.
    fn decision(&self, rel: &str, is_dir: bool) -> (Decision, Chain, Option<String>) {
        let rel = rel.trim_matches('/');
        let mut decision = Decision::Unmatched;
        let mut chain = Chain::default();
        let mut evidence_at = None;
        // Below a directory that cannot be opened (missing, a symlink)
        // nothing more is read: the walk never enters one either.
        let mut fd = self.root.as_deref().and_then(|r| open_dir(None, r).ok());
        let mut end = 0;
        let mut step =
            |prefix: &str, is_dir: bool, fd: &mut Option<OwnedFd>, d: Decision, chain: &Chain| {
                let name = prefix.rsplit('/').next().unwrap_or(prefix);
                *fd = match (is_dir, fd.as_ref()) {
                    (true, Some(parent)) => open_dir(Some(parent), Path::new(name)).ok(),
                    _ => None,
                };
                let markers = match (&*fd, self.markers.is_empty()) {
                    (Some(dir), false) => Markers::all().verify(dir.as_fd()),
                    _ => Markers::NONE,
                };
                let next = self.decide(prefix, is_dir, d, chain, markers);
                if next != d && self.is_marker_rule(next) {
                    evidence_at = Some(prefix.to_owned());
                }
                next
            };
        while let Some(pos) = rel[end..].find('/') {
            end += pos;
            decision = step(&rel[..end], true, &mut fd, decision, &chain);
            if !self.excludes(decision, &chain) {
                if let Some(dir) = &fd {
                    chain = self.read_in(dir.as_fd(), &rel[..end], &chain);
                }
            }
            end += 1;
        }
        let last = step(rel, is_dir, &mut fd, decision, &chain);
        (last, chain, evidence_at)
    }

    /// True when `rel` is excluded.
    pub fn is_excluded(&self, rel: &str, is_dir: bool) -> bool {
        self.check(rel, is_dir).is_some_and(|m| m.excluded)
    }
}

/// Opens a directory for a check or a load: the root by its path (the
/// operator's choice, symlinks in it followed), a child of `parent` without
/// following a symlink. Only search permission is needed where the system
/// allows (`O_PATH`), as for a lookup by path.
fn open_dir(parent: Option<&OwnedFd>, path: &Path) -> std::io::Result<OwnedFd> {
    #[cfg(any(target_os = "linux", target_os = "android"))]
    let access = OFlags::PATH;
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    let access = OFlags::RDONLY;
    let flags = access | OFlags::DIRECTORY | OFlags::CLOEXEC;
    let fd = match parent {
        None => rustix::fs::open(path, flags, Mode::empty()),
        Some(p) => rustix::fs::openat(p, path, flags | OFlags::NOFOLLOW, Mode::empty()),
    };
    fd.map_err(Into::into)
}
