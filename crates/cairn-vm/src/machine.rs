//! A VM session's machine: its directory, its configuration, its qemu.
//!
//! Invariants: `machine.json` is written by temporary file, fsync and
//! rename, and only once the generation it names is durable (its files and
//! directory fsynced, [`files::sync_generation`]); one qemu per session, found by its monitor socket (a guest whose
//! socket does not answer is not running, whatever files remain); qemu's
//! command line is built in one place ([`qemu_command`]) so that a guest
//! restored from a checkpoint gets the machine it was saved on; every start
//! and stop is journaled.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use cairn_journal::{Machine, MachineEvent, RecordBody};
use cairn_sessions::Session;
use cairn_store::{RunId, Store};
use serde::{Deserialize, Serialize};

use crate::files;
use crate::guest::{self, Kernel};
use crate::qmp::Qmp;
use crate::VmError;

/// The version of `machine.json` this cairn writes.
const CONFIG_VERSION: u32 = 1;
/// How long a KVM boot may take before TCG is tried: a KVM that works boots
/// the default guest in about a second.
const KVM_PROBE: Duration = Duration::from_secs(8);
/// The default memory and disk.
pub const DEFAULT_MEMORY_MIB: u64 = 256;
/// The default disk size.
pub const DEFAULT_DISK_BYTES: u64 = 1 << 30;

/// The accelerator a guest runs with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Accel {
    /// Hardware virtualisation.
    Kvm,
    /// qemu's translator: slower, runs anywhere.
    Tcg,
}

impl Accel {
    fn args(self) -> [&'static str; 4] {
        match self {
            Accel::Kvm => ["-accel", "kvm", "-cpu", "host"],
            Accel::Tcg => ["-accel", "tcg,tb-size=256", "-cpu", "max"],
        }
    }

    /// `kvm` or `tcg`.
    pub fn as_str(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

/// `<machine>/machine.json`: what the guest is.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MachineConfig {
    /// Format version.
    pub version: u32,
    /// The session.
    pub run: String,
    /// Its name, if given.
    #[serde(default)]
    pub name: Option<String>,
    /// Memory, MiB.
    pub memory_mib: u64,
    /// The accelerator it runs with (a checkpoint restores on the same one:
    /// the CPU model differs).
    pub accel: Accel,
    /// The command the default guest runs.
    #[serde(default)]
    pub command: Option<String>,
    /// The current generation directory (`gen-<ulid>`).
    pub generation: String,
    /// The disk image in that generation (`base.raw`, `disk.raw`).
    pub disk: String,
    /// Where the guest's console stood at a save (in staged copies only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub console_offset: Option<u64>,
}

impl MachineConfig {
    pub(crate) fn path(dir: &Path) -> PathBuf {
        dir.join("machine.json")
    }

    pub(crate) fn load_from(path: &Path) -> Result<MachineConfig, VmError> {
        let bytes = std::fs::read(path).map_err(|e| VmError::io("reading", path, e))?;
        let cfg: MachineConfig = serde_json::from_slice(&bytes).map_err(|e| VmError::Damaged {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        if cfg.version > CONFIG_VERSION {
            return Err(VmError::Damaged {
                path: path.to_path_buf(),
                reason: format!(
                    "format version {} is newer than this cairn's {CONFIG_VERSION}; upgrade cairn",
                    cfg.version
                ),
            });
        }
        if !safe_name(&cfg.generation) || !safe_name(&cfg.disk) {
            return Err(VmError::Damaged {
                path: path.to_path_buf(),
                reason: "a file name in it is not a plain name".into(),
            });
        }
        Ok(cfg)
    }

    pub(crate) fn write_to(&self, path: &Path) -> Result<(), VmError> {
        let bytes = serde_json::to_vec_pretty(self).map_err(|e| VmError::Damaged {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        cairn_store::durable::write_atomic(path, &bytes)?;
        Ok(())
    }
}

/// A name of one component, no separators, no dots.
fn safe_name(s: &str) -> bool {
    !s.is_empty() && !s.starts_with('.') && !s.contains('/') && !s.contains('\0')
}

/// Whether `run` is a VM session.
pub fn is_machine(store: &Store, run: &RunId) -> bool {
    MachineConfig::path(&store.machine_dir(run)).is_file()
}

/// Loads the configuration of `run`'s machine.
pub(crate) fn config(store: &Store, run: &RunId) -> Result<MachineConfig, VmError> {
    let path = MachineConfig::path(&store.machine_dir(run));
    if !path.is_file() {
        return Err(VmError::NotAMachine {
            run: run.to_string(),
        });
    }
    MachineConfig::load_from(&path)
}

/// The monitor socket of a machine directory.
pub(crate) fn qmp_socket(dir: &Path) -> PathBuf {
    dir.join("qmp.sock")
}

/// Connects to the guest's monitor: [`VmError::NotRunning`] if none answers.
pub(crate) fn connect(dir: &Path) -> Result<Qmp, VmError> {
    let sock = qmp_socket(dir);
    if !sock.exists() {
        return Err(VmError::NotRunning {
            why: "it was never started here, or was stopped".into(),
        });
    }
    Qmp::connect(&sock)
}

/// Parses a size: `256M`, `1G`, `512` (MiB), `1073741824B`. In bytes.
///
/// # Errors
/// [`VmError::Usage`] naming the accepted forms.
pub fn parse_size(s: &str) -> Result<u64, VmError> {
    let bad = || {
        VmError::Usage(format!(
            "{s:?} is not a size: give a number of MiB, or one with a unit (512M, 2G, 1048576B)"
        ))
    };
    let t = s.trim();
    let (num, mult) = match t.char_indices().find(|(_, c)| !c.is_ascii_digit()) {
        None => (t, 1u64 << 20),
        Some((i, _)) => {
            let unit = t[i..].to_ascii_uppercase();
            let mult = match unit.trim_end_matches("IB").trim_end_matches('B') {
                "" if unit == "B" => 1,
                "K" => 1 << 10,
                "M" => 1 << 20,
                "G" => 1 << 30,
                "T" => 1 << 40,
                _ => return Err(bad()),
            };
            (&t[..i], mult)
        }
    };
    let n: u64 = num.parse().map_err(|_| bad())?;
    n.checked_mul(mult).filter(|&b| b > 0).ok_or_else(bad)
}

/// The host as the guest sees it on qemu's user-mode network; connections
/// to it reach the host's loopback (which is why the gateway admits it as a
/// loopback name).
use cairn_store::access::GUEST_HOST;

/// The URL a guest reaches a gateway on the host at: a loopback address
/// through [`GUEST_HOST`], any other as it is (the user-mode network routes
/// the guest's connections out through the host).
pub fn gateway_from_guest(addr: std::net::SocketAddr) -> String {
    if addr.ip().is_loopback() {
        format!("http://{GUEST_HOST}:{}", addr.port())
    } else {
        format!("http://{addr}")
    }
}

/// What `cairn vm start` is given.
#[derive(Clone, Debug, Default)]
pub struct StartOptions {
    /// The session's name.
    pub name: Option<String>,
    /// Memory, bytes (default 256 MiB).
    pub memory: Option<u64>,
    /// A disk image to copy in (raw or anything qemu-img reads); default: a
    /// new, empty ext4 disk of [`StartOptions::disk_size`].
    pub disk: Option<PathBuf>,
    /// The size of a new disk (default 1 GiB).
    pub disk_size: Option<u64>,
    /// The user's own kernel and initrd, instead of the default guest.
    pub kernel: Option<(PathBuf, PathBuf)>,
    /// What the default guest runs (a shell command line, in its disk).
    pub command: Option<String>,
    /// A `cairn gateway` on the host that the default guest's programs
    /// call (its `OPENAI_BASE_URL` and `ANTHROPIC_BASE_URL` point there).
    pub gateway: Option<std::net::SocketAddr>,
    /// The directory the session is filed under (listing by repository).
    pub workspace: PathBuf,
}

/// What [`start`] did.
#[derive(Clone, Debug, Serialize)]
pub struct Started {
    /// The session.
    pub id: String,
    /// qemu's pid.
    pub pid: u32,
    /// The accelerator.
    pub accel: Accel,
    /// The console log of this generation.
    pub console: PathBuf,
}

/// Starts a guest as a new session: assembles the default guest (or takes
/// the given kernel and initrd), makes or copies the disk, picks the
/// accelerator (KVM if a short boot works, else TCG; `CAIRN_VM_ACCEL` forces
/// one) and journals `machine started`.
///
/// # Errors
/// A missing qemu, qemu-img, busybox, mkfs.ext4 or kernel (named with the
/// package to install), bad sizes, qemu failing to start.
pub fn start(store: &Store, opts: &StartOptions) -> Result<Started, VmError> {
    let qemu = guest::need_tool("qemu-system-x86_64", "qemu-system-x86")?;
    let qemu_img = guest::need_tool("qemu-img", "qemu-utils")?;
    let memory_mib = opts
        .memory
        .unwrap_or(DEFAULT_MEMORY_MIB << 20)
        .div_ceil(1 << 20);
    if memory_mib < 64 {
        return Err(VmError::Usage(format!(
            "--memory {memory_mib}M is too small for a guest: give at least 64M"
        )));
    }
    let kernel = match &opts.kernel {
        Some(_) => None,
        None => Some(Kernel::find()?),
    };
    let mkfs = match opts.disk {
        Some(_) => None,
        None => Some(guest::need_tool("mkfs.ext4", "e2fsprogs")?),
    };
    if let Some(d) = &opts.disk {
        if !d.is_file() {
            return Err(VmError::Usage(format!(
                "--disk {}: no such image file",
                d.display()
            )));
        }
    }
    let label = opts
        .name
        .clone()
        .or_else(|| opts.command.as_ref().map(|c| format!("vm: {c}")))
        .unwrap_or_else(|| "vm".into());
    let mut session = Session::create_without_model(store, &opts.workspace, &label)?;
    let run = session.id().clone();
    let dir = store.machine_dir(&run);
    let generation = new_generation();
    let gen = dir.join(&generation);
    let made = (|| -> Result<MachineConfig, VmError> {
        files::create_dir(&store.machines_dir())?;
        files::create_dir(&dir)?;
        files::create_dir(&gen)?;
        match (&opts.kernel, &kernel) {
            (Some((k, i)), _) => {
                copy(k, &gen.join("kernel"))?;
                copy(i, &gen.join("initrd"))?;
            }
            (None, Some(k)) => {
                copy(&k.image, &gen.join("kernel"))?;
                let mut env = vec![
                    ("CAIRN_RUN", run.to_string()),
                    ("CAIRN_HOST", GUEST_HOST.into()),
                ];
                if let Some(addr) = opts.gateway {
                    let base = gateway_from_guest(addr);
                    env.push(("OPENAI_BASE_URL", format!("{base}/v1")));
                    env.push(("ANTHROPIC_BASE_URL", base.clone()));
                    env.push(("CAIRN_GATEWAY", base));
                }
                guest::default_initramfs(k, opts.command.as_deref(), &env, &gen.join("initrd"))?;
            }
            (None, None) => return Err(VmError::Guest("no kernel".into())),
        }
        let disk = gen.join("base.raw");
        match (&opts.disk, &mkfs) {
            (Some(image), _) => run_tool(
                Command::new(&qemu_img)
                    .args(["convert", "-O", "raw"])
                    .arg(image)
                    .arg(&disk),
                "copying the disk image",
            )?,
            (None, Some(mkfs)) => {
                let f = cairn_store::durable::create_file_private(&disk)?;
                f.set_len(opts.disk_size.unwrap_or(DEFAULT_DISK_BYTES))
                    .map_err(|e| VmError::io("sizing", &disk, e))?;
                run_tool(
                    Command::new(mkfs)
                        .args(["-q", "-F", "-E", "lazy_itable_init=0,lazy_journal_init=0"])
                        .arg(&disk),
                    "making the guest's file system",
                )?;
            }
            (None, None) => return Err(VmError::Guest("no disk".into())),
        }
        // mkfs zeroes its journal and inode tables; a copied image may
        // hold zeros written out.
        files::make_private(&disk)?;
        files::punch_zeros(&disk)?;
        // Before machine.json and the journal's `machine started` name it.
        files::sync_generation(&gen)?;
        Ok(MachineConfig {
            version: CONFIG_VERSION,
            run: run.to_string(),
            name: opts.name.clone(),
            memory_mib,
            accel: Accel::Tcg,
            command: opts.command.clone(),
            generation: generation.clone(),
            disk: "base.raw".into(),
            console_offset: None,
        })
    })();
    let mut cfg = match made {
        Ok(c) => c,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            let _ = session.close_if_only_bookkeeping("the guest could not be assembled");
            return Err(e);
        }
    };
    let booted = boot(store, &qemu, &dir, &mut cfg);
    let (pid, accel) = match booted {
        Ok(b) => b,
        Err(e) => {
            let _ = session.append(RecordBody::Machine(Machine {
                event: MachineEvent::Died,
                checkpoint: None,
                pid: None,
                detail: Some(e.to_string()),
            }));
            return Err(e);
        }
    };
    session.append(RecordBody::Machine(Machine {
        event: MachineEvent::Started,
        checkpoint: None,
        pid: Some(pid),
        detail: Some(format!("{} MiB, {}", cfg.memory_mib, accel.as_str())),
    }))?;
    Ok(Started {
        id: run.to_string(),
        pid,
        accel,
        console: gen.join("console.log"),
    })
}

/// Boots a fresh guest, choosing the accelerator; writes the configuration.
fn boot(
    store: &Store,
    qemu: &Path,
    dir: &Path,
    cfg: &mut MachineConfig,
) -> Result<(u32, Accel), VmError> {
    let cache = store.machines_dir().join("accel");
    let forced = match std::env::var("CAIRN_VM_ACCEL").ok().as_deref() {
        None | Some("") => None,
        Some("kvm") => Some(Accel::Kvm),
        Some("tcg") => Some(Accel::Tcg),
        Some(other) => {
            return Err(VmError::Usage(format!(
                "CAIRN_VM_ACCEL={other}: give kvm or tcg"
            )))
        }
    };
    let remembered = std::fs::read_to_string(&cache).ok();
    let kvm_usable = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok();
    let try_kvm = match forced {
        Some(a) => a == Accel::Kvm,
        None => kvm_usable && remembered.as_deref().map(str::trim) != Some("tcg"),
    };
    let mut kvm_said = None;
    if try_kvm {
        cfg.accel = Accel::Kvm;
        cfg.write_to(&MachineConfig::path(dir))?;
        match launch(qemu, dir, cfg, false)
            .and_then(|pid| wait_for_output(dir, cfg, pid, KVM_PROBE).map(|()| pid))
        {
            Ok(pid) => {
                let _ = cairn_store::durable::write_atomic(&cache, b"kvm\n");
                return Ok((pid, Accel::Kvm));
            }
            Err(e) if forced.is_some() => {
                return Err(VmError::Accel {
                    why: format!("CAIRN_VM_ACCEL=kvm: {e}"),
                })
            }
            Err(e) => {
                kill_guest(dir);
                let _ = std::fs::remove_file(cfg_console(dir, cfg));
                kvm_said = Some(e.to_string());
            }
        }
    }
    cfg.accel = Accel::Tcg;
    cfg.write_to(&MachineConfig::path(dir))?;
    let pid = launch(qemu, dir, cfg, false).map_err(|e| VmError::Accel {
        why: match &kvm_said {
            Some(k) => format!("under TCG: {e}; under KVM: {k}"),
            None => e.to_string(),
        },
    })?;
    if kvm_said.is_some() && forced.is_none() {
        // This host's KVM does not run the guest: do not wait on it again.
        let _ = files::create_dir(&store.machines_dir());
        let _ = cairn_store::durable::write_atomic(&cache, b"tcg\n");
    }
    Ok((pid, Accel::Tcg))
}

pub(crate) fn cfg_console(dir: &Path, cfg: &MachineConfig) -> PathBuf {
    dir.join(&cfg.generation).join("console.log")
}

/// Waits until the guest wrote something on its console.
fn wait_for_output(
    dir: &Path,
    cfg: &MachineConfig,
    pid: u32,
    limit: Duration,
) -> Result<(), VmError> {
    let console = cfg_console(dir, cfg);
    let until = Instant::now() + limit;
    loop {
        if std::fs::metadata(&console).is_ok_and(|m| m.len() > 0) {
            return Ok(());
        }
        if !alive(pid) {
            return Err(VmError::Qemu {
                what: "qemu exited before the guest wrote anything".into(),
                log: log_tail(&dir.join(&cfg.generation).join("qemu.log")),
            });
        }
        if Instant::now() >= until {
            return Err(VmError::Qemu {
                what: format!("the guest wrote nothing on its console in {limit:?}"),
                log: String::new(),
            });
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// qemu's command line for `cfg`'s current generation in `dir`.
pub(crate) fn qemu_command(
    qemu: &Path,
    dir: &Path,
    cfg: &MachineConfig,
    incoming: bool,
) -> Command {
    let gen = dir.join(&cfg.generation);
    let mut c = Command::new(qemu);
    c.args(["-name", &format!("cairn-{}", cfg.run)]);
    c.args(cfg.accel.args());
    c.args(["-machine", "pc"]);
    let qboot = Path::new("/usr/share/qemu/qboot.rom");
    if qboot.exists() {
        // A minimal firmware: the kernel boots half a second sooner.
        c.arg("-bios").arg(qboot);
    }
    c.args(["-m", &cfg.memory_mib.to_string(), "-smp", "1"])
        .args([
            "-nodefaults",
            "-no-user-config",
            "-no-reboot",
            "-display",
            "none",
        ])
        .arg("-kernel")
        .arg(gen.join("kernel"))
        .arg("-initrd")
        .arg(gen.join("initrd"))
        .args([
            "-append",
            "console=ttyS0 quiet loglevel=3 panic=-1 i8042.noaux i8042.nokbd i8042.nopnp",
        ])
        .arg("-drive")
        .arg(format!(
            "file={},format={},if=virtio,id=disk0,cache=writeback",
            drive_path(&gen.join(&cfg.disk)),
            if cfg.disk.ends_with(".qcow2") {
                "qcow2"
            } else {
                "raw"
            }
        ))
        .args(["-netdev", "user,id=net0"])
        .args(["-device", "virtio-net-pci,netdev=net0,romfile="])
        .arg("-chardev")
        .arg(format!(
            "file,id=console,path={}",
            drive_path(&gen.join("console.log"))
        ))
        .args(["-serial", "chardev:console"])
        .arg("-qmp")
        .arg(format!(
            "unix:{},server=on,wait=off",
            drive_path(&qmp_socket(dir))
        ))
        .arg("-daemonize")
        .arg("-pidfile")
        .arg(dir.join("qemu.pid"));
    if incoming {
        // Paused after the state is read: the host journals the
        // reconciliation before the guest runs.
        c.args(["-S", "-incoming", "defer"]);
    }
    c.stdin(Stdio::null()).stdout(Stdio::null());
    c
}

/// A path for a qemu option value: commas doubled, as qemu's option parser
/// wants them.
pub(crate) fn drive_path(p: &Path) -> String {
    p.to_string_lossy().replace(',', ",,")
}

/// Starts qemu for `cfg`'s current generation, daemonized; its pid.
pub(crate) fn launch(
    qemu: &Path,
    dir: &Path,
    cfg: &MachineConfig,
    incoming: bool,
) -> Result<u32, VmError> {
    let sock = qmp_socket(dir);
    // Unix socket paths are short (108 bytes with the terminator).
    if sock.as_os_str().len() > 100 {
        return Err(VmError::Usage(format!(
            "the store's path is too long for qemu's monitor socket ({}): use a store with a shorter path (CAIRN_STORE)",
            sock.display()
        )));
    }
    let _ = std::fs::remove_file(&sock);
    let _ = std::fs::remove_file(dir.join("qemu.pid"));
    let gen = dir.join(&cfg.generation);
    let log = gen.join("qemu.log");
    let log_file = files::open_append(&log)?;
    // qemu opens its console log without changing the mode of one that is
    // there; daemonized, it makes its files under its own umask.
    files::create_empty(&gen.join("console.log"))?;
    let mut cmd = qemu_command(qemu, dir, cfg, incoming);
    cmd.stderr(log_file);
    let status = files::private_umask(&mut cmd)
        .status()
        .map_err(|e| VmError::io("starting", qemu, e))?;
    if !status.success() {
        return Err(VmError::Qemu {
            what: format!("qemu did not start ({status})"),
            log: log_tail(&log),
        });
    }
    let pid_path = dir.join("qemu.pid");
    let pid = std::fs::read_to_string(&pid_path)
        .map_err(|e| VmError::io("reading", &pid_path, e))?
        .trim()
        .parse::<u32>()
        .map_err(|e| VmError::Qemu {
            what: format!(
                "qemu's pid file {} does not hold a pid: {e}",
                pid_path.display()
            ),
            log: String::new(),
        })?;
    for made in [qmp_socket(dir), pid_path, gen.join("console.log")] {
        files::make_private(&made)?;
    }
    Ok(pid)
}

/// The last lines of a log, prefixed for an error message; empty if none.
pub(crate) fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    if lines.is_empty() {
        return String::new();
    }
    let tail = &lines[lines.len().saturating_sub(6)..];
    format!("; qemu said ({}):\n  {}", log.display(), tail.join("\n  "))
}

/// Whether process `pid` exists (and is not a zombie we could see).
pub(crate) fn alive(pid: u32) -> bool {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return false;
    };
    // SAFETY: kill with signal 0 only checks that the process exists.
    let exists = unsafe { libc::kill(pid, 0) } == 0;
    if !exists {
        return false;
    }
    // A daemonized qemu is reparented; a zombie of ours is not running.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(')')
                .is_none_or(|(_, rest)| !rest.trim_start().starts_with('Z'))
        })
        .unwrap_or(true)
}

pub(crate) fn read_pid(dir: &Path) -> Option<u32> {
    std::fs::read_to_string(dir.join("qemu.pid"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

/// Kills the session's qemu, if any, and waits for it to go.
pub(crate) fn kill_guest(dir: &Path) {
    if let Some(pid) = read_pid(dir) {
        if let Ok(p) = libc::pid_t::try_from(pid) {
            // SAFETY: sending SIGKILL to qemu's pid, read from its pid file.
            unsafe {
                libc::kill(p, libc::SIGKILL);
            }
        }
        let until = Instant::now() + Duration::from_secs(10);
        while alive(pid) && Instant::now() < until {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let _ = std::fs::remove_file(qmp_socket(dir));
}

/// Runs a tool to its end under the private umask; its stderr in the error.
fn run_tool(cmd: &mut Command, what: &str) -> Result<(), VmError> {
    let out = files::private_umask(cmd)
        .output()
        .map_err(|e| VmError::io("running", Path::new(cmd.get_program()), e))?;
    if out.status.success() {
        return Ok(());
    }
    Err(VmError::Qemu {
        what: format!("{what} failed ({})", out.status),
        log: format!(": {}", String::from_utf8_lossy(&out.stderr).trim()),
    })
}

pub(crate) fn run_qemu_img(args: &[&std::ffi::OsStr], what: &str) -> Result<(), VmError> {
    let qemu_img = guest::need_tool("qemu-img", "qemu-utils")?;
    run_tool(Command::new(qemu_img).args(args), what)
}

/// Copies a kernel or an initrd in, `0600` (see [`files::copy_private`]).
pub(crate) fn copy(from: &Path, to: &Path) -> Result<(), VmError> {
    files::copy_private(from, to)
}

pub(crate) fn new_generation() -> String {
    format!("gen-{}", ulid::Ulid::new().to_string().to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!(parse_size("256").unwrap(), 256 << 20);
        assert_eq!(parse_size("256M").unwrap(), 256 << 20);
        assert_eq!(parse_size("1G").unwrap(), 1 << 30);
        assert_eq!(parse_size("2GiB").unwrap(), 2 << 30);
        assert_eq!(parse_size("512k").unwrap(), 512 << 10);
        assert_eq!(parse_size("4096B").unwrap(), 4096);
        for bad in ["", "M", "0", "1.5G", "12Q", "-1", "99999999999999999999T"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_configuration_naming_a_path_is_damaged() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = MachineConfig {
            version: CONFIG_VERSION,
            run: "r".into(),
            name: None,
            memory_mib: 256,
            accel: Accel::Tcg,
            command: None,
            generation: "../../etc".into(),
            disk: "base.raw".into(),
            console_offset: None,
        };
        let p = dir.path().join("machine.json");
        cfg.write_to(&p).unwrap();
        assert!(matches!(
            MachineConfig::load_from(&p),
            Err(VmError::Damaged { .. })
        ));
    }
}
