//! Boundaries, windows and the iteration helper (DESIGN §5.3, §10's exec note).

mod common;

use cairn_workspace::*;
use common::*;

#[test]
fn exec_invocations_number_iterations_and_close_windows_with_resume() {
    let f = Fixture::new();
    f.write("a.txt", "a0");
    let exec = node("exec");
    let one = f.ws.enter_node(&exec, &NoProgress).unwrap();
    assert_eq!(one.at.iter, 1);
    assert!(
        one.resume.is_none() && one.first.is_some(),
        "the first capture is the pre: itself"
    );
    f.write("a.txt", "a1 by the run");
    f.ws.leave_node(&one.at, NodeEnd::Completed, &NoProgress)
        .unwrap();

    // Between invocations nothing of the run executes: an operator edit.
    f.write("op.txt", "by the operator");
    let two = f.ws.enter_node(&exec, &NoProgress).unwrap();
    assert_eq!(two.at.iter, 2);
    let resume = two.resume.as_ref().unwrap();
    assert_eq!(resume.label, label("resume:exec:2"));
    assert!(!resume.deduped);
    assert_eq!(two.pre, resume.snapshot);
    f.write("b.txt", "by the run");
    f.ws.leave_node(&two.at, NodeEnd::Failed, &NoProgress)
        .unwrap();

    // Nothing moved before the third: its resume dedupes, no window.
    let three = f.ws.enter_node(&exec, &NoProgress).unwrap();
    assert!(three.resume.as_ref().unwrap().deduped);
    f.write("c.txt", "by the run");
    f.ws.leave_node(&three.at, NodeEnd::Completed, &NoProgress)
        .unwrap();
    assert_eq!(f.ws.next_iteration(&exec).unwrap(), 4);
    assert_eq!(f.ws.next_iteration(&node("other")).unwrap(), 1);

    let iv: Vec<(String, bool)> =
        f.ws.intervals()
            .unwrap()
            .into_iter()
            .map(|i| (i.label.to_string(), i.by_run))
            .collect();
    assert_eq!(
        iv,
        vec![
            ("pre:exec:1".into(), true),
            ("post:exec:1".into(), true),
            ("resume:exec:2".into(), false),
            ("fail:exec:2".into(), true),
            ("post:exec:3".into(), true),
        ]
    );
    assert_eq!(f.ws.windows().unwrap().len(), 1);

    // The listing: newest first, every label each snapshot carries.
    let rows = f.ws.list_snapshots().unwrap();
    let shown: Vec<Vec<String>> = rows
        .iter()
        .map(|r| r.labels.iter().map(|l| l.to_string()).collect())
        .collect();
    assert_eq!(
        shown,
        vec![
            vec!["post:exec:3"],
            vec!["fail:exec:2", "pre:exec:3", "resume:exec:3"],
            vec!["resume:exec:2", "pre:exec:2"],
            vec!["post:exec:1"],
            vec!["pre:exec:1"],
        ]
    );
    assert_eq!(rows[4].parent, None);
    assert_eq!(rows[3].parent, Some(rows[4].id.clone()));
    let json = serde_json::to_value(&rows[0]).unwrap();
    for k in [
        "id", "parent", "label", "labels", "created", "files", "bytes",
    ] {
        assert!(json.get(k).is_some(), "{k} missing from {json}");
    }
}

/// Two pauses at the same node and iteration (one per permission prompt):
/// the label map re-points `pause:turn:1`, but each snapshot keeps its own
/// label, so both windows survive and neither merges into the run's work.
#[test]
fn two_pauses_at_the_same_node_and_iteration_keep_two_windows() {
    let f = Fixture::new();
    f.write("base.txt", "base");
    let at = NodeIter::new(node("turn"), 1);
    let pre = f.capture("pre:turn:1");
    f.write("run_a.txt", "run before the first pause");
    let s1 = f.ws.leave_node(&at, NodeEnd::Paused, &NoProgress).unwrap();
    f.write("op_x.txt", "operator, first pause");
    let s2 = f.capture("resume:turn:1");
    f.write("run_b.txt", "run between pauses");
    let s3 = f.ws.leave_node(&at, NodeEnd::Paused, &NoProgress).unwrap();
    f.write("op_y.txt", "operator, second pause");
    let s4 = f.capture("resume:turn:1");
    f.write("run_c.txt", "run after the second pause");
    f.ws.leave_node(&at, NodeEnd::Completed, &NoProgress)
        .unwrap();

    // The map points at the newer pause and resume...
    assert_eq!(
        f.ws.resolve(&label("pause:turn:1")).unwrap(),
        Some(s3.snapshot.clone())
    );
    assert_eq!(
        f.ws.resolve(&label("resume:turn:1")).unwrap(),
        Some(s4.snapshot.clone())
    );
    // ...yet the first pause still carries its own label.
    let rows = f.ws.list_snapshots().unwrap();
    let first_pause = rows.iter().find(|r| r.id == s1.snapshot).unwrap();
    assert_eq!(first_pause.label, label("pause:turn:1"));
    assert_eq!(first_pause.labels, vec![label("pause:turn:1")]);

    let windows: Vec<(Option<SnapshotId>, SnapshotId)> =
        f.ws.windows()
            .unwrap()
            .into_iter()
            .map(|w| (w.from, w.to))
            .collect();
    assert_eq!(
        windows,
        vec![
            (Some(s1.snapshot.clone()), s2.snapshot.clone()),
            (Some(s3.snapshot.clone()), s4.snapshot.clone()),
        ]
    );

    // A scoped rewind undoes the run's three stretches and neither window.
    let r =
        f.ws.rewind_to(
            &NodeRef::parse("turn:1").unwrap(),
            RestoreScope::Run,
            &NoProgress,
        )
        .unwrap();
    assert_eq!(r.target, pre.snapshot);
    assert_eq!(r.deleted, vec!["run_a.txt", "run_b.txt", "run_c.txt"]);
    assert!(f.read("op_x.txt").is_some() && f.read("op_y.txt").is_some());
    assert_eq!(f.read("base.txt").as_deref(), Some("base"));
}

/// The agent loop: `pre:turn:N` costs nothing after the first turn.
#[test]
fn pre_is_a_label_on_the_previous_capture_inside_a_running_loop() {
    let f = Fixture::new();
    f.write("a.txt", "a0");
    let t1 = NodeIter::new(node("turn"), 1);
    let first = f.ws.mark_pre(&t1, &NoProgress).unwrap();
    assert!(
        first.first.is_some(),
        "the run's first boundary is a capture"
    );
    f.write("a.txt", "a1");
    let post1 =
        f.ws.leave_node(&t1, NodeEnd::Completed, &NoProgress)
            .unwrap();
    let before = f.manifests();
    let t2 = NodeIter::new(node("turn"), 2);
    let second = f.ws.mark_pre(&t2, &NoProgress).unwrap();
    assert!(second.first.is_none() && second.resume.is_none());
    assert_eq!(second.pre, post1.snapshot);
    assert_eq!(f.manifests(), before, "pre: wrote a manifest");
    assert_eq!(
        f.ws.resolve(&label("pre:turn:2")).unwrap(),
        Some(post1.snapshot)
    );
    assert_eq!(f.ws.next_iteration(&node("turn")).unwrap(), 3);
}
