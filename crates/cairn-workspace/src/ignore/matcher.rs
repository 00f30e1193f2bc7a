//! Compiled rule sets, and deciding a path from its parent's decision.

use std::sync::Arc;

use globset::{Candidate, GlobSet, GlobSetBuilder};

use super::rule::Rule;
use super::{Decision, IgnoreMatch, IgnoreRules};

/// The rules of one rule file (and, for the root, the defaults before
/// them), numbered from `base`.
#[derive(Debug)]
pub(super) struct Group {
    pub(super) base: usize,
    pub(super) rules: Vec<Rule>,
    pub(super) set: GlobSet,
}

impl Group {
    pub(super) fn new(base: usize, compiled: Vec<(Rule, globset::Glob)>) -> Group {
        let (rules, globs): (Vec<Rule>, Vec<globset::Glob>) = compiled.into_iter().unzip();
        Group {
            base,
            rules,
            set: build_set(globs),
        }
    }

    /// The last rule of this group matching `cand`, by its number.
    pub(super) fn last_match(&self, cand: &Candidate<'_>, is_dir: bool) -> Option<usize> {
        last_match(&self.set, &self.rules, cand, is_dir).map(|i| self.base + i)
    }

    pub(super) fn get(&self, i: usize) -> Option<&Rule> {
        i.checked_sub(self.base).and_then(|k| self.rules.get(k))
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

pub(super) fn build_set(globs: Vec<globset::Glob>) -> GlobSet {
    let mut b = GlobSetBuilder::new();
    for g in globs {
        b.add(g);
    }
    // Every glob already compiled on its own, so the set compiles too; an
    // empty set is the fallback that can never hide a rule silently.
    b.build().unwrap_or_else(|_| GlobSet::empty())
}

pub(super) fn last_match(
    set: &GlobSet,
    rules: &[Rule],
    cand: &Candidate<'_>,
    is_dir: bool,
) -> Option<usize> {
    set.matches_candidate(cand)
        .into_iter()
        .filter(|&i| is_dir || !rules[i].dir_only)
        .max()
}
