//! What the file tools never touch: `.git` (any component, any case) and the directories
//! the workspace was told to protect (cairn's store).

use std::fs;
use std::path::Path;

use cairn_tools::{Outcome, ToolConfig, Toolbox, Workspace};
use serde_json::json;

/// Every file under `root`, with its content.
fn files(root: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in fs::read_dir(&dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let rel = path
                    .strip_prefix(root)
                    .expect("below")
                    .display()
                    .to_string();
                out.push((rel, fs::read_to_string(&path).unwrap_or_default()));
            }
        }
    }
    out.sort();
    out
}

#[tokio::test]
async fn writes_into_git_are_refused_in_any_case_and_at_any_depth() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    fs::create_dir_all(root.join(".git/hooks")).expect("mkdir");
    fs::write(root.join(".git/config"), "[core]\n").expect("write");
    fs::create_dir_all(root.join("sub/.git")).expect("mkdir");
    let before = files(root);
    let ws = Workspace::new(root).expect("workspace");
    let tools = Toolbox::builtin(ToolConfig::default());
    for path in [
        ".git/hooks/pre-commit",
        ".GIT/config",
        ".Git/x",
        "sub/.git/x",
        "./.git/config",
        "new/.git/hooks/post-checkout",
    ] {
        let out = tools
            .call(
                &ws,
                "write_file",
                &json!({"path": path, "content": "#!/bin/sh\nevil\n"}),
            )
            .await;
        assert_eq!(out.outcome, Outcome::Error, "{path}: {}", out.output);
        assert!(
            out.output.contains("inside `.git`"),
            "{path}: {}",
            out.output
        );
        let out = tools
            .call(
                &ws,
                "edit_file",
                &json!({"path": path, "old": "[core]", "new": "x"}),
            )
            .await;
        assert_eq!(out.outcome, Outcome::Error, "{path}: {}", out.output);
    }
    let out = tools
        .call(&ws, "read_file", &json!({"path": ".git/config"}))
        .await;
    assert_eq!(out.outcome, Outcome::Error, "{}", out.output);
    assert_eq!(files(root), before, "something was written");
    assert!(!root.join("new").exists(), "a parent directory was created");
}

#[tokio::test]
async fn a_protected_directory_is_refused_by_identity_even_renamed() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path();
    fs::create_dir_all(root.join("store/runs")).expect("mkdir");
    fs::write(root.join("store/runs/journal"), "record\n").expect("write");
    fs::write(root.join("work.txt"), "record\n").expect("write");
    let ws = Workspace::new(root)
        .expect("workspace")
        .protect(root.join("store"))
        .expect("protect");
    let tools = Toolbox::builtin(ToolConfig::default());
    let before = files(&root.join("store"));

    for (tool, args) in [
        ("write_file", json!({"path": "store/x", "content": "x"})),
        (
            "write_file",
            json!({"path": "store/runs/journal", "content": "x"}),
        ),
        (
            "write_file",
            json!({"path": "store/new/dir/x", "content": "x"}),
        ),
        (
            "edit_file",
            json!({"path": "store/runs/journal", "old": "record", "new": "x"}),
        ),
        ("read_file", json!({"path": "store/runs/journal"})),
        ("list_dir", json!({"path": "store"})),
        ("list_dir", json!({"path": "store/runs"})),
        ("search", json!({"pattern": "record", "path": "store"})),
    ] {
        let out = tools.call(&ws, tool, &args).await;
        assert_eq!(out.outcome, Outcome::Error, "{tool} {args}: {}", out.output);
        assert!(
            out.output.contains("protected directory `store`"),
            "{tool} {args}: {}",
            out.output
        );
    }
    // search of the whole workspace leaves it out, and says nothing of its content.
    let out = tools
        .call(&ws, "search", &json!({"pattern": "record", "path": ""}))
        .await;
    assert_eq!(out.output, "work.txt:1: record\n");

    // The directory is known by identity, not by name.
    fs::rename(root.join("store"), root.join("renamed")).expect("rename");
    let out = tools
        .call(
            &ws,
            "write_file",
            &json!({"path": "renamed/runs/x", "content": "x"}),
        )
        .await;
    assert_eq!(out.outcome, Outcome::Error, "{}", out.output);
    assert!(
        out.output.contains("protected directory `renamed`"),
        "{}",
        out.output
    );
    assert_eq!(files(&root.join("renamed")), before, "the store changed");

    // The rest of the workspace is as usable as before.
    let out = tools
        .call(
            &ws,
            "write_file",
            &json!({"path": "storage/x", "content": "x"}),
        )
        .await;
    assert_eq!(out.outcome, Outcome::Ok, "{}", out.output);
}

#[test]
fn protecting_a_missing_directory_is_a_no_op_and_the_root_cannot_be_inside_one() {
    let dir = tempfile::tempdir().expect("tempdir");
    let root = dir.path().join("ws");
    fs::create_dir(&root).expect("mkdir");
    let ws = Workspace::new(&root)
        .expect("workspace")
        .protect(dir.path().join("not-yet"))
        .expect("a missing directory protects nothing");
    assert_eq!(ws.root(), fs::canonicalize(&root).expect("canonical"));
    for protected in [dir.path().to_path_buf(), root.clone()] {
        let err = Workspace::new(&root)
            .expect("workspace")
            .protect(&protected)
            .expect_err("the workspace is inside it");
        assert!(
            err.to_string()
                .contains("is inside a directory the tools must never touch"),
            "{err}"
        );
    }
}
