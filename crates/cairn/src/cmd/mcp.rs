//! `cairn mcp [--listen ADDR [--token T]]` (DESIGN §17): the store served
//! to MCP clients, on stdin and stdout until the client closes them, or
//! over streamable HTTP at `/mcp` until SIGINT or SIGTERM. On stdio,
//! stdout carries the protocol alone: whatever cairn says goes to stderr.

use cairn_mcp::http::HttpConfig;
use cairn_mcp::{CairnMcp, McpError};

use crate::cli::McpArgs;
use crate::cmd::Context;
use crate::exit::{coded, Code};
use crate::output;

pub fn run(ctx: &Context, args: &McpArgs) -> anyhow::Result<Code> {
    if let Some(shared) = &ctx.shared {
        return Err(coded(
            Code::Usage,
            format!(
                "cairn mcp serves a store directory, not the shared store {}: run it with --store DIR (a pulled copy), or use `cairn serve` for a shared store",
                shared.url
            ),
        ));
    }
    let store = cairn_store::Store::open(ctx.store.root())?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let usage = |e: McpError| match e {
        McpError::Usage(_) => coded(Code::Usage, e.to_string()),
        McpError::Failed(_) => e.into(),
    };
    let Some(listen) = args.listen else {
        rt.block_on(CairnMcp::new(store).serve_stdio())
            .map_err(usage)?;
        return Ok(Code::Ok);
    };
    crate::serving::log_listen_warnings();
    rt.block_on(async {
        let stop = crate::serving::stop_signal()?;
        let config = HttpConfig {
            listen,
            token: args.token.clone(),
            bounds: args.bounds.bounds(),
        };
        let (addr, server) = cairn_mcp::http::bind(store, config, stop)
            .await
            .map_err(usage)?;
        output::note(format!(
            "cairn: serving {} to MCP clients at http://{addr}/mcp",
            ctx.store.root().display()
        ));
        server.await.map_err(usage)?;
        Ok(Code::Ok)
    })
}
