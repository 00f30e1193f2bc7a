//! The viewer's Markdown renderer, the one place model text becomes markup.
//!
//! Input: any bytes, read as UTF-8 (lossily) — what a model could write.
//!
//! Properties:
//! 1. `render` never panics, and returns `None` only past its size limit;
//! 2. what it returns passes the allowlist check
//!    (`cairn_server::markdown::allowed`): only the allowed tags and
//!    attributes, links only to `http:`, `https:` and `mailto:`;
//! 3. rendering is a function of the text: twice gives the same HTML.

use cairn_server::markdown::{allowed, render, MAX_MARKDOWN};

/// Checks the Markdown properties (see the module doc) on `data`.
pub fn markdown(data: &[u8]) {
    let text = String::from_utf8_lossy(data);
    let Some(html) = render(&text) else {
        assert!(
            text.len() > MAX_MARKDOWN,
            "a text under the limit was not rendered"
        );
        return;
    };
    if let Err(e) = allowed(&html) {
        panic!("{text:?} rendered to markup outside the allowlist ({e}): {html:?}");
    }
    assert_eq!(
        render(&text).as_deref(),
        Some(html.as_str()),
        "rendering is not stable"
    );
}
