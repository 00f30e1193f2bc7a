//! `search {pattern, path}`: a literal text search over the files under a path.

use std::io::{BufRead, BufReader};
use std::os::fd::OwnedFd;

use cairn_store::nofollow::{self, FileKind, Unreachable};
use serde::Deserialize;
use serde_json::json;

use super::{object_schema, parse_args, push_line_capped, run_blocking};
use crate::error::{PathError, ToolError};
use crate::fsio::{char_boundary, open_regular};
use crate::tool::{Tool, ToolConfig, ToolInfo, ToolOutput};
use crate::workspace::{Access, Workspace};

const NAME: &str = "search";
const EXPECTED: &str = r#"{"pattern": string, "path": string}"#;

/// Directory names never descended into (`.git` in any letter case).
const SKIPPED_DIRS: [&str; 2] = ["target", "node_modules"];
/// A file with a NUL byte in its first block is taken as binary and skipped.
const BINARY_PROBE: usize = 8 * 1024;
/// Matched lines longer than this many bytes are cut.
const MAX_LINE: usize = 400;

/// Searches the files under a path for lines containing `pattern` as literal,
/// case-sensitive text, and prints them as `path:line: text`, sorted by path. Skips
/// `.git`, `target` and `node_modules` directories, protected directories
/// ([`Workspace::protect`]), symlinks and binary files; FIFOs, sockets and devices are
/// skipped and counted, never opened for reading. Directories are walked by descriptor,
/// each opened relative to its parent without following links. Output is capped at
/// [`ToolConfig::max_output_bytes`]. Idempotent.
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
            name: NAME.into(),
            description: "Search the text files under `path` (relative to the workspace \
                root; \"\" or \".\" for the root, or a single file) for lines containing \
                `pattern` as literal, case-sensitive text. Prints `path:line: text`. Skips \
                .git, target, node_modules, symbolic links and binary files."
                .into(),
            parameters: object_schema(
                json!({
                    "pattern": {"type": "string", "description": "Literal text to look for"},
                    "path": {"type": "string", "description": "Directory or file relative to the workspace root; \"\" or \".\" for the root"},
                }),
                &["pattern", "path"],
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
    special: usize,
    not_utf8: usize,
}

fn search(ws: &Workspace, args: &Args, cap: usize) -> Result<String, ToolError> {
    let text = args.path.as_str();
    let mut hits = Hits {
        ws,
        pattern: &args.pattern,
        cap,
        out: String::new(),
        matches: 0,
        full: false,
        unreadable: 0,
        special: 0,
        not_utf8: 0,
    };
    let shown = match ws.rel_or_root(text)? {
        None => {
            let root = ws.open_dir(text, "", false)?;
            visit_dir(&mut hits, &root, "");
            ".".to_owned()
        }
        Some(path) => {
            let (dir, name) = path.split_last();
            let parent = ws.open_dir(text, dir, false)?;
            let st = ws.entry(text, &path, &parent, Access::Read)?;
            match st.as_ref().map(FileKind::of) {
                Some(FileKind::Dir) => {
                    let fd = ws.open_dir(text, path.as_str(), false)?;
                    visit_dir(&mut hits, &fd, path.as_str());
                }
                _ => {
                    let (file, _) = open_regular(&parent, name, text)?;
                    visit_file(&mut hits, file, path.as_str());
                }
            }
            path.as_str().to_owned()
        }
    };
    let mut out = hits.out;
    if hits.matches == 0 {
        out = format!("no matches for `{}` under `{shown}`", args.pattern);
    }
    if hits.full {
        out.push_str(&format!(
            "[search stopped after {} matches: the output limit of {cap} bytes was reached; \
             narrow the pattern or the path]",
            hits.matches
        ));
    }
    for (n, one, many) in [
        (
            hits.unreadable,
            "1 file or directory could not be read",
            "files or directories could not be read",
        ),
        (
            hits.special,
            "1 file that is not a regular file was skipped",
            "files that are not regular files were skipped",
        ),
        (
            hits.not_utf8,
            "1 name that is not UTF-8 was skipped",
            "names that are not UTF-8 were skipped",
        ),
    ] {
        if n == 0 {
            continue;
        }
        if !out.ends_with('\n') {
            out.push('\n');
        }
        if n == 1 {
            out.push_str(&format!("({one})"));
        } else {
            out.push_str(&format!("({n} {many})"));
        }
    }
    Ok(out)
}

/// Searches the directory `dir`, shown as `shown` (`""` for the root), and below it.
fn visit_dir(hits: &mut Hits<'_>, dir: &OwnedFd, shown: &str) {
    let Ok(mut entries) = nofollow::read_dir_at(dir) else {
        hits.unreadable += 1;
        return;
    };
    entries.sort_by(|a, b| a.name.cmp(&b.name));
    for entry in entries {
        if hits.full {
            return;
        }
        let Some(name) = entry.name.to_str() else {
            hits.not_utf8 += 1;
            continue;
        };
        let child = if shown.is_empty() {
            name.to_owned()
        } else {
            format!("{shown}/{name}")
        };
        match entry.kind {
            FileKind::Dir => {
                if name.eq_ignore_ascii_case(".git") || SKIPPED_DIRS.contains(&name) {
                    continue;
                }
                match hits.ws.open_subdir(dir, name) {
                    Ok(fd) => visit_dir(hits, &fd, &child),
                    // Protected, or swapped for a symlink since it was listed: skipped
                    // like every symlink.
                    Err(Unreachable::Refused(_) | Unreachable::Symlink(_)) => {}
                    Err(_) => hits.unreadable += 1,
                }
            }
            FileKind::File => match open_regular(dir, name, &child) {
                Ok((file, _)) => visit_file(hits, file, &child),
                Err(ToolError::NotRegular { .. }) => hits.special += 1,
                Err(ToolError::Path(PathError::Symlink { .. })) => {}
                Err(_) => hits.unreadable += 1,
            },
            FileKind::Symlink => {}
            _ => hits.special += 1,
        }
    }
}

/// Searches one opened regular file, shown as `shown`.
fn visit_file(hits: &mut Hits<'_>, file: std::fs::File, shown: &str) {
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
        let text = if line.len() > MAX_LINE {
            let cut = char_boundary(&line[..MAX_LINE]);
            format!("{}…", String::from_utf8_lossy(&line[..cut]))
        } else {
            String::from_utf8_lossy(&line).into_owned()
        };
        if !push_line_capped(
            &mut hits.out,
            &format!("{shown}:{number}: {text}"),
            hits.cap,
        ) {
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
