//! Which sessions a listing shows (`cairn sessions --repo DIR --status S
//! --limit N`), applied to [`crate::list`]'s answer in one place so every
//! front end filters alike.

use std::path::PathBuf;

use crate::Summary;

/// The statuses a session can be listed with: the terminal reasons, the
/// two states of a journal that ends without one, and `invalid` for a
/// session that does not verify.
pub const STATUSES: &[&str] = &[
    "running",
    "interrupted",
    "completed",
    "suspended",
    "failed",
    "budget_exhausted",
    "invalid",
];

/// A listing's filter. The default keeps every session.
#[derive(Clone, Debug, Default)]
pub struct ListFilter {
    /// Only sessions of this repository root (the root itself or below
    /// it, see [`crate::in_repository`]); `None` for every repository.
    pub repository: Option<PathBuf>,
    /// Only sessions with one of these statuses (see [`STATUSES`]; a
    /// session that does not verify has status `invalid` here, whatever
    /// its record says); empty for any.
    pub statuses: Vec<String>,
    /// At most this many, the newest first.
    pub limit: Option<usize>,
}

impl ListFilter {
    /// Whether `s` passes the repository and status tests.
    pub fn keeps(&self, s: &Summary) -> bool {
        let repo = self
            .repository
            .as_ref()
            .is_none_or(|r| crate::in_repository(&s.workspace, r));
        let status = self.statuses.is_empty()
            || self.statuses.iter().any(|want| {
                if s.valid {
                    *want == s.status
                } else {
                    want == "invalid"
                }
            });
        repo && status
    }

    /// `list` (newest first) filtered and cut to the limit.
    pub fn apply(&self, mut list: Vec<Summary>) -> Vec<Summary> {
        list.retain(|s| self.keeps(s));
        if let Some(n) = self.limit {
            list.truncate(n);
        }
        list
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(id: &str, ws: &str, status: &str, valid: bool) -> Summary {
        Summary {
            id: id.into(),
            name: None,
            status: status.into(),
            created: String::new(),
            updated: String::new(),
            workspace: ws.into(),
            turns: 0,
            records: 0,
            bytes: 0,
            tail: String::new(),
            cost: cairn_journal::Cost::UNKNOWN,
            parent: None,
            valid,
            problem: None,
            first_bad_seq: None,
        }
    }

    #[test]
    fn filters_by_repository_status_and_limit() {
        let all = vec![
            s("a", "/r/x", "interrupted", true),
            s("b", "/r", "completed", true),
            s("c", "/other", "interrupted", true),
            s("d", "/r/y", "running", false),
            s("e", "/r2", "completed", true),
        ];
        let ids = |f: ListFilter| -> Vec<String> {
            f.apply(all.clone()).into_iter().map(|s| s.id).collect()
        };
        let repo = Some(PathBuf::from("/r"));
        let st = |v: &[&str]| v.iter().map(|x| x.to_string()).collect();
        let rows: Vec<(ListFilter, Vec<&str>)> = vec![
            (ListFilter::default(), vec!["a", "b", "c", "d", "e"]),
            (
                ListFilter {
                    repository: repo.clone(),
                    ..Default::default()
                },
                vec!["a", "b", "d"],
            ),
            (
                ListFilter {
                    statuses: st(&["interrupted"]),
                    ..Default::default()
                },
                vec!["a", "c"],
            ),
            (
                ListFilter {
                    statuses: st(&["invalid"]),
                    ..Default::default()
                },
                vec!["d"],
            ),
            // An invalid session is not listed under the status its record says.
            (
                ListFilter {
                    statuses: st(&["running"]),
                    ..Default::default()
                },
                vec![],
            ),
            (
                ListFilter {
                    statuses: st(&["completed", "interrupted"]),
                    limit: Some(2),
                    ..Default::default()
                },
                vec!["a", "b"],
            ),
            (
                ListFilter {
                    repository: repo,
                    statuses: st(&["completed"]),
                    limit: Some(5),
                },
                vec!["b"],
            ),
            (
                ListFilter {
                    limit: Some(0),
                    ..Default::default()
                },
                vec![],
            ),
        ];
        for (f, want) in rows {
            let got = ids(f.clone());
            assert_eq!(got, want, "{f:?}");
        }
    }
}
