//! What a call of `write_file` or `edit_file` would change, as a unified
//! diff, for a person deciding whether it may run (DESIGN §11 approvals).
//!
//! The file is read the way the tools read it (beneath the workspace, no
//! symbolic link followed, the store refused), and nothing is written. The
//! diff is bounded ([`MAX_PREVIEW_LINES`]); a file that is not UTF-8 text or
//! larger than [`MAX_PREVIEW_BYTES`] is said, not shown. The text is the
//! model's and the file's: a caller that prints it to a terminal escapes it.

use std::io::Read;

use crate::error::{PathError, ToolError};
use crate::fsio::Target;
use crate::workspace::Workspace;

/// The most lines of a preview; the rest are counted.
pub const MAX_PREVIEW_LINES: usize = 120;

/// The largest file a preview reads.
pub const MAX_PREVIEW_BYTES: u64 = 4 << 20;

/// The diff `name` called with `arguments` would make, or `None` for a
/// tool that changes no file it names (or arguments it would refuse
/// itself, which the tool will say).
pub fn preview(ws: &Workspace, name: &str, arguments: &serde_json::Value) -> Option<String> {
    let path = arguments.get("path")?.as_str()?;
    let (before, after) = match name {
        "write_file" => {
            let content = arguments.get("content")?.as_str()?;
            (current(ws, path), Ok(content.to_owned()))
        }
        "edit_file" => {
            let old = arguments.get("old")?.as_str()?;
            let new = arguments.get("new")?.as_str()?;
            match current(ws, path) {
                Ok(Some(text)) if text.matches(old).count() == 1 && !old.is_empty() => {
                    let after = text.replacen(old, new, 1);
                    (Ok(Some(text)), Ok(after))
                }
                // The tool will refuse it and say why; show what it was
                // asked to replace.
                _ => (Ok(Some(old.to_owned())), Ok(new.to_owned())),
            }
        }
        _ => return None,
    };
    let before = match before {
        Ok(b) => b,
        Err(why) => return Some(format!("({path}: {why}; no diff shown)")),
    };
    let after: Result<String, String> = after;
    let after = after.ok()?;
    Some(unified(path, before.as_deref(), &after))
}

/// The file's text now: `None` when there is no file.
fn current(ws: &Workspace, path: &str) -> Result<Option<String>, String> {
    let not_found = |e: &ToolError| matches!(e, ToolError::Path(PathError::NotFound { .. }));
    let target = match Target::reach(ws, path, false) {
        Ok(t) => t,
        Err(e) if not_found(&e) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    let (file, len) = match target.open(ws) {
        Ok(f) => f,
        Err(e) if not_found(&e) => return Ok(None),
        Err(e) => return Err(e.to_string()),
    };
    if len > MAX_PREVIEW_BYTES {
        return Err(format!("{len} bytes, too large to compare"));
    }
    let mut bytes = Vec::new();
    file.take(MAX_PREVIEW_BYTES)
        .read_to_end(&mut bytes)
        .map_err(|e| e.to_string())?;
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| "not UTF-8 text".to_owned())
}

fn unified(path: &str, before: Option<&str>, after: &str) -> String {
    let old = before.unwrap_or("");
    let diff = similar::TextDiff::from_lines(old, after);
    let from = if before.is_some() {
        format!("a/{path}")
    } else {
        "/dev/null".to_owned()
    };
    let text = diff
        .unified_diff()
        .context_radius(3)
        .header(&from, &format!("b/{path}"))
        .to_string();
    if text.is_empty() {
        return format!("({path} would not change)");
    }
    let lines: Vec<&str> = text.lines().collect();
    if lines.len() <= MAX_PREVIEW_LINES {
        return text;
    }
    let mut out = lines[..MAX_PREVIEW_LINES].join("\n");
    out.push_str(&format!(
        "\n… {} more line(s) of diff\n",
        lines.len() - MAX_PREVIEW_LINES
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn diffs_of_writes_and_edits() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("a.txt"), "one\ntwo\nthree\n").unwrap();
        let ws = Workspace::new(d.path()).unwrap();
        let p = |name: &str, args: serde_json::Value| preview(&ws, name, &args);

        let w = p(
            "write_file",
            json!({"path": "a.txt", "content": "one\n2\nthree\n"}),
        )
        .unwrap();
        assert!(
            w.contains("--- a/a.txt") && w.contains("+++ b/a.txt"),
            "{w}"
        );
        assert!(w.contains("-two\n") && w.contains("+2\n"), "{w}");

        let new = p(
            "write_file",
            json!({"path": "new.txt", "content": "hello\n"}),
        )
        .unwrap();
        assert!(
            new.contains("--- /dev/null") && new.contains("+hello"),
            "{new}"
        );

        let e = p(
            "edit_file",
            json!({"path": "a.txt", "old": "three", "new": "3"}),
        )
        .unwrap();
        assert!(
            e.contains("-three") && e.contains("+3") && e.contains(" two"),
            "{e}"
        );

        // An edit the tool will refuse still shows what it asked.
        let bad = p(
            "edit_file",
            json!({"path": "a.txt", "old": "zzz", "new": "y"}),
        )
        .unwrap();
        assert!(bad.contains("-zzz") && bad.contains("+y"), "{bad}");

        let same = p(
            "write_file",
            json!({"path": "a.txt", "content": "one\ntwo\nthree\n"}),
        )
        .unwrap();
        assert!(same.contains("would not change"), "{same}");

        assert_eq!(p("shell", json!({"command": "ls"})), None);
        assert_eq!(p("write_file", json!({"content": "x"})), None);
        // Nothing outside the workspace is read.
        let out = p("write_file", json!({"path": "../x", "content": "x"})).unwrap();
        assert!(out.contains("no diff shown"), "{out}");

        let big: String = (0..500).map(|i| format!("{i}\n")).collect();
        let long = p("write_file", json!({"path": "big.txt", "content": big})).unwrap();
        assert!(long.contains("more line(s) of diff"), "{long}");
        assert!(long.lines().count() <= MAX_PREVIEW_LINES + 1);
    }
}
