//! Names the commit the binary was built from, for `cairn --version`:
//! `CAIRN_COMMIT` is the short hash of HEAD, or `unknown` when the source
//! is not a git checkout (`cargo install` from a tarball) or git is not
//! installed. Never fails the build.

use std::path::PathBuf;
use std::process::Command;

fn git(args: &[&str]) -> Option<String> {
    let out = Command::new("git").args(args).output().ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let text = text.trim();
    (!text.is_empty()).then(|| text.to_owned())
}

fn main() {
    println!("cargo:rerun-if-env-changed=CAIRN_COMMIT");
    let commit = std::env::var("CAIRN_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| git(&["rev-parse", "--short=12", "HEAD"]))
        .unwrap_or_else(|| "unknown".to_owned());
    // Built again when HEAD moves (a commit, a checkout): its reflog
    // changes with every move, in a linked worktree too.
    if let Some(dir) = git(&["rev-parse", "--absolute-git-dir"]) {
        let dir = PathBuf::from(dir);
        for f in ["HEAD", "logs/HEAD"] {
            if dir.join(f).exists() {
                println!("cargo:rerun-if-changed={}", dir.join(f).display());
            }
        }
    }
    println!("cargo:rustc-env=CAIRN_COMMIT={commit}");
}
