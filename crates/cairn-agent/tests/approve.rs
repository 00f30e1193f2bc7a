//! Approvals (DESIGN §11): a call the policy names waits for a person inside
//! a `pause:` window; a decline runs nothing and is journaled `refused`; what
//! the person edits while deciding is reconciled as theirs.

mod common;

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use cairn_agent::{ApprovePolicy, Approver, Decision, StopHandle};
use cairn_journal::{Outcome, RecordBody, TerminalReason, ToolCall};
use common::*;
use serde_json::json;

type During = Box<dyn FnMut(&ToolCall) + Send>;

/// Answers from a list (then declines), running `during` while "deciding".
struct Person {
    answers: VecDeque<Decision>,
    asked: Arc<Mutex<Vec<String>>>,
    during: Option<During>,
}

impl Person {
    fn new(answers: &[Decision]) -> (Person, Arc<Mutex<Vec<String>>>) {
        let asked = Arc::new(Mutex::new(Vec::new()));
        let p = Person {
            answers: answers.iter().copied().collect(),
            asked: asked.clone(),
            during: None,
        };
        (p, asked)
    }
}

#[async_trait::async_trait]
impl Approver for Person {
    async fn ask(&mut self, call: &ToolCall) -> Decision {
        self.asked.lock().unwrap().push(call.id.clone());
        if let Some(f) = self.during.as_mut() {
            f(call);
        }
        let d = self.answers.pop_front().unwrap_or(Decision::Decline);
        tokio::task::yield_now().await;
        d
    }
}

/// Asks to stop at once, then never answers.
struct Walks(StopHandle);

#[async_trait::async_trait]
impl Approver for Walks {
    async fn ask(&mut self, _call: &ToolCall) -> Decision {
        self.0.escalate();
        self.0.escalate();
        std::future::pending().await
    }
}

fn make_file_script() -> serde_json::Value {
    json!([
        {"text": "making f", "tool_calls": [shell("c1", "echo x > f")]},
        {"text": "done"}
    ])
}

fn position(outline: &[String], what: &str) -> usize {
    outline
        .iter()
        .position(|o| o == what)
        .unwrap_or_else(|| panic!("no {what} in {outline:?}"))
}

#[tokio::test]
async fn a_declined_call_is_refused_runs_nothing_and_has_no_tool_start() {
    let rig = Rig::new(make_file_script());
    let (agent, _stop) = rig.agent();
    let (person, asked) = Person::new(&[Decision::Decline]);
    let mut agent = agent.with_approval(ApprovePolicy::Shell, Box::new(person));
    let mut seen = Seen::default();
    let end = agent.drive(Some("go".into()), &mut seen).await.unwrap();
    assert_eq!(end.reason, TerminalReason::Completed, "{:?}", end.detail);
    assert!(!rig.path("f").exists(), "the declined command ran");
    assert_eq!(*asked.lock().unwrap(), ["c1"]);
    assert_eq!(seen.asked, ["c1"]);
    assert_eq!(seen.finished, [("c1".to_string(), Outcome::Refused)]);

    let recs = records(&agent);
    let outline = outline_of(&recs);
    assert!(
        !outline.iter().any(|o| o.starts_with("tool_start")),
        "{outline:?}"
    );
    let refused: Vec<_> = recs
        .iter()
        .filter_map(|r| match &r.body {
            RecordBody::ToolResult(t) => Some((r.v, t.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(refused.len(), 1);
    assert_eq!(refused[0].0, 3, "a refused result is a v3 record");
    assert_eq!(refused[0].1.outcome, Outcome::Refused);
    assert_eq!(
        refused[0].1.output,
        "cairn: the user declined this shell call; it was not run."
    );
    // The wait is a window: paused before the answer, resumed after it,
    // and the refusal comes after the window closed.
    let pause = position(&outline, "pause:turn:1");
    let resume = position(&outline, "resume:turn:1");
    let result = position(&outline, "tool_result:c1:Refused");
    assert!(pause < resume && resume < result, "{outline:?}");
    // Nothing changed while deciding: no reconcile record for the window.
    assert!(
        !outline[pause..result]
            .iter()
            .any(|o| o.starts_with("reconcile")),
        "{outline:?}"
    );
    // The model read the refusal as the call's result.
    let state = agent.session().state();
    assert!(state.conversation.iter().any(|e| matches!(
        e,
        cairn_journal::Entry::ToolResult { outcome: Outcome::Refused, name, .. } if name == "shell"
    )));
    assert_eq!(
        state.totals.tool_calls, 0,
        "a declined call was not dispatched"
    );
}

#[tokio::test]
async fn an_accepted_call_runs_once_the_window_is_closed() {
    let rig = Rig::new(make_file_script());
    let (agent, _stop) = rig.agent();
    let (person, asked) = Person::new(&[Decision::Run]);
    let mut agent = agent.with_approval(ApprovePolicy::Shell, Box::new(person));
    let mut seen = Seen::default();
    let end = agent.drive(Some("go".into()), &mut seen).await.unwrap();
    assert_eq!(end.reason, TerminalReason::Completed, "{:?}", end.detail);
    assert_eq!(std::fs::read_to_string(rig.path("f")).unwrap(), "x\n");
    assert_eq!(*asked.lock().unwrap(), ["c1"]);
    let outline = outline_of(&records(&agent));
    let order: Vec<usize> = [
        "pre:turn:1",
        "assistant",
        "pause:turn:1",
        "resume:turn:1",
        "tool_start:c1",
        "tool_result:c1:Ok",
        "post:turn:1",
    ]
    .iter()
    .map(|w| position(&outline, w))
    .collect();
    assert!(order.windows(2).all(|w| w[0] < w[1]), "{outline:?}");
    // What the approved call wrote is the run's: no reconcile lists it.
    assert!(
        !outline.iter().any(|o| o.starts_with("reconcile")),
        "{outline:?}"
    );
}

#[tokio::test]
async fn edits_made_while_the_person_decides_are_reconciled_as_theirs() {
    let rig = Rig::new(json!([
        {"text": "making f", "tool_calls": [shell("c1", "echo x > f")]},
        {"text": "done"}
    ]));
    std::fs::write(rig.path("seed.txt"), "before\n").unwrap();
    let (agent, _stop) = rig.agent();
    let (mut person, _asked) = Person::new(&[Decision::Run]);
    let ws = rig.ws.clone();
    person.during = Some(Box::new(move |_call| {
        std::fs::write(ws.join("seed.txt"), "edited by the person\n").unwrap();
        std::fs::write(ws.join("mine.txt"), "mine\n").unwrap();
    }));
    let mut agent = agent.with_approval(ApprovePolicy::Shell, Box::new(person));
    let mut seen = Seen::default();
    let end = agent.drive(Some("go".into()), &mut seen).await.unwrap();
    assert_eq!(end.reason, TerminalReason::Completed, "{:?}", end.detail);

    let recs = records(&agent);
    let outline = outline_of(&recs);
    let resume = position(&outline, "resume:turn:1");
    let reconcile = position(&outline, "reconcile:mine.txt,seed.txt");
    let start = position(&outline, "tool_start:c1");
    assert!(resume < reconcile && reconcile < start, "{outline:?}");
    // The reconcile names the resume capture that found the edits.
    let (RecordBody::Snapshot(snap), RecordBody::Reconcile(rec)) =
        (&recs[resume].body, &recs[reconcile].body)
    else {
        panic!("{outline:?}");
    };
    assert_eq!(rec.snapshot.as_deref(), Some(snap.snapshot.as_str()));
    assert!(seen
        .notices
        .iter()
        .any(|n| n.contains("waited for approval")));
    // The model is told before its next turn.
    let told = recs.iter().skip(reconcile).find_map(|r| match &r.body {
        RecordBody::User(u) => Some(u.text.clone()),
        _ => None,
    });
    let told = told.unwrap_or_else(|| panic!("the model was not told: {outline:?}"));
    assert!(
        told.contains("mine.txt") && told.contains("seed.txt") && told.contains("shell call"),
        "{told}"
    );
    // The run's own work (f) is not in the reconcile.
    assert!(!rec.changed.contains(&"f".to_string()));
}

#[tokio::test]
async fn writes_policy_asks_for_writes_and_shell_but_not_reads() {
    let rig = Rig::new(json!([
        {"text": "working", "tool_calls": [
            {"id": "r1", "name": "read_file", "arguments": {"path": "seed.txt"}},
            {"id": "w1", "name": "write_file", "arguments": {"path": "w.txt", "content": "w\n"}},
            {"id": "l1", "name": "list_dir", "arguments": {"path": "."}},
            shell("s1", "echo s > s.txt")
        ]},
        {"text": "done"}
    ]));
    std::fs::write(rig.path("seed.txt"), "seed\n").unwrap();
    let (agent, _stop) = rig.agent();
    let (person, asked) = Person::new(&[Decision::Run, Decision::Decline]);
    let mut agent = agent.with_approval(ApprovePolicy::Writes, Box::new(person));
    let mut seen = Seen::default();
    let end = agent.drive(Some("go".into()), &mut seen).await.unwrap();
    assert_eq!(end.reason, TerminalReason::Completed, "{:?}", end.detail);
    assert_eq!(*asked.lock().unwrap(), ["w1", "s1"]);
    assert!(rig.path("w.txt").exists());
    assert!(!rig.path("s.txt").exists());
    assert_eq!(
        seen.finished,
        [
            ("r1".to_string(), Outcome::Ok),
            ("w1".to_string(), Outcome::Ok),
            ("l1".to_string(), Outcome::Ok),
            ("s1".to_string(), Outcome::Refused),
        ]
    );
}

#[tokio::test]
async fn no_policy_asks_nobody() {
    let rig = Rig::new(make_file_script());
    let (agent, _stop) = rig.agent();
    let (person, asked) = Person::new(&[]);
    let mut agent = agent.with_approval(ApprovePolicy::Never, Box::new(person));
    let end = agent
        .drive(Some("go".into()), &mut Seen::default())
        .await
        .unwrap();
    assert_eq!(end.reason, TerminalReason::Completed, "{:?}", end.detail);
    assert!(asked.lock().unwrap().is_empty());
    assert!(rig.path("f").exists());
    let outline = outline_of(&records(&agent));
    assert!(!outline.iter().any(|o| o == "pause:turn:1"), "{outline:?}");
}

#[tokio::test]
async fn stopping_at_once_while_waiting_interrupts_and_a_resume_asks_again() {
    let rig = Rig::new(make_file_script());
    let (agent, stop) = rig.agent();
    let mut agent = agent.with_approval(ApprovePolicy::Shell, Box::new(Walks(stop)));
    let end = agent
        .drive(Some("go".into()), &mut Seen::default())
        .await
        .unwrap();
    assert_eq!(end.reason, TerminalReason::Interrupted);
    assert!(!rig.path("f").exists());
    let outline = outline_of(&records(&agent));
    assert!(
        !outline
            .iter()
            .any(|o| o.starts_with("tool_start") || o.starts_with("tool_result")),
        "nothing is journaled for an unanswered call: {outline:?}"
    );
    // The window was closed before the interruption's `fail:`.
    let resume = position(&outline, "resume:turn:1");
    let fail = position(&outline, "fail:turn:1");
    assert!(position(&outline, "pause:turn:1") < resume && resume < fail);
    let id = agent.session().id().clone();
    drop(agent);

    let (again, _stop) = rig.reopen(&id);
    let (person, asked) = Person::new(&[Decision::Run]);
    let mut again = again.with_approval(ApprovePolicy::Shell, Box::new(person));
    let end = again.drive(None, &mut Seen::default()).await.unwrap();
    assert_eq!(end.reason, TerminalReason::Completed, "{:?}", end.detail);
    assert_eq!(*asked.lock().unwrap(), ["c1"]);
    assert!(rig.path("f").exists());
    let later = outline_of(&records(&again));
    assert_eq!(
        later.iter().filter(|o| o.starts_with("tool_start")).count(),
        1,
        "{later:?}"
    );
}
