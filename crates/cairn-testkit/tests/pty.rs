//! The PTY harness against real programs: `sh`, `stty`, `dd`.
//!
//! Timeouts are generous (a loaded 2-core CI machine) and only bound a
//! failure; no test sleeps to synchronise.

use std::path::Path;
use std::time::{Duration, Instant};

use cairn_testkit::pty::{Pty, Spawn};

const T: Duration = Duration::from_secs(20);

fn sh(script: &str) -> Pty {
    sh_sized(script, 80, 24)
}

fn sh_sized(script: &str, cols: u16, rows: u16) -> Pty {
    Pty::spawn(Spawn {
        program: Path::new("sh"),
        args: vec!["-c".into(), script.into()],
        cwd: std::env::temp_dir(),
        env: vec![],
        cols,
        rows,
    })
    .expect("sh starts on a pty")
}

fn ok(r: Result<String, String>) -> String {
    r.unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn pty_keys_reach_the_program_and_its_answer_the_screen() {
    let mut pty = sh(r#"printf "hello\n"; read x; echo "got:$x""#);
    ok(pty.wait_for("hello", T));
    let before = pty.bytes_seen();
    assert!(before >= 5, "{before} bytes for \"hello\\n\"");
    let sent = Instant::now();
    pty.send(b"abc\r").unwrap();
    let screen = ok(pty.wait_for("got:abc", T));
    assert!(pty.bytes_seen() > before);
    assert!(pty.last_output().is_some_and(|t| t >= sent));
    // The terminal echoed the keys, then the program answered.
    let lines: Vec<&str> = screen.lines().collect();
    assert_eq!(&lines[..3], ["hello", "abc", "got:abc"], "{screen}");
    assert_eq!(pty.wait_exit(T), Some(Some(0)));
}

#[test]
fn pty_shows_a_full_screen_program_at_its_place() {
    let pty = sh(r#"printf "\033[?1049h\033[2J\033[5;3Hmid"; sleep 5"#);
    let screen = ok(pty.wait_for("mid", T));
    let lines: Vec<&str> = screen.lines().collect();
    assert_eq!(lines.len(), 24, "one line per row:\n{screen}");
    assert_eq!(lines[4], "  mid", "row 5, column 3:\n{screen}");
    assert!(
        lines
            .iter()
            .enumerate()
            .all(|(i, l)| i == 4 || l.is_empty()),
        "{screen}"
    );
    // Dropped while `sleep 5` runs: killed and reaped without waiting for it.
}

#[test]
fn pty_resize_reaches_the_program() {
    let mut pty = sh_sized(
        r#"stty size; trap "stty size" WINCH; echo ready; while :; do sleep 0.1; done"#,
        80,
        24,
    );
    let screen = ok(pty.wait_for("ready", T));
    assert!(screen.starts_with("24 80\n"), "{screen}");
    pty.resize(100, 30).unwrap();
    let screen = ok(pty.wait_for("30 100", T));
    assert_eq!(
        screen.lines().count(),
        30,
        "the emulator has 30 rows too:\n{screen}"
    );
}

#[test]
fn pty_sigkill_is_an_exit_without_code() {
    let mut pty = sh("echo up; while :; do sleep 1; done");
    ok(pty.wait_for("up", T));
    assert!(pty.pid() > 0);
    pty.signal(libc::SIGKILL).unwrap();
    assert_eq!(pty.wait_exit(T), Some(None));
    // Not reaped before drop: signalling it again is harmless.
    pty.signal(libc::SIGKILL).unwrap();
}

#[test]
fn pty_exit_code_and_timeouts() {
    let mut pty = sh("read x; exit 3");
    assert_eq!(pty.wait_exit(Duration::from_millis(200)), None);
    let err = pty
        .wait_for("never", Duration::from_millis(200))
        .unwrap_err();
    assert!(
        err.starts_with("timed out after 200ms waiting for \"never\""),
        "{err}"
    );
    pty.send(b"\r").unwrap();
    assert_eq!(pty.wait_exit(T), Some(Some(3)));
}

#[test]
fn pty_waiting_ends_when_the_program_exits_without_showing_it() {
    let pty = sh("echo bye");
    let started = Instant::now();
    let err = pty.wait_until(|s| s.contains("never"), T).unwrap_err();
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert!(err.starts_with("the program exited (exit code 0)"), "{err}");
    let screen = format!("bye\n{}", "\n".repeat(23));
    assert!(
        err.ends_with(&format!("the screen was:\n{screen}")),
        "{err:?}"
    );
}

#[test]
fn pty_sets_term_env_and_cwd() {
    let dir = tempfile::tempdir().unwrap();
    let mut pty = Pty::spawn(Spawn {
        program: Path::new("sh"),
        args: vec![
            "-c".into(),
            r#"echo "term=$TERM x=$X cols=${COLUMNS-unset}"; pwd"#.into(),
        ],
        cwd: dir.path().to_path_buf(),
        env: vec![("X".into(), "y z".into())],
        cols: 120,
        rows: 10,
    })
    .unwrap();
    let screen = ok(pty.wait_for("term=", T));
    assert!(
        screen.starts_with("term=xterm-256color x=y z cols=unset\n"),
        "{screen}"
    );
    let pwd = dir.path().canonicalize().unwrap();
    ok(pty.wait_for(&pwd.display().to_string(), T));
    assert_eq!(pty.wait_exit(T), Some(Some(0)));
}

#[test]
fn pty_answers_the_cursor_position_query() {
    // Raw input, so that the answer (no newline) reaches `dd` at once.
    let mut pty = sh(r#"stty -icanon -echo min 6 time 50
printf "\033[3;7H\033[6n"
reply=$(dd bs=6 count=1 2>/dev/null)
printf "\r\nreply=%s\n" "$reply" | tr '\033' E"#);
    ok(pty.wait_for("reply=E[3;7R", T));
    assert_eq!(pty.wait_exit(T), Some(Some(0)));
}

#[test]
fn pty_bracketed_paste_and_ctrl_keys_arrive_as_bytes() {
    // Raw mode: no echo, Ctrl-C is no SIGINT, Ctrl-D no end of file; `od`
    // shows what the program read. Keys sent once "ready" shows wait in the
    // terminal's input queue until `dd` reads them.
    let mut pty =
        sh(r#"stty raw -echo; echo ready; dd bs=1 count=16 2>/dev/null | od -An -c | tr -s ' '"#);
    ok(pty.wait_for("ready", T));
    pty.send(b"\x1b[200~hi\x1b[201~\x03\x04").unwrap();
    let screen = ok(pty.wait_for("004", T));
    assert!(
        screen.contains("033 [ 2 0 0 ~ h i 033 [ 2 0 1 ~ 003 004"),
        "{screen}"
    );
    assert_eq!(pty.wait_exit(T), Some(Some(0)));
}

#[test]
fn pty_drop_kills_a_program_that_ignores_hangups() {
    let pty = sh(r#"trap "" HUP TERM INT; echo stubborn; while :; do sleep 1; done"#);
    ok(pty.wait_for("stubborn", T));
    let started = Instant::now();
    drop(pty);
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn pty_spawn_errors() {
    let spawn = |program: &'static str, cwd: &str, cols| {
        Pty::spawn(Spawn {
            program: Path::new(program),
            args: vec![],
            cwd: cwd.into(),
            env: vec![],
            cols,
            rows: 24,
        })
    };
    let tmp = std::env::temp_dir();
    let tmp = tmp.to_str().unwrap();
    assert!(spawn("cairn-no-such-program", tmp, 80).is_err());
    assert!(spawn("sh", "/no/such/dir", 80).is_err());
    assert_eq!(
        spawn("sh", tmp, 0).unwrap_err().kind(),
        std::io::ErrorKind::InvalidInput
    );
}
