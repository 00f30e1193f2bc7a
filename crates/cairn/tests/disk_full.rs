//! Disk full (DESIGN §14): on a small file system holding the store and the
//! workspace, sessions, captures and checkpoint saves run until ENOSPC. Every
//! failure exits with its class (1; `cairn exec`'s own failures 125) and a
//! message that names the full disk and what to do; nothing acknowledged (a
//! command that exited 0) is lost; `cairn verify --all` passes; and once a
//! filler file is deleted the same commands work again.
//!
//! The file system is an ext4 image on a loop device, else a size-limited
//! tmpfs; both need root, so the tests are `#[ignore]`d (`.ci/run` runs them
//! with `--ignored`, as root) and fail when neither can be mounted. The mount
//! is undone (and the loop device detached) by a guard, also when a test
//! panics.

mod common;

use std::collections::BTreeMap;
use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use common::ledger::*;
use common::*;
use serde_json::{json, Value};

/// The size of the small file system.
const FS_MIB: u64 = 8;
/// The filler written first, whose deletion frees the disk.
const FILLER: usize = 2 << 20;
/// The file saved by `checkpoint save --path`: over the 1 MiB chunking
/// threshold, so a save stores chunks.
const IMAGE: usize = (5 << 20) / 4;

// ---------------------------------------------------------------------------
// The small file system.

/// A small file system mounted on a temporary directory, unmounted (and its
/// loop device detached) when dropped.
struct SmallFs {
    mnt: PathBuf,
    loop_dev: Option<String>,
    how: &'static str,
    // Dropped after `drop` has unmounted: it holds the mount point and the image.
    _dir: tempfile::TempDir,
}

/// Runs a system tool; its trimmed stdout, or what went wrong.
fn tool<S: AsRef<OsStr>>(program: &str, args: &[S]) -> Result<String, String> {
    let shown: Vec<String> = args
        .iter()
        .map(|a| a.as_ref().to_string_lossy().into_owned())
        .collect();
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("`{program}` cannot be run: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).trim().to_string())
    } else {
        Err(format!(
            "`{program} {}` failed ({}): {}",
            shown.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

impl SmallFs {
    fn mount() -> Result<SmallFs, String> {
        let dir = tempfile::tempdir().map_err(|e| format!("a temporary directory: {e}"))?;
        let mnt = dir.path().join("mnt");
        std::fs::create_dir(&mnt).map_err(|e| format!("creating {}: {e}", mnt.display()))?;
        let ext4 = match loop_ext4(dir.path(), &mnt) {
            Ok(dev) => {
                return Ok(SmallFs {
                    mnt,
                    loop_dev: Some(dev),
                    how: "ext4 on a loop device",
                    _dir: dir,
                })
            }
            Err(e) => e,
        };
        let size = format!("size={FS_MIB}m,mode=0700");
        match tool(
            "mount",
            &[
                OsStr::new("-t"),
                OsStr::new("tmpfs"),
                OsStr::new("-o"),
                OsStr::new(&size),
                OsStr::new("cairn-disk-full"),
                mnt.as_os_str(),
            ],
        ) {
            Ok(_) => Ok(SmallFs {
                mnt,
                loop_dev: None,
                how: "tmpfs",
                _dir: dir,
            }),
            Err(tmpfs) => Err(format!("loop-mounted ext4: {ext4}; tmpfs: {tmpfs}")),
        }
    }
}

/// An ext4 image in `dir`, on a loop device, mounted on `mnt`; the device.
fn loop_ext4(dir: &Path, mnt: &Path) -> Result<String, String> {
    let image = dir.join("fs.img");
    std::fs::File::create(&image)
        .and_then(|f| f.set_len(FS_MIB << 20))
        .map_err(|e| format!("creating {}: {e}", image.display()))?;
    // No blocks reserved for root: the test runs as root.
    tool(
        "mkfs.ext4",
        &[
            OsStr::new("-q"),
            OsStr::new("-F"),
            OsStr::new("-m"),
            OsStr::new("0"),
            image.as_os_str(),
        ],
    )?;
    let dev = tool(
        "losetup",
        &[
            OsStr::new("--find"),
            OsStr::new("--show"),
            image.as_os_str(),
        ],
    )?;
    if let Err(e) = tool(
        "mount",
        &[
            OsStr::new("-t"),
            OsStr::new("ext4"),
            OsStr::new(&dev),
            mnt.as_os_str(),
        ],
    ) {
        let _ = tool("losetup", &["-d", &dev]);
        return Err(e);
    }
    Ok(dev)
}

impl Drop for SmallFs {
    fn drop(&mut self) {
        let mnt = self.mnt.as_os_str();
        let mut unmounted = false;
        for _ in 0..50 {
            if tool("umount", &[mnt]).is_ok() {
                unmounted = true;
                break;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
        if !unmounted {
            if let Err(e) = tool("umount", &[OsStr::new("-l"), mnt]) {
                eprintln!("disk_full: cannot unmount {}: {e}", self.mnt.display());
            }
        }
        if let Some(dev) = &self.loop_dev {
            if let Err(e) = tool("losetup", &["-d", dev.as_str()]) {
                eprintln!("disk_full: cannot detach {dev}: {e}");
            }
        }
    }
}

/// The small file system; panics, saying what it needs, when none can be
/// mounted (the tests that call this are `#[ignore]`d: `.ci/run` runs
/// them as root).
fn small_fs(test: &str) -> SmallFs {
    match SmallFs::mount() {
        Ok(fs) => {
            eprintln!(
                "{test}: on {} of {FS_MIB} MiB at {}",
                fs.how,
                fs.mnt.display()
            );
            fs
        }
        Err(e) => panic!(
            "no small file system could be mounted: {e}. The disk-full tests need root \
             (or CAP_SYS_ADMIN) to mount an ext4 image on a loop device or a size-limited tmpfs"
        ),
    }
}

/// A scratch store and workspace on the small file system (scripts stay on
/// the ordinary disk).
fn scratch_on(fs: &SmallFs) -> Scratch {
    let ws = fs.mnt.join("ws");
    std::fs::create_dir(&ws).unwrap();
    Scratch {
        dir: tempfile::tempdir().unwrap(),
        store: fs.mnt.join("store"),
        ws: std::fs::canonicalize(ws).unwrap(),
    }
}

/// Writes `path` until the disk is full; how many bytes it holds.
fn fill_up(path: &Path) -> u64 {
    use std::io::Write;
    let mut f = std::fs::File::create(path).unwrap();
    for block in [64 << 10, 4 << 10, 512] {
        let buf = vec![0x5a_u8; block];
        while f.write_all(&buf).and_then(|_| f.sync_data()).is_ok() {}
    }
    drop(f);
    std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
}

// ---------------------------------------------------------------------------
// Checks beyond the ledger (`common::ledger`).

/// Temporary files (`.NAME.XXXXXX.tmp`, `.XXXXXX.tmp`) beneath `dir`.
fn temporaries(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if e.file_type().is_ok_and(|t| t.is_dir()) {
            out.extend(temporaries(&e.path()));
        } else if name.starts_with('.') && name.ends_with(".tmp") {
            out.push(e.path());
        }
    }
    out
}

/// `cairn verify --all` passes, and every acknowledged session is in it.
fn verify_all(s: &Scratch, ledger: &Ledger) {
    let out = s.run(&["verify", "--all", "--json"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "verify --all: {text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed: Vec<Value> = json(&out.stdout).as_array().unwrap().clone();
    for (run, lines) in &ledger.journals {
        let v = listed
            .iter()
            .find(|v| v["id"] == run.as_str())
            .unwrap_or_else(|| panic!("verify --all does not list {run}: {text}"));
        let records = lines.iter().filter(|b| **b == b'\n').count() as u64;
        assert!(
            v["ok"] == true && v["records"].as_u64().unwrap() >= records,
            "{v}"
        );
    }
}

// ---------------------------------------------------------------------------
// Commands.

fn noise(len: usize, seed: u64) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect()
}

/// A failure on a full disk: exit `code`, and a message that says the disk is
/// full and what to do.
fn assert_disk_full(what: &str, out: &Output, code: i32) {
    let err = stderr(out);
    assert_eq!(out.status.code(), Some(code), "{what}: {err}");
    assert!(
        err.contains("No space left on device")
            && err.contains("the disk is full")
            && err.contains("free some space"),
        "{what}: the message does not say the disk is full and what to do: {err}"
    );
}

/// A script of `n` pairs of turns — a file written, then an answer — after
/// the first run's, so that each resume with a follow-up has its turns.
fn session_script(s: &Scratch, n: usize) -> String {
    let mut turns = vec![
        json!({"text": "writing", "tool_calls": [call("w0", "write_file", json!({"path": "notes/0.txt", "content": "first\n"}))]}),
        json!({"text": "done"}),
    ];
    for k in 1..=n {
        let content = format!("{}\n", "note ".repeat(200));
        turns.push(json!({"text": format!("turn {k}"), "tool_calls": [call(&format!("w{k}"), "write_file", json!({"path": format!("notes/{k}.txt"), "content": content}))]}));
        turns.push(json!({"text": format!("answer {k}")}));
    }
    format!(
        "script:{}",
        s.script("session.json", json!(turns)).display()
    )
}

/// Overwrites 8 KiB of the image in place (no new blocks).
fn poke(image: &Path, seed: u64) -> std::io::Result<()> {
    use std::io::{Seek, SeekFrom, Write};
    let mut f = std::fs::OpenOptions::new().write(true).open(image)?;
    let at = (seed.wrapping_mul(7919) % (IMAGE as u64 / 8192)) * 8192;
    f.seek(SeekFrom::Start(at))?;
    f.write_all(&noise(8192, seed ^ 0xabc))?;
    f.sync_data()
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Op {
    Resume,
    Exec,
    Snapshot,
    Checkpoint,
}

const OPS: [Op; 4] = [Op::Resume, Op::Exec, Op::Snapshot, Op::Checkpoint];

struct World {
    s: Scratch,
    base: String,
    exec: String,
    image: PathBuf,
    ledger: Ledger,
    /// The first acknowledged snapshot of `base` and its tree; the first
    /// acknowledged checkpoint and its image.
    first_snapshot: Option<(String, Tree)>,
    first_checkpoint: Option<(String, Vec<u8>)>,
}

impl World {
    /// Runs `op` once: `Ok` when cairn acknowledged it, else the failed output.
    fn step(&mut self, op: Op, round: usize) -> Result<(), Output> {
        let s = &self.s;
        let tree = read_tree(&s.ws);
        let image = std::fs::read(&self.image).unwrap();
        let text = format!("round {round}");
        let out = match op {
            Op::Resume => s.run(&["resume", &self.base, &text, "--json"]),
            Op::Exec => s.run(&["exec", "--run", &self.exec, "--json", "--", "true"]),
            Op::Snapshot => s.run(&["snapshot", "--run", &self.base, "--json"]),
            Op::Checkpoint => s.run(&[
                "checkpoint",
                "save",
                &self.base,
                "--path",
                self.image.to_str().unwrap(),
                "--json",
            ]),
        };
        if !out.status.success() {
            return Err(out);
        }
        let v = json(&out.stdout);
        match op {
            Op::Resume => {
                assert_eq!(v["status"], "completed", "{v}");
                self.ledger.journal(s, &self.base);
            }
            Op::Exec => {
                assert_eq!(v["status"], "completed", "{v}");
                self.ledger.journal(s, &self.exec);
            }
            Op::Snapshot => {
                let id = v["id"].as_str().unwrap();
                self.ledger.snapshot(s, &self.base, id, &tree);
                self.ledger.journal(s, &self.base);
                self.first_snapshot
                    .get_or_insert_with(|| (id.to_string(), tree));
            }
            Op::Checkpoint => {
                self.ledger.checkpoint(s, &v, &tree);
                let id = v["id"].as_str().unwrap().to_string();
                self.first_checkpoint.get_or_insert((id, image));
            }
        }
        Ok(())
    }
}

fn code_of(op: Op) -> i32 {
    if op == Op::Exec {
        125
    } else {
        1
    }
}

#[test]
#[ignore = "needs root to mount a small file system: .ci/run runs it so"]
fn on_a_full_disk_every_command_fails_clearly_loses_nothing_and_works_again_once_space_is_freed() {
    let fs = small_fs("disk_full");
    let filler = fs.mnt.join("filler");
    std::fs::write(&filler, vec![0u8; FILLER]).unwrap();
    let s = scratch_on(&fs);
    for i in 0..8 {
        std::fs::write(s.ws.join(format!("f{i}.txt")), format!("file {i}\n")).unwrap();
    }
    let image = fs.mnt.join("disk.img");
    std::fs::write(&image, noise(IMAGE, 1)).unwrap();
    let model = session_script(&s, 400);
    let v = ok_json("run", &s.run(&["run", "--model", &model, "--json", "base"]));
    let base = v["id"].as_str().unwrap().to_string();
    let v = ok_json("exec", &s.run(&["exec", "--json", "--", "true"]));
    let exec = v["id"].as_str().unwrap().to_string();
    let mut w = World {
        s,
        base,
        exec,
        image,
        ledger: Ledger::default(),
        first_snapshot: None,
        first_checkpoint: None,
    };
    let (base, exec) = (w.base.clone(), w.exec.clone());
    w.ledger.journal(&w.s, &base);
    w.ledger.journal(&w.s, &exec);

    // Fill the disk: every round adds a file of noise to the workspace and
    // changes the image, then runs every command, until each has failed on
    // the full disk a few times. Session work is a `resume` with a follow-up
    // (a turn that writes a file) of the session `cairn run` started above;
    // a `cairn run` that starts a session on a full disk is the next test's.
    let mut failed: BTreeMap<Op, Vec<String>> = BTreeMap::new();
    let mut acked: BTreeMap<Op, usize> = BTreeMap::new();
    let mut rounds = 0;
    while OPS.iter().any(|op| failed.get(op).map_or(0, Vec::len) < 3) {
        assert!(
            rounds < 300,
            "the disk never filled up: failures {:?}",
            failed.iter().map(|(k, v)| (k, v.len())).collect::<Vec<_>>()
        );
        let _ = std::fs::write(
            w.s.ws.join(format!("data{rounds}.bin")),
            noise(32 << 10, rounds as u64),
        );
        let _ = poke(&w.image, rounds as u64);
        for op in OPS {
            match w.step(op, rounds) {
                Ok(()) => *acked.entry(op).or_default() += 1,
                Err(out) => {
                    assert_disk_full(&format!("{op:?} on a full disk"), &out, code_of(op));
                    failed.entry(op).or_default().push(stderr(&out));
                }
            }
        }
        rounds += 1;
    }
    eprintln!("disk full after {rounds} rounds; acknowledged {acked:?}");
    for (op, errs) in &failed {
        eprintln!(
            "{op:?} failed {} times, first with:\n{}",
            errs.len(),
            errs[0]
        );
    }

    let temps = temporaries(&w.s.store);
    eprintln!(
        "{} temporary files left in the store: {temps:?}",
        temps.len()
    );

    // While the disk is full: nothing acknowledged is lost, and everything verifies.
    w.ledger.check(&w.s, true, None);
    verify_all(&w.s, &w.ledger);
    let v = ok_json("sessions", &w.s.run(&["sessions", "--all", "--json"]));
    for id in [&base, &exec] {
        let e = v
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["id"] == id.as_str())
            .unwrap();
        assert_eq!(e["valid"], true, "{e}");
    }

    // Space again: the same commands work.
    std::fs::remove_file(&filler).unwrap();
    for op in OPS {
        if let Err(out) = w.step(op, rounds) {
            panic!("{op:?} after space was freed: {}", stderr(&out));
        }
    }
    let model = session_script(&w.s, 1);
    let v = ok_json(
        "run after space was freed",
        &w.s.run(&["run", "--model", &model, "--json", "again"]),
    );
    assert_eq!(v["status"], "completed");
    w.ledger.journal(&w.s, v["id"].as_str().unwrap());
    w.ledger.check(&w.s, true, None);
    verify_all(&w.s, &w.ledger);
    for cp in w.ledger.checkpoints.keys() {
        let v = ok_json(
            "checkpoint verify",
            &w.s.run(&["checkpoint", "verify", cp, "--json"]),
        );
        assert_eq!(v["ok"], true, "{v}");
    }

    // The first acknowledged snapshot and checkpoint put back what they saved.
    let (snap, tree) = w
        .first_snapshot
        .clone()
        .expect("no snapshot was acknowledged");
    ok_json(
        "rewind",
        &w.s.run(&["rewind", &base, "--restore-snapshot", &snap, "--json"]),
    );
    assert!(
        read_tree(&w.s.ws) == tree,
        "the restored workspace differs from snapshot {snap}"
    );
    let (cp, bytes) = w
        .first_checkpoint
        .clone()
        .expect("no checkpoint was acknowledged");
    ok_json(
        "checkpoint restore",
        &w.s.run(&["checkpoint", "restore", &cp, "--json"]),
    );
    assert!(
        std::fs::read(&w.image).unwrap() == bytes,
        "checkpoint {cp} did not restore the image"
    );
    verify_all(&w.s, &w.ledger);
}

/// Fills the disk around an acknowledged session, then tries to start new
/// sessions — `cairn run` and `cairn exec` without `--run` — freeing 1 KiB
/// after each try, so that some tries find room for the run directory and
/// not for its first record. Each try succeeds or fails as on a full disk.
/// Returns the scratch, the ledger and the files to delete to free the disk.
fn new_sessions_on_a_full_disk(fs: &SmallFs) -> (Scratch, Ledger, Vec<PathBuf>) {
    let s = scratch_on(fs);
    let filler = fs.mnt.join("filler");
    std::fs::write(&filler, vec![0u8; FILLER]).unwrap();
    std::fs::write(s.ws.join("a.txt"), "a\n").unwrap();
    let model = session_script(&s, 4);
    let mut ledger = Ledger::default();
    let v = ok_json("run", &s.run(&["run", "--model", &model, "--json", "base"]));
    ledger.journal(&s, v["id"].as_str().unwrap());
    let rest = fs.mnt.join("rest");
    let mut len = fill_up(&rest);
    let mut failures = 0;
    for _ in 0..12 {
        for (args, code) in [
            (vec!["run", "--model", &model, "--json", "new"], 1),
            (vec!["exec", "--json", "--", "true"], 125),
        ] {
            let out = s.run(&args);
            if out.status.success() {
                ledger.journal(&s, json(&out.stdout)["id"].as_str().unwrap());
            } else {
                assert_disk_full(&format!("{} on a full disk", args[0]), &out, code);
                failures += 1;
            }
        }
        len = len.saturating_sub(1 << 10);
        std::fs::OpenOptions::new()
            .write(true)
            .open(&rest)
            .and_then(|f| f.set_len(len))
            .unwrap();
    }
    assert!(
        failures >= 12,
        "the disk was not full ({failures} failures)"
    );
    ledger.check(&s, true, None);
    (s, ledger, vec![filler, rest])
}

#[test]
#[ignore = "needs root to mount a small file system: .ci/run runs it so"]
fn on_a_full_disk_run_and_exec_fail_clearly_and_start_sessions_again_once_space_is_freed() {
    let fs = small_fs("disk_full_new_sessions");
    let (s, mut ledger, fillers) = new_sessions_on_a_full_disk(&fs);
    for f in fillers {
        std::fs::remove_file(f).unwrap();
    }
    let model = session_script(&s, 4);
    let v = ok_json(
        "run after space was freed",
        &s.run(&["run", "--model", &model, "--json", "new"]),
    );
    ledger.journal(&s, v["id"].as_str().unwrap());
    let v = ok_json(
        "exec after space was freed",
        &s.run(&["exec", "--json", "--", "true"]),
    );
    ledger.journal(&s, v["id"].as_str().unwrap());
    ledger.check(&s, true, None);
    // Each acknowledged session verifies. `verify --all` is not asserted
    // here: failed starts leave damaged sessions (the defect of the ignored
    // test below).
    for run in ledger.journals.keys() {
        let out = s.run(&["verify", run]);
        assert!(out.status.success(), "verify {run}: {}", stderr(&out));
    }
    let all = json(&s.run(&["verify", "--all", "--json"]).stdout);
    let damaged = all
        .as_array()
        .unwrap()
        .iter()
        .filter(|v| v["ok"] != true)
        .count();
    eprintln!("disk_full_new_sessions: {damaged} sessions left damaged by failed starts");
}

// A session whose `meta` line cannot be written (ENOSPC) leaves no run
// directory behind (`JournalWriter::create` removes what it made): before
// that fix, the leftover empty journal made `verify --all` report damage,
// `sessions` list it as invalid, and `session rm` refuse.
#[test]
#[ignore = "needs root to mount a small file system: .ci/run runs it so"]
fn a_session_that_cannot_be_created_on_a_full_disk_leaves_nothing_behind() {
    let fs = small_fs("disk_full_leftovers");
    let (s, ledger, fillers) = new_sessions_on_a_full_disk(&fs);
    verify_all(&s, &ledger);
    for f in fillers {
        std::fs::remove_file(f).unwrap();
    }
    verify_all(&s, &ledger);
    let run = ledger.journals.keys().next().unwrap();
    let out = s.run(&["session", "rm", run]);
    assert!(out.status.success(), "session rm {run}: {}", stderr(&out));
}
