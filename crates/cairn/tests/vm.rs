//! Whole-machine sessions (DESIGN §13), black-box: `cairn vm start|ls|stop`,
//! and `cairn checkpoint save|restore|verify` and `cairn fork --at CP` of a
//! VM session, against real qemu guests (Debian's cloud kernel and busybox,
//! under TCG where KVM does not work).
//!
//! The tests that boot guests are `#[ignore]`d: run them with `cargo test
//! --test vm -- --ignored` after installing qemu-system-x86, qemu-utils,
//! busybox-static and e2fsprogs and unpacking the kernel (.ci/run does all
//! of it; CAIRN_VM_KERNEL names the kernel, else target/vm-cache). They fail
//! when any of it is missing.
//! Every guest a test starts is killed when the test ends, pass or fail.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use common::Scratch;
use serde_json::Value;

/// A counter on the guest's disk, synced before it is printed: the disk
/// holds at least the last value printed.
const COUNTER: &str =
    "i=0; while :; do i=$((i+1)); echo $i > count; sync; echo \"count $i\"; sleep 0.2; done";

/// Panics, naming what to install, unless qemu, qemu-img and a kernel are
/// here: every test that boots a guest is `#[ignore]`d and calls this
/// first, so `--ignored` fails where they are missing.
fn require() {
    for tool in ["qemu-system-x86_64", "qemu-img"] {
        assert!(
            common::which(tool),
            "this test needs {tool}: apt-get install qemu-system-x86 qemu-utils (.ci/run does)"
        );
    }
    kernel_dir();
}

fn kernel_dir() -> PathBuf {
    if let Some(k) = std::env::var_os("CAIRN_VM_KERNEL") {
        return PathBuf::from(k);
    }
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("CARGO_TARGET_TMPDIR is target/tmp")
        .join("vm-cache/kernel");
    assert!(
        dir.join("vmlinuz").is_file(),
        "there is no kernel in {} (run crates/cairn/tests/vm/fetch-kernel.sh {0}; .ci/run does)",
        dir.display()
    );
    dir
}

/// A scratch store whose guests die with it.
struct Lab {
    s: Scratch,
}

impl Lab {
    fn new() -> Lab {
        Lab { s: Scratch::new() }
    }

    fn cmd(&self) -> Command {
        let mut c = self.s.cmd();
        c.env("CAIRN_VM_KERNEL", kernel_dir());
        c
    }

    fn run(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().unwrap()
    }

    /// Runs cairn, which must succeed; its JSON.
    fn ok(&self, args: &[&str]) -> Value {
        let out = self.run(args);
        assert!(
            out.status.success(),
            "cairn {args:?}: {}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        common::json(&out.stdout)
    }

    /// Starts a guest running `command`; its session id and console.
    fn start(&self, command: &str) -> (String, PathBuf) {
        let v = self.ok(&[
            "vm",
            "start",
            "--memory",
            "128M",
            "--disk-size",
            "64M",
            "--json",
            "--",
            command,
        ]);
        (
            v["id"].as_str().unwrap().to_string(),
            PathBuf::from(v["console"].as_str().unwrap()),
        )
    }

    fn machine_dir(&self, id: &str) -> PathBuf {
        self.s.store.join("machines").join(id)
    }

    fn pid(&self, id: &str) -> i32 {
        std::fs::read_to_string(self.machine_dir(id).join("qemu.pid"))
            .unwrap()
            .trim()
            .parse()
            .unwrap()
    }

    /// SIGKILLs the session's qemu and waits until it is gone.
    fn kill_qemu(&self, id: &str) {
        let pid = self.pid(id);
        unsafe {
            libc::kill(pid, libc::SIGKILL);
        }
        common::wait_until(10, "qemu to die", || unsafe { libc::kill(pid, 0) } != 0);
    }

    fn state(&self, id: &str) -> String {
        let v = self.ok(&["vm", "ls", "--json"]);
        v.as_array()
            .unwrap()
            .iter()
            .find(|m| m["id"] == id)
            .map(|m| m["state"].as_str().unwrap().to_string())
            .unwrap_or_default()
    }

    /// The file `name` on the stopped guest's disk (its newest layer).
    fn disk_file(&self, id: &str, name: &str) -> String {
        let dir = self.machine_dir(id);
        let cfg: Value =
            serde_json::from_slice(&std::fs::read(dir.join("machine.json")).unwrap()).unwrap();
        let gen = dir.join(cfg["generation"].as_str().unwrap());
        let mut tops: Vec<PathBuf> = std::fs::read_dir(&gen)
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "qcow2"))
            .collect();
        tops.sort();
        let top = tops
            .pop()
            .unwrap_or_else(|| gen.join(cfg["disk"].as_str().unwrap()));
        let raw = self.s.dir.path().join(format!("{id}.raw"));
        let st = Command::new("qemu-img")
            .args(["convert", "-U", "-O", "raw"])
            .arg(&top)
            .arg(&raw)
            .status()
            .unwrap();
        assert!(st.success());
        let out = Command::new("debugfs")
            .arg("-R")
            .arg(format!("cat /{name}"))
            .arg(&raw)
            .output()
            .expect("debugfs (e2fsprogs)");
        let _ = std::fs::remove_file(&raw);
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    fn records(&self, id: &str) -> Vec<Value> {
        self.s.records(id)
    }
}

impl Drop for Lab {
    fn drop(&mut self) {
        let Ok(entries) = std::fs::read_dir(self.s.store.join("machines")) else {
            return;
        };
        for e in entries.flatten() {
            if let Ok(pid) = std::fs::read_to_string(e.path().join("qemu.pid")) {
                if let Ok(pid) = pid.trim().parse::<i32>() {
                    unsafe {
                        libc::kill(pid, libc::SIGKILL);
                    }
                }
            }
        }
    }
}

/// The numbers of the console's lines that read `<word> N`.
fn numbers(console: &Path, word: &str) -> Vec<u64> {
    std::fs::read_to_string(console)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.trim().strip_prefix(word)?.trim().parse().ok())
        .collect()
}

/// Waits until the console shows `<word> N` with N >= `n`.
fn wait_number(console: &Path, word: &str, n: u64, secs: u64) {
    let until = Instant::now() + Duration::from_secs(secs);
    while Instant::now() < until {
        if numbers(console, word).last().is_some_and(|&l| l >= n) {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    panic!(
        "the guest's console did not reach `{word} {n}` in {secs} s:\n{}",
        std::fs::read_to_string(console).unwrap_or_default()
    );
}

fn latest_reconcile(records: &[Value]) -> Value {
    records
        .iter()
        .rev()
        .find(|r| r["kind"] == "reconcile" && r.get("machine").is_some())
        .cloned()
        .expect("a reconcile record naming the machine's rollback")
}

#[test]
#[ignore = "needs qemu and a kernel: .ci/run installs them"]
fn a_restored_counter_continues_from_the_checkpoint_and_forks_get_their_own_disks() {
    require();
    let lab = Lab::new();
    let (id, console) = lab.start(COUNTER);
    wait_number(&console, "count", 5, 120);
    let saved = lab.ok(&["checkpoint", "save", &id, "--json"]);
    let cp = saved["id"].as_str().unwrap().to_string();
    assert!(saved["paused_secs"].as_f64().unwrap() < 5.0, "{saved}");
    assert!(saved["memory_bytes"].as_u64().unwrap() > 0, "{saved}");
    // The guest runs on after the save.
    let at_save = *numbers(&console, "count").last().unwrap();
    wait_number(&console, "count", at_save + 5, 60);

    lab.kill_qemu(&id);
    assert_eq!(lab.state(&id), "stopped");
    // A checkpoint of a guest that died is refused, and the death journaled.
    let out = lab.run(&["checkpoint", "save", &id]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("not running"));
    let records = lab.records(&id);
    assert!(records
        .iter()
        .any(|r| r["kind"] == "machine" && r["event"] == "died"));

    let before = numbers(&console, "count");
    let restored = lab.ok(&["checkpoint", "restore", &cp, "--json"]);
    let new_console = PathBuf::from(restored["console"].as_str().unwrap());
    wait_number(&new_console, "count", 1, 60);
    let first = numbers(&new_console, "count")[0];
    // The two ledgers agree: the guest resumes just after the last line the
    // host saw before the checkpoint, and the reconcile record counts the
    // lines after it as rolled back.
    let rolled = &latest_reconcile(&lab.records(&id))["machine"];
    assert_eq!(rolled["checkpoint"], cp.as_str());
    let lines_after = rolled["console_lines"].as_u64().unwrap();
    assert!(lines_after >= 5, "{rolled}");
    let last = *before.last().unwrap();
    assert_eq!(
        first,
        last - lines_after + 1,
        "{rolled}; before: {before:?}"
    );
    assert!(
        first > 5,
        "the counter continued from the checkpoint, not from 0"
    );
    assert_eq!(
        rolled["console_tail"].as_array().unwrap().last().unwrap(),
        &Value::from(format!("count {last}"))
    );

    // A restore while the guest runs is refused.
    let out = lab.run(&["checkpoint", "restore", &cp]);
    assert_eq!(out.status.code(), Some(4), "{out:?}");

    // A VM session's fork gets its own disk: a --workspace is bad usage,
    // refused before anything is made.
    let dir = lab.s.dir.path().join("fork-workspace");
    let out = lab.run(&[
        "fork",
        &id,
        "--at",
        &cp,
        "--workspace",
        dir.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("takes no --workspace"),
        "{out:?}"
    );
    assert!(!dir.exists());

    // Two forks from the one checkpoint: both continue from it.
    let a = lab.ok(&["fork", &id, "--at", &cp, "--json"]);
    let b = lab.ok(&["fork", &id, "--at", &cp, "--json"]);
    let (a_id, b_id) = (a["id"].as_str().unwrap(), b["id"].as_str().unwrap());
    let a_console = PathBuf::from(a["console"].as_str().unwrap());
    let b_console = PathBuf::from(b["console"].as_str().unwrap());
    wait_number(&a_console, "count", first + 2, 60);
    wait_number(&b_console, "count", first + 2, 60);
    for c in [&a_console, &b_console] {
        assert_eq!(
            numbers(c, "count")[0],
            first,
            "a fork starts where the checkpoint stood"
        );
    }
    // Stopped at different moments, each disk holds its own guest's count:
    // b is stopped only once it has counted past what a's disk holds (the
    // two guests need not run at one speed under TCG, so "b counted 8
    // more after a stopped" did not make b's count the larger).
    lab.ok(&["vm", "stop", a_id, "--json"]);
    let a_final: u64 = lab.disk_file(a_id, "count").trim().parse().unwrap();
    wait_number(&b_console, "count", a_final + 2, 120);
    lab.ok(&["vm", "stop", b_id, "--json"]);
    let parent_at = *numbers(&new_console, "count").last().unwrap();
    lab.ok(&["vm", "stop", &id, "--json"]);
    let mut counts = Vec::new();
    for (run, c) in [
        (a_id, &a_console),
        (b_id, &b_console),
        (id.as_str(), &new_console),
    ] {
        let printed = *numbers(c, "count").last().unwrap();
        let on_disk: u64 = lab.disk_file(run, "count").trim().parse().unwrap();
        assert!(
            on_disk == printed || on_disk == printed + 1,
            "{run}: disk says {on_disk}, console {printed}"
        );
        counts.push(on_disk);
    }
    assert!(
        counts[0] < counts[1],
        "the forks' disks diverged: {counts:?}"
    );
    assert!(counts[2] >= parent_at, "the parent went on: {counts:?}");
    // Each fork's journal shares the parent's up to the checkpoint.
    let fork_records = lab.records(a_id);
    assert_eq!(fork_records[0]["fork"]["parent"], id.as_str());
    assert!(fork_records.iter().any(|r| r["kind"] == "machine"
        && r["event"] == "restored"
        && r["checkpoint"] == cp.as_str()));

    // A damaged chunk of the memory stream: verify says so (exit 3), and a
    // restore refuses before it starts anything.
    let shown = lab.ok(&["checkpoint", "show", &cp, "--json"]);
    let memory = shown["paths"][0]["entries"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["path"] == "memory")
        .unwrap()["hash"]
        .as_str()
        .unwrap()
        .to_string();
    let store = cairn_store::Store::open(&lab.s.store).unwrap();
    let pool = cairn_objects::ObjectPool::at(&store);
    let chunks = pool
        .chunk_list(&memory.parse().unwrap())
        .unwrap()
        .expect("the memory stream is chunked");
    let victim = pool.path_of(&chunks[chunks.len() / 2].hash);
    let mut bytes = std::fs::read(&victim).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x55;
    std::fs::write(&victim, &bytes).unwrap();
    let out = lab.run(&["checkpoint", "verify", &cp]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    let gens = |run: &str| {
        std::fs::read_dir(lab.machine_dir(run))
            .unwrap()
            .filter(|e| {
                e.as_ref()
                    .unwrap()
                    .file_name()
                    .to_string_lossy()
                    .starts_with("gen-")
            })
            .count()
    };
    let before = gens(&id);
    let out = lab.run(&["checkpoint", "restore", &cp]);
    assert_eq!(out.status.code(), Some(3), "{out:?}");
    assert_eq!(lab.state(&id), "stopped", "nothing was started");
    assert_eq!(gens(&id), before, "nothing was left behind");
}

#[test]
#[ignore = "needs qemu and a kernel: .ci/run installs them"]
fn twenty_five_power_cuts_and_restores_lose_no_line_and_repeat_none() {
    require();
    const LINES: u64 = 500;
    let cycles: usize = std::env::var("CAIRN_VM_CYCLES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(25);
    let task = format!(
        "n=0; while [ $n -lt {LINES} ]; do n=$((n+1)); echo \"line $n\" >> lines; \
         echo \"$(date +%s) wrote line $n\" >> transcript; echo \"line $n\"; sleep 0.05; done; \
         sync; echo finished"
    );
    let lab = Lab::new();
    let (id, mut console) = lab.start(&task);
    wait_number(&console, "line", 3, 120);
    let mut rng = 0x9e37_79b9_7f4a_7c15_u64 ^ u64::from(std::process::id());
    let mut next = move |n: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % n
    };
    let mut restores = 0;
    for cycle in 0..cycles {
        if numbers(&console, "line").last() == Some(&LINES) {
            break;
        }
        std::thread::sleep(Duration::from_millis(200 + next(800)));
        let cp = lab.ok(&["checkpoint", "save", &id, "--json"])["id"]
            .as_str()
            .unwrap()
            .to_string();
        std::thread::sleep(Duration::from_millis(next(1500)));
        lab.kill_qemu(&id);
        // The console as the guest left it, in the lines the rollback counts
        // (non-empty; the last may be cut mid-line by the kill).
        let text = std::fs::read_to_string(&console).unwrap_or_default();
        let before: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        let r = lab.ok(&["checkpoint", "restore", &cp, "--json"]);
        restores += 1;
        console = PathBuf::from(r["console"].as_str().unwrap());
        let rolled = latest_reconcile(&lab.records(&id))["machine"].clone();
        assert_eq!(rolled["checkpoint"], cp.as_str(), "cycle {cycle}");
        let after = rolled["console_lines"].as_u64().unwrap() as usize;
        assert!(after <= before.len(), "cycle {cycle}: {rolled}");
        // The last line whole before the checkpoint: the guest goes on from
        // the line after it. A checkpoint taken mid-line leaves the rest of
        // that line to be printed first ("ne 222"), then the next.
        let kept = before.len() - after;
        let done: u64 = before[..kept]
            .iter()
            .rev()
            .find_map(|l| l.trim().strip_prefix("line ")?.parse().ok())
            .unwrap_or(0);
        if done < LINES {
            wait_number(&console, "line", done + 1, 60);
            let resumed = std::fs::read_to_string(&console).unwrap();
            let first = numbers(&console, "line")[0];
            let lead = resumed.lines().next().unwrap_or_default();
            let mid_line = first == done + 2
                && !lead.is_empty()
                && format!("line {}", done + 1).ends_with(lead.trim());
            assert!(
                first == done + 1 || mid_line,
                "cycle {cycle}: went on from line {first} after line {done}: {rolled}"
            );
        }
        if after > 0 {
            let tail = rolled["console_tail"].as_array().unwrap();
            assert_eq!(
                tail.last().unwrap(),
                &Value::from(*before.last().unwrap()),
                "cycle {cycle}"
            );
        }
    }
    assert!(restores >= cycles.min(10), "only {restores} restores");
    // The task completes, on the disk and in its transcript: every line
    // once, in order.
    let until = Instant::now() + Duration::from_secs(180);
    while !std::fs::read_to_string(&console)
        .unwrap_or_default()
        .contains("command exited")
    {
        assert!(Instant::now() < until, "the task did not finish");
        std::thread::sleep(Duration::from_millis(100));
    }
    common::wait_until(30, "the guest to power off", || lab.state(&id) == "stopped");
    let want: Vec<String> = (1..=LINES).map(|n| format!("line {n}")).collect();
    let lines: Vec<String> = lab
        .disk_file(&id, "lines")
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(lines, want, "the file on the guest's disk");
    let transcript: Vec<u64> = lab
        .disk_file(&id, "transcript")
        .lines()
        .filter_map(|l| l.rsplit(' ').next()?.parse().ok())
        .collect();
    assert_eq!(
        transcript,
        (1..=LINES).collect::<Vec<_>>(),
        "the guest's transcript"
    );
    let reconciles = lab
        .records(&id)
        .iter()
        .filter(|r| r["kind"] == "reconcile" && r.get("machine").is_some())
        .count();
    assert_eq!(reconciles, restores);
}

#[test]
#[ignore = "needs qemu and a kernel: .ci/run installs them"]
fn a_save_killed_at_any_moment_lists_nothing_partial_and_the_next_save_works() {
    require();
    let lab = Lab::new();
    let (id, console) = lab.start(COUNTER);
    wait_number(&console, "count", 3, 120);
    let t = Instant::now();
    lab.ok(&["checkpoint", "save", &id, "--json"]);
    let full = t.elapsed().as_millis() as u64;
    let mut rng = 0x2545_f491_4f6c_dd1d_u64 ^ u64::from(std::process::id());
    for round in 0..10 {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        let after = Duration::from_millis(rng % (full + 1));
        let mut child = lab
            .cmd()
            .args(["checkpoint", "save", &id, "--json"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(after);
        common::kill(&mut child, libc::SIGKILL);
        let _ = child.wait();
        // Every checkpoint listed is whole: no chunk missing or damaged.
        for c in lab
            .ok(&["checkpoint", "ls", &id, "--json"])
            .as_array()
            .unwrap()
        {
            let cp = c["id"].as_str().unwrap();
            let out = lab.run(&["checkpoint", "verify", cp, "--json"]);
            let v = common::json(&out.stdout);
            let chunk_problems: Vec<&Value> = v["bad"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|b| !b["object"].is_null())
                .collect();
            assert!(chunk_problems.is_empty(), "round {round}: {cp}: {v}");
        }
    }
    // The next save works, and the guest runs on after it.
    let v = lab.ok(&["checkpoint", "save", &id, "--json"]);
    let cp = v["id"].as_str().unwrap();
    assert!(lab.run(&["checkpoint", "verify", cp]).status.success());
    assert_eq!(lab.state(&id), "running");
    let at = *numbers(&console, "count").last().unwrap();
    wait_number(&console, "count", at + 3, 60);
    assert!(
        !lab.machine_dir(&id).join("saving").exists(),
        "the last save cleaned its staging"
    );
}

/// A save killed after qemu wrote the machine state leaves the guest
/// stopped in `postmigrate`, which qemu refuses to migrate again: the next
/// save continues it first (CI once killed a save just there, and every
/// later save failed with "Can't migrate the vm that was paused due to
/// previous migration").
#[test]
#[ignore = "needs qemu and a kernel: .ci/run installs them"]
fn a_save_after_one_killed_once_the_state_was_written_works() {
    use cairn_vm::Qmp;
    require();
    let lab = Lab::new();
    let (id, console) = lab.start(COUNTER);
    wait_number(&console, "count", 3, 120);
    {
        // What the killed save left, made here by its own commands.
        let mut qmp = Qmp::connect(&lab.machine_dir(&id).join("qmp.sock")).unwrap();
        qmp.execute("stop", serde_json::json!({})).unwrap();
        qmp.execute(
            "migrate",
            serde_json::json!({"uri": "exec:cat > /dev/null"}),
        )
        .unwrap();
        let until = Instant::now() + Duration::from_secs(120);
        while qmp.migration().unwrap()["status"] != "completed" {
            assert!(Instant::now() < until, "the migration did not complete");
            std::thread::sleep(Duration::from_millis(20));
        }
        assert_eq!(qmp.status().unwrap(), "postmigrate");
    }
    let v = lab.ok(&["checkpoint", "save", &id, "--json"]);
    let cp = v["id"].as_str().unwrap();
    assert!(lab.run(&["checkpoint", "verify", cp]).status.success());
    assert_eq!(lab.state(&id), "running");
    let at = *numbers(&console, "count").last().unwrap();
    wait_number(&console, "count", at + 3, 60);
}

/// The guest's program for the model-call test: one streamed chat
/// completion through the gateway (busybox wget, given 20 s: its own read
/// timeout crashes in Debian's busybox 1.35), retried until it comes back
/// whole, then the number of events it got.
const CALLER: &str = "n=0; until echo \"calling $n\"; timeout 20 wget -q -O answer \
--header 'Content-Type: application/json' --header 'Authorization: Bearer sk-guest' \
--post-data '{\"model\":\"gpt-4o-mini\",\"stream\":true,\"messages\":[{\"role\":\"user\",\"content\":\"count slowly\"}]}' \
\"$OPENAI_BASE_URL/chat/completions\" && grep -q DONE answer; do n=$((n+1)); sleep 0.5; done; \
sync; echo \"answered $(grep -c '^data:' answer)\"; while :; do sleep 1; done";

#[test]
#[ignore = "needs qemu and a kernel: .ci/run installs them"]
fn a_call_cut_by_a_restore_is_retried_and_served_by_the_gateway_not_bought_again() {
    use cairn_testkit::upstream::{Reply, Script, Upstream};
    require();
    let lab = Lab::new();
    // A slow stream (about 4 s), so the checkpoint is taken in its middle.
    let upstream = Upstream::start(Script::always(
        Reply::text("one two three four five six seven eight nine ten")
            .in_deltas(40)
            .event_delay(Duration::from_millis(100)),
    ));
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let addr = format!("127.0.0.1:{port}");
    let v = lab.ok(&[
        "vm",
        "start",
        "--memory",
        "128M",
        "--disk-size",
        "64M",
        "--gateway",
        &addr,
        "--json",
        "--",
        CALLER,
    ]);
    let id = v["id"].as_str().unwrap().to_string();
    let console = PathBuf::from(v["console"].as_str().unwrap());
    let mut gateway = lab
        .cmd()
        .args(["gateway", "--run", &id, "--listen", &addr])
        .args(["--openai-upstream", &upstream.openai_base_url()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    struct Killed<'a>(&'a mut std::process::Child);
    impl Drop for Killed<'_> {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let _gateway = Killed(&mut gateway);

    // Mid-stream: the request is upstream, its answer not yet whole.
    assert!(
        upstream.wait_for_requests(1, Duration::from_secs(120)),
        "the guest's call never reached the upstream:\n{}",
        std::fs::read_to_string(&console).unwrap_or_default()
    );
    std::thread::sleep(Duration::from_millis(1200));
    // The save pauses the guest as it begins; the stream may end while
    // the frozen disk is read and published (slow machines), but the call
    // is journaled only after the checkpoint (asserted below), because the
    // save holds the session.
    assert_eq!(
        upstream.finished(),
        0,
        "the stream is still running as the save begins"
    );
    let saved = lab.ok(&["checkpoint", "save", &id, "--json"]);
    let cp = saved["id"].as_str().unwrap().to_string();

    // The guest goes on and gets its answer; the call is journaled after
    // the checkpoint.
    wait_number(&console, "answered", 1, 120);
    let answered = *numbers(&console, "answered").last().unwrap();
    let calls: Vec<u64> = lab
        .records(&id)
        .iter()
        .filter(|r| r["kind"] == "model_call")
        .map(|r| r["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(calls.len(), 1, "one call journaled");
    assert!(calls[0] > saved["seq"].as_u64().unwrap());

    // Power cut; restore: the guest wakes inside its call, which is dead.
    lab.kill_qemu(&id);
    let restored = lab.ok(&["checkpoint", "restore", &cp, "--json"]);
    let new_console = PathBuf::from(restored["console"].as_str().unwrap());
    let reconcile = latest_reconcile(&lab.records(&id));
    assert_eq!(
        reconcile["machine"]["model_calls"],
        serde_json::json!(calls),
        "the reconcile names the call paid for after the checkpoint: {reconcile}"
    );

    // It retries; the gateway serves what was bought, the upstream sees
    // nothing new, and the guest has the same whole answer.
    wait_number(&new_console, "answered", 1, 180);
    assert_eq!(*numbers(&new_console, "answered").last().unwrap(), answered);
    assert_eq!(upstream.count(), 1, "the upstream was paid once");
    let after: Vec<Value> = lab
        .records(&id)
        .into_iter()
        .filter(|r| r["kind"] == "model_call" && r["seq"].as_u64().unwrap() > calls[0])
        .collect();
    assert_eq!(after.len(), 1, "the retry is journaled: {after:?}");
    assert_eq!(after[0]["replay"], true, "{}", after[0]);
    assert_eq!(after[0]["cost"]["usd"].as_f64().unwrap_or(0.0), 0.0);
}

#[test]
fn a_missing_qemu_or_kernel_is_named_with_what_to_install() {
    let lab = Lab::new();
    let empty = lab.s.dir.path().join("empty-path");
    std::fs::create_dir_all(&empty).unwrap();
    // No kernel is named: this test runs on a fresh machine, where only
    // the missing pieces are checked.
    let out = lab
        .s
        .cmd()
        .env("PATH", &empty)
        .args(["vm", "start", "--", "true"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("qemu-system-x86_64 is not installed"), "{err}");
    assert!(err.contains("apt-get install qemu-system-x86"), "{err}");
    assert!(
        !lab.s.store.join("runs").exists()
            || std::fs::read_dir(lab.s.store.join("runs")).unwrap().count() == 0,
        "no session was made"
    );
    if common::which("qemu-system-x86_64") && common::which("qemu-img") {
        let out = lab
            .s
            .cmd()
            .env("CAIRN_VM_KERNEL", lab.s.dir.path().join("no-kernel"))
            .args(["vm", "start", "--", "true"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("no kernel for the guest"), "{err}");
        assert!(err.contains("linux-image-cloud-amd64"), "{err}");
    }
    let run = |args: &[&str]| lab.s.cmd().args(args).output().unwrap();
    let out = run(&["vm", "start", "--memory", "lots", "--", "true"]);
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("is not a size"));
    let out = run(&["vm", "ls"]);
    assert!(out.status.success());
    assert!(String::from_utf8_lossy(&out.stdout).contains("no VM sessions"));
}

/// Every directory under `dir` (and `dir`) is `0700`, every other entry
/// (files, qemu's socket) `0600`.
fn assert_private(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path| std::fs::symlink_metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode(dir), 0o700, "{}", dir.display());
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if std::fs::symlink_metadata(&p).unwrap().is_dir() {
            assert_private(&p);
        } else {
            assert_eq!(mode(&p), 0o600, "{}", p.display());
        }
    }
}

/// The raw disk of the session's current generation, and its size.
fn current_disk(dir: &Path) -> (PathBuf, u64) {
    let cfg: Value =
        serde_json::from_slice(&std::fs::read(dir.join("machine.json")).unwrap()).unwrap();
    let disk = dir
        .join(cfg["generation"].as_str().unwrap())
        .join(cfg["disk"].as_str().unwrap());
    let len = std::fs::metadata(&disk).unwrap().len();
    (disk, len)
}

/// Bytes the file system allocated to `path`.
fn allocated(path: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(path).unwrap().blocks() * 512
}

/// The session's status as `cairn sessions` lists it.
fn listed_status(lab: &Lab, id: &str) -> String {
    let v = lab.ok(&["sessions", "--json"]);
    v.as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == id)
        .map(|s| s["status"].as_str().unwrap().to_string())
        .unwrap_or_default()
}

/// A VM session keeps its files private (`0700` directories, `0600`
/// files, qemu's own included) through a start, a save and a restore; its
/// 1 GiB raw disks stay sparse (the booted one after mkfs, and the one a
/// restore writes back whole); and `vm stop` ends the session, so it is
/// listed `interrupted`, not `running`, until a restore runs it again.
#[test]
#[ignore = "needs qemu and a kernel: .ci/run installs them"]
fn a_vm_sessions_files_are_private_its_disks_sparse_and_a_stop_ends_it() {
    require();
    let lab = Lab::new();
    let v = lab.ok(&["vm", "start", "--memory", "128M", "--json", "--", COUNTER]);
    let id = v["id"].as_str().unwrap().to_string();
    let console = PathBuf::from(v["console"].as_str().unwrap());
    wait_number(&console, "count", 3, 120);
    let machines = lab.s.store.join("machines");
    assert_private(&machines);
    let dir = lab.machine_dir(&id);
    let (disk, len) = current_disk(&dir);
    assert_eq!(len, 1 << 30);
    assert!(
        allocated(&disk) < len / 8,
        "the booted disk holds {} bytes of {len}",
        allocated(&disk)
    );
    assert_eq!(listed_status(&lab, &id), "running");

    let cp = lab.ok(&["checkpoint", "save", &id, "--json"])["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_private(&machines);

    lab.ok(&["vm", "stop", &id, "--json"]);
    assert_eq!(lab.state(&id), "stopped");
    assert_eq!(listed_status(&lab, &id), "interrupted");
    let records = lab.records(&id);
    let last = records.last().unwrap();
    assert_eq!(last["kind"], "terminal", "{last}");
    assert_eq!(last["reason"], "interrupted", "{last}");

    lab.ok(&["checkpoint", "restore", &cp, "--json"]);
    assert_eq!(
        listed_status(&lab, &id),
        "running",
        "a restore runs it again"
    );
    let (disk, len) = current_disk(&dir);
    // The restored guest counts on in its new generation's console.
    wait_number(&disk.parent().unwrap().join("console.log"), "count", 1, 120);
    assert_private(&machines);
    assert_eq!(len, 1 << 30);
    assert!(
        allocated(&disk) < len / 8,
        "the restored disk holds {} bytes of {len}",
        allocated(&disk)
    );

    // A guest found gone ends the session too.
    lab.kill_qemu(&id);
    lab.ok(&["vm", "stop", &id, "--json"]);
    assert_eq!(listed_status(&lab, &id), "interrupted");
}
