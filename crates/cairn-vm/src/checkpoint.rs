//! VM checkpoints: save, restore and fork a running guest (DESIGN §13).
//!
//! Invariants:
//! - the guest is paused only from `stop` to `cont`: the disk is switched
//!   to a new overlay and the memory stream written in between; everything
//!   else (reading the frozen disk, chunking, publishing) runs after;
//! - `cont` is sent on every path out of a save that paused the guest;
//! - the console's length is read while the guest is stopped, so the
//!   console ledger of a restore counts exactly the lines printed after
//!   the saved memory;
//! - a save publishes one named directory (`saving/`) through
//!   cairn-checkpoint, so a checkpoint is listed only when whole;
//! - a restore or fork writes the checkpoint into a new generation
//!   directory (each chunk re-hashed as it is written), starts qemu only
//!   then, journals the `reconcile` record (restore) and the `machine`
//!   record before the guest is continued, and removes the new generation
//!   if anything fails before the guest runs.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use cairn_checkpoint::{CheckpointId, Progress, SaveReport};
use cairn_journal::{Machine, MachineEvent, Reconcile, Record, RecordBody, Rollback};
use cairn_sessions::Session;
use cairn_store::{RunId, Store};
use serde::Serialize;
use serde_json::json;

use crate::files;
use crate::guest;
use crate::machine::{self, MachineConfig};
use crate::qmp::Qmp;
use crate::VmError;

/// The staging directory's name: the named path every VM checkpoint saves.
const SAVING: &str = "saving";
/// Console lines a `reconcile` record quotes at most.
const TAIL_LINES: usize = 5;
/// How long a migration (out or in) may take.
const MIGRATION_LIMIT: Duration = Duration::from_secs(600);

/// What [`save`] did.
#[derive(Clone, Debug, Serialize)]
pub struct VmSaveReport {
    /// The checkpoint.
    #[serde(flatten)]
    pub report: SaveReport,
    /// How long the guest was paused, seconds.
    pub paused_secs: f64,
    /// The memory and device state stream, bytes.
    pub memory_bytes: u64,
}

/// Saves the running guest of `session` as one checkpoint: pause, switch
/// the disk to a new overlay, stream memory and device state, continue;
/// then stage the frozen disk, kernel, initrd and configuration and publish
/// all of it as one checkpoint (appending its `checkpoint` record).
///
/// # Errors
/// [`VmError::NotRunning`] (the guest died or was stopped: it is journaled
/// as `died` if it was not stopped); QMP, qemu-img, checkpoint errors.
pub fn save(session: &mut Session, progress: &dyn Progress) -> Result<VmSaveReport, VmError> {
    let store = session.store().clone();
    let run = session.id().clone();
    let cfg = machine::config(&store, &run)?;
    let dir = store.machine_dir(&run);
    let mut qmp = match machine::connect(&dir) {
        Ok(q) => q,
        Err(e) => {
            note_death(session, &e)?;
            return Err(e);
        }
    };
    recover(&mut qmp)?;
    let staging = dir.join(SAVING);
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(|e| VmError::io("removing", &staging, e))?;
    }
    files::create_dir(&staging)?;
    let gen = dir.join(&cfg.generation);
    let console_log = gen.join("console.log");
    let memory = staging.join("memory");
    let overlay = gen.join(format!(
        "top-{}.qcow2",
        ulid::Ulid::new().to_string().to_ascii_lowercase()
    ));

    qmp.execute(
        "migrate-set-parameters",
        json!({ "max-bandwidth": 64u64 << 30 }),
    )?;
    let paused_at = Instant::now();
    qmp.execute("stop", json!({}))?;
    // Measured while stopped: the vCPUs write the serial port to the file
    // synchronously, so every line the saved memory has printed is in it
    // and none printed after. (Measured before `stop`, a line printed in
    // between would count as after the checkpoint.)
    let console_offset = std::fs::metadata(&console_log).map_or(0, |m| m.len());
    // qemu makes the overlay under a daemon's umask, and the memory stream
    // through a shell it starts: both made private before, kept so after.
    files::create_empty(&overlay)?;
    files::create_empty(&memory)?;
    let frozen = pause_and_save(&mut qmp, &overlay, &memory);
    // Whatever happened, the guest runs again.
    let resumed = qmp.execute("cont", json!({}));
    let paused = paused_at.elapsed();
    let frozen = frozen?;
    resumed?;
    files::make_private(&overlay)?;

    let disk = staging.join("disk.raw");
    machine::run_qemu_img(
        &[
            "convert".as_ref(),
            "-U".as_ref(),
            "-O".as_ref(),
            "raw".as_ref(),
            frozen.as_os_str(),
            disk.as_os_str(),
        ],
        "reading the frozen disk",
    )?;
    machine::copy(&gen.join("kernel"), &staging.join("kernel"))?;
    machine::copy(&gen.join("initrd"), &staging.join("initrd"))?;
    let mut staged = cfg.clone();
    staged.disk = "disk.raw".into();
    staged.console_offset = Some(console_offset);
    staged.write_to(&staging.join("machine.json"))?;
    let memory_bytes = std::fs::metadata(&memory).map_or(0, |m| m.len());
    // The modes a restore gives back.
    files::make_private(&staging)?;

    let report = cairn_sessions::save_checkpoint(session, None, vec![staging.clone()], progress)?;
    let _ = std::fs::remove_dir_all(&staging);
    Ok(VmSaveReport {
        report,
        paused_secs: paused.as_secs_f64(),
        memory_bytes,
    })
}

/// While paused: the disk onto a new overlay, the memory stream written.
/// The frozen top layer's path.
fn pause_and_save(qmp: &mut Qmp, overlay: &Path, memory: &Path) -> Result<PathBuf, VmError> {
    qmp.execute(
        "blockdev-snapshot-sync",
        json!({
            "device": "disk0",
            "snapshot-file": overlay.to_string_lossy(),
            "format": "qcow2",
        }),
    )?;
    let frozen = backing_of_disk(qmp)?;
    qmp.execute(
        "migrate",
        json!({ "uri": format!("exec:cat > {}", shell_quote(&memory.to_string_lossy())) }),
    )?;
    wait_migration(qmp)?;
    Ok(frozen)
}

/// The image below the disk's current top.
fn backing_of_disk(qmp: &mut Qmp) -> Result<PathBuf, VmError> {
    let blocks = qmp.execute("query-block", json!({}))?;
    let disk = blocks
        .as_array()
        .and_then(|b| b.iter().find(|d| d["device"] == "disk0"))
        .ok_or_else(|| VmError::Qmp("query-block lists no disk0".into()))?;
    let image = &disk["inserted"]["image"];
    let backing = image["full-backing-filename"]
        .as_str()
        .or_else(|| image["backing-filename"].as_str())
        .ok_or_else(|| VmError::Qmp(format!("the disk has no frozen layer: {disk}")))?;
    Ok(PathBuf::from(backing))
}

/// Polls the migration until it completed; an error if it failed.
fn wait_migration(qmp: &mut Qmp) -> Result<(), VmError> {
    let until = Instant::now() + MIGRATION_LIMIT;
    loop {
        let info = qmp.migration()?;
        match info["status"].as_str() {
            Some("completed") => return Ok(()),
            Some("failed" | "cancelled") => {
                return Err(VmError::Qmp(format!(
                    "the machine state was not written: {}",
                    info.get("error-desc").unwrap_or(&info)
                )))
            }
            _ if Instant::now() > until => {
                let _ = qmp.execute("migrate_cancel", json!({}));
                return Err(VmError::Qmp(format!(
                    "writing the machine state took over {MIGRATION_LIMIT:?}: {info}"
                )));
            }
            _ => std::thread::sleep(Duration::from_millis(10)),
        }
    }
}

/// What a killed save may have left: a migration running (cancelled), and
/// a guest paused — `paused` by a save killed before its stream completed,
/// `postmigrate` by one killed after, which qemu refuses to migrate again
/// ("Can't migrate the vm that was paused due to previous migration"). The
/// guest is continued, as every save leaves it; this save pauses it again.
/// (The session's lock, held by the caller, rules out a save or restore in
/// progress elsewhere.)
fn recover(qmp: &mut Qmp) -> Result<(), VmError> {
    let info = qmp.migration()?;
    let active = !matches!(
        info["status"].as_str(),
        None | Some("none" | "completed" | "failed" | "cancelled")
    );
    if active {
        qmp.execute("migrate_cancel", json!({}))?;
        let until = Instant::now() + Duration::from_secs(30);
        while Instant::now() < until {
            let s = qmp.migration()?;
            if matches!(
                s["status"].as_str(),
                Some("cancelled" | "failed" | "completed")
            ) {
                break;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    if matches!(qmp.status()?.as_str(), "paused" | "postmigrate") {
        qmp.execute("cont", json!({}))?;
    }
    Ok(())
}

/// Journals that the guest was found gone, unless its last event says so.
fn note_death(session: &mut Session, why: &VmError) -> Result<(), VmError> {
    let records = journal_records(session.store(), session.id())?;
    let last = records.iter().rev().find_map(|r| match &r.body {
        RecordBody::Machine(m) => Some(m.event),
        _ => None,
    });
    if matches!(last, Some(MachineEvent::Started | MachineEvent::Restored)) {
        session.append(RecordBody::Machine(Machine {
            event: MachineEvent::Died,
            checkpoint: None,
            pid: None,
            detail: Some(why.to_string()),
        }))?;
    }
    Ok(())
}

fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// What [`restore`] and [`fork`] did.
#[derive(Clone, Debug, Serialize)]
pub struct RestoreReport {
    /// The session whose guest now runs (the fork, for a fork).
    pub id: String,
    /// The checkpoint.
    pub checkpoint: String,
    /// qemu's pid.
    pub pid: u32,
    /// What the restore rolled back (none for a fork).
    pub rolled_back: Option<Rollback>,
    /// The console log of the new generation.
    pub console: PathBuf,
    /// From the start of the restore to the guest running, seconds.
    pub secs: f64,
}

/// Restores checkpoint `id` of a VM session: refuses while its guest runs;
/// writes the checkpoint into a new generation (verified as written), starts
/// qemu paused, reads the memory stream, journals the `reconcile` record
/// (what the host saw after the checkpoint) and `machine restored`, and
/// continues the guest.
///
/// # Errors
/// [`VmError::Running`]; [`VmError::NoMachineState`]; checkpoint errors
/// (a damaged chunk: nothing started); qemu errors.
pub fn restore(
    store: &Store,
    id: &CheckpointId,
    progress: &dyn Progress,
) -> Result<RestoreReport, VmError> {
    let started = Instant::now();
    let cp = cairn_checkpoint::show(store, id)?;
    let run = cp.run_id()?;
    let current = machine::config(store, &run)?;
    let mut session = Session::open(store, &run)?;
    let dir = store.machine_dir(&run);
    if machine::connect(&dir).is_ok() {
        return Err(VmError::Running {
            run: run.to_string(),
        });
    }
    machine::kill_guest(&dir);
    let (cfg, mut qmp, pid, origin) = boot_from(store, id, &cp, &run, &dir, progress)?;
    // The host's ledger, read once for the comparison and for the gateway.
    let ledgers = journal_records(store, &run).and_then(|records| {
        let r = rolled_back(&records, &dir, &current, &origin, id, cp.journal.seq)?;
        Ok((r, records))
    });
    let (rollback, records) = match ledgers {
        Ok(l) => l,
        Err(e) => {
            machine::kill_guest(&dir);
            let _ = std::fs::remove_dir_all(dir.join(&cfg.generation));
            return Err(e);
        }
    };
    let journaled = session
        .append(RecordBody::Reconcile(Reconcile {
            changed: Vec::new(),
            snapshot: None,
            unknown: None,
            machine: Some(rollback.clone()),
        }))
        .and_then(|_| {
            session.append(RecordBody::Machine(Machine {
                event: MachineEvent::Restored,
                checkpoint: Some(id.to_string()),
                pid: Some(pid),
                detail: None,
            }))
        });
    let running = journaled
        .map_err(VmError::from)
        .and_then(|_| serve_again(store, &records, cp.journal.seq))
        .and_then(|_| qmp.execute("cont", json!({})).map(drop));
    if let Err(e) = running {
        machine::kill_guest(&dir);
        let _ = std::fs::remove_dir_all(dir.join(&cfg.generation));
        return Err(e);
    }
    cfg.write_to(&MachineConfig::path(&dir))?;
    remove_other_generations(&dir, &cfg.generation);
    Ok(RestoreReport {
        id: run.to_string(),
        checkpoint: id.to_string(),
        pid,
        rolled_back: Some(rollback),
        console: dir.join(&cfg.generation).join("console.log"),
        secs: started.elapsed().as_secs_f64(),
    })
}

/// `cairn fork ID --at CP` of a VM session: a new session forked at the
/// checkpoint's journal position, its own guest started from the checkpoint
/// with its own disk; the parent and its guest are untouched.
///
/// # Errors
/// As [`restore`], and fork errors.
pub fn fork(
    store: &Store,
    parent: &RunId,
    id: &CheckpointId,
    progress: &dyn Progress,
) -> Result<RestoreReport, VmError> {
    let started = Instant::now();
    let cp = cairn_checkpoint::show(store, id)?;
    if cp.run_id()? != *parent {
        return Err(VmError::Usage(format!(
            "checkpoint {id} belongs to session {}, not {parent}",
            cp.run
        )));
    }
    let _ = machine::config(store, parent)?;
    let (child, mut writer, _) = cairn_sessions::fork(store, parent, Some(cp.journal.seq), None)?;
    let dir = store.machine_dir(&child);
    let booted =
        boot_from(store, id, &cp, &child, &dir, progress).and_then(|(cfg, mut qmp, pid, _)| {
            writer.append(&RecordBody::Machine(Machine {
                event: MachineEvent::Restored,
                checkpoint: Some(id.to_string()),
                pid: Some(pid),
                detail: Some(format!("forked from {parent}")),
            }))?;
            serve_again(store, &journal_records(store, parent)?, cp.journal.seq)?;
            qmp.execute("cont", json!({}))?;
            cfg.write_to(&MachineConfig::path(&dir))?;
            Ok((cfg, pid))
        });
    let (cfg, pid) = match booted {
        Ok(b) => b,
        Err(e) => {
            machine::kill_guest(&dir);
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
    };
    Ok(RestoreReport {
        id: child.to_string(),
        checkpoint: id.to_string(),
        pid,
        rolled_back: None,
        console: dir.join(&cfg.generation).join("console.log"),
        secs: started.elapsed().as_secs_f64(),
    })
}

/// What a fork at a checkpoint made: a VM session's fork runs its own
/// guest; any other session's fork has its own workspace directory.
#[derive(Debug)]
pub enum CheckpointFork {
    /// The fork of a VM session, its guest running.
    Machine(RestoreReport),
    /// The fork of a workspace session.
    Workspace(Box<cairn_sessions::CheckpointFork>),
}

/// Forks `parent` at checkpoint `cp`, whatever kind of session it is: the
/// one place that decides between a machine fork ([`fork`]) and a workspace
/// fork ([`cairn_sessions::fork_from_checkpoint`]), for every front end.
/// A workspace fork needs `workspace`, a new or empty directory; a VM fork
/// takes none (it gets its own copy of the guest's disk).
///
/// # Errors
/// [`VmError::Usage`] for a `workspace` given to a VM session or missing
/// for another; then as [`fork`] or [`cairn_sessions::fork_from_checkpoint`].
pub fn fork_at_checkpoint(
    store: &Store,
    parent: &RunId,
    cp: &CheckpointId,
    workspace: Option<&Path>,
    progress: &dyn Progress,
) -> Result<CheckpointFork, VmError> {
    match (machine::is_machine(store, parent), workspace) {
        (true, None) => Ok(CheckpointFork::Machine(fork(store, parent, cp, progress)?)),
        (true, Some(_)) => Err(VmError::Usage(format!(
            "session {parent} is a VM session: its fork gets its own copy of the guest's disk, and takes no --workspace"
        ))),
        (false, Some(dir)) => Ok(CheckpointFork::Workspace(
            Box::new(cairn_sessions::fork_from_checkpoint(store, parent, cp, dir, progress)?),
        )),
        (false, None) => Err(VmError::Usage(
            "forking at a checkpoint needs --workspace DIR: a new directory to hold its workspace"
                .into(),
        )),
    }
}

/// Writes checkpoint `id` into a new generation of `dir` (for session
/// `run`) and starts qemu on it, paused, its memory read; the new
/// configuration (not yet written), the monitor, qemu's pid and where the
/// checkpoint was taken (its generation and console offset).
fn boot_from(
    store: &Store,
    id: &CheckpointId,
    cp: &cairn_checkpoint::Checkpoint,
    run: &RunId,
    dir: &Path,
    progress: &dyn Progress,
) -> Result<(MachineConfig, Qmp, u32, Origin), VmError> {
    let qemu = guest::need_tool("qemu-system-x86_64", "qemu-system-x86")?;
    let saved = cp
        .paths
        .iter()
        .find(|p| {
            Path::new(&p.path).file_name() == Some(SAVING.as_ref())
                && p.entries.iter().any(|e| e.path == "memory")
        })
        .ok_or_else(|| VmError::NoMachineState { id: id.to_string() })?;
    let generation = machine::new_generation();
    let gen = dir.join(&generation);
    // Made private and empty first: the checkpoint is written into it.
    let made = files::create_dir(&gen).and_then(|()| {
        cairn_checkpoint::materialize_path(store, id, &saved.path, &gen, progress)?;
        // A checkpoint saved by an older cairn carries open modes; its disk
        // is written back whole, zeros included.
        files::make_private(&gen)?;
        files::punch_zeros(&gen.join(MachineConfig::load_from(&gen.join("machine.json"))?.disk))?;
        // Durable before the machine's configuration names it, as a
        // generation `vm start` makes is.
        files::sync_generation(&gen)
    });
    if let Err(e) = made {
        let _ = std::fs::remove_dir_all(&gen);
        return Err(e);
    }
    let result = (|| {
        let mut cfg = MachineConfig::load_from(&gen.join("machine.json"))?;
        let origin = Origin {
            generation: cfg.generation.clone(),
            console_offset: cfg.console_offset.unwrap_or(0),
        };
        cfg.run = run.to_string();
        cfg.generation = generation.clone();
        cfg.console_offset = None;
        let pid = machine::launch(&qemu, dir, &cfg, true)?;
        let mut qmp = Qmp::connect(&machine::qmp_socket(dir))?;
        let memory = gen.join("memory");
        qmp.execute(
            "migrate-incoming",
            json!({ "uri": format!("exec:cat {}", shell_quote(&memory.to_string_lossy())) }),
        )?;
        wait_migration(&mut qmp)?;
        // The stream is in the guest now.
        let _ = std::fs::remove_file(&memory);
        Ok((cfg, qmp, pid, origin))
    })();
    if result.is_err() {
        machine::kill_guest(dir);
        let _ = std::fs::remove_dir_all(&gen);
    }
    result
}

/// Before a guest restored (or forked) from the checkpoint at `at_seq` of
/// `run` wakes: the responses of the model calls journaled after it are
/// marked not delivered in the gateway's store — the guest never got them —
/// so when it retries one the gateway serves it again instead of buying it
/// (DESIGN §7's rule for a call that was cut).
fn serve_again(store: &Store, records: &[Record], at_seq: u64) -> Result<(), VmError> {
    let responses = cairn_calls::ResponseStore::new(store);
    for r in records.iter().filter(|r| r.seq > at_seq) {
        if let RecordBody::ModelCall(m) = &r.body {
            responses.mark_undelivered(&m.key)?;
        }
    }
    Ok(())
}

/// Every record of `run`'s journal.
fn journal_records(store: &Store, run: &RunId) -> Result<Vec<Record>, VmError> {
    Ok(cairn_journal::read_journal(&store.journal_path(run), run.as_str())?.records)
}

/// Where a checkpoint was taken: its generation, and how far that
/// generation's console had got.
struct Origin {
    generation: String,
    console_offset: u64,
}

/// The two ledgers compared: what the host saw after the checkpoint.
fn rolled_back(
    records: &[Record],
    dir: &Path,
    current: &MachineConfig,
    origin: &Origin,
    id: &CheckpointId,
    at_seq: u64,
) -> Result<Rollback, VmError> {
    let model_calls = records
        .iter()
        .filter(|r| r.seq > at_seq)
        .filter_map(|r| match &r.body {
            RecordBody::ModelCall(m) if !m.replay => Some(r.seq),
            _ => None,
        })
        .collect();
    // The console of the generation that ran last: from the checkpoint's
    // place in it when the checkpoint was taken in that generation, whole
    // when it began later (a restore since).
    let from = if origin.generation == current.generation {
        origin.console_offset
    } else {
        0
    };
    let console =
        std::fs::read(dir.join(&current.generation).join("console.log")).unwrap_or_default();
    let after = console.get(from as usize..).unwrap_or_default();
    let text = String::from_utf8_lossy(after);
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let tail = lines[lines.len().saturating_sub(TAIL_LINES)..]
        .iter()
        .map(|l| printable(l))
        .collect();
    Ok(Rollback {
        checkpoint: id.to_string(),
        at_seq,
        model_calls,
        console_lines: lines.len() as u64,
        console_tail: tail,
    })
}

/// A console line as a record may quote it: no control characters, at most
/// 200 characters.
fn printable(line: &str) -> String {
    line.chars().filter(|c| !c.is_control()).take(200).collect()
}

fn remove_other_generations(dir: &Path, keep: &str) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with("gen-") && name != keep {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}
