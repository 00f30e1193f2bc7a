//! The composer: a multi-line text field with a history of what was sent.
//!
//! Invariants: the cursor is always a char boundary of `text`; history
//! holds what was sent, oldest first, and browsing it never loses the
//! draft being typed (it is kept and put back past the newest entry).

/// The text being written, its cursor, and the history.
#[derive(Clone, Debug, Default)]
pub struct Composer {
    text: String,
    /// Byte offset of the cursor in `text`.
    cursor: usize,
    history: Vec<String>,
    /// Which history entry is shown, while browsing.
    browsing: Option<usize>,
    /// The draft put aside while browsing.
    draft: String,
}

impl Composer {
    /// The text.
    pub fn text(&self) -> &str {
        &self.text
    }

    /// True when nothing is written.
    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    /// The cursor's byte offset.
    pub fn cursor(&self) -> usize {
        self.cursor
    }

    /// Replaces the text (the cursor goes to its end).
    pub fn set(&mut self, text: &str) {
        self.text = text.to_owned();
        self.cursor = self.text.len();
        self.browsing = None;
    }

    /// Inserts text at the cursor (typing, or a paste: newlines kept, other
    /// control characters dropped, a Windows line end made one newline).
    pub fn insert(&mut self, s: &str) {
        let clean: String = s
            .replace("\r\n", "\n")
            .chars()
            .map(|c| if c == '\r' { '\n' } else { c })
            .filter(|c| *c == '\n' || *c == '\t' || !c.is_control())
            .collect();
        self.text.insert_str(self.cursor, &clean);
        self.cursor += clean.len();
    }

    /// Deletes the character before the cursor.
    pub fn backspace(&mut self) {
        if let Some(c) = self.text[..self.cursor].chars().next_back() {
            self.cursor -= c.len_utf8();
            self.text.remove(self.cursor);
        }
    }

    /// Deletes the character under the cursor.
    pub fn delete(&mut self) {
        if self.cursor < self.text.len() {
            self.text.remove(self.cursor);
        }
    }

    /// Deletes the word before the cursor (Ctrl-W).
    pub fn delete_word(&mut self) {
        let before = &self.text[..self.cursor];
        let trimmed = before.trim_end_matches(|c: char| c.is_whitespace());
        let start = trimmed
            .rfind(|c: char| c.is_whitespace())
            .map_or(0, |i| i + 1);
        self.text.replace_range(start..self.cursor, "");
        self.cursor = start;
    }

    /// Moves the cursor one character left.
    pub fn left(&mut self) {
        if let Some(c) = self.text[..self.cursor].chars().next_back() {
            self.cursor -= c.len_utf8();
        }
    }

    /// Moves the cursor one character right.
    pub fn right(&mut self) {
        if let Some(c) = self.text[self.cursor..].chars().next() {
            self.cursor += c.len_utf8();
        }
    }

    /// To the start of the line the cursor is on.
    pub fn home(&mut self) {
        self.cursor = self.text[..self.cursor].rfind('\n').map_or(0, |i| i + 1);
    }

    /// To the end of the line the cursor is on.
    pub fn end(&mut self) {
        self.cursor += self.text[self.cursor..]
            .find('\n')
            .unwrap_or(self.text.len() - self.cursor);
    }

    /// Up: to the line above, or, on the first line, the previous history
    /// entry. Returns false when there is nowhere to go.
    pub fn up(&mut self) -> bool {
        if let Some(nl) = self.text[..self.cursor].rfind('\n') {
            let col = self.cursor - nl - 1;
            let start = self.text[..nl].rfind('\n').map_or(0, |i| i + 1);
            self.cursor = floor_boundary(&self.text, (start + col).min(nl));
            return true;
        }
        let next = match self.browsing {
            None if self.history.is_empty() => return false,
            None => {
                self.draft = std::mem::take(&mut self.text);
                self.history.len() - 1
            }
            Some(0) => return false,
            Some(i) => i - 1,
        };
        self.browsing = Some(next);
        self.text = self.history[next].clone();
        self.cursor = self.text.len();
        true
    }

    /// Down: to the line below, or forward in history (past the newest
    /// entry, the draft comes back).
    pub fn down(&mut self) -> bool {
        if let Some(nl) = self.text[self.cursor..].find('\n') {
            let nl = self.cursor + nl;
            let start = self.text[..self.cursor].rfind('\n').map_or(0, |i| i + 1);
            let col = self.cursor - start;
            let end = self.text[nl + 1..]
                .find('\n')
                .map_or(self.text.len(), |i| nl + 1 + i);
            self.cursor = floor_boundary(&self.text, (nl + 1 + col).min(end));
            return true;
        }
        match self.browsing {
            None => false,
            Some(i) if i + 1 < self.history.len() => {
                self.browsing = Some(i + 1);
                self.text = self.history[i + 1].clone();
                self.cursor = self.text.len();
                true
            }
            Some(_) => {
                self.browsing = None;
                self.text = std::mem::take(&mut self.draft);
                self.cursor = self.text.len();
                true
            }
        }
    }

    /// Takes the text to send: it joins the history and the field empties.
    pub fn take(&mut self) -> String {
        let text = std::mem::take(&mut self.text);
        self.cursor = 0;
        self.browsing = None;
        self.draft.clear();
        if !text.trim().is_empty() && self.history.last() != Some(&text) {
            self.history.push(text.clone());
        }
        text
    }

    /// Clears the field (the history stays).
    pub fn clear(&mut self) {
        self.text.clear();
        self.cursor = 0;
        self.browsing = None;
    }
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    while i > 0 && !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn editing_and_history() {
        let mut c = Composer::default();
        c.insert("héllo");
        c.left();
        c.backspace();
        assert_eq!(c.text(), "hélo");
        c.insert("l");
        assert_eq!(c.take(), "héllo");
        c.insert("second\nline");
        assert!(c.up(), "to the first line");
        assert_eq!(c.take(), "second\nline");
        c.insert("draft");
        assert!(c.up());
        assert_eq!(c.text(), "second\nline");
        assert!(c.up(), "within the entry");
        assert!(c.up());
        assert_eq!(c.text(), "héllo");
        assert!(!c.up(), "oldest");
        assert!(c.down());
        assert_eq!(c.text(), "second\nline");
        assert!(c.down());
        assert_eq!(c.text(), "draft", "the draft comes back");
    }

    #[test]
    fn a_paste_keeps_newlines_and_drops_controls() {
        let mut c = Composer::default();
        c.insert("a\r\nb\u{1b}[2Jc\rd");
        assert_eq!(c.text(), "a\nb[2Jc\nd");
        c.delete_word();
        assert_eq!(c.text(), "a\nb[2Jc\n");
    }
}
