//! `cairn snapshot`, `cairn check-ignore`, `cairn prune`, and what the
//! workspace commands share: the capture settings, the session to record
//! into, the tracker of a session.

use std::path::Path;

use anyhow::Context as _;

use cairn_store::Store;
use cairn_workspace::{IgnoreOptions, IgnoreRules, Label, RuleSource};
use serde::Serialize;

use crate::cli::{CheckIgnoreArgs, PruneArgs, SnapshotArgs};
use crate::cmd::progress::Bars;
use crate::cmd::Context;
use crate::exit::{coded, Code};
use crate::output;

#[derive(Serialize)]
struct SnapshotOut<'a> {
    run: String,
    id: String,
    label: String,
    deduped: bool,
    files: u64,
    bytes: u64,
    hashed: u64,
    skipped: &'a [cairn_workspace::Skipped],
}

/// `cairn snapshot [--run ID] [--label LABEL] [--json]`.
pub fn snapshot(ctx: &Context, args: &SnapshotArgs) -> anyhow::Result<Code> {
    let label = match &args.label {
        Some(l) => Some(Label::parse(l).map_err(|e| coded(Code::Usage, e.to_string()))?),
        None => None,
    };
    let store = Store::open(ctx.store.root())?;
    let mut session =
        crate::setup::session_for(ctx, &store, args.run.as_deref(), "workspace snapshots")?;
    let root = session.state().workspace.clone();
    let ws = crate::setup::tracker(&store, session.id(), Path::new(&root))?;
    let report = ws.snapshot(label.as_ref(), &Bars::new(args.json))?;
    session.record_capture(&report)?;
    session.close_if_only_bookkeeping("workspace snapshots taken with `cairn snapshot`")?;
    session.refresh_projections();
    let out = SnapshotOut {
        run: session.id().to_string(),
        id: report.snapshot.to_string(),
        label: report.label.to_string(),
        deduped: report.deduped,
        files: report.files,
        bytes: report.bytes,
        hashed: report.hashed,
        skipped: &report.skipped,
    };
    if args.json {
        output::json(&out)?;
    } else {
        let mut s = format!(
            "{} {} in session {}: {} files, {} ({} read, the rest from the stat cache){}\n",
            out.label,
            out.id,
            out.run,
            out.files,
            output::size(out.bytes),
            out.hashed,
            if out.deduped {
                ", unchanged since the last snapshot"
            } else {
                ""
            }
        );
        for sk in &report.skipped {
            s.push_str(&format!("  not captured: {} ({})\n", sk.path, sk.reason));
        }
        output::text(&s)?;
    }
    Ok(Code::Ok)
}

/// `cairn check-ignore [-v] PATH…`: exit 0 if any path is excluded, 1 if none.
pub fn check_ignore(ctx: &Context, args: &CheckIgnoreArgs) -> anyhow::Result<Code> {
    let root = cairn_sessions::repository_root(&ctx.cwd);
    let mut opts = IgnoreOptions::default();
    if let Ok(store) = std::fs::canonicalize(ctx.store.root()) {
        if let Some(rel) = store.strip_prefix(&root).ok().and_then(|r| r.to_str()) {
            if !rel.is_empty() {
                opts = opts.always_exclude(rel);
            }
        }
    }
    // Exit 1 means "nothing excluded", so a failure to answer is bad input
    // (2), never 1.
    let rules = IgnoreRules::load(&root, &opts).map_err(|e| {
        coded(
            Code::Usage,
            format!("cannot read the workspace rules of {}: {e}", root.display()),
        )
    })?;
    let mut out = String::new();
    let mut any = false;
    for p in &args.paths {
        let abs = ctx.cwd.join(p);
        let Some(rel) = relative(&root, &abs) else {
            return Err(coded(
                Code::Usage,
                format!(
                    "{} is outside the workspace {}",
                    p.display(),
                    root.display()
                ),
            ));
        };
        let shown = p.to_string_lossy();
        let is_dir =
            shown.ends_with('/') || std::fs::symlink_metadata(&abs).is_ok_and(|m| m.is_dir());
        let Some(m) = rules.check(&rel, is_dir) else {
            continue;
        };
        if m.excluded {
            any = true;
        }
        if args.verbose {
            let source = match &m.source {
                RuleSource::File(f) => f
                    .strip_prefix(&root)
                    .unwrap_or(f)
                    .to_string_lossy()
                    .into_owned(),
                other => other.to_string(),
            };
            out.push_str(&format!("{source}:{}:{}\t{shown}\n", m.line, m.rule));
        } else if m.excluded {
            out.push_str(&format!("{shown}\n"));
        }
    }
    output::text(&out)?;
    Ok(if any { Code::Ok } else { Code::Failure })
}

/// `path` relative to `root`, `/`-separated, resolved lexically.
fn relative(root: &Path, path: &Path) -> Option<String> {
    let mut parts: Vec<String> = Vec::new();
    let name = path.file_name()?;
    let base = std::fs::canonicalize(path.parent()?)
        .ok()
        .map(|p| p.join(name));
    let path = base.as_deref().unwrap_or(path);
    for c in path.strip_prefix(root).ok()?.components() {
        match c {
            std::path::Component::Normal(s) => parts.push(s.to_str()?.to_owned()),
            std::path::Component::CurDir => {}
            _ => return None,
        }
    }
    (!parts.is_empty()).then(|| parts.join("/"))
}

#[derive(Serialize)]
struct PruneOut {
    objects: u64,
    bytes: u64,
    dry_run: bool,
    kept: u64,
    kept_bytes: u64,
}

/// `cairn prune [--dry-run] [--json]`.
/// `prune --grace`'s default on a shared store.
const DEFAULT_GRACE: std::time::Duration = std::time::Duration::from_secs(3600);

pub fn prune(ctx: &Context, args: &PruneArgs) -> anyhow::Result<Code> {
    if let Some(shared) = &ctx.shared {
        let grace = args.grace.unwrap_or(DEFAULT_GRACE);
        let r = shared
            .shared
            .prune(&ctx.store, grace, args.dry_run)
            .with_context(|| format!("pruning the objects of {}", shared.url))?;
        if args.json {
            output::json(&r)?;
        } else {
            let verb = if r.dry_run { "would remove" } else { "removed" };
            output::text(&format!(
                "{verb} {} object(s), {} from the shared pool; kept {} named and {} younger than {}\n",
                r.objects,
                output::size(r.bytes),
                r.kept,
                r.kept_young,
                humantime::format_duration(grace)
            ))?;
        }
        return Ok(Code::Ok);
    }
    if let Some(g) = args.grace {
        // Said, not ignored: a user who asked for a grace period expects
        // young objects kept, and a store directory's prune does not need
        // one (captures hold the store lock it takes).
        return Err(coded(
            Code::Usage,
            format!(
                "--grace {} applies to a shared store (--store nats://…) only: a store directory's prune takes the store lock, so no capture in progress can lose an object; run it without --grace",
                humantime::format_duration(g)
            ),
        ));
    }
    let store = Store::open(ctx.store.root())?;
    let report = cairn_sessions::prune(
        &store,
        &cairn_objects::PruneOptions::new()
            .dry_run(args.dry_run)
            .wait(true),
        &Bars::new(args.json),
    )?;
    let out = PruneOut {
        objects: report.objects,
        bytes: report.bytes,
        dry_run: report.dry_run,
        kept: report.kept,
        kept_bytes: report.kept_bytes,
    };
    if args.json {
        output::json(&out)?;
    } else {
        let verb = if out.dry_run {
            "would remove"
        } else {
            "removed"
        };
        output::text(&format!(
            "{verb} {} object(s), {}; kept {} object(s), {}\n",
            out.objects,
            output::size(out.bytes),
            out.kept,
            output::size(out.kept_bytes)
        ))?;
    }
    Ok(Code::Ok)
}
