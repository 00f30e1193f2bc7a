//! The official `openai` and `anthropic` Python SDKs as real clients.
//!
//! [`interpreter`] finds a Python that has the versions pinned in
//! `crates/cairn-testkit/python/requirements.txt`:
//! 1. if `CAIRN_TEST_PYTHON` names an interpreter, that one (`.ci/run` sets
//!    it), after checking that it imports the pinned `openai` and
//!    `anthropic` versions;
//! 2. else the venv `<workspace>/target/cairn-test-venv`, made by
//!    `python3 -m venv` and `pip install -r requirements.txt` the first time
//!    and whenever the requirements file changes (a stamp inside the venv
//!    holds the file's hash; it is written last, so an interrupted install is
//!    redone). A file lock beside the venv keeps parallel test processes from
//!    building it twice.
//!
//! [`Python::script`] runs one of the scripts in `crates/cairn-testkit/python/`
//! (see the README there for each one's arguments and output) with a time
//! limit, and without the caller's `OPENAI_*` / `ANTHROPIC_*` variables,
//! proxies or `PYTHONPATH`, so a test can never reach a real API by accident
//! nor run other packages than the pinned ones.

use std::ffi::{OsStr, OsString};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value;
use sha2::{Digest, Sha256};

use crate::Error;

/// The variable naming an interpreter to use instead of the venv.
pub const PYTHON_VAR: &str = "CAIRN_TEST_PYTHON";

/// How long a script may run unless [`ScriptCommand::timeout`] says otherwise.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(120);

/// The variables a script never inherits: credentials and endpoints of the
/// real APIs, proxies (loopback must not go through one), and what could
/// make the interpreter import other packages than the pinned ones.
const NOT_INHERITED: &[&str] = &[
    "PYTHONPATH",
    "PYTHONHOME",
    "PYTHONSTARTUP",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_AUTH_TOKEN",
    "ANTHROPIC_BASE_URL",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
];

/// The directory holding the scripts and `requirements.txt`.
pub fn scripts_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("python")
}

/// The path of the script `name` (`"agent.py"`), for running it under
/// another program (`cairn exec --gateway -- PYTHON SCRIPT`).
pub fn script_path(name: &str) -> PathBuf {
    scripts_dir().join(name)
}

fn workspace_root() -> PathBuf {
    // crates/cairn-testkit → the workspace root.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::fs::canonicalize(&root).unwrap_or(root)
}

/// A Python interpreter with the pinned SDKs.
#[derive(Clone, Debug)]
pub struct Python {
    path: PathBuf,
}

static READY: OnceLock<PathBuf> = OnceLock::new();
static SETTING_UP: Mutex<()> = Mutex::new(());

/// The interpreter with the pinned SDKs, set up on first use (see the module
/// doc); later calls in the same process return at once.
///
/// # Errors
/// `CAIRN_TEST_PYTHON` names an interpreter without the pinned versions
/// ([`Error::Interpreter`]); the venv cannot be made or the packages not
/// installed ([`Error::Venv`], [`Error::Io`], [`Error::Spawn`]).
pub fn interpreter() -> Result<Python, Error> {
    if let Some(path) = READY.get() {
        return Ok(Python { path: path.clone() });
    }
    let _one_thread = SETTING_UP.lock().unwrap_or_else(|p| p.into_inner());
    if let Some(path) = READY.get() {
        return Ok(Python { path: path.clone() });
    }
    let path = match std::env::var_os(PYTHON_VAR).filter(|v| !v.is_empty()) {
        Some(given) => Python::checked(given)?.path,
        None => ensure_venv(&workspace_root().join("target"), &requirements_file())?,
    };
    Ok(Python {
        path: READY.get_or_init(|| path).clone(),
    })
}

/// `crates/cairn-testkit/python/requirements.txt`.
pub fn requirements_file() -> PathBuf {
    scripts_dir().join("requirements.txt")
}

/// The `name==version` pins of a requirements file.
fn pins(requirements: &Path) -> Result<Vec<(String, String)>, Error> {
    let text = std::fs::read_to_string(requirements).map_err(|source| Error::Io {
        path: requirements.to_owned(),
        source,
    })?;
    Ok(text
        .lines()
        .map(|l| l.split('#').next().unwrap_or("").trim())
        .filter_map(|l| l.split_once("=="))
        .map(|(name, version)| (name.trim().to_lowercase(), version.trim().to_owned()))
        .collect())
}

/// Checks that `python` imports `openai` and `anthropic` at the versions
/// `requirements` pins.
fn check_pins(python: &Path, requirements: &Path) -> Result<(), Error> {
    let problem = |problem: String| Error::Interpreter {
        interpreter: python.to_owned(),
        problem,
    };
    let output = Command::new(python)
        .args([
            "-c",
            "import openai, anthropic; print(openai.__version__, anthropic.__version__)",
        ])
        .output()
        .map_err(|source| Error::Spawn {
            program: python.to_owned(),
            source,
        })?;
    if !output.status.success() {
        return Err(problem(format!(
            "cannot import the SDKs: {}",
            String::from_utf8_lossy(&output.stderr).trim()
        )));
    }
    let found = String::from_utf8_lossy(&output.stdout).into_owned();
    let mut found = found.split_whitespace();
    let pins = pins(requirements)?;
    for name in ["openai", "anthropic"] {
        let have = found.next().unwrap_or("none");
        match pins.iter().find(|(n, _)| n == name) {
            Some((_, want)) if want == have => {}
            Some((_, want)) => {
                return Err(problem(format!("it has {name} {have}, the pin is {want}")))
            }
            None => return Err(problem(format!("requirements.txt pins no {name}"))),
        }
    }
    Ok(())
}

/// Makes (or finds) the venv `cairn-test-venv` under `target` with the
/// packages of `requirements`, under a file lock.
fn ensure_venv(target: &Path, requirements: &Path) -> Result<PathBuf, Error> {
    let io = |path: &Path| {
        let path = path.to_owned();
        move |source| Error::Io { path, source }
    };
    std::fs::create_dir_all(target).map_err(io(target))?;
    let lock_path = target.join("cairn-test-venv.lock");
    let lock = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(io(&lock_path))?;
    // Held until `lock` is dropped at the end of this function.
    rustix::fs::flock(&lock, rustix::fs::FlockOperation::LockExclusive).map_err(|e| Error::Io {
        path: lock_path.clone(),
        source: e.into(),
    })?;

    let dir = target.join("cairn-test-venv");
    let python = dir.join("bin").join("python");
    let wanted = std::fs::read(requirements).map_err(io(requirements))?;
    let wanted = hex::encode(Sha256::digest(&wanted));
    let stamp = dir.join("cairn-requirements.sha256");
    if python.exists() && std::fs::read_to_string(&stamp).ok().as_deref() == Some(wanted.as_str()) {
        return Ok(python);
    }
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(io(&dir))?;
    }
    let mut venv = Command::new("python3");
    venv.arg("-m").arg("venv").arg(&dir);
    run_setup_step(&mut venv, &dir, "python3 -m venv")?;
    let mut pip = Command::new(&python);
    pip.args([
        "-m",
        "pip",
        "install",
        "--disable-pip-version-check",
        "--no-input",
        "-r",
    ])
    .arg(requirements);
    run_setup_step(&mut pip, &dir, "pip install -r requirements.txt")?;
    check_pins(&python, requirements)?;
    std::fs::write(&stamp, &wanted).map_err(io(&stamp))?;
    drop(lock);
    Ok(python)
}

fn run_setup_step(cmd: &mut Command, dir: &Path, step: &str) -> Result<(), Error> {
    let program = PathBuf::from(cmd.get_program());
    let output = cmd
        .stdin(Stdio::null())
        .output()
        .map_err(|source| Error::Spawn { program, source })?;
    if output.status.success() {
        return Ok(());
    }
    let mut text = String::from_utf8_lossy(&output.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&output.stderr));
    // The end of pip's output says what failed.
    let tail: String = text
        .chars()
        .rev()
        .take(4000)
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    Err(Error::Venv {
        dir: dir.to_owned(),
        step: step.to_owned(),
        status: output.status.to_string(),
        output: tail,
    })
}

impl Python {
    /// The interpreter at `path`, once it is seen to import the pinned
    /// `openai` and `anthropic` versions.
    ///
    /// # Errors
    /// It cannot be run ([`Error::Spawn`]) or lacks the pins
    /// ([`Error::Interpreter`]).
    pub fn checked(path: impl Into<PathBuf>) -> Result<Python, Error> {
        let path = path.into();
        check_pins(&path, &requirements_file())?;
        Ok(Python { path })
    }

    /// The interpreter's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// A run of the script `name` from [`scripts_dir`].
    pub fn script(&self, name: &str) -> ScriptCommand {
        ScriptCommand {
            python: self.path.clone(),
            name: name.to_owned(),
            args: Vec::new(),
            env: Vec::new(),
            dir: None,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

/// A script to run: its arguments, environment, directory and time limit.
#[derive(Clone, Debug)]
pub struct ScriptCommand {
    python: PathBuf,
    name: String,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    dir: Option<PathBuf>,
    timeout: Duration,
}

impl ScriptCommand {
    /// Adds an argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> ScriptCommand {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    /// Adds arguments.
    pub fn args<I, S>(mut self, args: I) -> ScriptCommand
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.args
            .extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Sets an environment variable for the script (after the ones it does
    /// not inherit were removed, so this can set `OPENAI_BASE_URL`).
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> ScriptCommand {
        self.env
            .push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    /// Runs the script in `dir` (default: the caller's directory).
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> ScriptCommand {
        self.dir = Some(dir.as_ref().to_owned());
        self
    }

    /// Kills the script after `limit` (default [`DEFAULT_TIMEOUT`]).
    pub fn timeout(mut self, limit: Duration) -> ScriptCommand {
        self.timeout = limit;
        self
    }

    /// The command, ready to spawn, with pipes left to the caller: for a test
    /// that kills the script itself.
    pub fn command(&self) -> Command {
        let mut cmd = Command::new(&self.python);
        cmd.arg(script_path(&self.name)).args(&self.args);
        for var in NOT_INHERITED {
            cmd.env_remove(var);
        }
        cmd.env("PYTHONDONTWRITEBYTECODE", "1")
            .env("PYTHONUNBUFFERED", "1")
            .env("NO_PROXY", "127.0.0.1,localhost,::1")
            .env("no_proxy", "127.0.0.1,localhost,::1");
        for (k, v) in &self.env {
            cmd.env(k, v);
        }
        if let Some(dir) = &self.dir {
            cmd.current_dir(dir);
        }
        cmd
    }

    /// Runs the script to its end (or its time limit) and returns what it
    /// printed; a non-zero exit is an output, not an error.
    ///
    /// # Errors
    /// The interpreter cannot be started ([`Error::Spawn`]) or the script
    /// outran its limit and was killed ([`Error::Timeout`]).
    pub fn run(&self) -> Result<ScriptOutput, Error> {
        let mut child = self
            .command()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|source| Error::Spawn {
                program: self.python.clone(),
                source,
            })?;
        let stdout = drain(child.stdout.take());
        let stderr = drain(child.stderr.take());
        let status = wait_until(&mut child, Instant::now() + self.timeout);
        let lost = |_| "<cairn-testkit: the thread reading this output panicked>".to_owned();
        let stdout = stdout.join().unwrap_or_else(lost);
        let stderr = stderr.join().unwrap_or_else(lost);
        match status {
            Some(status) => Ok(ScriptOutput {
                script: self.name.clone(),
                status,
                stdout,
                stderr,
            }),
            None => Err(Error::Timeout {
                script: self.name.clone(),
                after: self.timeout,
                stderr,
            }),
        }
    }
}

/// Reads a pipe to its end on a thread of its own (two pipes read one after
/// the other can deadlock a chatty child).
fn drain<R: Read + Send + 'static>(pipe: Option<R>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(mut pipe) = pipe {
            // A read error ends the output where it got to.
            let _ = pipe.read_to_end(&mut bytes);
        }
        String::from_utf8_lossy(&bytes).into_owned()
    })
}

/// The child's exit status, or `None` after killing it at `deadline`.
fn wait_until(child: &mut Child, deadline: Instant) -> Option<ExitStatus> {
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(10));
            }
            _ => {
                // An error means it is gone already; either way, reap it.
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

/// What a script printed and how it ended.
#[derive(Clone, Debug)]
pub struct ScriptOutput {
    script: String,
    /// Its exit status.
    pub status: ExitStatus,
    /// Its standard output (the scripts print one JSON document).
    pub stdout: String,
    /// Its standard error (tracebacks, SDK logs).
    pub stderr: String,
}

impl ScriptOutput {
    /// Whether it exited 0.
    pub fn success(&self) -> bool {
        self.status.success()
    }

    /// Standard output as JSON.
    ///
    /// # Errors
    /// It is not JSON ([`Error::Json`], carrying both outputs).
    pub fn json(&self) -> Result<Value, Error> {
        serde_json::from_str(&self.stdout).map_err(|source| Error::Json {
            script: self.script.clone(),
            source,
            stdout: self.stdout.clone(),
            stderr: self.stderr.clone(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interpreter_without_the_pinned_sdks_is_refused_with_what_to_do() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let venv = dir.path().join("bare");
        let made = Command::new("python3")
            .args(["-m", "venv", "--without-pip"])
            .arg(&venv)
            .status()
            .unwrap_or_else(|e| panic!("python3: {e}"));
        assert!(made.success());
        let err = Python::checked(venv.join("bin/python"))
            .map(|p| p.path)
            .unwrap_err();
        assert!(matches!(err, Error::Interpreter { .. }), "{err}");
        let message = err.to_string();
        assert!(message.contains("cannot import the SDKs"), "{message}");
        assert!(message.contains("requirements.txt"), "{message}");
    }

    #[test]
    fn a_script_inherits_no_credentials_proxies_or_python_path() {
        let python = Python {
            path: PathBuf::from("python3"),
        };
        let cmd = python
            .script("sdk_call.py")
            .env("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
            .command();
        let envs: Vec<(String, Option<String>)> = cmd
            .get_envs()
            .map(|(k, v)| {
                let v = v.map(|v| v.to_string_lossy().into_owned());
                (k.to_string_lossy().into_owned(), v)
            })
            .collect();
        let value = |name: &str| envs.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone());
        for removed in [
            "OPENAI_API_KEY",
            "ANTHROPIC_API_KEY",
            "ANTHROPIC_BASE_URL",
            "HTTPS_PROXY",
            "PYTHONPATH",
        ] {
            assert_eq!(value(removed), Some(None), "{removed}");
        }
        // What the caller sets is set after the removals.
        assert_eq!(
            value("OPENAI_BASE_URL"),
            Some(Some("http://127.0.0.1:9/v1".to_owned()))
        );
        assert_eq!(
            value("NO_PROXY"),
            Some(Some("127.0.0.1,localhost,::1".to_owned()))
        );
        let args: Vec<_> = cmd.get_args().collect();
        assert_eq!(args, [script_path("sdk_call.py").as_os_str()]);
    }

    #[test]
    fn a_missing_interpreter_is_a_spawn_error() {
        let err = Python::checked("/nonexistent/python")
            .map(|p| p.path)
            .unwrap_err();
        assert!(matches!(err, Error::Spawn { .. }), "{err}");
    }

    #[test]
    fn pins_are_read_from_name_equals_version_lines() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let file = dir.path().join("requirements.txt");
        std::fs::write(
            &file,
            "# a comment\nopenai==1.2.3  # why\n\nAnthropic == 4.5\nfoo>=1\n",
        )
        .unwrap_or_else(|e| panic!("{e}"));
        let got = pins(&file).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            got,
            [
                ("openai".to_owned(), "1.2.3".to_owned()),
                ("anthropic".to_owned(), "4.5".to_owned())
            ]
        );
    }

    /// The whole first-use path: a stale venv (its stamp does not match the
    /// requirements) is thrown away and built anew, then found again without
    /// a rebuild. Slow: one pip install.
    #[test]
    fn the_venv_is_rebuilt_when_stale_and_reused_when_current() {
        let target = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let requirements = requirements_file();
        let dir = target.path().join("cairn-test-venv");
        let marker = dir.join("marker");
        let stamp = dir.join("cairn-requirements.sha256");
        std::fs::create_dir_all(dir.join("bin")).unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&stamp, "stale").unwrap_or_else(|e| panic!("{e}"));
        std::fs::write(&marker, "from before").unwrap_or_else(|e| panic!("{e}"));

        let python = ensure_venv(target.path(), &requirements).unwrap_or_else(|e| panic!("{e}"));
        assert!(!marker.exists(), "the stale venv was kept");
        let want = hex::encode(Sha256::digest(
            std::fs::read(&requirements).unwrap_or_default(),
        ));
        assert_eq!(std::fs::read_to_string(&stamp).ok(), Some(want));
        check_pins(&python, &requirements).unwrap_or_else(|e| panic!("{e}"));

        std::fs::write(&marker, "still here").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(ensure_venv(target.path(), &requirements).ok(), Some(python));
        assert!(marker.exists(), "a current venv was rebuilt");
    }
}
