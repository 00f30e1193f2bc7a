//! The API against its own description: schemathesis (from PyPI, pinned in
//! crates/cairn-server/tests/schemathesis/requirements.txt) generates
//! requests from `/openapi.json` and checks that no response is a 5xx and
//! that every status, content type and body is the documented one.
//!
//! `.ci/run` installs it and names it in `CAIRN_TEST_SCHEMATHESIS`, which
//! makes its absence a failure; elsewhere the test runs when
//! `schemathesis` is on PATH and says it was skipped when it is not.

mod common;

use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};

use common::Scratch;
use serde_json::json;

#[test]
fn the_api_answers_as_its_openapi_document_says() {
    let named = std::env::var_os("CAIRN_TEST_SCHEMATHESIS");
    let program = named.clone().unwrap_or_else(|| "schemathesis".into());
    if Command::new(&program).arg("--version").output().is_err() {
        assert!(
            named.is_none(),
            "CAIRN_TEST_SCHEMATHESIS names {program:?}, which does not run"
        );
        eprintln!("skipped: schemathesis is not installed here (CI installs it; see .ci/run)");
        return;
    }
    let s = Scratch::new();
    let script = s.script("one.json", json!([{"text": "hello"}]));
    let out = s.run(&[
        "run",
        "--model",
        &format!("script:{}", script.display()),
        "hi",
    ]);
    assert!(out.status.success());
    let mut server = s
        .cmd()
        .args(["serve", "--listen", "127.0.0.1:0"])
        .stderr(Stdio::piped())
        .stdout(Stdio::null())
        .spawn()
        .unwrap();
    let mut err = BufReader::new(server.stderr.take().unwrap());
    let mut line = String::new();
    err.read_line(&mut line).unwrap();
    let base = format!(
        "http://{}",
        line.split("http://")
            .nth(1)
            .and_then(|r| r.split('/').next())
            .unwrap_or_else(|| panic!("no address in {line:?}"))
    );
    std::thread::spawn(move || {
        let mut sink = String::new();
        let _ = err.read_to_string(&mut sink);
    });
    // The event stream never ends, so it is tested by its own tests.
    let out = Command::new(&program)
        .args(["run", &format!("{base}/openapi.json")])
        .args(["--max-examples", "30", "--seed", "1"])
        .args(["--exclude-path-regex", "events$"])
        .args([
            "--checks",
            "not_a_server_error,status_code_conformance,content_type_conformance,response_schema_conformance",
        ])
        .current_dir(s.dir.path())
        .env("NO_COLOR", "1")
        .output()
        .unwrap();
    unsafe {
        libc::kill(server.id() as i32, libc::SIGTERM);
    }
    let _ = server.wait();
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
