//! `edit_file {path, old, new}`: replace one exact occurrence of a text, atomically.

use std::io::Read;

use serde::Deserialize;
use serde_json::json;

use super::{object_schema, parse_args, run_blocking};
use crate::error::ToolError;
use crate::fsio::{io_error, Target};
use crate::tool::{Tool, ToolInfo, ToolOutput};
use crate::workspace::Workspace;

const NAME: &str = "edit_file";
const EXPECTED: &str = r#"{"path": string, "old": string, "new": string}"#;

/// Replaces the one occurrence of `old` in a UTF-8 file with `new`. `old` must occur
/// exactly once (overlapping occurrences count); the file is rewritten atomically and
/// keeps its permissions. Not idempotent.
#[derive(Debug, Clone, Default)]
pub struct EditFile;

#[derive(Deserialize)]
struct Args {
    path: String,
    old: String,
    new: String,
}

#[async_trait::async_trait]
impl Tool for EditFile {
    fn info(&self) -> ToolInfo {
        ToolInfo {
            name: NAME.into(),
            description: "Replace text in an existing file of the workspace: `old` must \
                occur exactly once in the file and is replaced by `new`. Copy `old` \
                exactly, whitespace included, with enough context to be unique."
                .into(),
            parameters: object_schema(
                json!({
                    "path": {"type": "string", "description": "File path relative to the workspace root"},
                    "old": {"type": "string", "description": "Exact text to replace; must occur exactly once"},
                    "new": {"type": "string", "description": "Replacement text"},
                }),
                &["path", "old", "new"],
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
        if args.old.is_empty() {
            return ToolError::BadArguments {
                tool: NAME,
                reason: "`old` is empty; to create or replace a whole file use write_file".into(),
                expected: EXPECTED,
            }
            .into();
        }
        run_blocking(NAME, ws, move |ws| edit(ws, &args)).await
    }
}

fn edit(ws: &Workspace, args: &Args) -> Result<String, ToolError> {
    let rel = args.path.as_str();
    let target = Target::reach(ws, rel, false)?;
    let (mut file, _) = target.open(ws)?;
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes)
        .map_err(|e| io_error("read", rel, e))?;
    drop(file);
    let text = String::from_utf8(bytes).map_err(|_| ToolError::NotText { path: rel.into() })?;
    let at = match occurrences(&text, &args.old).as_slice() {
        [] => return Err(ToolError::OldTextNotFound { path: rel.into() }),
        [at] => *at,
        many => {
            return Err(ToolError::OldTextAmbiguous {
                path: rel.into(),
                count: many.len(),
            })
        }
    };
    let mut edited = String::with_capacity(text.len() - args.old.len() + args.new.len());
    edited.push_str(&text[..at]);
    edited.push_str(&args.new);
    edited.push_str(&text[at + args.old.len()..]);
    // Written into the directory it was read from, not resolved a second time.
    target.replace(ws, edited.as_bytes())?;
    let line = text[..at].matches('\n').count() + 1;
    Ok(format!(
        "edited `{rel}` at line {line}: replaced {} bytes with {} bytes ({} -> {} bytes)",
        args.old.len(),
        args.new.len(),
        text.len(),
        edited.len()
    ))
}

/// Start offsets of every occurrence of `needle`, overlapping ones included.
fn occurrences(haystack: &str, needle: &str) -> Vec<usize> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(i) = haystack[from..].find(needle) {
        let at = from + i;
        found.push(at);
        // Step one character past the start, so overlaps are seen.
        from = at + haystack[at..].chars().next().map_or(1, char::len_utf8);
        if from > haystack.len() {
            break;
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::occurrences;

    #[test]
    fn occurrences_include_overlaps() {
        assert_eq!(occurrences("aaa", "aa"), [0, 1]);
        assert_eq!(occurrences("abcabc", "abc"), [0, 3]);
        assert_eq!(occurrences("héhé", "hé"), [0, 3]);
        assert!(occurrences("abc", "x").is_empty());
    }
}
