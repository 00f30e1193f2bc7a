//! A projection refresh (every turn) costs what it appends, not what the
//! store's `sessions.index` holds; the index is still compacted as it grows.

mod common;

use cairn_journal::{Cost, TerminalReason};
use cairn_sessions::{read_index, Binding, Projection, Summary};
use cairn_store::{RunId, Store};
use common::*;

/// Bytes this thread has read through system calls so far (Linux).
fn bytes_read_by_this_thread() -> u64 {
    let io = std::fs::read_to_string("/proc/thread-self/io").unwrap();
    io.lines()
        .find_map(|l| l.strip_prefix("rchar: "))
        .unwrap()
        .trim()
        .parse()
        .unwrap()
}

/// A line as cairn wrote them before lines held only what a lister checks:
/// the first compaction reads them and rewrites them.
fn entry(id: &RunId) -> String {
    let p = Projection {
        binding: Binding {
            len: 1000,
            mtime_ns: 1_700_000_000_000_000_000,
            records: 7,
            tail: "ab".repeat(32),
            head: "cd".repeat(32),
        },
        summary: Summary {
            id: id.to_string(),
            name: Some("a session of the big store".into()),
            status: "completed".into(),
            created: "2026-01-01T00:00:00Z".into(),
            updated: "2026-01-01T00:00:00Z".into(),
            workspace: "/home/someone/src/project".into(),
            turns: 3,
            records: 7,
            bytes: 0,
            tail: "ab".repeat(32),
            cost: Cost::ZERO,
            parent: None,
            valid: true,
            problem: None,
            first_bad_seq: None,
        },
        receipt: vec![],
    };
    serde_json::json!({"id": id.as_str(), "projection": p}).to_string()
}

#[test]
#[ignore = "needs Linux per-thread IO accounting (/proc/thread-self/io): .ci/run runs it with --ignored"]
fn a_refresh_does_not_read_the_whole_index() {
    // Fails, never skips, where the kernel does not count a thread's reads
    // (CONFIG_TASK_IO_ACCOUNTING): the test measures with that count.
    assert!(
        std::path::Path::new("/proc/thread-self/io").exists(),
        "this test needs /proc/thread-self/io (a Linux kernel with task IO accounting)"
    );
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    // 10,000 live sessions in the index (their journals exist).
    let mut text = String::new();
    for _ in 0..10_000 {
        let id = RunId::new();
        std::fs::create_dir_all(store.run_dir(&id)).unwrap();
        std::fs::write(store.journal_path(&id), b"").unwrap();
        text.push_str(&entry(&id));
        text.push('\n');
    }
    std::fs::write(store.sessions_index(), &text).unwrap();
    let size = text.len() as u64;
    assert!(size > 5_000_000);
    // The first update by this cairn learns the index's size (one compaction).
    let mut w = Writer::create(&store, "/ws", "busy");
    assert_eq!(read_index(&store).len(), 10_001);
    for turn_no in 0..20 {
        w.append(user("next"));
        let before = bytes_read_by_this_thread();
        // One turn: what `Session::append` does at a turn boundary.
        w.append(turn(1, 1, Cost::ZERO, false, &[]));
        let read = bytes_read_by_this_thread() - before;
        assert!(
            read < 64 * 1024,
            "turn {turn_no}: a refresh read {read} bytes of a {size}-byte index"
        );
    }
    w.end(TerminalReason::Completed);
    let index = read_index(&store);
    assert_eq!(index.len(), 10_001);
    // Its last line is its completed state: bound to the terminal.
    assert_eq!(index[w.id.as_str()].binding.records, w.state.records);
    assert_eq!(index[w.id.as_str()].binding.tail, w.w.tail());
}

#[test]
fn the_index_is_compacted_as_it_grows_and_keeps_every_session() {
    let d = tempfile::tempdir().unwrap();
    let store = Store::open(d.path()).unwrap();
    let mut writers: Vec<Writer> = (0..3)
        .map(|i| Writer::create(&store, "/ws", &format!("s{i}")))
        .collect();
    let mut most = 0;
    for n in 0..150 {
        let w = &mut writers[n % 3];
        w.append(turn(1, 1, Cost::ZERO, false, &[]));
        let size = std::fs::metadata(store.sessions_index()).unwrap().len();
        most = most.max(size);
    }
    let line = std::fs::read_to_string(store.sessions_index())
        .unwrap()
        .lines()
        .map(str::len)
        .max()
        .unwrap() as u64;
    // Never more than twice the live entries plus the growth allowance.
    assert!(
        most < 2 * 3 * (line + 1) + 32 * 1024 + line,
        "the index grew to {most} bytes"
    );
    let index = read_index(&store);
    for w in &writers {
        assert_eq!(index[w.id.as_str()].turns, w.state.totals.turns);
    }
}
