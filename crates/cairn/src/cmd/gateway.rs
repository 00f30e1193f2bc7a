//! `cairn gateway` (DESIGN §7): the model gateway any agent points its base
//! URL at, and what `cairn exec --gateway` shares with it.

use std::sync::{Arc, Mutex};

use cairn_gateway::{Filing, Gateway, GatewayConfig, SharedSession};
use cairn_journal::{RecordBody, Terminal, TerminalReason};
use cairn_sessions::Session;
use cairn_store::Store;

use crate::cli::GatewayArgs;
use crate::cmd::Context;
use crate::exit::{coded, Code};
use crate::output;
use crate::prices;
use crate::serving::{config, listen_addr, serve_until_stopped};

/// Prints one line per model call on stderr (`cairn_gateway`'s `call`
/// events), and the gateway's warnings; with `quiet`, only the warnings.
/// `RUST_LOG` overrides the filter.
fn log_calls(quiet: bool) {
    let default = if quiet {
        "cairn_gateway=warn"
    } else {
        "cairn_gateway=info"
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| crate::output::VisibleWriter(std::io::stderr()))
        .with_target(false)
        .with_ansi(false)
        .try_init();
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
    // A VM session's guest calls the host's loopback by the name qemu gives
    // it (10.0.2.2): admitted as a loopback name only by its own gateway.
    let for_vm = matches!(filing, Filing::Visiting(_));
    // Flag, environment, configuration file, built-in default; each
    // upstream is said with where it came from.
    let eff = ctx.effective(&cairn_config::Flags {
        openai_base_url: args.upstream.openai_upstream.clone(),
        anthropic_base_url: args.upstream.anthropic_upstream.clone(),
        ..cairn_config::Flags::default()
    });
    let listen = listen_addr(args.listen, &eff.gateway_listen)?;
    let mut config = GatewayConfig {
        admit_guest_host: for_vm,
        ..config(&args.upstream, listen, args.token.clone())
    };
    if let Some(u) = &eff.openai_base_url {
        config.openai_upstream = u.value.clone();
    }
    if let Some(u) = &eff.anthropic_base_url {
        config.anthropic_upstream = u.value.clone();
    }
    let origin = |s: &Option<cairn_config::Setting<String>>| {
        s.as_ref()
            .map_or_else(|| "built-in default".to_owned(), |s| s.origin.to_string())
    };
    let upstreams = format!(
        "upstreams {} from {} and {} from {}",
        config.openai_upstream,
        origin(&eff.openai_base_url),
        config.anthropic_upstream,
        origin(&eff.anthropic_base_url)
    );
    log_calls(args.quiet);
    let pricing = Arc::new(prices::load()?);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let served = rt.block_on(async {
        let gateway = Gateway::bind(config.clone(), &store, filing, pricing)
            .await
            .map_err(|e| coded(Code::Usage, e.to_string()))?;
        let addr = gateway.local_addr();
        output::text(&format!("cairn gateway listening on http://{addr}\n"))?;
        output::note(format!(
            "cairn: point agents at it: OPENAI_BASE_URL=http://{addr}/v1 ANTHROPIC_BASE_URL=http://{addr} ({upstreams}); stop with Ctrl-C"
        ));
        let signals = signals();
        let nth = |n: u32| {
            let mut seen = signals.clone();
            async move {
                if seen.wait_for(|k| *k >= n).await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
        };
        serve_until_stopped(
            gateway,
            "cairn gateway",
            nth(1),
            Some((nth(2), "a second SIGINT or SIGTERM")),
            args.upstream.stop_grace,
        )
        .await
    });
    // Calls still reading a stalled upstream are not waited for.
    rt.shutdown_background();
    let stopped = served?;
    if let Some(s) = fixed {
        match stopped.unstored.len() {
            0 => end(&s, "the gateway stopped", TerminalReason::Completed)?,
            n => end(
                &s,
                &format!("the gateway stopped at once; {n} call(s) it was buying were not stored"),
                TerminalReason::Interrupted,
            )?,
        }
    }
    Ok(if stopped.unstored.is_empty() {
        Code::Ok
    } else {
        Code::Failure
    })
}

/// Appends a `terminal` to a session the gateway held.
pub fn end(session: &SharedSession, detail: &str, reason: TerminalReason) -> anyhow::Result<()> {
    let mut s = session
        .lock()
        .map_err(|_| anyhow::anyhow!("a session lock was poisoned"))?;
    let totals = s.state().totals;
    s.append(RecordBody::Terminal(Terminal {
        reason,
        totals,
        detail: Some(detail.into()),
    }))?;
    Ok(())
}

/// How many SIGINTs and SIGTERMs arrived so far; it stays 0 when they
/// cannot be watched.
fn signals() -> tokio::sync::watch::Receiver<u32> {
    use tokio::signal::unix::{signal, SignalKind};
    let (tx, rx) = tokio::sync::watch::channel(0u32);
    if let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) {
        tokio::spawn(async move {
            loop {
                tokio::select! {
                    _ = int.recv() => {}
                    _ = term.recv() => {}
                }
                tx.send_modify(|n| *n += 1);
            }
        });
    }
    rx
}
