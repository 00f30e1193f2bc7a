//! Which repository a directory belongs to: the git top-level when inside a git
//! work tree, else the directory itself. Found by looking for `.git` upwards, so
//! no `git` process is needed.

use std::path::{Path, PathBuf};

/// The repository root of `dir` (made absolute and canonical when possible).
pub fn repository_root(dir: &Path) -> PathBuf {
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    let mut cur: Option<&Path> = Some(&dir);
    while let Some(d) = cur {
        // `.git` is a directory in a checkout and a file in a linked worktree.
        if d.join(".git").exists() {
            return d.to_path_buf();
        }
        cur = d.parent();
    }
    dir
}

/// Whether a session whose workspace is `workspace` belongs to the repository
/// at `root` (the root itself or any directory below it).
pub fn in_repository(workspace: &str, root: &Path) -> bool {
    Path::new(workspace).starts_with(root)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_git_top_level_from_a_subdirectory() {
        let d = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(d.path()).unwrap();
        std::fs::create_dir_all(root.join("repo/.git")).unwrap();
        std::fs::create_dir_all(root.join("repo/a/b")).unwrap();
        std::fs::create_dir_all(root.join("plain/x")).unwrap();
        assert_eq!(repository_root(&root.join("repo/a/b")), root.join("repo"));
        assert_eq!(repository_root(&root.join("plain/x")), root.join("plain/x"));
        assert!(in_repository(
            root.join("repo/a").to_str().unwrap(),
            &root.join("repo")
        ));
        assert!(!in_repository(
            root.join("repo2").to_str().unwrap(),
            &root.join("repo")
        ));
    }
}
