//! The toolbox: the built-in set, idempotency flags, schemas, unknown tools, panics.

use cairn_tools::{Outcome, Tool, ToolConfig, ToolInfo, ToolOutput, Toolbox, Workspace};
use serde_json::{json, Value};

#[test]
fn builtins_declare_idempotency() {
    let tools = Toolbox::builtin(ToolConfig::default());
    let infos = tools.infos();
    let flags: Vec<(&str, bool)> = infos
        .iter()
        .map(|i| {
            // A built-in tool is read-only exactly when it is idempotent.
            assert_eq!(i.read_only, i.idempotent, "{}", i.name);
            assert!(i.mcp.is_none());
            (i.name.as_ref(), i.idempotent)
        })
        .collect();
    assert_eq!(
        flags,
        [
            ("read_file", true),
            ("write_file", false),
            ("edit_file", false),
            ("list_dir", true),
            ("search", true),
            ("shell", false),
        ]
    );
    for (name, idempotent) in flags {
        assert_eq!(tools.is_idempotent(name), idempotent, "{name}");
    }
    assert!(!tools.is_idempotent("no_such_tool"));
}

#[test]
fn builtin_schemas_name_the_arguments_of_the_contract() {
    let tools = Toolbox::builtin(ToolConfig::default());
    for (name, args) in [
        ("read_file", vec!["path"]),
        ("write_file", vec!["path", "content"]),
        ("edit_file", vec!["path", "old", "new"]),
        ("list_dir", vec!["path"]),
        ("search", vec!["pattern", "path"]),
        ("shell", vec!["command", "timeout_s"]),
    ] {
        let info = tools.get(name).expect("tool").info();
        assert_eq!(info.parameters["type"], "object");
        let mut props: Vec<&str> = info.parameters["properties"]
            .as_object()
            .expect("properties")
            .keys()
            .map(String::as_str)
            .collect();
        props.sort_unstable();
        let mut want = args.clone();
        want.sort_unstable();
        assert_eq!(props, want, "{name}");
        assert!(!info.description.is_empty());
    }
}

#[tokio::test]
async fn unknown_tool_lists_the_available_ones() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = Workspace::new(dir.path()).expect("workspace");
    let tools = Toolbox::builtin(ToolConfig::default());
    let out = tools.call(&ws, "delete_everything", &json!({})).await;
    assert_eq!(out.outcome, Outcome::Error);
    let out = out.output;
    assert_eq!(
        out,
        "unknown tool `delete_everything`; available: read_file, write_file, edit_file, list_dir, search, shell"
    );
}

struct Panics;

#[async_trait::async_trait]
impl Tool for Panics {
    fn info(&self) -> ToolInfo {
        ToolInfo {
            name: "read_file".into(),
            description: "a stand-in that panics".into(),
            parameters: json!({"type": "object"}),
            idempotent: false,
            read_only: false,
            mcp: None,
        }
    }

    async fn call(&self, _ws: &Workspace, _arguments: &Value) -> ToolOutput {
        panic!("boom")
    }
}

#[tokio::test]
async fn with_tool_replaces_by_name_and_a_panic_becomes_an_error() {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = Workspace::new(dir.path()).expect("workspace");
    let tools = Toolbox::builtin(ToolConfig::default()).with_tool(Panics);
    assert_eq!(tools.names()[0], "read_file");
    assert_eq!(tools.names().len(), 6);
    assert!(!tools.is_idempotent("read_file"));
    let out = tools.call(&ws, "read_file", &json!({})).await;
    assert_eq!(out.outcome, Outcome::Error);
    assert!(
        out.output
            .contains("tool `read_file` failed unexpectedly: it panicked"),
        "{}",
        out.output
    );
}

#[test]
fn tool_output_serializes_outcome_in_lowercase() {
    let text = serde_json::to_string(&ToolOutput::error("no")).expect("json");
    assert_eq!(text, r#"{"outcome":"error","output":"no"}"#);
    let back: ToolOutput =
        serde_json::from_str(r#"{"outcome":"ok","output":"yes"}"#).expect("json");
    assert_eq!(back, ToolOutput::ok("yes"));
}
