//! The terminal: raw mode and the alternate screen on the way in, put back
//! on every way out (a panic included); keys, pastes, resizes and signals
//! into one channel with the worker's events; a frame after each batch.
//!
//! Invariants:
//! - the screen thread blocks only on the channel: keys are read on their
//!   own thread, and the worker runs the session on another;
//! - SIGHUP and SIGTERM (and a terminal that stops answering) suspend the
//!   work as Ctrl-C once does, then close; nothing is lost, the session is
//!   resumable;
//! - a frame that cannot be written (the terminal is gone) stops the
//!   drawing, never the session;
//! - each frame is one synchronized update (DEC mode 2026): a terminal that
//!   knows the mode shows it whole, never half drawn.

use std::io::Write;
use std::sync::mpsc;

use crossterm::event::{DisableBracketedPaste, EnableBracketedPaste};
use crossterm::terminal::{
    disable_raw_mode, enable_raw_mode, BeginSynchronizedUpdate, EndSynchronizedUpdate,
    EnterAlternateScreen, LeaveAlternateScreen,
};
use crossterm::{ExecutableCommand, QueueableCommand};
use ratatui::backend::CrosstermBackend;
use ratatui::Terminal;

use crate::app::App;
use crate::protocol::{Cmd, Ev};
use crate::worker::{Sessions, Start, Worker};
use crate::TuiError;

/// How the TUI starts.
pub struct Options {
    /// Where to start.
    pub start: Start,
    /// How sessions are opened and made.
    pub sessions: Sessions,
    /// Which calls wait for a yes.
    pub approve: cairn_agent::ApprovePolicy,
    /// The model spec shown before a session exists.
    pub model: String,
    /// The directory a new session works in.
    pub workspace: String,
    /// Colours allowed.
    pub color: bool,
}

fn restore_terminal() {
    let mut out = std::io::stdout();
    // A panic mid-frame leaves an update open.
    let _ = out.execute(EndSynchronizedUpdate);
    let _ = out.execute(DisableBracketedPaste);
    let _ = out.execute(LeaveAlternateScreen);
    let _ = out.execute(crossterm::cursor::Show);
    let _ = disable_raw_mode();
    let _ = out.flush();
}

/// Draws one frame as one synchronized update.
fn frame(
    terminal: &mut Terminal<CrosstermBackend<std::io::Stdout>>,
    app: &App,
) -> std::io::Result<()> {
    terminal.backend_mut().queue(BeginSynchronizedUpdate)?;
    let drawn = terminal.draw(|f| crate::view::draw(f, app)).map(drop);
    // Ended even when the frame failed: the terminal must not wait on it.
    let ended = terminal
        .backend_mut()
        .execute(EndSynchronizedUpdate)
        .map(drop);
    drawn.and(ended)
}

/// Runs the TUI until the user quits; returns the session it ended on.
///
/// # Errors
/// The terminal cannot be set up, or a thread cannot be started.
pub fn run(options: Options) -> Result<Option<String>, TuiError> {
    let Options {
        start,
        sessions,
        approve,
        model,
        workspace,
        color,
    } = options;
    let (tx, rx) = mpsc::channel::<Ev>();
    let (cmd_tx, cmd_rx) = mpsc::channel::<Cmd>();

    // Signals first, so a SIGHUP from here on is a suspend, not a death.
    let mut signals = signal_hook::iterator::Signals::new([
        signal_hook::consts::SIGHUP,
        signal_hook::consts::SIGTERM,
        signal_hook::consts::SIGINT,
    ])
    .map_err(TuiError::Terminal)?;
    let sig_tx = tx.clone();
    let sig_handle = signals.handle();
    std::thread::Builder::new()
        .name("cairn-tui-signals".into())
        .spawn(move || {
            for s in signals.forever() {
                if sig_tx.send(Ev::Signal(s)).is_err() {
                    break;
                }
            }
        })
        .map_err(TuiError::Terminal)?;

    let worker = Worker::new(sessions, tx.clone(), approve).map_err(TuiError::Terminal)?;
    let opening = matches!(start, Start::Open(_));
    let worker = std::thread::Builder::new()
        .name("cairn-tui-worker".into())
        .spawn(move || worker.run(start, cmd_rx))
        .map_err(TuiError::Terminal)?;

    enable_raw_mode().map_err(TuiError::Terminal)?;
    let mut out = std::io::stdout();
    let entered = out
        .execute(EnterAlternateScreen)
        .and_then(|o| o.execute(EnableBracketedPaste).map(drop));
    if let Err(e) = entered {
        restore_terminal();
        return Err(TuiError::Terminal(e));
    }
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore_terminal();
        previous(info);
    }));

    let input_tx = tx.clone();
    std::thread::Builder::new()
        .name("cairn-tui-input".into())
        .spawn(move || loop {
            match crossterm::event::read() {
                Ok(e) => {
                    if input_tx.send(Ev::Input(e)).is_err() {
                        break;
                    }
                }
                Err(_) => {
                    let _ = input_tx.send(Ev::InputClosed);
                    break;
                }
            }
        })
        .map_err(TuiError::Terminal)?;
    drop(tx);

    let mut app = App::new(&workspace, &model, color);
    if opening {
        app.activity = crate::app::Activity::Opening;
    }
    let backend = CrosstermBackend::new(std::io::stdout());
    let mut terminal = Terminal::new(backend).map_err(TuiError::Terminal)?;
    let mut drawing = frame(&mut terminal, &app).is_ok();
    let mut closed = false;
    while let Ok(first) = rx.recv() {
        let mut batch = vec![first];
        // Everything already waiting goes into one frame.
        while let Ok(more) = rx.try_recv() {
            batch.push(more);
            if batch.len() >= 512 {
                break;
            }
        }
        for ev in batch {
            if matches!(ev, Ev::Closed | Ev::OpenFailed) {
                closed = true;
            }
            if matches!(ev, Ev::InputClosed | Ev::Signal(_)) {
                // A terminal that is gone cannot be drawn on.
                if matches!(ev, Ev::InputClosed)
                    || matches!(ev, Ev::Signal(s) if s == signal_hook::consts::SIGHUP)
                {
                    drawing = false;
                }
            }
            for cmd in app.event(ev) {
                let _ = cmd_tx.send(cmd);
            }
        }
        if closed {
            break;
        }
        if drawing && frame(&mut terminal, &app).is_err() {
            drawing = false;
        }
    }
    let _ = cmd_tx.send(Cmd::Quit);
    let not_opened = worker.join().ok().flatten();
    sig_handle.close();
    restore_terminal();
    if let Some(e) = not_opened {
        return Err(TuiError::Open(e));
    }
    Ok(app.session.clone())
}
