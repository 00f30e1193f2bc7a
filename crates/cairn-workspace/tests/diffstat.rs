//! Per-file line stats between snapshots (`diff_stat`, `run_diff_stat`):
//! each kind of change, the binary and size rules, chunked content, and the
//! run's changes apart from the operator's.

mod common;

use std::fs;
use std::os::unix::fs::PermissionsExt;

use cairn_workspace::*;
use common::*;
use proptest::prelude::*;

fn row(path: &str, change: ChangeKind, added: u64, removed: u64, binary: bool) -> FileChange {
    FileChange {
        path: path.into(),
        change,
        added,
        removed,
        binary,
    }
}

fn chmod(f: &Fixture, rel: &str, mode: u32) {
    fs::set_permissions(f.root.join(rel), fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn diff_stat_counts_lines_for_every_kind_of_change() {
    use ChangeKind::*;
    let f = Fixture::new();
    f.write("same.txt", "untouched\n");
    f.write("mod.txt", "a\nb\nc\n");
    f.write("del.txt", "x\ny\n");
    f.write("tool.sh", "echo\n");
    f.write("noeol.txt", "last");
    fs::write(f.root.join("blob.bin"), b"\0\x01\x02").unwrap();
    f.write("both.sh", "one\n");
    let from = f.capture("snap:1").snapshot;

    f.write("mod.txt", "a\nB\nc\nd\n");
    f.remove("del.txt");
    f.write("add.txt", "1\n2\n3");
    chmod(&f, "tool.sh", 0o755);
    f.write("noeol.txt", "last\n");
    fs::write(f.root.join("blob.bin"), b"\0\x03").unwrap();
    fs::write(f.root.join("latin1.txt"), b"caf\xe9\n").unwrap();
    f.write("both.sh", "one\ntwo\n");
    chmod(&f, "both.sh", 0o755);
    let to = f.capture("snap:2").snapshot;

    let want = vec![
        row("add.txt", Added, 3, 0, false),
        row("blob.bin", Modified, 0, 0, true),
        // Content and mode: a modification, counted.
        row("both.sh", Modified, 1, 0, false),
        row("del.txt", Deleted, 0, 2, false),
        row("latin1.txt", Added, 0, 0, true),
        row("mod.txt", Modified, 2, 1, false),
        // A missing final newline is a changed line, as git counts it.
        row("noeol.txt", Modified, 1, 1, false),
        row("tool.sh", Mode, 0, 0, false),
    ];
    assert_eq!(f.ws.diff_stat(&from, &to).unwrap(), want);

    // The other way round: added and removed swap, so do Added and Deleted.
    let back: Vec<FileChange> = want
        .iter()
        .map(|r| FileChange {
            change: match r.change {
                Added => Deleted,
                Deleted => Added,
                ref c => c.clone(),
            },
            added: r.removed,
            removed: r.added,
            ..r.clone()
        })
        .collect();
    assert_eq!(f.ws.diff_stat(&to, &from).unwrap(), back);
    assert!(f.ws.diff_stat(&to, &to).unwrap().is_empty());

    let json = serde_json::to_value(&want[0]).unwrap();
    assert_eq!(
        json,
        serde_json::json!({"path": "add.txt", "change": "added", "added": 3, "removed": 0, "binary": false})
    );
}

/// Text past the chunking threshold (1 MiB) is reassembled from its chunks
/// and counted; past 4 MiB it is not read, and reported binary-style.
#[test]
fn chunked_text_is_counted_and_text_over_4_mib_is_reported_binary() {
    let f = Fixture::new();
    let lines = |n: usize, edit: Option<usize>| -> String {
        (0..n)
            .map(|i| match edit {
                Some(e) if e == i => "edited line\n".to_owned(),
                _ => format!("line {i:07}\n"),
            })
            .collect()
    };
    // ~2 MiB and ~5 MiB of distinct lines.
    f.write("mid.txt", &lines(150_000, None));
    f.write("huge.txt", &lines(400_000, None));
    assert!(fs::metadata(f.root.join("huge.txt")).unwrap().len() > MAX_COUNTED_BYTES);
    let from = f.capture("snap:1").snapshot;
    f.write("mid.txt", &lines(150_000, Some(70_000)));
    f.write("huge.txt", &lines(400_000, Some(1)));
    let to = f.capture("snap:2").snapshot;
    assert_eq!(
        f.ws.diff_stat(&from, &to).unwrap(),
        vec![
            row("huge.txt", ChangeKind::Modified, 0, 0, true),
            row("mid.txt", ChangeKind::Modified, 1, 1, false),
        ]
    );
}

#[test]
fn a_missing_object_is_an_error_not_an_empty_row() {
    let f = Fixture::new();
    f.write("a.txt", "one\n");
    let from = f.capture("snap:1").snapshot;
    f.write("a.txt", "two\n");
    let to = f.capture("snap:2").snapshot;
    let pool = cairn_objects::ObjectPool::at(&f.store);
    let hash = f.ws.manifest(&from).unwrap().entries["a.txt"].hash;
    fs::remove_file(pool.path_of(&hash)).unwrap();
    let e = f.ws.diff_stat(&from, &to).unwrap_err();
    assert!(e.is_integrity(), "{e}");
}

/// A loop of two turns, with a pause inside the second in which the
/// operator edits `notes.md`; returns the fixture and the snapshots at
/// `pre:turn:1` and at the end.
fn paused_story() -> (Fixture, SnapshotId, SnapshotId) {
    let f = Fixture::new();
    f.write("notes.md", "v0\n");
    f.write("code.rs", "fn main() {}\n");
    let t1 = NodeIter::new(node("turn"), 1);
    let pre = f.ws.mark_pre(&t1, &NoProgress).unwrap().pre;
    f.write("code.rs", "fn main() {\n    run();\n}\n");
    f.ws.leave_node(&t1, NodeEnd::Completed, &NoProgress)
        .unwrap();
    let t2 = NodeIter::new(node("turn"), 2);
    f.ws.mark_pre(&t2, &NoProgress).unwrap();
    f.write("made.txt", "by the run\n");
    f.ws.leave_node(&t2, NodeEnd::Paused, &NoProgress).unwrap();
    f.write("notes.md", "v0\nmine\n");
    f.capture("resume:turn:2");
    f.write("made.txt", "by the run\nagain\n");
    let end =
        f.ws.leave_node(&t2, NodeEnd::Completed, &NoProgress)
            .unwrap()
            .snapshot;
    (f, pre, end)
}

#[test]
fn run_diff_stat_leaves_out_the_operators_window_edit_and_diff_stat_has_it() {
    use ChangeKind::*;
    let (f, pre, end) = paused_story();
    let run = vec![
        row("code.rs", Modified, 3, 1, false),
        row("made.txt", Added, 2, 0, false),
    ];
    assert_eq!(f.ws.run_diff_stat(&pre, &end).unwrap(), run);
    let mut all = run.clone();
    all.push(row("notes.md", Modified, 1, 0, false));
    assert_eq!(f.ws.diff_stat(&pre, &end).unwrap(), all);

    // Backwards is no chain from `from` to `to`.
    let e = f.ws.run_diff_stat(&end, &pre).unwrap_err();
    assert!(matches!(e, WorkspaceError::BrokenChain { .. }), "{e}");
}

#[test]
fn a_path_the_run_changed_and_changed_back_is_not_in_the_run_diff_stat() {
    let f = Fixture::new();
    f.write("a.txt", "a\n");
    let exec = node("exec");
    let one = f.ws.enter_node(&exec, &NoProgress).unwrap();
    f.write("a.txt", "temporary\n");
    f.ws.leave_node(&one.at, NodeEnd::Completed, &NoProgress)
        .unwrap();
    let two = f.ws.enter_node(&exec, &NoProgress).unwrap();
    f.write("a.txt", "a\n");
    let end =
        f.ws.leave_node(&two.at, NodeEnd::Completed, &NoProgress)
            .unwrap()
            .snapshot;
    assert!(f.ws.run_diff_stat(&one.pre, &end).unwrap().is_empty());
}

/// The length of the longest common subsequence of two line lists.
fn lcs(a: &[&str], b: &[&str]) -> u64 {
    let mut dp = vec![vec![0u64; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            dp[i][j] = if a[i] == b[j] {
                dp[i + 1][j + 1] + 1
            } else {
                dp[i + 1][j].max(dp[i][j + 1])
            };
        }
    }
    dp[0][0]
}

/// Lines as git counts them: each ends at `\n` or at the end.
fn lines(s: &str) -> Vec<&str> {
    s.split_inclusive('\n').collect()
}

/// Texts of up to 24 lines drawn from a few, so lines repeat and move.
fn text() -> impl Strategy<Value = String> {
    (
        prop::collection::vec(prop::sample::select(vec!["a", "b", "c", "dd", ""]), 0..24),
        any::<bool>(),
    )
        .prop_map(|(ls, eol)| {
            let mut s = ls.join("\n");
            if eol && !s.is_empty() {
                s.push('\n');
            }
            s
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// For small texts the counts are exact: removed is the old line count
    /// minus the longest common subsequence, added the new one's; and no
    /// diff can do better than the line multisets allow.
    #[test]
    fn counts_agree_with_a_naive_model(old in text(), new in text()) {
        let f = Fixture::new();
        f.write("t.txt", &old);
        let from = f.capture("snap:1").snapshot;
        f.write("t.txt", &new);
        let to = f.capture("snap:2").snapshot;
        let rows = f.ws.diff_stat(&from, &to).unwrap();
        let (o, n) = (lines(&old), lines(&new));
        if old == new {
            prop_assert!(rows.is_empty());
            return Ok(());
        }
        prop_assert_eq!(rows.len(), 1);
        let r = &rows[0];
        let common = lcs(&o, &n);
        prop_assert_eq!(r.removed, o.len() as u64 - common);
        prop_assert_eq!(r.added, n.len() as u64 - common);
        prop_assert!(!r.binary);
        // The multiset bound: lines of one side absent from the other.
        let mut pool: Vec<&str> = n.clone();
        let mut shared = 0u64;
        for l in &o {
            if let Some(i) = pool.iter().position(|x| x == l) {
                pool.swap_remove(i);
                shared += 1;
            }
        }
        prop_assert!(r.removed >= o.len() as u64 - shared);
        prop_assert!(r.added >= n.len() as u64 - shared);
    }
}
