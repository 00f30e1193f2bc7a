//! `cairn push (ID | --all) REMOTE` and `cairn pull ID REMOTE` (DESIGN §12):
//! sessions, with their ancestors, objects and manifests, copied between
//! this store and another by `cairn_sessions::transfer`, which holds every
//! rule of the copy. Here REMOTE is parsed and the report rendered.
//!
//! REMOTE is another store's directory, a path (relative to the current
//! directory) or `file:///ABS/PATH` (push creates it when it is missing,
//! as `--store` creates a new store; pull needs it to exist), or a shared
//! store `nats://HOST:PORT/PREFIX`: journals on JetStream, objects and
//! manifests at `--objects s3://BUCKET/PREFIX` (or `CAIRN_OBJECTS`). Any
//! other scheme is bad usage.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use cairn_sessions::{SessionTransfer, TransferReport, TransferStatus};
use cairn_store::{canonical_prefix, RunId, Store};

use crate::cli::{PullArgs, PushArgs};
use crate::cmd::progress::Bars;
use crate::cmd::{check_store_path, shared, Context};
use crate::exit::{coded, Code};
use crate::output;

pub fn push(ctx: &Context, a: &PushArgs) -> anyhow::Result<Code> {
    let (id, remote) = match (a.all, a.args.as_slice()) {
        (true, [remote]) => (None, remote),
        (false, [id, remote]) => (Some(id), remote),
        (true, _) => {
            return Err(coded(
                Code::Usage,
                "--all pushes every session: give only the store to push to, `cairn push --all REMOTE`",
            ))
        }
        (false, _) => {
            return Err(coded(
                Code::Usage,
                "give the session and the store to push it to, `cairn push ID REMOTE`, or push every session with `cairn push --all REMOTE`",
            ))
        }
    };
    let ids_of = |id: Option<&String>| -> anyhow::Result<Vec<RunId>> {
        Ok(match id {
            Some(id) => vec![ctx.existing_run(id)?],
            None => {
                if let Some(shared) = &ctx.shared {
                    shared.sync_all()?;
                }
                let mut ids = ctx.store.run_ids()?;
                ids.retain(|id| ctx.store.journal_path(id).is_file());
                ids.sort();
                ids
            }
        })
    };
    if remote.starts_with("nats://") {
        let ids = ids_of(id)?;
        let shared = Shared::open(remote, ctx.objects.as_deref())?;
        let bars = Bars::new(a.json);
        let report = cairn_sessions::push_remote(&ctx.store, &shared.store(), &ids, &bars)
            .with_context(|| format!("pushing to {remote}"))?;
        return show(&report, remote, a.json);
    }
    let dir = remote_dir(ctx, remote)?;
    let ids = match id {
        Some(id) => vec![ctx.existing_run(id)?],
        None => {
            let mut ids = ctx.store.run_ids()?;
            ids.retain(|id| ctx.store.journal_path(id).is_file());
            ids.sort();
            ids
        }
    };
    if std::fs::metadata(&dir).is_ok_and(|m| !m.is_dir()) {
        return Err(not_a_directory(remote, &dir));
    }
    check_store_path(&dir)?;
    refuse_same_store(ctx.store.root(), &dir)?;
    // A new store is created, as `--store` creates one.
    let to = Store::open(&dir)?;
    copy(&ctx.store, &to, &ids, a.json)
}

pub fn pull(ctx: &Context, a: &PullArgs) -> anyhow::Result<Code> {
    let id = RunId::parse(&a.id)?;
    if a.remote.starts_with("nats://") {
        let shared = Shared::open(&a.remote, ctx.objects.as_deref())?;
        let to = Store::open(ctx.store.root())?;
        let bars = Bars::new(a.json);
        let report = cairn_sessions::pull_remote(&shared.store(), &to, &[id], &bars)
            .with_context(|| format!("pulling from {}", a.remote))?;
        return show(&report, &to.root().display().to_string(), a.json);
    }
    let dir = remote_dir(ctx, &a.remote)?;
    match std::fs::metadata(&dir) {
        Ok(m) if m.is_dir() => {}
        Ok(_) => return Err(not_a_directory(&a.remote, &dir)),
        Err(e) => {
            return Err(coded(
                Code::Usage,
                format!(
                "cannot pull from {}: {e}; give the directory of the store that holds the session",
                dir.display()
            ),
            ))
        }
    }
    let from = Store::at(&dir);
    if let Some(shared) = &ctx.shared {
        // Into a shared store: what a push from that directory does, then
        // the cache brought up to date.
        let bars = Bars::new(a.json);
        let report = cairn_sessions::push_remote(
            &from,
            &shared.shared.remote(),
            std::slice::from_ref(&id),
            &bars,
        )
        .with_context(|| format!("pulling from {} into {}", dir.display(), shared.url))?;
        shared.sync(&id)?;
        return show(&report, &shared.url, a.json);
    }
    if !from.journal_path(&id).is_file() {
        return Err(coded(
            Code::Usage,
            format!(
                "no session {id} in the store {}: list its sessions with `cairn --store {} sessions --all`",
                dir.display(),
                dir.display()
            ),
        ));
    }
    refuse_same_store(ctx.store.root(), &dir)?;
    let to = Store::open(ctx.store.root())?;
    copy(&from, &to, &[id], a.json)
}

/// A shared store: journals on JetStream, objects and manifests on S3.
struct Shared {
    journals: cairn_remote::JetStreamJournals,
    objects: cairn_remote::S3Objects,
}

impl Shared {
    fn open(remote: &str, objects: Option<&str>) -> anyhow::Result<Shared> {
        let objects = shared::parse_objects(remote, objects)?;
        let journals = shared::open_journals(remote)?;
        objects.check()?;
        Ok(Shared { journals, objects })
    }

    fn store(&self) -> cairn_sessions::RemoteStore<'_> {
        cairn_sessions::RemoteStore {
            journals: &self.journals,
            objects: &self.objects,
            files: &self.objects,
        }
    }
}

fn show(report: &TransferReport, to: &str, json: bool) -> anyhow::Result<Code> {
    if json {
        output::json(report)?;
    } else {
        output::text(&render(report, to))?;
    }
    Ok(Code::Ok)
}

/// The directory a REMOTE names: a path, or `file://` and an absolute path.
fn remote_dir(ctx: &Context, remote: &str) -> anyhow::Result<PathBuf> {
    if remote.is_empty() {
        return Err(coded(
            Code::Usage,
            "REMOTE is empty: give the directory of the other store",
        ));
    }
    if let Some(path) = remote.strip_prefix("file://") {
        if !path.starts_with('/') {
            return Err(coded(
                Code::Usage,
                format!("REMOTE {remote}: a file:// remote is an absolute path, file:///ABS/PATH"),
            ));
        }
        return Ok(PathBuf::from(path));
    }
    if let Some((scheme, _)) = remote.split_once("://") {
        return Err(coded(
            Code::Usage,
            format!(
                "REMOTE {remote}: a remote is a store directory (a path, or file:///ABS/PATH) or a shared store nats://HOST:PORT/PREFIX, not a {scheme}:// location"
            ),
        ));
    }
    Ok(ctx.cwd.join(remote))
}

fn not_a_directory(remote: &str, dir: &Path) -> anyhow::Error {
    coded(
        Code::Usage,
        format!(
            "REMOTE {remote}: {} is not a directory; give the directory of a cairn store",
            dir.display()
        ),
    )
}

/// Refuses a REMOTE that is this store itself.
fn refuse_same_store(store: &Path, remote: &Path) -> anyhow::Result<()> {
    if canonical_prefix(store) == canonical_prefix(remote) {
        return Err(coded(
            Code::Usage,
            format!(
                "REMOTE {} is this store itself: give another store's directory",
                remote.display()
            ),
        ));
    }
    Ok(())
}

fn copy(from: &Store, to: &Store, ids: &[RunId], json: bool) -> anyhow::Result<Code> {
    let bars = Bars::new(json);
    let report = cairn_sessions::transfer(from, to, ids, &bars).with_context(|| {
        format!(
            "copying from {} to {}",
            from.root().display(),
            to.root().display()
        )
    })?;
    show(&report, &to.root().display().to_string(), json)
}

fn render(r: &TransferReport, to: &str) -> String {
    let mut s = String::new();
    for t in &r.sessions {
        s.push_str(&line(t));
        s.push('\n');
    }
    s.push_str(&format!(
        "{} session(s) in {}: {} object(s) copied, {} byte(s) written\n",
        r.sessions.len(),
        to,
        r.objects_copied,
        r.bytes_copied
    ));
    s
}

fn line(t: &SessionTransfer) -> String {
    let tail = t.tail.get(..16).unwrap_or(&t.tail);
    match t.status {
        TransferStatus::Copied => format!(
            "copied      {}  +{} record(s), {} in all, tail {tail}; {} object(s), {} manifest(s), {} byte(s)",
            t.id, t.records_copied, t.records, t.objects_copied, t.manifests_copied, t.bytes_copied
        ),
        TransferStatus::UpToDate => {
            let mut l = format!("up to date  {}  {} record(s), tail {tail}", t.id, t.records);
            if t.objects_copied + t.manifests_copied > 0 {
                l.push_str(&format!(
                    "; {} missing object(s) and {} manifest(s) copied",
                    t.objects_copied, t.manifests_copied
                ));
            }
            l
        }
        TransferStatus::RemoteAhead => format!(
            "ahead       {}  the destination holds these records and more ({} in all, tail {tail}): nothing copied; copy the other way to bring them back",
            t.id, t.records
        ),
    }
}
