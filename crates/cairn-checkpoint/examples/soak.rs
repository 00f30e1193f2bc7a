//! The checkpoint soak's helper (`bench/checkpoint-soak.sh`): saves
//! checkpoints the way `cairn checkpoint save` will (journal writer held,
//! workspace captured, named paths chunked, `checkpoint` record appended),
//! generates and mutates the soak's data, and measures chunking throughput.
//!
//! ```text
//! soak save --store DIR --run ID --workspace DIR [--path P]...   one checkpoint, JSON report
//! soak stats --store DIR --run ID                                JSON stats
//! soak verify --store DIR --run ID [--last]                      verify checkpoints
//! soak gen --workspace DIR --files N --image FILE --mb N         initial data
//! soak mutate --workspace DIR --image FILE --writes N --seed S   the next state
//! soak throughput FILE                                           chunk+hash vs SHA-256
//! ```

use std::collections::HashMap;
use std::fs;
use std::io::Write;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::Instant;

use cairn_checkpoint::{list, save, stats, verify, JournalPosition, NoProgress, SaveRequest};
use cairn_journal::{now_rfc3339, CheckpointRef, JournalWriter, Meta, RecordBody};
use cairn_objects::{Chunker, ObjectPool, StoreLock};
use cairn_store::{RunId, Store};
use cairn_workspace::{CaptureConfig, Workspace};
use rayon::prelude::*;
use sha2::{Digest, Sha256};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

struct Args {
    cmd: String,
    flags: HashMap<String, Vec<String>>,
    rest: Vec<String>,
}

impl Args {
    fn parse() -> Res<Args> {
        let mut it = std::env::args().skip(1);
        let cmd = it.next().ok_or("usage: soak COMMAND …")?;
        let mut flags: HashMap<String, Vec<String>> = HashMap::new();
        let mut rest = Vec::new();
        while let Some(a) = it.next() {
            match a.strip_prefix("--") {
                Some("last") => {
                    flags.entry("last".into()).or_default();
                }
                Some(k) => {
                    let v = it.next().ok_or_else(|| format!("--{k} needs a value"))?;
                    flags.entry(k.to_owned()).or_default().push(v);
                }
                None => rest.push(a),
            }
        }
        Ok(Args { cmd, flags, rest })
    }

    fn one(&self, k: &str) -> Res<&str> {
        self.flags
            .get(k)
            .and_then(|v| v.last())
            .map(String::as_str)
            .ok_or_else(|| format!("--{k} is required").into())
    }

    fn num(&self, k: &str) -> Res<u64> {
        Ok(self.one(k)?.parse()?)
    }

    fn all(&self, k: &str) -> Vec<PathBuf> {
        self.flags
            .get(k)
            .map(|v| v.iter().map(PathBuf::from).collect())
            .unwrap_or_default()
    }
}

fn main() -> Res<()> {
    let a = Args::parse()?;
    match a.cmd.as_str() {
        "save" => cmd_save(&a),
        "stats" => {
            let store = Store::open(a.one("store")?)?;
            let s = stats(&store, &RunId::parse(a.one("run")?)?)?;
            println!("{}", serde_json::to_string(&s)?);
            Ok(())
        }
        "verify" => cmd_verify(&a),
        "gen" => cmd_gen(&a),
        "mutate" => cmd_mutate(&a),
        "throughput" => cmd_throughput(a.rest.first().ok_or("soak throughput FILE")?),
        other => Err(format!("unknown command {other}").into()),
    }
}

fn cmd_save(a: &Args) -> Res<()> {
    let store = Store::open(a.one("store")?)?;
    let run = RunId::parse(a.one("run")?)?;
    let root = PathBuf::from(a.one("workspace")?);
    let mut writer = if store.journal_path(&run).exists() {
        JournalWriter::open(&store, &run)?.0
    } else {
        let meta = Meta {
            run: String::new(),
            created: now_rfc3339(),
            workspace: root.display().to_string(),
            name: Some("soak".into()),
            fingerprint: None,
            fork: None,
            routing: None,
            system_file: None,
        };
        JournalWriter::create(&store, &run, meta)?
    };
    let ws = Workspace::open(&store, &run, &root, CaptureConfig::default())?;
    let req = SaveRequest::new(run.clone(), JournalPosition::of(&writer))
        .capture(&ws)
        .paths(a.all("path"));
    let report = save(&store, &req, &NoProgress)?;
    writer.append(&RecordBody::Checkpoint(CheckpointRef {
        checkpoint: report.id.to_string(),
        manifest: Some(report.manifest.clone()),
    }))?;
    println!("{}", serde_json::to_string(&report)?);
    Ok(())
}

fn cmd_verify(a: &Args) -> Res<()> {
    let store = Store::open(a.one("store")?)?;
    let run = RunId::parse(a.one("run")?)?;
    let mut all = list(&store, &run)?;
    if a.flags.contains_key("last") {
        all.truncate(1);
    }
    let mut bad = 0;
    for c in &all {
        let v = verify(&store, &c.id, &NoProgress)?;
        if !v.ok {
            bad += 1;
            eprintln!("{}: {:?}", c.id, v.bad);
        }
    }
    println!("verified {} checkpoint(s), {bad} bad", all.len());
    if bad > 0 {
        return Err("verification failed".into());
    }
    Ok(())
}

/// Deterministic pseudo-random bytes.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn fill(&mut self, buf: &mut [u8]) {
        for c in buf.chunks_mut(8) {
            let v = self.next().to_le_bytes();
            c.copy_from_slice(&v[..c.len()]);
        }
    }

    fn text(&mut self, n: usize) -> Vec<u8> {
        const WORDS: [&str; 12] = [
            "fn ", "let ", "self", ".iter()", "return ", "Ok(())", "\n    ", "match ", "=> ",
            "cairn", "{ ", "}\n",
        ];
        let mut out = Vec::with_capacity(n + 16);
        while out.len() < n {
            out.extend_from_slice(WORDS[(self.next() % 12) as usize].as_bytes());
        }
        out.truncate(n);
        out
    }
}

/// A workspace of `files` small source-like files, and an image of `mb` MiB:
/// per MiB, 40% random bytes, 30% zeros, 30% text, like a used disk.
fn cmd_gen(a: &Args) -> Res<()> {
    let ws = PathBuf::from(a.one("workspace")?);
    let mut rng = Rng(0x5EED_1234_5678_9ABC);
    for i in 0..a.num("files")? {
        let dir = ws.join(format!("src/mod{}", i % 17));
        fs::create_dir_all(&dir)?;
        let len = 200 + (rng.next() % 8000) as usize;
        fs::write(dir.join(format!("file{i}.rs")), rng.text(len))?;
    }
    let mut img = fs::File::create(a.one("image")?)?;
    let mut block = vec![0u8; 1 << 20];
    for _ in 0..a.num("mb")? {
        let (r, z) = (4 * (1 << 20) / 10, 3 * (1 << 20) / 10);
        rng.fill(&mut block[..r]);
        block[r..r + z].fill(0);
        let t = rng.text((1 << 20) - r - z);
        block[r + z..].copy_from_slice(&t);
        img.write_all(&block)?;
    }
    img.sync_all()?;
    Ok(())
}

/// The next state: `writes` random 4 KiB page writes into the image, three
/// workspace files rewritten and one added.
fn cmd_mutate(a: &Args) -> Res<()> {
    let ws = PathBuf::from(a.one("workspace")?);
    let seed = a.num("seed")?;
    let mut rng = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let img = fs::OpenOptions::new().write(true).open(a.one("image")?)?;
    let pages = img.metadata()?.len() / 4096;
    let mut page = vec![0u8; 4096];
    for _ in 0..a.num("writes")? {
        rng.fill(&mut page);
        img.write_all_at(&page, (rng.next() % pages) * 4096)?;
    }
    let files: Vec<PathBuf> = walk(&ws)?;
    for _ in 0..3 {
        let f = &files[(rng.next() % files.len() as u64) as usize];
        let mut body = fs::read(f)?;
        body.extend_from_slice(&rng.text(64));
        fs::write(f, body)?;
    }
    fs::write(ws.join(format!("src/new{seed}.rs")), rng.text(500))?;
    Ok(())
}

fn walk(dir: &Path) -> Res<Vec<PathBuf>> {
    let mut out = Vec::new();
    for e in fs::read_dir(dir)? {
        let p = e?.path();
        if p.is_dir() {
            out.extend(walk(&p)?);
        } else {
            out.push(p);
        }
    }
    out.sort();
    Ok(out)
}

fn rate(bytes: usize, t: Instant) -> String {
    let s = t.elapsed().as_secs_f64();
    format!("{:7.0} MB/s  ({:.3} s)", bytes as f64 / s / 1e6, s)
}

/// Chunking and hashing throughput over the bytes of `file`, against plain
/// SHA-256 on one core.
fn cmd_throughput(file: &str) -> Res<()> {
    let data = fs::read(file)?;
    let n = data.len();
    let chunker = Chunker::new();
    println!("throughput over {} MiB of {file}:", n >> 20);

    let t = Instant::now();
    let whole = Sha256::digest(&data);
    println!(
        "  sha-256, one core                          {}",
        rate(n, t)
    );

    let t = Instant::now();
    let cuts: Vec<_> = chunker.chunks(&data).collect();
    println!(
        "  fastcdc cut points only, one core          {}",
        rate(n, t)
    );

    let t = Instant::now();
    let mut hashes = 0usize;
    for r in chunker.chunks(&data) {
        hashes += Sha256::digest(&data[r])[0] as usize;
    }
    println!(
        "  fastcdc + sha-256 per chunk, one core      {}",
        rate(n, t)
    );

    let t = Instant::now();
    let (w, c) = rayon::join(
        || Sha256::digest(&data),
        || {
            cuts.par_iter()
                .map(|r| Sha256::digest(&data[r.clone()])[0] as usize)
                .sum::<usize>()
        },
    );
    println!(
        "  cut + chunk hashes + whole hash, {} threads  {}",
        rayon::current_num_threads(),
        rate(n, t)
    );
    assert_eq!(w, whole);

    // What a save does with the file: first into an empty pool (every chunk
    // compressed and written), then again (every chunk found present).
    let dir = tempfile::tempdir_in(Path::new(file).parent().unwrap_or(Path::new(".")))?;
    let store = Store::open(dir.path())?;
    let pool = ObjectPool::open(&store)?;
    let lock = StoreLock::shared(&store)?;
    let t = Instant::now();
    let put = pool.put_file(&lock, Path::new(file))?;
    println!(
        "  put_file into an empty pool (compress+fsync) {}",
        rate(n, t)
    );
    let t = Instant::now();
    let again = pool.put_file(&lock, Path::new(file))?;
    println!(
        "  put_file again (all chunks present)        {}",
        rate(n, t)
    );
    println!(
        "  {} chunks, average {} KiB; first put stored {} MiB",
        cuts.len(),
        n / cuts.len().max(1) / 1024,
        put.stored_bytes >> 20
    );
    assert!(!again.new);
    std::hint::black_box((hashes, c));
    Ok(())
}
