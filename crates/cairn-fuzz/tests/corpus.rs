//! Every file of every fuzz corpus (`fuzz/corpus/<target>/`), and every
//! crash kept in `fuzz/regressions/<target>/`, run through its target's
//! properties on stable Rust. A target's corpus must not be empty.

use std::path::{Path, PathBuf};

fn fuzz_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fuzz")
}

/// The files of `dir`, sorted; none when it does not exist.
fn files(dir: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out: Vec<PathBuf> = entries
        .map(|e| e.expect("listing a corpus").path())
        .filter(|p| p.is_file())
        .collect();
    out.sort();
    out
}

fn run(name: &str, target: fn(&[u8])) {
    let corpus = files(&fuzz_dir().join("corpus").join(name));
    assert!(!corpus.is_empty(), "fuzz/corpus/{name}/ is empty");
    let regressions = files(&fuzz_dir().join("regressions").join(name));
    for path in corpus.iter().chain(&regressions) {
        let bytes = std::fs::read(path).expect("reading a corpus file");
        let outcome = std::panic::catch_unwind(|| target(&bytes));
        assert!(outcome.is_ok(), "{name}: {} fails", path.display());
    }
}

#[test]
fn every_target_has_a_fuzz_target_file() {
    for (name, _) in cairn_fuzz::TARGETS {
        let file = fuzz_dir().join("fuzz_targets").join(format!("{name}.rs"));
        assert!(file.is_file(), "{} is missing", file.display());
    }
}

#[test]
fn journal_corpus() {
    run("journal", cairn_fuzz::journal);
}

#[test]
fn sse_corpus() {
    run("sse", cairn_fuzz::sse);
}

#[test]
fn openai_stream_corpus() {
    run("openai_stream", cairn_fuzz::openai_stream);
}

#[test]
fn anthropic_stream_corpus() {
    run("anthropic_stream", cairn_fuzz::anthropic_stream);
}

#[test]
fn gateway_stream_corpus() {
    run("gateway_stream", cairn_fuzz::gateway_stream);
}

#[test]
fn responses_stream_corpus() {
    run("responses_stream", cairn_fuzz::responses_stream);
}

#[test]
fn ignore_corpus() {
    run("ignore", cairn_fuzz::ignore);
}

#[test]
fn manifest_corpus() {
    run("manifest", cairn_fuzz::manifest);
}

#[test]
fn response_log_corpus() {
    run("response_log", cairn_fuzz::response_log);
}

#[test]
fn statcache_corpus() {
    run("statcache", cairn_fuzz::statcache);
}

#[test]
fn chunks_corpus() {
    run("chunks", cairn_fuzz::chunks);
}

#[test]
fn checkpoint_corpus() {
    run("checkpoint", cairn_fuzz::checkpoint);
}

#[test]
fn markdown_corpus() {
    run("markdown", cairn_fuzz::markdown);
}

#[test]
fn sessions_index_corpus() {
    run("sessions_index", cairn_fuzz::sessions_index);
}
