//! `cairn fork ID [--at SEQ] [--workspace DIR]` and `cairn reindex`.

use crate::cli::ForkArgs;
use crate::cmd::progress::Bars;
use crate::cmd::Context;
use crate::exit::{coded, Code};
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

/// `cairn fork ID --at CP --workspace DIR`: a new lineage from a checkpoint,
/// its workspace materialised, separate and writable, in DIR.
fn from_checkpoint(
    ctx: &Context,
    args: &ForkArgs,
    parent: &cairn_store::RunId,
    at: &str,
) -> anyhow::Result<Code> {
    let cpid = crate::setup::checkpoint_id(ctx, at)?;
    if cairn_vm::is_machine(&ctx.store, parent) {
        if args.workspace.is_some() {
            return Err(coded(
                Code::Usage,
                format!("session {parent} is a VM session: its fork gets its own copy of the guest's disk, and takes no --workspace"),
            ));
        }
        return fork_machine(ctx, parent, &cpid, args.json);
    }
    let Some(dir) = &args.workspace else {
        return Err(coded(
            Code::Usage,
            "forking at a checkpoint needs --workspace DIR: a new directory to hold its workspace",
        ));
    };
    let store = cairn_store::Store::open(ctx.store.root())?;
    let cp = cairn_checkpoint::show(&store, &cpid)?;
    if cp.run_id()? != *parent {
        return Err(coded(
            Code::Usage,
            format!(
                "checkpoint {cpid} belongs to session {}, not {parent}",
                cp.run
            ),
        ));
    }
    // The journal must still be what the checkpoint recorded, before
    // anything is written.
    let (pin, _) = cairn_sessions::pin_at(&store, parent, Some(cp.journal.seq))?;
    if pin.hash != cp.journal.hash {
        return Err(coded(
            Code::Integrity,
            format!(
                "session {parent}'s journal at seq {} no longer matches checkpoint {cpid}",
                cp.journal.seq
            ),
        ));
    }
    let dir = ctx.cwd.join(dir);
    ctx.refuse_store_inside(&dir)?;
    let made = cairn_checkpoint::materialize(&store, &cpid, &dir, &Bars::new(args.json))?;
    let root = std::fs::canonicalize(&dir)?.to_string_lossy().into_owned();
    let (id, writer, state) =
        cairn_sessions::fork(&store, parent, Some(cp.journal.seq), Some(root))?;
    report(args, parent, &id, &writer, &state, Some(made.files))
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

/// `cairn fork ID --at CP` of a VM session.
fn fork_machine(
    ctx: &Context,
    parent: &cairn_store::RunId,
    cp: &cairn_checkpoint::CheckpointId,
    json: bool,
) -> anyhow::Result<Code> {
    let store = cairn_store::Store::open(ctx.store.root())?;
    let r = cairn_vm::fork(&store, parent, cp, &Bars::new(json))?;
    output::machine_restored(&r, json, "forked")?;
    Ok(Code::Ok)
}
