//! Ids as people type them (DESIGN §16): every command that takes a
//! session, snapshot or checkpoint id resolves what was typed here, so the
//! CLI, the TUI and any other front end agree on what a reference means.
//!
//! The rules, in order ([`pick`] applies them; it is a pure function):
//! 1. the exact id of something that exists is that thing, whatever else
//!    the text might also match;
//! 2. otherwise the candidates are everything whose name (a session's
//!    name, a snapshot's label such as `bank:2`) equals the text, and
//!    everything whose id starts with the text, compared without regard to
//!    case, when the text has at least [`MIN_PREFIX`] characters (as git and
//!    restic ask for);
//! 3. exactly one candidate is the answer; more than one is
//!    [`SessionError::Ambiguous`], listing them; none is
//!    [`SessionError::NoMatch`], saying what to list to find the id.
//!
//! A session may also be named `@last`: the newest session of the
//! repository the command runs in (the first row of `cairn sessions`).

use std::path::Path;

use cairn_checkpoint::CheckpointId;
use cairn_store::{RunId, Store};
use cairn_workspace::SnapshotId;

use crate::SessionError;

/// The fewest characters of an id accepted as its prefix.
pub const MIN_PREFIX: usize = 4;

/// The reference to the newest session of the repository.
pub const LAST: &str = "@last";

/// The most candidates an ambiguity error lists.
const MAX_LISTED: usize = 10;

/// One thing a reference may name, for [`pick`].
#[derive(Clone, Debug, Default)]
pub struct Candidate {
    /// Its id.
    pub id: String,
    /// The names it answers to besides its id (a session's name, a
    /// snapshot's labels).
    pub names: Vec<String>,
    /// How it is shown among the candidates of an ambiguity (its id
    /// first).
    pub shown: String,
}

/// What [`pick`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Picked {
    /// The index of the one candidate.
    One(usize),
    /// Nothing matched.
    None,
    /// Nothing matched, and the text is too short to be taken as a prefix.
    TooShort,
    /// The indices of every candidate that matched.
    Many(Vec<usize>),
}

/// Applies the rules of this module's doc to `text` over `candidates`.
pub fn pick(text: &str, candidates: &[Candidate]) -> Picked {
    if let Some(i) = candidates.iter().position(|c| c.id == text) {
        return Picked::One(i);
    }
    let long_enough = text.chars().count() >= MIN_PREFIX;
    let lower = text.to_ascii_lowercase();
    let hits: Vec<usize> = candidates
        .iter()
        .enumerate()
        .filter(|(_, c)| {
            c.names.iter().any(|n| n == text)
                || (long_enough && c.id.to_ascii_lowercase().starts_with(&lower))
        })
        .map(|(i, _)| i)
        .collect();
    match hits.as_slice() {
        [] if long_enough => Picked::None,
        [] => Picked::TooShort,
        [one] => Picked::One(*one),
        _ => Picked::Many(hits),
    }
}

/// Turns what [`pick`] found into the chosen candidate's index or the
/// error that says what was wrong. `kind` names the kind of thing
/// (`session`), `list` the command that lists them.
fn chosen(
    kind: &'static str,
    text: &str,
    candidates: &[Candidate],
    list: &str,
) -> Result<usize, SessionError> {
    match pick(text, candidates) {
        Picked::One(i) => Ok(i),
        Picked::Many(hits) => Err(SessionError::Ambiguous {
            kind,
            given: text.to_owned(),
            count: hits.len(),
            candidates: hits
                .iter()
                .take(MAX_LISTED)
                .map(|&i| candidates[i].shown.clone())
                .collect(),
        }),
        Picked::None => Err(SessionError::NoMatch {
            kind,
            given: text.to_owned(),
            hint: format!("no id starts with it and nothing is named so; list them with `{list}`"),
        }),
        Picked::TooShort => Err(SessionError::NoMatch {
            kind,
            given: text.to_owned(),
            hint: format!(
                "it is no id and no name, and a prefix needs at least {MIN_PREFIX} characters; list them with `{list}`"
            ),
        }),
    }
}

/// The session `text` names: its id, a unique prefix of it, its name, or
/// `@last` (the newest session of the repository at `repository`, a root as
/// [`crate::repository_root`] finds it).
///
/// # Errors
/// [`SessionError::NoMatch`] and [`SessionError::Ambiguous`] (bad input);
/// the store cannot be listed.
pub fn resolve_session(
    store: &Store,
    text: &str,
    repository: &Path,
) -> Result<RunId, SessionError> {
    // The exact id of a session that exists: no listing needed.
    if let Ok(id) = RunId::parse(text) {
        if store.journal_path(&id).is_file() {
            return Ok(id);
        }
    }
    let all = crate::list(store)?;
    if text == LAST {
        return all
            .iter()
            .find(|s| crate::in_repository(&s.workspace, repository))
            .and_then(|s| RunId::parse(&s.id).ok())
            .ok_or_else(|| SessionError::NoMatch {
                kind: "session",
                given: text.to_owned(),
                hint: format!(
                    "the repository {} has no session yet (`cairn sessions --all` lists every repository's)",
                    repository.display()
                ),
            });
    }
    let candidates: Vec<Candidate> = all
        .iter()
        .map(|s| Candidate {
            id: s.id.clone(),
            names: s.name.iter().cloned().collect(),
            shown: format!(
                "{}  {}  {}  {}",
                s.id,
                s.status,
                s.updated.get(..19).unwrap_or(&s.updated).replace('T', " "),
                s.name.as_deref().unwrap_or("")
            )
            .trim_end()
            .to_owned(),
        })
        .collect();
    let i = match chosen("session", text, &candidates, "cairn sessions --all") {
        Ok(i) => i,
        // Nothing is named so, and it cannot be an id either: say that.
        Err(e @ SessionError::NoMatch { .. }) => {
            return Err(match RunId::parse(text) {
                Err(bad) => SessionError::RunId(bad),
                Ok(_) => e,
            })
        }
        Err(e) => return Err(e),
    };
    Ok(RunId::parse(&candidates[i].id)?)
}

/// The snapshot of session `run` that `text` names: its id, a unique prefix
/// of it, or a label it carries (`bank:2`, as `cairn rewind` prints it;
/// `post:exec:1`).
///
/// # Errors
/// [`SessionError::NoMatch`] and [`SessionError::Ambiguous`] (bad input);
/// the snapshots cannot be listed.
pub fn resolve_snapshot(
    store: &Store,
    run: &RunId,
    text: &str,
) -> Result<SnapshotId, SessionError> {
    let all = cairn_workspace::list_snapshots(store, run)?;
    let candidates: Vec<Candidate> = all
        .iter()
        .map(|s| {
            let labels: Vec<String> = s.labels.iter().map(ToString::to_string).collect();
            Candidate {
                id: s.id.to_string(),
                shown: format!("{}  {}", s.id, labels.join(" ")),
                names: labels,
            }
        })
        .collect();
    let list = format!("cairn rewind {run} --list-snapshots");
    let i = chosen("snapshot", text, &candidates, &list)?;
    Ok(all[i].id.clone())
}

/// The checkpoint `text` names: its id (`cp_…`), or a unique prefix of it,
/// with or without `cp_`.
///
/// # Errors
/// [`SessionError::NoMatch`] and [`SessionError::Ambiguous`] (bad input);
/// the checkpoints cannot be listed.
pub fn resolve_checkpoint(store: &Store, text: &str) -> Result<CheckpointId, SessionError> {
    let ids = cairn_checkpoint::ids(store)?;
    // Compared without the `cp_` every id has: `01JX` is a prefix of
    // `cp_01JX…` as people read it.
    let candidates: Vec<Candidate> = ids
        .iter()
        .map(|id| Candidate {
            id: id
                .as_str()
                .strip_prefix("cp_")
                .unwrap_or(id.as_str())
                .to_owned(),
            names: Vec::new(),
            shown: id.to_string(),
        })
        .collect();
    let bare = text.strip_prefix("cp_").unwrap_or(text);
    let i = chosen("checkpoint", bare, &candidates, "cairn checkpoint ls ID")?;
    Ok(ids[i].clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(id: &str, names: &[&str]) -> Candidate {
        Candidate {
            id: id.into(),
            names: names.iter().map(|n| (*n).to_owned()).collect(),
            shown: id.into(),
        }
    }

    #[test]
    fn the_rules_in_order() {
        let all = [
            c("01JXAAAA1111", &["fix the tests"]),
            c("01JXAAAB2222", &["bank:1", "post:exec:1"]),
            c("01JYCCCC3333", &["01JX"]),
            c("abcd", &[]),
            c("abcdef", &["twin"]),
            c("zzzz9999", &["twin"]),
        ];
        use Picked::*;
        let rows: &[(&str, Picked)] = &[
            // 1. An exact id wins over a prefix of another and a name.
            ("abcd", One(3)),
            ("01JXAAAA1111", One(0)),
            // 2. Prefixes of 4+ characters, any case.
            ("01JY", One(2)),
            ("01jy", One(2)),
            ("01JXAAAB", One(1)),
            ("abcde", One(4)),
            // Names and labels, exactly.
            ("fix the tests", One(0)),
            ("bank:1", One(1)),
            ("post:exec:1", One(1)),
            // 3. More than one: a prefix of two ids, a name of two, a
            //    name of one that is a prefix of others.
            ("01JXAAA", Many(vec![0, 1])),
            ("twin", Many(vec![4, 5])),
            ("01JX", Many(vec![0, 1, 2])),
            // None, and too short to be a prefix.
            ("01JZ", None),
            ("fix", TooShort),
            ("01J", TooShort),
            ("", TooShort),
            ("Fix the tests", None),
            ("bank:2", None),
        ];
        for (text, want) in rows {
            assert_eq!(&pick(text, &all), want, "{text:?}");
        }
        assert_eq!(pick("anything", &[]), None);
    }
}
