//! `cairn rewind ID (--list-snapshots | --to NODE[:ITER] [--restore-scope run|full]
//! [--fork] | --restore-snapshot SNAP) [--json]` (DESIGN §5.4).
//!
//! The session's journal is locked for the whole operation, so no run of it
//! can change the workspace underneath a restore. Every restore banks the
//! current state first (a `bank:` snapshot, journaled), so it can be undone.

use std::path::Path;

use cairn_sessions::RewindTarget;
use cairn_store::Store;
use cairn_workspace::{NodeRef, RestoreReport, RestoreScope};
use serde::Serialize;

use crate::cli::{RewindArgs, Scope};
use crate::cmd::progress::Bars;
use crate::cmd::Context;
use crate::exit::{coded, Code};
use crate::output;
use crate::setup::tracker;

#[derive(Serialize)]
struct RewindOut<'a> {
    run: String,
    #[serde(flatten)]
    report: &'a RestoreReport,
    #[serde(skip_serializing_if = "Option::is_none")]
    fork: Option<String>,
    /// Why `--fork` made no fork after the files were restored.
    #[serde(skip_serializing_if = "Option::is_none")]
    fork_error: Option<String>,
}

pub fn run(ctx: &Context, args: &RewindArgs) -> anyhow::Result<Code> {
    let id = ctx.existing_run(&args.id)?;
    let store = Store::open(ctx.store.root())?;
    if args.list_snapshots {
        // From the store alone: the workspace need not exist here.
        let list = cairn_workspace::list_snapshots(&store, &id)?;
        if args.json {
            output::json(&list)?;
        } else if list.is_empty() {
            output::text(&format!("session {id} has no workspace snapshots\n"))?;
        } else {
            let mut s = String::new();
            for x in &list {
                let labels: Vec<String> = x.labels.iter().map(|l| l.to_string()).collect();
                s.push_str(&format!(
                    "{}  {:<14}  {:>6} files {:>10}  {}\n",
                    x.id,
                    output::ago(&x.created),
                    x.files,
                    output::size(x.bytes),
                    labels.join(" ")
                ));
            }
            output::text(&s)?;
        }
        return Ok(Code::Ok);
    }

    // Bad usage is refused before anything is opened or changed.
    if args.fork && args.to.is_none() {
        return Err(coded(
            Code::Usage,
            "--fork forks the conversation at a node: give --to NODE[:ITER] (not --restore-snapshot)",
        ));
    }
    // Held until the end: no run of this session moves meanwhile.
    let mut session = cairn_sessions::Session::open(&store, &id)?;
    let root = session.state().workspace.clone();
    let ws = tracker(&store, &id, Path::new(&root))?;
    let bars = Bars::new(args.json);
    let scope = match args.restore_scope {
        Scope::Run => RestoreScope::Run,
        Scope::Full => RestoreScope::Full,
    };
    let node;
    let snap;
    let target = if let Some(to) = &args.to {
        node = NodeRef::parse(to).map_err(|e| coded(Code::Usage, e.to_string()))?;
        RewindTarget::Node(&node, scope)
    } else if let Some(s) = &args.restore_snapshot {
        snap = cairn_sessions::resolve_snapshot(&store, &id, s)?;
        if !args.json {
            output::note("cairn: --restore-snapshot restores the whole tree (after banking the current state)");
        }
        RewindTarget::Snapshot(&snap)
    } else {
        return Err(coded(
            Code::Usage,
            "give --list-snapshots, --to NODE[:ITER] or --restore-snapshot SNAP",
        ));
    };
    // Every precondition of the fork is checked before the first change;
    // from the restore on, every path prints the bank.
    let (report, fork) = match target {
        RewindTarget::Node(node, scope) if args.fork => {
            let done = cairn_sessions::rewind_and_fork(&mut session, &ws, node, scope, &bars)?;
            (done.report, Some(done.fork))
        }
        target => (
            cairn_sessions::rewind(&mut session, &ws, target, &bars)?,
            None,
        ),
    };
    drop(session);
    let (fork, fork_error) = match fork {
        None => (None, None),
        Some(Ok(child)) => (Some(child.to_string()), None),
        Some(Err(e)) => (None, Some(e)),
    };

    if args.json {
        output::json(&RewindOut {
            run: id.to_string(),
            report: &report,
            fork: fork.clone(),
            fork_error: fork_error.as_ref().map(ToString::to_string),
        })?;
    } else {
        let target = report
            .target_label
            .as_ref()
            .map(|l| format!("{l} ({})", report.target))
            .unwrap_or_else(|| report.target.to_string());
        let mut s = format!(
            "restored {target}, scope {}: {} written, {} deleted, {} mode change(s), {} emptied directories removed\n",
            match report.scope {
                RestoreScope::Run => "run (only what the session changed)",
                RestoreScope::Full => "full tree",
            },
            report.written.len(),
            report.deleted.len(),
            report.modes.len(),
            report.dirs_removed.len()
        );
        for l in &report.left_alone {
            s.push_str(&format!("  left alone: {} ({})\n", l.path, l.reason));
        }
        for l in &report.failed {
            s.push_str(&format!("  NOT RESTORED: {} ({})\n", l.path, l.reason));
        }
        s.push_str(&format!(
            "the state before this restore is banked as {} ({}); undo with: cairn rewind {id} --restore-snapshot {}\n",
            report.bank.label, report.bank.snapshot, report.bank.snapshot
        ));
        if let Some(f) = &fork {
            s.push_str(&format!(
                "forked the conversation as {f}; continue with: cairn resume {f} [TEXT]\n"
            ));
        }
        output::text(&s)?;
    }
    if let Some(e) = fork_error {
        let bank = &report.bank.snapshot;
        return Err(anyhow::Error::new(e).context(format!(
            "the files were restored (the state before is banked as {bank}: `cairn rewind {id} --restore-snapshot {bank}` puts it back), but forking the conversation failed"
        )));
    }
    if !report.is_complete() {
        output::note(format!(
            "cairn: {} path(s) could not be restored (listed above); the bank {} undoes the rest",
            report.failed.len(),
            report.bank.snapshot
        ));
        return Ok(Code::Failure);
    }
    Ok(Code::Ok)
}
