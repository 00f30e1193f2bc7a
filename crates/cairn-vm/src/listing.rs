//! The guests of a store as `cairn vm ls` lists them, and `cairn vm stop`.
//!
//! Invariants: a guest is running exactly when its monitor socket answers
//! (whatever files remain); a stop journals `machine stopped` and ends the
//! session's stretch of work with a terminal, so the session is listed as
//! stopped, not running.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use cairn_journal::{Machine, MachineEvent, RecordBody};
use cairn_sessions::Session;
use cairn_store::{RunId, Store};
use serde::Serialize;
use serde_json::json;

use crate::machine::{
    alive, cfg_console, config, connect, kill_guest, read_pid, Accel, MachineConfig,
};
use crate::VmError;

/// A guest as `cairn vm ls` shows it.
#[derive(Clone, Debug, Serialize)]
pub struct MachineInfo {
    /// The session.
    pub id: String,
    /// Its name.
    pub name: Option<String>,
    /// `running`, `paused` (a save in progress, or killed mid-way),
    /// `stopped` (not running: stopped, exited or died).
    pub state: String,
    /// Memory, MiB.
    pub memory_mib: u64,
    /// The accelerator.
    pub accel: Accel,
    /// qemu's pid while it runs.
    pub pid: Option<u32>,
    /// The command the guest runs.
    pub command: Option<String>,
    /// The console log of the current generation.
    pub console: PathBuf,
}

/// Every VM session of the store, newest first.
///
/// # Errors
/// The machines directory cannot be listed.
pub fn list(store: &Store) -> Result<Vec<MachineInfo>, VmError> {
    let root = store.machines_dir();
    let entries = match std::fs::read_dir(&root) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(VmError::io("listing", &root, e)),
    };
    let mut out = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let Ok(run) = RunId::parse(&name) else {
            continue;
        };
        let dir = e.path();
        let Ok(cfg) = MachineConfig::load_from(&MachineConfig::path(&dir)) else {
            continue;
        };
        let (state, pid) = match connect(&dir).and_then(|mut q| q.status()) {
            Ok(s) => {
                let state = if s == "running" { "running" } else { "paused" };
                (state.to_string(), read_pid(&dir))
            }
            Err(_) => ("stopped".to_string(), None),
        };
        out.push(MachineInfo {
            id: run.to_string(),
            name: cfg.name.clone(),
            state,
            memory_mib: cfg.memory_mib,
            accel: cfg.accel,
            pid,
            command: cfg.command.clone(),
            console: cfg_console(&dir, &cfg),
        });
    }
    out.sort_by(|a, b| b.id.cmp(&a.id));
    Ok(out)
}

/// What [`stop`] did.
#[derive(Clone, Debug, Serialize)]
pub struct Stopped {
    /// The session.
    pub id: String,
    /// False when the guest was not running.
    pub was_running: bool,
}

/// Stops the session's guest (qemu's `quit`; SIGKILL if it does not go),
/// journals `machine stopped`, and ends the session's stretch of work with
/// an `interrupted` terminal (also when the guest was found gone), so it is
/// listed as stopped. A guest already gone is not an error.
///
/// # Errors
/// Not a VM session; the journal lock held (a save in progress).
pub fn stop(store: &Store, run: &RunId) -> Result<Stopped, VmError> {
    let _ = config(store, run)?;
    let mut session = Session::open(store, run)?;
    let dir = store.machine_dir(run);
    let was_running = match connect(&dir) {
        Ok(mut q) => {
            let _ = q.execute("quit", json!({}));
            let until = Instant::now() + Duration::from_secs(10);
            while read_pid(&dir).is_some_and(alive) && Instant::now() < until {
                std::thread::sleep(Duration::from_millis(20));
            }
            kill_guest(&dir);
            true
        }
        Err(_) => {
            kill_guest(&dir);
            false
        }
    };
    if was_running {
        session.append(RecordBody::Machine(Machine {
            event: MachineEvent::Stopped,
            checkpoint: None,
            pid: None,
            detail: None,
        }))?;
    }
    // The session's stretch of work ends with its guest (DESIGN §2): its
    // processes were stopped at once, whatever they were doing, so
    // `interrupted`; a restore from a checkpoint starts the next stretch.
    if session.state().status == cairn_journal::Status::Running {
        let totals = session.state().totals;
        session.append(RecordBody::Terminal(cairn_journal::Terminal {
            reason: cairn_journal::TerminalReason::Interrupted,
            totals,
            detail: Some(
                if was_running {
                    "its guest was stopped by `cairn vm stop`"
                } else {
                    "its guest was no longer running"
                }
                .into(),
            ),
        }))?;
    }
    Ok(Stopped {
        id: run.to_string(),
        was_running,
    })
}
