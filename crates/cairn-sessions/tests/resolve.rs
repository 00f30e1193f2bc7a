//! References as people type them resolve to one session, snapshot or
//! checkpoint, or fail naming every candidate (DESIGN §16).

mod common;

use cairn_journal::TerminalReason;
use cairn_sessions::{resolve_checkpoint, resolve_session, SessionError};
use cairn_store::{RunId, Store};
use common::*;

fn session(store: &Store, workspace: &str, name: &str) -> RunId {
    let mut w = Writer::create(store, workspace, name);
    w.append(user("task"));
    w.end(TerminalReason::Completed);
    w.refresh();
    w.id.clone()
}

#[test]
fn sessions_by_id_prefix_name_and_last() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path().join("store")).unwrap();
    let repo = d.path().join("repo");
    let other = d.path().join("other");
    let a = session(&store, repo.to_str().unwrap(), "first");
    std::thread::sleep(std::time::Duration::from_millis(2));
    let b = session(&store, other.to_str().unwrap(), "twin");
    std::thread::sleep(std::time::Duration::from_millis(2));
    let c = session(&store, repo.to_str().unwrap(), "twin");

    let ok = |text: &str| resolve_session(&store, text, &repo).unwrap();
    assert_eq!(ok(a.as_str()), a);
    assert_eq!(
        ok(&a.as_str().to_ascii_lowercase()),
        a,
        "ids match without regard to case"
    );
    assert_eq!(ok("first"), a);
    // @last is this repository's newest session, not the store's.
    assert_eq!(ok("@last"), c);
    assert_eq!(resolve_session(&store, "@last", &other).unwrap(), b);

    // ULIDs made within milliseconds share their first characters (the
    // time), far more than 4.
    let common = |x: &str, y: &str| x.chars().zip(y.chars()).take_while(|(p, q)| p == q).count();
    let n = common(a.as_str(), b.as_str()).min(common(a.as_str(), c.as_str()));
    assert!(n >= 4, "{a} {b} {c}");
    let shared = a.as_str()[..n].to_owned();
    match resolve_session(&store, &shared, &repo) {
        Err(e @ SessionError::Ambiguous { .. }) => {
            let m = e.to_string();
            for id in [&a, &b, &c] {
                assert!(m.contains(id.as_str()), "{m}");
            }
        }
        x => panic!("{x:?}"),
    }
    match resolve_session(&store, "twin", &repo) {
        Err(SessionError::Ambiguous { count: 2, .. }) => {}
        x => panic!("{x:?}"),
    }
    // The shortest unique prefix of c resolves.
    let unique = (4..=26)
        .map(|n| &c.as_str()[..n])
        .find(|p| !a.as_str().starts_with(p) && !b.as_str().starts_with(p))
        .unwrap();
    assert_eq!(ok(unique), c);
    for bad in ["nope", "abc"] {
        assert!(
            matches!(
                resolve_session(&store, bad, &repo),
                Err(SessionError::NoMatch { .. })
            ),
            "{bad}"
        );
    }
    // Neither a name nor anything an id could be: said as such.
    for bad in ["@first", "../etc"] {
        assert!(
            matches!(
                resolve_session(&store, bad, &repo),
                Err(SessionError::RunId(_))
            ),
            "{bad}"
        );
    }
    let empty = d.path().join("empty");
    assert!(matches!(
        resolve_session(&store, "@last", &empty),
        Err(SessionError::NoMatch { .. })
    ));
}

#[test]
fn checkpoints_by_prefix_with_or_without_cp() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path().join("store")).unwrap();
    std::fs::create_dir_all(store.checkpoints_dir()).unwrap();
    for id in ["cp_01JXAAAA", "cp_01JXBBBB", "cp_01JYCCCC"] {
        std::fs::write(store.checkpoints_dir().join(format!("{id}.json")), "{}").unwrap();
    }
    let ok = |t: &str| resolve_checkpoint(&store, t).unwrap().to_string();
    assert_eq!(ok("cp_01JXAAAA"), "cp_01JXAAAA");
    assert_eq!(ok("01JXA"), "cp_01JXAAAA");
    assert_eq!(ok("cp_01JY"), "cp_01JYCCCC");
    assert_eq!(ok("01jy"), "cp_01JYCCCC");
    assert!(matches!(
        resolve_checkpoint(&store, "01JX"),
        Err(SessionError::Ambiguous { count: 2, .. })
    ));
    assert!(matches!(
        resolve_checkpoint(&store, "cp_01"),
        Err(SessionError::NoMatch { .. })
    ));
}
