//! The API against its own description: schemathesis (from PyPI, pinned in
//! crates/cairn-server/tests/schemathesis/requirements.txt) generates
//! requests from `/openapi.json` and checks that no response is a 5xx and
//! that every status, content type and body is the documented one.
//!
//! `.ci/run` installs it and names it in `CAIRN_TEST_SCHEMATHESIS`, which
//! makes its absence a failure; elsewhere the test runs when
//! `schemathesis` is on PATH and says it was skipped when it is not.

mod common;

use std::process::Command;

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
    let served = common::Served::start(&s, &[]);
    let base = served.base();
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
    drop(served);
    assert!(
        out.status.success(),
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
