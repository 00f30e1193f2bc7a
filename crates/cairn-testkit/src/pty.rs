//! A pseudo-terminal harness for end-to-end tests and benchmarks of a
//! full-screen terminal UI.
//!
//! [`Pty::spawn`] starts a program on a new PTY (a session leader with the PTY
//! as its controlling terminal, so it gets `SIGWINCH` and `SIGHUP` like under a
//! real terminal). A reader thread drains the PTY's master side into a `vt100`
//! terminal emulator, so a test reads the screen as a person would see it
//! ([`Pty::screen`]) and waits for text to appear ([`Pty::wait_for`]) instead of
//! sleeping. Every read is timed, for latency measurements
//! ([`Pty::bytes_seen`], [`Pty::last_output`]).
//!
//! The reader answers the terminal queries a TUI may block on: the cursor
//! position report (`ESC [ 6 n`, from the emulator's cursor), the device status
//! report (`ESC [ 5 n`) and primary device attributes (`ESC [ c`, which
//! crossterm sends after its keyboard-enhancement query).
//!
//! ```
//! use std::path::Path;
//! use std::time::Duration;
//! use cairn_testkit::pty::{Pty, Spawn};
//!
//! let mut pty = Pty::spawn(Spawn {
//!     program: Path::new("sh"),
//!     args: vec!["-c".into(), "printf 'name? '; read x; echo \"hi $x\"".into()],
//!     cwd: std::env::temp_dir(),
//!     env: vec![],
//!     cols: 80,
//!     rows: 24,
//! })?;
//! pty.wait_for("name?", Duration::from_secs(10)).map_err(std::io::Error::other)?;
//! pty.send(b"Ann\r")?;
//! pty.wait_for("hi Ann", Duration::from_secs(10)).map_err(std::io::Error::other)?;
//! assert_eq!(pty.wait_exit(Duration::from_secs(10)), Some(Some(0)));
//! # Ok::<(), std::io::Error>(())
//! ```
//!
//! Dropping a [`Pty`] kills the program's process group with `SIGKILL`, reaps
//! the program and stops the reader; it never hangs.

use std::fmt;
use std::fs::File;
use std::io::{self, Read, Write};
use std::os::fd::BorrowedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use portable_pty::{native_pty_system, Child, CommandBuilder, MasterPty, PtySize};
use rustix::event::{PollFd, PollFlags, Timespec};
use rustix::process::{Pid, WaitId, WaitIdOptions};

/// How long a program that has exited may stay silent before a waiter gives
/// up on it, when something else (an orphaned grandchild) still holds the
/// terminal open so that the reader sees no end of output.
const QUIET_AFTER_EXIT: Duration = Duration::from_millis(300);

/// How often the reader thread looks at its stop flag while no output comes.
const READER_POLL: Duration = Duration::from_millis(50);

/// How long [`Drop`] waits for a helper thread before it detaches it.
const DROP_PATIENCE: Duration = Duration::from_secs(2);

/// What to start on a new terminal, for [`Pty::spawn`].
#[derive(Clone, Debug)]
pub struct Spawn<'a> {
    /// The program: a path, or a name looked up in `PATH`.
    pub program: &'a Path,
    /// Its arguments (without the program name).
    pub args: Vec<String>,
    /// Its working directory; it must exist.
    pub cwd: PathBuf,
    /// Variables set on top of this process's environment (which it inherits
    /// less `COLUMNS` and `LINES`, so that the program asks the terminal for
    /// its size); `TERM` is `xterm-256color` unless set here.
    pub env: Vec<(String, String)>,
    /// The terminal's width in columns.
    pub cols: u16,
    /// The terminal's height in rows.
    pub rows: u16,
}

/// A program running on a pseudo-terminal, its screen kept by a terminal
/// emulator fed from a reader thread.
///
/// The program's exit is noticed at once (by a thread of its own) but the
/// program is reaped only when the `Pty` is dropped, so its process id stays
/// its own for [`Pty::signal`] for as long as the `Pty` lives.
pub struct Pty {
    /// The PTY's master side, kept for resizing.
    master: Mutex<Box<dyn MasterPty + Send>>,
    /// The master side again, for keys and for the reader's answers.
    writer: Arc<Mutex<File>>,
    shared: Arc<Shared>,
    child: Box<dyn Child + Send + Sync>,
    pid: u32,
    reader: Option<JoinHandle<()>>,
    waiter: Option<JoinHandle<()>>,
}

/// What the reader and waiter threads share with the [`Pty`].
struct Shared {
    state: Mutex<State>,
    /// Notified on new output, on resizing, on the end of output and on exit.
    changed: Condvar,
    /// Tells the reader thread to stop.
    stop: AtomicBool,
}

struct State {
    parser: vt100::Parser,
    queries: QueryScanner,
    /// The screen as it was when a synchronized update (DEC mode 2026) began:
    /// what waiters see until the update ends, so that no one reads a frame
    /// half drawn.
    before_frame: Option<vt100::Screen>,
    /// Every read of the master: when it returned and how many bytes.
    reads: Vec<(Instant, usize)>,
    bytes: u64,
    /// When the reader saw the end of output (EIO: every holder of the
    /// terminal closed it) or stopped.
    closed: Option<Instant>,
    /// Set once the program has exited: its exit code, `None` if a signal
    /// ended it; with the instant it was noticed.
    exit: Option<(Option<i32>, Instant)>,
}

impl State {
    /// Feeds output to the emulator, returning the answers to the queries in
    /// it (each computed at the point of the stream where its query stands).
    fn feed(&mut self, bytes: &[u8]) -> Vec<u8> {
        let mut answers = Vec::new();
        let mut start = 0;
        for (i, &b) in bytes.iter().enumerate() {
            let Some(control) = self.queries.push(b) else {
                continue;
            };
            self.parser.process(&bytes[start..=i]);
            start = i + 1;
            match control {
                Control::Query(query) => query.answer(self.parser.screen(), &mut answers),
                Control::FrameBegins => {
                    if self.before_frame.is_none() {
                        self.before_frame = Some(self.parser.screen().clone());
                    }
                }
                Control::FrameEnds => self.before_frame = None,
            }
        }
        self.parser.process(&bytes[start..]);
        answers
    }

    /// The screen as a reader sees it: a frame being drawn is not shown
    /// until it is whole, unless the program is gone (no end will come).
    fn screen(&self) -> String {
        match &self.before_frame {
            Some(before) if self.exit.is_none() && self.closed.is_none() => screen_text(before),
            _ => screen_text(self.parser.screen()),
        }
    }

    /// When output last came, or the program exited, whichever is later.
    fn last_activity(&self) -> Option<Instant> {
        let output = self.reads.last().map(|r| r.0);
        let exit = self.exit.map(|e| e.1);
        output.max(exit)
    }

    /// Whether nothing more is to be expected from the program: its terminal
    /// closed, or it exited and all went quiet. Else, when to look again.
    fn finished(&self, now: Instant) -> Result<String, Option<Instant>> {
        if let Some(closed) = self.closed {
            // The end of output usually comes just before the exit is
            // noticed: wait a little for it, to tell how the program ended.
            return match self.exit {
                Some((code, _)) => Ok(format!("the program exited ({})", describe(code))),
                None if now >= closed + QUIET_AFTER_EXIT => {
                    Ok("the program closed its terminal and runs on".to_string())
                }
                None => Err(Some(closed + QUIET_AFTER_EXIT)),
            };
        }
        let Some((code, _)) = self.exit else {
            return Err(None);
        };
        let quiet_until = self.last_activity().map_or(now, |t| t + QUIET_AFTER_EXIT);
        if now >= quiet_until {
            Ok(format!(
                "the program exited ({}) and no output followed for {QUIET_AFTER_EXIT:?}",
                describe(code)
            ))
        } else {
            Err(Some(quiet_until))
        }
    }
}

fn describe(code: Option<i32>) -> String {
    match code {
        Some(c) => format!("exit code {c}"),
        None => "killed by a signal".to_string(),
    }
}

/// The screen as text: one line per row, trailing spaces trimmed, each
/// ended by a newline.
fn screen_text(screen: &vt100::Screen) -> String {
    let (_, cols) = screen.size();
    let mut out = String::new();
    for row in screen.rows(0, cols) {
        out.push_str(row.trim_end_matches(' '));
        out.push('\n');
    }
    out
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `now + timeout`, or `None` for a timeout too long to represent (forever).
fn deadline(timeout: Duration) -> Option<Instant> {
    Instant::now().checked_add(timeout)
}

impl Shared {
    /// Waits for a change, or until `until` (forever if `None`).
    fn wait<'a>(
        &self,
        guard: MutexGuard<'a, State>,
        until: Option<Instant>,
    ) -> MutexGuard<'a, State> {
        match until {
            None => self
                .changed
                .wait(guard)
                .unwrap_or_else(PoisonError::into_inner),
            Some(t) => {
                let left = t.saturating_duration_since(Instant::now());
                self.changed
                    .wait_timeout(guard, left)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
        }
    }
}

fn pty_error(what: &str, e: anyhow::Error) -> io::Error {
    match e.downcast::<io::Error>() {
        Ok(e) => io::Error::new(e.kind(), format!("{what}: {e}")),
        Err(e) => io::Error::other(format!("{what}: {e:#}")),
    }
}

fn size(cols: u16, rows: u16) -> io::Result<PtySize> {
    if cols == 0 || rows == 0 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("a terminal of {cols}x{rows} has no cells"),
        ));
    }
    Ok(PtySize {
        rows,
        cols,
        pixel_width: 0,
        pixel_height: 0,
    })
}

impl Pty {
    /// Starts the program on a new PTY of that size (its stdin/stdout/stderr
    /// are the terminal, it is a session leader with the PTY as controlling
    /// terminal). TERM=xterm-256color unless env sets it.
    ///
    /// The program inherits this process's environment less `COLUMNS` and
    /// `LINES`, with [`Spawn::env`] on top. Errors: a zero size, a `cwd` that
    /// is not a directory, a program that cannot be found or started.
    pub fn spawn(s: Spawn<'_>) -> io::Result<Pty> {
        let pty_size = size(s.cols, s.rows)?;
        if !s.cwd.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "cannot start {}: {} is not a directory",
                    s.program.display(),
                    s.cwd.display()
                ),
            ));
        }
        let what = format!("cannot start {} on a pty", s.program.display());
        let pair = native_pty_system()
            .openpty(pty_size)
            .map_err(|e| pty_error(&what, e))?;
        let mut cmd = CommandBuilder::new(s.program);
        cmd.args(&s.args);
        cmd.cwd(&s.cwd);
        cmd.env_remove("COLUMNS");
        cmd.env_remove("LINES");
        cmd.env("TERM", "xterm-256color");
        for (k, v) in &s.env {
            cmd.env(k, v);
        }
        let mut child = pair
            .slave
            .spawn_command(cmd)
            .map_err(|e| pty_error(&what, e))?;
        // Only the program holds the slave side now, so that the reader sees
        // the end of output (EIO) once the program and its children are gone.
        drop(pair.slave);
        match attach(pair.master, child.process_id(), s.rows, s.cols) {
            Ok(a) => Ok(Pty {
                master: Mutex::new(a.master),
                writer: a.writer,
                shared: a.shared,
                child,
                pid: a.pid,
                reader: Some(a.reader),
                waiter: Some(a.waiter),
            }),
            Err(e) => {
                // A helper thread already started ends once the program is
                // gone.
                let _ = child.kill();
                let _ = child.wait();
                Err(io::Error::new(e.kind(), format!("{what}: {e}")))
            }
        }
    }

    /// Writes keys (raw bytes: b"hello\r", b"\x1b" for Esc, b"\x03" for
    /// Ctrl-C, b"\x04" Ctrl-D, bracketed paste b"\x1b[200~...\x1b[201~").
    ///
    /// Blocks while the terminal's input buffer is full (a program that reads
    /// no input fills it at a few KiB).
    pub fn send(&mut self, bytes: &[u8]) -> io::Result<()> {
        let mut w = lock(&self.writer);
        w.write_all(bytes)?;
        w.flush()
    }

    /// The screen as text, one line per row, trailing spaces trimmed.
    ///
    /// Every row is there, empty ones too, each ended by `\n`, so that
    /// `screen().lines()` yields exactly one line per row: line `i` (from 0)
    /// is row `i + 1`.
    pub fn screen(&self) -> String {
        lock(&self.shared.state).screen()
    }

    /// Waits until the screen contains `needle`; Err with the screen text (for
    /// the assertion message) on timeout or if the program exited without
    /// showing it.
    ///
    /// Ok holds the screen that contained it. The Err message says why it
    /// gave up (timeout, or the program's exit status), what it waited for,
    /// and then gives the screen.
    pub fn wait_for(&self, needle: &str, timeout: Duration) -> Result<String, String> {
        self.wait_inner(&format!("{needle:?}"), |s| s.contains(needle), timeout)
    }

    /// Waits until `pred(screen)` holds; same errors.
    ///
    /// `pred` is called with the lock on the emulator held (keep it quick), at
    /// once and again after each change of the screen.
    pub fn wait_until(
        &self,
        pred: impl Fn(&str) -> bool,
        timeout: Duration,
    ) -> Result<String, String> {
        self.wait_inner("a screen that satisfies the predicate", pred, timeout)
    }

    fn wait_inner(
        &self,
        what: &str,
        pred: impl Fn(&str) -> bool,
        timeout: Duration,
    ) -> Result<String, String> {
        let until = deadline(timeout);
        let mut st = lock(&self.shared.state);
        loop {
            let text = st.screen();
            if pred(&text) {
                return Ok(text);
            }
            let now = Instant::now();
            let next = match st.finished(now) {
                Ok(why) => return Err(give_up(&why, what, &text)),
                Err(next) => next,
            };
            if until.is_some_and(|t| now >= t) {
                return Err(give_up(
                    &format!("timed out after {timeout:?}"),
                    what,
                    &text,
                ));
            }
            let wake = match (next, until) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            st = self.shared.wait(st, wake);
        }
    }

    /// Resizes the terminal (the program gets SIGWINCH) and the emulator.
    ///
    /// The emulator is resized first, so that the program's redraw lands on a
    /// grid of the new size.
    pub fn resize(&mut self, cols: u16, rows: u16) -> io::Result<()> {
        let pty_size = size(cols, rows)?;
        lock(&self.shared.state).parser.set_size(rows, cols);
        self.shared.changed.notify_all();
        lock(&self.master)
            .resize(pty_size)
            .map_err(|e| pty_error("cannot resize the pty", e))
    }

    /// The program's process id (also its process group and session id).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Sends a signal to the program (libc::SIGKILL, SIGHUP, ...).
    ///
    /// To the program alone, not its process group. A program that has
    /// exited is not reaped before the `Pty` is dropped, so this cannot reach
    /// another process that got its id; signalling it then does nothing.
    pub fn signal(&self, sig: i32) -> io::Result<()> {
        let pid = i32::try_from(self.pid)
            .map_err(|_| io::Error::other(format!("bad process id {}", self.pid)))?;
        // SAFETY: kill(2) takes no pointers.
        if unsafe { libc::kill(pid, sig) } == -1 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    }

    /// Waits for the program to exit; None on timeout. Returns its exit code
    /// (None if killed by a signal) inside.
    ///
    /// Once it has exited, this also waits (within the timeout) for the output
    /// it wrote to reach the screen: until the terminal closes, or no output
    /// came for a short while if a child of the program still holds it.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<Option<i32>> {
        let until = deadline(timeout);
        let mut st = lock(&self.shared.state);
        loop {
            let now = Instant::now();
            match (st.exit, st.finished(now)) {
                (Some((code, _)), Ok(_)) => return Some(code),
                (Some((code, _)), Err(_)) if until.is_some_and(|t| now >= t) => return Some(code),
                (None, _) if until.is_some_and(|t| now >= t) => return None,
                (_, Err(Some(next))) => {
                    let wake = until.map_or(next, |t| t.min(next));
                    st = self.shared.wait(st, Some(wake));
                }
                _ => st = self.shared.wait(st, until),
            }
        }
    }

    /// Total bytes the program has written so far (for latency measurement:
    /// note the count, send a key, wait until it grows and the screen shows
    /// the effect).
    pub fn bytes_seen(&self) -> u64 {
        lock(&self.shared.state).bytes
    }

    /// Instant at which output was last received.
    ///
    /// Taken as the read of the master returned, before the emulator saw it.
    pub fn last_output(&self) -> Option<Instant> {
        lock(&self.shared.state).reads.last().map(|r| r.0)
    }
}

fn give_up(why: &str, what: &str, screen: &str) -> String {
    format!("{why} waiting for {what}; the screen was:\n{screen}")
}

impl fmt::Debug for Pty {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let st = lock(&self.shared.state);
        let (rows, cols) = st.parser.screen().size();
        f.debug_struct("Pty")
            .field("pid", &self.pid)
            .field("size", &format_args!("{cols}x{rows}"))
            .field("bytes_seen", &st.bytes)
            .field("exit", &st.exit.map(|e| e.0))
            .field("closed", &st.closed.is_some())
            .finish_non_exhaustive()
    }
}

impl Drop for Pty {
    /// SIGKILLs the program's process group (the program, and whatever of
    /// its children stayed in its group), reaps the program, and stops the
    /// helper threads; a thread that does not finish within a couple of
    /// seconds (a program stuck in the kernel) is detached, not waited for.
    fn drop(&mut self) {
        if let Ok(pid) = i32::try_from(self.pid) {
            // SAFETY: kill(2) takes no pointers. The program is not reaped
            // yet, so its id (and its group's) is still its own.
            unsafe {
                libc::kill(-pid, libc::SIGKILL);
                libc::kill(pid, libc::SIGKILL);
            }
        }
        let until = Instant::now() + DROP_PATIENCE;
        let mut st = lock(&self.shared.state);
        while st.exit.is_none() && Instant::now() < until {
            st = self.shared.wait(st, Some(until));
        }
        let exited = st.exit.is_some();
        drop(st);
        if exited {
            if let Some(w) = self.waiter.take() {
                let _ = w.join();
            }
            let _ = self.child.wait();
        } else {
            let _ = self.child.try_wait();
        }

        self.shared.stop.store(true, Ordering::Release);
        let until = Instant::now() + DROP_PATIENCE;
        let mut st = lock(&self.shared.state);
        while st.closed.is_none() && Instant::now() < until {
            st = self.shared.wait(st, Some(until));
        }
        let closed = st.closed.is_some();
        drop(st);
        if closed {
            if let Some(r) = self.reader.take() {
                let _ = r.join();
            }
        }
    }
}

/// The parts of a [`Pty`] around its program.
struct Attached {
    master: Box<dyn MasterPty + Send>,
    writer: Arc<Mutex<File>>,
    shared: Arc<Shared>,
    pid: u32,
    reader: JoinHandle<()>,
    waiter: JoinHandle<()>,
}

/// Sets up the emulator and starts the waiter and reader threads for a
/// program started on `master`.
fn attach(
    master: Box<dyn MasterPty + Send>,
    pid: Option<u32>,
    rows: u16,
    cols: u16,
) -> io::Result<Attached> {
    let pid = pid.ok_or_else(|| io::Error::other("the child has no process id"))?;
    let wait_pid = i32::try_from(pid)
        .ok()
        .and_then(Pid::from_raw)
        .ok_or_else(|| io::Error::other(format!("bad process id {pid}")))?;
    let raw_master = master
        .as_raw_fd()
        .ok_or_else(|| io::Error::other("the pty master has no file descriptor"))?;
    // SAFETY: `master` owns this descriptor and outlives the borrow, which
    // only duplicates it.
    let master_fd = unsafe { BorrowedFd::borrow_raw(raw_master) };
    let read_fd = File::from(master_fd.try_clone_to_owned()?);
    let writer = Arc::new(Mutex::new(File::from(master_fd.try_clone_to_owned()?)));

    let shared = Arc::new(Shared {
        state: Mutex::new(State {
            parser: vt100::Parser::new(rows, cols, 0),
            queries: QueryScanner::default(),
            before_frame: None,
            reads: Vec::new(),
            bytes: 0,
            closed: None,
            exit: None,
        }),
        changed: Condvar::new(),
        stop: AtomicBool::new(false),
    });
    let waiter = {
        let shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name(format!("pty-wait-{pid}"))
            .spawn(move || wait_loop(wait_pid, &shared))?
    };
    let reader = {
        let shared = Arc::clone(&shared);
        let writer = Arc::clone(&writer);
        std::thread::Builder::new()
            .name(format!("pty-read-{pid}"))
            .spawn(move || read_loop(read_fd, &writer, &shared))?
    };
    Ok(Attached {
        master,
        writer,
        shared,
        pid,
        reader,
        waiter,
    })
}

/// The waiter thread: notices the program's exit without reaping it.
fn wait_loop(pid: Pid, shared: &Shared) {
    let status = loop {
        match rustix::process::waitid(
            WaitId::Pid(pid),
            WaitIdOptions::EXITED | WaitIdOptions::NOWAIT,
        ) {
            Ok(Some(status)) => break Some(status),
            Ok(None) | Err(rustix::io::Errno::INTR) => continue,
            // ECHILD: reaped by someone else (the Pty's drop, or a stray
            // waitpid(-1) in the test process); the status is lost.
            Err(_) => break None,
        }
    };
    let code = status.and_then(|s| s.exit_status());
    lock(&shared.state).exit = Some((code, Instant::now()));
    shared.changed.notify_all();
}

/// The reader thread: drains the master into the emulator until the end of
/// output (EIO once every holder of the slave side has closed it, which is
/// how a PTY ends on Linux) or until told to stop.
fn read_loop(mut fd: File, writer: &Mutex<File>, shared: &Shared) {
    let mut buf = vec![0u8; 64 * 1024];
    let tick = Timespec {
        tv_sec: 0,
        tv_nsec: READER_POLL.as_nanos().try_into().unwrap_or(50_000_000),
    };
    while !shared.stop.load(Ordering::Acquire) {
        let mut fds = [PollFd::new(&fd, PollFlags::IN)];
        match rustix::event::poll(&mut fds, Some(&tick)) {
            Ok(0) | Err(rustix::io::Errno::INTR) => continue,
            Ok(_) => {}
            Err(_) => break,
        }
        let n = match fd.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::Interrupted | io::ErrorKind::WouldBlock
                ) =>
            {
                continue
            }
            // EIO is the normal end; any other error ends the output too.
            Err(_) => break,
        };
        let at = Instant::now();
        let answers = {
            let mut st = lock(&shared.state);
            st.reads.push((at, n));
            st.bytes += n as u64;
            st.feed(&buf[..n])
        };
        shared.changed.notify_all();
        if !answers.is_empty() {
            let mut w = lock(writer);
            // A program that is gone cannot read the answer anyway.
            let _ = w.write_all(&answers).and_then(|()| w.flush());
        }
    }
    lock(&shared.state).closed = Some(Instant::now());
    shared.changed.notify_all();
}

/// A terminal query the reader answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Query {
    /// `CSI 6 n`: report the cursor position.
    CursorPosition,
    /// `CSI 5 n`: report the device status.
    Status,
    /// `CSI c` / `CSI 0 c`: primary device attributes.
    PrimaryAttributes,
}

impl Query {
    fn answer(self, screen: &vt100::Screen, out: &mut Vec<u8>) {
        match self {
            Query::CursorPosition => {
                let (row, col) = screen.cursor_position();
                let _ = write!(out, "\x1b[{};{}R", u32::from(row) + 1, u32::from(col) + 1);
            }
            Query::Status => out.extend_from_slice(b"\x1b[0n"),
            // A VT100 with advanced video: what xterm answers by default.
            Query::PrimaryAttributes => out.extend_from_slice(b"\x1b[?1;2c"),
        }
    }
}

/// What the scanner picks out of the output stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Control {
    /// A query to answer.
    Query(Query),
    /// `CSI ? 2026 h`: a synchronized update (a frame) begins.
    FrameBegins,
    /// `CSI ? 2026 l`: the frame is complete.
    FrameEnds,
}

/// Finds the queries and the synchronized-update marks in the output stream,
/// byte by byte (a sequence may be split between two reads).
#[derive(Debug, Default)]
struct QueryScanner {
    state: ScanState,
    /// The parameter and intermediate bytes of the CSI sequence so far.
    params: Vec<u8>,
    /// The sequence is too long to be a query.
    overlong: bool,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum ScanState {
    #[default]
    Ground,
    Escape,
    Csi,
}

impl QueryScanner {
    const MAX_PARAMS: usize = 8;

    fn push(&mut self, b: u8) -> Option<Control> {
        match (self.state, b) {
            (_, 0x1b) => self.state = ScanState::Escape,
            (ScanState::Ground, _) => {}
            (ScanState::Escape, b'[') => {
                self.state = ScanState::Csi;
                self.params.clear();
                self.overlong = false;
            }
            (ScanState::Escape, _) => self.state = ScanState::Ground,
            (ScanState::Csi, 0x20..=0x3f) => {
                if self.params.len() < Self::MAX_PARAMS {
                    self.params.push(b);
                } else {
                    self.overlong = true;
                }
            }
            (ScanState::Csi, 0x40..=0x7e) => {
                self.state = ScanState::Ground;
                if self.overlong {
                    return None;
                }
                return match (self.params.as_slice(), b) {
                    (b"6", b'n') => Some(Control::Query(Query::CursorPosition)),
                    (b"5", b'n') => Some(Control::Query(Query::Status)),
                    (b"" | b"0", b'c') => Some(Control::Query(Query::PrimaryAttributes)),
                    (b"?2026", b'h') => Some(Control::FrameBegins),
                    (b"?2026", b'l') => Some(Control::FrameEnds),
                    _ => None,
                };
            }
            // CAN and SUB cancel a sequence.
            (ScanState::Csi, 0x18 | 0x1a) => self.state = ScanState::Ground,
            // Other controls are carried out inside a sequence, which goes
            // on; other bytes make it malformed, and a terminal ignores it.
            (ScanState::Csi, 0x00..=0x1f) => {}
            (ScanState::Csi, _) => self.state = ScanState::Ground,
        }
        None
    }
}
#[cfg(test)]
mod tests;
