//! Writing to the terminal: JSON for machines, text for people.
//!
//! Rules kept here for every command:
//! 1. Text that reaches a terminal never carries raw control sequences:
//!    model output, tool output, paths and names from records may hold ESC,
//!    OSC 52 (set the clipboard), a clear-screen or bidi overrides; every
//!    such character is shown escaped ([`visible`]). JSON is escaped by its
//!    encoder.
//! 2. A closed stdout (`cairn sessions | head`) is reported as an
//!    `io::Error` of kind `BrokenPipe`, which `main` treats as success.
//! 3. A closed or full stderr never stops cairn: notices are best effort
//!    ([`note`]), because the journal, not the terminal, is the record.

use std::io::Write;

/// Prints one JSON value (compact; pipe it to `jq` to read it) and a
/// newline, in one write: stdout is line buffered, and writing through it
/// line by line would cost a syscall per line.
pub fn json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    let mut buf = serde_json::to_vec(value)?;
    buf.push(b'\n');
    let mut out = std::io::stdout().lock();
    out.write_all(&buf)?;
    out.flush()?;
    Ok(())
}

/// Prints text for people, control characters shown escaped.
pub fn text(s: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(visible(s).as_bytes())?;
    out.flush()?;
    Ok(())
}

/// Writes one line to stderr, control characters shown escaped, ignoring
/// any error (a closed stderr must not stop a run).
pub fn note(line: impl std::fmt::Display) {
    let text = line.to_string();
    let mut err = std::io::stderr().lock();
    let _ = err
        .write_all(visible(&text).as_bytes())
        .and_then(|_| err.write_all(b"\n"));
}

/// Prints an error and its causes to stderr, each once: a cause whose text
/// the lines above already hold is not repeated.
pub fn error(prefix: &str, e: &anyhow::Error) {
    let mut shown: Vec<String> = Vec::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if shown.iter().any(|s| s.contains(&text)) {
            continue;
        }
        if shown.is_empty() {
            note(format!("{prefix}: {text}"));
        } else {
            note(format!("  caused by: {text}"));
        }
        shown.push(text);
    }
    if let Some(hint) = crate::exit::hint(e) {
        note(format!("{prefix}: {hint}"));
    }
}

// The rules for text that reaches a terminal live in one place, shared
// with the TUI: escaping control characters, one-line cuts, costs.
pub use cairn_tui::text::{cost, one_line, visible};
