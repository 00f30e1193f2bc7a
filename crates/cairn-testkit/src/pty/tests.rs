//! The query scanner and the screen state, without a PTY.

use super::*;

fn scan(bytes: &[u8]) -> Vec<Query> {
    let mut s = QueryScanner::default();
    bytes
        .iter()
        .filter_map(|&b| match s.push(b) {
            Some(Control::Query(q)) => Some(q),
            _ => None,
        })
        .collect()
}

fn state() -> State {
    State {
        parser: vt100::Parser::new(24, 80, 0),
        queries: QueryScanner::default(),
        before_frame: None,
        reads: Vec::new(),
        bytes: 0,
        closed: None,
        exit: None,
    }
}

#[test]
fn a_pty_can_be_shared_between_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Pty>();
}

#[test]
fn the_scanner_finds_the_queries_and_nothing_else() {
    assert_eq!(scan(b"\x1b[6n"), [Query::CursorPosition]);
    assert_eq!(
        scan(b"ab\x1b[5nc\x1b[c\x1b[0c"),
        [
            Query::Status,
            Query::PrimaryAttributes,
            Query::PrimaryAttributes
        ]
    );
    // Look-alikes: other reports, private and secondary forms, text.
    assert!(scan(b"\x1b[?6n\x1b[16n\x1b[>c\x1b[?1049h\x1b[5;3H6n[6n").is_empty());
    // A sequence cut by ESC or CAN, and an overlong one.
    assert!(scan(b"\x1b[6\x1b\x1b[6\x18n\x1b[000000000006n").is_empty());
    assert_eq!(scan(b"\x1b[6\x1b[6n"), [Query::CursorPosition]);
}

#[test]
fn a_query_split_between_reads_is_answered_at_its_place() {
    let mut st = state();
    assert!(st.feed(b"\x1b[3;7H\x1b[").is_empty());
    // The cursor moves after the query: the answer is where it stood.
    assert_eq!(st.feed(b"6n\x1b[10;1Hx\x1b[6n"), b"\x1b[3;7R\x1b[10;2R");
    assert_eq!(st.screen().lines().nth(9), Some("x"));
}

#[test]
fn a_frame_being_drawn_is_seen_only_when_whole() {
    let mut st = state();
    st.feed(b"old top\r\nold bottom");
    // The frame's mark split between reads, its body over several.
    st.feed(b"\x1b[?20");
    st.feed(b"26h\x1b[1;1Hnew top");
    assert_eq!(st.screen().lines().next(), Some("old top"));
    st.feed(b"\x1b[2;1Hnew bottom   ");
    assert_eq!(st.screen().lines().nth(1), Some("old bottom"));
    st.feed(b"\x1b[?2026l");
    let screen = st.screen();
    assert_eq!(
        screen.lines().take(2).collect::<Vec<_>>(),
        ["new top", "new bottom"]
    );
    // A program that dies mid-frame: what it drew is shown.
    st.feed(b"\x1b[?2026h\x1b[1;1Hlast");
    assert!(st.screen().starts_with("new top"));
    st.closed = Some(Instant::now());
    assert!(st.screen().starts_with("last"));
}
