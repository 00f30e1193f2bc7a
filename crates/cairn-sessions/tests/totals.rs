//! A terminal's totals are cumulative over the whole lineage: checked
//! against the fold of it when a session is loaded, resumed, forked, listed
//! or verified. A model test drives writers the way cairn does (runs,
//! resumes, forks of forks, exec- and snapshot-style sessions, replayed and
//! unknown-cost turns, bookkeeping after terminals) and checks that nothing
//! legitimately written is ever reported as damaged, and that listings
//! agree with the fold.

mod common;

use cairn_journal::*;
use cairn_sessions::{list, load, verify, SessionError};
use cairn_store::{RunId, Store};
use common::*;

fn terminal(reason: TerminalReason, totals: Totals) -> RecordBody {
    RecordBody::Terminal(Terminal {
        reason,
        totals,
        detail: None,
    })
}

/// A parent with two turns (10 tokens in, 0.5 USD), pinned at its end.
fn parent(store: &Store) -> (RunId, ForkPin) {
    let mut p = Writer::create(store, "/ws", "parent");
    p.append(turn(4, 1, Cost::known(0.25), false, &[]));
    p.append(turn(6, 1, Cost::known(0.25), false, &[]));
    let end = p.end(TerminalReason::Completed);
    let pin = ForkPin {
        parent: p.id.to_string(),
        seq: end.seq,
        hash: p.w.tail(),
    };
    (p.id.clone(), pin)
}

/// A fork of `pin` written by hand with these bodies after its meta.
fn hand_fork(store: &Store, pin: &ForkPin, bodies: &[RecordBody]) -> RunId {
    let id = RunId::new();
    let mut m = meta("/ws", "fork");
    m.fork = Some(pin.clone());
    let mut w = JournalWriter::create(store, &id, m).unwrap();
    for b in bodies {
        w.append(b).unwrap();
    }
    id
}

#[test]
fn a_fork_whose_terminal_disagrees_with_its_lineage_is_damaged_at_that_seq() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let (_, pin) = parent(&store);
    let inherited = Totals {
        turns: 2,
        input_tokens: 10,
        output_tokens: 2,
        cost: Cost::known(0.5),
        tool_calls: 0,
        tool_calls_unstated: false,
    };
    // (terminal totals at seq 2, first bad seq)
    let table = [
        (inherited, None),
        (
            Totals {
                turns: 5,
                ..inherited
            },
            Some(2),
        ),
        (
            Totals {
                input_tokens: 11,
                ..inherited
            },
            Some(2),
        ),
        (
            Totals {
                cost: Cost::known(0.75),
                ..inherited
            },
            Some(2),
        ),
        (
            Totals {
                cost: Cost::UNKNOWN,
                ..inherited
            },
            Some(2),
        ),
        // What a fork's terminal would say had it forgotten its inheritance.
        (Totals::default(), Some(2)),
    ];
    for (totals, bad) in table {
        let id = hand_fork(&store, &pin, &[terminal(TerminalReason::Suspended, totals)]);
        // Read alone, the fork can attest none of this.
        assert!(verify_journal(&store.journal_path(&id), id.as_str())
            .unwrap()
            .ok());
        let report = verify(&store, &id).unwrap();
        assert_eq!(report.first_bad_seq, bad, "{totals:?}: {report:?}");
        let listed = list(&store)
            .unwrap()
            .into_iter()
            .find(|s| s.id == id.as_str())
            .unwrap();
        match bad {
            None => {
                assert!(report.ok() && listed.valid);
                assert!(load(&store, &id).is_ok());
            }
            Some(seq) => {
                assert_eq!(report.records, seq - 1);
                assert!(report.problem.unwrap().contains("does not match the fold"));
                assert!(!listed.valid, "{listed:?}");
                assert_eq!(listed.first_bad_seq, Some(seq));
                match load(&store, &id) {
                    Err(SessionError::Journal(JournalError::Damaged {
                        seq: s, offset, ..
                    })) => {
                        assert_eq!(s, seq);
                        assert!(offset > 0);
                    }
                    other => panic!("{other:?}"),
                }
                // Neither resumed nor forked from.
                assert!(JournalWriter::open(&store, &id)
                    .map_err(SessionError::from)
                    .and_then(|(_, scan)| cairn_sessions::state_for_resume(&store, &id, &scan))
                    .is_err());
                assert!(cairn_sessions::fork(&store, &id, None, None).is_err());
            }
        }
    }
}

#[test]
fn a_fork_of_a_fork_whose_terminal_disagrees_is_refused_at_its_pinned_prefix() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let (_, pin) = parent(&store);
    // Anchored-consistent on its own, wrong over the lineage.
    let middle = hand_fork(
        &store,
        &pin,
        &[terminal(TerminalReason::Suspended, Totals::default())],
    );
    let mpin = cairn_sessions::pin_at(&store, &middle, None).unwrap().0;
    let child = hand_fork(
        &store,
        &mpin,
        &[terminal(TerminalReason::Suspended, Totals::default())],
    );
    match load(&store, &child) {
        Err(SessionError::ForkPrefix { ancestor, seq, .. }) => {
            assert_eq!(ancestor, middle.as_str());
            assert_eq!(seq, 2);
        }
        other => panic!("{other:?}"),
    }
    let report = verify(&store, &child).unwrap();
    assert_eq!(report.first_bad_seq, Some(1), "{report:?}");
}

/// A step of the model.
fn step(rng: &mut Rng, store: &Store, sessions: &mut Vec<RunId>, w: &mut Option<Writer>) {
    let Some(cur) = w.as_mut() else {
        // Nothing open: start a session, or resume or fork one.
        *w = Some(match (sessions.is_empty(), rng.below(3)) {
            (true, _) | (_, 0) => {
                let s = Writer::create(store, "/ws", "model");
                sessions.push(s.id.clone());
                s
            }
            (false, 1) => {
                let id = sessions[rng.below(sessions.len() as u64) as usize].clone();
                let mut s = Writer::open(store, &id);
                // What a resume journals before the model runs.
                s.append(snapshot("resume:turn:1"));
                s.append(reconcile());
                s
            }
            _ => {
                let id = sessions[rng.below(sessions.len() as u64) as usize].clone();
                let records = load(store, &id).unwrap().scan.records.len() as u64;
                let s = Writer::fork(store, &id, Some(1 + rng.below(records)));
                sessions.push(s.id.clone());
                s
            }
        });
        return;
    };
    let tokens = |rng: &mut Rng| match rng.below(8) {
        0 => u64::MAX - rng.below(4),
        _ => rng.below(5000),
    };
    let calls: Vec<String> = cur
        .state
        .pending
        .iter()
        .map(|p| p.call.id.clone())
        .collect();
    match rng.below(12) {
        0 => {
            cur.append(user("more"));
        }
        1..=3 => {
            let cost = match rng.below(4) {
                0 => Cost::ZERO,
                1 => Cost::UNKNOWN,
                // Amounts no decimal writes exactly.
                _ => Cost::known(rng.below(1_000_000) as f64 / 7.0e5),
            };
            let n = rng.below(3) as usize;
            let ids: Vec<String> = (0..n).map(|_| format!("c{}", rng.next() % 1000)).collect();
            let ids: Vec<&str> = ids.iter().map(String::as_str).collect();
            let (i, o) = (tokens(rng), tokens(rng));
            cur.append(turn(i, o, cost, rng.below(4) == 0, &ids));
        }
        4 | 5 if !calls.is_empty() => {
            let call = calls[rng.below(calls.len() as u64) as usize].clone();
            cur.append(RecordBody::ToolStart(ToolStart {
                call: call.clone(),
                name: "shell".into(),
                mcp: None,
            }));
            cur.append(RecordBody::ToolResult(ToolResult {
                call,
                outcome: Outcome::Ok,
                output: "ok".into(),
            }));
        }
        6 => {
            cur.append(match rng.below(3) {
                0 => snapshot("post:turn:1"),
                1 => reconcile(),
                _ => checkpoint(),
            });
            if rng.below(2) == 0 {
                cur.refresh();
            }
        }
        7 | 8 => {
            let reason = [
                TerminalReason::Completed,
                TerminalReason::Suspended,
                TerminalReason::Failed,
                TerminalReason::Interrupted,
                TerminalReason::BudgetExhausted,
            ][rng.below(5) as usize];
            cur.end(reason);
            if rng.below(2) == 0 {
                // `cairn snapshot --run` or `checkpoint save` afterwards.
                cur.append(snapshot("user:x"));
                cur.append(checkpoint());
                cur.refresh();
            }
        }
        9 => {
            // An exec- or snapshot-style stretch: no model turn.
            cur.append(snapshot("pre:exec:1"));
            cur.append(RecordBody::ToolStart(ToolStart {
                call: "exec".into(),
                name: "exec".into(),
                mcp: None,
            }));
            cur.append(RecordBody::ToolResult(ToolResult {
                call: "exec".into(),
                outcome: Outcome::Error,
                output: "exit 1".into(),
            }));
            cur.append(snapshot("post:exec:1"));
            cur.end(TerminalReason::Failed);
        }
        _ => {
            // The process ends (cleanly or not) and the writer goes away.
            *w = None;
        }
    }
}

#[test]
fn nothing_legitimately_written_is_damaged_and_listings_agree_with_the_fold() {
    for seed in 0..24u64 {
        let d = tempfile::tempdir().unwrap();
        let store = Store::open(d.path()).unwrap();
        let mut rng = Rng::new(seed);
        let mut sessions = Vec::new();
        let mut w = None;
        for _ in 0..30 {
            step(&mut rng, &store, &mut sessions, &mut w);
        }
        drop(w);
        for pass in ["projections", "record"] {
            if pass == "record" {
                remove_projections(&store);
            }
            let listed = list(&store).unwrap();
            assert_eq!(listed.len(), sessions.len());
            for id in &sessions {
                let report = verify(&store, id).unwrap();
                assert!(report.ok(), "seed {seed}, {id}: {report:?}");
                let own = verify_journal(&store.journal_path(id), id.as_str()).unwrap();
                assert!(own.ok(), "seed {seed}, {id}: {own:?}");
                let state = load(&store, id)
                    .unwrap_or_else(|e| panic!("seed {seed}, {id}: {e}"))
                    .state;
                let s = listed.iter().find(|s| s.id == id.as_str()).unwrap();
                assert!(s.valid, "seed {seed} ({pass}): {s:?}");
                // Every writer is gone: a journal without a terminal is
                // listed interrupted, the rest as the fold says.
                let want = match state.status.as_str() {
                    "running" => "interrupted",
                    other => other,
                };
                assert_eq!(s.status, want, "seed {seed} ({pass}) {id}");
                assert_eq!(s.turns, state.totals.turns, "seed {seed} ({pass}) {id}");
                assert_eq!(s.cost.state, state.totals.cost.state, "seed {seed} {id}");
                assert_eq!(s.workspace, state.workspace);
                assert_eq!(s.parent.as_ref().map(|p| p.seq), state.fork.map(|f| f.seq));
            }
        }
    }
}
