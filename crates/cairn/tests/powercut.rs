//! Real power cuts (DESIGN §14): cairn works inside a small qemu guest whose
//! disk bypasses the host's page cache, the host SIGKILLs the whole machine
//! at a random moment, and the disk image is checked: everything the guest
//! acknowledged is there and `cairn verify --all` passes. A SIGKILL of a
//! process keeps the kernel's page cache; a SIGKILL of the VM loses the
//! guest's, so only what cairn fsynced survives.
//!
//! The guest is built here from Debian's packages: the cloud kernel
//! (`linux-image-cloud-amd64`, unpacked in `target/vm-cache/kernel` by
//! `tests/vm/fetch-kernel.sh`, which this test runs when it is missing), a
//! busybox initramfs carrying this test build of `cairn` with the libraries
//! `ldd` names and the virtio modules, and a raw ext4 disk attached with
//! `cache=none,aio=native`. `tests/vm/init` is its PID 1 and describes the
//! work and the acknowledgements on the serial console. The accelerator is
//! chosen by a short boot test (KVM when it really boots, else TCG), never by
//! `/dev/kvm` being there. The machine is booted once, up to the point where
//! the disk is mounted, and saved (a migration stream); each trial restores
//! it on a fresh copy of the disk, so a trial costs well under a second
//! before the work starts.
//!
//! After the kill: `e2fsck -fy` on the image, `debugfs rdump` of the store,
//! then the host's cairn on the copy: `verify --all` passes; every
//! acknowledged session is listed, valid, and holds the acknowledged records
//! (its chain passes through the acknowledged tail hash); every acknowledged
//! snapshot is journaled with its label, its manifest is in the store and
//! names the file written just before it, which reads back from the object
//! pool with the content the guest wrote; every acknowledged checkpoint is
//! listed, journaled with its manifest hash and verifies, and so does every
//! checkpoint listed.
//!
//! The control run sets `CAIRN_FAULT=skip-fsync` in the guest (every fsync of
//! the test build is a no-op) and kills shortly after acknowledgements: it
//! must see losses, proving that the checks can.
//!
//! Two kinds of power cut:
//! - the guest's page cache is lost (unsynced data, unsynced directory
//!   entries, ext4's delayed allocation): the raw image is written through
//!   by the host, so what reached the virtual disk stays there;
//! - the disk's own volatile write cache is lost too: the image is served by
//!   an NBD server in this test that keeps writes in memory until the guest
//!   flushes (or writes with FUA), and at the cut writes or drops each
//!   cached 4 KiB block at random; the guest writes back dirty pages within
//!   a fifth of a second there, so the cache holds something to lose.
//!
//! The tests are `#[ignore]`d: `cargo test --test powercut -- --ignored`
//! runs them (`.ci/run` does, after installing qemu-system-x86,
//! busybox-static and e2fsprogs and fetching the kernel); anything missing
//! is then a failure. Knobs: `CAIRN_VM_TRIALS` (default 40; 500 for a soak),
//! `CAIRN_VM_CACHE_TRIALS` (the lost disk cache, default 20),
//! `CAIRN_VM_CONTROL_TRIALS` (default 10), `CAIRN_VM_JOBS` (machines at once
//! across the tests, default 2), `CAIRN_VM_SEED` (replays a run's kill
//! plans), `CAIRN_VM_ACCEL` (`kvm` or `tcg`: skip the boot test). A failed
//! trial's image and extracted store are kept in `target/vm-cache/failed/`
//! until the next run.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::fmt::Write as _;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::fs::FileExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

const CAIRN: &str = env!("CARGO_BIN_EXE_cairn");
const VM_DIR: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/vm");
const DISK_BYTES: u64 = 128 << 20;
/// The modules the guest loads (with what they depend on): the disk.
const MODULES: &[&str] = &["virtio_pci", "virtio_blk"];

/// The machine, prepared once for every test of this run.
static MACHINE: OnceLock<Machine> = OnceLock::new();
/// Machines running at once, across the tests (`CAIRN_VM_JOBS`).
static SLOTS: (Mutex<usize>, Condvar) = (Mutex::new(0), Condvar::new());

fn machine() -> &'static Machine {
    MACHINE.get_or_init(Machine::prepare)
}

#[test]
#[ignore = "needs qemu and a kernel: .ci/run installs them"]
fn acknowledged_work_survives_power_cuts() {
    require();
    let trials = env_usize("CAIRN_VM_TRIALS", 40);
    let seed = seed();
    let started = Instant::now();
    let machine = machine();
    let results = run_trials(
        machine,
        "fsync",
        trials,
        seed,
        Mode::Fsync,
        Disk::WrittenThrough,
        any_moment,
    );
    let report = summary(machine, "fsync", &results, seed, started.elapsed());
    eprintln!("{report}");
    nothing_lost(&results, seed, &report);
}

/// The same with a disk that has a volatile write cache and loses it: what
/// the guest did not flush is lost, or written in part, in any order.
#[test]
#[ignore = "needs qemu and a kernel: .ci/run installs them"]
fn acknowledged_work_survives_a_lost_disk_cache() {
    require();
    let trials = env_usize("CAIRN_VM_CACHE_TRIALS", 20);
    let seed = seed();
    let started = Instant::now();
    let machine = machine();
    let results = run_trials(
        machine,
        "disk-cache",
        trials,
        seed,
        Mode::Fsync,
        Disk::LosesCache,
        any_moment,
    );
    let report = summary(machine, "disk-cache", &results, seed, started.elapsed());
    eprintln!("{report}");
    nothing_lost(&results, seed, &report);
    let dropped: u64 = results.iter().filter_map(|t| t.cache).map(|c| c.lost).sum();
    assert!(
        dropped > 0 || trials < 5,
        "the disk's cache held nothing unflushed at any of {trials} power cuts: \
         the cache model is not in the way\n{report}"
    );
}

/// Half the kills fall anywhere in the first seconds of work, half just
/// after an acknowledgement, where a missing fsync would show.
fn any_moment(rng: &mut Rng) -> Plan {
    if rng.below(2) == 0 {
        Plan::At(rng.millis(0, 6000))
    } else {
        Plan::AfterAck(1 + rng.below(5) as usize, rng.millis(0, 400))
    }
}

fn nothing_lost(results: &[Trial], seed: u64, report: &str) {
    let trials = results.len();
    let broken: Vec<String> = results
        .iter()
        .filter(|t| t.harness.is_some() || !t.problems.is_empty())
        .map(Trial::describe)
        .collect();
    assert!(
        broken.is_empty(),
        "{} of {trials} power cuts lost or damaged acknowledged work (seed {seed}; \
         CAIRN_VM_SEED={seed} replays the kill plans):\n{}\n{report}",
        broken.len(),
        broken.join("\n")
    );
    let acked = |kind: &str| results.iter().map(|t| t.count(kind)).sum::<usize>();
    for kind in ["run", "snapshot", "resume", "checkpoint"] {
        assert!(
            acked(kind) > 0 || trials < 10,
            "no `{kind}` was acknowledged in {trials} trials: the kills came too early \
             to test it\n{report}"
        );
    }
}

#[test]
#[ignore = "needs qemu and a kernel: .ci/run installs them"]
fn control_without_fsync_loses_acknowledged_work() {
    require();
    let trials = env_usize("CAIRN_VM_CONTROL_TRIALS", 10);
    let seed = seed();
    let started = Instant::now();
    let machine = machine();
    let results = run_trials(
        machine,
        "skip-fsync",
        trials,
        seed,
        Mode::SkipFsync,
        Disk::WrittenThrough,
        |rng| Plan::AfterAck(1 + rng.below(4) as usize, rng.millis(0, 1000)),
    );
    let report = summary(machine, "skip-fsync", &results, seed, started.elapsed());
    eprintln!("{report}");

    let harness: Vec<String> = results
        .iter()
        .filter(|t| t.harness.is_some())
        .map(Trial::describe)
        .collect();
    assert!(
        harness.is_empty(),
        "control trials did not run as planned:\n{}",
        harness.join("\n")
    );
    let lossy = results.iter().filter(|t| t.lost > 0).count();
    let lost: usize = results.iter().map(|t| t.lost).sum();
    let acked: usize = results.iter().map(|t| t.acks.len()).sum();
    eprintln!(
        "control: {lost} of {acked} acknowledged item(s) lost or damaged, \
         in {lossy} of {trials} trials"
    );
    for t in results.iter().filter(|t| t.lost > 0).take(2) {
        eprintln!("{}", t.describe());
    }
    assert!(
        lossy > 0,
        "the control run (CAIRN_FAULT=skip-fsync: every fsync a no-op) lost nothing \
         acknowledged in {trials} power cuts. Either this build of cairn lacks the \
         skip-fsync switch (cairn-store's durable layer and the journal writer, \
         with the fault-injection feature the tests build), or the harness cannot \
         see losses.\n{report}"
    );
}

// ---------------------------------------------------------------------------
// Trials

#[derive(Clone, Copy, PartialEq)]
enum Mode {
    Fsync,
    SkipFsync,
}

impl Mode {
    fn word(self) -> &'static str {
        match self {
            Mode::Fsync => "fsync",
            Mode::SkipFsync => "skip-fsync",
        }
    }
}

/// What the guest's disk is.
#[derive(Clone, Copy, PartialEq)]
enum Disk {
    /// The raw image, `cache=none,aio=native`: what reaches the virtual
    /// disk is on the image.
    WrittenThrough,
    /// The image behind an NBD server with a volatile write cache, lost at
    /// the power cut ([`serve_nbd`]).
    LosesCache,
}

/// When the host pulls the plug, counted from the guest's `GO`.
#[derive(Clone, Copy, Debug)]
enum Plan {
    /// This long after `GO`.
    At(Duration),
    /// This long after the n-th acknowledgement.
    AfterAck(usize, Duration),
}

#[derive(Clone, Debug)]
struct Ack {
    kind: String,
    iter: u32,
    json: Value,
}

struct Trial {
    n: usize,
    plan: Plan,
    /// The trial could not run as planned (no boot, a command failed in the
    /// guest): a harness or cairn failure, not a durability verdict.
    harness: Option<String>,
    /// Acknowledged work lost or damaged, or a check that failed.
    problems: Vec<String>,
    acks: Vec<Ack>,
    /// Acknowledgements with at least one problem.
    lost: usize,
    /// From starting qemu to the restored guest's `GO`.
    restored: Duration,
    /// e2fsck, the extraction and the host's checks.
    checked: Duration,
    /// From `GO` to the kill.
    worked: Duration,
    e2fsck: i32,
    /// What e2fsck reported beyond its passes, numbers left out.
    fsck_said: Vec<String>,
    took: Duration,
    kept: Option<PathBuf>,
    /// The disk cache's account, with [`Disk::LosesCache`].
    cache: Option<CacheStats>,
}

impl Trial {
    fn count(&self, kind: &str) -> usize {
        self.acks.iter().filter(|a| a.kind == kind).count()
    }

    fn describe(&self) -> String {
        let mut s = format!(
            "trial {} ({:?}, killed {:.2} s into the work, {} ack(s)):",
            self.n,
            self.plan,
            self.worked.as_secs_f64(),
            self.acks.len()
        );
        if let Some(h) = &self.harness {
            let _ = write!(s, "\n  harness: {h}");
        }
        for p in &self.problems {
            let _ = write!(s, "\n  {p}");
        }
        if let Some(k) = &self.kept {
            let _ = write!(s, "\n  kept: {}", k.display());
        }
        s
    }
}

fn run_trials(
    machine: &Machine,
    label: &str,
    trials: usize,
    seed: u64,
    mode: Mode,
    disk: Disk,
    plan: impl Fn(&mut Rng) -> Plan + Sync,
) -> Vec<Trial> {
    let next = AtomicUsize::new(0);
    let done = Mutex::new(Vec::new());
    let jobs = env_usize("CAIRN_VM_JOBS", 2).clamp(1, trials.max(1));
    std::thread::scope(|s| {
        for _ in 0..jobs {
            s.spawn(|| loop {
                let n = next.fetch_add(1, Ordering::SeqCst);
                if n >= trials {
                    break;
                }
                let mut rng = Rng::new(seed ^ (n as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15));
                let plan = plan(&mut rng);
                let t = {
                    let _slot = Slot::take();
                    machine.trial(label, n, mode, disk, plan, rng.next())
                };
                eprintln!(
                    "powercut {label}: trial {n}: {:?}, killed {:.2} s into the work, {} ack(s), \
                     e2fsck {}, {} in {:.1} s (restore {:.2} s, checks {:.2} s){}",
                    t.plan,
                    t.worked.as_secs_f64(),
                    t.acks.len(),
                    t.e2fsck,
                    match (&t.harness, t.problems.len()) {
                        (Some(_), _) => "HARNESS FAILURE".to_string(),
                        (None, 0) => "all there".to_string(),
                        (None, p) => format!("{} lost, {p} problem(s)", t.lost),
                    },
                    t.took.as_secs_f64(),
                    t.restored.as_secs_f64(),
                    t.checked.as_secs_f64(),
                    t.cache
                        .map(|c| format!(
                            "; disk cache: {} flush(es), {} sector(s) unflushed at the cut, \
                             {} of them lost",
                            c.flushes,
                            c.kept + c.lost,
                            c.lost
                        ))
                        .unwrap_or_default()
                );
                done.lock().unwrap().push(t);
            });
        }
    });
    let mut all = done.into_inner().unwrap();
    all.sort_by_key(|t| t.n);
    all
}

/// One of the `CAIRN_VM_JOBS` places for a running machine.
struct Slot;

impl Slot {
    fn take() -> Slot {
        let jobs = env_usize("CAIRN_VM_JOBS", 2).max(1);
        let (count, cv) = &SLOTS;
        let mut n = count.lock().unwrap_or_else(|p| p.into_inner());
        while *n >= jobs {
            n = cv.wait(n).unwrap_or_else(|p| p.into_inner());
        }
        *n += 1;
        Slot
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let (count, cv) = &SLOTS;
        *count.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
        cv.notify_one();
    }
}

fn summary(
    machine: &Machine,
    label: &str,
    results: &[Trial],
    seed: u64,
    total: Duration,
) -> String {
    let n = results.len().max(1);
    let mean = |f: &dyn Fn(&Trial) -> f64| results.iter().map(f).sum::<f64>() / n as f64;
    let mut kinds: BTreeMap<&str, usize> = BTreeMap::new();
    for t in results {
        for a in &t.acks {
            *kinds.entry(a.kind.as_str()).or_default() += 1;
        }
    }
    let repaired = results.iter().filter(|t| t.e2fsck == 1).count();
    let mut said: BTreeMap<&str, usize> = BTreeMap::new();
    for t in results {
        for line in &t.fsck_said {
            *said.entry(line.as_str()).or_default() += 1;
        }
    }
    format!(
        "powercut {label}: {} trial(s) on {} (seed {seed}); machine prepared in {:.1} s, \
         total {:.1} s; per trial {:.2} s (restore {:.2} s, work before the kill {:.2} s, \
         checks {:.2} s); \
         acknowledged {:?}; e2fsck exit 1 on {repaired} image(s), saying {:?}",
        results.len(),
        machine.accel,
        machine.prepared.as_secs_f64(),
        total.as_secs_f64(),
        mean(&|t| t.took.as_secs_f64()),
        mean(&|t| t.restored.as_secs_f64()),
        mean(&|t| t.worked.as_secs_f64()),
        mean(&|t| t.checked.as_secs_f64()),
        kinds,
        said
    )
}

// ---------------------------------------------------------------------------
// The machine

struct Tools {
    qemu: PathBuf,
    busybox: PathBuf,
    mkfs: PathBuf,
    e2fsck: PathBuf,
    debugfs: PathBuf,
}

struct Machine {
    tools: Tools,
    accel: &'static str,
    kernel: PathBuf,
    initrd: PathBuf,
    mem_mb: u64,
    base: PathBuf,
    state: PathBuf,
    /// Holds the initramfs, the base disk, the saved machine and the trials:
    /// `target/vm-cache/powercut-<pid>-…`, removed at exit.
    dir: PathBuf,
    prepared: Duration,
}

impl Machine {
    /// Builds the initramfs and disk, picks the accelerator, boots the guest
    /// to `READY` and saves it. Anything missing fails the test, loudly.
    fn prepare() -> Machine {
        let started = Instant::now();
        let tools = tools();
        let cache = cache_dir();
        let kernel_dir = kernel(&cache);
        fs::create_dir_all(&cache).unwrap();
        // A failed trial's disk and extracted store stay until the next run.
        let _ = fs::remove_dir_all(cache.join("failed"));
        remove_leftovers(&cache);
        // Under target/, not /tmp: cache=none needs O_DIRECT, which tmpfs lacks.
        let dir = tempfile::Builder::new()
            .prefix(&format!("powercut-{}-", std::process::id()))
            .tempdir_in(&cache)
            .unwrap()
            .keep();
        remove_at_exit(&dir);
        let initrd = dir.join("initramfs.cpio");
        build_initramfs(&tools, &kernel_dir, &dir, &initrd)
            .unwrap_or_else(|e| panic!("building the guest's initramfs: {e}"));
        let initrd_mb = fs::metadata(&initrd).unwrap().len() >> 20;
        let mut m = Machine {
            tools,
            accel: "tcg",
            kernel: kernel_dir.join("vmlinuz"),
            initrd,
            mem_mb: (256 + 3 * initrd_mb).max(384),
            base: dir.join("base.img"),
            state: dir.join("ready.state"),
            dir,
            prepared: Duration::ZERO,
        };

        let forced = std::env::var("CAIRN_VM_ACCEL").ok();
        let try_kvm = match forced.as_deref() {
            Some("kvm") => true,
            Some("tcg") => false,
            Some(other) => panic!("CAIRN_VM_ACCEL={other}: give kvm or tcg"),
            None => fs::OpenOptions::new()
                .read(true)
                .write(true)
                .open("/dev/kvm")
                .is_ok(),
        };
        let mut kvm_said = None;
        if try_kvm {
            m.accel = "kvm";
            // A KVM that works boots this guest in about a second.
            match m.save_ready(Duration::from_secs(6)) {
                Ok(()) => {
                    m.prepared = started.elapsed();
                    return m;
                }
                Err(e) if forced.is_some() => panic!("CAIRN_VM_ACCEL=kvm: {e}"),
                Err(e) => kvm_said = Some(e),
            }
        }
        m.accel = "tcg";
        if let Err(e) = m.save_ready(Duration::from_secs(120)) {
            panic!(
                "the guest does not boot under TCG: {e}{}",
                kvm_said
                    .map(|k| format!(" (nor under KVM: {k})"))
                    .unwrap_or_default()
            );
        }
        if let Some(k) = kvm_said {
            eprintln!("powercut: KVM did not boot the guest ({k}); using TCG");
        }
        m.prepared = started.elapsed();
        m
    }

    /// qemu with this machine and `drive` (a `-drive` value without `if=`).
    fn qemu(&self, drive: &str) -> Command {
        let mut c = Command::new(&self.tools.qemu);
        match self.accel {
            "kvm" => c.args(["-accel", "kvm", "-cpu", "host"]),
            _ => c.args(["-accel", "tcg,tb-size=256", "-cpu", "max"]),
        };
        c.args(["-machine", "pc"]);
        let qboot = Path::new("/usr/share/qemu/qboot.rom");
        if qboot.exists() {
            // A minimal firmware: boots the kernel half a second sooner.
            c.arg("-bios").arg(qboot);
        }
        c.args(["-m", &self.mem_mb.to_string(), "-smp", "1"])
            .args(["-nodefaults", "-no-user-config", "-no-reboot"])
            .args(["-display", "none", "-serial", "stdio"])
            .arg("-kernel")
            .arg(&self.kernel)
            .arg("-initrd")
            .arg(&self.initrd)
            .args([
                "-append",
                "console=ttyS0 quiet loglevel=3 panic=-1 i8042.noaux i8042.nokbd i8042.nopnp",
            ])
            .arg("-drive")
            .arg(format!("{drive},if=virtio"))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        c
    }

    /// Boots a fresh disk to `READY` and saves the machine there.
    fn save_ready(&self, boot_timeout: Duration) -> Result<(), String> {
        make_disk(&self.tools, &self.base)?;
        let _ = fs::remove_file(&self.state);
        let sockdir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let sock = sockdir.path().join("qmp");
        let log = self.dir.join(format!("prepare-{}.log", self.accel));
        let mut cmd = self.qemu(&direct_drive(&self.base));
        cmd.arg("-qmp")
            .arg(format!("unix:{},server=on,wait=off", sock.display()))
            .stderr(fs::File::create(&log).map_err(|e| e.to_string())?);
        let mut vm = Vm::spawn(cmd)?;
        let result = (|| {
            vm.wait_for("POWERCUT READY", Instant::now() + boot_timeout)
                .map_err(|e| format!("{e}{}", tail_of(&log)))?;
            let mut qmp = Qmp::connect(&sock)?;
            qmp.call(json!({"execute": "migrate", "arguments": {
                "uri": format!("exec:cat > '{}'", self.state.display())
            }}))?;
            let deadline = Instant::now() + Duration::from_secs(120);
            loop {
                let info = qmp.call(json!({"execute": "query-migrate"}))?;
                match info["status"].as_str() {
                    Some("completed") => break,
                    Some("failed" | "cancelled") => {
                        return Err(format!("saving the machine failed: {info}"))
                    }
                    _ if Instant::now() > deadline => {
                        return Err(format!("saving the machine takes too long: {info}"))
                    }
                    _ => std::thread::sleep(Duration::from_millis(50)),
                }
            }
            let _ = qmp.call(json!({"execute": "quit"}));
            vm.exit_within(Duration::from_secs(20))
        })();
        vm.kill();
        result?;
        if fs::metadata(&self.state).map(|m| m.len()).unwrap_or(0) == 0 {
            return Err("the saved machine state is empty".into());
        }
        Ok(())
    }

    /// One power cut: restore the saved machine on a copy of the disk, let it
    /// work, kill it as planned, check the image.
    fn trial(&self, label: &str, n: usize, mode: Mode, disk: Disk, plan: Plan, seed: u64) -> Trial {
        let started = Instant::now();
        let mut t = Trial {
            n,
            plan,
            harness: None,
            problems: Vec::new(),
            acks: Vec::new(),
            lost: 0,
            restored: Duration::ZERO,
            checked: Duration::ZERO,
            worked: Duration::ZERO,
            e2fsck: -1,
            fsck_said: Vec::new(),
            took: Duration::ZERO,
            kept: None,
            cache: None,
        };
        let dir = self.dir.join(format!("{label}-{n}"));
        let image = dir.join("disk.img");
        let log = dir.join("qemu.log");
        if let Err(e) = self.cut(&dir, &image, &log, mode, disk, seed, &mut t) {
            t.harness = Some(format!("{e}{}", tail_of(&log)));
        }
        if t.harness.is_none() {
            let checking = Instant::now();
            check(&self.tools, &dir, &image, &mut t);
            t.checked = checking.elapsed();
        }
        if (t.harness.is_some() || !t.problems.is_empty()) && mode == Mode::Fsync {
            let keep = cache_dir()
                .join("failed")
                .join(format!("{label}-{}-{n}", std::process::id()));
            let _ = fs::create_dir_all(keep.parent().unwrap());
            if fs::rename(&dir, &keep).is_ok() {
                t.kept = Some(keep);
            }
        } else {
            let _ = fs::remove_dir_all(&dir);
        }
        t.took = started.elapsed();
        t
    }

    #[allow(clippy::too_many_arguments)]
    fn cut(
        &self,
        dir: &Path,
        image: &Path,
        log: &Path,
        mode: Mode,
        disk: Disk,
        seed: u64,
        t: &mut Trial,
    ) -> Result<(), String> {
        fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        run_ok(
            Command::new("cp")
                .arg("--sparse=always")
                .arg(&self.base)
                .arg(image),
        )?;
        // The NBD socket's path must be short: it goes in /tmp.
        let sockdir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let (drive, server) = match disk {
            Disk::WrittenThrough => (direct_drive(image), None),
            Disk::LosesCache => {
                let sock = sockdir.path().join("nbd");
                let listener = UnixListener::bind(&sock).map_err(|e| e.to_string())?;
                let image = image.to_path_buf();
                let server = std::thread::spawn(move || serve_nbd(listener, &image, seed));
                // The guest sees a disk with a write cache either way.
                let drive = format!(
                    "file=nbd+unix:///?socket={},format=raw,cache=writeback",
                    sock.display()
                );
                (drive, Some(server))
            }
        };
        let mut cmd = self.qemu(&drive);
        cmd.arg("-incoming")
            .arg(format!("exec:cat '{}'", self.state.display()))
            .stderr(fs::File::create(log).map_err(|e| e.to_string())?);
        let spawned = Instant::now();
        let mut vm = Vm::spawn(cmd)?;
        let result = (|| {
            let writeback = match disk {
                Disk::WrittenThrough => "lazy",
                Disk::LosesCache => "eager",
            };
            let go = vm.start(
                &format!("go {} {writeback}\n", mode.word()),
                Instant::now() + Duration::from_secs(60),
            )?;
            t.restored = go - spawned;
            let mut acks = 0;
            let mut deadline = match t.plan {
                Plan::At(d) => go + d,
                Plan::AfterAck(..) => go + Duration::from_secs(90),
            };
            loop {
                let now = Instant::now();
                if now >= deadline {
                    if let Plan::AfterAck(k, _) = t.plan {
                        if acks < k {
                            return Err(format!("only {acks} of {k} acknowledgements in 90 s"));
                        }
                    }
                    break;
                }
                match vm.lines.recv_timeout(deadline - now) {
                    Ok((at, line)) => {
                        if line.starts_with("POWERCUT ERROR") {
                            return Err(format!("the guest says: {line}"));
                        }
                        if line.starts_with("POWERCUT ACK") {
                            acks += 1;
                            if let Plan::AfterAck(k, d) = t.plan {
                                if acks == k {
                                    deadline = at + d;
                                }
                            }
                        }
                        vm.seen.push(line);
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => {}
                    Err(mpsc::RecvTimeoutError::Disconnected) => {
                        return Err("qemu exited before the kill".into());
                    }
                }
            }
            t.worked = go.elapsed();
            Ok(())
        })();
        // The power cut. Every complete line read, before or after, left the
        // guest before it died: all of them count as acknowledged.
        vm.kill();
        let seen = vm.drain();
        if let Some(server) = server {
            match server.join() {
                Ok(Ok(stats)) => t.cache = Some(stats),
                Ok(Err(e)) => return Err(format!("the NBD server: {e}")),
                Err(_) => return Err("the NBD server panicked".into()),
            }
        }
        result?;
        for line in &seen {
            if let Some(ack) = parse_ack(line) {
                t.acks.push(ack);
            } else if line.starts_with("POWERCUT ERROR") {
                return Err(format!("the guest says: {line}"));
            }
        }
        Ok(())
    }
}

fn direct_drive(image: &Path) -> String {
    format!("file={},format=raw,cache=none,aio=native", image.display())
}

/// Removes `dir` when the test process exits (statics are never dropped).
fn remove_at_exit(dir: &Path) {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    extern "C" fn remove() {
        if let Some(d) = DIR.get() {
            let _ = fs::remove_dir_all(d);
        }
    }
    if DIR.set(dir.to_path_buf()).is_ok() {
        // SAFETY: registers a plain function; it runs once, at exit.
        unsafe { libc::atexit(remove) };
    }
}

/// Removes the machines of test processes that are gone (killed before
/// their exit handler ran).
fn remove_leftovers(cache: &Path) {
    for e in fs::read_dir(cache).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let pid = name
            .strip_prefix("powercut-")
            .and_then(|r| r.split('-').next())
            .and_then(|p| p.parse::<u32>().ok());
        if let Some(pid) = pid {
            if !Path::new(&format!("/proc/{pid}")).exists() {
                let _ = fs::remove_dir_all(e.path());
            }
        }
    }
}

/// The lines of `e2fsck -fy` that say something, digits blanked so that
/// alike findings count together.
fn fsck_findings(out: &str) -> Vec<String> {
    let mut found: Vec<String> = out
        .lines()
        .map(str::trim)
        .filter(|l| {
            !l.is_empty()
                && !l.starts_with("Pass ")
                && !l.starts_with("Fix? ")
                && !l.contains(" files (")
                && !l.contains(" files, ")
                && !l.contains("FILE SYSTEM WAS MODIFIED")
        })
        .map(|l| {
            let mut blanked = String::new();
            for c in l.chars() {
                if !c.is_ascii_digit() {
                    blanked.push(c);
                } else if !blanked.ends_with('#') {
                    blanked.push('#');
                }
            }
            blanked
        })
        .collect();
    found.sort();
    found.dedup();
    found
}

fn parse_ack(line: &str) -> Option<Ack> {
    let rest = line.strip_prefix("POWERCUT ACK ")?;
    let mut parts = rest.splitn(3, ' ');
    let kind = parts.next()?.to_string();
    let iter = parts.next()?.parse().ok()?;
    let json = serde_json::from_str(parts.next()?).ok()?;
    Some(Ack { kind, iter, json })
}

/// A running qemu and the lines of its serial console.
struct Vm {
    child: Child,
    lines: mpsc::Receiver<(Instant, String)>,
    reader: Option<std::thread::JoinHandle<()>>,
    seen: Vec<String>,
}

impl Vm {
    fn spawn(mut cmd: Command) -> Result<Vm, String> {
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("starting {:?}: {e}", cmd.get_program()))?;
        let out = child.stdout.take().unwrap();
        let (tx, rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut r = BufReader::new(out);
            let mut buf = Vec::new();
            loop {
                buf.clear();
                match r.read_until(b'\n', &mut buf) {
                    // A line cut by the kill was never acknowledged.
                    Ok(0) | Err(_) => break,
                    Ok(_) if buf.last() != Some(&b'\n') => break,
                    Ok(_) => {
                        let text = String::from_utf8_lossy(&buf);
                        // Console noise may precede a line; ours start at POWERCUT.
                        let line = match text.find("POWERCUT ") {
                            Some(i) => text[i..].trim_end(),
                            None => text.trim(),
                        };
                        if tx.send((Instant::now(), line.to_string())).is_err() {
                            break;
                        }
                    }
                }
            }
        });
        Ok(Vm {
            child,
            lines: rx,
            reader: Some(reader),
            seen: Vec::new(),
        })
    }

    fn send(&mut self, text: &str) -> Result<(), String> {
        let stdin = self.child.stdin.as_mut().unwrap();
        stdin
            .write_all(text.as_bytes())
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("writing to the guest's console: {e}"))
    }

    /// Sends `go` (with its arguments) at each of the restored guest's ticks
    /// until it answers `GO`; returns when it did.
    fn start(&mut self, go: &str, deadline: Instant) -> Result<Instant, String> {
        self.answer("POWERCUT GO", deadline, Some(go))
    }

    /// Waits for a line starting with `prefix`; returns when it came.
    fn wait_for(&mut self, prefix: &str, deadline: Instant) -> Result<Instant, String> {
        self.answer(prefix, deadline, None)
    }

    /// Waits for a line starting with `prefix`, sending `resend` whenever
    /// the guest says it is waiting; a `POWERCUT ERROR` line, qemu's exit or
    /// the deadline is an error naming what the console said.
    fn answer(
        &mut self,
        prefix: &str,
        deadline: Instant,
        resend: Option<&str>,
    ) -> Result<Instant, String> {
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok((_, line)) if line.starts_with("POWERCUT WAITING") && resend.is_some() => {
                    self.send(resend.unwrap_or_default())?;
                }
                Ok((at, line)) => {
                    let found = line.starts_with(prefix);
                    let error = line.starts_with("POWERCUT ERROR");
                    self.seen.push(line.clone());
                    if found {
                        return Ok(at);
                    }
                    if error {
                        return Err(format!("the guest says: {line}"));
                    }
                }
                Err(e) => {
                    let gone = matches!(e, mpsc::RecvTimeoutError::Disconnected);
                    return Err(format!(
                        "{} before `{prefix}`; the console said:\n{}",
                        if gone { "qemu exited" } else { "timed out" },
                        last_lines(&self.seen, 15)
                    ));
                }
            }
        }
    }

    fn exit_within(&mut self, limit: Duration) -> Result<(), String> {
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if self.child.try_wait().map_err(|e| e.to_string())?.is_some() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Err("qemu did not quit".into())
    }

    /// SIGKILL, then wait for it.
    fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Every line the console gave, the rest read to its end.
    fn drain(&mut self) -> Vec<String> {
        if let Some(r) = self.reader.take() {
            let _ = r.join();
        }
        self.seen.extend(self.lines.try_iter().map(|(_, l)| l));
        std::mem::take(&mut self.seen)
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Just enough of QMP to save the machine.
struct Qmp {
    reader: BufReader<UnixStream>,
    writer: UnixStream,
}

impl Qmp {
    fn connect(path: &Path) -> Result<Qmp, String> {
        let s = UnixStream::connect(path).map_err(|e| format!("QMP {}: {e}", path.display()))?;
        s.set_read_timeout(Some(Duration::from_secs(30)))
            .map_err(|e| e.to_string())?;
        let writer = s.try_clone().map_err(|e| e.to_string())?;
        let mut q = Qmp {
            reader: BufReader::new(s),
            writer,
        };
        let greeting = q.read()?;
        if greeting.get("QMP").is_none() {
            return Err(format!("QMP greeting: {greeting}"));
        }
        q.call(json!({"execute": "qmp_capabilities"}))?;
        Ok(q)
    }

    fn read(&mut self) -> Result<Value, String> {
        let mut line = String::new();
        match self.reader.read_line(&mut line) {
            Ok(0) => Err("QMP: closed".into()),
            Ok(_) => serde_json::from_str(&line).map_err(|e| format!("QMP {line:?}: {e}")),
            Err(e) => Err(format!("QMP: {e}")),
        }
    }

    fn call(&mut self, command: Value) -> Result<Value, String> {
        writeln!(self.writer, "{command}").map_err(|e| format!("QMP: {e}"))?;
        loop {
            let reply = self.read()?;
            if let Some(r) = reply.get("return") {
                return Ok(r.clone());
            }
            if let Some(e) = reply.get("error") {
                return Err(format!("QMP {command}: {e}"));
            }
            // An event: skip it.
        }
    }
}

// ---------------------------------------------------------------------------
// A disk that loses its write cache

/// What the disk's cache did in one trial.
#[derive(Clone, Copy, Debug, Default)]
struct CacheStats {
    /// Flush requests the guest sent.
    flushes: u64,
    /// Unflushed sectors written at the power cut, and lost.
    kept: u64,
    lost: u64,
}

const SECTOR: u64 = 512;

/// The image as a disk with a volatile write cache: a write is kept in
/// memory, and reads see it, until a flush (or a write with FUA) puts it on
/// the image; at the power cut every 4 KiB block still cached is written or
/// lost at random, so unflushed writes are lost, reordered and torn at block
/// granularity.
struct CachedDisk {
    file: fs::File,
    size: u64,
    cached: HashMap<u64, Vec<u8>>,
    stats: CacheStats,
}

impl CachedDisk {
    fn sector(&self, n: u64) -> std::io::Result<Vec<u8>> {
        if let Some(s) = self.cached.get(&n) {
            return Ok(s.clone());
        }
        let mut buf = vec![0; SECTOR as usize];
        self.file.read_exact_at(&mut buf, n * SECTOR)?;
        Ok(buf)
    }

    fn in_range(&self, offset: u64, len: u64) -> bool {
        offset.checked_add(len).is_some_and(|end| end <= self.size)
    }

    fn read(&self, offset: u64, len: u64) -> std::io::Result<Vec<u8>> {
        let mut out = Vec::with_capacity(len as usize);
        let mut at = offset;
        while at < offset + len {
            let n = at / SECTOR;
            let within = (at % SECTOR) as usize;
            let take = (SECTOR as usize - within).min((offset + len - at) as usize);
            if let Some(s) = self.cached.get(&n) {
                out.extend_from_slice(&s[within..within + take]);
            } else {
                let mut buf = vec![0; take];
                self.file.read_exact_at(&mut buf, at)?;
                out.extend_from_slice(&buf);
            }
            at += take as u64;
        }
        Ok(out)
    }

    fn write(&mut self, offset: u64, data: &[u8], fua: bool) -> std::io::Result<()> {
        let mut at = offset;
        let mut rest = data;
        while !rest.is_empty() {
            let n = at / SECTOR;
            let within = (at % SECTOR) as usize;
            let take = (SECTOR as usize - within).min(rest.len());
            let mut s = if within == 0 && take == SECTOR as usize {
                rest[..take].to_vec()
            } else {
                let mut s = self.sector(n)?;
                s[within..within + take].copy_from_slice(&rest[..take]);
                s
            };
            if fua {
                self.file.write_all_at(&s, n * SECTOR)?;
                self.cached.remove(&n);
            } else {
                self.cached.insert(n, std::mem::take(&mut s));
            }
            at += take as u64;
            rest = &rest[take..];
        }
        Ok(())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.stats.flushes += 1;
        let mut all: Vec<(u64, Vec<u8>)> = self.cached.drain().collect();
        all.sort_by_key(|(n, _)| *n);
        for (n, s) in all {
            self.file.write_all_at(&s, n * SECTOR)?;
        }
        Ok(())
    }

    /// The power cut: each 4 KiB block of the cache (a physical sector of
    /// today's disks, a block of ext4) is written or lost.
    fn lose_cache(&mut self, rng: &mut Rng) -> std::io::Result<()> {
        let mut all: Vec<(u64, Vec<u8>)> = self.cached.drain().collect();
        all.sort_by_key(|(n, _)| *n);
        let mut block = (u64::MAX, false);
        for (n, s) in all {
            if block.0 != n / 8 {
                block = (n / 8, rng.below(2) == 0);
            }
            if block.1 {
                self.file.write_all_at(&s, n * SECTOR)?;
                self.stats.kept += 1;
            } else {
                self.stats.lost += 1;
            }
        }
        Ok(())
    }
}

/// Serves `image` over NBD (fixed newstyle, simple replies, flush and FUA)
/// to one client until it goes away, then loses the cache.
fn serve_nbd(listener: UnixListener, image: &Path, seed: u64) -> Result<CacheStats, String> {
    let io = |e: std::io::Error| format!("NBD: {e}");
    listener.set_nonblocking(true).map_err(io)?;
    let deadline = Instant::now() + Duration::from_secs(60);
    let mut s = loop {
        match listener.accept() {
            Ok((s, _)) => break s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock && Instant::now() < deadline => {
                std::thread::sleep(Duration::from_millis(5))
            }
            Err(e) => return Err(format!("NBD: no client: {e}")),
        }
    };
    s.set_nonblocking(false).map_err(io)?;
    let file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(image)
        .map_err(io)?;
    let size = file.metadata().map_err(io)?.len();
    let mut disk = CachedDisk {
        file,
        size,
        cached: HashMap::new(),
        stats: CacheStats::default(),
    };
    nbd_handshake(&mut s, size)?;
    let served = nbd_transmission(&mut s, &mut disk);
    disk.lose_cache(&mut Rng::new(seed)).map_err(io)?;
    served.map(|()| disk.stats)
}

const NBD_OPTS_MAGIC: u64 = 0x4948_4156_454F_5054; // "IHAVEOPT"
const NBD_REP_MAGIC: u64 = 0x0003_e889_0455_65a9;
const NBD_REQUEST_MAGIC: u32 = 0x2560_9513;
const NBD_REPLY_MAGIC: u32 = 0x6744_6698;
/// HAS_FLAGS, SEND_FLUSH, SEND_FUA.
const NBD_TRANSMISSION_FLAGS: u16 = 1 | 4 | 8;

fn be_u32(b: &[u8]) -> u32 {
    u32::from_be_bytes(b[..4].try_into().unwrap())
}

fn be_u64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b[..8].try_into().unwrap())
}

fn nbd_handshake(s: &mut UnixStream, size: u64) -> Result<(), String> {
    let io = |e: std::io::Error| format!("NBD handshake: {e}");
    let mut hello = b"NBDMAGIC".to_vec();
    hello.extend(NBD_OPTS_MAGIC.to_be_bytes());
    hello.extend(3u16.to_be_bytes()); // FIXED_NEWSTYLE, NO_ZEROES
    s.write_all(&hello).map_err(io)?;
    let mut b = [0u8; 16];
    s.read_exact(&mut b[..4]).map_err(io)?;
    let no_zeroes = be_u32(&b) & 2 != 0;
    let reply = |s: &mut UnixStream, opt: u32, kind: u32, data: &[u8]| {
        let mut r = NBD_REP_MAGIC.to_be_bytes().to_vec();
        r.extend(opt.to_be_bytes());
        r.extend(kind.to_be_bytes());
        r.extend((data.len() as u32).to_be_bytes());
        r.extend(data);
        s.write_all(&r).map_err(io)
    };
    loop {
        s.read_exact(&mut b).map_err(io)?;
        if be_u64(&b) != NBD_OPTS_MAGIC {
            return Err("NBD handshake: bad option magic".into());
        }
        let opt = be_u32(&b[8..]);
        let mut data = vec![0; be_u32(&b[12..]) as usize];
        s.read_exact(&mut data).map_err(io)?;
        match opt {
            // EXPORT_NAME: no reply header, the export's size and flags.
            1 => {
                let mut r = size.to_be_bytes().to_vec();
                r.extend(NBD_TRANSMISSION_FLAGS.to_be_bytes());
                if !no_zeroes {
                    r.extend([0u8; 124]);
                }
                return s.write_all(&r).map_err(io);
            }
            // INFO, GO: NBD_INFO_EXPORT, then ACK.
            6 | 7 => {
                let mut info = 0u16.to_be_bytes().to_vec();
                info.extend(size.to_be_bytes());
                info.extend(NBD_TRANSMISSION_FLAGS.to_be_bytes());
                reply(s, opt, 3, &info)?;
                reply(s, opt, 1, &[])?;
                if opt == 7 {
                    return Ok(());
                }
            }
            // ABORT.
            2 => {
                let _ = reply(s, opt, 1, &[]);
                return Err("NBD handshake: the client aborted".into());
            }
            // Anything else (structured replies, meta contexts): unsupported.
            _ => reply(s, opt, 0x8000_0001, &[])?,
        }
    }
}

/// Requests until the client is gone (the kill), which is no error.
fn nbd_transmission(s: &mut UnixStream, disk: &mut CachedDisk) -> Result<(), String> {
    let mut h = [0u8; 28];
    loop {
        if s.read_exact(&mut h).is_err() {
            return Ok(());
        }
        if be_u32(&h) != NBD_REQUEST_MAGIC {
            return Err("NBD: bad request magic".into());
        }
        let flags = u16::from_be_bytes([h[4], h[5]]);
        let kind = u16::from_be_bytes([h[6], h[7]]);
        let handle = &h[8..16];
        let offset = be_u64(&h[16..]);
        let len = u64::from(be_u32(&h[24..]));
        let mut error = 0u32;
        let mut payload = Vec::new();
        match kind {
            0 if disk.in_range(offset, len) => match disk.read(offset, len) {
                Ok(data) => payload = data,
                Err(_) => error = 5, // EIO
            },
            1 => {
                let mut data = vec![0; len as usize];
                if s.read_exact(&mut data).is_err() {
                    // Cut mid-request: the write never completed.
                    return Ok(());
                }
                if !disk.in_range(offset, len) {
                    error = 28; // ENOSPC
                } else if disk.write(offset, &data, flags & 1 != 0).is_err() {
                    error = 5;
                }
            }
            2 => return Ok(()),
            3 => {
                if disk.flush().is_err() {
                    error = 5;
                }
            }
            _ => error = 22, // EINVAL
        }
        let mut r = NBD_REPLY_MAGIC.to_be_bytes().to_vec();
        r.extend(error.to_be_bytes());
        r.extend(handle);
        if error == 0 {
            r.extend(payload);
        }
        if s.write_all(&r).is_err() {
            return Ok(());
        }
    }
}

// ---------------------------------------------------------------------------
// The checks on the image

fn check(tools: &Tools, dir: &Path, disk: &Path, t: &mut Trial) {
    let fsck = Command::new(&tools.e2fsck)
        .args(["-f", "-y"])
        .arg(disk)
        .output();
    match fsck {
        Ok(out) => {
            t.e2fsck = out.status.code().unwrap_or(-1);
            t.fsck_said = fsck_findings(&String::from_utf8_lossy(&out.stdout));
            // 0: clean, 1: errors corrected (a journal replay counts).
            if !(0..=1).contains(&t.e2fsck) {
                t.problems.push(format!(
                    "e2fsck -fy exit {}: {}{}",
                    t.e2fsck,
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                ));
                return;
            }
        }
        Err(e) => {
            t.harness = Some(format!("running e2fsck: {e}"));
            return;
        }
    }
    let extract = dir.join("extract");
    let _ = fs::create_dir_all(&extract);
    let out = Command::new(&tools.debugfs)
        .arg("-R")
        .arg(format!("rdump /store {}", extract.display()))
        .arg(disk)
        .output();
    let store = extract.join("store");
    match out {
        Ok(_) if store.is_dir() => {}
        Ok(out) => {
            t.problems.push(format!(
                "debugfs rdump /store gave nothing: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
            return;
        }
        Err(e) => {
            t.harness = Some(format!("running debugfs: {e}"));
            return;
        }
    }
    let mut c = Checker {
        dir,
        store: &store,
        problems: Vec::new(),
        transcripts: HashMap::new(),
        checkpoints: HashMap::new(),
    };
    t.lost = c.check(&t.acks);
    t.problems = c.problems;
}

struct Checker<'a> {
    dir: &'a Path,
    store: &'a Path,
    problems: Vec<String>,
    transcripts: HashMap<String, Option<Vec<Value>>>,
    checkpoints: HashMap<String, Option<Vec<Value>>>,
}

impl Checker<'_> {
    /// Runs the host's cairn on the extracted store.
    fn cairn(&self, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(CAIRN)
            .arg("--store")
            .arg(self.store)
            .args(args)
            .current_dir(self.dir)
            .env("HOME", self.dir)
            .env_remove("CAIRN_STORE")
            .env_remove("CAIRN_FAULT")
            .env_remove("XDG_STATE_HOME")
            .stdin(Stdio::null())
            .output()
            .expect("running the host's cairn");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    /// `cairn ARGS --json`, parsed; a failure is a problem.
    fn json(&mut self, args: &[&str]) -> Option<Value> {
        let mut all = args.to_vec();
        all.push("--json");
        let (code, out, err) = self.cairn(&all);
        match serde_json::from_str::<Value>(&out) {
            Ok(v) if code == 0 => Some(v),
            _ => {
                self.problems.push(format!(
                    "cairn {}: exit {code}: {}{}",
                    all.join(" "),
                    out.trim(),
                    err.trim()
                ));
                None
            }
        }
    }

    /// `cairn checkpoint verify ID --json`'s report, whether it passed
    /// (exit 0) or found a fault (exit 3, the report saying which); any
    /// other outcome is a problem.
    fn verify_report(&mut self, id: &str) -> Option<Value> {
        let (code, out, err) = self.cairn(&["checkpoint", "verify", id, "--json"]);
        match serde_json::from_str::<Value>(&out) {
            Ok(v) if code == 0 || code == 3 => Some(v),
            _ => {
                self.problems.push(format!(
                    "cairn checkpoint verify {id} --json: exit {code}: {}{}",
                    out.trim(),
                    err.trim()
                ));
                None
            }
        }
    }

    fn transcript(&mut self, run: &str) -> Option<Vec<Value>> {
        if !self.transcripts.contains_key(run) {
            let v = self
                .json(&["session", "show", run, "--transcript"])
                .and_then(|v| v["records"].as_array().cloned());
            self.transcripts.insert(run.to_string(), v);
        }
        self.transcripts[run].clone()
    }

    fn checkpoint_list(&mut self, run: &str) -> Option<Vec<Value>> {
        if !self.checkpoints.contains_key(run) {
            let v = self
                .json(&["checkpoint", "ls", run])
                .and_then(|v| v.as_array().cloned());
            self.checkpoints.insert(run.to_string(), v);
        }
        self.checkpoints[run].clone()
    }

    /// Checks the store against the acknowledgements; returns how many of
    /// them found a problem.
    fn check(&mut self, acks: &[Ack]) -> usize {
        // First, on the store as the crash left it.
        let mut verified: HashMap<String, Value> = HashMap::new();
        let (code, out, err) = self.cairn(&["verify", "--all", "--json"]);
        match serde_json::from_str::<Value>(&out) {
            Ok(Value::Array(all)) => {
                for v in all {
                    if v["ok"] != true {
                        self.problems.push(format!("cairn verify --all: {v}"));
                    }
                    verified.insert(v["id"].as_str().unwrap_or("").to_string(), v);
                }
                if code != 0 {
                    self.problems
                        .push(format!("cairn verify --all: exit {code}: {}", err.trim()));
                }
            }
            _ => self.problems.push(format!(
                "cairn verify --all: exit {code}: {}{}",
                out.trim(),
                err.trim()
            )),
        }
        let listed: HashMap<String, Value> = self
            .json(&["sessions", "--all"])
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
            .into_iter()
            .map(|s| (s["id"].as_str().unwrap_or("").to_string(), s))
            .collect();

        let mut lost = 0;
        for ack in acks {
            let before = self.problems.len();
            let j = &ack.json;
            let what = format!("acknowledged {} {} ({j})", ack.kind, ack.iter);
            match ack.kind.as_str() {
                "run" | "resume" => self.check_session(&what, j, &listed, &verified),
                "snapshot" => self.check_snapshot(&what, ack.iter, j),
                "checkpoint" => self.check_checkpoint(&what, j),
                other => self
                    .problems
                    .push(format!("unknown acknowledgement {other}")),
            }
            if self.problems.len() > before {
                lost += 1;
            }
        }

        // Nothing partial is visible: every checkpoint listed verifies, but
        // for the one save the cut may have interrupted after its manifest
        // and before its journal record (the crash table's row "after the
        // manifest, before the journal record"): never acknowledged, it is
        // complete and reported unjournaled, which restore and fork refuse.
        let acknowledged: HashSet<&str> = acks
            .iter()
            .filter(|a| a.kind == "checkpoint")
            .filter_map(|a| a.json["id"].as_str())
            .collect();
        let mut interrupted = Vec::new();
        let mut runs: Vec<&String> = listed.keys().collect();
        runs.sort();
        for run in runs {
            for cp in self.checkpoint_list(run).unwrap_or_default() {
                let Some(id) = cp["id"].as_str() else {
                    continue;
                };
                let Some(v) = self.verify_report(id) else {
                    continue;
                };
                if v["ok"] == true || acknowledged.contains(id) {
                    // An acknowledged one that fails is check_checkpoint's.
                    continue;
                }
                if only_unjournaled(&v) {
                    interrupted.push(id.to_string());
                } else {
                    self.problems
                        .push(format!("listed checkpoint {id} does not verify: {v}"));
                }
            }
        }
        if interrupted.len() > 1 {
            self.problems.push(format!(
                "{} unjournaled checkpoints ({}), where one cut can interrupt one save",
                interrupted.len(),
                interrupted.join(", ")
            ));
        }
        lost
    }

    fn check_session(
        &mut self,
        what: &str,
        j: &Value,
        listed: &HashMap<String, Value>,
        verified: &HashMap<String, Value>,
    ) {
        let id = j["id"].as_str().unwrap_or("");
        let records = j["records"].as_u64().unwrap_or(0);
        let tail = j["tail"].as_str().unwrap_or("");
        let Some(s) = listed.get(id) else {
            self.problems
                .push(format!("{what}: the session is not listed"));
            return;
        };
        if s["valid"] != true {
            self.problems
                .push(format!("{what}: listed as invalid: {s}"));
        }
        let Some(recs) = self.transcript(id) else {
            return;
        };
        let have = recs.len() as u64;
        if have < records || s["records"].as_u64().unwrap_or(0) < records {
            self.problems.push(format!(
                "{what}: {have} record(s) shown, {} listed, {records} acknowledged",
                s["records"]
            ));
            return;
        }
        // The chain runs through the acknowledged tail: the record after it
        // names it as `prev`, or it is the verified tail.
        let through = if have == records {
            verified.get(id).map(|v| v["tail"].as_str() == Some(tail))
        } else {
            Some(recs[records as usize]["prev"].as_str() == Some(tail))
        };
        if through != Some(true) {
            self.problems.push(format!(
                "{what}: the chain does not pass through the acknowledged tail at seq {records}"
            ));
        }
    }

    fn check_snapshot(&mut self, what: &str, iter: u32, j: &Value) {
        let run = j["run"].as_str().unwrap_or("");
        let id = j["id"].as_str().unwrap_or("");
        let label = format!("powercut-{iter}");
        let journaled = self.transcript(run).is_some_and(|recs| {
            recs.iter().any(|r| {
                r["kind"] == "snapshot"
                    && r["snapshot"].as_str() == Some(id)
                    && r["label"].as_str() == Some(label.as_str())
            })
        });
        if !journaled {
            self.problems
                .push(format!("{what}: no `snapshot` record labelled {label}"));
        }
        // Its manifest (`rewind --list-snapshots` would need the guest's
        // workspace directory to exist here) names the file written just
        // before it, which reads back from the object pool.
        let name = format!("s{iter}.txt");
        let want = format!("powercut snapshot {iter}\n");
        let manifest = self
            .store
            .join("runs")
            .join(run)
            .join("workspace/snapshots")
            .join(format!("{id}.json"));
        let entry = fs::read(&manifest)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok())
            .and_then(|m| m["entries"][&name]["hash"].as_str().map(str::to_string));
        let Some(hash) = entry else {
            self.problems.push(format!(
                "{what}: its manifest {} does not read or does not name {name}",
                manifest.display()
            ));
            return;
        };
        let pool = cairn_objects::ObjectPool::at(&cairn_store::Store::at(self.store));
        let got = cairn_objects::ObjectHash::parse(&hash)
            .map_err(|e| e.to_string())
            .and_then(|h| pool.get(&h).map_err(|e| e.to_string()));
        match got {
            Ok(bytes) if bytes == want.as_bytes() => {}
            Ok(bytes) => self.problems.push(format!(
                "{what}: {name} reads back as {:?}",
                String::from_utf8_lossy(&bytes)
            )),
            Err(e) => self
                .problems
                .push(format!("{what}: object {hash} of {name}: {e}")),
        }
    }

    fn check_checkpoint(&mut self, what: &str, j: &Value) {
        let run = j["run"].as_str().unwrap_or("");
        let id = j["id"].as_str().unwrap_or("");
        let manifest = j["manifest"].as_str().unwrap_or("");
        match self.checkpoint_list(run) {
            Some(list) if list.iter().any(|c| c["id"].as_str() == Some(id)) => {}
            Some(_) => self.problems.push(format!("{what}: not in checkpoint ls")),
            None => return,
        }
        let journaled = self.transcript(run).is_some_and(|recs| {
            recs.iter().any(|r| {
                r["kind"] == "checkpoint"
                    && r["checkpoint"].as_str() == Some(id)
                    && r["manifest"].as_str() == Some(manifest)
            })
        });
        if !journaled {
            self.problems.push(format!(
                "{what}: no `checkpoint` record with its manifest hash"
            ));
        }
        if let Some(v) = self.json(&["checkpoint", "verify", id]) {
            if v["ok"] != true {
                self.problems.push(format!("{what}: does not verify: {v}"));
            }
        }
    }
}

/// True when a `checkpoint verify --json` report finds nothing wrong but
/// that no journal record names the manifest: a save interrupted between
/// its manifest and its record, complete and refused.
fn only_unjournaled(v: &Value) -> bool {
    let bad = v["bad"].as_array().map(Vec::as_slice).unwrap_or_default();
    v["anchored"] == false
        && bad.len() == 1
        && bad[0]["file"] == "manifest"
        && bad[0]["missing"] == false
        && bad[0]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("no `checkpoint` record"))
}

// ---------------------------------------------------------------------------
// Building the guest

/// Panics, naming what to install, unless qemu and the guest's tools are
/// here: the power-cut tests are `#[ignore]`d and call this first.
fn require() {
    tools();
}

fn env_usize(name: &str, default: usize) -> usize {
    match std::env::var(name) {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("{name}={v}: give a number")),
        Err(_) => default,
    }
}

fn seed() -> u64 {
    match std::env::var("CAIRN_VM_SEED") {
        Ok(v) => v
            .parse()
            .unwrap_or_else(|_| panic!("CAIRN_VM_SEED={v}: give a number")),
        Err(_) => {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                ^ u64::from(std::process::id())
        }
    }
}

/// `target/vm-cache`.
fn cache_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("CARGO_TARGET_TMPDIR is target/tmp")
        .join("vm-cache")
}

fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from))
        .map(|d| d.join(name))
        .find(|p| p.is_file())
}

fn tools() -> Tools {
    let mut missing = Vec::new();
    let mut need = |name: &str, package: &str| {
        find_tool(name).unwrap_or_else(|| {
            missing.push(format!("{name} (Debian package {package})"));
            PathBuf::new()
        })
    };
    let t = Tools {
        qemu: need("qemu-system-x86_64", "qemu-system-x86"),
        busybox: need("busybox", "busybox-static"),
        mkfs: need("mkfs.ext4", "e2fsprogs"),
        e2fsck: need("e2fsck", "e2fsprogs"),
        debugfs: need("debugfs", "e2fsprogs"),
    };
    need("ldd", "libc-bin");
    need("cp", "coreutils");
    assert!(
        missing.is_empty(),
        "the power-cut test lacks: {} (.ci/run's vm() installs them)",
        missing.join(", ")
    );
    t
}

/// The unpacked cloud kernel, fetched when missing.
fn kernel(cache: &Path) -> PathBuf {
    let dir = cache.join("kernel");
    if !dir.join("vmlinuz").is_file() {
        let out = Command::new("sh")
            .arg(Path::new(VM_DIR).join("fetch-kernel.sh"))
            .arg(&dir)
            .output()
            .expect("running tests/vm/fetch-kernel.sh");
        assert!(
            out.status.success() && dir.join("vmlinuz").is_file(),
            "there is no kernel in {} and tests/vm/fetch-kernel.sh \
             could not fetch Debian's linux-image-cloud-amd64: {}",
            dir.display(),
            String::from_utf8_lossy(&out.stderr)
        );
    }
    dir
}

fn make_disk(tools: &Tools, path: &Path) -> Result<(), String> {
    let _ = fs::remove_file(path);
    fs::File::create(path)
        .and_then(|f| f.set_len(DISK_BYTES))
        .map_err(|e| format!("{}: {e}", path.display()))?;
    // Inode tables and journal zeroed now, not by a kernel thread mid-trial.
    run_ok(
        Command::new(&tools.mkfs)
            .args(["-q", "-F", "-L", "powercut"])
            .args(["-E", "lazy_itable_init=0,lazy_journal_init=0"])
            .arg(path),
    )
}

fn run_ok(cmd: &mut Command) -> Result<(), String> {
    let out = cmd
        .output()
        .map_err(|e| format!("{:?}: {e}", cmd.get_program()))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{cmd:?}: {}: {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

fn tail_of(log: &Path) -> String {
    match fs::read_to_string(log) {
        Ok(s) if !s.trim().is_empty() => format!("\nqemu: {}", s.trim()),
        _ => String::new(),
    }
}

fn last_lines(lines: &[String], n: usize) -> String {
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The scripted model: a session's first call writes a file, the second
/// answers; a resume's calls (counted on from the journal) do the same.
fn script() -> Value {
    let mut turns = Vec::new();
    for k in 1..=4 {
        turns.push(json!({
            "text": format!("writing note {k}"),
            "tool_calls": [{"id": format!("call_{k}"), "name": "write_file",
                            "arguments": {"path": format!("notes/n{k}.txt"),
                                          "content": format!("note {k}\n")}}],
            "usage": {"input_tokens": 100, "output_tokens": 10}
        }));
        turns.push(json!({
            "text": format!("done {k}"),
            "usage": {"input_tokens": 120, "output_tokens": 5}
        }));
    }
    json!({ "turns": turns })
}

/// The guest's initramfs, assembled as `cairn vm start` assembles its
/// default guest's: this `cairn` (stripped) and busybox with their
/// libraries, the virtio modules, the test's init and script.
fn build_initramfs(
    tools: &Tools,
    kernel_dir: &Path,
    work: &Path,
    out: &Path,
) -> Result<(), String> {
    use cairn_vm::{Initramfs, Kernel, Node};
    let e = |e: cairn_vm::VmError| e.to_string();
    let mut fs = Initramfs::new();
    for d in ["dev", "proc", "sys", "tmp", "mnt", "root", "etc"] {
        fs.put(d, Node::Dir);
    }
    fs.put("dev/console", Node::Char(5, 1));
    fs.put_file("init", &Path::new(VM_DIR).join("init"), 0o755)
        .map_err(e)?;
    fs.put(
        "powercut/script.json",
        Node::File(script().to_string().into_bytes(), 0o644),
    );
    // cairn without its debug info (a fifth of the size), else as built.
    let stripped = work.join("cairn");
    let cairn = match Command::new("strip")
        .arg("-o")
        .arg(&stripped)
        .arg(CAIRN)
        .status()
    {
        Ok(s) if s.success() => stripped,
        _ => PathBuf::from(CAIRN),
    };
    fs.put_binary("bin/cairn", &cairn).map_err(e)?;
    fs.put_binary("bin/busybox", &tools.busybox).map_err(e)?;
    let kernel = Kernel::in_dir(kernel_dir).map_err(e)?;
    fs.put_modules(&kernel.modules, MODULES).map_err(e)?;
    fs.write(out).map_err(e)
}

/// splitmix64: the kill plans, reproducible from the seed.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn millis(&mut self, lo: u64, hi: u64) -> Duration {
        Duration::from_millis(lo + self.below(hi - lo + 1))
    }
}
