//! The crate graph is DESIGN §15's map: a crate depends only on crates the
//! map puts below it, and the storage crates pull in no async runtime and no
//! HTTP stack. Read from `cargo metadata`, so a new dependency that breaks
//! the map fails here, naming the edge.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// The storage crates (below every network peer: §12, §14) and the
/// bookkeeping the session service builds on them (the call record,
/// checkpoints, sessions): none of them speaks to a network itself; remote
/// backends implement their interfaces from above.
const OFFLINE: [&str; 7] = [
    "cairn-store",
    "cairn-journal",
    "cairn-objects",
    "cairn-workspace",
    "cairn-calls",
    "cairn-checkpoint",
    "cairn-sessions",
];

/// Packages an [`OFFLINE`] crate must not reach through its normal dependencies:
/// async runtimes, HTTP stacks and network clients.
const NETWORK: [&str; 11] = [
    "tokio",
    "async-std",
    "smol",
    "hyper",
    "h2",
    "reqwest",
    "axum",
    "ureq",
    "async-nats",
    "object_store",
    "rmcp",
];

/// What each crate of the map may depend on (§15, read downwards). The
/// session service lives in `cairn-agent`, above the gateway, the model and
/// the tools. `cairn-config` is the binary's configuration file, a leaf.
/// The test-support crates (`cairn-testkit`, `cairn-fuzz`) are not in the
/// map: nothing ships with them.
fn allowed() -> BTreeMap<&'static str, BTreeSet<&'static str>> {
    let set = |v: &[&'static str]| v.iter().copied().collect::<BTreeSet<_>>();
    let journal = set(&["cairn-store"]);
    let workspace = set(&["cairn-objects", "cairn-store"]);
    let calls = set(&["cairn-objects", "cairn-journal", "cairn-store"]);
    let sessions = set(&[
        "cairn-calls",
        "cairn-checkpoint",
        "cairn-workspace",
        "cairn-objects",
        "cairn-journal",
        "cairn-store",
    ]);
    let service = set(&[
        "cairn-gateway",
        "cairn-model",
        "cairn-tools",
        "cairn-sessions",
        "cairn-calls",
        "cairn-checkpoint",
        "cairn-workspace",
        "cairn-objects",
        "cairn-journal",
        "cairn-store",
    ]);
    let mut front = service.clone();
    front.insert("cairn-agent");
    let mut binary = front.clone();
    binary.extend([
        "cairn-tui",
        "cairn-server",
        "cairn-vm",
        "cairn-mcp",
        "cairn-remote",
        "cairn-config",
    ]);
    let mut gateway = sessions.clone();
    gateway.extend(["cairn-sessions", "cairn-model"]);
    BTreeMap::from([
        ("cairn-store", set(&[])),
        ("cairn-config", set(&[])),
        ("cairn-model", set(&[])),
        ("cairn-journal", journal.clone()),
        ("cairn-objects", journal.clone()),
        ("cairn-tools", journal),
        ("cairn-workspace", workspace),
        (
            "cairn-checkpoint",
            set(&[
                "cairn-workspace",
                "cairn-objects",
                "cairn-journal",
                "cairn-store",
            ]),
        ),
        ("cairn-calls", calls),
        ("cairn-sessions", sessions),
        ("cairn-gateway", gateway),
        (
            "cairn-remote",
            set(&["cairn-journal", "cairn-objects", "cairn-store"]),
        ),
        ("cairn-agent", service),
        ("cairn-tui", front.clone()),
        ("cairn-server", front.clone()),
        ("cairn-vm", front.clone()),
        ("cairn-mcp", front),
        ("cairn", binary),
    ])
}

fn metadata() -> Value {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../Cargo.toml");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--locked",
            "--manifest-path",
        ])
        .arg(&root)
        .output()
        .expect("cargo runs");
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON")
}

/// Whether a resolved dependency edge is a normal or build dependency (not
/// only a dev-dependency).
fn ships(dep: &Value) -> bool {
    dep["dep_kinds"]
        .as_array()
        .is_some_and(|kinds| kinds.iter().any(|k| k["kind"].as_str() != Some("dev")))
}

/// Package id → (name, the ids it depends on in shipped code).
fn graph(meta: &Value) -> BTreeMap<String, (String, Vec<String>)> {
    let names: BTreeMap<&str, &str> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    meta["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| {
            let id = n["id"].as_str().unwrap();
            let deps = n["deps"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| ships(d))
                .map(|d| d["pkg"].as_str().unwrap().to_owned())
                .collect();
            (id.to_owned(), (names[id].to_owned(), deps))
        })
        .collect()
}

#[test]
fn every_workspace_crate_depends_only_on_crates_the_map_puts_below_it() {
    let meta = metadata();
    let graph = graph(&meta);
    let allowed = allowed();
    let members: BTreeSet<&str> = meta["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| m.as_str().unwrap())
        .collect();
    let mut wrong = Vec::new();
    for id in &members {
        let (name, deps) = &graph[*id];
        if name == "cairn-testkit" || name == "cairn-fuzz" {
            continue;
        }
        let Some(may) = allowed.get(name.as_str()) else {
            wrong.push(format!(
                "{name} is not in DESIGN §15's map: give it a place there and here"
            ));
            continue;
        };
        for dep in deps {
            let dep = &graph[dep].0;
            if dep.starts_with("cairn") && !may.contains(dep.as_str()) {
                wrong.push(format!(
                    "{name} depends on {dep}, which the map does not put below it"
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_storage_and_session_crates_pull_in_no_async_runtime_and_no_http_stack() {
    let meta = metadata();
    let graph = graph(&meta);
    let mut wrong = Vec::new();
    for krate in OFFLINE {
        let (start, _) = graph
            .iter()
            .find(|(_, (name, _))| name == krate)
            .unwrap_or_else(|| panic!("{krate} is not in the workspace"));
        // Every package reachable through shipped dependencies, with the
        // path that reaches it, to name the edge to cut.
        let mut seen: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        let mut todo = vec![(start.as_str(), vec![krate])];
        while let Some((id, path)) = todo.pop() {
            for dep in &graph[id].1 {
                if seen.contains_key(dep.as_str()) {
                    continue;
                }
                let name = graph[dep].0.as_str();
                let mut p = path.clone();
                p.push(name);
                seen.insert(dep, p.clone());
                todo.push((dep, p));
            }
        }
        for path in seen.values() {
            let last = path.last().copied().unwrap_or_default();
            if NETWORK.contains(&last) {
                wrong.push(format!("{krate} reaches {last}: {}", path.join(" -> ")));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn the_map_is_checked_against_the_real_crate_names() {
    // A name in the map that no crate has would hide a rename: every crate
    // the map names exists, but for the MCP server, which is to come (§17).
    let meta = metadata();
    let names: BTreeSet<&str> = meta["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    for (krate, deps) in allowed() {
        for name in std::iter::once(krate).chain(deps) {
            assert!(
                names.contains(name) || name == "cairn-mcp",
                "the map names {name}, which is no crate of the workspace"
            );
        }
    }
}

#[test]
fn no_command_module_calls_another() {
    // The binary's command modules parse, call the library and render; what
    // several of them need lives outside `cmd/` (setup, serving, job) or in
    // the modules every command shares.
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/cmd");
    let shared = ["mod", "progress", "shared"];
    let commands: BTreeSet<String> = std::fs::read_dir(&dir)
        .expect("src/cmd reads")
        .filter_map(|e| {
            let name = e.ok()?.file_name().to_string_lossy().into_owned();
            let stem = name.strip_suffix(".rs")?.to_owned();
            (!shared.contains(&stem.as_str())).then_some(stem)
        })
        .collect();
    assert!(
        commands.contains("run") && commands.contains("fork"),
        "{commands:?}"
    );
    let mut wrong = Vec::new();
    for command in &commands {
        let text = std::fs::read_to_string(dir.join(format!("{command}.rs"))).expect("reads");
        for other in &commands {
            let paths = [
                format!("crate::cmd::{other}::"),
                format!("crate::cmd::{other};"),
                format!("use crate::cmd::{{{other},"),
                format!("super::{other}::"),
            ];
            if let Some(p) = paths.iter().find(|p| text.contains(p.as_str())) {
                wrong.push(format!("cmd/{command}.rs reaches cmd/{other}.rs ({p})"));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
