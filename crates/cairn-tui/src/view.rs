//! Drawing the [`App`]: a pure function of the state and the frame size.
//!
//! Invariants:
//! - only what is on screen is laid out: the transcript is built from its
//!   last cell upwards until the area is full, so a session of 100,000
//!   records draws as fast as one of ten;
//! - every string from a record or the model is made [`visible`] before it
//!   is drawn, so nothing a model says reaches the terminal as a control
//!   sequence;
//! - with colour off (`NO_COLOR`), nothing is coloured: emphasis is bold,
//!   dim or reversed only.

use ratatui::layout::{Constraint, Layout, Position, Rect};
use ratatui::style::{Color, Modifier, Style};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Clear, Paragraph};
use ratatui::Frame;

use cairn_journal::Outcome;

use crate::app::{Activity, App, Mode};
use crate::protocol::RewindAction;
use crate::text::{display_width, one_line, visible, wrap};
use crate::transcript::{cost, Cell};
use crate::worker::stat_line;

/// Tool output lines shown before the rest is folded.
const FOLDED_LINES: usize = 3;

/// The styles, with or without colour.
#[derive(Clone, Copy)]
struct Theme {
    color: bool,
}

impl Theme {
    fn fg(self, c: Color) -> Style {
        if self.color {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    }
    fn user(self) -> Style {
        self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
    }
    fn dim(self) -> Style {
        if self.color {
            Style::default().fg(Color::DarkGray)
        } else {
            Style::default().add_modifier(Modifier::DIM)
        }
    }
    fn tool(self) -> Style {
        self.fg(Color::Magenta).add_modifier(Modifier::BOLD)
    }
    fn ok(self) -> Style {
        self.fg(Color::Green)
    }
    fn bad(self) -> Style {
        self.fg(Color::Red).add_modifier(Modifier::BOLD)
    }
    fn warn(self) -> Style {
        self.fg(Color::Yellow).add_modifier(Modifier::BOLD)
    }
    fn title(self) -> Style {
        Style::default().add_modifier(Modifier::BOLD)
    }
    fn selected(self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }
    fn status(self) -> Style {
        if self.color {
            Style::default().bg(Color::Blue).fg(Color::White)
        } else {
            Style::default().add_modifier(Modifier::REVERSED)
        }
    }
}

/// Draws the whole screen.
pub fn draw(frame: &mut Frame<'_>, app: &App) {
    let theme = Theme { color: app.color };
    let area = frame.area();
    if area.width < 8 || area.height < 3 {
        frame.render_widget(Paragraph::new("cairn: the terminal is too small"), area);
        return;
    }
    let width = area.width as usize;
    let prompt = approval_lines(app, width, theme);
    let hint = app.hint().map(|h| {
        Line::from(Span::styled(
            one_line(h, width.saturating_sub(1)),
            theme.dim(),
        ))
    });
    let composer = composer_lines(app, width);
    let max_composer = ((area.height as usize) / 3).max(1);
    let composer_h = composer.0.len().clamp(1, max_composer);
    let extra = prompt.len() + usize::from(hint.is_some());
    let rows = Layout::vertical([
        Constraint::Min(1),
        Constraint::Length(extra as u16),
        Constraint::Length(composer_h as u16),
        Constraint::Length(1),
    ])
    .split(area);

    frame.render_widget(Clear, rows[0]);
    match &app.mode {
        Mode::Transcript => transcript(frame, rows[0], app, theme),
        Mode::Help => help(frame, rows[0], theme),
        mode => picker(frame, rows[0], mode, theme),
    }

    let mut lines = prompt;
    lines.extend(hint);
    frame.render_widget(Paragraph::new(lines), rows[1]);

    // The composer, scrolled so the cursor's line is visible.
    let (lines, (cur_row, cur_col)) = composer;
    let first = (cur_row + 1).saturating_sub(composer_h);
    let shown: Vec<Line<'_>> = lines.into_iter().skip(first).take(composer_h).collect();
    frame.render_widget(Paragraph::new(shown), rows[2]);
    if matches!(app.mode, Mode::Transcript) && app.approval.is_none() {
        frame.set_cursor_position(Position::new(
            rows[2].x + (cur_col as u16).min(rows[2].width.saturating_sub(1)),
            rows[2].y + (cur_row - first) as u16,
        ));
    }

    frame.render_widget(
        Paragraph::new(Line::from(Span::styled(
            status_text(app, width),
            theme.status(),
        ))),
        rows[3],
    );
}

/// The status line: session, model, tokens, cost and its state, snapshots,
/// and what the session is doing. Cut to the width.
pub fn status_text(app: &App, width: usize) -> String {
    let t = &app.totals;
    let tokens = t.tokens();
    let state = match &app.activity {
        Activity::New => "new".to_owned(),
        Activity::Opening => "opening…".to_owned(),
        Activity::Idle => "idle".to_owned(),
        Activity::CutShort => "stopped mid-turn".to_owned(),
        Activity::Working => "working".to_owned(),
        Activity::Suspending => "suspending…".to_owned(),
        Activity::Interrupting => "stopping…".to_owned(),
        Activity::Approving => "approve?".to_owned(),
        Activity::Busy(what) => format!("{what}…"),
    };
    let session = app
        .session
        .clone()
        .unwrap_or_else(|| "(new session)".into());
    let cost_state = match t.cost.state {
        cairn_journal::CostState::Known => format!("{} known", cost(t)),
        cairn_journal::CostState::Zero => "free".into(),
        cairn_journal::CostState::Unknown => "cost unknown".into(),
    };
    let snaps = app
        .snapshots
        .map(|n| format!("{n} snap"))
        .unwrap_or_else(|| "- snap".into());
    // Narrow terminals keep what matters most: state, session, tokens,
    // cost; the model goes first, then the id is shortened.
    let model = visible(&app.model).into_owned();
    let session = if width < 100 && session.len() > 12 {
        format!("{}…", session.chars().take(10).collect::<String>())
    } else {
        session
    };
    let mut parts = vec![state, session];
    if width >= 60 {
        parts.push(model);
    }
    parts.extend([format!("{tokens} tok"), cost_state, snaps]);
    let mut s = String::from(" ");
    for (i, p) in parts.iter().enumerate() {
        if i > 0 {
            s.push_str(" · ");
        }
        s.push_str(p);
    }
    let s = one_line(&s, width);
    let pad = width.saturating_sub(display_width(&s));
    format!("{s}{}", " ".repeat(pad))
}

/// The most lines of a diff an approval prompt shows.
const MAX_DIFF_LINES: usize = 12;

fn approval_lines(app: &App, width: usize, theme: Theme) -> Vec<Line<'static>> {
    let Some((call, _)) = &app.approval else {
        return Vec::new();
    };
    let path = call.arguments.get("path").and_then(|p| p.as_str());
    let mut lines: Vec<Line<'static>> = match (&app.approval_preview, path) {
        // A file write or edit: the diff it would make, not its JSON.
        (Some(diff), Some(path)) => {
            let mut l = vec![Line::from(Span::styled(
                one_line(&format!("allow {} {path}?", call.name), width),
                theme.warn(),
            ))];
            let shown: Vec<&str> = diff.lines().collect();
            for d in shown.iter().take(MAX_DIFF_LINES) {
                let style = if d.starts_with('+') && !d.starts_with("+++") {
                    theme.warn()
                } else {
                    theme.dim()
                };
                l.push(Line::from(Span::styled(one_line(d, width), style)));
            }
            if shown.len() > MAX_DIFF_LINES {
                l.push(Line::from(Span::styled(
                    one_line(
                        &format!("… {} more line(s)", shown.len() - MAX_DIFF_LINES),
                        width,
                    ),
                    theme.dim(),
                )));
            }
            l
        }
        _ => {
            let head = format!("allow {} {}?", call.name, call.arguments);
            wrap(&visible(&head), width)
                .into_iter()
                .take(3)
                .map(|l| Line::from(Span::styled(l, theme.warn())))
                .collect()
        }
    };
    lines.push(Line::from(Span::styled(
        one_line("y runs it · n declines (the model is told)", width),
        theme.dim(),
    )));
    lines
}

/// The composer's lines, and the cursor's (row, column) among them.
fn composer_lines(app: &App, width: usize) -> (Vec<Line<'static>>, (usize, usize)) {
    let text = app.composer.text();
    let cursor = app.composer.cursor();
    let inner = width.saturating_sub(2).max(1);
    let mut lines = Vec::new();
    let mut at = (0, 2);
    let mut offset = 0usize;
    for (n, raw) in text.split('\n').enumerate() {
        let wrapped = wrap_exact(raw, inner);
        let mut consumed = 0usize;
        for (k, piece) in wrapped.iter().enumerate() {
            let prefix = if n == 0 && k == 0 { "› " } else { "  " };
            let start = offset + consumed;
            let end = start + piece.len();
            let last_piece = k + 1 == wrapped.len();
            if cursor >= start && (cursor < end || (last_piece && cursor == end)) {
                let col = display_width(&text[start..cursor]);
                at = (lines.len(), 2 + col);
            }
            lines.push(Line::from(format!("{prefix}{}", visible(piece))));
            consumed += piece.len();
        }
        offset += raw.len() + 1;
    }
    if text.is_empty() {
        let placeholder = if app.session.is_none() {
            "› write a task for the model; /help for commands"
        } else {
            "› "
        };
        return (vec![Line::from(one_line(placeholder, width))], (0, 2));
    }
    (lines, at)
}

/// Splits a line into pieces of at most `cols` columns without dropping a
/// character (the composer's cursor must map onto every byte).
fn wrap_exact(s: &str, cols: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut used = 0;
    for (i, c) in s.char_indices() {
        let w = unicode_width::UnicodeWidthChar::width(c).unwrap_or(0);
        if used + w > cols && i > start {
            out.push(&s[start..i]);
            start = i;
            used = 0;
        }
        used += w;
    }
    out.push(&s[start..]);
    out
}

/// The lines of one cell at `width`.
pub fn cell_lines(
    cell: &Cell,
    width: usize,
    expand: bool,
    theme_color: bool,
) -> Vec<Line<'static>> {
    let theme = Theme { color: theme_color };
    let width = width.max(4);
    let mut out = Vec::new();
    let body = |text: &str, indent: &str, style: Style, out: &mut Vec<Line<'static>>| {
        for l in wrap(&visible(text), width.saturating_sub(indent.len()).max(1)) {
            out.push(Line::from(Span::styled(format!("{indent}{l}"), style)));
        }
    };
    match cell {
        Cell::User(text) => {
            let mut lines = wrap(&visible(text), width.saturating_sub(2).max(1)).into_iter();
            if let Some(first) = lines.next() {
                out.push(Line::from(Span::styled(format!("› {first}"), theme.user())));
            }
            for l in lines {
                out.push(Line::from(Span::styled(format!("  {l}"), theme.user())));
            }
        }
        Cell::Assistant { text, streaming } => {
            let shown = if *streaming {
                format!("{text}▌")
            } else {
                text.clone()
            };
            body(&shown, "", Style::default(), &mut out);
        }
        Cell::Tool {
            name,
            args,
            outcome,
            output,
            ..
        } => {
            let head = one_line(&format!("● {name} {args}"), width);
            out.push(Line::from(Span::styled(head, theme.tool())));
            let (label, style) = match outcome {
                None if output.is_empty() => ("running…", theme.dim()),
                None => ("pending", theme.warn()),
                Some(Outcome::Ok) => ("ok", theme.ok()),
                Some(Outcome::Error) => ("error", theme.bad()),
                Some(Outcome::Unknown) => ("unknown", theme.warn()),
                Some(Outcome::Refused) => ("refused", theme.warn()),
            };
            let text = visible(output).into_owned();
            let all: Vec<String> = text
                .lines()
                .flat_map(|l| wrap(l, width.saturating_sub(4).max(1)))
                .collect();
            let keep = if expand { all.len() } else { FOLDED_LINES };
            let mut lines = all.iter();
            let first = lines.next().cloned().unwrap_or_default();
            out.push(Line::from(vec![
                Span::styled("  ⎿ ".to_owned(), theme.dim()),
                Span::styled(label.to_owned(), style),
                Span::raw(if first.is_empty() {
                    String::new()
                } else {
                    one_line(
                        &format!(" · {first}"),
                        width.saturating_sub(4 + label.len()),
                    )
                }),
            ]));
            for l in lines.by_ref().take(keep.saturating_sub(1)) {
                out.push(Line::from(Span::styled(format!("    {l}"), theme.dim())));
            }
            let more = all.len().saturating_sub(keep.max(1));
            if more > 0 && !expand {
                out.push(Line::from(Span::styled(
                    one_line(
                        &format!("    … {more} more line(s) (Ctrl-O shows all)"),
                        width,
                    ),
                    theme.dim(),
                )));
            }
        }
        Cell::Notice(text) => body(text, "· ", theme.dim(), &mut out),
        Cell::Info { title, lines } => {
            body(title, "", theme.title(), &mut out);
            for l in lines {
                body(l, "  ", Style::default(), &mut out);
            }
        }
        Cell::Error(text) => body(text, "✗ ", theme.bad(), &mut out),
    }
    out
}

fn transcript(frame: &mut Frame<'_>, area: Rect, app: &App, theme: Theme) {
    let height = area.height as usize;
    let width = area.width as usize;
    let want = height + app.scroll;
    // From the last cell up, until the area (and the scroll) is full.
    let mut blocks: Vec<Vec<Line<'static>>> = Vec::new();
    let mut have = 0usize;
    for cell in app.cells.iter().rev() {
        let mut lines = cell_lines(cell, width, app.expand, theme.color);
        lines.insert(0, Line::default());
        have += lines.len();
        blocks.push(lines);
        if have >= want {
            break;
        }
    }
    let mut lines: Vec<Line<'static>> = blocks.into_iter().rev().flatten().collect();
    if app.cells.is_empty() {
        lines = welcome(app, width, theme);
    }
    let scroll = app.scroll.min(lines.len().saturating_sub(height));
    let end = lines.len().saturating_sub(scroll);
    let start = end.saturating_sub(height);
    let shown: Vec<Line<'static>> = lines[start..end].to_vec();
    frame.render_widget(Paragraph::new(shown), area);
}

fn welcome(app: &App, width: usize, theme: Theme) -> Vec<Line<'static>> {
    let mut out = vec![Line::from(Span::styled("cairn", theme.title()))];
    for l in [
        format!("a durable session in {}", app.workspace),
        "every turn and tool result is journaled; Ctrl-C suspends, Esc Esc rewinds, /help lists the commands".into(),
    ] {
        for w in wrap(&visible(&l), width.max(1)) {
            out.push(Line::from(Span::styled(w, theme.dim())));
        }
    }
    out
}

fn help(frame: &mut Frame<'_>, area: Rect, theme: Theme) {
    let rows = [
        (
            "Enter",
            "send (a trailing \\ or Alt-Enter or Ctrl-J: new line)",
        ),
        ("↑ ↓", "move in the message, or through what you sent"),
        (
            "Ctrl-C",
            "once: suspend after the step in flight; twice: stop now",
        ),
        (
            "Ctrl-D",
            "quit on an empty composer (the session stays resumable)",
        ),
        ("Esc Esc", "open /rewind (on an empty composer)"),
        ("Ctrl-O", "show tool output whole, or fold it again"),
        ("PgUp PgDn", "scroll the transcript"),
        (
            "/rewind",
            "go back to before a turn: code, conversation, or both",
        ),
        ("/undo", "put back the state the last rewind banked"),
        ("/diff [N]", "what the session changed since turn N began"),
        ("/fork", "branch this session here and work in the branch"),
        ("/tree", "the lineage: parents, children, fork points"),
        ("/sessions", "pick a session of this repository to resume"),
        ("/resume ID", "switch to session ID"),
        ("/checkpoint", "save | list | restore ID"),
        (
            "/pause",
            "suspend after the step in flight; the screen stays",
        ),
        ("/cost", "tokens and cost so far"),
        ("/quit", "leave (the session stays resumable)"),
    ];
    let mut lines = vec![Line::from(Span::styled(
        "keys and commands (any key closes this)",
        theme.title(),
    ))];
    let width = area.width as usize;
    for (k, what) in rows {
        let text = format!("{k:<12}{what}");
        for (i, l) in wrap(&text, width.max(1)).into_iter().enumerate() {
            let l = if i == 0 { l } else { format!("{:12}{l}", "") };
            lines.push(Line::from(l));
        }
    }
    frame.render_widget(Paragraph::new(lines), area);
}

fn picker(frame: &mut Frame<'_>, area: Rect, mode: &Mode, theme: Theme) {
    let width = area.width as usize;
    let height = area.height as usize;
    let mut head: Vec<Line<'static>> = Vec::new();
    let mut items: Vec<String> = Vec::new();
    let mut selected = 0usize;
    let mut foot: Vec<Line<'static>> = Vec::new();
    let push_wrapped = |to: &mut Vec<Line<'static>>, text: &str, style: Style| {
        for l in wrap(&visible(text), width.max(1)) {
            to.push(Line::from(Span::styled(l, style)));
        }
    };
    match mode {
        Mode::Rewind {
            points,
            selected: s,
        } => {
            push_wrapped(
                &mut head,
                "rewind: go back to before which turn?",
                theme.title(),
            );
            push_wrapped(&mut head, "↑↓ choose · Enter · Esc cancels", theme.dim());
            for p in points {
                let files = match p.files.len() {
                    0 if p.turn.is_none() => "no turn ran".to_owned(),
                    0 => "no files changed".to_owned(),
                    n => format!(
                        "{n} file(s): {}",
                        p.files
                            .iter()
                            .take(4)
                            .cloned()
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                };
                items.push(format!(
                    "{}. {} · {files} · {}",
                    p.number,
                    one_line(&p.text, 40),
                    p.name()
                ));
            }
            items.push("now (change nothing)".into());
            selected = *s;
        }
        Mode::Actions {
            points,
            point,
            selected: s,
        } => {
            let text = points.get(*point).map(|p| p.text.as_str()).unwrap_or("");
            let name = points
                .get(*point)
                .map_or_else(|| format!("message {}", point + 1), |p| p.name());
            push_wrapped(
                &mut head,
                &format!("rewind to before {name}: {}", one_line(text, 60)),
                theme.title(),
            );
            for a in [
                RewindAction::Both,
                RewindAction::Conversation,
                RewindAction::Code,
            ] {
                items.push(a.describe().to_owned());
            }
            items.push("cancel".into());
            selected = *s;
        }
        Mode::Confirm {
            point,
            action,
            preview,
            scroll,
            ..
        } => {
            push_wrapped(
                &mut head,
                &format!(
                    "rewind {} to before {} ({})",
                    match action {
                        RewindAction::Both => "code and conversation",
                        RewindAction::Code => "the code",
                        RewindAction::Conversation => "the conversation",
                    },
                    point.name(),
                    preview.target
                ),
                theme.title(),
            );
            if preview.changes.is_empty() {
                push_wrapped(&mut head, "no file changes", theme.dim());
            } else {
                push_wrapped(&mut head, "files put back:", theme.dim());
            }
            for c in &preview.changes {
                items.push(stat_line(c));
            }
            if !preview.left_alone.is_empty() {
                items.push("left alone (yours, or not captured):".into());
                for l in &preview.left_alone {
                    items.push(format!("  {} ({})", l.path, l.reason));
                }
            }
            selected = usize::MAX;
            // Every line whole (wrapped), scrolled with the arrows.
            let wrapped: Vec<String> = items
                .drain(..)
                .flat_map(|i| {
                    let indent = if i.starts_with("  ") { "    " } else { "  " };
                    wrap(&visible(&i), width.saturating_sub(2).max(1))
                        .into_iter()
                        .enumerate()
                        .map(move |(n, l)| {
                            if n == 0 {
                                l
                            } else {
                                format!("{indent}{}", l.trim_start())
                            }
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
            items = wrapped.into_iter().skip(*scroll).collect();
            push_wrapped(
                &mut foot,
                &format!(
                    "Enter rewinds · Esc cancels · ↑↓ scroll · now banked as {}: /undo reverses",
                    preview.bank
                ),
                theme.warn(),
            );
        }
        Mode::Sessions { list, selected: s } => {
            push_wrapped(
                &mut head,
                "sessions of this repository (Enter resumes, Esc cancels)",
                theme.title(),
            );
            if list.is_empty() {
                items.push("(none)".into());
            }
            for x in list {
                items.push(format!(
                    "{}  {}  {} turn(s)  {}",
                    x.id,
                    x.status,
                    x.turns,
                    one_line(x.name.as_deref().unwrap_or(""), 30)
                ));
            }
            selected = *s;
        }
        Mode::Transcript | Mode::Help => {}
    }
    let room = height.saturating_sub(head.len() + foot.len()).max(1);
    // Keep the focused item on screen.
    let first = if selected == usize::MAX {
        0
    } else {
        (selected + 1).saturating_sub(room)
    };
    let mut lines = head;
    for (i, item) in items.iter().enumerate().skip(first).take(room) {
        let focused = i == selected;
        let marker = if focused { "› " } else { "  " };
        let text = one_line(&format!("{marker}{item}"), width);
        lines.push(Line::from(Span::styled(
            text,
            if focused {
                theme.selected()
            } else {
                Style::default()
            },
        )));
    }
    lines.extend(foot);
    frame.render_widget(Paragraph::new(lines), area);
}
