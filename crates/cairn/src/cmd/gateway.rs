//! `cairn gateway` (DESIGN §7): the model gateway any agent points its base
//! URL at, and what `cairn exec --gateway` shares with it.

use std::sync::{Arc, Mutex};

use cairn_gateway::{Filing, Gateway, GatewayConfig, ReplayMode, ReplayPolicy, SharedSession};
use cairn_journal::{RecordBody, Terminal, TerminalReason};
use cairn_sessions::Session;
use cairn_store::Store;

use crate::cli::{GatewayArgs, ReplayArg, UpstreamArgs};
use crate::cmd::{prices, Context};
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
        max_body: usize::try_from(upstream.max_body_mb.saturating_mul(1 << 20))
            .unwrap_or(usize::MAX),
        stall_before_final: std::env::var("CAIRN_FAULT").as_deref()
            == Ok("stall-before-final-event"),
    }
}

/// `cairn gateway`.
pub fn run(ctx: &Context, args: &GatewayArgs) -> anyhow::Result<Code> {
    let store = Store::open(ctx.store.root())?;
    let run = args
        .run
        .as_deref()
        .map(|id| ctx.existing_run(id))
        .transpose()?;
    let (filing, fixed): (Filing, Option<SharedSession>) = match (run, &args.name) {
        // A VM session is written by the CLI too (checkpoints, restores,
        // its machine's events) while its guest's calls go on: the gateway
        // visits it for each record instead of holding it.
        (Some(run), _) if cairn_vm::is_machine(&store, &run) => (Filing::Visiting(run), None),
        (Some(run), _) => {
            let s = Arc::new(Mutex::new(Session::open(&store, &run)?));
            (Filing::Fixed(s.clone()), Some(s))
        }
        (None, Some(name)) => {
            let s = Arc::new(Mutex::new(Session::create_without_model(
                &store, &ctx.cwd, name,
            )?));
            (Filing::Fixed(s.clone()), Some(s))
        }
        (None, None) => (
            Filing::ByClient {
                default_name: "calls through cairn gateway".into(),
                workspace: ctx.cwd.clone(),
            },
            None,
        ),
    };
    let config = config(&args.upstream, args.listen, args.token.clone());
    let pricing = Arc::new(prices::load()?);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let gateway = Gateway::bind(config.clone(), &store, filing, pricing)
            .await
            .map_err(|e| coded(Code::Usage, e.to_string()))?;
        let addr = gateway.local_addr();
        output::text(&format!("cairn gateway listening on http://{addr}\n"))?;
        output::note(format!(
            "cairn: point agents at it: OPENAI_BASE_URL=http://{addr}/v1 ANTHROPIC_BASE_URL=http://{addr} (upstreams {} and {}); stop with Ctrl-C",
            config.openai_upstream, config.anthropic_upstream
        ));
        gateway.serve(shutdown_signal()).await?;
        anyhow::Ok(())
    })?;
    if let Some(s) = fixed {
        end(&s, "the gateway stopped")?;
    }
    Ok(Code::Ok)
}

/// Appends a `terminal` to a session the gateway held.
pub fn end(session: &SharedSession, detail: &str) -> anyhow::Result<()> {
    let mut s = session
        .lock()
        .map_err(|_| anyhow::anyhow!("a session lock was poisoned"))?;
    let totals = s.state().totals;
    s.append(RecordBody::Terminal(Terminal {
        reason: TerminalReason::Completed,
        totals,
        detail: Some(detail.into()),
    }))?;
    Ok(())
}

/// Completes on the first SIGINT or SIGTERM.
async fn shutdown_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => {}
        _ = term.recv() => {}
    }
}
