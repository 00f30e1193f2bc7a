//! A real S3 API for tests: moto in server mode on a loopback port, one
//! server per test, killed when dropped, and the `AWS_*` environment a
//! client (cairn itself, as a child process) needs to use it.
//!
//! Tests that need it are `#[ignore]`d (run them with `--ignored`) and call
//! [`require`] first, which fails them when moto is missing; `.ci/run`
//! installs moto from `crates/cairn-remote/python/requirements.txt` and
//! names its `moto_server` in `CAIRN_MOTO_SERVER`.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::nats::free_port;

/// The access key id the servers accept (moto accepts any).
pub const KEY_ID: &str = "AKIDCAIRNTEST";
/// The secret, which must never appear in cairn's output or store.
pub const SECRET: &str = "cairn-test-secret-never-shown";

/// Why an S3 test is `#[ignore]`d on a machine without moto.
pub const NEEDS: &str = "needs moto: .ci/run installs it";

fn exe() -> String {
    std::env::var("CAIRN_MOTO_SERVER").unwrap_or_else(|_| "moto_server".into())
}

/// Panics, saying what to install, unless `moto_server` (or
/// `CAIRN_MOTO_SERVER`) runs here. Tests that need it are `#[ignore]`d and
/// call this first, so a run with `--ignored` fails where it is missing.
pub fn require() {
    let ok = Command::new(exe())
        .arg("--help")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "this test needs moto's server ({}): make a venv with \
         crates/cairn-remote/python/requirements.txt and name its moto_server in \
         CAIRN_MOTO_SERVER (.ci/run does)",
        exe()
    );
}

/// A moto server; killed on drop.
pub struct Moto {
    child: Child,
    /// Its port.
    pub port: u16,
    log: tempfile::NamedTempFile,
}

impl Moto {
    /// Starts one and waits until it answers.
    pub fn start() -> Moto {
        Moto::start_with(&[])
    }

    /// [`Moto::start`] with `env` set for the server (moto's own settings,
    /// e.g. `INITIAL_NO_AUTH_ACTION_COUNT`).
    pub fn start_with(env: &[(&str, &str)]) -> Moto {
        let exe = exe();
        let port = free_port();
        let log = tempfile::NamedTempFile::new().unwrap_or_else(|e| panic!("log: {e}"));
        let err = log.reopen().unwrap_or_else(|e| panic!("log: {e}"));
        let child = Command::new(&exe)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .envs(env.iter().copied())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(err)
            .spawn()
            .unwrap_or_else(|e| panic!("starting {exe}: {e}"));
        let mut moto = Moto { child, port, log };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if http(port, "GET", "/").is_ok() {
                return moto;
            }
            if let Ok(Some(status)) = moto.child.try_wait() {
                panic!(
                    "moto_server exited ({status}) before answering:\n{}",
                    moto.log()
                );
            }
            assert!(
                Instant::now() < deadline,
                "moto_server did not answer on port {port} within 60 s:\n{}",
                moto.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Its log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// `http://127.0.0.1:PORT`.
    pub fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Creates a bucket (moto takes a plain `PUT /BUCKET`).
    pub fn create_bucket(&self, bucket: &str) {
        let got = http(self.port, "PUT", &format!("/{bucket}"));
        match got {
            Ok((200, _)) => {}
            other => panic!("creating bucket {bucket}: {other:?}"),
        }
    }

    /// The environment a client needs: endpoint, region, credentials, and
    /// plain http allowed.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        vec![
            ("AWS_ENDPOINT_URL", self.endpoint()),
            ("AWS_ALLOW_HTTP", "true".into()),
            ("AWS_REGION", "us-east-1".into()),
            ("AWS_ACCESS_KEY_ID", KEY_ID.into()),
            ("AWS_SECRET_ACCESS_KEY", SECRET.into()),
        ]
    }
}

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One unauthenticated HTTP/1.1 request; the status and the whole reply.
pub fn http(port: u16, method: &str, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut reply = String::new();
    s.read_to_string(&mut reply)?;
    let status = reply
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no status in {reply:?}")))?;
    Ok((status, reply))
}
