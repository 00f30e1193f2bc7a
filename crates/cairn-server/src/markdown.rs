//! Model text as safe HTML for the viewer (DESIGN §8): the one place where
//! anything a model wrote becomes markup.
//!
//! The text is read as CommonMark with tables, strikethrough and task lists
//! (pulldown-cmark), and the HTML is then cleaned by ammonia. Invariants of
//! what [`render`] returns, whatever the text holds:
//! - raw HTML in the text is shown as text, never passed through: a model
//!   that writes `<img onerror=…>` gets those characters on the page;
//! - no script, style, form, frame, image or media element, and no event
//!   handler or `style` attribute survive (ammonia's allowlist, narrowed);
//! - a link goes only to `http:`, `https:` or `mailto:`, and
//!   carries `rel="noopener noreferrer nofollow"`; a relative link (into
//!   this server's own API) loses its target;
//! - a fenced code block keeps its language as a `language-…` class and
//!   nothing else of its info string.
//!
//! The page's Content-Security-Policy (`viewer.rs`) allows no inline script
//! either, so a cleaning gap would still not run code.

use std::collections::HashSet;
use std::sync::OnceLock;

use pulldown_cmark::{CodeBlockKind, CowStr, Event, Options, Parser, Tag};

/// The longest text rendered as Markdown; past it the text is shown as
/// plain text by the page (rendering is linear, but a page of megabytes of
/// markup helps no reader).
pub const MAX_MARKDOWN: usize = 256 * 1024;

/// `text` as clean HTML (see the module doc), or `None` when it is longer
/// than [`MAX_MARKDOWN`].
pub fn render(text: &str) -> Option<String> {
    if text.len() > MAX_MARKDOWN {
        return None;
    }
    let options =
        Options::ENABLE_TABLES | Options::ENABLE_STRIKETHROUGH | Options::ENABLE_TASKLISTS;
    let events = Parser::new_ext(text, options).map(|event| match event {
        // Raw HTML is the model's text, not markup.
        Event::Html(html) | Event::InlineHtml(html) => Event::Text(html),
        // Only the language word of an info string is kept.
        Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(info))) => {
            let lang: String = info
                .split(|c: char| c.is_whitespace() || c == ',' || c == '{')
                .next()
                .unwrap_or("")
                .chars()
                .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '_' | '#'))
                .take(32)
                .collect();
            Event::Start(Tag::CodeBlock(CodeBlockKind::Fenced(CowStr::from(lang))))
        }
        other => other,
    });
    let mut html = String::with_capacity(text.len() + text.len() / 4);
    pulldown_cmark::html::push_html(&mut html, events);
    Some(cleaner().clean(&html).to_string())
}

/// ammonia's builder, narrowed for model text; built once.
fn cleaner() -> &'static ammonia::Builder<'static> {
    static CLEANER: OnceLock<ammonia::Builder<'static>> = OnceLock::new();
    CLEANER.get_or_init(|| {
        let tags: HashSet<&str> = [
            "a",
            "blockquote",
            "br",
            "code",
            "del",
            "em",
            "h1",
            "h2",
            "h3",
            "h4",
            "h5",
            "h6",
            "hr",
            "input",
            "li",
            "ol",
            "p",
            "pre",
            "strong",
            "sup",
            "table",
            "tbody",
            "td",
            "th",
            "thead",
            "tr",
            "ul",
        ]
        .into_iter()
        .collect();
        let mut b = ammonia::Builder::default();
        b.tags(tags)
            .generic_attributes(HashSet::new())
            .tag_attributes(
                [
                    ("a", ["href", "title"].into_iter().collect()),
                    ("code", ["class"].into_iter().collect()),
                    // A task list's box: disabled and checked are all it keeps.
                    (
                        "input",
                        ["type", "disabled", "checked"].into_iter().collect(),
                    ),
                    ("th", ["align"].into_iter().collect()),
                    ("td", ["align"].into_iter().collect()),
                    ("ol", ["start"].into_iter().collect()),
                ]
                .into_iter()
                .collect(),
            )
            .set_tag_attribute_value("input", "type", "checkbox")
            .set_tag_attribute_value("input", "disabled", "")
            .url_schemes(["http", "https", "mailto"].into_iter().collect())
            // A relative link would point into this server's own API.
            .url_relative(ammonia::UrlRelative::Deny)
            .link_rel(Some("noopener noreferrer nofollow"))
            .strip_comments(true);
        b
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn html(text: &str) -> String {
        render(text).unwrap()
    }

    #[test]
    fn markdown_becomes_its_markup() {
        let rows = [
            ("**bold** and *em*", "<p><strong>bold</strong> and <em>em</em></p>"),
            ("`x < y`", "<p><code>x &lt; y</code></p>"),
            (
                "```rust title=\"a\"\nfn main() {}\n```",
                "<pre><code class=\"language-rust\">fn main() {}\n</code></pre>",
            ),
            ("- a\n- b", "<ul>\n<li>a</li>\n<li>b</li>\n</ul>"),
            ("~~gone~~", "<p><del>gone</del></p>"),
            (
                "[site](https://example.com)",
                "<p><a href=\"https://example.com\" rel=\"noopener noreferrer nofollow\">site</a></p>",
            ),
            (
                "| a | b |\n|---|---|\n| 1 | 2 |",
                "<table><thead><tr><th>a</th><th>b</th></tr></thead><tbody>\n<tr><td>1</td><td>2</td></tr>\n</tbody></table>",
            ),
        ];
        for (text, want) in rows {
            assert_eq!(html(text).trim(), want, "{text}");
        }
    }

    #[test]
    fn nothing_a_model_writes_becomes_script_handler_or_foreign_link() {
        let hostile = [
            "<script>window.pwned=1</script>",
            "<img src=x onerror=\"window.pwned=1\">",
            "[x](javascript:window.pwned=1)",
            "[x](JaVaScRiPt:alert(1))",
            "[x](data:text/html,<script>alert(1)</script>)",
            "![x](https://tracker.example/pixel.png)",
            "<a href=\"https://e.example\" onclick=\"x()\">a</a>",
            "<iframe src=\"https://e.example\"></iframe>",
            "<div style=\"position:fixed\">over</div>",
            "<svg><script>alert(1)</script></svg>",
            "```js\"><script>alert(1)</script>\nx\n```",
            "<form action=/v1/sessions><button>go</button></form>",
            "<!-- hidden --> text",
        ];
        for text in hostile {
            let out = html(text);
            check_markup(&out).unwrap_or_else(|e| panic!("{text:?} gave {out:?}: {e}"));
        }
        // The check itself refuses what it must.
        for bad in [
            "<script>x</script>",
            "<a href=\"javascript:x\">a</a>",
            "<img src=\"x\">",
            "<p onclick=\"x\">a</p>",
        ] {
            assert!(check_markup(bad).is_err(), "{bad}");
        }
    }

    /// Every tag of `html` is one [`render`] may emit, with only the
    /// attributes it may keep, and every link goes where a link may go.
    fn check_markup(html: &str) -> Result<(), String> {
        let allowed = [
            "a",
            "blockquote",
            "br",
            "code",
            "del",
            "em",
            "h1",
            "h2",
            "h3",
            "h4",
            "h5",
            "h6",
            "hr",
            "input",
            "li",
            "ol",
            "p",
            "pre",
            "strong",
            "sup",
            "table",
            "tbody",
            "td",
            "th",
            "thead",
            "tr",
            "ul",
        ];
        let mut rest = html;
        while let Some(open) = rest.find('<') {
            let close = rest[open..].find('>').ok_or("a tag is not closed")? + open;
            let tag = &rest[open + 1..close];
            rest = &rest[close + 1..];
            let tag = tag.strip_prefix('/').unwrap_or(tag);
            let (name, mut attrs) = tag.split_once(' ').unwrap_or((tag, ""));
            if !allowed.contains(&name) {
                return Err(format!("tag <{name}>"));
            }
            while let Some(eq) = attrs.find('=') {
                let attr = attrs[..eq].trim();
                let value_start = attrs[eq + 1..].strip_prefix('"').ok_or("unquoted value")?;
                let end = value_start.find('"').ok_or("unclosed value")?;
                let value = &value_start[..end];
                attrs = &value_start[end + 1..];
                let ok = match (name, attr) {
                    ("a", "href") => ["http:", "https:", "mailto:"]
                        .iter()
                        .any(|p| value.starts_with(p)),
                    ("a", "rel") => value == "noopener noreferrer nofollow",
                    ("a", "title") => true,
                    ("code", "class") => value.starts_with("language-"),
                    ("input", "type") => value == "checkbox",
                    ("input", "disabled" | "checked") => value.is_empty(),
                    ("td" | "th", "align") | ("ol", "start") => true,
                    _ => false,
                };
                if !ok {
                    return Err(format!("<{name} {attr}=\"{value}\">"));
                }
            }
        }
        Ok(())
    }

    proptest::proptest! {
        /// Whatever pieces of markup and Markdown a text is made of, what
        /// comes out holds only the allowed tags, attributes and links.
        #[test]
        fn any_text_renders_to_allowed_markup(pieces in proptest::collection::vec(
            proptest::sample::select(vec![
                "<", ">", "</", "script", "a", "img", "[x](", "](", ")", "javascript:",
                "java\tscript:", "&#106;", "&lt;", "`", "```", "\n", "\n\n", "*", "_",
                " onerror=", "\"", "'", "href=", "src=", "|", "- ", "1. ", "> ", "![",
                "<svg>", "<!--", "-->", "<https://e.example>", "\\", " ", "x",
            ]),
            0..48,
        )) {
            let text: String = pieces.concat();
            let out = render(&text).unwrap();
            proptest::prop_assert!(check_markup(&out).is_ok(), "{:?} gave {:?}: {:?}", text, out, check_markup(&out));
        }
    }

    #[test]
    fn raw_html_is_shown_as_text() {
        assert_eq!(
            html("a <b>bold</b> word").trim(),
            "<p>a &lt;b&gt;bold&lt;/b&gt; word</p>"
        );
    }

    #[test]
    fn a_task_list_keeps_only_a_disabled_box() {
        let out = html("- [x] done\n- [ ] open");
        assert!(
            out.contains("<input disabled=\"\" type=\"checkbox\" checked=\"\">"),
            "{out}"
        );
        assert!(
            out.contains("<input disabled=\"\" type=\"checkbox\">"),
            "{out}"
        );
        check_markup(&out).unwrap();
    }

    #[test]
    fn text_over_the_limit_is_not_rendered() {
        assert!(render(&"a".repeat(MAX_MARKDOWN)).is_some());
        assert!(render(&"a".repeat(MAX_MARKDOWN + 1)).is_none());
    }
}
