//! `cairn serve [--listen ADDR] [--token T]` (DESIGN §8): the store over
//! HTTP until SIGINT or SIGTERM.

use std::sync::Arc;

use cairn_agent::{stop_pair, Events};
use cairn_server::{Class, RunError, RunHooks, Runner, ServeConfig, ServeError, StartRequest};
use cairn_store::{RunId, Store};

use crate::cli::{ModelArgs, ServeArgs};
use crate::cmd::run::{self, NewSession};
use crate::cmd::Context;
use crate::exit::{coded, Code};
use crate::output;

pub fn run(ctx: &Context, args: ServeArgs) -> anyhow::Result<Code> {
    let store = cairn_store::Store::open(ctx.store.root())?;
    if let Some(shared) = &ctx.shared {
        // The server reads the cache: what other hosts write is brought in
        // every few seconds, as `cairn sessions` brings it in.
        let shared = shared.clone();
        std::thread::spawn(move || {
            // Each different failure said once, not every few seconds.
            let mut said = String::new();
            loop {
                match shared.sync_all() {
                    Ok(()) => said.clear(),
                    Err(e) => {
                        let line = format!("cairn: bringing {} into its cache: {e:#}", shared.url);
                        if line != said {
                            output::note(&line);
                            said = line;
                        }
                    }
                }
                std::thread::sleep(std::time::Duration::from_secs(3));
            }
        });
    }
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let with_token = args.token.is_some();
    let listen = crate::cmd::gateway::listen_addr(
        args.listen,
        &ctx.effective(&cairn_config::Flags::default()).serve_listen,
    )?;
    rt.block_on(async {
        let config = ServeConfig {
            store,
            listen,
            token: args.token,
            runner: Some(Arc::new(CliRunner { ctx: ctx.clone() })),
        };
        let (addr, server) = match cairn_server::bind(config).await {
            Ok(x) => x,
            Err(e @ (ServeError::NeedsToken(_) | ServeError::EmptyToken)) => {
                return Err(coded(Code::Usage, e.to_string()))
            }
            Err(e @ ServeError::Bind { .. }) => return Err(coded(Code::Usage, e.to_string())),
            Err(e) => return Err(e.into()),
        };
        output::note(format!(
            "cairn: serving {} on http://{addr}/ (the viewer at /, the API at /v1, its description at /openapi.json)",
            ctx.store.root().display()
        ));
        if with_token {
            output::note(
                "cairn: every request needs the token; a browser logs in at / (or opens /?token=TOKEN once)",
            );
        }
        use tokio::signal::unix::{signal, SignalKind};
        let mut int = signal(SignalKind::interrupt())?;
        let mut term = signal(SignalKind::terminate())?;
        tokio::select! {
            r = server => r?,
            _ = int.recv() => {}
            _ = term.recv() => {}
        }
        Ok(Code::Ok)
    })
}

/// Runs sessions for the server with the code of `cairn run` and `cairn
/// resume`, each on a thread of its own.
struct CliRunner {
    ctx: Context,
}

/// A run's streamed text, to the server's hooks.
struct Streamed<'a> {
    run: RunId,
    hooks: &'a mut dyn RunHooks,
}

impl Events for Streamed<'_> {
    fn text(&mut self, delta: &str) {
        self.hooks.text(&self.run, delta);
    }
}

/// An error as the CLI would classify it (its exit code's class).
fn classified(e: &anyhow::Error) -> RunError {
    let class = match crate::exit::classify(e) {
        Code::Usage => Class::Usage,
        Code::Refused => Class::Refused,
        Code::Integrity => Class::Integrity,
        _ => Class::Failure,
    };
    RunError {
        class,
        message: format!("{e:#}"),
    }
}

fn failure(message: String) -> RunError {
    RunError {
        class: Class::Failure,
        message,
    }
}

impl CliRunner {
    /// Runs `make`, then drives the agent it made, on a thread of its own;
    /// returns the session's id once the agent exists (or why it could not
    /// be made). The hooks hear of the run before any of its work.
    fn spawn(
        &self,
        ctx: Context,
        text: Option<String>,
        mut hooks: Box<dyn RunHooks>,
        make: impl FnOnce(&Context, &Store, cairn_agent::Stop) -> anyhow::Result<cairn_agent::Agent>
            + Send
            + 'static,
    ) -> Result<RunId, RunError> {
        let (tx, rx) = std::sync::mpsc::channel::<Result<RunId, RunError>>();
        std::thread::Builder::new()
            .name("cairn-serve-run".into())
            .spawn(move || {
                let rt = match tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                {
                    Ok(rt) => rt,
                    Err(e) => {
                        let _ = tx.send(Err(failure(e.to_string())));
                        return;
                    }
                };
                rt.block_on(async {
                    let made = Store::open(ctx.store.root())
                        .map_err(anyhow::Error::from)
                        .and_then(|store| {
                            let (handle, stop) = stop_pair();
                            make(&ctx, &store, stop).map(|a| (a, handle))
                        });
                    let (mut agent, handle) = match made {
                        Ok(x) => x,
                        Err(e) => {
                            let _ = tx.send(Err(classified(&e)));
                            return;
                        }
                    };
                    let run = agent.session().id().clone();
                    hooks.started(&run, handle);
                    let _ = tx.send(Ok(run.clone()));
                    let mut ev = Streamed {
                        run: run.clone(),
                        hooks: hooks.as_mut(),
                    };
                    if let Err(e) = agent.drive(text, &mut ev).await {
                        output::note(format!("cairn: a served run stopped: {e}"));
                    }
                    hooks.ended(&run);
                });
            })
            .map_err(|e| failure(format!("cannot start the run's thread: {e}")))?;
        rx.recv()
            .map_err(|_| failure("the run's thread ended before the session existed".into()))?
    }
}

impl Runner for CliRunner {
    fn start(&self, req: StartRequest, hooks: Box<dyn RunHooks>) -> Result<RunId, RunError> {
        let usage = |message: String| RunError {
            class: Class::Usage,
            message,
        };
        let dir = std::fs::canonicalize(&req.workspace)
            .map_err(|e| usage(format!("workspace {}: {e}", req.workspace)))?;
        if !dir.is_dir() {
            return Err(usage(format!(
                "workspace {}: not a directory",
                req.workspace
            )));
        }
        let ctx = Context {
            cwd: dir,
            ..self.ctx.clone()
        };
        let task = req.task.clone();
        self.spawn(ctx, Some(task.clone()), hooks, move |ctx, store, stop| {
            let model = ModelArgs {
                model: req.model.clone(),
                max_turns: req.max_turns,
                max_tokens: req.max_tokens,
                ..ModelArgs::default()
            };
            let spec = NewSession {
                model: &model,
                system: None,
                name: req.name.clone(),
            };
            run::check_new(ctx, &spec)?;
            run::new_agent(ctx, store, &spec, &task, stop)
        })
    }

    fn resume(
        &self,
        id: &RunId,
        text: Option<String>,
        hooks: Box<dyn RunHooks>,
    ) -> Result<(), RunError> {
        let id = id.clone();
        self.spawn(self.ctx.clone(), text, hooks, move |ctx, store, stop| {
            let mut quiet = cairn_agent::Silent;
            run::open_agent(
                ctx,
                store,
                &id,
                &ModelArgs::default(),
                false,
                stop,
                &mut quiet,
            )
        })
        .map(drop)
    }
}
