//! read_file, write_file, edit_file, list_dir, search and the toolbox around them.

use std::fs;
use std::os::unix::fs::{symlink, PermissionsExt};
use std::path::Path;

use cairn_tools::{Outcome, ToolConfig, Toolbox, Workspace};
use serde_json::{json, Value};

struct Env {
    dir: tempfile::TempDir,
    ws: Workspace,
    tools: Toolbox,
}

fn env_with(config: ToolConfig) -> Env {
    let dir = tempfile::tempdir().expect("tempdir");
    let ws = Workspace::new(dir.path()).expect("workspace");
    Env {
        dir,
        ws,
        tools: Toolbox::builtin(config),
    }
}

fn env() -> Env {
    env_with(ToolConfig::default())
}

impl Env {
    fn root(&self) -> &Path {
        self.dir.path()
    }

    fn put(&self, rel: &str, content: &str) {
        let path = self.root().join(rel);
        if let Some(parent) = path.parent() {
            fs::create_dir_all(parent).expect("mkdir");
        }
        fs::write(path, content).expect("write");
    }

    fn get(&self, rel: &str) -> String {
        fs::read_to_string(self.root().join(rel)).expect("read")
    }

    async fn ok(&self, tool: &str, args: Value) -> String {
        let out = self.tools.call(&self.ws, tool, &args).await;
        assert_eq!(out.outcome, Outcome::Ok, "{tool} {args}: {}", out.output);
        out.output
    }

    async fn err(&self, tool: &str, args: Value) -> String {
        let out = self.tools.call(&self.ws, tool, &args).await;
        assert_eq!(out.outcome, Outcome::Error, "{tool} {args}: {}", out.output);
        out.output
    }
}

// ---- read_file ----

#[tokio::test]
async fn read_file_returns_the_text() {
    let e = env();
    e.put("src/a.rs", "fn main() {}\n");
    assert_eq!(
        e.ok("read_file", json!({"path": "src/a.rs"})).await,
        "fn main() {}\n"
    );
}

#[tokio::test]
async fn read_file_replaces_invalid_utf8() {
    let e = env();
    fs::write(e.root().join("bin"), [b'a', 0xFF, b'b']).expect("write");
    assert_eq!(
        e.ok("read_file", json!({"path": "bin"})).await,
        "a\u{FFFD}b"
    );
}

#[tokio::test]
async fn read_file_caps_and_says_how_much_was_omitted() {
    let e = env_with(ToolConfig {
        max_read_bytes: 10,
        ..ToolConfig::default()
    });
    e.put("big.txt", &"x".repeat(25));
    let out = e.ok("read_file", json!({"path": "big.txt"})).await;
    assert!(out.starts_with("xxxxxxxxxx\n[… 15 bytes omitted"), "{out}");
    assert!(out.contains("is 25 bytes"), "{out}");
}

#[tokio::test]
async fn read_file_errors() {
    let e = env();
    e.put("dir/f", "");
    assert!(e
        .err("read_file", json!({"path": "nope.txt"}))
        .await
        .contains("`nope.txt` does not exist"));
    assert!(e
        .err("read_file", json!({"path": "dir"}))
        .await
        .contains("is a directory: use list_dir"));
    assert!(e
        .err("read_file", json!({"path": "../x"}))
        .await
        .contains("leaves the workspace"));
    let missing = e.err("read_file", json!({})).await;
    assert!(
        missing.contains("invalid arguments for `read_file`: missing field `path`"),
        "{missing}"
    );
    assert!(
        missing.contains(r#"expected {"path": string}"#),
        "{missing}"
    );
    let not_object = e.err("read_file", json!("a.txt")).await;
    assert!(
        not_object.contains("must be a JSON object, got a string"),
        "{not_object}"
    );
    let wrong_type = e.err("read_file", json!({"path": 3})).await;
    assert!(wrong_type.contains("invalid type"), "{wrong_type}");
}

// ---- write_file ----

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(dir)
        .expect("read_dir")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    names
}

#[tokio::test]
async fn write_file_creates_parents_and_reports_bytes() {
    let e = env();
    let out = e
        .ok(
            "write_file",
            json!({"path": "a/b/c.txt", "content": "héllo"}),
        )
        .await;
    assert_eq!(out, "wrote 6 bytes to `a/b/c.txt`");
    assert_eq!(e.get("a/b/c.txt"), "héllo");
}

#[tokio::test]
async fn write_file_replaces_and_leaves_no_temporary_files() {
    let e = env();
    for i in 0..5 {
        e.ok(
            "write_file",
            json!({"path": "d/f.txt", "content": format!("v{i}")}),
        )
        .await;
    }
    e.ok("write_file", json!({"path": "d/g.txt", "content": ""}))
        .await;
    assert_eq!(e.get("d/f.txt"), "v4");
    assert_eq!(entries(&e.root().join("d")), ["f.txt", "g.txt"]);
}

#[tokio::test]
async fn write_file_keeps_the_permissions_of_the_file_it_replaces() {
    let e = env();
    e.put("run.sh", "old");
    let path = e.root().join("run.sh");
    fs::set_permissions(&path, fs::Permissions::from_mode(0o755)).expect("chmod");
    e.ok("write_file", json!({"path": "run.sh", "content": "new"}))
        .await;
    let mode = fs::metadata(&path).expect("meta").permissions().mode();
    assert_eq!(mode & 0o777, 0o755);
}

#[tokio::test]
async fn write_file_gives_a_new_file_the_usual_permissions() {
    let e = env();
    // A file made the ordinary way: 0666 less the umask.
    e.put("reference", "");
    e.ok("write_file", json!({"path": "new.txt", "content": "x"}))
        .await;
    let mode = |rel| {
        fs::metadata(e.root().join(rel))
            .expect("meta")
            .permissions()
            .mode()
            & 0o7777
    };
    assert_eq!(mode("new.txt"), mode("reference"));
}

#[tokio::test]
async fn write_file_refuses_a_symlink_and_leaves_its_target_alone() {
    let e = env();
    let outside = tempfile::tempdir().expect("tempdir");
    let target = outside.path().join("target.txt");
    fs::write(&target, "original").expect("write");
    symlink(&target, e.root().join("link.txt")).expect("symlink");
    e.put("real/f.txt", "inside");
    symlink(e.root().join("real"), e.root().join("alias")).expect("symlink");

    let out = e
        .err(
            "write_file",
            json!({"path": "link.txt", "content": "pwned"}),
        )
        .await;
    assert!(out.contains("symbolic link `link.txt`"), "{out}");
    assert_eq!(fs::read_to_string(&target).expect("read"), "original");
    assert!(fs::symlink_metadata(e.root().join("link.txt"))
        .expect("meta")
        .file_type()
        .is_symlink());

    e.err("write_file", json!({"path": "alias/f.txt", "content": "x"}))
        .await;
    assert_eq!(e.get("real/f.txt"), "inside");
    assert_eq!(entries(e.root()), ["alias", "link.txt", "real"]);
}

#[tokio::test]
async fn write_file_errors() {
    let e = env();
    e.put("dir/f", "");
    assert!(e
        .err("write_file", json!({"path": "dir", "content": ""}))
        .await
        .contains("is a directory"));
    assert!(e
        .err("write_file", json!({"path": "/tmp/x", "content": ""}))
        .await
        .contains("absolute"));
    assert!(e
        .err("write_file", json!({"path": "dir/f/x", "content": ""}))
        .await
        .contains("not a directory"));
    assert!(e
        .err("write_file", json!({"path": "x"}))
        .await
        .contains("missing field `content`"));
}

// ---- edit_file ----

#[tokio::test]
async fn edit_file_replaces_exactly_one_occurrence() {
    let e = env();
    e.put("f.txt", "one\ntwo\nthree\n");
    let out = e
        .ok(
            "edit_file",
            json!({"path": "f.txt", "old": "two", "new": "2"}),
        )
        .await;
    assert!(out.starts_with("edited `f.txt` at line 2"), "{out}");
    assert_eq!(e.get("f.txt"), "one\n2\nthree\n");
    assert_eq!(entries(e.root()), ["f.txt"]);
}

#[tokio::test]
async fn edit_file_refuses_zero_or_several_occurrences() {
    let e = env();
    e.put("f.txt", "ab ab");
    let none = e
        .err(
            "edit_file",
            json!({"path": "f.txt", "old": "zz", "new": "x"}),
        )
        .await;
    assert!(none.starts_with("old text not found in `f.txt`"), "{none}");
    let two = e
        .err(
            "edit_file",
            json!({"path": "f.txt", "old": "ab", "new": "x"}),
        )
        .await;
    assert!(
        two.starts_with("old text occurs 2 times in `f.txt`; include more context"),
        "{two}"
    );
    e.put("g.txt", "aaa");
    let overlap = e
        .err(
            "edit_file",
            json!({"path": "g.txt", "old": "aa", "new": "b"}),
        )
        .await;
    assert!(overlap.contains("occurs 2 times"), "{overlap}");
    assert_eq!(e.get("f.txt"), "ab ab");
    assert_eq!(e.get("g.txt"), "aaa");
}

#[tokio::test]
async fn edit_file_errors() {
    let e = env();
    fs::write(e.root().join("bin"), [0xFF, 0xFE]).expect("write");
    assert!(e
        .err("edit_file", json!({"path": "bin", "old": "a", "new": "b"}))
        .await
        .contains("not UTF-8"));
    assert!(e
        .err("edit_file", json!({"path": "nope", "old": "a", "new": "b"}))
        .await
        .contains("does not exist"));
    assert!(e
        .err("edit_file", json!({"path": "bin", "old": "", "new": "b"}))
        .await
        .contains("`old` is empty"));
}

// ---- list_dir ----

#[tokio::test]
async fn list_dir_sorts_and_marks_directories_and_symlinks() {
    let e = env();
    e.put("b.txt", "");
    e.put("a/inner", "");
    e.put(".hidden", "");
    symlink("b.txt", e.root().join("c")).expect("symlink");
    symlink("/", e.root().join("d")).expect("symlink");
    let want = ".hidden\na/\nb.txt\nc@\nd@\n";
    assert_eq!(e.ok("list_dir", json!({"path": ""})).await, want);
    assert_eq!(e.ok("list_dir", json!({"path": "."})).await, want);
    assert_eq!(e.ok("list_dir", json!({})).await, want);
    assert_eq!(e.ok("list_dir", json!({"path": "a"})).await, "inner\n");
}

#[tokio::test]
async fn list_dir_errors_and_limits() {
    let e = env_with(ToolConfig {
        max_output_bytes: 8,
        ..ToolConfig::default()
    });
    e.put("f", "");
    e.put("empty/.keep", "");
    fs::remove_file(e.root().join("empty/.keep")).expect("rm");
    symlink(e.root().join("empty"), e.root().join("link")).expect("symlink");
    assert!(e
        .err("list_dir", json!({"path": "f"}))
        .await
        .contains("is a file"));
    assert!(e
        .err("list_dir", json!({"path": "link"}))
        .await
        .contains("symbolic link"));
    assert!(e
        .err("list_dir", json!({"path": ".."}))
        .await
        .contains("leaves the workspace"));
    assert_eq!(
        e.ok("list_dir", json!({"path": "empty"})).await,
        "`empty` is an empty directory"
    );
    for name in ["aaa", "bbb", "ccc"] {
        e.put(&format!("many/{name}"), "");
    }
    let out = e.ok("list_dir", json!({"path": "many"})).await;
    assert!(
        out.starts_with("aaa\nbbb\n[… 1 more entries omitted"),
        "{out}"
    );
}

// ---- search ----

#[tokio::test]
async fn search_prints_path_line_text_and_skips_what_it_should() {
    let e = env();
    e.put("src/a.rs", "fn alpha() {}\nlet needle = 1;\n");
    e.put("src/b/c.rs", "needle at start\r\nnothing\n  needle again\n");
    e.put("top.txt", "a needle here");
    for skipped in [
        ".git/config",
        "target/debug/x",
        "node_modules/m/i.js",
        "src/target/t",
    ] {
        e.put(skipped, "needle");
    }
    fs::write(e.root().join("bin.dat"), b"needle\0binary").expect("write");
    symlink(e.root().join("top.txt"), e.root().join("link.txt")).expect("symlink");
    symlink(e.root().join("src"), e.root().join("srclink")).expect("symlink");

    let out = e
        .ok("search", json!({"pattern": "needle", "path": ""}))
        .await;
    assert_eq!(
        out,
        "src/a.rs:2: let needle = 1;\n\
         src/b/c.rs:1: needle at start\n\
         src/b/c.rs:3:   needle again\n\
         top.txt:1: a needle here\n"
    );
    let sub = e
        .ok("search", json!({"pattern": "needle", "path": "src/b"}))
        .await;
    assert_eq!(
        sub,
        "src/b/c.rs:1: needle at start\nsrc/b/c.rs:3:   needle again\n"
    );
    let file = e
        .ok("search", json!({"pattern": "alpha", "path": "src/a.rs"}))
        .await;
    assert_eq!(file, "src/a.rs:1: fn alpha() {}\n");
    let explicit = e
        .ok("search", json!({"pattern": "needle", "path": "target"}))
        .await;
    assert_eq!(explicit, "target/debug/x:1: needle\n");
}

#[tokio::test]
async fn search_reports_no_matches_and_errors() {
    let e = env();
    e.put("a.txt", "hello");
    assert_eq!(
        e.ok("search", json!({"pattern": "absent", "path": "."}))
            .await,
        "no matches for `absent` under `.`"
    );
    assert!(e
        .err("search", json!({"pattern": "", "path": ""}))
        .await
        .contains("`pattern` is empty"));
    assert!(e
        .err("search", json!({"pattern": "x", "path": "/etc"}))
        .await
        .contains("absolute"));
    assert!(e
        .err("search", json!({"pattern": "x", "path": "nope"}))
        .await
        .contains("does not exist"));
}

#[tokio::test]
async fn search_output_is_capped() {
    let e = env_with(ToolConfig {
        max_output_bytes: 40,
        ..ToolConfig::default()
    });
    e.put("f.txt", &"hit\n".repeat(100));
    let out = e.ok("search", json!({"pattern": "hit", "path": ""})).await;
    assert!(
        out.starts_with(
            "f.txt:1: hit\nf.txt:2: hit\nf.txt:3: hit\n[search stopped after 3 matches"
        ),
        "{out}"
    );
}
