//! The ignore rules (DESIGN §5.2) as tables: git's answers where cairn agrees
//! (checked against the real `git check-ignore` when git is installed), the
//! negation cases where cairn deliberately differs, and the allowlist.

mod common;

use std::fs;
use std::path::Path;
use std::process::Command;

use cairn_objects::{Phase, Progress};
use cairn_workspace::*;
use common::*;

/// (rules, path, is_dir, excluded) where cairn's answer must equal git's.
const GIT_ROWS: &[(&str, &str, bool, bool)] = &[
    ("*.log\n", "a.log", false, true),
    ("*.log\n", "dir/a.log", false, true),
    ("*.log\n", "a.log", true, true),
    ("*.log\n", "a.txt", false, false),
    ("*.log\n", "log", false, false),
    ("build/\n", "build", true, true),
    ("build/\n", "build", false, false),
    ("build/\n", "build/x.o", false, true),
    ("build/\n", "build/deep/x.o", false, true),
    ("build/\n", "src/build", true, true),
    ("build/\n", "src/build/y", false, true),
    ("build/\n", "builder", true, false),
    ("/build\n", "build", false, true),
    ("/build\n", "src/build", false, false),
    ("/build\n", "build/x", false, true),
    ("doc/*.txt\n", "doc/a.txt", false, true),
    ("doc/*.txt\n", "doc/sub/a.txt", false, false),
    ("doc/*.txt\n", "a.txt", false, false),
    ("doc/*.txt\n", "x/doc/a.txt", false, false),
    ("**/foo\n", "foo", false, true),
    ("**/foo\n", "a/b/foo", false, true),
    ("**/foo\n", "foo/x", false, true),
    ("**/foo\n", "afoo", false, false),
    ("abc/**\n", "abc", true, false),
    ("abc/**\n", "abc/x", false, true),
    ("abc/**\n", "abc/x/y", false, true),
    ("a/**/b\n", "a/b", false, true),
    ("a/**/b\n", "a/x/b", false, true),
    ("a/**/b\n", "a/x/y/b", false, true),
    ("a/**/b\n", "x/a/b", false, false),
    ("*.txt\n!keep.txt\n", "a.txt", false, true),
    ("*.txt\n!keep.txt\n", "keep.txt", false, false),
    ("*.txt\n!keep.txt\n", "d/keep.txt", false, false),
    ("foo\n", "foo", false, true),
    ("foo\n", "x/foo", true, true),
    ("foo\n", "x/foo/y", false, true),
    ("#comment\n\n\\#hash\n", "#hash", false, true),
    ("#comment\n\n\\#hash\n", "#comment", false, false),
    ("\\!bang\n", "!bang", false, true),
    ("trailing   \n", "trailing", false, true),
    ("*\n!*/\n!*.rs\n", "src", true, false),
    ("*\n!*/\n!*.rs\n", "src/main.rs", false, false),
    ("*\n!*/\n!*.rs\n", "src/notes.md", false, true),
    ("*\n!*/\n!*.rs\n", "README", false, true),
    ("a?c\n[bc]at\n", "abc", false, true),
    ("a?c\n[bc]at\n", "bat", false, true),
    ("a?c\n[bc]at\n", "rat", false, false),
    ("/a/*\n!/a/b\n", "a/b/f", false, false),
    ("/a/*\n!/a/b\n", "a/c/f", false, true),
    ("/a/*\n!/a/b\n", "a/f", false, true),
    ("/a/*\n!/a/b\n", "a/b", true, false),
    ("*.log\n!logs/\n", "logs/a.log", false, true),
    ("*.log\n!logs/\n", "logs", true, false),
    ("x/y/\n", "x/y", true, true),
    ("x/y/\n", "a/x/y", true, false),
    ("x/y/\n", "x/y", false, false),
    ("{a,b}\n", "{a,b}", false, true),
    ("{a,b}\n", "a", false, false),
    ("a**b\n", "axyb", false, true),
    ("out/\n!out/\n", "out/x", false, false),
    // A `!` before the rule that excludes the directory loses to it.
    ("out\n!out/keep\nout/\n", "out/keep", false, true),
    ("!keep.txt\nbuild/\n", "build/keep.txt", false, true),
    (
        "*.log\n!important.log\nlogs/\n",
        "logs/important.log",
        false,
        true,
    ),
    // Under an excluded directory, git names the directory's rule.
    ("*.o\nbuild/\n", "build/x.o", false, true),
    ("build/\n*.o\n", "build/x.o", false, true),
    ("build/\n*.o\n", "build/sub/x.o", false, true),
];

/// (rules, path, is_dir, cairn's answer): a `!` re-including below an
/// excluded directory, which git refuses. Git's answer is the opposite.
const NEGATION_ROWS: &[(&str, &str, bool, bool)] = &[
    (
        "logs/\n!logs/important.log\n",
        "logs/important.log",
        false,
        false,
    ),
    ("build/\n!build/**/*.keep\n", "build/a/b.keep", false, false),
    ("a/\n!a/b/\n", "a/b/c", false, false),
    ("node/\n!*.md\n", "node/x/README.md", false, false),
    ("*.o\nsrc/\n!*.o\n", "src/x.o", false, false),
];

/// (path, excluded) under the allowlist of DESIGN §5.2.
const ALLOWLIST: &str = "runs/**\n!runs/**/exports/*.mp4\nruns/_archived/**\n";
const ALLOWLIST_ROWS: &[(&str, bool)] = &[
    ("runs/a/exports/cut.mp4", false),
    ("runs/a/b/exports/cut.mp4", false),
    ("runs/exports/cut.mp4", false),
    ("runs/a/exports/cut.mov", true),
    ("runs/a/notes.txt", true),
    ("runs/a/exports", true),
    ("runs/_archived/a/exports/cut.mp4", true),
    ("other/exports/cut.mp4", false),
    ("src/main.rs", false),
];

fn rules(text: &str) -> IgnoreRules {
    let opts = IgnoreOptions::default().default_excludes(false);
    IgnoreRules::parse(Some(Path::new(".gitignore")), text.as_bytes(), &opts)
}

/// Git's verdict and deciding rule for one path, in a fresh repository.
fn git_answer(text: &str, path: &str, is_dir: bool) -> Option<(bool, usize, String)> {
    let dir = tempfile::tempdir().unwrap();
    let ok = Command::new("git")
        .args(["init", "-q"])
        .current_dir(dir.path())
        .status()
        .ok()?
        .success();
    if !ok {
        return None;
    }
    fs::write(dir.path().join(".gitignore"), text).unwrap();
    let p = dir.path().join(path);
    if is_dir {
        fs::create_dir_all(&p).unwrap();
    } else {
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(&p, "x").unwrap();
    }
    let out = Command::new("git")
        .args(["check-ignore", "--no-index", "-v", "-n", path])
        .current_dir(dir.path())
        .output()
        .ok()?;
    let line = String::from_utf8(out.stdout).ok()?;
    let (head, _) = line.trim_end_matches('\n').split_once('\t')?;
    if head == "::" {
        return Some((false, 0, String::new()));
    }
    let mut parts = head.splitn(3, ':');
    let _src = parts.next()?;
    let line_no: usize = parts.next()?.parse().ok()?;
    let pattern = parts.next()?.to_owned();
    Some((!pattern.starts_with('!'), line_no, pattern))
}

fn git_available() -> bool {
    Command::new("git").arg("--version").output().is_ok()
}

#[test]
fn agrees_with_git_where_no_negation_reaches_below_an_excluded_directory() {
    let compare = git_available();
    for (i, (text, path, is_dir, want)) in GIT_ROWS.iter().enumerate() {
        let r = rules(text);
        let got = r.check(path, *is_dir);
        let excluded = got.as_ref().is_some_and(|m| m.excluded);
        assert_eq!(excluded, *want, "row {i}: {text:?} {path} (dir: {is_dir})");
        if !compare {
            continue;
        }
        let (git_excluded, line, pattern) = git_answer(text, path, *is_dir)
            .unwrap_or_else(|| panic!("row {i}: git gave no answer"));
        assert_eq!(git_excluded, *want, "row {i}: git disagrees with the table");
        if git_excluded {
            let m = got.unwrap();
            assert_eq!(
                (m.line, m.rule.as_str()),
                (line, pattern.as_str()),
                "row {i}: deciding rule"
            );
        }
    }
}

#[test]
fn a_negation_reincludes_below_an_excluded_directory_unlike_git() {
    for (i, (text, path, is_dir, want)) in NEGATION_ROWS.iter().enumerate() {
        let m = rules(text).check(path, *is_dir).unwrap();
        assert_eq!(m.excluded, *want, "row {i}: {text:?} {path}");
        assert!(m.rule.starts_with('!'), "row {i}: decided by {}", m.rule);
        if git_available() {
            let (git_excluded, ..) = git_answer(text, path, *is_dir).unwrap();
            assert_ne!(
                git_excluded, *want,
                "row {i}: git agrees, so the row proves nothing"
            );
        }
    }
}

#[test]
fn the_allowlist_of_the_design() {
    let r = rules(ALLOWLIST);
    assert!(r.has_negations());
    for (path, want) in ALLOWLIST_ROWS {
        let is_dir = !path.contains('.');
        assert_eq!(r.is_excluded(path, is_dir), *want, "{path}");
    }
    let m = r.check("runs/a/exports/cut.mp4", false).unwrap();
    assert_eq!(
        (m.line, m.rule.as_str(), m.excluded),
        (2, "!runs/**/exports/*.mp4", false)
    );
    // Excluded: the last rule matching it (line 3) is not a `!`. As git does,
    // the rule reported is the one that excluded its directory.
    let m = r.check("runs/_archived/a/exports/cut.mp4", false).unwrap();
    assert_eq!((m.line, m.excluded), (1, true));
    // A `!` written before the rule that excludes the directory loses.
    let r = rules("!*.mp4\nruns/\n");
    assert!(r.is_excluded("runs/a/cut.mp4", false));
    assert!(!r.is_excluded("cut.mp4", false));
}

#[test]
fn unusable_lines_are_warnings_and_the_rest_still_apply() {
    let r = rules("*.log\n[unclosed\n/\n*.tmp\n");
    assert!(r.is_excluded("a.log", false) && r.is_excluded("a.tmp", false));
    let lines: Vec<usize> = r.warnings().iter().map(|w| w.line).collect();
    assert_eq!(lines, vec![2, 3]);
}

#[test]
fn defaults_always_and_precedence_through_check_ignore() {
    let f = Fixture::new();
    f.write(".gitignore", "*.md\n");
    f.write(".cairnignore", "*.tmp\n!target/\n");
    for p in [
        "a.md",
        "a.tmp",
        "node_modules/x/i.js",
        "vendor/x.go",
        "dist/app.js",
        "target/x",
    ] {
        f.write(p, "x");
    }
    let check = |p: &str| f.ws.check_ignore(Path::new(p)).unwrap();
    // .cairnignore wins over .gitignore.
    assert!(check("a.md").is_none());
    let m = check("a.tmp").unwrap();
    assert_eq!(m.source, RuleSource::File(f.root.join(".cairnignore")));
    assert_eq!((m.line, m.rule.as_str(), m.excluded), (1, "*.tmp", true));
    // Defaults: regenerable trees out, vendor/ and dist/ kept; a project can
    // re-include a default.
    let m = check("node_modules/x/i.js").unwrap();
    assert_eq!(
        (m.source, m.rule.as_str(), m.excluded),
        (RuleSource::Default, "node_modules/", true)
    );
    assert!(check("vendor/x.go").is_none());
    assert!(check("dist/app.js").is_none());
    assert!(!check("target/x").unwrap().excluded);
    // Absolute paths inside the root work; outside are refused.
    assert!(
        f.ws.check_ignore(&f.root.join("a.tmp"))
            .unwrap()
            .unwrap()
            .excluded
    );
    assert!(f.ws.check_ignore(Path::new("/etc/passwd")).is_err());
    assert!(f.ws.check_ignore(Path::new("../x")).is_err());
}

#[test]
fn git_and_the_store_are_always_excluded() {
    let opts = IgnoreOptions::default().always_exclude("state/cairn");
    let r = IgnoreRules::parse(None, b"!.git/\n!**\n!*\n", &opts);
    for p in [
        ".git/config",
        "sub/.git",
        "state/cairn/objects/ab/cd",
        ".cairn-tmp-x",
    ] {
        let m = r.check(p, false).unwrap();
        assert_eq!((m.source, m.excluded), (RuleSource::Always, true), "{p}");
        assert!(r.is_always_excluded(p), "{p}");
    }
    assert!(!r.is_excluded("state/other", false));

    // A store inside the workspace is never captured.
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().to_path_buf();
    let store = cairn_store::Store::open(root.join(".state/cairn")).unwrap();
    fs::write(root.join("a.txt"), "a").unwrap();
    let ws = Workspace::open(
        &store,
        &cairn_store::RunId::new(),
        &root,
        CaptureConfig::default(),
    )
    .unwrap();
    let r1 = ws.capture(&label("snap:1"), &NoProgress).unwrap();
    let r2 = ws.capture(&label("snap:2"), &NoProgress).unwrap();
    assert_eq!(r1.files, 1);
    assert!(r2.deduped, "the store's own writes were captured");
    let m = ws
        .check_ignore(Path::new(".state/cairn/store.lock"))
        .unwrap()
        .unwrap();
    assert_eq!(m.source, RuleSource::Always);
}

#[derive(Default)]
struct CountWalk(std::sync::atomic::AtomicU64);

impl Progress for CountWalk {
    fn advance(&self, phase: Phase, items: u64, _bytes: u64) {
        if phase == Phase::Walk {
            self.0
                .fetch_add(items, std::sync::atomic::Ordering::Relaxed);
        }
    }
}

#[test]
fn excluded_directories_are_entered_only_when_a_negation_could_reach_below() {
    let f = Fixture::new();
    for i in 0..50 {
        f.write(&format!("node_modules/pkg/f{i}.js"), "x");
        f.write(&format!("runs/r1/frame{i}.png"), "x");
    }
    f.write("node_modules/pkg/demo.mp4", "video");
    f.write("runs/r1/exports/cut.mp4", "video");
    f.write("src/a.rs", "fn main() {}");

    // An anchored negation under runs/: node_modules is pruned, runs/ walked.
    f.write(".cairnignore", "runs/**\n!runs/**/exports/*.mp4\n");
    let seen = CountWalk::default();
    let r = f.ws.capture(&label("snap:1"), &seen).unwrap();
    let walked_anchored = seen.0.into_inner();
    let captured: Vec<_> =
        f.ws.manifest(&r.snapshot)
            .unwrap()
            .entries
            .into_keys()
            .collect();
    assert_eq!(
        captured,
        vec![".cairnignore", "runs/r1/exports/cut.mp4", "src/a.rs"]
    );
    assert!(
        walked_anchored < 100,
        "node_modules was walked: {walked_anchored} entries"
    );

    // A negation that can match anywhere: every excluded tree is walked
    // (stat only), and what it re-includes is captured.
    f.write(".cairnignore", "runs/**\n!*.mp4\n");
    let seen = CountWalk::default();
    let r = f.ws.capture(&label("snap:2"), &seen).unwrap();
    assert!(seen.0.into_inner() > 100);
    let captured: Vec<_> =
        f.ws.manifest(&r.snapshot)
            .unwrap()
            .entries
            .into_keys()
            .collect();
    assert_eq!(
        captured,
        vec![
            ".cairnignore",
            "node_modules/pkg/demo.mp4",
            "runs/r1/exports/cut.mp4",
            "src/a.rs"
        ]
    );
}

/// A tree with rule files at several depths: (file, content).
const NESTED_TREE: &[(&str, &str)] = &[
    (".gitignore", "*.log\n/build/\nignored_dir/\n"),
    ("sub/.gitignore", "!keep.log\n/local.txt\ncache/\n*.tmp\n"),
    ("sub/deep/.gitignore", "!*.tmp\nsecret/\n"),
    ("other/.gitignore", "*.txt\n"),
    // Never read: its directory is excluded (git does not read it either).
    ("ignored_dir/.gitignore", "!*.log\n"),
    ("we[ird]/.gitignore", "*.bin\n/top\n"),
];

/// Files in the same tree, each checked against git.
const NESTED_PATHS: &[&str] = &[
    "a.log",
    "sub/a.log",
    "sub/keep.log",
    "sub/deep/keep.log",
    "sub/local.txt",
    "sub/deep/local.txt",
    "local.txt",
    "sub/cache/x",
    "cache/x",
    "sub/x.tmp",
    "sub/deep/x.tmp",
    "sub/deep/secret/y",
    "other/a.txt",
    "a.txt",
    "ignored_dir/a.log",
    "build/x",
    "sub/build/x",
    "we[ird]/a.bin",
    "we[ird]/top",
    "we[ird]/d/top",
    "a.bin",
];

/// Makes `root` a git repository (git must be installed).
fn git_init(root: &Path) {
    let ok = Command::new("git")
        .args(["init", "-q"])
        .current_dir(root)
        .status()
        .is_ok_and(|s| s.success());
    assert!(ok, "git init failed in {}", root.display());
}

fn nested_fixture() -> Fixture {
    let f = Fixture::new();
    for (p, text) in NESTED_TREE {
        f.write(p, text);
    }
    for p in NESTED_PATHS {
        f.write(p, "x");
    }
    f
}

/// Git's `check-ignore -v -n` answers for `paths` in the repository at `root`:
/// path -> (source, line, pattern), `None` when no rule matched.
fn git_answers(root: &Path, paths: &[&str]) -> Option<Vec<Option<(String, usize, String)>>> {
    let out = Command::new("git")
        .args(["check-ignore", "--no-index", "-v", "-n"])
        .args(paths)
        .current_dir(root)
        .output()
        .ok()?;
    let text = String::from_utf8(out.stdout).ok()?;
    let answers: Vec<_> = text
        .lines()
        .map(|l| {
            let (head, _) = l.split_once('\t')?;
            if head == "::" {
                return None;
            }
            let mut parts = head.splitn(3, ':');
            let src = parts.next()?.to_owned();
            let line = parts.next()?.parse().ok()?;
            Some((src, line, parts.next()?.to_owned()))
        })
        .collect();
    (answers.len() == paths.len()).then_some(answers)
}

#[test]
fn nested_rule_files_are_read_as_git_reads_them() {
    let f = nested_fixture();
    let opts = IgnoreOptions::default().default_excludes(false);
    let r = IgnoreRules::load(&f.root, &opts).unwrap();
    let ours: Vec<Option<(String, usize, String, bool)>> = NESTED_PATHS
        .iter()
        .map(|p| {
            r.check(p, false).map(|m| {
                let RuleSource::File(src) = &m.source else {
                    panic!("{p}: decided by {:?}", m.source)
                };
                let src = src
                    .strip_prefix(&f.root)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                (src, m.line, m.rule, m.excluded)
            })
        })
        .collect();
    // The table, independent of git.
    let excluded: Vec<&str> = NESTED_PATHS
        .iter()
        .zip(&ours)
        .filter(|(_, m)| m.as_ref().is_some_and(|m| m.3))
        .map(|(p, _)| *p)
        .collect();
    assert_eq!(
        excluded,
        vec![
            "a.log",
            "sub/a.log",
            "sub/local.txt",
            "sub/cache/x",
            "sub/x.tmp",
            "sub/deep/secret/y",
            "other/a.txt",
            "ignored_dir/a.log",
            "build/x",
            "we[ird]/a.bin",
            "we[ird]/top",
        ]
    );
    let keep = ours[2].as_ref().unwrap();
    assert_eq!(
        (keep.0.as_str(), keep.1, keep.2.as_str(), keep.3),
        ("sub/.gitignore", 1, "!keep.log", false)
    );

    if !git_available() {
        return;
    }
    git_init(&f.root);
    let theirs = git_answers(&f.root, NESTED_PATHS).expect("git check-ignore answered");
    for ((p, o), t) in NESTED_PATHS.iter().zip(&ours).zip(&theirs) {
        let o = o.as_ref().map(|(s, l, r, _)| (s.clone(), *l, r.clone()));
        assert_eq!(&o, t, "{p}: cairn (left) and git (right) disagree");
    }
}

#[test]
fn a_capture_takes_what_git_would_track_under_nested_rule_files() {
    let f = nested_fixture();
    let r = f.capture("snap:1");
    let m = f.ws.manifest(&r.snapshot).unwrap();
    let mut ours: Vec<String> = m.entries.keys().cloned().collect();
    ours.sort();
    assert!(ours.contains(&"sub/keep.log".to_owned()));
    assert!(ours.contains(&"sub/deep/x.tmp".to_owned()));
    assert!(!ours.contains(&"sub/x.tmp".to_owned()));
    assert!(!ours.contains(&"ignored_dir/a.log".to_owned()));
    assert!(ours.contains(&"sub/.gitignore".to_owned()));
    // The same verdicts through `check_ignore`, from the workspace.
    let m =
        f.ws.check_ignore(Path::new("sub/deep/secret/y"))
            .unwrap()
            .unwrap();
    assert_eq!(
        m.source,
        RuleSource::File(f.root.join("sub/deep/.gitignore"))
    );

    if !git_available() {
        return;
    }
    git_init(&f.root);
    let out = Command::new("git")
        .args(["ls-files", "--others", "--exclude-standard", "-z"])
        .current_dir(&f.root)
        .output()
        .unwrap();
    let mut theirs: Vec<String> = String::from_utf8(out.stdout)
        .unwrap()
        .split('\0')
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
        .collect();
    theirs.sort();
    assert_eq!(
        ours, theirs,
        "captured (left) vs what git would track (right)"
    );
}
