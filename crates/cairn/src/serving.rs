//! Running a server from the binary — not a command: a listen address
//! from the flag or the configuration, the gateway's configuration from
//! the upstream flags and cairn's environment, and serving until stopped
//! (twice: at once), saying what it waits for. `cairn gateway`,
//! `cairn exec --gateway`, `cairn wrap`, `cairn serve` and `cairn mcp
//! --listen` use these.

use std::time::Duration;

use cairn_gateway::{Gateway, GatewayConfig, ReplayMode, ReplayPolicy, Stopped};

use crate::cli::{ReplayArg, UpstreamArgs};
use crate::exit::{coded, Code};
use crate::output;

/// A gateway configuration from the flags and cairn's own environment: the
/// upstreams default to `OPENAI_BASE_URL` / `ANTHROPIC_BASE_URL`, the keys
/// used with `--token` are `OPENAI_API_KEY` / `ANTHROPIC_API_KEY`.
pub fn config(
    upstream: &UpstreamArgs,
    listen: std::net::SocketAddr,
    token: Option<String>,
) -> GatewayConfig {
    let env = |name: &str| std::env::var(name).ok().filter(|v| !v.trim().is_empty());
    let defaults = GatewayConfig::default();
    GatewayConfig {
        listen,
        token,
        admit_guest_host: false,
        openai_upstream: upstream
            .openai_upstream
            .clone()
            .or_else(|| env("OPENAI_BASE_URL"))
            .unwrap_or(defaults.openai_upstream),
        anthropic_upstream: upstream
            .anthropic_upstream
            .clone()
            .or_else(|| env("ANTHROPIC_BASE_URL"))
            .unwrap_or(defaults.anthropic_upstream),
        openai_key: env("OPENAI_API_KEY"),
        anthropic_key: env("ANTHROPIC_API_KEY"),
        replay: ReplayPolicy {
            mode: match upstream.replay {
                ReplayArg::Retries => ReplayMode::Retries,
                ReplayArg::Always => ReplayMode::Always,
            },
            offline: upstream.offline,
        },
        max_body: mib(upstream.max_body_mb),
        max_response: mib(upstream.max_response_mb),
        max_event: mib(upstream.max_event_mb),
        max_open_sessions: defaults.max_open_sessions,
        header_timeout: upstream.header_timeout,
        body_timeout: upstream.body_timeout,
        max_connections: upstream.max_connections as usize,
        stall_before_final: std::env::var("CAIRN_FAULT").as_deref()
            == Ok("stall-before-final-event"),
    }
}

/// A server's listen address: the flag, else the configured one.
pub fn listen_addr(
    flag: Option<std::net::SocketAddr>,
    configured: &cairn_config::Setting<String>,
) -> anyhow::Result<std::net::SocketAddr> {
    match flag {
        Some(a) => Ok(a),
        None => configured.value.parse().map_err(|e| {
            coded(
                Code::Usage,
                format!(
                    "listen address {:?} ({}) is not HOST:PORT: {e}",
                    configured.value, configured.origin
                ),
            )
        }),
    }
}

/// `mb` MiB in bytes.
fn mib(mb: u64) -> usize {
    usize::try_from(mb.saturating_mul(1 << 20)).unwrap_or(usize::MAX)
}

/// Resolves at the first SIGINT or SIGTERM: when `cairn serve` and `cairn
/// mcp --listen` stop. Installed when called, so no signal takes the
/// default action (death) while the server runs.
///
/// # Errors
/// The signals cannot be watched.
pub fn stop_signal() -> std::io::Result<impl std::future::Future<Output = ()> + Send> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut int = signal(SignalKind::interrupt())?;
    let mut term = signal(SignalKind::terminate())?;
    Ok(async move {
        tokio::select! {
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
    })
}

/// Serves until `stop`, then waits for what is in flight at most `grace`
/// (or until `again`, a second request to stop, named for the message),
/// saying what it waits for and, when it stops without it, which calls were
/// not stored (`who` names the command in those lines).
pub async fn serve_until_stopped(
    gateway: Gateway,
    who: &str,
    stop: impl std::future::Future<Output = ()> + Send,
    again: Option<(impl std::future::Future<Output = ()> + Send, &str)>,
    grace: Duration,
) -> anyhow::Result<Stopped> {
    let activity = gateway.activity();
    let asked = tokio::sync::Notify::new();
    let (again, hint) = match again {
        Some((again, hint)) => (Some(again), format!("; {hint} stops at once")),
        None => (None, String::new()),
    };
    let stop = async {
        stop.await;
        let purchases = activity.purchases();
        let others = activity.connections().saturating_sub(purchases.len());
        if !purchases.is_empty() || others > 0 {
            output::note(format!(
                "{who}: stopping (no new connections); waiting up to {} for {} call(s) still reading their upstream and {others} other open connection(s){hint}",
                humantime::format_duration(grace),
                purchases.len(),
            ));
            for p in &purchases {
                output::note(format!("  {p}"));
            }
        }
        asked.notify_one();
    };
    let now = async {
        asked.notified().await;
        match again {
            Some(again) => tokio::select! {
                () = again => {}
                () = tokio::time::sleep(grace) => {}
            },
            None => tokio::time::sleep(grace).await,
        }
    };
    let stopped = gateway.serve_until(stop, now).await?;
    if !stopped.unstored.is_empty() {
        output::note(format!(
            "{who}: stopped without waiting longer; {} call(s) were not stored (their upstream had not finished; a retry buys them again):",
            stopped.unstored.len()
        ));
        for p in &stopped.unstored {
            output::note(format!("  {p}"));
        }
    }
    Ok(stopped)
}

/// Prints the warnings of the bounded connection loop `cairn serve` and
/// `cairn mcp --listen` serve through (a connection not accepted) on stderr.
/// `RUST_LOG` overrides the filter.
pub fn log_listen_warnings() {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("cairn_gateway::listen=warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .with_ansi(false)
        .try_init();
}
