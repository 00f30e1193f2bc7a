//! What keys do (DESIGN §11), on the screen's state alone.

use cairn_agent::StopLevel;
use cairn_tui::{Activity, App, Mode};
use cairn_tui::{Cmd, Ev, RewindPoint};
use crossterm::event::{Event, KeyCode, KeyEvent, KeyModifiers};

fn key(app: &mut App, code: KeyCode) -> Vec<Cmd> {
    app.key(KeyEvent::new(code, KeyModifiers::NONE))
}

fn ctrl(app: &mut App, c: char) -> Vec<Cmd> {
    app.key(KeyEvent::new(KeyCode::Char(c), KeyModifiers::CONTROL))
}

fn typed(app: &mut App, s: &str) {
    for c in s.chars() {
        key(app, KeyCode::Char(c));
    }
}

fn idle() -> App {
    let mut app = App::new("/w", "script:x", false);
    app.session = Some("01JTEST".into());
    app.activity = Activity::Idle;
    app
}

fn points() -> Vec<RewindPoint> {
    (1..=2)
        .map(|n| RewindPoint {
            number: n,
            seq: n as u64 * 10,
            text: format!("turn {n}"),
            turn: Some(n as u64),
            files: vec![],
        })
        .collect()
}

#[test]
fn enter_sends_and_ctrl_c_once_suspends_twice_interrupts() {
    let mut app = idle();
    typed(&mut app, "hello");
    let cmds = key(&mut app, KeyCode::Enter);
    let stop = match cmds.as_slice() {
        [Cmd::Send { text, stop }] => {
            assert_eq!(text, "hello");
            stop.clone()
        }
        other => panic!("{other:?}"),
    };
    assert!(app.working());
    assert_eq!(stop.level(), StopLevel::None);
    ctrl(&mut app, 'c');
    assert_eq!(stop.level(), StopLevel::Graceful);
    assert_eq!(app.activity, Activity::Suspending);
    ctrl(&mut app, 'c');
    assert_eq!(stop.level(), StopLevel::Immediate);
}

#[test]
fn ctrl_d_quits_only_on_an_empty_composer() {
    let mut app = idle();
    typed(&mut app, "ab");
    key(&mut app, KeyCode::Left);
    assert!(ctrl(&mut app, 'd').is_empty());
    assert_eq!(app.composer.text(), "a", "Ctrl-D deleted under the cursor");
    ctrl(&mut app, 'u');
    let cmds = ctrl(&mut app, 'd');
    assert!(matches!(cmds.as_slice(), [Cmd::Quit]));
    assert!(app.quit);
}

#[test]
fn ctrl_d_while_working_suspends_first_then_quits() {
    let mut app = idle();
    typed(&mut app, "go");
    let stop = match key(&mut app, KeyCode::Enter).pop() {
        Some(Cmd::Send { stop, .. }) => stop,
        other => panic!("{other:?}"),
    };
    assert!(ctrl(&mut app, 'd').is_empty());
    assert_eq!(stop.level(), StopLevel::Graceful);
    assert!(!app.quit);
    let cmds = app.event(Ev::Ended {
        reason: cairn_journal::TerminalReason::Suspended,
        detail: None,
        totals: Default::default(),
    });
    assert!(matches!(cmds.as_slice(), [Cmd::Quit]));
}

#[test]
fn esc_esc_on_an_empty_composer_opens_rewind_and_a_stray_enter_does_nothing() {
    let mut app = idle();
    assert!(key(&mut app, KeyCode::Esc).is_empty());
    let cmds = key(&mut app, KeyCode::Esc);
    assert!(matches!(cmds.as_slice(), [Cmd::RewindPoints]));
    app.event(Ev::Points(points()));
    match &app.mode {
        Mode::Rewind { selected, points } => assert_eq!(*selected, points.len(), "focus on now"),
        other => panic!("{other:?}"),
    }
    assert!(key(&mut app, KeyCode::Enter).is_empty());
    assert!(matches!(app.mode, Mode::Transcript), "Enter on now closes");

    // With text in the composer, Esc Esc does not open it.
    let mut app = idle();
    typed(&mut app, "x");
    key(&mut app, KeyCode::Esc);
    assert!(key(&mut app, KeyCode::Esc).is_empty());
}

#[test]
fn the_picker_leads_to_a_preview_then_a_confirmed_rewind() {
    let mut app = idle();
    app.command("/rewind");
    app.event(Ev::Points(points()));
    key(&mut app, KeyCode::Up);
    key(&mut app, KeyCode::Up);
    assert!(key(&mut app, KeyCode::Enter).is_empty(), "to the actions");
    // Code and conversation is the first action.
    let cmds = key(&mut app, KeyCode::Enter);
    assert!(matches!(
        cmds.as_slice(),
        [Cmd::Preview {
            point: 0,
            action: cairn_tui::RewindAction::Both
        }]
    ));
    app.event(Ev::Preview {
        point: 0,
        action: cairn_tui::RewindAction::Both,
        preview: cairn_tui::Preview {
            target: "pre:turn:1".into(),
            changes: vec![],
            left_alone: vec![],
            bank: "s".into(),
        },
    });
    assert!(matches!(app.mode, Mode::Confirm { .. }));
    let cmds = key(&mut app, KeyCode::Enter);
    assert!(matches!(cmds.as_slice(), [Cmd::Rewind { point: 0, .. }]));
}

#[test]
fn commands_that_race_the_work_wait_for_it() {
    let mut app = idle();
    typed(&mut app, "go");
    key(&mut app, KeyCode::Enter);
    assert!(app.command("/rewind").is_empty());
    assert!(app.hint().is_some_and(|h| h.contains("/pause")));
    assert!(app.command("/cost").is_empty());
}

#[test]
fn a_paste_keeps_its_lines_in_one_message() {
    let mut app = idle();
    app.event(Ev::Input(Event::Paste("one\ntwo".into())));
    let cmds = key(&mut app, KeyCode::Enter);
    assert!(matches!(cmds.as_slice(), [Cmd::Send { text, .. }] if text == "one\ntwo"));
}

#[test]
fn a_hangup_while_working_suspends_then_closes() {
    let mut app = idle();
    typed(&mut app, "go");
    let stop = match key(&mut app, KeyCode::Enter).pop() {
        Some(Cmd::Send { stop, .. }) => stop,
        other => panic!("{other:?}"),
    };
    assert!(app
        .event(Ev::Signal(signal_hook::consts::SIGHUP))
        .is_empty());
    assert_eq!(stop.level(), StopLevel::Graceful, "as Ctrl-C once");
    let cmds = app.event(Ev::Ended {
        reason: cairn_journal::TerminalReason::Suspended,
        detail: None,
        totals: Default::default(),
    });
    assert!(matches!(cmds.as_slice(), [Cmd::Quit]));
}

#[test]
fn a_prompt_answered_from_the_viewer_goes_and_says_so() {
    use cairn_agent::Decision;
    use cairn_journal::ToolCall;
    let mut app = idle();
    app.activity = Activity::Working;
    let call = ToolCall {
        id: "c1".into(),
        name: "shell".into(),
        arguments: serde_json::json!({"command": "make"}),
        raw_arguments: None,
    };
    let (reply, mut heard) = tokio::sync::oneshot::channel();
    app.event(Ev::Approval {
        call: call.clone(),
        reply,
        preview: None,
    });
    assert!(app.approval.is_some());
    assert_eq!(app.activity, Activity::Approving);
    // An answer about another call leaves the prompt alone.
    app.event(Ev::AnsweredElsewhere {
        call: "other".into(),
        decision: Decision::Run,
    });
    assert!(app.approval.is_some());
    app.event(Ev::AnsweredElsewhere {
        call: "c1".into(),
        decision: Decision::Decline,
    });
    assert!(app.approval.is_none(), "the prompt went");
    assert_eq!(app.activity, Activity::Working);
    // The key that would have answered it now answers nothing.
    key(&mut app, KeyCode::Char('y'));
    assert!(heard.try_recv().is_err(), "nothing was sent from here");
    let shown = format!("{:?}", app.cells);
    assert!(
        shown.contains("answered from the viewer: declined"),
        "{shown}"
    );
}
