//! A terminal's totals must be the fold's (damage at its seq otherwise), sums
//! saturate, and a cost that breaks its state's rules is a schema error at
//! its seq — and is never written.

mod common;

use std::path::Path;

use cairn_journal::*;
use cairn_store::{RunId, Store};
use sha2::{Digest, Sha256};

/// A chained journal from hand-written bodies (each a JSON object without
/// the header), as any other writer could produce it.
fn chained(run: &str, bodies: &[String]) -> Vec<u8> {
    let mut h: [u8; 32] = Sha256::digest(format!("cairn/genesis\n{run}")).into();
    let mut out = Vec::new();
    for (i, body) in bodies.iter().enumerate() {
        let line = format!(
            r#"{{"v":1,"seq":{},"prev":"{}","ts":"2026-01-01T00:00:00Z",{}"#,
            i + 1,
            hex::encode(h),
            &body[1..]
        );
        let mut s = Sha256::new();
        s.update(h);
        s.update(line.as_bytes());
        h = s.finalize().into();
        out.extend_from_slice(line.as_bytes());
        out.push(b'\n');
    }
    out
}

fn meta_body(run: &str) -> String {
    format!(
        r#"{{"kind":"meta","run":"{run}","created":"c","workspace":"/w","name":null,"fingerprint":null,"fork":null}}"#
    )
}

fn assistant_body(cost: &str) -> String {
    format!(
        r#"{{"kind":"assistant","text":"t","tool_calls":[],"usage":{{"input_tokens":3,"output_tokens":2}},"cost":{cost}}}"#
    )
}

fn terminal_body(turns: u64, input: u64, output: u64, cost: &str, calls: u64) -> String {
    format!(
        r#"{{"kind":"terminal","reason":"completed","totals":{{"turns":{turns},"input_tokens":{input},"output_tokens":{output},"cost":{cost},"tool_calls":{calls}}}}}"#
    )
}

#[test]
fn a_terminal_whose_totals_disagree_with_the_fold_is_damage_at_its_seq() {
    let run = "totals-run";
    let known = r#"{"state":"known","usd":0.25}"#;
    // One turn of 3 in / 2 out at 0.25 USD and one tool call; then a terminal.
    // (field named in the problem, terminal body)
    let table = [
        (None, terminal_body(1, 3, 2, known, 1)),
        (Some("turns"), terminal_body(2, 3, 2, known, 1)),
        (Some("input_tokens"), terminal_body(1, 4, 2, known, 1)),
        (Some("output_tokens"), terminal_body(1, 3, 0, known, 1)),
        (Some("tool_calls"), terminal_body(1, 3, 2, known, 0)),
        (
            Some("cost"),
            terminal_body(1, 3, 2, r#"{"state":"known","usd":0.5}"#, 1),
        ),
        (
            Some("cost"),
            terminal_body(1, 3, 2, r#"{"state":"unknown","usd":null}"#, 1),
        ),
        (
            Some("cost"),
            terminal_body(1, 3, 2, r#"{"state":"zero","usd":0}"#, 1),
        ),
    ];
    for (field, terminal) in table {
        let bytes = chained(
            run,
            &[
                meta_body(run),
                assistant_body(known),
                r#"{"kind":"tool_start","call":"c","name":"shell"}"#.into(),
                terminal,
                r#"{"kind":"user","text":"after"}"#.into(),
            ],
        );
        let report = verify_bytes(&bytes, run);
        let scan = scan_journal_bytes(Path::new("j"), &bytes, run);
        match field {
            None => {
                assert!(report.ok(), "{report:?}");
                assert_eq!(report.records, 5);
                assert!(scan.is_ok());
            }
            Some(field) => {
                assert_eq!(report.first_bad_seq, Some(4), "{field}: {report:?}");
                assert_eq!(report.records, 3, "the records before it are intact");
                let problem = report.problem.unwrap();
                assert!(problem.contains(&format!("{field} = ")), "{problem}");
                match scan {
                    Err(JournalError::Damaged { seq: 4, offset, .. }) => {
                        let start = bytes
                            .split_inclusive(|&b| b == b'\n')
                            .take(3)
                            .map(<[u8]>::len)
                            .sum::<usize>();
                        assert_eq!(offset, start as u64);
                    }
                    other => panic!("{field}: {other:?}"),
                }
            }
        }
    }
}

#[test]
fn an_amount_parsed_back_one_unit_in_the_last_place_away_still_matches() {
    let run = "ulp-run";
    let cost = |usd: &str| format!(r#"{{"state":"known","usd":{usd}}}"#);
    // 0.019 + 0.254 + 0.665 is 0.9380000000000001 in f64, which serde_json
    // may read back as 0.938.
    let bytes = chained(
        run,
        &[
            meta_body(run),
            assistant_body(&cost("0.019")),
            assistant_body(&cost("0.254")),
            assistant_body(&cost("0.665")),
            terminal_body(3, 9, 6, &cost("0.9380000000000001"), 0),
            terminal_body(3, 9, 6, &cost("0.938"), 0),
        ],
    );
    let report = verify_bytes(&bytes, run);
    assert!(report.ok(), "{report:?}");
}

#[test]
fn the_first_disagreeing_terminal_is_named_and_later_ones_are_checked_too() {
    let run = "two-terminals";
    let zero = r#"{"state":"zero","usd":0}"#;
    let bytes = chained(
        run,
        &[
            meta_body(run),
            assistant_body(zero),
            terminal_body(1, 3, 2, zero, 0),
            assistant_body(zero),
            // Says one turn after two.
            terminal_body(1, 3, 2, zero, 0),
        ],
    );
    let report = verify_bytes(&bytes, run);
    assert_eq!(report.first_bad_seq, Some(5), "{report:?}");
    assert!(report.problem.unwrap().contains("turns = 1"));
}

#[test]
fn a_fork_read_alone_is_held_to_what_it_can_attest() {
    let d = tempfile::tempdir().unwrap();
    let (store, parent, ppath) = common::sample(d.path());
    let pin = verify_journal(&ppath, parent.as_str()).unwrap().tail;
    let fork_meta = || {
        let mut m = common::meta("/w");
        m.fork = Some(ForkPin {
            parent: parent.to_string(),
            seq: 7,
            hash: pin,
        });
        m
    };
    let inherited = fold(&read_journal(&ppath, parent.as_str()).unwrap().records)
        .unwrap()
        .totals;
    let turn = common::assistant("more", &[], Cost::known(0.5));
    let mut after_turn = inherited;
    after_turn.turns += 1;
    after_turn.input_tokens += 10;
    after_turn.output_tokens += 5;
    after_turn.cost = after_turn.cost + Cost::known(0.5);
    let terminal = |totals| {
        RecordBody::Terminal(Terminal {
            reason: TerminalReason::Suspended,
            totals,
            detail: None,
        })
    };
    // (bodies after the fork's meta, first bad seq)
    let table: Vec<(Vec<RecordBody>, Option<u64>)> = vec![
        // As `cairn fork` writes it: the inherited totals, then work, then
        // the lineage's totals again.
        (
            vec![terminal(inherited), turn.clone(), terminal(after_turn)],
            None,
        ),
        // Its first terminal cannot hold less than its own records.
        (vec![turn.clone(), terminal(Totals::default())], Some(3)),
        // An unknown base is allowed before the first terminal...
        (vec![turn.clone(), terminal(after_turn)], None),
        // ...but from then on it is exact.
        (
            vec![terminal(inherited), turn.clone(), terminal(inherited)],
            Some(4),
        ),
    ];
    for (bodies, bad) in table {
        let child = RunId::new();
        let mut w = JournalWriter::create(&store, &child, fork_meta()).unwrap();
        for b in &bodies {
            w.append(b).unwrap();
        }
        drop(w);
        let r = verify_journal(&store.journal_path(&child), child.as_str()).unwrap();
        assert_eq!(r.first_bad_seq, bad, "{bodies:?}: {r:?}");
    }
}

#[test]
fn token_sums_saturate_instead_of_wrapping_or_panicking() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let id = RunId::new();
    let mut w = JournalWriter::create(&store, &id, common::meta("/w")).unwrap();
    let huge = RecordBody::Assistant(Assistant {
        text: "t".into(),
        tool_calls: vec![],
        usage: Usage {
            input_tokens: u64::MAX,
            output_tokens: u64::MAX - 1,
        },
        cost: Cost::known(f64::MAX),
        replay: false,
        model: None,
        ..Assistant::default()
    });
    w.append(&huge).unwrap();
    w.append(&huge).unwrap();
    let totals = Totals {
        turns: 2,
        input_tokens: u64::MAX,
        output_tokens: u64::MAX,
        cost: Cost::known(f64::MAX),
        tool_calls: 0,
        tool_calls_unstated: false,
    };
    w.append(&RecordBody::Terminal(Terminal {
        reason: TerminalReason::Completed,
        totals,
        detail: None,
    }))
    .unwrap();
    drop(w);
    let scan = read_journal(&store.journal_path(&id), id.as_str()).unwrap();
    assert_eq!(fold(&scan.records).unwrap().totals, totals);
    assert!(verify_journal(&store.journal_path(&id), id.as_str())
        .unwrap()
        .ok());
}

#[test]
fn a_cost_is_read_only_when_its_amount_fits_its_state() {
    let run = "cost-rules";
    // (cost as written, accepted)
    let table = [
        (r#"{"state":"zero","usd":0}"#, true),
        (r#"{"state":"zero","usd":0.0}"#, true),
        (r#"{"state":"zero","usd":null}"#, false),
        (r#"{"state":"zero"}"#, false),
        (r#"{"state":"zero","usd":0.1}"#, false),
        (r#"{"state":"known","usd":0}"#, true),
        (r#"{"state":"known","usd":0.25}"#, true),
        (r#"{"state":"known","usd":1.7976931348623157e308}"#, true),
        (r#"{"state":"known","usd":-0.25}"#, false),
        (r#"{"state":"known","usd":1e400}"#, false),
        (r#"{"state":"known","usd":-1e400}"#, false),
        (r#"{"state":"known","usd":null}"#, false),
        (r#"{"state":"known"}"#, false),
        (r#"{"state":"known","usd":"1"}"#, false),
        (r#"{"state":"unknown","usd":null}"#, true),
        (r#"{"state":"unknown"}"#, true),
        (r#"{"state":"unknown","usd":0}"#, false),
        (r#"{"state":"unknown","usd":2.5}"#, false),
        (r#"{"state":"free","usd":0}"#, false),
    ];
    for (cost, accepted) in table {
        let bytes = chained(
            run,
            &[
                meta_body(run),
                r#"{"kind":"user","text":"x"}"#.into(),
                assistant_body(cost),
            ],
        );
        let report = verify_bytes(&bytes, run);
        if accepted {
            assert!(report.ok(), "{cost}: {report:?}");
            continue;
        }
        assert_eq!(report.first_bad_seq, Some(3), "{cost}: {report:?}");
        assert!(
            report.problem.as_deref().unwrap().contains("schema"),
            "{cost}: {report:?}"
        );
        match scan_journal_bytes(Path::new("j"), &bytes, run) {
            Err(JournalError::Damaged { seq: 3, .. }) => {}
            other => panic!("{cost}: {other:?}"),
        }
        // The same rule holds for a terminal's totals.
        let bytes = chained(run, &[meta_body(run), terminal_body(0, 0, 0, cost, 0)]);
        assert_eq!(verify_bytes(&bytes, run).first_bad_seq, Some(2), "{cost}");
    }
}

#[test]
fn the_writer_refuses_a_cost_no_reader_would_accept() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let id = RunId::new();
    let mut w = JournalWriter::create(&store, &id, common::meta("/w")).unwrap();
    let bad_costs = [
        Cost::known(f64::NAN),
        Cost::known(f64::INFINITY),
        Cost::known(-1.0),
        Cost {
            state: CostState::Unknown,
            usd: Some(1.0),
        },
        Cost {
            state: CostState::Zero,
            usd: None,
        },
    ];
    for cost in bad_costs {
        let err = w.append(&common::assistant("t", &[], cost)).unwrap_err();
        assert!(matches!(err, JournalError::InvalidAppend(_)), "{err}");
        let err = w
            .append(&RecordBody::Terminal(Terminal {
                reason: TerminalReason::Completed,
                totals: Totals {
                    cost,
                    ..Totals::default()
                },
                detail: None,
            }))
            .unwrap_err();
        assert!(matches!(err, JournalError::InvalidAppend(_)), "{err}");
    }
    // Nothing was written and the writer still works.
    assert!(!w.is_poisoned());
    assert_eq!(w.append(&common::user("ok")).unwrap().seq, 2);
    drop(w);
    assert!(verify_journal(&store.journal_path(&id), id.as_str())
        .unwrap()
        .ok());
}

#[test]
fn a_cost_sum_saturates_at_the_largest_amount() {
    assert_eq!(
        Cost::known(f64::MAX) + Cost::known(f64::MAX),
        Cost::known(f64::MAX)
    );
    assert!((Cost::known(f64::MAX) + Cost::known(1.0)).is_valid());
}

/// DESIGN §2 lists `turns`, `input_tokens`, `output_tokens` and `cost` in a
/// terminal's totals, not `tool_calls`: a terminal that leaves it out is
/// checked on what it states, and a later one that states it is held to
/// the fold.
#[test]
fn a_total_the_terminal_does_not_state_is_not_checked() {
    let run = "unstated-run";
    let known = r#"{"state":"known","usd":0.25}"#;
    let without = |turns: u64| {
        format!(
            r#"{{"kind":"terminal","reason":"suspended","totals":{{"turns":{turns},"input_tokens":{},"output_tokens":{},"cost":{{"state":"known","usd":{}}}}}}}"#,
            3 * turns,
            2 * turns,
            0.25 * turns as f64
        )
    };
    let tool_start = r#"{"kind":"tool_start","call":"c","name":"shell"}"#.to_string();
    let bytes = chained(
        run,
        &[
            meta_body(run),
            assistant_body(known),
            tool_start.clone(),
            without(1),
        ],
    );
    let report = verify_bytes(&bytes, run);
    assert!(report.ok(), "{report:?}");
    let scan = scan_journal_bytes(Path::new("j"), &bytes, run).unwrap();
    let Some(RecordBody::Terminal(t)) = scan.records.last().map(|r| &r.body) else {
        panic!("no terminal");
    };
    assert!(t.totals.tool_calls_unstated);
    // What it states is still checked.
    let wrong = without(1).replace(r#""turns":1"#, r#""turns":2"#);
    let bytes = chained(
        run,
        &[
            meta_body(run),
            assistant_body(known),
            tool_start.clone(),
            wrong,
        ],
    );
    assert_eq!(verify_bytes(&bytes, run).first_bad_seq, Some(4));
    // A later terminal that states it is held to the fold: 2 calls, not 1.
    let later = |calls| terminal_body(2, 6, 4, r#"{"state":"known","usd":0.5}"#, calls);
    for (calls, ok) in [(2, true), (1, false)] {
        let bytes = chained(
            run,
            &[
                meta_body(run),
                assistant_body(known),
                tool_start.clone(),
                without(1),
                assistant_body(known),
                tool_start.clone(),
                later(calls),
            ],
        );
        let report = verify_bytes(&bytes, run);
        assert_eq!(report.ok(), ok, "{calls}: {report:?}");
    }
    // Written back out, it still does not state it.
    let back = serde_json::to_value(t.totals).unwrap();
    assert!(back.get("tool_calls").is_none(), "{back}");
}
