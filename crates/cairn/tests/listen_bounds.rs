//! What a client can make `cairn serve` and `cairn mcp --listen` hold,
//! black box: a half-sent request is closed within the timeouts, and no
//! more connections than the cap are served at once, the next served once
//! one closes (`cairn_gateway::serve_router`, which both serve through).

mod common;

use std::io::{ErrorKind, Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

use common::{read_until_closed, Scratch, Served};

/// Each server, started with `extra` flags: (its name, the server).
fn servers(s: &Scratch, extra: &[&str]) -> Vec<(&'static str, Served)> {
    ["serve", "mcp"]
        .into_iter()
        .map(|command| {
            let mut args = vec!["--listen", "127.0.0.1:0"];
            args.extend_from_slice(extra);
            (command, Served::start_command(s, command, &args, &[]))
        })
        .collect()
}

/// A whole request each server answers 200: (method, path, headers, body).
fn plain_request(command: &str) -> (&'static str, &'static str, &'static str, &'static str) {
    match command {
        "serve" => ("GET", "/v1/sessions", "", ""),
        _ => (
            "POST",
            "/mcp",
            "Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n",
            r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#,
        ),
    }
}

/// Writes `command`'s plain request on `conn`, asking to close after it.
fn send_plain(conn: &mut TcpStream, addr: &str, command: &str) {
    let (method, path, headers, body) = plain_request(command);
    write!(
        conn,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
}

/// Whether `conn` received nothing within `secs` (and is still open).
fn silent_for(conn: &mut TcpStream, secs: u64) -> bool {
    conn.set_read_timeout(Some(Duration::from_secs(secs)))
        .unwrap();
    let mut buf = [0u8; 1];
    matches!(
        conn.read(&mut buf),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut)
    )
}

#[test]
fn a_half_sent_request_is_not_held_past_the_timeouts() {
    let s = Scratch::new();
    let bounds = ["--header-timeout", "1s", "--body-timeout", "1s"];
    for (command, served) in servers(&s, &bounds) {
        let addr = served.addr.clone();
        let started = Instant::now();
        // Nothing at all.
        let mut conn = TcpStream::connect(&addr).unwrap();
        let got = read_until_closed(&mut conn, 20);
        assert!(
            got.is_empty() || got.starts_with("HTTP/1.1 408"),
            "{command}: {got}"
        );
        // Half a head.
        let mut conn = TcpStream::connect(&addr).unwrap();
        write!(conn, "POST /mcp HTTP/1.1\r\nHost: {addr}\r\ncontent-le").unwrap();
        let got = read_until_closed(&mut conn, 20);
        assert!(
            got.is_empty() || got.starts_with("HTTP/1.1 408"),
            "{command}: {got}"
        );
        // Half a body, to a route that reads it.
        let path = match command {
            "serve" => "/v1/sessions/01K4Z8M2X6Q9T3V7B1N5R0HJWD/rewind",
            _ => "/mcp",
        };
        let mut conn = TcpStream::connect(&addr).unwrap();
        write!(
            conn,
            "POST {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Type: application/json\r\nAccept: application/json, text/event-stream\r\nContent-Length: 100\r\n\r\n{{\"a\": 1,"
        )
        .unwrap();
        let got = read_until_closed(&mut conn, 20);
        assert!(got.starts_with("HTTP/1.1 408"), "{command}: {got}");
        assert!(got.contains("--body-timeout"), "{command}: {got}");
        assert!(
            started.elapsed() < Duration::from_secs(40),
            "{command}: the timeouts took {:?}",
            started.elapsed()
        );
        // And it still answers.
        let mut conn = TcpStream::connect(&addr).unwrap();
        send_plain(&mut conn, &addr, command);
        let got = read_until_closed(&mut conn, 30);
        assert!(got.starts_with("HTTP/1.1 200"), "{command}: {got}");
        assert!(served.stop().success(), "{command}");
    }
}

#[test]
fn no_more_connections_than_the_cap_are_served_and_the_next_is_once_one_closes() {
    let s = Scratch::new();
    let bounds = ["--max-connections", "2", "--header-timeout", "120s"];
    for (command, served) in servers(&s, &bounds) {
        let addr = served.addr.clone();
        // Two connections that say nothing hold the two places.
        let first = TcpStream::connect(&addr).unwrap();
        let second = TcpStream::connect(&addr).unwrap();
        // A third is left waiting: its request is not answered...
        let mut third = TcpStream::connect(&addr).unwrap();
        send_plain(&mut third, &addr, command);
        assert!(
            silent_for(&mut third, 3),
            "{command}: a third connection was served past a cap of 2"
        );
        // ...until one of the two closes.
        drop(first);
        let got = read_until_closed(&mut third, 30);
        assert!(got.starts_with("HTTP/1.1 200"), "{command}: {got}");
        // The place the third held is free again once it is closed.
        for _ in 0..3 {
            let mut conn = TcpStream::connect(&addr).unwrap();
            send_plain(&mut conn, &addr, command);
            let got = read_until_closed(&mut conn, 30);
            assert!(got.starts_with("HTTP/1.1 200"), "{command}: {got}");
        }
        drop(second);
        assert!(served.stop().success(), "{command}");
    }
}

#[test]
fn running_out_of_descriptors_is_logged_and_never_stops_the_server() {
    use std::io::{BufRead, BufReader};
    use std::os::unix::process::CommandExt;
    use std::process::Stdio;
    use std::sync::{Arc, Mutex};

    let s = Scratch::new();
    let mut cmd = s.cmd();
    cmd.args([
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--header-timeout",
        "120s",
    ])
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    unsafe {
        cmd.pre_exec(|| {
            let limit = libc::rlimit {
                rlim_cur: 128,
                rlim_max: 128,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &limit) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let mut child = cmd.spawn().unwrap();
    let mut err = BufReader::new(child.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let addr = line
        .split("http://")
        .nth(1)
        .and_then(|r| r.split('/').next())
        .unwrap_or_else(|| panic!("no address in {line:?}"))
        .to_string();
    let said = Arc::new(Mutex::new(String::new()));
    let kept = said.clone();
    std::thread::spawn(move || {
        let mut line = String::new();
        while err.read_line(&mut line).is_ok_and(|n| n > 0) {
            kept.lock().unwrap().push_str(&line);
            line.clear();
        }
    });
    // More connections than the server has descriptors, all silent (the
    // cap, 512, is not what stops it).
    let held: Vec<TcpStream> = (0..160)
        .map(|_| TcpStream::connect(&addr).unwrap())
        .collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while !said.lock().unwrap().contains("not accepted") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(
        said.lock().unwrap().contains("not accepted"),
        "no accept failed: {}",
        said.lock().unwrap()
    );
    // Once they close, it serves again.
    drop(held);
    let mut conn = TcpStream::connect(&addr).unwrap();
    send_plain(&mut conn, &addr, "serve");
    let got = read_until_closed(&mut conn, 60);
    assert!(got.starts_with("HTTP/1.1 200"), "{got}");
    assert_eq!(child.try_wait().unwrap(), None, "the server stopped");
    common::kill(&mut child, libc::SIGTERM);
    assert!(child.wait().unwrap().success());
}
