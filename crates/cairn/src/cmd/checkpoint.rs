//! `cairn checkpoint save|ls|show|restore|verify|stats` (DESIGN §6).
//!
//! A save and a restore hold the session's journal lock, so nothing of the
//! session moves meanwhile; a save appends a `checkpoint` record, holding
//! the SHA-256 of the manifest, after the checkpoint is complete (it exists
//! only once its manifest is renamed into place; it is used only while that
//! record vouches for it). A restore puts back the workspace and the named
//! paths, journaling its banks before it changes a named path — the
//! journal is append-only; `cairn fork ID --at CP` continues the
//! conversation from a checkpoint.

use std::path::Path;

use cairn_store::Store;
use serde::Serialize;

use crate::cli::{CheckpointCommand, CheckpointIdArgs, CheckpointSaveArgs, SessionJsonArgs};
use crate::cmd::progress::Bars;
use crate::cmd::Context;
use crate::exit::{coded, Code};
use crate::output;
use crate::setup::tracker;

pub fn run(ctx: &Context, c: CheckpointCommand) -> anyhow::Result<Code> {
    match c {
        CheckpointCommand::Save(a) => save(ctx, &a),
        CheckpointCommand::Ls(a) => ls(ctx, &a),
        CheckpointCommand::Show(a) => show(ctx, &a),
        CheckpointCommand::Restore(a) => restore(ctx, &a),
        CheckpointCommand::Verify(a) => verify(ctx, &a),
        CheckpointCommand::Stats(a) => stats(ctx, &a),
    }
}

#[derive(Serialize)]
struct SaveOut {
    id: String,
    /// SHA-256 of the manifest's bytes, as journaled.
    manifest: String,
    run: String,
    seq: u64,
    snapshot: Option<String>,
    logical_bytes: u64,
    stored_bytes: u64,
}

fn save(ctx: &Context, a: &CheckpointSaveArgs) -> anyhow::Result<Code> {
    let id = ctx.existing_run(&a.id)?;
    if cairn_vm::is_machine(&ctx.store, &id) {
        if !a.paths.is_empty() {
            return Err(coded(
                Code::Usage,
                format!("session {id} is a VM session: its checkpoint saves the whole machine, and takes no --path"),
            ));
        }
        return save_machine(ctx, &id, a.json);
    }
    let store = Store::open(ctx.store.root())?;
    let mut session = cairn_sessions::Session::open(&store, &id)?;
    let root = session.state().workspace.clone();
    let ws = tracker(&store, &id, Path::new(&root))?;
    let paths: Vec<std::path::PathBuf> = a.paths.iter().map(|p| ctx.cwd.join(p)).collect();
    let report =
        cairn_sessions::save_checkpoint(&mut session, Some(&ws), paths, &Bars::new(a.json))?;
    let out = SaveOut {
        id: report.id.to_string(),
        manifest: report.manifest.clone(),
        run: report.run.clone(),
        seq: report.seq,
        snapshot: report.snapshot.as_ref().map(|s| s.to_string()),
        logical_bytes: report.logical_bytes,
        stored_bytes: report.stored_bytes,
    };
    if a.json {
        output::json(&out)?;
    } else {
        let mut s = format!(
            "checkpoint {} of session {} at seq {}: {} logical, {} new stored\n",
            out.id,
            out.run,
            out.seq,
            output::size(out.logical_bytes),
            output::size(out.stored_bytes)
        );
        for sk in &report.skipped {
            s.push_str(&format!("  not saved: {sk}\n"));
        }
        output::text(&s)?;
    }
    Ok(Code::Ok)
}

#[derive(Serialize)]
struct LsOut {
    id: String,
    created: String,
    seq: u64,
    logical_bytes: u64,
    kind: cairn_checkpoint::CheckpointKind,
}

fn ls(ctx: &Context, a: &SessionJsonArgs) -> anyhow::Result<Code> {
    let id = ctx.existing_run(&a.id)?;
    let list = cairn_checkpoint::list(&ctx.store, &id)?;
    if a.json {
        let out: Vec<LsOut> = list
            .into_iter()
            .map(|c| LsOut {
                id: c.id.to_string(),
                created: c.created,
                seq: c.seq,
                logical_bytes: c.logical_bytes,
                kind: c.kind,
            })
            .collect();
        output::json(&out)?;
    } else if list.is_empty() {
        output::text(&format!("session {id} has no checkpoints\n"))?;
    } else {
        let mut s = String::new();
        for c in &list {
            s.push_str(&format!(
                "{}  {:<14}  seq {:>6}  {:>10}\n",
                c.id,
                output::ago(&c.created),
                c.seq,
                output::size(c.logical_bytes)
            ));
        }
        output::text(&s)?;
    }
    Ok(Code::Ok)
}

fn show(ctx: &Context, a: &CheckpointIdArgs) -> anyhow::Result<Code> {
    let id = crate::setup::checkpoint_id(ctx, &a.checkpoint)?;
    let cp = cairn_checkpoint::show(&ctx.store, &id)?;
    if a.json {
        output::json(&cp)?;
    } else {
        let v = serde_json::to_value(&cp)?;
        let mut s = format!("checkpoint {id}\n");
        for key in ["run", "created", "kind", "logical_bytes"] {
            if let Some(x) = v.get(key) {
                s.push_str(&format!(
                    "{key:<13} {}\n",
                    x.as_str().map_or_else(|| x.to_string(), str::to_owned)
                ));
            }
        }
        s.push_str(&format!(
            "journal       seq {} hash {}\n",
            cp.journal.seq, cp.journal.hash
        ));
        if let Some(paths) = v.get("paths").and_then(|p| p.as_array()) {
            for p in paths {
                s.push_str(&format!(
                    "path          {}\n",
                    p.get("path").map_or_else(String::new, |x| x.to_string())
                ));
            }
        }
        output::text(&s)?;
    }
    Ok(Code::Ok)
}

fn restore(ctx: &Context, a: &CheckpointIdArgs) -> anyhow::Result<Code> {
    let cpid = crate::setup::checkpoint_id(ctx, &a.checkpoint)?;
    let store = Store::open(ctx.store.root())?;
    let cp = cairn_checkpoint::show(&store, &cpid)?;
    let run = cp.run_id()?;
    if cairn_vm::is_machine(&store, &run) {
        return restore_machine(ctx, &cpid, a.json);
    }
    let mut session = cairn_sessions::Session::open(&store, &run)?;
    let root = session.state().workspace.clone();
    let ws = tracker(&store, &run, Path::new(&root))?;
    // The restore journals its banks itself, before it changes a named path.
    let report = cairn_sessions::restore_checkpoint(&mut session, &cpid, &ws, &Bars::new(a.json))?;
    if a.json {
        output::json(&report)?;
    } else {
        let mut s = format!("restored checkpoint {cpid} of session {run}");
        if let Some(w) = &report.workspace {
            s.push_str(&format!(
                ": workspace {} written, {} deleted",
                w.written.len(),
                w.deleted.len()
            ));
        }
        s.push_str(&format!(
            "; named paths {} written, {} deleted\n",
            report.written.len(),
            report.deleted.len()
        ));
        if let Some(bank) = &report.bank {
            s.push_str(&format!("the state before is saved as checkpoint {bank}: `cairn checkpoint restore {bank}` undoes this\n"));
        } else if let Some(w) = &report.workspace {
            s.push_str(&format!(
                "the workspace before is banked as {}: `cairn rewind {run} --restore-snapshot {}` undoes this\n",
                w.bank.label, w.bank.snapshot
            ));
        }
        if let Some(w) = &report.workspace {
            for l in &w.failed {
                s.push_str(&format!("  NOT RESTORED: {} ({})\n", l.path, l.reason));
            }
        }
        output::text(&s)?;
    }
    if report.workspace.as_ref().is_some_and(|w| !w.is_complete()) {
        output::note("cairn: some workspace paths could not be restored (listed above); the bank undoes the rest");
        return Ok(Code::Failure);
    }
    Ok(Code::Ok)
}

fn verify(ctx: &Context, a: &CheckpointIdArgs) -> anyhow::Result<Code> {
    let id = crate::setup::checkpoint_id(ctx, &a.checkpoint)?;
    let report = cairn_checkpoint::verify(&ctx.store, &id, &Bars::new(a.json))?;
    if a.json {
        output::json(&report)?;
    } else if report.ok {
        output::text(&format!(
            "ok       {id}  {} chunks re-hashed\n",
            report.chunks
        ))?;
    } else {
        // Say what is wrong: a problem may be a chunk, or the manifest or
        // the journal, which are not chunks.
        let mut s = format!(
            "DAMAGED  {id}  {} problem(s), {} chunks re-hashed:\n",
            report.bad.len(),
            report.chunks
        );
        for b in &report.bad {
            let what = match (&b.object, b.missing) {
                (Some(_), true) => "missing",
                (Some(_), false) => "damaged",
                (None, _) => "does not verify",
            };
            s.push_str(&format!("  {what}: {b}\n"));
        }
        output::text(&s)?;
    }
    Ok(if report.ok { Code::Ok } else { Code::Integrity })
}

#[derive(Serialize)]
struct StatsOut {
    checkpoints: u64,
    logical_bytes: u64,
    stored_bytes: u64,
    dedup_ratio: Option<f64>,
}

fn stats(ctx: &Context, a: &SessionJsonArgs) -> anyhow::Result<Code> {
    let id = ctx.existing_run(&a.id)?;
    let s = cairn_checkpoint::stats(&ctx.store, &id)?;
    let out = StatsOut {
        checkpoints: s.checkpoints,
        logical_bytes: s.logical_bytes,
        stored_bytes: s.stored_bytes,
        dedup_ratio: s.dedup_ratio,
    };
    if a.json {
        output::json(&out)?;
    } else {
        output::text(&format!(
            "{} checkpoint(s): {} logical, {} stored, dedup ratio {}\n",
            out.checkpoints,
            output::size(out.logical_bytes),
            output::size(out.stored_bytes),
            out.dedup_ratio
                .map_or_else(|| "n/a".into(), |r| format!("{r:.1}x"))
        ))?;
    }
    Ok(Code::Ok)
}

/// `cairn checkpoint save ID` of a VM session.
fn save_machine(ctx: &Context, id: &cairn_store::RunId, json: bool) -> anyhow::Result<Code> {
    let store = Store::open(ctx.store.root())?;
    let mut session = cairn_sessions::Session::open(&store, id)?;
    let r = cairn_vm::save(&mut session, &Bars::new(json))?;
    if json {
        output::json(&r)?;
    } else {
        output::text(&format!(
            "checkpoint {} of session {} at seq {}: the guest paused {:.3} s; {} logical bytes ({} of memory and device state), {} new bytes stored\n",
            r.report.id,
            r.report.run,
            r.report.seq,
            r.paused_secs,
            r.report.logical_bytes,
            r.memory_bytes,
            r.report.stored_bytes
        ))?;
    }
    Ok(Code::Ok)
}

/// `cairn checkpoint restore CP` of a VM session's checkpoint.
fn restore_machine(
    ctx: &Context,
    cp: &cairn_checkpoint::CheckpointId,
    json: bool,
) -> anyhow::Result<Code> {
    let store = Store::open(ctx.store.root())?;
    let r = cairn_vm::restore(&store, cp, &Bars::new(json))?;
    output::machine_restored(&r, json, "restored")?;
    Ok(Code::Ok)
}
