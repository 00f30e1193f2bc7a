//! A bounded capture of a command's output that keeps the head and the tail.

use std::collections::VecDeque;

use crate::fsio::char_boundary;

/// Keeps the first half of `cap` bytes and the last half, and counts the rest.
#[derive(Debug)]
pub(crate) struct OutputCap {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    head_cap: usize,
    tail_cap: usize,
    total: u64,
}

impl OutputCap {
    pub(crate) fn new(cap: usize) -> Self {
        let head_cap = cap / 2;
        Self {
            head: Vec::new(),
            tail: VecDeque::new(),
            head_cap,
            tail_cap: cap - head_cap,
            total: 0,
        }
    }

    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        let room = self.head_cap - self.head.len();
        let now = room.min(bytes.len());
        self.head.extend_from_slice(&bytes[..now]);
        bytes = &bytes[now..];
        if bytes.len() >= self.tail_cap {
            self.tail.clear();
            self.tail.extend(&bytes[bytes.len() - self.tail_cap..]);
            return;
        }
        let overflow = (self.tail.len() + bytes.len()).saturating_sub(self.tail_cap);
        self.tail.drain(..overflow);
        self.tail.extend(bytes);
    }

    /// The captured text: everything if it fit, otherwise head, a line
    /// `[… N bytes omitted …]`, and tail. Characters cut at the seams are dropped and
    /// counted as omitted.
    pub(crate) fn finish(self) -> String {
        let mut tail: Vec<u8> = self.tail.into();
        let kept = (self.head.len() + tail.len()) as u64;
        if kept == self.total {
            let mut all = self.head;
            all.extend_from_slice(&tail);
            return String::from_utf8_lossy(&all).into_owned();
        }
        let head = &self.head[..char_boundary(&self.head)];
        let skip = tail
            .iter()
            .take(3)
            .take_while(|&&b| b & 0xC0 == 0x80)
            .count();
        tail.drain(..skip);
        let omitted = self.total - head.len() as u64 - tail.len() as u64;
        let mut text = String::from_utf8_lossy(head).into_owned();
        if !text.is_empty() && !text.ends_with('\n') {
            text.push('\n');
        }
        text.push_str(&format!("[… {omitted} bytes omitted …]\n"));
        text.push_str(&String::from_utf8_lossy(&tail));
        text
    }
}

#[cfg(test)]
mod tests {
    use super::OutputCap;

    fn capture(cap: usize, chunks: &[&[u8]]) -> String {
        let mut out = OutputCap::new(cap);
        for chunk in chunks {
            out.push(chunk);
        }
        out.finish()
    }

    #[test]
    fn keeps_everything_under_the_cap() {
        assert_eq!(capture(10, &[b"abc", b"def"]), "abcdef");
        assert_eq!(capture(6, &[b"abc", b"def"]), "abcdef");
    }

    #[test]
    fn keeps_head_and_tail_over_the_cap() {
        let text = capture(6, &[b"abcd", b"efgh", b"ij"]);
        assert_eq!(text, "abc\n[… 4 bytes omitted …]\nhij");
        let text = capture(4, &[b"0123456789"]);
        assert_eq!(text, "01\n[… 6 bytes omitted …]\n89");
    }

    #[test]
    fn drops_characters_cut_at_the_seams() {
        // "é" is two bytes; a cap of 4 would cut it in both halves.
        let text = capture(4, &["aéééb".as_bytes()]);
        assert_eq!(text, "a\n[… 6 bytes omitted …]\nb");
    }
}
