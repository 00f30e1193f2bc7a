//! Text that reaches a terminal, and how it is laid out.
//!
//! Invariant: every string drawn by the TUI, and every string the CLI prints
//! for people, passes through [`visible`] first. Model output, tool output,
//! paths and names from records may hold ESC, OSC 52 (set the clipboard), a
//! clear-screen or bidi overrides; a terminal must be shown them, never act
//! on them. This is the one implementation of that rule: it lives here, at
//! the bottom of the crate graph, so every front end (the CLI, the TUI, the
//! server's logs) reaches it without pulling in another front end's stack.

use std::borrow::Cow;
use std::fmt::Write as _;

use unicode_width::UnicodeWidthChar;

/// `s` with every character that a terminal would act on shown as an
/// escape instead: C0 controls but newline and tab, DEL, C1 controls, and
/// the bidirectional overrides and isolates. A carriage return right before
/// a newline is dropped (a Windows line end), any other is escaped.
pub fn visible(s: &str) -> Cow<'_, str> {
    if !s.chars().any(acts_on_terminal) {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\r' && chars.peek() == Some(&'\n') {
            continue;
        }
        if acts_on_terminal(c) {
            let n = u32::from(c);
            if n < 0x100 {
                let _ = write!(out, "\\x{n:02x}");
            } else {
                let _ = write!(out, "\\u{{{n:04x}}}");
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Whether a terminal acts on `c` rather than showing it: C0 controls but
/// newline and tab, DEL, C1 controls, and the bidirectional overrides and
/// isolates. [`visible`] escapes exactly these.
pub fn acts_on_terminal(c: char) -> bool {
    matches!(c,
        '\u{0}'..='\u{8}' | '\u{b}'..='\u{1f}' | '\u{7f}'..='\u{9f}'
        | '\u{61c}' | '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}'
        | '\u{2066}'..='\u{2069}')
}

/// Shortens text to one line of at most `max` characters, every control
/// character (newlines included) turned into a space.
pub fn one_line(s: &str, max: usize) -> String {
    let flat: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    let flat = visible(&flat).into_owned();
    if flat.chars().count() <= max {
        flat
    } else {
        let cut: String = flat.chars().take(max.saturating_sub(1)).collect();
        format!("{cut}…")
    }
}

/// The display width of a character: tabs are drawn as spaces to the next
/// multiple of 4 by [`wrap`], other characters by their Unicode width.
fn width(c: char) -> usize {
    c.width().unwrap_or(0)
}

/// Wraps `text` (already made [`visible`]) to lines of at most `cols`
/// columns: at spaces where it can, mid-word where a word is longer than a
/// line. Tabs become spaces. An empty text is one empty line.
pub fn wrap(text: &str, cols: usize) -> Vec<String> {
    let cols = cols.max(1);
    let mut out = Vec::new();
    for raw in text.split('\n') {
        let mut line = String::new();
        let mut used = 0usize;
        // Where the last space fell in `line`, to break there.
        let mut last_space: Option<(usize, usize)> = None;
        for c in raw.chars() {
            let (c, w) = if c == '\t' {
                (' ', 4 - used % 4)
            } else {
                (c, width(c))
            };
            let reps = if c == ' ' && w > 1 { w } else { 1 };
            let w1 = if reps > 1 { 1 } else { w };
            for _ in 0..reps {
                if used + w1 > cols {
                    match last_space.take() {
                        Some((byte, cols_at)) if c != ' ' => {
                            let rest = line.split_off(byte + 1);
                            line.truncate(byte);
                            out.push(std::mem::take(&mut line));
                            line = rest;
                            used -= cols_at + 1;
                        }
                        _ => {
                            out.push(std::mem::take(&mut line));
                            used = 0;
                        }
                    }
                    if c == ' ' {
                        // A space at a break is the break.
                        continue;
                    }
                }
                if c == ' ' {
                    last_space = Some((line.len(), used));
                }
                line.push(c);
                used += w1;
            }
        }
        out.push(line);
    }
    out
}

/// The display width of `s`.
pub fn display_width(s: &str) -> usize {
    s.chars().map(width).sum()
}

/// An error and its causes, each said once, `: `-separated: what a person
/// is shown of an error that has no terminal of its own (the TUI's
/// transcript, a server's JSON). A cause whose text is already in the line
/// (a transparent wrapper repeats its source) is not said again.
pub fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let t = c.to_string();
        if !out.contains(&t) {
            out.push_str(": ");
            out.push_str(&t);
        }
        cause = c.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_sequences_are_shown_not_sent() {
        let rows = [
            ("plain text\n\ttab", "plain text\n\ttab"),
            ("\u{1b}]52;c;ZXZpbA==\u{7}", "\\x1b]52;c;ZXZpbA==\\x07"),
            ("\u{1b}[2J\u{1b}[H", "\\x1b[2J\\x1b[H"),
            ("line\r\nnext", "line\nnext"),
            ("over\rwrite", "over\\x0dwrite"),
            ("\u{9b}31m", "\\x9b31m"),
            ("abc\u{202e}fed", "abc\\u{202e}fed"),
            ("caf\u{e9} \u{1f600}", "caf\u{e9} \u{1f600}"),
            ("\u{7f}", "\\x7f"),
        ];
        for (raw, shown) in rows {
            assert_eq!(visible(raw), shown, "{raw:?}");
        }
        assert!(matches!(visible("ok"), Cow::Borrowed(_)));
    }

    #[test]
    fn wrapping_breaks_at_spaces_and_inside_long_words() {
        assert_eq!(wrap("hello world", 5), ["hello", "world"]);
        assert_eq!(wrap("hello big world", 9), ["hello big", "world"]);
        assert_eq!(wrap("abcdefghij", 4), ["abcd", "efgh", "ij"]);
        assert_eq!(wrap("a\n\nb", 10), ["a", "", "b"]);
        assert_eq!(wrap("", 10), [""]);
        assert_eq!(wrap("\tx", 10), ["    x"]);
        for l in wrap("the quick brown fox jumps over the lazy dog", 7) {
            assert!(display_width(&l) <= 7, "{l:?}");
        }
        // Wide characters never overflow a line.
        for l in wrap("日本語のテキストです", 5) {
            assert!(display_width(&l) <= 5, "{l:?}");
        }
    }

    #[test]
    fn one_line_flattens_and_cuts() {
        assert_eq!(one_line("a\nb", 10), "a b");
        assert_eq!(one_line("abcdef", 4), "abc…");
    }
}
