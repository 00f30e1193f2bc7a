//! cairn's default excludes: by name only where the name is unambiguous,
//! by evidence (a `CACHEDIR.TAG`, a `pyvenv.cfg`) where it is not, so that
//! no committed source is dropped because of what its directory is called.

mod common;

use std::fs;
use std::path::Path;

use cairn_workspace::*;
use common::*;

const TAG: &str = "Signature: 8a477f597d28d172789f06886806bc55\n# This file is a cache directory tag created by cargo.\n";

/// A monorepo: a cargo `target/` beside web routes named `target`.
fn monorepo() -> Fixture {
    let f = Fixture::new();
    f.write("Cargo.toml", "[workspace]\n");
    f.write("target/CACHEDIR.TAG", TAG);
    f.write("target/debug/app", "binary");
    f.write("crates/x/target/CACHEDIR.TAG", TAG);
    f.write("crates/x/target/release/lib.rlib", "rlib");
    f.write("src/routes/target/+page.svelte", "<h1>target</h1>");
    f.write("src/routes/target/[id]/+page.ts", "export const load = 1;");
    f.write("web/target/index.html", "<p>a page</p>");
    f
}

fn captured(f: &Fixture) -> Vec<String> {
    let r = f.capture(&format!("snap:{}", f.manifests().len() + 1));
    f.ws.manifest(&r.snapshot)
        .unwrap()
        .entries
        .keys()
        .cloned()
        .collect()
}

#[test]
fn a_directory_named_target_is_source_unless_it_carries_a_cache_tag() {
    let f = monorepo();
    assert_eq!(
        captured(&f),
        vec![
            "Cargo.toml",
            "src/routes/target/+page.svelte",
            "src/routes/target/[id]/+page.ts",
            "web/target/index.html",
        ]
    );
    // check-ignore names the evidence; a source directory named target is
    // decided by nothing.
    let m =
        f.ws.check_ignore(Path::new("target/debug/app"))
            .unwrap()
            .unwrap();
    assert!(m.excluded);
    assert_eq!(m.rule, "CACHEDIR.TAG in target/");
    assert_eq!(m.source.to_string(), "<cairn defaults>");
    let e = m.evidence().unwrap();
    assert_eq!((e.marker, e.dir.as_str()), (Marker::CacheDirTag, "target"));
    let m =
        f.ws.check_ignore(Path::new("crates/x/target/"))
            .unwrap()
            .unwrap();
    assert_eq!(m.rule, "CACHEDIR.TAG in crates/x/target/");
    assert!(f
        .ws
        .check_ignore(Path::new("src/routes/target/+page.svelte"))
        .unwrap()
        .is_none());
    assert!(f
        .ws
        .check_ignore(Path::new("src/routes/target"))
        .unwrap()
        .is_none());
}

#[test]
fn a_project_rule_overrides_the_evidence() {
    let f = monorepo();
    f.write(".cairnignore", "!/target/\n");
    let got = captured(&f);
    assert!(got.contains(&"target/debug/app".to_owned()), "{got:?}");
    assert!(!got.iter().any(|p| p.starts_with("crates/x/target/")));
    let m =
        f.ws.check_ignore(Path::new("target/debug/app"))
            .unwrap()
            .unwrap();
    assert!(!m.excluded);
    assert_eq!((m.line, m.rule.as_str()), (1, "!/target/"));

    // A `!` rule reaches below a tagged directory, as below any excluded one.
    let f = monorepo();
    f.write("target/keep/report.txt", "keep me");
    f.write(".cairnignore", "!/target/keep/**\n");
    let got = captured(&f);
    assert!(
        got.contains(&"target/keep/report.txt".to_owned()),
        "{got:?}"
    );
    assert!(!got.contains(&"target/debug/app".to_owned()), "{got:?}");
    assert!(!got.contains(&"target/CACHEDIR.TAG".to_owned()), "{got:?}");
}

#[test]
fn a_virtual_environment_is_known_by_its_pyvenv_cfg_whatever_its_name() {
    let f = Fixture::new();
    f.write(".venv/pyvenv.cfg", "home = /usr/bin\nversion = 3.12.1\n");
    f.write(".venv/lib/python3.12/site-packages/x.py", "x = 1");
    f.write("env-3.12/pyvenv.cfg", "Home=/opt/python/bin\n");
    f.write("env-3.12/bin/python", "elf");
    // A package named venv, and a directory with a pyvenv.cfg that is not
    // one (no `home` key): source.
    f.write("src/venv/__init__.py", "");
    f.write("notes/pyvenv.cfg", "just notes, no key\n");
    assert_eq!(
        captured(&f),
        vec!["notes/pyvenv.cfg", "src/venv/__init__.py"]
    );
    let m = f.ws.check_ignore(Path::new("env-3.12/bin/python")).unwrap();
    assert_eq!(m.unwrap().rule, "pyvenv.cfg in env-3.12/");
}

#[test]
fn a_marker_is_evidence_only_when_it_is_a_regular_file_with_the_signature() {
    let f = Fixture::new();
    f.write("fake/CACHEDIR.TAG", "Signature: not the real one\n");
    f.write("fake/kept.txt", "kept");
    f.write("short/CACHEDIR.TAG", "Signature: 8a477f597d28d172789f");
    f.write("short/kept.txt", "kept");
    // A symlink to a real tag is not followed, so it is no evidence.
    f.write("real/CACHEDIR.TAG", TAG);
    fs::create_dir(f.root.join("linked")).unwrap();
    std::os::unix::fs::symlink(
        f.root.join("real/CACHEDIR.TAG"),
        f.root.join("linked/CACHEDIR.TAG"),
    )
    .unwrap();
    f.write("linked/kept.txt", "kept");
    // A directory of that name is no evidence either.
    f.write("dir/CACHEDIR.TAG/inner", "kept");
    let got = captured(&f);
    assert_eq!(
        got,
        vec![
            "dir/CACHEDIR.TAG/inner",
            "fake/CACHEDIR.TAG",
            "fake/kept.txt",
            "linked/kept.txt",
            "short/CACHEDIR.TAG",
            "short/kept.txt",
        ]
    );
    assert!(f
        .ws
        .check_ignore(Path::new("linked/kept.txt"))
        .unwrap()
        .is_none());
    // A check never looks for evidence through a symlinked directory (the
    // walk never enters one).
    std::os::unix::fs::symlink(f.root.join("real"), f.root.join("real-link")).unwrap();
    assert!(
        f.ws.check_ignore(Path::new("real/x"))
            .unwrap()
            .unwrap()
            .excluded
    );
    assert!(f
        .ws
        .check_ignore(Path::new("real-link/x"))
        .unwrap()
        .is_none());
}

#[test]
fn unambiguous_names_stay_excluded_by_name() {
    let f = Fixture::new();
    for p in [
        "node_modules/a/index.js",
        "pkg/__pycache__/m.cpython-312.pyc",
        ".pytest_cache/v/cache/lastfailed",
        ".next/cache/x",
        "keep.txt",
    ] {
        f.write(p, "x");
    }
    assert_eq!(captured(&f), vec!["keep.txt"]);
    let m =
        f.ws.check_ignore(Path::new("node_modules/a/index.js"))
            .unwrap()
            .unwrap();
    assert_eq!(
        (m.source, m.rule.as_str()),
        (RuleSource::Default, "node_modules/")
    );
    // Without the defaults, nothing is excluded by name or by evidence.
    let f = Fixture::with(CaptureConfig::default().default_excludes(false));
    f.write("node_modules/a.js", "x");
    f.write("target/CACHEDIR.TAG", TAG);
    assert_eq!(
        captured(&f),
        vec!["node_modules/a.js", "target/CACHEDIR.TAG"]
    );
}
