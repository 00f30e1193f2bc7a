//! `cairn mcp` (DESIGN §17): the store served to an MCP client on stdin
//! and stdout until the client closes them. Stdout carries the protocol
//! alone; whatever cairn says goes to stderr.

use crate::cli::McpArgs;
use crate::cmd::Context;
use crate::exit::{coded, Code};

pub fn run(ctx: &Context, _args: &McpArgs) -> anyhow::Result<Code> {
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
    rt.block_on(cairn_mcp::CairnMcp::new(store).serve_stdio())?;
    Ok(Code::Ok)
}
