//! One MCP server — a process on pipes, or a streamable HTTP endpoint:
//! started (connected), asked, restarted after a crash, stopped.
//!
//! Invariants:
//! 1. The server runs in a process group of its own, so a Ctrl-C at the
//!    terminal reaches cairn (which suspends the run) and not the server, and
//!    it is killed when its handle is dropped: it never outlives cairn's
//!    process by more than its own reaction to a closed standard input.
//! 2. Its environment is cairn's, scrubbed as the shell tool's is (no model
//!    provider's key, nothing that looks like a secret), plus what its
//!    configuration sets.
//! 3. Its standard error never reaches the terminal unless a sink was given;
//!    the last lines are kept in memory for the error that says why it
//!    failed to start, never for anything journaled.
//! 4. An HTTP server's headers (an `Authorization`, say) are sent and never
//!    shown, not even in an error.
//! 5. A call whose server dies under it reports [`CallFailed::Died`]: the
//!    server is restarted for the next call, never by retrying this one here
//!    (the caller decides by the tool's hints).

use std::collections::{HashMap, VecDeque};
use std::ffi::OsString;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use rmcp::model::{CallToolRequestParams, CallToolResult, Tool as McpToolDef};
use rmcp::service::{Peer, RunningService, ServiceError};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{RoleClient, ServiceExt};
use tokio::io::AsyncReadExt;

use super::config::{ServerConfig, Transport};
use super::{McpError, StderrSink};

/// How long a server has to answer `initialize` and list its tools.
pub(crate) const START_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a stopped server has to exit after its input closes.
const STOP_WAIT: Duration = Duration::from_secs(2);
/// Lines of standard error kept for a start-up failure.
const STDERR_LINES: usize = 12;
/// The largest JSON answer or SSE event taken from an HTTP server.
const MAX_HTTP_RESPONSE: usize = 16 * 1024 * 1024;
/// The longest standard-error line kept or shown.
const STDERR_LINE_BYTES: usize = 1000;

/// Why a call did not come back.
#[derive(Debug)]
pub(crate) enum CallFailed {
    /// The server died or closed its pipes while the call ran.
    Died(String),
    /// It could not be (re)started for the call: nothing was sent.
    NotStarted(String),
    /// It answered with a protocol error (an unknown tool, bad arguments).
    Refused(String),
    /// It did not answer within the server's `timeout`: it was stopped.
    TimedOut(Duration),
}

struct Running {
    service: RunningService<RoleClient, ()>,
    /// The process of a stdio server.
    child: Option<tokio::process::Child>,
}

/// A configured server and, while it runs, its process.
pub(crate) struct Server {
    pub(crate) config: ServerConfig,
    env: Vec<(OsString, OsString)>,
    cwd: PathBuf,
    stderr: Option<StderrSink>,
    running: tokio::sync::Mutex<Option<Running>>,
    tail: Arc<Mutex<VecDeque<String>>>,
    /// The task reading the current process's standard error.
    reader: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Server {
    pub(crate) fn new(
        config: ServerConfig,
        env: Vec<(OsString, OsString)>,
        cwd: PathBuf,
        stderr: Option<StderrSink>,
    ) -> Server {
        Server {
            config,
            env,
            cwd,
            stderr,
            running: tokio::sync::Mutex::new(None),
            tail: Arc::default(),
            reader: Mutex::new(None),
        }
    }

    /// Starts the process (or opens the connection) and completes the
    /// handshake.
    async fn spawn(&self) -> Result<Running, String> {
        let (service, child) = match &self.config.transport {
            Transport::Stdio {
                command,
                args,
                env,
                cwd,
            } => {
                let mut cmd = tokio::process::Command::new(command);
                cmd.args(args)
                    .env_clear()
                    .envs(self.env.iter().map(|(k, v)| (k, v)))
                    .envs(env)
                    .current_dir(cwd.as_ref().unwrap_or(&self.cwd))
                    .stdin(Stdio::piped())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::piped())
                    .kill_on_drop(true)
                    .process_group(0);
                let mut child = cmd
                    .spawn()
                    .map_err(|e| format!("cannot run `{command}`: {e}"))?;
                let (Some(stdout), Some(stdin), Some(stderr)) =
                    (child.stdout.take(), child.stdin.take(), child.stderr.take())
                else {
                    return Err("its standard streams could not be connected".into());
                };
                self.tail.lock().unwrap_or_else(|p| p.into_inner()).clear();
                let reader = tokio::spawn(forward_stderr(
                    stderr,
                    self.config.name.clone(),
                    self.stderr.clone(),
                    Arc::clone(&self.tail),
                ));
                *self.reader.lock().unwrap_or_else(|p| p.into_inner()) = Some(reader);
                (handshake(().serve((stdout, stdin))).await?, Some(child))
            }
            Transport::Http { url, headers } => {
                let mut custom = HashMap::new();
                for (k, v) in headers {
                    let name = HeaderName::from_bytes(k.as_bytes())
                        .map_err(|e| format!("its header name {k:?}: {e}"))?;
                    // The value is never shown: it may be a credential.
                    let value = HeaderValue::from_str(v).map_err(|_| {
                        format!("the value of its header {k} is not a valid header value")
                    })?;
                    custom.insert(name, value);
                }
                let config = StreamableHttpClientTransportConfig::with_uri(url.as_str())
                    .custom_headers(custom)
                    .max_json_response_size(MAX_HTTP_RESPONSE)
                    .max_sse_event_size(MAX_HTTP_RESPONSE);
                // The SDK's reqwest takes TLS from the process's rustls
                // provider; one installed before (by anyone) stays.
                let _ = rustls::crypto::ring::default_provider().install_default();
                let transport = StreamableHttpClientTransport::from_config(config);
                (handshake(().serve(transport)).await?, None)
            }
        };
        Ok(Running { service, child })
    }

    /// Starts the server (first start) and lists its tools.
    pub(crate) async fn start(&self) -> Result<Vec<McpToolDef>, McpError> {
        let reason = match self.spawn().await {
            Err(reason) => reason,
            Ok(running) => {
                let listed =
                    tokio::time::timeout(START_TIMEOUT, running.service.peer().list_all_tools())
                        .await;
                *self.running.lock().await = Some(running);
                match listed {
                    Ok(Ok(tools)) => return Ok(tools),
                    Ok(Err(e)) => format!("listing its tools failed: {e}"),
                    Err(_) => format!(
                        "it did not list its tools within {} s",
                        START_TIMEOUT.as_secs()
                    ),
                }
            }
        };
        // What the process said before it went is the most useful part of
        // the error: stopping reads its standard error to the end.
        self.stop().await;
        Err(McpError::Start {
            server: self.config.name.clone(),
            reason,
            stderr: self.stderr_tail(),
        })
    }

    /// The running server's peer, restarting it first if it died. `true`
    /// with it when this call restarted it.
    async fn peer(&self) -> Result<(Peer<RoleClient>, bool), String> {
        let mut running = self.running.lock().await;
        if let Some(r) = running.as_ref() {
            if !r.service.is_closed() {
                return Ok((r.service.peer().clone(), false));
            }
        }
        if let Some(old) = running.take() {
            stop(old).await;
        }
        let r = self.spawn().await?;
        let peer = r.service.peer().clone();
        *running = Some(r);
        Ok((peer, true))
    }

    /// Calls `tool` with `arguments`.
    pub(crate) async fn call(
        &self,
        tool: &str,
        arguments: Option<serde_json::Map<String, serde_json::Value>>,
    ) -> Result<(CallToolResult, bool), CallFailed> {
        let (peer, restarted) = self.peer().await.map_err(CallFailed::NotStarted)?;
        let mut params = CallToolRequestParams::new(tool.to_owned());
        params.arguments = arguments;
        let limit = self.config.call_timeout;
        let failed = match tokio::time::timeout(limit, peer.call_tool(params)).await {
            Ok(Ok(result)) => return Ok((result, restarted)),
            Ok(Err(ServiceError::McpError(e))) => {
                return Err(CallFailed::Refused(e.message.to_string()))
            }
            // The process is gone or its pipes are.
            Ok(Err(e)) => CallFailed::Died(e.to_string()),
            // Given up: the server is stopped, so the call cannot take
            // effect later, unseen.
            Err(_) => CallFailed::TimedOut(limit),
        };
        // The next call starts the server again.
        if let Some(old) = self.running.lock().await.take() {
            stop(old).await;
        }
        Err(failed)
    }

    /// Stops the server: its input closed, then killed if it lingers; what
    /// it wrote on standard error is read to the end (bounded), so nothing
    /// it said is cut off.
    pub(crate) async fn stop(&self) {
        if let Some(r) = self.running.lock().await.take() {
            stop(r).await;
        }
        let reader = self.reader.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(r) = reader {
            let _ = tokio::time::timeout(STOP_WAIT, r).await;
        }
    }

    fn stderr_tail(&self) -> Vec<String> {
        self.tail
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .cloned()
            .collect()
    }
}

/// The handshake, bounded by [`START_TIMEOUT`].
async fn handshake<E: std::fmt::Display>(
    serving: impl std::future::Future<Output = Result<RunningService<RoleClient, ()>, E>>,
) -> Result<RunningService<RoleClient, ()>, String> {
    match tokio::time::timeout(START_TIMEOUT, serving).await {
        Ok(Ok(s)) => Ok(s),
        Ok(Err(e)) => Err(format!("the MCP handshake failed: {e}")),
        Err(_) => Err(format!(
            "it did not answer `initialize` within {} s",
            START_TIMEOUT.as_secs()
        )),
    }
}

async fn stop(r: Running) {
    // Cancelling the service closes a stdio server's standard input, which
    // is how it is told to exit (an HTTP server's session is ended).
    let _ = r.service.cancel().await;
    if let Some(mut child) = r.child {
        if tokio::time::timeout(STOP_WAIT, child.wait()).await.is_err() {
            let _ = child.kill().await;
        }
    }
}

/// Reads the server's standard error to its end: each line to the sink, if
/// any, and the last few kept. Lines are cut at [`STDERR_LINE_BYTES`].
async fn forward_stderr(
    mut stderr: tokio::process::ChildStderr,
    server: String,
    sink: Option<StderrSink>,
    tail: Arc<Mutex<VecDeque<String>>>,
) {
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = [0u8; 8192];
    let emit = |line: &[u8]| {
        let cut = &line[..line.len().min(STDERR_LINE_BYTES)];
        let text = String::from_utf8_lossy(cut).trim_end().to_owned();
        if let Some(sink) = &sink {
            sink(&server, &text);
        }
        let mut t = tail.lock().unwrap_or_else(|p| p.into_inner());
        if t.len() == STDERR_LINES {
            t.pop_front();
        }
        t.push_back(text);
    };
    loop {
        let n = match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        pending.extend_from_slice(&buf[..n]);
        while let Some(i) = pending.iter().position(|&b| b == b'\n') {
            emit(&pending[..i]);
            pending.drain(..=i);
        }
        if pending.len() > STDERR_LINE_BYTES {
            emit(&pending);
            pending.clear();
        }
    }
    if !pending.is_empty() {
        emit(&pending);
    }
}
