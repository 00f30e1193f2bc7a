//! `cairn fork ID [--at SEQ] [--workspace DIR]` and `cairn reindex`.

use crate::cli::ForkArgs;
use crate::cmd::run::RunSummary;
use crate::cmd::Context;
use crate::exit::{coded, Code};
use crate::output;

pub fn run(ctx: &Context, args: &ForkArgs) -> anyhow::Result<Code> {
    let parent = ctx.existing_run(&args.id)?;
    let at = match &args.at {
        None => None,
        Some(s) => Some(s.parse::<u64>().map_err(|_| {
            coded(Code::Usage, format!("--at {s}: give the seq of the last record to share (see `cairn session show {parent} --transcript`)"))
        })?),
    };
    let workspace = match &args.workspace {
        Some(d) => Some(
            std::fs::canonicalize(d)
                .map_err(|e| coded(Code::Usage, format!("--workspace {}: {e}", d.display())))?
                .to_string_lossy()
                .into_owned(),
        ),
        None => None,
    };
    let store = cairn_store::Store::open(ctx.store.root())?;
    let (id, writer, state) = cairn_sessions::fork(&store, &parent, at, workspace)?;
    let pin = state.fork.as_ref().map_or(0, |f| f.seq);
    if args.json {
        output::json(&RunSummary {
            id: id.to_string(),
            status: state.status.as_str().into(),
            records: writer.seq(),
            tail: writer.tail().to_hex(),
        })?;
    } else {
        output::text(&format!(
            "forked session {id} from {parent} at seq {pin}\n  continue it with: cairn resume {id} [TEXT]\n"
        ))?;
    }
    Ok(Code::Ok)
}

pub fn reindex(ctx: &Context) -> anyhow::Result<Code> {
    let store = cairn_store::Store::open(ctx.store.root())?;
    let (n, bad) = cairn_sessions::reindex(&store)?;
    let mut s = format!("reindexed {n} session(s)\n");
    if bad > 0 {
        s.push_str(&format!(
            "{bad} session(s) do not verify and have no projection: see `cairn verify --all`\n"
        ));
    }
    output::text(&s)?;
    Ok(Code::Ok)
}
