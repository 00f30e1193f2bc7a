//! `cairn verify (ID | --all) [--json]`: recompute the chain, name the first bad seq.

use serde::Serialize;

use crate::cli::VerifyArgs;
use crate::cmd::Context;
use crate::exit::Code;
use crate::output;

#[derive(Serialize)]
struct Report {
    id: String,
    ok: bool,
    records: u64,
    tail: String,
    first_bad_seq: Option<u64>,
    torn_tail: bool,
    preallocated_tail: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    problem: Option<String>,
}

pub fn run(ctx: &Context, args: &VerifyArgs) -> anyhow::Result<Code> {
    let ids = match &args.id {
        Some(id) => vec![ctx.existing_run(id)?],
        None => {
            let mut ids = ctx.store.run_ids()?;
            ids.retain(|id| ctx.store.journal_path(id).is_file());
            ids.sort();
            ids
        }
    };
    let mut reports = Vec::with_capacity(ids.len());
    for id in &ids {
        // The chain, every terminal against the records (a fork's over its
        // whole lineage), and the bodies its model calls name.
        let r = cairn_sessions::verify(&ctx.store, id)?;
        let report = Report {
            id: id.to_string(),
            ok: r.ok(),
            records: r.records,
            tail: r.tail.to_hex(),
            first_bad_seq: r.first_bad_seq,
            torn_tail: r.torn_tail,
            preallocated_tail: r.preallocated_tail,
            problem: r.problem,
        };
        reports.push(report);
    }
    let all_ok = reports.iter().all(|r| r.ok);
    if args.json {
        if args.all {
            output::json(&reports)?;
        } else if let Some(r) = reports.first() {
            output::json(r)?;
        }
    } else {
        let mut s = String::new();
        for r in &reports {
            if r.ok {
                s.push_str(&format!(
                    "ok       {}  {} records, tail {}",
                    r.id,
                    r.records,
                    &r.tail[..16]
                ));
                if r.torn_tail {
                    s.push_str(
                        "  (torn tail ignored: an interrupted write; the next writer cuts it)",
                    );
                } else if r.preallocated_tail {
                    s.push_str(
                        "  (preallocated space after the last record: its writer is running, or stopped before cutting it; the next writer cuts it)",
                    );
                }
            } else {
                let at = r
                    .first_bad_seq
                    .map_or_else(String::new, |s| format!("first bad seq {s}: "));
                s.push_str(&format!(
                    "DAMAGED  {}  {at}{}",
                    r.id,
                    r.problem.as_deref().unwrap_or("")
                ));
            }
            s.push('\n');
        }
        if reports.is_empty() {
            s.push_str("no sessions in this store\n");
        }
        output::text(&s)?;
        if !all_ok {
            output::note("cairn: a journal does not verify: the records before the first bad seq are intact; keep a copy of the run directory before changing anything");
        }
    }
    Ok(if all_ok { Code::Ok } else { Code::Integrity })
}
