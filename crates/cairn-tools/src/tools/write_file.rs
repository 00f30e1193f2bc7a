//! `write_file {path, content}`: create or replace one file, atomically.

use serde::Deserialize;
use serde_json::json;

use super::{object_schema, parse_args, run_blocking};
use crate::error::ToolError;
use crate::fsio::Target;
use crate::tool::{Tool, ToolInfo, ToolOutput};
use crate::workspace::Workspace;

const NAME: &str = "write_file";
const EXPECTED: &str = r#"{"path": string, "content": string}"#;

/// Creates or replaces a file with the given text, creating missing parent directories
/// inside the workspace. The write goes through a temporary file and a rename, so the
/// file is either the old one or the new one, never a part. Not idempotent.
#[derive(Debug, Clone, Default)]
pub struct WriteFile;

#[derive(Deserialize)]
struct Args {
    path: String,
    content: String,
}

#[async_trait::async_trait]
impl Tool for WriteFile {
    fn info(&self) -> ToolInfo {
        ToolInfo {
            name: NAME.into(),
            description: "Create or replace a file of the workspace with `content`. \
                `path` is relative to the workspace root; missing parent directories are \
                created. The whole file is replaced."
                .into(),
            parameters: object_schema(
                json!({
                    "path": {"type": "string", "description": "File path relative to the workspace root"},
                    "content": {"type": "string", "description": "The complete new text of the file"},
                }),
                &["path", "content"],
            ),
            idempotent: false,
            read_only: false,
            mcp: None,
        }
    }

    async fn call(&self, ws: &Workspace, arguments: &serde_json::Value) -> ToolOutput {
        let args: Args = match parse_args(NAME, EXPECTED, arguments) {
            Ok(args) => args,
            Err(e) => return e.into(),
        };
        run_blocking(NAME, ws, move |ws| write(ws, &args.path, &args.content)).await
    }
}

fn write(ws: &Workspace, rel: &str, content: &str) -> Result<String, ToolError> {
    Target::reach(ws, rel, true)?.replace(ws, content.as_bytes())?;
    Ok(format!("wrote {} bytes to `{rel}`", content.len()))
}
