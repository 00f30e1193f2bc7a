//! Compiled rule sets, and deciding a path from its parent's decision.

use std::path::PathBuf;
use std::sync::Arc;

use globset::{Candidate, GlobSet, GlobSetBuilder};

use super::rule::Rule;
use super::{Decision, Evidence, IgnoreMatch, IgnoreRules, IgnoreWarning, Markers, RuleSource};

/// The rules of one rule file (and, for the root, the defaults before
/// them), numbered from `base`, with their globs compiled into sets.
///
/// Invariant: every rule in `rules` is matched by exactly one of `sets`. A
/// glob that globset cannot compile (a regex over its size limit) is never
/// left in silently as an empty set: [`Group::new`] drops that rule alone,
/// with a warning naming its line, and the other rules still apply (partial
/// success, as ripgrep's ignore crate does).
#[derive(Debug)]
pub(super) struct Group {
    pub(super) base: usize,
    pub(super) rules: Vec<Rule>,
    /// Sets over consecutive runs of `rules`, each with the index of its
    /// first rule. One set unless the whole would not compile.
    sets: Vec<(usize, GlobSet)>,
}

impl Group {
    /// Compiles `compiled` into a group numbered from `base`. Rules whose
    /// glob does not compile are dropped, each with a warning in `warnings`.
    pub(super) fn new(
        base: usize,
        compiled: Vec<(Rule, globset::Glob)>,
        warnings: &mut Vec<IgnoreWarning>,
    ) -> Group {
        let (mut rules, mut globs): (Vec<Rule>, Vec<globset::Glob>) = compiled.into_iter().unzip();
        loop {
            let mut bad = Vec::new();
            let sets = build_sets(&globs, 0, &mut bad);
            if bad.is_empty() {
                return Group { base, rules, sets };
            }
            // Descending, so each index is still valid when it is removed.
            for (i, e) in bad.into_iter().rev() {
                let r = rules.remove(i);
                globs.remove(i);
                warnings.push(IgnoreWarning {
                    source: match &r.source {
                        RuleSource::File(p) => p.clone(),
                        other => PathBuf::from(other.to_string()),
                    },
                    line: r.line,
                    reason: format!(
                        "`{}` cannot be compiled ({e}); the other rules still apply",
                        r.text
                    ),
                });
            }
        }
    }

    /// The last rule of this group matching `cand`, by its number.
    pub(super) fn last_match(&self, cand: &Candidate<'_>, is_dir: bool) -> Option<usize> {
        self.sets
            .iter()
            .flat_map(|(first, set)| {
                set.matches_candidate(cand)
                    .into_iter()
                    .map(move |i| first + i)
            })
            .filter(|&i| is_dir || !self.rules[i].dir_only)
            .max()
            .map(|i| self.base + i)
    }

    pub(super) fn get(&self, i: usize) -> Option<&Rule> {
        i.checked_sub(self.base).and_then(|k| self.rules.get(k))
    }
}

/// Compiles `globs` (the first being number `first`) into as few sets as
/// compile: the whole, or else each half, down to single globs; a single
/// glob that does not compile goes to `bad` with its error.
fn build_sets(
    globs: &[globset::Glob],
    first: usize,
    bad: &mut Vec<(usize, globset::Error)>,
) -> Vec<(usize, GlobSet)> {
    if globs.is_empty() {
        return Vec::new();
    }
    let mut b = GlobSetBuilder::new();
    for g in globs {
        b.add(g.clone());
    }
    match b.build() {
        Ok(set) => vec![(first, set)],
        Err(e) if globs.len() == 1 => {
            bad.push((first, e));
            Vec::new()
        }
        Err(_) => {
            let mid = globs.len() / 2;
            let mut sets = build_sets(&globs[..mid], first, bad);
            sets.extend(build_sets(&globs[mid..], first + mid, bad));
            sets
        }
    }
}

/// The nested rule files in force in one directory: its ancestors' and its
/// own, deepest first. The root's file is not in it (it is always in force).
#[derive(Clone, Debug, Default)]
pub(crate) struct Chain(pub(super) Option<Arc<Link>>);

#[derive(Debug)]
pub(super) struct Link {
    pub(super) group: Group,
    pub(super) up: Chain,
}

impl Chain {
    pub(super) fn groups(&self) -> impl Iterator<Item = &Group> {
        let mut at = self.0.as_deref();
        std::iter::from_fn(move || {
            let link = at?;
            at = link.up.0.as_deref();
            Some(&link.group)
        })
    }
}

impl IgnoreRules {
    /// The rule numbered `i`, among the markers', the root's and the chain's.
    fn rule<'a>(&'a self, i: usize, chain: &'a Chain) -> Option<&'a Rule> {
        if let Some((_, r)) = self.markers.get(i) {
            return Some(r);
        }
        self.top
            .get(i)
            .or_else(|| chain.groups().find_map(|g| g.get(i)))
    }

    /// True when `d` is a default by evidence (a marker rule).
    pub(super) fn is_marker_rule(&self, d: Decision) -> bool {
        matches!(d, Decision::Rule(i) if i < self.markers.len())
    }

    /// True when rule `i` excludes (is not a `!` rule).
    fn excluding(&self, i: usize, chain: &Chain) -> bool {
        self.rule(i, chain).is_some_and(|r| !r.negated)
    }

    /// Decides `rel` given its parent's decision, the nested rule files in
    /// force in its directory and, for a directory, the markers verified in
    /// it (the walk's entry point; [`Markers::NONE`] when not looked at).
    pub(crate) fn decide(
        &self,
        rel: &str,
        is_dir: bool,
        parent: Decision,
        chain: &Chain,
        markers: Markers,
    ) -> Decision {
        if let Decision::Always(_) = parent {
            return parent;
        }
        let cand = Candidate::new(rel);
        if let Some(i) = self.always.last_match(&cand, is_dir) {
            return Decision::Always(i);
        }
        let nested = chain
            .groups()
            .filter_map(|g| g.last_match(&cand, is_dir))
            .max();
        // Marker rules number lowest, so any rule matching the path itself
        // overrides them (`!target/` re-includes a tagged `target/`).
        let marked = match is_dir && !markers.is_empty() {
            true => self.markers.iter().rposition(|(m, _)| markers.has(*m)),
            false => None,
        };
        let Some(i) = self.top.last_match(&cand, is_dir).max(nested).max(marked) else {
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

    /// The match to report for decision `d`; `evidence_at` is the directory
    /// whose markers decided, when a marker rule did.
    pub(crate) fn describe(
        &self,
        d: Decision,
        chain: &Chain,
        evidence_at: Option<&str>,
    ) -> Option<IgnoreMatch> {
        if let (Decision::Rule(i), Some(dir)) = (d, evidence_at) {
            if let Some((marker, _)) = self.markers.get(i) {
                let e = Evidence {
                    marker: *marker,
                    dir: dir.to_owned(),
                };
                return Some(IgnoreMatch {
                    rule: e.to_string(),
                    source: RuleSource::Evidence(e),
                    line: 0,
                    excluded: true,
                });
            }
        }
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
