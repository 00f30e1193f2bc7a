//! `cairn fork ID [--at SEQ] [--workspace DIR]` and `cairn reindex`.

use crate::cli::ForkArgs;
use crate::cmd::progress::Bars;
use crate::cmd::Context;
use crate::exit::Code;
use crate::output;
use crate::setup::RunSummary;

pub fn run(ctx: &Context, args: &ForkArgs) -> anyhow::Result<Code> {
    let parent = ctx.existing_run(&args.id)?;
    if let Some(at) = args.at.as_deref().filter(|a| a.starts_with("cp_")) {
        return from_checkpoint(ctx, args, &parent, at);
    }
    let (id, writer, state) = crate::setup::fork_at_record(ctx, args, &parent)?;
    report(args, &parent, &id, &writer, &state, None)
}

/// `cairn fork ID --at CP [--workspace DIR]`: a new lineage from a
/// checkpoint — a VM session's with its own guest, any other's with its
/// workspace materialised, separate and writable, in DIR.
fn from_checkpoint(
    ctx: &Context,
    args: &ForkArgs,
    parent: &cairn_store::RunId,
    at: &str,
) -> anyhow::Result<Code> {
    let cpid = crate::setup::checkpoint_id(ctx, at)?;
    let dir = args.workspace.as_ref().map(|d| ctx.cwd.join(d));
    if let Some(dir) = &dir {
        ctx.refuse_store_inside(dir)?;
    }
    let store = cairn_store::Store::open(ctx.store.root())?;
    let progress = Bars::new(args.json);
    match cairn_vm::fork_at_checkpoint(&store, parent, &cpid, dir.as_deref(), &progress)? {
        cairn_vm::CheckpointFork::Machine(r) => {
            output::machine_restored(&r, args.json, "forked")?;
            Ok(Code::Ok)
        }
        cairn_vm::CheckpointFork::Workspace(f) => {
            report(args, parent, &f.id, &f.writer, &f.state, Some(f.files))
        }
    }
}

fn report(
    args: &ForkArgs,
    parent: &cairn_store::RunId,
    id: &cairn_store::RunId,
    writer: &cairn_journal::JournalWriter,
    state: &cairn_journal::RunState,
    files: Option<u64>,
) -> anyhow::Result<Code> {
    let pin = state.fork.as_ref().map_or(0, |f| f.seq);
    if args.json {
        output::json(&RunSummary {
            id: id.to_string(),
            status: state.status.as_str().into(),
            records: writer.seq(),
            tail: writer.tail().to_hex(),
        })?;
    } else {
        let mut s = format!(
            "forked session {id} from {parent} at seq {pin}
"
        );
        if let Some(n) = files {
            s.push_str(&format!(
                "  its workspace, {n} file(s), is in {}
",
                state.workspace
            ));
        }
        s.push_str(&format!(
            "  continue it with: cairn resume {id} [TEXT]
"
        ));
        output::text(&s)?;
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
    let mut failed = false;
    for w in cairn_sessions::reindex_workspaces(&store)? {
        match &w.result {
            Ok(r) => {
                s.push_str(&format!(
                    "workspace index of {}: {} snapshot(s), {} label(s), head {}\n",
                    w.run,
                    r.snapshots,
                    r.labels,
                    r.head.as_ref().map_or("none".into(), |h| h.to_string())
                ));
                for n in &r.not_rebuilt {
                    s.push_str(&format!(
                        "  not rebuilt: {}{}: {}\n",
                        n.snapshot,
                        n.label
                            .as_ref()
                            .map(|l| format!(" ({l})"))
                            .unwrap_or_default(),
                        n.reason
                    ));
                }
            }
            // A journal that does not read is already counted above.
            Err(e @ cairn_sessions::SessionError::Journal(_)) => {
                s.push_str(&format!("workspace index of {}: not rebuilt: {e}\n", w.run));
            }
            Err(e) => {
                failed = true;
                s.push_str(&format!("workspace index of {}: not rebuilt: {e}\n", w.run));
            }
        }
        for r in &w.unreadable_records {
            s.push_str(&format!("  unreadable boundary record {r}\n"));
        }
    }
    output::text(&s)?;
    Ok(if failed { Code::Failure } else { Code::Ok })
}
