//! The label format: one spelling per label, and what each kind means.

use cairn_workspace::*;

#[test]
fn labels_round_trip() {
    let rows = [
        ("pre:exec:1", LabelKind::Pre),
        ("post:exec:12", LabelKind::Post),
        ("fail:turn:3", LabelKind::Fail),
        ("pause:review-bot:2", LabelKind::Pause),
        ("resume:a.b_c-d:4294967295", LabelKind::Resume),
        ("gate:0", LabelKind::Gate),
        ("gate:7", LabelKind::Gate),
        ("bank:1", LabelKind::Bank),
        ("snap:3", LabelKind::Snap),
        ("before-refactor", LabelKind::Named),
        ("v1.2", LabelKind::Named),
    ];
    for (text, kind) in rows {
        let l = Label::parse(text).unwrap_or_else(|e| panic!("{text}: {e}"));
        assert_eq!(l.kind(), kind, "{text}");
        assert_eq!(l.to_string(), text);
        let json = serde_json::to_string(&l).unwrap();
        assert_eq!(json, format!("\"{text}\""));
        assert_eq!(serde_json::from_str::<Label>(&json).unwrap(), l);
    }
}

#[test]
fn malformed_labels_are_refused() {
    let rows = [
        "",
        "pre",
        "pre:",
        "pre:exec",
        "pre:exec:0",
        "pre:exec:01",
        "pre:exec:-1",
        "pre:exec:+1",
        "pre:exec:1x",
        "pre::1",
        "pre:a b:1",
        "pre:a/b:1",
        "pre:..:1",
        "post:exec:99999999999",
        "gate:",
        "gate:01",
        "bank:0",
        "snap:0",
        "later:x:1",
        "a b",
        "a/b",
        "..",
        "snap",
        "bank",
        &"x".repeat(65),
    ];
    for text in rows {
        let e = Label::parse(text);
        assert!(e.is_err(), "{text:?} parsed as {:?}", e.unwrap());
        let msg = e.unwrap_err().to_string();
        assert!(msg.contains("Labels look like"), "{msg}");
    }
}

#[test]
fn what_each_label_says_about_its_interval() {
    // (label, the interval it closes was the run's work, it opens a window)
    let rows = [
        ("pre:n:1", true, false),
        ("post:n:1", true, false),
        ("fail:n:1", true, true),
        ("pause:n:1", true, true),
        ("resume:n:1", false, false),
        ("gate:1", true, false),
        ("bank:1", false, false),
        ("snap:1", false, false),
        ("mine", false, false),
    ];
    for (text, by_run, opens) in rows {
        let l = Label::parse(text).unwrap();
        assert_eq!(l.by_run(), by_run, "{text}");
        assert_eq!(l.opens_window(), opens, "{text}");
    }
}

#[test]
fn node_refs() {
    let r = NodeRef::parse("turn:3").unwrap();
    assert_eq!((r.node.as_str(), r.iter), ("turn", Some(3)));
    let r = NodeRef::parse("exec").unwrap();
    assert_eq!((r.node.as_str(), r.iter), ("exec", None));
    assert_eq!(r.to_string(), "exec");
    for bad in ["", "exec:", "exec:0", "exec:x", "a:b:c", "a b"] {
        assert!(NodeRef::parse(bad).is_err(), "{bad}");
    }
    let l = Label::parse("pre:turn:3").unwrap();
    assert_eq!(l.node_iter().unwrap().to_string(), "turn:3");
}
