//! Snapshots of the screens of DESIGN §11 at 80×24 and 40×10, drawn by the
//! real view code into ratatui's test backend.

use cairn_journal::{Cost, CostState, Outcome, Totals};
use cairn_tui::Cell;
use cairn_tui::{Activity, App, Mode};
use cairn_tui::{Preview, RewindAction, RewindPoint};
use cairn_workspace::{ChangeKind, FileChange, LeftAlone};
use ratatui::backend::TestBackend;
use ratatui::Terminal;

fn screen(app: &App, cols: u16, rows: u16) -> String {
    let mut t = Terminal::new(TestBackend::new(cols, rows)).expect("test terminal");
    t.draw(|f| cairn_tui::draw(f, app)).expect("draw");
    let buf = t.backend().buffer();
    let mut out = String::new();
    for y in 0..rows {
        let mut line = String::new();
        for x in 0..cols {
            line.push_str(buf[(x, y)].symbol());
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

fn session() -> App {
    let mut app = App::new("/home/ada/project", "script:demo.json", false);
    app.session = Some("01JDEMO0000000000000000000".into());
    app.activity = Activity::Idle;
    app.snapshots = Some(7);
    app.totals = Totals {
        turns: 3,
        input_tokens: 1200,
        output_tokens: 345,
        cost: Cost {
            state: CostState::Known,
            usd: Some(0.0123),
        },
        tool_calls: 2,
        tool_calls_unstated: false,
    };
    app.cells = vec![
        Cell::User("fix the failing test in add.rs".into()),
        Cell::Assistant {
            text: "The test fails because `add` subtracts. I will fix it.".into(),
            streaming: false,
        },
        tool_cell(),
        Cell::Assistant {
            text: "Fixed: `add` now returns a + b, and the test passes.".into(),
            streaming: false,
        },
    ];
    app
}

fn tool_cell() -> Cell {
    Cell::Tool {
        id: "call_1".into(),
        name: "shell".into(),
        args: r#"{"command":"sh -c 'echo x > f; rm g'"}"#.into(),
        outcome: Some(Outcome::Ok),
        output: "line 1\n\u{1b}]52;c;ZXZpbA==\u{7}evil\nline 3\nline 4\nline 5\nline 6".into(),
    }
}

fn points() -> Vec<RewindPoint> {
    vec![
        RewindPoint {
            number: 1,
            seq: 2,
            text: "write a greeting to hello.txt".into(),
            turn: Some(1),
            files: vec!["hello.txt".into()],
        },
        RewindPoint {
            number: 2,
            seq: 14,
            text: "now run the shell command".into(),
            turn: Some(3),
            files: vec!["f".into(), "g".into()],
        },
        RewindPoint {
            number: 3,
            seq: 30,
            text: "thanks".into(),
            turn: Some(5),
            files: vec![],
        },
    ]
}

fn confirm() -> Mode {
    Mode::Confirm {
        point: points()[1].clone(),
        index: 1,
        action: RewindAction::Both,
        scroll: 0,
        preview: Preview {
            target: "pre:turn:3".into(),
            changes: vec![
                FileChange {
                    path: "f".into(),
                    change: ChangeKind::Deleted,
                    added: 0,
                    removed: 1,
                    binary: false,
                },
                FileChange {
                    path: "g".into(),
                    change: ChangeKind::Added,
                    added: 2,
                    removed: 0,
                    binary: false,
                },
            ],
            left_alone: vec![LeftAlone {
                path: "notes.md".into(),
                reason: "changed outside the session (between pause:turn:2 and resume:turn:3), so it is yours and is left alone".into(),
            }],
            bank: "snap_0007".into(),
        },
    }
}

#[test]
fn main_screen() {
    let app = session();
    insta::assert_snapshot!("main_80x24", screen(&app, 80, 24));
    insta::assert_snapshot!("main_40x10", screen(&app, 40, 10));
}

#[test]
fn a_tool_cell_folds_long_output_and_shows_escapes() {
    let mut app = session();
    app.cells = vec![tool_cell()];
    let s = screen(&app, 80, 24);
    assert!(s.contains("… 3 more line(s)"), "{s}");
    assert!(s.contains("\\x1b]52"), "the escape is shown, not sent: {s}");
    insta::assert_snapshot!("tool_80x24", s);
    insta::assert_snapshot!("tool_40x10", screen(&app, 40, 10));
    app.expand = true;
    let s = screen(&app, 80, 24);
    assert!(s.contains("line 6"), "{s}");
}

#[test]
fn rewind_picker_focus_starts_on_now() {
    let mut app = session();
    let p = points();
    let n = p.len();
    app.mode = Mode::Rewind {
        points: p,
        selected: n,
    };
    let s = screen(&app, 80, 24);
    assert!(s.contains("› now (change nothing)"), "{s}");
    insta::assert_snapshot!("rewind_80x24", s);
    insta::assert_snapshot!("rewind_40x10", screen(&app, 40, 10));
}

#[test]
fn confirm_screen_lists_diff_stat_and_the_operators_edits() {
    let mut app = session();
    app.mode = confirm();
    let s = screen(&app, 80, 24);
    assert!(s.contains("f  deleted +0 -1"), "{s}");
    assert!(s.contains("notes.md"), "{s}");
    insta::assert_snapshot!("confirm_80x24", s);
    insta::assert_snapshot!("confirm_40x10", screen(&app, 40, 10));
}

#[test]
fn a_streaming_answer_and_an_approval_prompt() {
    let mut app = session();
    app.cells.push(Cell::Assistant {
        text: "Working on it".into(),
        streaming: true,
    });
    let s = screen(&app, 80, 24);
    assert!(s.contains("Working on it▌"), "{s}");
}

#[test]
fn an_approval_for_a_file_write_shows_its_diff_not_its_json() {
    let mut app = session();
    let (reply, _answer) = tokio::sync::oneshot::channel();
    let call = cairn_journal::ToolCall {
        id: "w1".into(),
        name: "write_file".into(),
        arguments: serde_json::json!({"path": "notes.txt", "content": "alpha\nBETA\n"}),
        raw_arguments: None,
    };
    app.approval = Some((call, reply));
    app.approval_preview =
        Some("--- a/notes.txt\n+++ b/notes.txt\n@@ -1,2 +1,2 @@\n alpha\n-beta\n+BETA\n".into());
    let s = screen(&app, 80, 24);
    assert!(s.contains("allow write_file notes.txt?"), "{s}");
    assert!(s.contains("-beta") && s.contains("+BETA"), "{s}");
    assert!(!s.contains("\"content\""), "{s}");
    // Without a diff (a shell call), the arguments as before.
    app.approval_preview = None;
    let s = screen(&app, 80, 24);
    assert!(s.contains("\"content\""), "{s}");
}
