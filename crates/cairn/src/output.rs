//! Writing to stdout: JSON for machines, text for people. A closed pipe is
//! reported as an `io::Error` of kind `BrokenPipe`, which `main` treats as
//! success.

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

/// Prints text as is.
pub fn text(s: &str) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    out.write_all(s.as_bytes())?;
    out.flush()?;
    Ok(())
}

/// A cost for people: `$0.0123`, `free`, or `unknown`.
pub fn cost(c: &cairn_journal::Cost) -> String {
    match (c.state, c.usd) {
        (cairn_journal::CostState::Zero, _) => "free".into(),
        (cairn_journal::CostState::Known, Some(usd)) => format!("${usd:.4}"),
        _ => "unknown".into(),
    }
}

/// Shortens text to one line of at most `max` characters.
pub fn one_line(s: &str, max: usize) -> String {
    let flat: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    if flat.chars().count() <= max {
        flat
    } else {
        let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}
