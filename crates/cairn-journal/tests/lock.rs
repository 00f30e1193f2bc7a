//! Lock races between real processes: many start at the same instant, one
//! wins, and every one refused names the process that holds the lock — never
//! "holder unknown", never a holder that is long gone.
//!
//! The children are this same test binary, re-run with `CAIRN_LOCK_CHILD` set.

use std::process::{Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cairn_journal::*;

const PROCESSES: usize = 24;
const ROUNDS: usize = 4;

fn now_ns() -> u128 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_nanos()
}

/// How long the children contend, passing the lock among them.
const CONTEND: Duration = Duration::from_millis(600);

#[test]
fn lock_race_child() {
    let (Ok(path), Ok(start)) = (
        std::env::var("CAIRN_LOCK_CHILD"),
        std::env::var("CAIRN_LOCK_START"),
    ) else {
        return; // Only does something when the parent test runs it.
    };
    let start: u128 = start.parse().unwrap();
    while now_ns() < start {
        std::thread::sleep(Duration::from_micros(200));
    }
    let until = start + CONTEND.as_nanos();
    let (mut won, mut unknown, mut named) = (0u64, 0u64, Vec::new());
    while now_ns() < until {
        match RunLock::acquire(std::path::Path::new(&path), "race") {
            Ok(lock) => {
                won += 1;
                std::thread::sleep(Duration::from_micros(500));
                drop(lock);
            }
            Err(JournalError::Locked {
                holder: Some(h), ..
            }) => named.push((h.pid, h.host, h.since)),
            Err(JournalError::Locked { holder: None, .. }) => unknown += 1,
            Err(e) => panic!("{e}"),
        }
    }
    let report = serde_json::json!({
        "pid": std::process::id(), "won": won, "unknown": unknown, "named": named,
    });
    println!("@@{report}");
}

#[test]
fn every_process_refused_the_lock_names_its_holder() {
    let exe = std::env::current_exe().unwrap();
    let host = gethostname();
    for round in 0..ROUNDS {
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("journal.lock");
        if round % 2 == 1 {
            // A holder that died without a trace but its name in the file.
            let stale = LockHolder {
                pid: 4_000_000_000,
                host: host.clone(),
                since: "2020-01-01T00:00:00Z".into(),
            };
            std::fs::write(&path, serde_json::to_vec(&stale).unwrap()).unwrap();
        }
        let start = now_ns() + 800_000_000;
        let children: Vec<_> = (0..PROCESSES)
            .map(|_| {
                Command::new(&exe)
                    .args([
                        "--exact",
                        "lock_race_child",
                        "--nocapture",
                        "--test-threads=1",
                    ])
                    .env("CAIRN_LOCK_CHILD", &path)
                    .env("CAIRN_LOCK_START", start.to_string())
                    .stdout(Stdio::piped())
                    .stderr(Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        let mut pids = Vec::new();
        let (mut won, mut unknown, mut named) = (0, 0, Vec::new());
        for c in children {
            let out = c.wait_with_output().unwrap();
            let text = String::from_utf8(out.stdout).unwrap();
            // The harness prints around it: the report follows the marker.
            let report: serde_json::Value = text
                .lines()
                .find_map(|l| {
                    l.split_once("@@")
                        .map(|(_, o)| serde_json::from_str(o).unwrap())
                })
                .unwrap_or_else(|| panic!("round {round}: no report in {text:?}"));
            pids.push(report["pid"].as_u64().unwrap());
            won += report["won"].as_u64().unwrap();
            unknown += report["unknown"].as_u64().unwrap();
            named.extend(report["named"].as_array().unwrap().iter().cloned());
        }
        assert!(
            won > 1,
            "round {round}: the lock changed hands {won} time(s)"
        );
        assert!(named.len() >= 20, "round {round}: {} refusals", named.len());
        assert_eq!(
            unknown,
            0,
            "round {round}: {unknown} of {} refusals said \"holder unknown\"",
            unknown as usize + named.len()
        );
        for h in &named {
            let pid = h[0].as_u64().unwrap();
            assert!(
                pids.contains(&pid),
                "round {round}: a refusal named pid {pid}, not one of the contenders"
            );
            assert_eq!(h[1], host.as_str());
            assert!(!h[2].as_str().unwrap().is_empty());
        }
    }
}

fn gethostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_string())
        .unwrap_or_else(|_| {
            String::from_utf8(Command::new("hostname").output().unwrap().stdout)
                .unwrap()
                .trim()
                .to_string()
        })
}
