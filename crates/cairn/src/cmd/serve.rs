//! `cairn serve [--listen ADDR] [--token T]` (DESIGN §8): the store over
//! HTTP until SIGINT or SIGTERM.

use cairn_server::{ServeConfig, ServeError};

use crate::cli::ServeArgs;
use crate::cmd::Context;
use crate::exit::{coded, Code};
use crate::output;

pub fn run(ctx: &Context, args: ServeArgs) -> anyhow::Result<Code> {
    let store = cairn_store::Store::open(ctx.store.root())?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let config = ServeConfig {
            store,
            listen: args.listen,
            token: args.token.filter(|t| !t.is_empty()),
        };
        let (addr, server) = match cairn_server::bind(config).await {
            Ok(x) => x,
            Err(e @ ServeError::NeedsToken(_)) => return Err(coded(Code::Usage, e.to_string())),
            Err(e @ ServeError::Bind { .. }) => return Err(coded(Code::Usage, e.to_string())),
            Err(e) => return Err(e.into()),
        };
        output::note(format!(
            "cairn: serving {} on http://{addr}/ (the viewer at /, the API at /v1, its description at /openapi.json)",
            ctx.store.root().display()
        ));
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
