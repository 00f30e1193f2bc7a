//! `search {pattern, path}`: a literal text search over the files under a path.

use std::fs;
use std::io::{BufRead, BufReader};
use std::path::Path;

use serde::Deserialize;
use serde_json::json;

use super::{object_schema, parse_args, push_line_capped, run_blocking};
use crate::error::ToolError;
use crate::fsio::{char_boundary, io_error, open_read};
use crate::tool::{Tool, ToolConfig, ToolInfo, ToolOutput};
use crate::workspace::Workspace;

const NAME: &str = "search";
const EXPECTED: &str = r#"{"pattern": string, "path": string}"#;

/// Directory names never descended into.
const SKIPPED_DIRS: [&str; 3] = [".git", "target", "node_modules"];
/// A file with a NUL byte in its first block is taken as binary and skipped.
const BINARY_PROBE: usize = 8 * 1024;
/// Matched lines longer than this many bytes are cut.
const MAX_LINE: usize = 400;

/// Searches the files under a path for lines containing `pattern` as literal,
/// case-sensitive text, and prints them as `path:line: text`, sorted by path. Skips
/// `.git`, `target` and `node_modules` directories, symlinks and binary files. Output
/// is capped at [`ToolConfig::max_output_bytes`]. Idempotent.
#[derive(Debug, Clone)]
pub struct Search {
    max_output_bytes: usize,
}

#[derive(Deserialize)]
struct Args {
    pattern: String,
    #[serde(default)]
    path: String,
}

impl Search {
    /// A search tool with the limits of `config`.
    pub fn new(config: &ToolConfig) -> Self {
        Self {
            max_output_bytes: config.max_output_bytes,
        }
    }
}

#[async_trait::async_trait]
impl Tool for Search {
    fn info(&self) -> ToolInfo {
        ToolInfo {
            name: NAME,
            description: "Search the text files under `path` (relative to the workspace \
                root; \"\" or \".\" for the root, or a single file) for lines containing \
                `pattern` as literal, case-sensitive text. Prints `path:line: text`. Skips \
                .git, target, node_modules, symbolic links and binary files.",
            parameters: object_schema(
                json!({
                    "pattern": {"type": "string", "description": "Literal text to look for"},
                    "path": {"type": "string", "description": "Directory or file relative to the workspace root; \"\" or \".\" for the root"},
                }),
                &["pattern", "path"],
            ),
            idempotent: true,
        }
    }

    async fn call(&self, ws: &Workspace, arguments: &serde_json::Value) -> ToolOutput {
        let args: Args = match parse_args(NAME, EXPECTED, arguments) {
            Ok(args) => args,
            Err(e) => return e.into(),
        };
        if args.pattern.is_empty() {
            return ToolError::BadArguments {
                tool: NAME,
                reason: "`pattern` is empty; give the text to look for".into(),
                expected: EXPECTED,
            }
            .into();
        }
        let cap = self.max_output_bytes;
        run_blocking(NAME, ws, move |ws| search(ws, &args, cap)).await
    }
}

struct Hits<'a> {
    ws: &'a Workspace,
    pattern: &'a str,
    cap: usize,
    out: String,
    matches: usize,
    full: bool,
    unreadable: usize,
}

fn search(ws: &Workspace, args: &Args, cap: usize) -> Result<String, ToolError> {
    let start = ws.resolve_dir(&args.path)?;
    let meta = fs::symlink_metadata(&start).map_err(|e| io_error("inspect", &args.path, e))?;
    let mut hits = Hits {
        ws,
        pattern: &args.pattern,
        cap,
        out: String::new(),
        matches: 0,
        full: false,
        unreadable: 0,
    };
    if meta.is_dir() {
        visit_dir(&mut hits, &start);
    } else {
        visit_file(&mut hits, &start);
    }
    let mut out = hits.out;
    if hits.matches == 0 {
        out = format!(
            "no matches for `{}` under `{}`",
            args.pattern,
            ws.display(&start)
        );
    }
    if hits.full {
        out.push_str(&format!(
            "[search stopped after {} matches: the output limit of {cap} bytes was reached; \
             narrow the pattern or the path]",
            hits.matches
        ));
    }
    if hits.unreadable > 0 {
        if !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&format!(
            "({} files or directories could not be read)",
            hits.unreadable
        ));
    }
    Ok(out)
}

fn visit_dir(hits: &mut Hits<'_>, dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        hits.unreadable += 1;
        return;
    };
    let mut children: Vec<_> = entries.filter_map(Result::ok).collect();
    children.sort_by_key(|entry| entry.file_name());
    for entry in children {
        if hits.full {
            return;
        }
        let Ok(kind) = entry.file_type() else {
            hits.unreadable += 1;
            continue;
        };
        let path = entry.path();
        if kind.is_dir() {
            let name = entry.file_name();
            if !SKIPPED_DIRS.iter().any(|skip| name == *skip) {
                visit_dir(hits, &path);
            }
        } else if kind.is_file() {
            visit_file(hits, &path);
        }
        // Symlinks and special files are skipped.
    }
}

fn visit_file(hits: &mut Hits<'_>, path: &Path) {
    let rel = hits.ws.display(path);
    let Ok(file) = open_read(&rel, path) else {
        hits.unreadable += 1;
        return;
    };
    let mut reader = BufReader::with_capacity(BINARY_PROBE, file);
    match reader.fill_buf() {
        Ok(head) if head.contains(&0) => return,
        Ok(_) => {}
        Err(_) => {
            hits.unreadable += 1;
            return;
        }
    }
    let needle = hits.pattern.as_bytes();
    let mut line = Vec::new();
    let mut number = 0usize;
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) => return,
            Ok(_) => {}
            Err(_) => {
                hits.unreadable += 1;
                return;
            }
        }
        number += 1;
        if !contains(&line, needle) {
            continue;
        }
        while matches!(line.last(), Some(b'\n' | b'\r')) {
            line.pop();
        }
        let mut text = if line.len() > MAX_LINE {
            let cut = char_boundary(&line[..MAX_LINE]);
            format!("{}…", String::from_utf8_lossy(&line[..cut]))
        } else {
            String::from_utf8_lossy(&line).into_owned()
        };
        text = format!("{rel}:{number}: {text}");
        if !push_line_capped(&mut hits.out, &text, hits.cap) {
            hits.full = true;
            return;
        }
        hits.matches += 1;
    }
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    needle.is_empty()
        || haystack
            .windows(needle.len())
            .any(|window| window == needle)
}
