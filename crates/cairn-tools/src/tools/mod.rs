//! The built-in tools, one per file, and what they share.

mod edit_file;
mod list_dir;
mod read_file;
mod search;
mod shell;
mod write_file;

pub use edit_file::EditFile;
pub use list_dir::ListDir;
pub use read_file::ReadFile;
pub use search::Search;
pub use shell::Shell;
pub use write_file::WriteFile;

use serde::de::DeserializeOwned;
use serde_json::{json, Value};

use crate::error::ToolError;
use crate::tool::ToolOutput;
use crate::workspace::Workspace;

/// Decodes a tool's arguments object, turning any mismatch into a message that shows
/// the expected shape.
pub(crate) fn parse_args<T: DeserializeOwned>(
    tool: &'static str,
    expected: &'static str,
    arguments: &Value,
) -> Result<T, ToolError> {
    let bad = |reason: String| ToolError::BadArguments {
        tool,
        reason,
        expected,
    };
    if !arguments.is_object() {
        return Err(bad(format!(
            "arguments must be a JSON object, got {}",
            json_kind(arguments)
        )));
    }
    serde_json::from_value(arguments.clone()).map_err(|e| bad(e.to_string()))
}

fn json_kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// Runs a filesystem tool's blocking body off the async threads. A panic in the body
/// becomes an [`Outcome::Error`](crate::Outcome::Error), never a panic in the caller.
pub(crate) async fn run_blocking<F>(tool: &'static str, ws: &Workspace, body: F) -> ToolOutput
where
    F: FnOnce(&Workspace) -> Result<String, ToolError> + Send + 'static,
{
    let ws = ws.clone();
    match tokio::task::spawn_blocking(move || body(&ws)).await {
        Ok(result) => result.into(),
        Err(join) => ToolError::Crashed {
            tool: tool.into(),
            reason: if join.is_panic() {
                "it panicked".into()
            } else {
                "it was cancelled".into()
            },
        }
        .into(),
    }
}

/// A JSON schema for an object whose properties are all strings except those given.
pub(crate) fn object_schema(properties: Value, required: &[&str]) -> Value {
    json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    })
}

/// Appends a line to `out`, or returns false (appending nothing) when that would take
/// `out` past `cap` bytes.
pub(crate) fn push_line_capped(out: &mut String, line: &str, cap: usize) -> bool {
    if out.len() + line.len() + 1 > cap {
        return false;
    }
    out.push_str(line);
    out.push('\n');
    true
}
