//! A small driver for the workspace benchmark (`bench/workspace.sh`).
//!
//! ```text
//! capture gen ROOT FILES BYTES      generate a tree of FILES files, BYTES in total
//! capture snap STORE ROOT LABEL     capture ROOT into run `bench` of STORE
//! capture sha ROOT [all]            SHA-256 over every file in ROOT, on one
//!                                   core (or on all cores with `all`)
//! capture floor ROOT OUT            the cost of one new file per file of ROOT:
//!                                   each file's bytes written to a new file
//!                                   under OUT/<fan-out>/, on all cores, no
//!                                   hashing, no compression, no fsync
//! capture touch ROOT N              rewrite file number N (same size, new bytes)
//! ```
//! Each command prints one line; `snap` and `sha` print elapsed milliseconds
//! first, measured inside the process.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::Instant;

use cairn_store::{RunId, Store};
use cairn_workspace::{CaptureConfig, Label, NoProgress, Workspace};
use rayon::prelude::*;
use sha2::{Digest, Sha256};

type Res<T> = Result<T, Box<dyn std::error::Error>>;

fn main() -> Res<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |i: usize| -> Res<&String> { args.get(i).ok_or_else(|| "missing argument".into()) };
    match arg(0)?.as_str() {
        "gen" => generate(Path::new(arg(1)?), arg(2)?.parse()?, arg(3)?.parse()?),
        "snap" => snap(Path::new(arg(1)?), Path::new(arg(2)?), arg(3)?),
        "sha" => sha(Path::new(arg(1)?), args.get(2).is_some_and(|a| a == "all")),
        "floor" => floor(Path::new(arg(1)?), Path::new(arg(2)?)),
        "touch" => touch(Path::new(arg(1)?), arg(2)?.parse()?),
        other => Err(format!("unknown command {other}").into()),
    }
}

/// Deterministic text-like bytes: words from a small vocabulary, so the
/// content compresses roughly like source code.
struct Words(u64);

impl Words {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn fill(&mut self, n: usize) -> Vec<u8> {
        const VOCAB: [&str; 16] = [
            "fn ", "let ", "self", ".iter()", " => ", "match ", "Some(x)", "None", "\n    ",
            "return ", "impl ", "pub ", "&mut ", "u64", "String", "Ok(())",
        ];
        let mut out = Vec::with_capacity(n + 16);
        while out.len() < n {
            let r = self.next();
            out.extend_from_slice(VOCAB[(r & 15) as usize].as_bytes());
            out.extend_from_slice(format!("{:x}", r >> 40).as_bytes());
        }
        out.truncate(n);
        out
    }
}

fn path_of(root: &Path, i: u64) -> PathBuf {
    root.join(format!("d{:02}/s{:02}/f{i}.rs", i % 100, (i / 100) % 10))
}

fn generate(root: &Path, files: u64, bytes: u64) -> Res<()> {
    let avg = (bytes / files.max(1)).max(1);
    let mut w = Words(0x9E37_79B9_7F4A_7C15);
    for i in 0..files {
        let size = avg / 4 + w.next() % (avg * 3 / 2).max(1);
        let p = path_of(root, i);
        std::fs::create_dir_all(p.parent().ok_or("no parent")?)?;
        std::fs::write(&p, w.fill(size as usize))?;
    }
    println!("generated {files} files under {}", root.display());
    Ok(())
}

fn snap(store: &Path, root: &Path, label: &str) -> Res<()> {
    let t = Instant::now();
    let store = Store::open(store)?;
    let ws = Workspace::open(
        &store,
        &RunId::parse("bench")?,
        root,
        CaptureConfig::default(),
    )?;
    let r = ws.capture(&Label::parse(label)?, &NoProgress)?;
    println!(
        "{:.1} files={} bytes={} hashed={} stored_objects={} stored_bytes={} deduped={}",
        t.elapsed().as_secs_f64() * 1000.0,
        r.files,
        r.bytes,
        r.hashed,
        r.stored_objects,
        r.stored_bytes,
        r.deduped
    );
    Ok(())
}

/// Every regular file under `root`.
fn files_of(root: &Path) -> Res<Vec<PathBuf>> {
    let mut files = Vec::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            if e.file_type()?.is_dir() {
                stack.push(e.path());
            } else {
                files.push(e.path());
            }
        }
    }
    Ok(files)
}

fn sha(root: &Path, all_cores: bool) -> Res<()> {
    let files = files_of(root)?;
    let one = |f: &PathBuf| -> std::io::Result<(u64, u8)> {
        let mut buf = Vec::new();
        std::fs::File::open(f)?.read_to_end(&mut buf)?;
        Ok((buf.len() as u64, Sha256::digest(&buf)[0]))
    };
    let t = Instant::now();
    let done: Vec<(u64, u8)> = if all_cores {
        files.par_iter().map(one).collect::<Result<_, _>>()?
    } else {
        files.iter().map(one).collect::<Result<_, _>>()?
    };
    std::hint::black_box(done.iter().fold(0u8, |a, (_, b)| a ^ b));
    let total: u64 = done.iter().map(|(n, _)| n).sum();
    let ms = t.elapsed().as_secs_f64() * 1000.0;
    println!(
        "{ms:.1} bytes={total} MBps={:.0}",
        total as f64 / 1e6 / (ms / 1000.0)
    );
    Ok(())
}

fn floor(root: &Path, out: &Path) -> Res<()> {
    let files = files_of(root)?;
    for fan in 0..256 {
        std::fs::create_dir_all(out.join(format!("{fan:02x}")))?;
    }
    let t = Instant::now();
    files
        .par_iter()
        .enumerate()
        .try_for_each(|(i, f)| -> std::io::Result<()> {
            let bytes = std::fs::read(f)?;
            std::fs::write(out.join(format!("{:02x}/{i}", i % 256)), bytes)
        })?;
    println!(
        "{:.1} files={}",
        t.elapsed().as_secs_f64() * 1000.0,
        files.len()
    );
    Ok(())
}

fn touch(root: &Path, i: u64) -> Res<()> {
    let p = path_of(root, i);
    let len = std::fs::metadata(&p)?.len() as usize;
    let mut w = Words(
        0xDEAD_BEEF ^ i ^ (Instant::now().elapsed().as_nanos() as u64) ^ std::process::id() as u64,
    );
    std::fs::write(&p, w.fill(len))?;
    println!("rewrote {}", p.display());
    Ok(())
}
