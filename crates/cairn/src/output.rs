//! Writing to the terminal: JSON for machines, text for people.
//!
//! Rules kept here for every command:
//! 1. Text that reaches a terminal never carries raw control sequences:
//!    model output, tool output, paths and names from records may hold ESC,
//!    OSC 52 (set the clipboard), a clear-screen or bidi overrides; every
//!    such character is shown escaped ([`visible`]). JSON too: its encoder
//!    escapes C0 controls, and [`Visible`] the rest of what a terminal acts
//!    on (DEL, C1 controls such as CSI, bidi overrides) as `\uXXXX`, which
//!    decodes to the same string.
//! 2. A closed stdout (`cairn sessions | head`) is reported as an
//!    `io::Error` of kind `BrokenPipe`, which `main` treats as success.
//! 3. A closed or full stderr never stops cairn: notices are best effort
//!    ([`note`]), because the journal, not the terminal, is the record.

use std::io::Write;

/// Prints one JSON value (compact; pipe it to `jq` to read it) and a
/// newline, in one write: stdout is line buffered, and writing through it
/// line by line would cost a syscall per line.
pub fn json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    let mut buf = Vec::new();
    encode(&mut buf, value)?;
    buf.push(b'\n');
    let mut out = std::io::stdout().lock();
    out.write_all(&buf)?;
    out.flush()?;
    Ok(())
}

/// Prints a JSON array of `items` and a newline, the same bytes as [`json`]
/// gives for a slice, its elements encoded on every core: a listing of ten
/// thousand sessions is megabytes of JSON.
pub fn json_list<T: serde::Serialize + Sync>(items: &[T]) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    if items.len() >= WIDE_PIPE_FROM {
        widen_pipe(&out);
    }
    write_list(items, &mut out)?;
    out.write_all(b"\n")?;
    out.flush()?;
    Ok(())
}

/// The number of elements from which a list is megabytes of JSON.
const WIDE_PIPE_FROM: usize = 1024;

/// When stdout is a pipe, asks for a 1 MiB buffer instead of the default
/// 64 KiB, so megabytes of JSON pass in a few handoffs to the reader rather
/// than a hundred. Best effort: a pipe the kernel will not widen (a user's
/// pipe-size quota) stays as it is, and the kernel refuses the request
/// (`EBADF`) for anything that is not a pipe, leaving it alone.
fn widen_pipe(out: &impl std::os::fd::AsFd) {
    let _ = rustix::pipe::fcntl_setpipe_size(out, 1 << 20);
}

/// Writes the JSON array of `items` to `out`. A window of runs of elements
/// is encoded on every core, then written in order, then the next: never
/// the whole array in memory at once, which for a listing would be
/// megabytes the kernel must clear before use, for one more copy.
fn write_list<T: serde::Serialize + Sync>(items: &[T], out: &mut impl Write) -> anyhow::Result<()> {
    use rayon::prelude::*;
    const RUN: usize = 256;
    const WINDOW: usize = 8 * RUN;
    out.write_all(b"[")?;
    for (w, window) in items.chunks(WINDOW).enumerate() {
        let parts = window
            .par_chunks(RUN)
            .map(|run| {
                let mut buf = Vec::new();
                for (i, x) in run.iter().enumerate() {
                    if i == 1 {
                        // Elements are alike in size: room for the rest at
                        // once, rather than doubling the buffer as it grows.
                        buf.reserve(buf.len().saturating_mul(run.len()) / 8 * 9);
                    }
                    if i > 0 {
                        buf.push(b',');
                    }
                    encode(&mut buf, x)?;
                }
                Ok(buf)
            })
            .collect::<serde_json::Result<Vec<Vec<u8>>>>()?;
        for (i, part) in parts.iter().enumerate() {
            if w > 0 || i > 0 {
                out.write_all(b",")?;
            }
            out.write_all(part)?;
        }
    }
    out.write_all(b"]")?;
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

/// An error's messages, its own first, then each cause whose text the
/// ones before do not already hold.
fn messages(e: &anyhow::Error) -> Vec<String> {
    let mut shown: Vec<String> = Vec::new();
    for cause in e.chain() {
        let text = cause.to_string();
        if !shown.iter().any(|s| s.contains(&text)) {
            shown.push(text);
        }
    }
    shown
}

/// A writer that shows what it is given with every character a terminal
/// would act on escaped (rule 1), for log lines: `cairn gateway`'s carry
/// what upstreams and clients sent (an upstream's error text, a model's
/// name), and the log formatter escapes only some controls. Each `write`
/// must be whole UTF-8 text, as the formatter's one write of an event is.
pub struct VisibleWriter<W: Write>(pub W);

impl<W: Write> Write for VisibleWriter<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        self.0.write_all(visible(&text).as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// Prints an error and its causes to stderr, each once: a cause whose text
/// the lines above already hold is not repeated.
pub fn error(prefix: &str, e: &anyhow::Error) {
    for (i, text) in messages(e).iter().enumerate() {
        if i == 0 {
            note(format!("{prefix}: {text}"));
        } else {
            note(format!("  caused by: {text}"));
        }
    }
    if let Some(hint) = crate::exit::hint(e) {
        note(format!("{prefix}: {hint}"));
    }
}

/// An error in one line, for `--json`: its messages joined by `: `, then
/// what to do about it when cairn knows more.
pub fn error_text(e: &anyhow::Error) -> String {
    let mut text = messages(e).join(": ");
    if let Some(hint) = crate::exit::hint(e) {
        text.push_str("; ");
        text.push_str(hint);
    }
    text
}

/// Prints an error under `--json`: one JSON value on one line of stderr,
/// `{"error": {"code", "class", "message"}}` (DESIGN §10), so a script that
/// asked for JSON never has to parse prose.
pub fn error_json(code: crate::exit::Code, message: &str) {
    let v = serde_json::json!({
        "error": {
            "code": code as u8,
            "class": code.class(),
            "message": message.trim_end(),
        }
    });
    let mut buf = Vec::new();
    if encode(&mut buf, &v).is_ok() {
        buf.push(b'\n');
        let _ = std::io::stderr().lock().write_all(&buf);
    }
}

/// Encodes `value` as compact JSON into `buf`, every character a terminal
/// would act on escaped (rule 1).
fn encode<T: serde::Serialize + ?Sized>(buf: &mut Vec<u8>, value: &T) -> serde_json::Result<()> {
    value.serialize(&mut serde_json::Serializer::with_formatter(buf, Visible))
}

/// serde_json's compact formatter, but a string's DEL, C1 controls and
/// bidi overrides are written as `\uXXXX` escapes: serde_json escapes only
/// C0 controls, and `cairn sessions --json` on a terminal would otherwise
/// let a session's name clear the screen (U+009B is CSI) or reorder a line.
struct Visible;

impl serde_json::ser::Formatter for Visible {
    fn write_string_fragment<W: ?Sized + Write>(
        &mut self,
        writer: &mut W,
        fragment: &str,
    ) -> std::io::Result<()> {
        // Every such character but C0 (escaped before it gets here) is DEL
        // or not ASCII: most strings are written whole after two fast scans
        // (a listing's JSON is megabytes).
        if fragment.is_ascii() && !fragment.as_bytes().contains(&0x7f) {
            return writer.write_all(fragment.as_bytes());
        }
        let mut from = 0;
        for (i, c) in fragment.char_indices() {
            if cairn_store::text::acts_on_terminal(c) {
                writer.write_all(&fragment.as_bytes()[from..i])?;
                write!(writer, "\\u{:04x}", u32::from(c))?;
                from = i + c.len_utf8();
            }
        }
        writer.write_all(&fragment.as_bytes()[from..])
    }
}

/// A byte count for people: `512 B`, `1.2 MiB` (JSON keeps the exact count).
pub fn size(bytes: u64) -> String {
    const UNITS: [&str; 5] = ["KiB", "MiB", "GiB", "TiB", "PiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut v = bytes as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit + 1 < UNITS.len() {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1} {}", UNITS[unit])
}

/// An RFC 3339 time for people, relative to now: `just now`, `3 min ago`,
/// `5 h ago`, `2 days ago`; older than a week, or not parsable, or in the
/// future (another machine's clock), the date and time as written (JSON
/// keeps the exact time).
pub fn ago(ts: &str) -> String {
    ago_at(ts, std::time::SystemTime::now())
}

fn ago_at(ts: &str, now: std::time::SystemTime) -> String {
    let plain = || ts.get(..19).unwrap_or(ts).replace('T', " ");
    let Ok(then) = humantime::parse_rfc3339_weak(ts) else {
        return plain();
    };
    let Ok(d) = now.duration_since(then) else {
        return plain();
    };
    match d.as_secs() {
        s if s < 10 => "just now".into(),
        s if s < 60 => format!("{s} s ago"),
        s if s < 3600 => format!("{} min ago", s / 60),
        s if s < 86_400 => format!("{} h ago", s / 3600),
        s if s < 2 * 86_400 => "1 day ago".into(),
        s if s < 7 * 86_400 => format!("{} days ago", s / 86_400),
        _ => plain(),
    }
}

// The rule for text that reaches a terminal lives in one place, shared with
// the TUI: escaping control characters, one-line cuts.
pub use cairn_store::text::{one_line, visible};

/// What a restore or fork of a VM session's checkpoint did (`what`:
/// `restored`, `forked`).
pub fn machine_restored(r: &cairn_vm::RestoreReport, json: bool, what: &str) -> anyhow::Result<()> {
    if json {
        return self::json(r);
    }
    let mut s = format!(
        "{what} checkpoint {}: session {} runs its guest again (qemu pid {}, {:.1} s); its console: {}\n",
        r.checkpoint,
        r.id,
        r.pid,
        r.secs,
        r.console.display()
    );
    if let Some(b) = &r.rolled_back {
        s.push_str(&format!(
            "rolled back: what the guest did after seq {}: {} console line(s), {} model call(s) (the gateway serves those again as replays)\n",
            b.at_seq,
            b.console_lines,
            b.model_calls.len()
        ));
        for l in &b.console_tail {
            s.push_str(&format!("  | {}\n", l));
        }
    }
    text(&s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_is_encoded_as_the_whole_array_is() {
        for n in [0usize, 1, 2, 255, 256, 257, 1000, 2047, 2048, 2049, 5000] {
            let items: Vec<serde_json::Value> = (0..n)
                .map(|i| serde_json::json!({"id": i, "name": format!("s\"{i}\u{1b}\u{9b}")}))
                .collect();
            let mut want = Vec::new();
            encode(&mut want, &items).unwrap();
            let mut got = Vec::new();
            write_list(&items, &mut got).unwrap();
            assert_eq!(got, want, "{n} items");
        }
    }

    #[test]
    fn json_escapes_what_a_terminal_acts_on_and_decodes_to_the_same_value() {
        let name = "a\u{1b}[2J b\u{7f} c\u{9b}2J d\u{202e}e \u{2066}f \u{61c} é ✓ \u{a0}";
        let v = serde_json::json!({"name": name, "plain": "x\"y\\z"});
        let mut buf = Vec::new();
        encode(&mut buf, &v).unwrap();
        let text = std::str::from_utf8(&buf).unwrap();
        assert!(
            !text.chars().any(cairn_store::text::acts_on_terminal),
            "{text:?}"
        );
        for escaped in [
            "\\u001b", "\\u007f", "\\u009b", "\\u202e", "\\u2066", "\\u061c",
        ] {
            assert!(text.contains(escaped), "{escaped} in {text}");
        }
        // What a terminal shows as is stays as it is.
        assert!(text.contains("é ✓ \u{a0}"), "{text}");
        let back: serde_json::Value = serde_json::from_slice(&buf).unwrap();
        assert_eq!(back, v);
        // Nothing to escape: the bytes serde_json writes.
        let plain = serde_json::json!({"id": 1, "name": "fix the test"});
        let mut buf = Vec::new();
        encode(&mut buf, &plain).unwrap();
        assert_eq!(buf, serde_json::to_vec(&plain).unwrap());
    }

    #[test]
    fn a_log_line_reaches_the_terminal_with_its_controls_escaped() {
        let mut out = VisibleWriter(Vec::new());
        let line = "WARN the upstream said: a\rb\u{1b}]52;c;aGk=\u{7}\u{202e}c\tok\n";
        out.write_all(line.as_bytes()).unwrap();
        let shown = String::from_utf8(out.0).unwrap();
        assert_eq!(
            shown,
            "WARN the upstream said: a\\x0db\\x1b]52;c;aGk=\\x07\\u{202e}c\tok\n"
        );
    }

    #[test]
    fn sizes_for_people() {
        for (n, want) in [
            (0, "0 B"),
            (1023, "1023 B"),
            (1024, "1.0 KiB"),
            (1_258_291, "1.2 MiB"),
            (5 * 1024 * 1024 * 1024, "5.0 GiB"),
        ] {
            assert_eq!(size(n), want, "{n}");
        }
    }

    #[test]
    fn times_for_people() {
        let now = humantime::parse_rfc3339("2025-06-10T12:00:00Z").unwrap();
        for (ts, want) in [
            ("2025-06-10T11:59:58.123456Z", "just now"),
            ("2025-06-10T11:59:15Z", "45 s ago"),
            ("2025-06-10T11:57:00Z", "3 min ago"),
            ("2025-06-10T07:00:00Z", "5 h ago"),
            ("2025-06-09T10:00:00Z", "1 day ago"),
            ("2025-06-07T12:00:00Z", "3 days ago"),
            ("2025-05-01T08:30:00Z", "2025-05-01 08:30:00"),
            ("2025-06-10T12:30:00Z", "2025-06-10 12:30:00"),
            ("", ""),
        ] {
            assert_eq!(ago_at(ts, now), want, "{ts}");
        }
    }
}
