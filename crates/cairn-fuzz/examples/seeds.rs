//! Writes the seed inputs of every fuzz target into `fuzz/corpus/<target>/`
//! (files named `seed-…`), from what the real code writes: journals by the
//! journal writer, manifests and stat caches by a capture, checkpoint
//! manifests by a save, object files by the pool, the response fixtures
//! of cairn-model (for `sse`, the two stream decoders and the gateway's
//! reading) and of the gateway's provider errors (cairn-testkit). Run it
//! again after a format change:
//!
//! ```text
//! cargo run -p cairn-fuzz --example seeds
//! ```

use std::fs;
use std::path::{Path, PathBuf};

use cairn_checkpoint::{save, JournalPosition, SaveRequest, WorkspaceSource};
use cairn_journal::*;
use cairn_objects::{ChunkConfig, ObjectHash, ObjectPool, StoreLock};
use cairn_store::{RunId, Store};
use cairn_workspace::{CaptureConfig, Label, NoProgress, Workspace};

type Result<T = ()> = std::result::Result<T, Box<dyn std::error::Error>>;

fn main() -> Result {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus");
    let tmp = tempfile::tempdir()?;
    journal(&fuzz.join("journal"), tmp.path())?;
    sse(&fuzz.join("sse"))?;
    streams(&fuzz)?;
    ignore(&fuzz.join("ignore"))?;
    workspace(&fuzz, tmp.path())?;
    chunks(&fuzz.join("chunks"), tmp.path())?;
    response_log(&fuzz.join("response_log"), tmp.path())?;
    Ok(())
}

/// A log as the store writes it: puts, a group, marks taken and taken back,
/// a removal; and the same cut inside its last record.
fn response_log(out: &Path, tmp: &Path) -> Result {
    use cairn_calls::{Entry, GroupPut, ResponseStore};
    let store = Store::open(tmp.join("response-log-store"))?;
    let rs = ResponseStore::new(&store);
    let key = |n: u8| format!("{n:064x}");
    rs.put(Entry::whole_json(key(1), "R1", "agent:seed"), b"one", None)?;
    let mut group: Vec<GroupPut> = (2..=3)
        .map(|n| GroupPut {
            entry: Some(Entry::whole_json(key(n), "R2", "/v1/messages")),
            body: vec![n; 10],
            request: vec![n; 20],
            hashes: None,
        })
        .collect();
    rs.put_group(&rs.lock()?, &mut group, cairn_calls::Barrier::From(0))?;
    rs.mark_delivered(&key(1))?;
    rs.mark_delivered(&key(2))?;
    rs.mark_undelivered(&key(2))?;
    rs.remove_run(&RunId::parse("R2")?)?;
    let bytes = fs::read(store.gateway_dir().join("log").join("0000000001.log"))?;
    seed(out, "log", &bytes)?;
    seed(out, "torn", &bytes[..bytes.len() - 7])?;
    Ok(())
}

fn seed(dir: &Path, name: &str, bytes: &[u8]) -> Result {
    fs::create_dir_all(dir)?;
    fs::write(dir.join(format!("seed-{name}")), bytes)?;
    Ok(())
}

fn with_flags(flags: u8, bytes: &[u8]) -> Vec<u8> {
    let mut out = vec![flags];
    out.extend_from_slice(bytes);
    out
}

fn run_id() -> RunId {
    RunId::parse(cairn_fuzz::RUN).expect("the fixed run id parses")
}

fn meta(fork: Option<ForkPin>) -> Meta {
    Meta {
        run: String::new(),
        created: "2026-01-02T03:04:05.000006Z".into(),
        workspace: "/work/ws".into(),
        name: Some("fuzz seed".into()),
        fingerprint: Some(Fingerprint {
            model: "openai:gpt-4.1".into(),
            system: Some("ab".repeat(32)),
            tools: "cd".repeat(32),
            thinking: None,
            budgets: Budgets {
                max_turns: Some(10),
                max_tokens: None,
                max_cost_usd: Some(1.5),
            },
            mcp: Default::default(),
        }),
        fork,
        routing: Some(Routing {
            provider: "openai".into(),
            model: "gpt-4.1".into(),
            base_url: None,
        }),
        system_file: None,
    }
}

fn bodies() -> Vec<RecordBody> {
    vec![
        RecordBody::User(User {
            text: "fix the bug in a.txt, \"quoted\" and ünïcode\n".into(),
            origin: None,
        }),
        RecordBody::Snapshot(Snapshot {
            snapshot: "01JFUZZSNAP000000000000000".into(),
            label: "pre:turn:1".into(),
        }),
        RecordBody::Assistant(Assistant {
            text: "reading".into(),
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "read_file".into(),
                arguments: serde_json::json!({"path": "a.txt", "n": 1.5, "deep": [null, true]}),
                raw_arguments: None,
            }],
            usage: Usage {
                input_tokens: 10,
                output_tokens: 5,
            },
            cost: Cost::known(0.25),
            model: Some("gpt-4.1-2025".into()),
            stop_reason: Some("tool_calls".into()),
            thinking: vec![
                Thinking::Thinking {
                    thinking: "hmm".into(),
                    signature: "sig".into(),
                },
                Thinking::RedactedThinking { data: "xyz".into() },
            ],
            reasoning: Some(Reasoning {
                text: "because".into(),
                field: Some("reasoning_content".into()),
                details: vec![serde_json::json!({"type": "text", "text": "d"})],
            }),
            ..Assistant::default()
        }),
        RecordBody::ToolStart(ToolStart {
            call: "c1".into(),
            name: "read_file".into(),
            mcp: None,
        }),
        RecordBody::ToolResult(ToolResult {
            call: "c1".into(),
            outcome: Outcome::Ok,
            output: "line1\nline2".into(),
        }),
        RecordBody::ToolResult(ToolResult {
            call: "c2".into(),
            outcome: Outcome::Refused,
            output: "declined".into(),
        }),
        RecordBody::ModelCall(ModelCall {
            endpoint: "/v1/chat/completions".into(),
            model: Some("gpt-4.1".into()),
            key: "k1".into(),
            request: Some("ef".repeat(32)),
            status: 200,
            usage: Usage {
                input_tokens: 3,
                output_tokens: 4,
            },
            cost: Cost::UNKNOWN,
            stream: true,
            delivered: Delivered::ClientGone,
            duration_ms: 12,
            ..ModelCall::default()
        }),
        RecordBody::Reconcile(Reconcile {
            changed: vec!["a.txt".into()],
            snapshot: Some("01JFUZZSNAP000000000000001".into()),
            unknown: None,
            machine: None,
        }),
        RecordBody::Override(Override {
            forced: vec![ForcedField {
                field: "model".into(),
                was: "a".into(),
                now: "b".into(),
            }],
            fingerprint: Fingerprint::default(),
        }),
        RecordBody::Versioning(Versioning {
            state: VersioningState::Off,
            at: Some("pre:turn:2".into()),
            reason: "over the file limit".into(),
        }),
        RecordBody::ModelCall(ModelCall {
            endpoint: "/v1/messages".into(),
            key: "k2".into(),
            status: 200,
            cost: Cost::ZERO,
            delivered: Delivered::Complete,
            choices: vec![Choice {
                index: 0,
                stop_reason: Some("refusal".into()),
                stop_details: Some(
                    serde_json::json!({"type": "refusal", "category": "cyber", "explanation": null}),
                ),
                refusal: Some("no".into()),
            }],
            ..ModelCall::default()
        }),
        RecordBody::Assistant(Assistant {
            text: String::new(),
            cost: Cost::UNKNOWN,
            stop_reason: Some("refusal".into()),
            refusal: Some("declined".into()),
            stop_details: Some(serde_json::json!({"type": "refusal", "category": null})),
            ..Assistant::default()
        }),
        RecordBody::Assistant(Assistant {
            text: "done".into(),
            cost: Cost::ZERO,
            ..Assistant::default()
        }),
    ]
}

/// A journal written by the writer in `dir`: `bodies`, then a terminal with
/// the fold's totals, then a checkpoint record (bookkeeping after it).
fn write_journal(dir: &Path, fork: Option<ForkPin>, bodies: &[RecordBody]) -> Result<Vec<u8>> {
    let store = Store::open(dir)?;
    let id = run_id();
    let mut w = JournalWriter::create(&store, &id, meta(fork))?;
    w.append_batch(bodies)?;
    drop(w);
    let (mut w, scan) = JournalWriter::open(&store, &id)?;
    let totals = fold(&scan.records)?.totals;
    w.append(&RecordBody::Terminal(Terminal {
        reason: TerminalReason::Completed,
        totals,
        detail: None,
    }))?;
    w.append(&RecordBody::Checkpoint(CheckpointRef {
        checkpoint: cairn_fuzz::CHECKPOINT_ID.into(),
        manifest: Some("01".repeat(32)),
    }))?;
    drop(w);
    Ok(fs::read(store.journal_path(&id))?)
}

fn journal(out: &Path, tmp: &Path) -> Result {
    let full = write_journal(&tmp.join("j1"), None, &bodies())?;
    let short = write_journal(&tmp.join("j2"), None, &bodies()[..1])?;
    let pin = ForkPin {
        parent: "01JFUZZPARENT0000000000000".into(),
        seq: 3,
        hash: ChainHash::genesis("01JFUZZPARENT0000000000000"),
    };
    let fork = write_journal(&tmp.join("j3"), Some(pin), &bodies()[4..6])?;
    seed(out, "full", &with_flags(0x80, &full))?;
    seed(out, "full-rechain", &with_flags(0x41, &full))?;
    seed(out, "short", &with_flags(0x21, &short))?;
    seed(out, "fork", &with_flags(0x61, &fork))?;
    // A torn tail: half a line after the last record.
    let mut torn = short.clone();
    torn.extend_from_slice(&full[..40]);
    seed(out, "torn", &with_flags(0xff, &torn))?;
    // Damage: one byte of the second record changed, records after it.
    let mut damaged = full.clone();
    let second = damaged.iter().position(|&b| b == b'\n').unwrap_or(0) + 20;
    damaged[second] ^= 0x01;
    seed(out, "damaged", &with_flags(0x00, &damaged))?;
    // A newer schema version in the middle.
    let newer =
        String::from_utf8(short.clone())?.replacen("\"v\":1,\"seq\":2", "\"v\":9,\"seq\":2", 1);
    seed(out, "newer", &with_flags(0x01, newer.as_bytes()))?;
    // Another run's journal.
    let other = String::from_utf8(short)?.replace(cairn_fuzz::RUN, "01JFUZZOTHER00000000000000");
    seed(out, "other-run", &with_flags(0x01, other.as_bytes()))?;
    Ok(())
}

fn sse(out: &Path) -> Result {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cairn-model/tests/fixtures");
    for provider in ["anthropic", "openai", "responses"] {
        for path in fixture_files(&fixtures.join(provider))? {
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("x");
            seed(out, &format!("{provider}-{stem}"), &fs::read(&path)?)?;
        }
    }
    // Providers' errors inside a 200 stream (the gateway's fixtures).
    let errors =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../cairn-testkit/fixtures/provider_errors");
    let mut names: Vec<PathBuf> = fs::read_dir(errors)?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::result::Result<_, _>>()?;
    names.retain(|p| p.extension().is_some_and(|e| e == "sse"));
    names.sort();
    for path in names {
        let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("x");
        seed(out, &format!("provider-error-{stem}"), &fs::read(&path)?)?;
    }
    seed(
        out,
        "crlf-bom",
        "\u{feff}event: a\r\ndata: é1\r\n\r\n: c\rdata: 2\rdata: 3\r\r\ndata: 4\n\nid: 7\nretry: 10\ndata\n\n".as_bytes(),
    )?;
    Ok(())
}

/// The provider fixtures of cairn-model as seeds of `openai_stream`,
/// `responses_stream`, `anthropic_stream` and `gateway_stream` (which reads
/// the API from a first byte: 0 chat completions, 1 Responses, 2 Messages; a
/// whole JSON body is read as a stream too).
fn streams(fuzz: &Path) -> Result {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../cairn-model/tests/fixtures");
    for (provider, api) in [("openai", 0u8), ("responses", 1u8), ("anthropic", 2u8)] {
        for path in fixture_files(&fixtures.join(provider))? {
            let stem = path.file_stem().and_then(|s| s.to_str()).unwrap_or("x");
            let bytes = fs::read(&path)?;
            let whole = path.extension().is_some_and(|e| e != "sse");
            let name = format!("{provider}-{stem}{}", if whole { "-whole" } else { "" });
            seed(
                &fuzz.join("gateway_stream"),
                &name,
                &with_flags(api, &bytes),
            )?;
            if !whole {
                seed(&fuzz.join(format!("{provider}_stream")), stem, &bytes)?;
            }
        }
    }
    Ok(())
}

/// The files of `dir`, sorted.
fn fixture_files(dir: &Path) -> Result<Vec<PathBuf>> {
    let mut names: Vec<PathBuf> = fs::read_dir(dir)?
        .map(|e| e.map(|e| e.path()))
        .collect::<std::result::Result<_, _>>()?;
    names.sort();
    Ok(names)
}

const RUST_GITIGNORE: &str =
    "# Generated by Cargo\n/target/\n**/*.rs.bk\n*.pdb\nCargo.lock\n!/crates/keep/Cargo.lock\n";
const NODE_GITIGNORE: &str = "node_modules/\ndist\n*.log\nnpm-debug.log*\n.env\n.env.*\n!.env.example\ncoverage/\n.DS_Store\n/build\n# comment\n\\#not-a-comment\nfoo\\ \n";
const PYTHON_GITIGNORE: &str = "__pycache__/\n*.py[cod]\n*$py.class\n.venv/\nvenv/\nbuild/\ndevelop-eggs/\n*.egg-info/\n.pytest_cache/\n.mypy_cache/\ndocs/_build/\n!docs/_build/keep.txt\n";
const ALLOWLIST: &str = "/*\n!/src/\n/src/*\n!/src/main.rs\n!/README.md\nlogs/**\n!logs/**/*.keep\na/**/b\n[abc]?.txt\n{x,y}\n";

fn ignore(out: &Path) -> Result {
    let paths = "target/\ntarget/debug/app\nsrc/main.rs\nsrc/lib.rs.bk\ncrates/keep/Cargo.lock\nCargo.lock\nnode_modules/x/index.js\n.env\n.env.example\n.env.local\ndocs/_build/keep.txt\ndocs/_build/x.html\nlogs/a/b.keep\nlogs/a/c.txt\na/x/y/b\nab.txt\n{x,y}\nfoo \n#not-a-comment\nREADME.md\npkg/__pycache__/m.pyc\n.venv/bin/python\n";
    let ours = fs::read(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../.gitignore"))?;
    let files: [(&str, &[u8]); 5] = [
        ("rust", RUST_GITIGNORE.as_bytes()),
        ("node", NODE_GITIGNORE.as_bytes()),
        ("python", PYTHON_GITIGNORE.as_bytes()),
        ("allowlist", ALLOWLIST.as_bytes()),
        ("cairn", &ours),
    ];
    for (i, (name, text)) in files.iter().enumerate() {
        let mut input = vec![u8::from(i % 2 == 0)];
        input.extend_from_slice(text);
        input.push(0);
        input.extend_from_slice(paths.as_bytes());
        seed(out, name, &input)?;
    }
    Ok(())
}

/// Snapshot manifests, stat caches and checkpoint manifests from a real
/// capture and a real save.
fn workspace(corpus: &Path, tmp: &Path) -> Result {
    let root = tmp.join("ws");
    let outside = tmp.join("outside");
    for d in ["src", "dir with space", "big", "target"] {
        fs::create_dir_all(root.join(d))?;
    }
    fs::create_dir_all(outside.join("data/sub"))?;
    fs::write(root.join("README.md"), "# demo\n")?;
    fs::write(root.join("src/main.rs"), "fn main() {}\n")?;
    fs::write(root.join("dir with space/ü \"q\".txt"), "unicode\n")?;
    fs::write(root.join("big/blob.bin"), vec![7u8; 5000])?;
    fs::write(
        root.join("target/CACHEDIR.TAG"),
        cairn_workspace::CACHEDIR_TAG_SIGNATURE,
    )?;
    std::os::unix::fs::symlink("README.md", root.join("link"))?;
    fs::write(outside.join("disk.img"), "image\n")?;
    fs::write(outside.join("data/a.txt"), "a\n")?;
    fs::write(outside.join("data/sub/b.txt"), "b\n")?;
    std::os::unix::fs::symlink("a.txt", outside.join("data/l"))?;

    let store = Store::open(tmp.join("store"))?;
    let run = run_id();
    let mut writer = JournalWriter::create(&store, &run, meta(None))?;
    writer.append(&bodies()[0])?;
    let config = CaptureConfig::default().max_file_bytes(4096);
    let ws = Workspace::open(&store, &run, &root, config)?;
    let first = ws.capture(&Label::parse("pre:turn:1")?, &NoProgress)?;
    fs::write(root.join("src/main.rs"), "fn main() { println!(); }\n")?;
    let second = ws.capture(&Label::parse("post:turn:1")?, &NoProgress)?;

    let snapshots = store.snapshots_dir(&run);
    for (name, report) in [("first", &first), ("second", &second)] {
        let text = fs::read_to_string(snapshots.join(format!("{}.json", report.snapshot)))?;
        let text = text.replace(report.snapshot.as_str(), cairn_fuzz::SNAPSHOT_ID);
        seed(&corpus.join("manifest"), name, text.as_bytes())?;
    }
    let cache = fs::read(store.workspace_dir(&run).join("statcache.bin"))?;
    seed(&corpus.join("statcache"), "sealed", &cache)?;
    seed(
        &corpus.join("statcache"),
        "body",
        &cache[..cache.len() - 32],
    )?;

    let mut req = SaveRequest::new(run.clone(), JournalPosition::of(&writer));
    req.workspace = WorkspaceSource::Capture(&ws);
    req.paths = vec![outside.join("disk.img"), outside.join("data")];
    let saved = save(&store, &req, &NoProgress)?;
    let text = fs::read_to_string(store.checkpoints_dir().join(format!("{}.json", saved.id)))?;
    let text = text.replace(saved.id.as_str(), cairn_fuzz::CHECKPOINT_ID);
    // The same seed whichever temporary directory wrote it.
    let text = text.replace(&tmp.display().to_string(), "/srv/fuzz");
    seed(&corpus.join("checkpoint"), "save", text.as_bytes())?;
    let bare = SaveRequest::new(run, JournalPosition::of(&writer));
    let saved = save(&store, &bare, &NoProgress)?;
    let text = fs::read_to_string(store.checkpoints_dir().join(format!("{}.json", saved.id)))?;
    let text = text.replace(saved.id.as_str(), cairn_fuzz::CHECKPOINT_ID);
    seed(&corpus.join("checkpoint"), "bare", text.as_bytes())?;
    Ok(())
}

/// A structured `chunks` input: header bytes, plain length, payload.
fn structured(kind: u8, fix_len: bool, plain_len: u64, payload: &[u8]) -> Vec<u8> {
    let mut out = vec![if fix_len { 3 } else { 1 }, 1, kind, 1, 0];
    out.extend_from_slice(&plain_len.to_le_bytes());
    out.extend_from_slice(payload);
    out
}

fn list_entry(content: &[u8]) -> Vec<u8> {
    let mut e = ObjectHash::of(content).as_bytes().to_vec();
    e.extend_from_slice(&(content.len() as u32).to_le_bytes());
    e
}

fn chunks(out: &Path, tmp: &Path) -> Result {
    let store = Store::open(tmp.join("objects-store"))?;
    let pool = ObjectPool::open(&store)?.with_chunking(ChunkConfig::default().threshold(0));
    let lock = StoreLock::shared(&store)?;
    let big = cairn_fuzz::chunked_content();
    let path = tmp.join("chunked.bin");
    fs::write(&path, &big)?;
    let list = pool.put_file(&lock, &path)?;
    seed(
        out,
        "raw-list",
        &with_flags(0, &fs::read(pool.path_of(&list.hash))?),
    )?;
    let blob = pool.put_bytes(&lock, b"hello, objects\n")?;
    seed(
        out,
        "raw-blob",
        &with_flags(0, &fs::read(pool.path_of(&blob.hash))?),
    )?;

    let chunks = pool.chunk_list(&list.hash)?.ok_or("not a list")?;
    let mut payload = Vec::new();
    for c in &chunks {
        payload.extend_from_slice(c.hash.as_bytes());
        payload.extend_from_slice(&(c.size as u32).to_le_bytes());
    }
    seed(
        out,
        "list-big",
        &structured(2, false, big.len() as u64, &payload),
    )?;
    let [one, two, x] = cairn_fuzz::SMALL_BLOBS;
    let small: Vec<u8> = [one, two, one, x]
        .iter()
        .flat_map(|c| list_entry(c))
        .collect();
    seed(out, "list-small", &structured(2, true, 0, &small))?;
    let missing: Vec<u8> = [one, b"not in the pool".as_slice()]
        .iter()
        .flat_map(|c| list_entry(c))
        .collect();
    seed(out, "list-missing", &structured(2, true, 0, &missing))?;
    seed(
        out,
        "blob",
        &structured(1, true, 0, b"a blob's plain bytes\n"),
    )?;
    seed(out, "blob-wrong-len", &structured(1, false, 3, b"four"))?;
    Ok(())
}
