//! `cairn serve [--listen ADDR] [--token T] [--max-connections N]
//! [--header-timeout D] [--body-timeout D]` (DESIGN §8): the store over
//! HTTP until SIGINT or SIGTERM.

use cairn_server::{ServeConfig, ServeError};

use crate::cli::ServeArgs;
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
    crate::serving::log_listen_warnings();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let with_token = args.token.is_some();
    let listen = crate::serving::listen_addr(
        args.listen,
        &ctx.effective(&cairn_config::Flags::default()).serve_listen,
    )?;
    rt.block_on(async {
        let config = ServeConfig {
            store,
            listen,
            token: args.token,
            launcher: Some(crate::setup::launcher(ctx)?),
            live: Default::default(),
            bounds: args.bounds.bounds(),
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
        let stop = crate::serving::stop_signal()?;
        tokio::select! {
            r = server => r?,
            () = stop => {}
        }
        Ok(Code::Ok)
    })
}
