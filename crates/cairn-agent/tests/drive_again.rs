//! One `Agent` driven again after it returned, as an interactive front end
//! does: the second stretch of work starts as `cairn resume ID TEXT` would
//! (the window since the last stop closed and reconciled, then the text).

mod common;

use cairn_agent::stop_pair;
use cairn_journal::{RecordBody, TerminalReason};
use common::*;
use serde_json::json;

#[tokio::test]
async fn a_completed_agent_driven_again_continues_like_a_resume() {
    let rig = Rig::new(json!([
        {"text": "first answer"},
        {"text": "making f", "tool_calls": [shell("c1", "echo x > f")]},
        {"text": "second answer"}
    ]));
    let (mut agent, _stop) = rig.agent();
    let mut seen = Seen::default();
    let end = agent.drive(Some("one".into()), &mut seen).await.unwrap();
    assert_eq!(end.reason, TerminalReason::Completed, "{:?}", end.detail);
    let first = records(&agent).len();

    // The operator edits between the two stretches.
    std::fs::write(rig.path("theirs.txt"), "by hand\n").unwrap();
    let end = agent.drive(Some("two".into()), &mut seen).await.unwrap();
    assert_eq!(end.reason, TerminalReason::Completed, "{:?}", end.detail);
    assert_eq!(std::fs::read_to_string(rig.path("f")).unwrap(), "x\n");

    let recs = records(&agent);
    assert_eq!(recs.last().map(|r| r.seq), Some(end.records));
    let outline = outline_of(&recs[first..]);
    // As a resume: the window closed first, with what changed in it, then
    // the model is told, then the user's text, then turn 2.
    assert_eq!(
        outline[..5],
        [
            "resume:turn:2",
            "reconcile:theirs.txt",
            "user",
            "user",
            "pre:turn:2"
        ],
        "{outline:?}"
    );
    let texts: Vec<_> = recs[first..]
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::User(u) => Some(u.text.as_str()),
            _ => None,
        })
        .collect();
    assert!(texts[0].contains("theirs.txt"), "{texts:?}");
    assert_eq!(texts[1], "two");
    let state = agent.session().state();
    assert_eq!(state.totals.turns, 3);
    assert_eq!(state.totals.tool_calls, 1);
    // The journal reads back whole, the chain intact.
    let s = agent.session();
    let report = cairn_journal::verify_journal(&s.store().journal_path(s.id()), s.id().as_str());
    assert!(report.is_ok(), "{report:?}");
}

#[tokio::test]
async fn a_suspended_agent_given_a_fresh_stop_works_on() {
    let rig = Rig::new(json!([
        {"text": "making f", "tool_calls": [shell("c1", "echo x > f")]},
        {"text": "done"}
    ]));
    let (mut agent, stop) = rig.agent();
    // Asked to stop before it starts: it suspends before the first turn.
    stop.escalate();
    let mut seen = Seen::default();
    let end = agent.drive(Some("go".into()), &mut seen).await.unwrap();
    assert_eq!(end.reason, TerminalReason::Suspended, "{:?}", end.detail);
    assert!(!rig.path("f").exists());

    // The same stop would suspend again at once; a fresh one lets it work.
    let (_handle, fresh) = stop_pair();
    agent.set_stop(fresh);
    let end = agent.drive(None, &mut seen).await.unwrap();
    assert_eq!(end.reason, TerminalReason::Completed, "{:?}", end.detail);
    assert!(rig.path("f").exists());
    let outline = outline_of(&records(&agent));
    assert_eq!(
        outline
            .iter()
            .filter(|o| o.starts_with("terminal"))
            .collect::<Vec<_>>(),
        ["terminal:suspended", "terminal:completed"],
        "{outline:?}"
    );
}

#[tokio::test]
async fn a_capture_recorded_between_stretches_is_on_the_record() {
    let rig = Rig::new(json!([{"text": "first"}, {"text": "second"}]));
    let (mut agent, _stop) = rig.agent();
    let end = agent
        .drive(Some("one".into()), &mut Seen::default())
        .await
        .unwrap();
    assert_eq!(end.reason, TerminalReason::Completed);
    // While the agent holds the lock, a front end banks the workspace (as a
    // rewind does) and records the capture through the agent.
    std::fs::write(rig.path("theirs.txt"), "by hand\n").unwrap();
    let tracker = cairn_workspace::Workspace::open(
        &rig.store,
        agent.session().id(),
        &rig.ws,
        cairn_workspace::CaptureConfig::default(),
    )
    .unwrap();
    let bank = tracker
        .capture(
            &cairn_workspace::Label::Bank(1),
            &cairn_workspace::NoProgress,
        )
        .unwrap();
    agent.session_mut().record_capture(&bank).unwrap();
    let last = agent.session().state().last_snapshot.clone();
    assert_eq!(last.map(|s| s.label), Some("bank:1".to_string()));

    // The bank holds the edit, so the next stretch finds nothing new.
    let first = records(&agent).len();
    let end = agent
        .drive(Some("two".into()), &mut Seen::default())
        .await
        .unwrap();
    assert_eq!(end.reason, TerminalReason::Completed, "{:?}", end.detail);
    let outline = outline_of(&records(&agent)[first..]);
    assert_eq!(outline[..2], ["resume:turn:2", "reconcile:"], "{outline:?}");
}
