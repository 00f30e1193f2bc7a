//! The path-safety rules of `Workspace::resolve`, as a table.

use std::fs;
use std::os::unix::fs::symlink;

use cairn_tools::{Access, PathError, ToolError, Workspace};

/// A short name for each refusal, so rows stay one line.
fn kind(result: &Result<std::path::PathBuf, PathError>) -> &'static str {
    match result {
        Ok(_) => "ok",
        Err(PathError::Empty { .. }) => "empty",
        Err(PathError::Nul { .. }) => "nul",
        Err(PathError::Absolute { .. }) => "absolute",
        Err(PathError::ParentComponent { .. }) => "parent",
        Err(PathError::Symlink { .. }) => "symlink",
        Err(PathError::Escapes { .. }) => "escapes",
        Err(PathError::NotFound { .. }) => "not-found",
        Err(PathError::NotADirectory { .. }) => "not-a-dir",
        Err(PathError::IsADirectory { .. }) => "is-a-dir",
        Err(PathError::Io { .. }) => "io",
        Err(PathError::Git { .. }) => "git",
        Err(PathError::Protected { .. }) => "protected",
        Err(_) => "other",
    }
}

struct Fixture {
    ws: Workspace,
    _dirs: (tempfile::TempDir, tempfile::TempDir),
}

fn fixture() -> Fixture {
    let inside = tempfile::tempdir().expect("tempdir");
    let outside = tempfile::tempdir().expect("tempdir");
    let root = inside.path();
    fs::write(root.join("file.txt"), "inside").expect("write");
    fs::create_dir(root.join("dir")).expect("mkdir");
    fs::write(root.join("dir/inner.txt"), "inner").expect("write");
    fs::write(outside.path().join("secret.txt"), "secret").expect("write");
    symlink(outside.path().join("secret.txt"), root.join("link_out")).expect("symlink");
    symlink(outside.path(), root.join("link_out_dir")).expect("symlink");
    symlink(root.join("dir"), root.join("link_dir")).expect("symlink");
    symlink("file.txt", root.join("link_in")).expect("symlink");
    symlink("nowhere", root.join("dangling")).expect("symlink");
    fs::create_dir_all(root.join("store/runs")).expect("mkdir");
    let ws = Workspace::new(root)
        .expect("workspace")
        .protect(root.join("store"))
        .expect("protect");
    Fixture {
        ws,
        _dirs: (inside, outside),
    }
}

#[test]
fn resolve_applies_the_rules() {
    use Access::{Read as R, Write as W};
    let f = fixture();
    #[rustfmt::skip]
    let rows: &[(&str, Access, &str)] = &[
        // Plain paths.
        ("file.txt",              R, "ok"),
        ("file.txt",              W, "ok"),
        ("dir/inner.txt",         R, "ok"),
        ("./dir//inner.txt",      R, "ok"),
        ("dir/",                  R, "ok"),
        ("new.txt",               W, "ok"),
        ("new/deep/file.txt",     W, "ok"),
        ("dir/new/file.txt",      W, "ok"),
        ("missing.txt",           R, "not-found"),
        ("missing/deeper.txt",    R, "not-found"),
        // Leaving the workspace by `..`.
        ("..",                    R, "parent"),
        ("../x",                  W, "parent"),
        ("a/../../x",             W, "parent"),
        ("dir/../file.txt",       R, "parent"),
        ("dir/..",                R, "parent"),
        ("..\\x",                 W, "parent"),
        // Absolute paths.
        ("/etc/passwd",           R, "absolute"),
        ("/",                     R, "absolute"),
        ("//etc/passwd",          R, "absolute"),
        ("~/x",                   R, "absolute"),
        ("~",                     W, "absolute"),
        ("C:\\x",                 R, "absolute"),
        ("c:x",                   W, "absolute"),
        ("\\x",                   R, "absolute"),
        // Empty and NUL.
        ("",                      R, "empty"),
        (".",                     R, "empty"),
        ("./",                    W, "empty"),
        ("a\0b",                  R, "nul"),
        ("file.txt\0",            W, "nul"),
        // Symlinks anywhere on the path, wherever they point.
        ("link_out",              R, "symlink"),
        ("link_out",              W, "symlink"),
        ("link_out_dir/x",        W, "symlink"),
        ("link_dir/inner.txt",    R, "symlink"),
        ("link_dir/new.txt",      W, "symlink"),
        ("link_in",               R, "symlink"),
        ("link_in",               W, "symlink"),
        ("dangling",              R, "symlink"),
        ("dangling",              W, "symlink"),
        // Shape errors.
        ("file.txt/x",            R, "not-a-dir"),
        ("file.txt/x",            W, "not-a-dir"),
        ("dir",                   W, "is-a-dir"),
        ("dir",                   R, "ok"),
        // Never into .git, in any case, at any depth.
        (".git/hooks/pre-commit", W, "git"),
        (".GIT/config",           R, "git"),
        ("dir/.Git/x",            W, "git"),
        ("new/.git",              W, "git"),
        (".gitignore",            W, "ok"),
        (".github/workflows/x",   W, "ok"),
        // Never into a protected directory, nor naming it.
        ("store",                 R, "protected"),
        ("store/x",               W, "protected"),
        ("store/runs/journal",    W, "protected"),
        ("store/new/x",           W, "protected"),
        ("store",                 W, "is-a-dir"),
        ("storage/x",             W, "ok"),
    ];
    for (rel, access, want) in rows {
        let got = f.ws.resolve(rel, *access);
        assert_eq!(kind(&got), *want, "resolve({rel:?}, {access:?}) = {got:?}");
        if let Ok(path) = got {
            assert!(path.starts_with(f.ws.root()), "{rel:?} -> {path:?}");
        }
    }
}

#[test]
fn resolved_paths_are_the_root_joined_with_the_normal_components() {
    let f = fixture();
    let got =
        f.ws.resolve("./dir//inner.txt", Access::Read)
            .expect("resolves");
    assert_eq!(got, f.ws.root().join("dir").join("inner.txt"));
}

#[test]
fn resolve_dir_takes_empty_and_dot_as_the_root() {
    let f = fixture();
    for rel in ["", ".", "./"] {
        assert_eq!(f.ws.resolve_dir(rel).expect("root"), f.ws.root());
    }
    assert_eq!(kind(&f.ws.resolve_dir("dir")), "ok");
    assert_eq!(kind(&f.ws.resolve_dir("..")), "parent");
    assert_eq!(kind(&f.ws.resolve_dir("link_dir")), "symlink");
    assert_eq!(kind(&f.ws.resolve_dir("/tmp")), "absolute");
    assert_eq!(kind(&f.ws.resolve_dir("store/runs")), "protected");
}

#[test]
fn messages_say_what_was_wrong_and_what_to_do() {
    let f = fixture();
    let message = |rel, access| match f.ws.resolve(rel, access) {
        Err(e) => e.to_string(),
        Ok(path) => panic!("{rel} resolved to {path:?}"),
    };
    assert_eq!(
        message("../x", Access::Read),
        "path `../x` leaves the workspace: use a path relative to the workspace root without `..`"
    );
    assert!(message("/etc/passwd", Access::Read).contains("is absolute: use a path relative"));
    let link = message("link_dir/inner.txt", Access::Read);
    assert!(link.contains("symbolic link `link_dir`"), "{link}");
    assert!(message("missing.txt", Access::Read).contains("does not exist"));
}

#[test]
fn workspace_root_must_be_an_existing_directory() {
    let dir = tempfile::tempdir().expect("tempdir");
    let file = dir.path().join("f");
    fs::write(&file, "x").expect("write");
    for root in [dir.path().join("missing"), file] {
        let err = Workspace::new(&root).expect_err("refused");
        assert!(matches!(err, ToolError::WorkspaceRoot { .. }), "{err:?}");
        assert!(
            err.to_string().contains("pass an existing directory"),
            "{err}"
        );
    }
}

#[test]
fn workspace_root_is_canonical_even_through_a_symlink() {
    let dir = tempfile::tempdir().expect("tempdir");
    fs::create_dir(dir.path().join("real")).expect("mkdir");
    symlink(dir.path().join("real"), dir.path().join("alias")).expect("symlink");
    let ws = Workspace::new(dir.path().join("alias")).expect("workspace");
    let real = fs::canonicalize(dir.path().join("real")).expect("canonical");
    assert_eq!(ws.root(), real);
    assert_eq!(kind(&ws.resolve("x", Access::Write)), "ok");
}
