#![allow(dead_code)]
//! Helpers for black-box tests: a scratch store and workspace, a script
//! writer, the cairn binary, and journal inspection.

pub mod ledger;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

pub struct Scratch {
    pub dir: tempfile::TempDir,
    pub store: PathBuf,
    pub ws: PathBuf,
}

impl Scratch {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let store = dir.path().join("store");
        let ws = dir.path().join("ws");
        std::fs::create_dir_all(&ws).unwrap();
        let ws = std::fs::canonicalize(ws).unwrap();
        Scratch { dir, store, ws }
    }

    /// Writes a script of turns and returns its path.
    pub fn script(&self, name: &str, turns: Value) -> PathBuf {
        let p = self.dir.path().join(name);
        std::fs::write(
            &p,
            serde_json::to_vec(&serde_json::json!({ "turns": turns })).unwrap(),
        )
        .unwrap();
        p
    }

    /// Runs `cairn run` on a script of `turns` with `task`; the session's id.
    pub fn scripted(&self, turns: Value, task: &str) -> String {
        let script = self.script("scripted.json", turns);
        let out = self.run(&[
            "run",
            "--model",
            &format!("script:{}", script.display()),
            "--json",
            task,
        ]);
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        json(&out.stdout)["id"].as_str().unwrap().to_owned()
    }

    pub fn cmd(&self) -> Command {
        let mut c = Command::new(assert_cmd::cargo::cargo_bin("cairn"));
        c.env("CAIRN_STORE", &self.store)
            .env_remove("XDG_STATE_HOME")
            .env_remove("CAIRN_MODEL")
            .env_remove("OPENAI_BASE_URL")
            .env_remove("ANTHROPIC_BASE_URL")
            .env_remove("CAIRN_FAULT")
            // No model is chosen for a test by a key or a config file of
            // the machine it runs on.
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY")
            .env("XDG_CONFIG_HOME", self.dir.path().join("config"))
            .env("CAIRN_PRICES", self.dir.path().join("no-prices.json"))
            .current_dir(&self.ws);
        c
    }

    /// Runs cairn to completion.
    pub fn run(&self, args: &[&str]) -> std::process::Output {
        self.cmd().args(args).output().unwrap()
    }

    /// Starts cairn in the background.
    pub fn spawn(&self, args: &[&str]) -> Child {
        self.cmd()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    pub fn only_session(&self) -> String {
        let runs: Vec<_> = std::fs::read_dir(self.store.join("runs"))
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        assert_eq!(runs.len(), 1, "{runs:?}");
        runs[0].clone()
    }

    /// The journal's records as JSON values.
    pub fn records(&self, id: &str) -> Vec<Value> {
        let text = std::fs::read_to_string(self.store.join("runs").join(id).join("journal.jsonl"))
            .unwrap();
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    /// The journal's records so far, for polling while a writer works: a
    /// journal not created yet has none.
    pub fn records_so_far(&self, id: &str) -> Vec<Value> {
        std::fs::read_to_string(self.store.join("runs").join(id).join("journal.jsonl"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect()
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.ws.join(rel)).unwrap_or_default()
    }
}

/// Waits until `cond` holds (or panics after `secs`).
pub fn wait_until(secs: u64, what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(secs),
            "timed out waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

pub fn kill(child: &mut Child, signal: i32) {
    unsafe {
        libc::kill(child.id() as i32, signal);
    }
}

/// What a child writes to stderr, gathered as it comes (on a thread of its
/// own), to wait on: a test sends its next signal once the last one was
/// seen, never after a guessed pause.
pub struct Stderr {
    text: std::sync::Arc<std::sync::Mutex<String>>,
    reader: Option<std::thread::JoinHandle<()>>,
}

impl Stderr {
    /// Takes `child`'s piped stderr.
    pub fn of(child: &mut Child) -> Stderr {
        use std::io::Read;
        let mut from = child.stderr.take().expect("stderr is piped");
        let text = std::sync::Arc::new(std::sync::Mutex::new(String::new()));
        let to = text.clone();
        let reader = std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = from.read(&mut buf) {
                if n == 0 {
                    break;
                }
                to.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        });
        Stderr {
            text,
            reader: Some(reader),
        }
    }

    /// Everything so far.
    pub fn text(&self) -> String {
        self.text.lock().unwrap().clone()
    }

    /// Waits until `needle` has been written (or panics after `secs`, with
    /// what was).
    pub fn wait_for(&self, secs: u64, needle: &str) {
        let start = Instant::now();
        while !self.text().contains(needle) {
            assert!(
                start.elapsed() < Duration::from_secs(secs),
                "timed out waiting for {needle:?} on stderr: {}",
                self.text()
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Everything, once the child has closed its stderr.
    pub fn finish(mut self) -> String {
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        self.text()
    }
}

/// Waits for `child` to exit within `secs`; kills it and panics if not.
pub fn exits_within(child: &mut Child, secs: u64, what: &str) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > Duration::from_secs(secs) {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{what}: still running after {secs} s");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

pub fn json(out: &[u8]) -> Value {
    serde_json::from_slice(out).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(out)))
}

pub fn kinds(records: &[Value]) -> Vec<String> {
    records
        .iter()
        .map(|r| r["kind"].as_str().unwrap().to_string())
        .collect()
}

pub fn results_for<'a>(records: &'a [Value], call: &str) -> Vec<&'a Value> {
    records
        .iter()
        .filter(|r| r["kind"] == "tool_result" && r["call"] == call)
        .collect()
}

pub fn lines(path: &Path) -> usize {
    std::fs::read_to_string(path)
        .map(|t| t.lines().count())
        .unwrap_or(0)
}

pub fn call(id: &str, name: &str, args: Value) -> Value {
    serde_json::json!({"id": id, "name": name, "arguments": args})
}

pub fn shell(id: &str, command: &str) -> Value {
    call(
        id,
        "shell",
        serde_json::json!({"command": command, "timeout_s": 60}),
    )
}

/// `cairn serve` on an ephemeral loopback port, its stderr drained;
/// stopped with SIGTERM when dropped.
pub struct Served {
    pub child: Child,
    /// `127.0.0.1:PORT`.
    pub addr: String,
}

impl Served {
    pub fn start(s: &Scratch, env: &[(&str, &str)]) -> Served {
        Served::start_with(s, &["--listen", "127.0.0.1:0"], env)
    }

    /// `cairn serve ARGS…` (its address as it prints it: `0.0.0.0:PORT`
    /// for a server on every address).
    pub fn start_with(s: &Scratch, args: &[&str], env: &[(&str, &str)]) -> Served {
        Served::start_command(s, "serve", args, env)
    }

    /// `cairn COMMAND ARGS…`, a command that prints `http://ADDR/…` on its
    /// first line of stderr once it listens (`serve`, `mcp --listen`).
    pub fn start_command(
        s: &Scratch,
        command: &str,
        args: &[&str],
        env: &[(&str, &str)],
    ) -> Served {
        use std::io::{BufRead, BufReader, Read};
        let mut cmd = s.cmd();
        cmd.arg(command).args(args);
        for (k, v) in env {
            cmd.env(k, v);
        }
        let mut child = cmd
            .stderr(Stdio::piped())
            .stdout(Stdio::null())
            .spawn()
            .unwrap();
        let mut err = BufReader::new(child.stderr.take().unwrap());
        let mut line = String::new();
        err.read_line(&mut line).unwrap();
        let addr = line
            .split("http://")
            .nth(1)
            .and_then(|r| r.split('/').next())
            .unwrap_or_else(|| panic!("no address in {line:?}"))
            .to_string();
        // Drained, so the server never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sink = String::new();
            let _ = err.read_to_string(&mut sink);
        });
        Served { child, addr }
    }

    /// `http://127.0.0.1:PORT`.
    pub fn base(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// SIGTERM, and how it exited.
    pub fn stop(mut self) -> std::process::ExitStatus {
        kill(&mut self.child, libc::SIGTERM);
        self.child.wait().unwrap()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            kill(&mut self.child, libc::SIGTERM);
            let _ = self.child.wait();
        }
    }
}

/// Whether `name` is a program on `PATH`.
pub fn which(name: &str) -> bool {
    std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).any(|d| d.join(name).is_file()))
        .unwrap_or(false)
}

/// Everything `conn` receives until the server closes it, which must be
/// within `secs` (else it panics, naming the test's line that waited).
#[track_caller]
pub fn read_until_closed(conn: &mut std::net::TcpStream, secs: u64) -> String {
    use std::io::Read;
    conn.set_read_timeout(Some(Duration::from_secs(secs)))
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match conn.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => got.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!(
                "the connection is still open after {secs} s ({e}); got {:?}",
                String::from_utf8_lossy(&got)
            ),
        }
    }
    String::from_utf8_lossy(&got).into_owned()
}
