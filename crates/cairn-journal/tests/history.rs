//! What an `assistant` record keeps so that a resume sends the model's turn
//! back exactly as the provider produced it: a tool call's arguments as the
//! model wrote them (`raw_arguments`), and the version each is written with.

mod common;

use cairn_journal::*;
use serde_json::{json, Value};

fn assistant(calls: Vec<ToolCall>) -> RecordBody {
    RecordBody::Assistant(Assistant {
        text: "writing".into(),
        tool_calls: calls,
        cost: Cost::ZERO,
        ..Assistant::default()
    })
}

fn call(id: &str, arguments: Value, raw: Option<&str>) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: "write_file".into(),
        arguments,
        raw_arguments: raw.map(str::to_owned),
    }
}

/// Appends `bodies` to a new journal and reads it back: each line as JSON,
/// and the folded state.
fn written(bodies: &[RecordBody]) -> (Vec<Value>, RunState) {
    let d = tempfile::tempdir().unwrap();
    let store = cairn_store::Store::open(d.path()).unwrap();
    let id = cairn_store::RunId::new();
    let mut w = JournalWriter::create(&store, &id, common::meta("/w")).unwrap();
    for body in bodies {
        w.append(body).unwrap();
    }
    drop(w);
    let path = store.journal_path(&id);
    let lines = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let scan = read_journal(&path, id.as_str()).unwrap();
    (lines, fold(&scan.records).unwrap())
}

#[test]
fn a_calls_own_text_is_kept_beside_its_arguments_and_needs_no_new_version() {
    let raw = r#"{"path": "a.txt",  "content": "one"}"#;
    let calls = vec![
        call("c1", json!({"path": "a.txt", "content": "one"}), Some(raw)),
        call("c2", json!({"a": 1}), None),
    ];
    let (lines, state) = written(&[common::user("go"), assistant(calls.clone())]);
    let line = &lines[2];
    // An older cairn reads the record (it ignores the field and sends the
    // arguments compactly, which is still the call the model made).
    assert_eq!(line["v"], 1);
    assert_eq!(line["tool_calls"][0]["raw_arguments"], raw);
    assert_eq!(line["tool_calls"][0]["arguments"]["content"], "one");
    assert!(line["tool_calls"][1].get("raw_arguments").is_none());
    match state.conversation.last() {
        Some(Entry::Assistant { tool_calls, .. }) => assert_eq!(*tool_calls, calls),
        other => panic!("{other:?}"),
    }
    assert_eq!(state.pending[0].call, calls[0]);
}

#[test]
fn a_record_written_before_raw_arguments_reads_without_them() {
    let prev = "0".repeat(64);
    let line = format!(
        r#"{{"v":1,"seq":2,"prev":"{prev}","ts":"t","kind":"assistant","text":"","tool_calls":[{{"id":"c","name":"x","arguments":{{"b":1,"a":2}}}}],"cost":{{"state":"zero","usd":0}}}}"#
    );
    let record = Record::from_line(line.as_bytes()).unwrap();
    let RecordBody::Assistant(a) = record.body else {
        panic!("an assistant record");
    };
    assert_eq!(a.tool_calls[0].raw_arguments, None);
    assert_eq!(a.tool_calls[0].arguments, json!({"a": 2, "b": 1}));
}

#[test]
fn a_turn_with_responses_items_is_version_6_and_folds_with_them() {
    let items = vec![
        json!({"id": "rs_1", "type": "reasoning", "summary": [], "encrypted_content": "gAAAAB=="}),
        json!({"id": "fc_1", "type": "function_call", "call_id": "c1", "name": "read_file", "arguments": "{\"path\":\"a\"}"}),
    ];
    let with_items = RecordBody::Assistant(Assistant {
        tool_calls: vec![call("c1", json!({"path": "a"}), None)],
        cost: Cost::ZERO,
        items: items.clone(),
        ..Assistant::default()
    });
    assert_eq!(SCHEMA_VERSION, 6);
    assert_eq!(with_items.version(), 6, "a v5 reader would drop the items");
    let (lines, state) = written(&[common::user("go"), with_items]);
    assert_eq!(lines[2]["v"], 6);
    assert_eq!(lines[2]["items"], json!(items));
    match state.conversation.last() {
        Some(Entry::Assistant { items: got, .. }) => assert_eq!(*got, items),
        other => panic!("{other:?}"),
    }
    // Without items an assistant keeps its old version.
    assert_eq!(assistant(vec![]).version(), 1);
}
