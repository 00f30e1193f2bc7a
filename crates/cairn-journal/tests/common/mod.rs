#![allow(dead_code)]
use cairn_journal::*;
use cairn_store::{RunId, Store};

pub fn meta(workspace: &str) -> Meta {
    Meta {
        run: String::new(),
        created: now_rfc3339(),
        workspace: workspace.into(),
        name: Some("test".into()),
        fingerprint: None,
        fork: None,
        routing: None,
        system_file: None,
    }
}

pub fn user(t: &str) -> RecordBody {
    RecordBody::User(User {
        text: t.into(),
        origin: None,
    })
}

pub fn assistant(text: &str, calls: &[(&str, &str)], cost: Cost) -> RecordBody {
    RecordBody::Assistant(Assistant {
        text: text.into(),
        tool_calls: calls
            .iter()
            .map(|(id, name)| ToolCall {
                id: (*id).into(),
                name: (*name).into(),
                arguments: serde_json::json!({"path": "a.txt"}),
                raw_arguments: None,
            })
            .collect(),
        usage: Usage {
            input_tokens: 10,
            output_tokens: 5,
        },
        cost,
        replay: false,
        model: None,
        ..Assistant::default()
    })
}

/// A realistic journal of a few turns; returns store, id and path.
pub fn sample(dir: &std::path::Path) -> (Store, RunId, std::path::PathBuf) {
    let store = Store::open(dir).unwrap();
    let id = RunId::new();
    let mut w = JournalWriter::create(&store, &id, meta("/work/ws")).unwrap();
    w.append(&user("fix the bug in a.txt, \"quoted\" and ünïcode"))
        .unwrap();
    w.append(&assistant("reading", &[("c1", "read_file")], Cost::ZERO))
        .unwrap();
    w.append(&RecordBody::ToolStart(ToolStart {
        call: "c1".into(),
        name: "read_file".into(),
        mcp: None,
    }))
    .unwrap();
    w.append(&RecordBody::ToolResult(ToolResult {
        call: "c1".into(),
        outcome: Outcome::Ok,
        output: "line1\nline2".into(),
    }))
    .unwrap();
    w.append(&assistant("done", &[], Cost::ZERO)).unwrap();
    // Two turns of 10 in / 5 out, free, and one tool call: what the fold says.
    w.append(&RecordBody::Terminal(Terminal {
        reason: TerminalReason::Completed,
        totals: Totals {
            turns: 2,
            input_tokens: 20,
            output_tokens: 10,
            cost: Cost::ZERO,
            tool_calls: 1,
            tool_calls_unstated: false,
        },
        detail: None,
    }))
    .unwrap();
    let path = store.journal_path(&id);
    (store, id, path)
}
