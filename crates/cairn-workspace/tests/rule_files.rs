//! Reading rule files: one reader for the root's file and the nested ones
//! (no symlink followed, no FIFO waited on, regular files only, a size cap),
//! a byte-order mark dropped, and a rule that cannot be compiled reported
//! while the others still apply.

mod common;

use std::fs;
use std::path::Path;
use std::time::Duration;

use cairn_workspace::*;
use common::*;

fn no_defaults() -> IgnoreOptions {
    IgnoreOptions::default().default_excludes(false)
}

#[test]
fn a_rule_file_that_is_a_directory_is_no_rule_file_at_the_root_or_below() {
    let f = Fixture::new();
    fs::create_dir_all(f.root.join(".gitignore")).unwrap();
    f.write(".gitignore/inner", "x");
    fs::create_dir_all(f.root.join("sub/.gitignore")).unwrap();
    f.write("a.log", "x");
    // check-ignore and a capture both work, as git's do.
    assert!(f.ws.check_ignore(Path::new("a.log")).unwrap().is_none());
    let r = f.capture("snap:1");
    assert!(r.warnings.is_empty(), "{:?}", r.warnings);
    assert_eq!(r.files, 2, "a.log and .gitignore/inner");
    // A `.cairnignore` directory falls back to `.gitignore`.
    let f = Fixture::new();
    fs::create_dir_all(f.root.join(".cairnignore")).unwrap();
    f.write(".gitignore", "*.log\n");
    let rules = IgnoreRules::load(&f.root, &no_defaults()).unwrap();
    assert_eq!(rules.file(), Some(f.root.join(".gitignore").as_path()));
    assert!(rules.is_excluded("a.log", false));
}

#[test]
fn a_fifo_rule_file_is_a_warning_and_never_blocks_a_capture() {
    let f = Fixture::new();
    f.write("sub/x.txt", "x");
    for p in [".gitignore", "sub/.gitignore"] {
        let c = std::ffi::CString::new(f.root.join(p).to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
    }
    // On a thread, so that a capture blocked on the FIFO fails the test
    // instead of hanging it.
    let ws = f.ws.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(ws.capture(&label("snap:1"), &NoProgress));
    });
    let r = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("the capture blocked on a FIFO rule file")
        .unwrap();
    assert_eq!(r.files, 1);
    assert_eq!(r.warnings.len(), 2, "{:?}", r.warnings);
    assert!(r.warnings.iter().all(|w| w.contains("not a regular file")));
    assert!(f.ws.check_ignore(Path::new("sub/x.txt")).unwrap().is_none());
}

#[test]
fn a_symlinked_rule_file_is_not_followed_anywhere_and_says_so() {
    let f = Fixture::new();
    let elsewhere = f.dir.path().join("rules");
    fs::write(&elsewhere, "*.txt\n").unwrap();
    std::os::unix::fs::symlink(&elsewhere, f.root.join(".gitignore")).unwrap();
    std::os::unix::fs::symlink(&elsewhere, {
        fs::create_dir(f.root.join("sub")).unwrap();
        f.root.join("sub/.gitignore")
    })
    .unwrap();
    f.write("a.txt", "a");
    f.write("sub/b.txt", "b");
    let rules = IgnoreRules::load(&f.root, &no_defaults()).unwrap();
    assert!(!rules.is_excluded("a.txt", false));
    assert!(!rules.is_excluded("sub/b.txt", false));
    let r = f.capture("snap:1");
    let m = f.ws.manifest(&r.snapshot).unwrap();
    assert!(m.entries.contains_key("a.txt") && m.entries.contains_key("sub/b.txt"));
    assert_eq!(r.warnings.len(), 2, "{:?}", r.warnings);
    assert!(r.warnings.iter().all(|w| w.contains("symbolic link")));
}

#[test]
fn an_oversized_root_rule_file_is_an_error_and_a_nested_one_a_warning() {
    let f = Fixture::new();
    let big = "# padding\n".repeat((4 << 20) / 10 + 1);
    f.write("sub/.gitignore", &big);
    f.write("sub/a.txt", "a");
    let r = f.capture("snap:1");
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(r.warnings[0].contains("limit"), "{}", r.warnings[0]);
    f.write(".gitignore", &big);
    let e = f.ws.capture(&label("snap:2"), &NoProgress).unwrap_err();
    assert!(matches!(e, WorkspaceError::IgnoreFile { .. }), "{e}");
    assert!(e.to_string().contains("limit"), "{e}");
}

#[test]
fn a_byte_order_mark_before_the_first_rule_is_dropped() {
    let f = Fixture::new();
    fs::write(f.root.join(".gitignore"), b"\xEF\xBB\xBF*.log\nbuild/\n").unwrap();
    fs::create_dir(f.root.join("sub")).unwrap();
    fs::write(f.root.join("sub/.gitignore"), b"\xEF\xBB\xBF*.tmp\n").unwrap();
    let rules = IgnoreRules::load(&f.root, &no_defaults()).unwrap();
    let m = rules.check("a.log", false).unwrap();
    assert_eq!((m.line, m.rule.as_str(), m.excluded), (1, "*.log", true));
    assert!(rules.is_excluded("sub/x.tmp", false));
    assert!(rules.warnings().is_empty(), "{:?}", rules.warnings());
    // git agrees, where it is installed.
    let git = std::process::Command::new("git")
        .args(["check-ignore", "--no-index", "-v", "a.log", "sub/x.tmp"])
        .current_dir(&f.root)
        .output();
    if let Ok(out) = git {
        if out.status.code() == Some(0) {
            let text = String::from_utf8_lossy(&out.stdout);
            assert!(text.contains(".gitignore:1:*.log\ta.log"), "{text}");
            assert!(text.contains("sub/.gitignore:1:*.tmp\tsub/x.tmp"), "{text}");
        }
    }
}

#[test]
fn a_rule_that_cannot_be_compiled_is_reported_and_the_others_still_apply() {
    // A glob whose regex is over globset's size limit: it parses, but no
    // set holding it compiles.
    let huge = "*a".repeat(100_000);
    let text = format!("*.log\n{huge}\n!keep.log\nbuild/\n");
    let src = Path::new("/ws/.gitignore");
    let r = IgnoreRules::parse(Some(src), text.as_bytes(), &no_defaults());
    let w = r.warnings();
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!((w[0].source.as_path(), w[0].line), (src, 2));
    assert!(
        w[0].reason.contains("cannot be compiled"),
        "{}",
        w[0].reason
    );
    assert!(r.is_excluded("a.log", false));
    assert!(!r.is_excluded("keep.log", false));
    assert!(r.is_excluded("build/x", false));
    let m = r.check("build/x", false).unwrap();
    assert_eq!((m.line, m.rule.as_str()), (4, "build/"));

    // The same in a nested file met by a capture.
    let f = Fixture::new();
    f.write("sub/.gitignore", &format!("{huge}\n*.tmp\n"));
    f.write("sub/x.tmp", "x");
    f.write("sub/y.txt", "y");
    let c = f.capture("snap:1");
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    assert!(c.warnings[0].contains(":1:"), "{}", c.warnings[0]);
    let m = f.ws.manifest(&c.snapshot).unwrap();
    assert!(!m.entries.contains_key("sub/x.tmp"));
    assert!(m.entries.contains_key("sub/y.txt"));
}
