//! `list_dir {path}`: the entries of one directory.

use std::path::Path;

use cairn_store::nofollow::{self, FileKind};
use serde::Deserialize;
use serde_json::json;

use super::{object_schema, parse_args, push_line_capped, run_blocking};
use crate::error::{PathError, ToolError};
use crate::fsio::io_error;
use crate::tool::{Tool, ToolConfig, ToolInfo, ToolOutput};
use crate::workspace::Workspace;

const NAME: &str = "list_dir";
const EXPECTED: &str = r#"{"path": string}"#;

/// Lists a directory's entries, sorted by name: directories end in `/`, symlinks in `@`
/// (they are shown, never followed). `""` or `.` lists the workspace root. Output is
/// capped at [`ToolConfig::max_output_bytes`]. Idempotent.
#[derive(Debug, Clone)]
pub struct ListDir {
    max_output_bytes: usize,
}

#[derive(Deserialize)]
struct Args {
    #[serde(default)]
    path: String,
}

impl ListDir {
    /// A list_dir tool with the limits of `config`.
    pub fn new(config: &ToolConfig) -> Self {
        Self {
            max_output_bytes: config.max_output_bytes,
        }
    }
}

#[async_trait::async_trait]
impl Tool for ListDir {
    fn info(&self) -> ToolInfo {
        ToolInfo {
            name: NAME.into(),
            description: "List a directory of the workspace, sorted by name. Directories \
                end in `/`, symbolic links in `@`. `path` is relative to the workspace \
                root; \"\" or \".\" lists the root."
                .into(),
            parameters: object_schema(
                json!({"path": {"type": "string", "description": "Directory path relative to the workspace root; \"\" or \".\" for the root"}}),
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
        let cap = self.max_output_bytes;
        run_blocking(NAME, ws, move |ws| list(ws, &args.path, cap)).await
    }
}

fn list(ws: &Workspace, rel: &str, cap: usize) -> Result<String, ToolError> {
    let path = ws.rel_or_root(rel)?;
    let shown = path.as_ref().map_or(".", |p| p.as_str());
    let dir = ws
        .open_dir(rel, path.as_ref().map_or("", |p| p.as_str()), false)
        .map_err(|e| match e {
            PathError::NotADirectory { component, .. } if component == Path::new(shown) => {
                ToolError::NotADirectory { path: rel.into() }
            }
            other => other.into(),
        })?;
    let entries = nofollow::read_dir_at(&dir).map_err(|e| io_error("list", rel, e))?;
    let mut names: Vec<String> = entries
        .into_iter()
        .map(|entry| {
            let mut name = entry.name.to_string_lossy().into_owned();
            match entry.kind {
                FileKind::Symlink => name.push('@'),
                FileKind::Dir => name.push('/'),
                _ => {}
            }
            name
        })
        .collect();
    if names.is_empty() {
        return Ok(format!("`{shown}` is an empty directory"));
    }
    names.sort();
    let mut out = String::new();
    for (i, name) in names.iter().enumerate() {
        if !push_line_capped(&mut out, name, cap) {
            out.push_str(&format!(
                "[… {} more entries omitted: the output limit of {cap} bytes was reached; \
                 list a subdirectory or use search …]",
                names.len() - i
            ));
            break;
        }
    }
    Ok(out)
}
