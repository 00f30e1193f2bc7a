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
//!   nothing else of its info string, and is highlighted by syntect's
//!   grammar for it (spans with `hl-…` classes: colour only) when it is
//!   under [`MAX_HIGHLIGHTED`].
//!
//! The page's Content-Security-Policy (`viewer.rs`) allows no inline script
//! either, so a cleaning gap would still not run code.

use std::collections::HashSet;
use std::sync::OnceLock;

use pulldown_cmark::{CodeBlockKind, CowStr, Event, Options, Parser, Tag, TagEnd};

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
    let mut events = Vec::new();
    // The fenced block being read: its language and its text so far.
    let mut block: Option<(String, String)> = None;
    for event in Parser::new_ext(text, options) {
        match event {
            // Only the language word of an info string is kept.
            Event::Start(Tag::CodeBlock(kind)) => {
                let lang = match kind {
                    CodeBlockKind::Fenced(info) => language(&info),
                    CodeBlockKind::Indented => String::new(),
                };
                block = Some((lang, String::new()));
            }
            Event::Text(t) if block.is_some() => {
                if let Some((_, code)) = block.as_mut() {
                    code.push_str(&t);
                }
            }
            Event::End(TagEnd::CodeBlock) => {
                if let Some((lang, code)) = block.take() {
                    events.push(Event::Html(CowStr::from(code_block(&lang, &code))));
                }
            }
            // Raw HTML is the model's text, not markup.
            Event::Html(html) | Event::InlineHtml(html) => events.push(Event::Text(html)),
            other => events.push(other),
        }
    }
    let mut html = String::with_capacity(text.len() + text.len() / 4);
    pulldown_cmark::html::push_html(&mut html, events.into_iter());
    Some(cleaner().clean(&html).to_string())
}

/// The language word of a fence's info string (`rust` of `rust,ignore`),
/// letters, digits and `+-_#` only.
fn language(info: &str) -> String {
    info.split(|c: char| c.is_whitespace() || c == ',' || c == '{')
        .next()
        .unwrap_or("")
        .chars()
        .filter(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '_' | '#'))
        .take(32)
        .collect()
}

/// A code block's HTML: highlighted by syntect's grammar for `lang`
/// (classes `hl-…`, which the page's stylesheet colours) when there is
/// one and the block is under [`MAX_HIGHLIGHTED`], else escaped as is.
fn code_block(lang: &str, code: &str) -> String {
    let class = if lang.is_empty() {
        String::new()
    } else {
        format!(" class=\"language-{lang}\"")
    };
    let body = highlighted(lang, code).unwrap_or_else(|| escape(code));
    format!("<pre><code{class}>{body}</code></pre>\n")
}

/// The largest code block highlighted: a grammar's regexes over megabytes
/// would hold a request for long, and a reader gains little.
pub const MAX_HIGHLIGHTED: usize = 64 * 1024;

fn highlighted(lang: &str, code: &str) -> Option<String> {
    use syntect::html::{ClassStyle, ClassedHTMLGenerator};
    use syntect::util::LinesWithEndings;
    static SYNTAXES: OnceLock<syntect::parsing::SyntaxSet> = OnceLock::new();
    if lang.is_empty() || code.len() > MAX_HIGHLIGHTED {
        return None;
    }
    let set = SYNTAXES.get_or_init(syntect::parsing::SyntaxSet::load_defaults_newlines);
    let syntax = set.find_syntax_by_token(lang)?;
    let mut out = ClassedHTMLGenerator::new_with_class_style(
        syntax,
        set,
        ClassStyle::SpacedPrefixed { prefix: "hl-" },
    );
    for line in LinesWithEndings::from(code) {
        out.parse_html_for_line_which_includes_newline(line).ok()?;
    }
    Some(out.finalize())
}

/// `text` with `&`, `<`, `>` and `"` escaped.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c => out.push(c),
        }
    }
    out
}

/// The tags model text may become: text structure only (no image, media,
/// form, frame, script or style). `span` carries the highlighter's classes.
const TAGS: &[&str] = &[
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
    "span",
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

/// ammonia's builder, narrowed for model text; built once.
fn cleaner() -> &'static ammonia::Builder<'static> {
    static CLEANER: OnceLock<ammonia::Builder<'static>> = OnceLock::new();
    CLEANER.get_or_init(|| {
        let tags: HashSet<&str> = TAGS.iter().copied().collect();
        let mut b = ammonia::Builder::default();
        b.tags(tags)
            .generic_attributes(HashSet::new())
            .tag_attributes(
                [
                    ("a", ["href", "title"].into_iter().collect()),
                    ("code", ["class"].into_iter().collect()),
                    // The highlighter's classes (`hl-…`): colour only.
                    ("span", ["class"].into_iter().collect()),
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

/// The allowlist as a check: every tag of `html` is one [`render`] may
/// emit, with only the attributes it may keep, and every link goes where a
/// link may go. What [`render`] returns always passes it (its tests and the
/// `markdown` fuzz target hold it to that); `Err` names the first tag or
/// attribute that does not.
///
/// # Errors
/// The first tag, attribute or link outside the allowlist.
pub fn allowed(html: &str) -> Result<(), String> {
    let allowed = TAGS;
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
                // A scheme's case does not matter (`HTTPS:` is `https:`).
                ("a", "href") => ["http:", "https:", "mailto:"].iter().any(|p| {
                    value
                        .get(..p.len())
                        .is_some_and(|v| v.eq_ignore_ascii_case(p))
                }),
                ("a", "rel") => value == "noopener noreferrer nofollow",
                ("a", "title") => true,
                ("code", "class") => value.starts_with("language-"),
                ("span", "class") => value.split(' ').all(|c| c.starts_with("hl-")),
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
                "```nosuchlanguage title=\"a\"\nfn main() {}\n```",
                "<pre><code class=\"language-nosuchlanguage\">fn main() {}\n</code></pre>",
            ),
            (
                "    indented <code>\n",
                "<pre><code>indented &lt;code&gt;\n</code></pre>",
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
            allowed(&out).unwrap_or_else(|e| panic!("{text:?} gave {out:?}: {e}"));
        }
        // The check itself refuses what it must.
        for bad in [
            "<script>x</script>",
            "<a href=\"javascript:x\">a</a>",
            "<img src=\"x\">",
            "<p onclick=\"x\">a</p>",
        ] {
            assert!(allowed(bad).is_err(), "{bad}");
        }
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
            proptest::prop_assert!(allowed(&out).is_ok(), "{:?} gave {:?}: {:?}", text, out, allowed(&out));
        }
    }

    #[test]
    fn a_code_block_is_highlighted_by_its_language_and_stays_its_text() {
        let out = html("```rust\nfn main() { let s = \"<b>\"; } // note\n```");
        allowed(&out).unwrap();
        assert!(
            out.starts_with(
                "<pre><code class=\"language-rust\"><span class=\"hl-source hl-rust\">"
            ),
            "{out}"
        );
        assert!(
            out.contains("<span class=\"hl-storage hl-type hl-function hl-rust\">fn</span>"),
            "{out}"
        );
        assert!(out.contains("hl-comment"), "{out}");
        assert!(
            out.contains("&lt;b&gt;"),
            "the code's text is escaped: {out}"
        );
        // What the reader sees is the code, whatever the colours.
        let text: String = {
            let mut t = String::new();
            let mut inside = false;
            for c in out.chars() {
                match c {
                    '<' => inside = true,
                    '>' => inside = false,
                    c if !inside => t.push(c),
                    _ => {}
                }
            }
            t
        };
        assert_eq!(text, "fn main() { let s = \"&lt;b&gt;\"; } // note\n\n");
        // Too long to highlight: shown as it is.
        let long = format!("```rust\n{}\n```", "x".repeat(MAX_HIGHLIGHTED + 1));
        assert!(!html(&long).contains("<span"));
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
        allowed(&out).unwrap();
    }

    #[test]
    fn text_over_the_limit_is_not_rendered() {
        assert!(render(&"a".repeat(MAX_MARKDOWN)).is_some());
        assert!(render(&"a".repeat(MAX_MARKDOWN + 1)).is_none());
    }
}
