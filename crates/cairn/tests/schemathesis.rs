//! The API against its own description: schemathesis (from PyPI, pinned in
//! crates/cairn-server/tests/schemathesis/requirements.txt) generates
//! requests from `/openapi.json` and checks that no response is a 5xx and
//! that every status, content type and body is the documented one.
//!
//! The test is `#[ignore]`d: `.ci/run` installs schemathesis, names it in
//! `CAIRN_TEST_SCHEMATHESIS` (else `schemathesis` on PATH is used) and runs
//! it with `--ignored`; it fails when schemathesis does not run.

mod common;

use std::process::Command;

use common::Scratch;
use serde_json::json;

#[test]
#[ignore = "needs schemathesis: .ci/run installs it"]
fn the_api_answers_as_its_openapi_document_says() {
    let program =
        std::env::var_os("CAIRN_TEST_SCHEMATHESIS").unwrap_or_else(|| "schemathesis".into());
    assert!(
        Command::new(&program).arg("--version").output().is_ok(),
        "this test needs schemathesis ({program:?} does not run): make a venv with \
         crates/cairn-server/tests/schemathesis/requirements.txt and name its schemathesis \
         in CAIRN_TEST_SCHEMATHESIS (.ci/run does)"
    );
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
