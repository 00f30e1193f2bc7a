//! `read_file {path}`: the text of one file, capped.

use serde::Deserialize;
use serde_json::json;

use super::{object_schema, parse_args, run_blocking};
use crate::error::ToolError;
use crate::fsio::{char_boundary, read_prefix, Target};
use crate::tool::{Tool, ToolConfig, ToolInfo, ToolOutput};
use crate::workspace::Workspace;

const NAME: &str = "read_file";
const EXPECTED: &str = r#"{"path": string}"#;

/// Reads a file as UTF-8 text (invalid bytes replaced), returning at most
/// [`ToolConfig::max_read_bytes`] and saying how much was left out. Idempotent.
#[derive(Debug, Clone)]
pub struct ReadFile {
    max_read_bytes: usize,
}

#[derive(Deserialize)]
struct Args {
    path: String,
}

impl ReadFile {
    /// A read_file tool with the limits of `config`.
    pub fn new(config: &ToolConfig) -> Self {
        Self {
            max_read_bytes: config.max_read_bytes,
        }
    }
}

#[async_trait::async_trait]
impl Tool for ReadFile {
    fn info(&self) -> ToolInfo {
        ToolInfo {
            name: NAME.into(),
            description: "Read a text file of the workspace. `path` is relative to the \
                workspace root. Long files are cut, with a note saying how much was left out."
                .into(),
            parameters: object_schema(
                json!({"path": {"type": "string", "description": "File path relative to the workspace root"}}),
                &["path"],
            ),
            idempotent: true,
            read_only: true,
            mcp: None,
        }
    }

    async fn call(&self, ws: &Workspace, arguments: &serde_json::Value) -> ToolOutput {
        let args: Args = match parse_args(NAME, EXPECTED, arguments) {
            Ok(args) => args,
            Err(e) => return e.into(),
        };
        let limit = self.max_read_bytes;
        run_blocking(NAME, ws, move |ws| read(ws, &args.path, limit)).await
    }
}

fn read(ws: &Workspace, rel: &str, limit: usize) -> Result<String, ToolError> {
    let (file, size) = Target::reach(ws, rel, false)?.open(ws)?;
    let (mut bytes, more) = read_prefix(rel, file, limit)?;
    if !more {
        return Ok(String::from_utf8_lossy(&bytes).into_owned());
    }
    bytes.truncate(char_boundary(&bytes));
    let shown = bytes.len();
    let mut text = String::from_utf8_lossy(&bytes).into_owned();
    if !text.ends_with('\n') {
        text.push('\n');
    }
    let omitted = size.saturating_sub(shown as u64);
    text.push_str(&format!(
        "[… {omitted} bytes omitted: `{rel}` is {size} bytes and read_file shows the first \
         {shown}; use search or shell (e.g. `sed -n` or `tail`) to see the rest …]"
    ));
    Ok(text)
}
