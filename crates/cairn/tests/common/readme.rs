//! The README, tested: its `cairn …` commands are checked against the real
//! command line, and its quick starts are run.
//!
//! What is read (README.md at the workspace root):
//! 1. **Example blocks** (```` ```sh ````, ```` ```console ````, …): every
//!    command whose program is `cairn` (found at the start of a line, after
//!    a `$ ` or `host$ ` prompt and `NAME=value` assignments, after `|`,
//!    `;`, `&&`, `||`, `&`, and inside `$(…)`), its placeholders (`ID`,
//!    `$CP`, `N`, …) given sample values, must parse: `cairn ARGS --help`
//!    (the `--help` put before a `--`) exits 0, so an unknown command, flag
//!    or value fails while nothing runs.
//! 2. **The synopsis** (untagged blocks) and **inline code** (`` `cairn …` ``
//!    in the prose) use grammar (`[--json]`, `(ID | --all)`, `…`): there each
//!    leading word must be a subcommand of the one before it (when that one
//!    has subcommands), and each `--flag` must be one that `cairn PATH
//!    --help` lists (or an alias: `cairn --resume --help` exits 0).
//! 3. **Quick starts** are ```` ```console ```` blocks after a line
//!    `<!-- readme-test: NAME -->`, run for real by [`Console::run`]: each
//!    `$ COMMAND` line runs in `sh` (stdout and stderr together) and must
//!    exit 0, and the lines after it, up to the next `$`, must match its
//!    output: a line `…` matches any number of lines, a `…` inside a line
//!    matches any text, and a session id (26 characters of a ULID) stands
//!    for the id printed there, used again by later commands. A `$ cat FILE`
//!    whose FILE is not there first writes what it is shown to print (a
//!    quick start's script is shown that way, and runs as shown). `$ cargo
//!    install --path P` is not run (the test runs the binary cargo built for
//!    it); P must be a crate. `$ export K=V` sets K for what follows.
#![allow(dead_code)]

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// README.md's text.
pub fn text() -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../README.md");
    std::fs::read_to_string(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// A fenced code block.
#[derive(Clone, Debug)]
pub struct Block {
    /// What follows the opening fence (`sh`, `console`, or empty).
    pub info: String,
    /// NAME from a `<!-- readme-test: NAME -->` line just before it.
    pub test: Option<String>,
    /// The README's line number of its first line (1-based).
    pub first_line: usize,
    /// Its lines.
    pub lines: Vec<String>,
}

/// Every fenced block, in order.
pub fn blocks(text: &str) -> Vec<Block> {
    let mut out = Vec::new();
    let mut open: Option<Block> = None;
    let mut last_comment: Option<String> = None;
    for (i, line) in text.lines().enumerate() {
        if let Some(rest) = line.strip_prefix("```") {
            match open.take() {
                Some(b) => out.push(b),
                None => {
                    open = Some(Block {
                        info: rest.trim().to_owned(),
                        test: last_comment.take(),
                        first_line: i + 2,
                        lines: Vec::new(),
                    })
                }
            }
            continue;
        }
        match &mut open {
            Some(b) => b.lines.push(line.to_owned()),
            None => {
                let t = line.trim();
                if let Some(name) = t
                    .strip_prefix("<!-- readme-test:")
                    .and_then(|r| r.strip_suffix("-->"))
                {
                    last_comment = Some(name.trim().to_owned());
                } else if !t.is_empty() {
                    last_comment = None;
                }
            }
        }
    }
    out
}

/// The block marked `<!-- readme-test: NAME -->`.
pub fn quick_start(name: &str) -> Block {
    blocks(&text())
        .into_iter()
        .find(|b| b.test.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("README.md has no block marked <!-- readme-test: {name} -->"))
}

/// How a command is checked.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// An example: it must parse as written.
    Example,
    /// Grammar: its words and flags must exist.
    Synopsis,
}

/// A `cairn` command found in the README.
#[derive(Clone, Debug)]
pub struct Found {
    /// README line.
    pub line: usize,
    pub mode: Mode,
    /// The words after `cairn`.
    pub args: Vec<String>,
    /// As written.
    pub source: String,
}

/// Every `cairn` command of the README (the rules are in the module doc).
pub fn cairn_commands(text: &str) -> Vec<Found> {
    let mut out = Vec::new();
    for b in blocks(text) {
        let info = b.info.split_whitespace().next().unwrap_or("");
        match info {
            "" => synopsis_lines(&b, &mut out),
            "sh" | "bash" | "shell" | "console" => example_lines(&b, info == "console", &mut out),
            _ => {}
        }
    }
    inline_spans(text, &mut out);
    out
}

fn example_lines(b: &Block, console: bool, out: &mut Vec<Found>) {
    let mut joined = String::new();
    let mut start = b.first_line;
    for (i, line) in b.lines.iter().enumerate() {
        let mut l = line.as_str();
        if joined.is_empty() {
            start = b.first_line + i;
            if console {
                // Only `$ ` lines are commands; the rest is output.
                match l.strip_prefix("$ ") {
                    Some(rest) => l = rest,
                    None => continue,
                }
            }
        }
        if let Some(cont) = l.strip_suffix('\\') {
            joined.push_str(cont);
            joined.push(' ');
            continue;
        }
        joined.push_str(l);
        let text = std::mem::take(&mut joined);
        let text = strip_prompt(&text);
        for words in shell_commands(text) {
            if let Some(args) = cairn_args(&words) {
                out.push(Found {
                    line: start,
                    mode: Mode::Example,
                    args,
                    source: text.trim().to_owned(),
                });
            }
        }
    }
}

/// `laptop$ cmd` → `cmd`.
fn strip_prompt(line: &str) -> &str {
    let t = line.trim_start();
    if let Some((head, rest)) = t.split_once(char::is_whitespace) {
        let name = head.strip_suffix('$');
        if name.is_some_and(|n| {
            n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        }) {
            return rest;
        }
    }
    t
}

/// The words after `cairn`, when `words` (assignments skipped) runs cairn.
fn cairn_args(words: &[String]) -> Option<Vec<String>> {
    let mut it = words.iter().skip_while(|w| is_assignment(w));
    match it.next() {
        Some(p) if p == "cairn" => Some(it.cloned().collect()),
        _ => None,
    }
}

fn is_assignment(w: &str) -> bool {
    w.split_once('=').is_some_and(|(k, _)| {
        !k.is_empty() && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
    })
}

/// The simple commands of a shell line, as words: split at `|`, `||`,
/// `&&`, `;`, `&` outside quotes, redirections and comments dropped, and
/// each `$(…)` a command of its own (a word `$(…)` in the outer one).
pub fn shell_commands(line: &str) -> Vec<Vec<String>> {
    let chars: Vec<char> = line.chars().collect();
    let mut all = Vec::new();
    scan(&chars, &mut 0, &mut all, false);
    all.retain(|c: &Vec<String>| !c.is_empty());
    all
}

/// Scans from `*i`; returns at the end, or at a `)` closing a `$(` when
/// `nested`.
fn scan(c: &[char], i: &mut usize, all: &mut Vec<Vec<String>>, nested: bool) {
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut skip_next = false;
    let end_word =
        |words: &mut Vec<String>, word: &mut String, in_word: &mut bool, skip: &mut bool| {
            if *in_word {
                if *skip {
                    *skip = false;
                } else {
                    words.push(std::mem::take(word));
                }
                word.clear();
                *in_word = false;
            }
        };
    while *i < c.len() {
        let ch = c[*i];
        match ch {
            '\'' => {
                in_word = true;
                *i += 1;
                while *i < c.len() && c[*i] != '\'' {
                    word.push(c[*i]);
                    *i += 1;
                }
            }
            '"' => {
                in_word = true;
                *i += 1;
                while *i < c.len() && c[*i] != '"' {
                    if c[*i] == '\\' && *i + 1 < c.len() {
                        *i += 1;
                    }
                    word.push(c[*i]);
                    *i += 1;
                }
            }
            '\\' if *i + 1 < c.len() => {
                in_word = true;
                word.push(c[*i + 1]);
                *i += 1;
            }
            '$' if c.get(*i + 1) == Some(&'(') => {
                *i += 2;
                scan(c, i, all, true);
                in_word = true;
                word.push_str("$(…)");
            }
            ')' if nested => {
                end_word(&mut words, &mut word, &mut in_word, &mut skip_next);
                all.push(words);
                return;
            }
            '#' if !in_word => break,
            '|' | ';' | '&' => {
                end_word(&mut words, &mut word, &mut in_word, &mut skip_next);
                all.push(std::mem::take(&mut words));
                while *i + 1 < c.len() && matches!(c[*i + 1], '|' | '&') {
                    *i += 1;
                }
            }
            '>' | '<' => {
                // `2>&1`: the 2 is a descriptor, not a word.
                if in_word && !word.is_empty() && word.chars().all(|c| c.is_ascii_digit()) {
                    word.clear();
                    in_word = false;
                }
                end_word(&mut words, &mut word, &mut in_word, &mut skip_next);
                skip_next = true;
                while *i + 1 < c.len() && matches!(c[*i + 1], '>' | '&') {
                    *i += 1;
                }
            }
            w if w.is_whitespace() => end_word(&mut words, &mut word, &mut in_word, &mut skip_next),
            _ => {
                in_word = true;
                word.push(ch);
            }
        }
        *i += 1;
    }
    end_word(&mut words, &mut word, &mut in_word, &mut skip_next);
    all.push(words);
}

fn synopsis_lines(b: &Block, out: &mut Vec<Found>) {
    let mut current: Option<(usize, String)> = None;
    let flush = |current: &mut Option<(usize, String)>, out: &mut Vec<Found>| {
        if let Some((line, text)) = current.take() {
            push_synopsis(line, &text, out);
        }
    };
    for (i, line) in b.lines.iter().enumerate() {
        if line.starts_with("cairn ") || line == "cairn" {
            flush(&mut current, out);
            current = Some((b.first_line + i, line.clone()));
        } else if line.starts_with(char::is_whitespace) && !line.trim().is_empty() {
            if let Some((_, text)) = &mut current {
                text.push(' ');
                text.push_str(line.trim());
            }
        } else {
            flush(&mut current, out);
        }
    }
    flush(&mut current, out);
}

/// A synopsis text, split at each `cairn` it names (`(= cairn session ls)`).
fn push_synopsis(line: usize, text: &str, out: &mut Vec<Found>) {
    let cleaned: String = text
        .chars()
        .map(|c| if "[](){}|,…=".contains(c) { ' ' } else { c })
        .collect();
    let mut parts: Vec<Vec<String>> = Vec::new();
    for w in cleaned.split_whitespace() {
        if w == "cairn" {
            parts.push(Vec::new());
        } else if let Some(p) = parts.last_mut() {
            p.push(
                w.trim_matches(|c| c == '`' || c == '.' || c == ':')
                    .to_owned(),
            );
        }
    }
    for args in parts {
        out.push(Found {
            line,
            mode: Mode::Synopsis,
            args,
            source: text.trim().to_owned(),
        });
    }
}

/// `` `cairn …` `` spans of the prose (outside blocks).
fn inline_spans(text: &str, out: &mut Vec<Found>) {
    let mut in_block = false;
    for (i, line) in text.lines().enumerate() {
        if line.starts_with("```") {
            in_block = !in_block;
            continue;
        }
        if in_block {
            continue;
        }
        let mut rest = line;
        while let Some(open) = rest.find('`') {
            let after = &rest[open + 1..];
            let Some(close) = after.find('`') else { break };
            let span = &after[..close];
            if span.starts_with("cairn ") {
                push_synopsis(i + 1, span, out);
            }
            rest = &after[close + 1..];
        }
    }
}

/// Sample values for the README's placeholders, so that a line parses as
/// a user's would.
fn sample(word: &str) -> String {
    let bare = word.trim_start_matches('$');
    let is_placeholder =
        !bare.is_empty() && bare.chars().all(|c| c.is_ascii_uppercase() || c == '_');
    if !is_placeholder {
        return word.to_owned();
    }
    match bare {
        "ID" | "PARENT" | "NEW" => "01K4Z8M2X6Q9T3V7B1N5R0HJWD",
        "CP" => "cp_01K4Z8M2X6Q9T3V7B1N5R0HJWD",
        "SNAP" => "sn_01K4Z8M2X6Q9T3V7B1N5R0HJWD",
        "N" | "SEQ" => "3",
        "USD" => "1.5",
        "D" | "DURATION" => "1h",
        "ADDR" => "127.0.0.1:1",
        "URL" => "http://127.0.0.1:1",
        "SIZE" => "1G",
        _ => "x",
    }
    .to_owned()
}

/// The `cairn` binary's help, per command path, for the synopsis checks.
pub struct Cli {
    bin: PathBuf,
    helps: HashMap<Vec<String>, Option<Help>>,
}

#[derive(Clone)]
struct Help {
    text: String,
    commands: Vec<String>,
}

impl Cli {
    pub fn new(bin: PathBuf) -> Cli {
        Cli {
            bin,
            helps: HashMap::new(),
        }
    }

    fn run(&self, args: &[String]) -> std::process::Output {
        Command::new(&self.bin)
            .args(args)
            .env("CAIRN_STORE", "/nonexistent/cairn-readme-check")
            .output()
            .unwrap()
    }

    fn help(&mut self, path: &[String]) -> Option<Help> {
        if let Some(h) = self.helps.get(path) {
            return h.clone();
        }
        let mut args = path.to_vec();
        args.push("--help".into());
        let out = self.run(&args);
        let help = out.status.success().then(|| {
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            let commands = text
                .split("Commands:\n")
                .nth(1)
                .map(|section| {
                    section
                        .lines()
                        .take_while(|l| !l.trim().is_empty())
                        .filter(|l| l.starts_with("  ") && !l.starts_with("   "))
                        .filter_map(|l| l.split_whitespace().next().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
            Help { text, commands }
        });
        self.helps.insert(path.to_vec(), help.clone());
        help
    }

    /// Why `found` does not stand for a real command line, if it does not.
    pub fn check(&mut self, found: &Found) -> Result<(), String> {
        match found.mode {
            Mode::Example => {
                let args: Vec<String> = found.args.iter().map(|a| sample(a)).collect();
                self.structure(&args)?;
                let mut with_help = args.clone();
                let at = with_help
                    .iter()
                    .position(|a| a == "--")
                    .unwrap_or(with_help.len());
                with_help.insert(at, "--help".into());
                let out = self.run(&with_help);
                if out.status.success() {
                    Ok(())
                } else {
                    Err(format!(
                        "`cairn {}` does not parse: {}",
                        with_help.join(" "),
                        String::from_utf8_lossy(&out.stderr).trim()
                    ))
                }
            }
            Mode::Synopsis => self.structure(&found.args),
        }
    }

    /// The words name commands that exist, and the flags are theirs.
    fn structure(&mut self, args: &[String]) -> Result<(), String> {
        const ALIASES: [&str; 4] = ["--sessions", "--continue", "--resume", "--fork"];
        let root = self.help(&[]).ok_or("cairn --help fails")?;
        let mut path: Vec<String> = Vec::new();
        let mut open = true;
        let mut flags = Vec::new();
        let mut i = 0;
        while i < args.len() {
            let w = &args[i];
            i += 1;
            if w == "--" {
                break;
            }
            if w.starts_with('-') && w.len() > 1 {
                let flag = w.split('=').next().unwrap_or(w).to_owned();
                if ALIASES.contains(&flag.as_str()) {
                    let out = self.run(&[flag.clone(), "--help".into()]);
                    if !out.status.success() {
                        return Err(format!("the alias {flag} does not work"));
                    }
                    open = false;
                    continue;
                }
                flags.push((path.clone(), flag.clone()));
                // `--version` and `--help` answer and exit: what follows
                // them on a synopsis line is its description.
                if ["--version", "--help", "-V", "-h"].contains(&flag.as_str()) {
                    open = false;
                    continue;
                }
                // A flag's value is not a command word.
                let help = self.help(&path).unwrap_or_else(|| root.clone());
                if takes_value(&help.text, &flag) && !w.contains('=') {
                    i += 1;
                }
                continue;
            }
            if !open {
                continue;
            }
            let help = self
                .help(&path)
                .ok_or_else(|| format!("`cairn {}` has no help", path.join(" ")))?;
            let word = w.chars().all(|c| c.is_ascii_lowercase() || c == '-') && !w.is_empty();
            if help.commands.is_empty() || !word {
                open = false;
                continue;
            }
            if !help.commands.contains(w) {
                return Err(format!(
                    "`cairn {}` is not a command: `cairn {}` has {}",
                    path.iter()
                        .chain([w])
                        .cloned()
                        .collect::<Vec<_>>()
                        .join(" "),
                    path.join(" "),
                    help.commands.join(", ")
                ));
            }
            path.push(w.clone());
        }
        for (at, flag) in flags {
            let help = self.help(&at).unwrap_or_else(|| root.clone());
            if !has_flag(&help.text, &flag) && !has_flag(&root.text, &flag) {
                return Err(format!("`cairn {}` has no flag {flag}", at.join(" ")));
            }
        }
        Ok(())
    }
}

/// Whether `help` lists `flag` (as a word: `--json` is not `--json-x`).
fn has_flag(help: &str, flag: &str) -> bool {
    help.match_indices(flag).any(|(at, _)| {
        let before = help[..at].chars().next_back();
        let after = help[at + flag.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
            && !after.is_some_and(|c| c.is_ascii_alphanumeric() || c == '-')
    })
}

/// Whether `help` shows `flag` taking a value (`--store <DIR>`).
fn takes_value(help: &str, flag: &str) -> bool {
    help.lines().any(|l| {
        let t = l.trim_start();
        (t.starts_with(flag) || t.contains(&format!(", {flag}")))
            && t.split(flag).nth(1).is_some_and(|r| r.starts_with(" <"))
    })
}

/// The environment a quick start runs in: this build's `cairn` first on
/// `PATH`, a scratch store, home and configuration, and both APIs at the
/// mock upstream with test keys.
pub fn quick_start_env(
    s: &crate::common::Scratch,
    upstream: &cairn_testkit::upstream::Upstream,
) -> Vec<(String, String)> {
    let bin = assert_cmd::cargo::cargo_bin("cairn");
    let home = s.dir.path().join("home");
    std::fs::create_dir_all(&home).unwrap();
    let path = format!(
        "{}:{}",
        bin.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    [
        ("PATH", path),
        ("HOME", home.display().to_string()),
        (
            "XDG_CONFIG_HOME",
            home.join(".config").display().to_string(),
        ),
        ("CAIRN_STORE", s.store.display().to_string()),
        ("OPENAI_BASE_URL", upstream.openai_base_url()),
        ("ANTHROPIC_BASE_URL", upstream.base_url()),
        ("OPENAI_API_KEY", "sk-cairn-readme".into()),
        ("ANTHROPIC_API_KEY", "sk-ant-cairn-readme".into()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect()
}

/// `env` with `dir` first on its `PATH`.
pub fn with_path_first(env: &mut [(String, String)], dir: &Path) {
    for (k, v) in env.iter_mut() {
        if k == "PATH" {
            *v = format!("{}:{v}", dir.display());
        }
    }
}

/// Runs quick starts (module doc, rule 3) in a scratch directory.
pub struct Console {
    /// Where commands run.
    pub dir: PathBuf,
    /// The environment every command gets (on top of a cleared one).
    pub env: Vec<(String, String)>,
    /// README id → the real one.
    pub ids: HashMap<String, String>,
    /// What ran and what it printed, as a terminal would show it.
    pub transcript: String,
}

impl Console {
    pub fn new(dir: PathBuf, env: Vec<(String, String)>) -> Console {
        Console {
            dir,
            env,
            ids: HashMap::new(),
            transcript: String::new(),
        }
    }

    /// Runs every `$` line of `block` and matches its output.
    pub fn run(&mut self, block: &Block) {
        let steps = steps(block);
        for (n, (line, command, expected)) in steps.into_iter().enumerate() {
            if command.starts_with("cargo install ") {
                // The install line: what it installs must be there (the
                // test runs the binary cargo built).
                let path = command
                    .split("--path ")
                    .nth(1)
                    .and_then(|r| r.split_whitespace().next());
                let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
                assert!(
                    path.is_some_and(|p| root.join(p).join("Cargo.toml").is_file()),
                    "README line {line}: {command}"
                );
                self.transcript.push_str(&format!("$ {command}\n"));
                continue;
            }
            if let Some(assign) = command.strip_prefix("export ") {
                for (k, v) in assign.split_whitespace().filter_map(|a| a.split_once('=')) {
                    self.env.retain(|(key, _)| key != k);
                    self.env.push((k.to_owned(), v.to_owned()));
                }
                self.transcript.push_str(&format!("$ {command}\n"));
                continue;
            }
            if let Some(file) = command.strip_prefix("cat ").map(str::trim) {
                // A file the quick start shows is the file it uses.
                let path = self.dir.join(file);
                if !path.exists() {
                    std::fs::write(&path, format!("{}\n", expected.join("\n"))).unwrap();
                }
            }
            let mut real = command.clone();
            for (readme, id) in &self.ids {
                real = real.replace(readme.as_str(), id);
            }
            let out = Command::new("sh")
                .arg("-c")
                .arg(format!("exec 2>&1; {real}"))
                .current_dir(&self.dir)
                .env_clear()
                .envs(self.env.iter().map(|(k, v)| (k, v)))
                .stdin(std::process::Stdio::null())
                .output()
                .unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            self.transcript.push_str(&format!("$ {real}\n{text}"));
            assert!(
                out.status.success(),
                "README line {line}, step {n}: `{real}` exited {:?}:\n{text}",
                out.status
            );
            let actual: Vec<&str> = text.lines().collect();
            let expected: Vec<&str> = expected.iter().map(String::as_str).collect();
            match match_lines(&expected, &actual, &self.ids) {
                Some(ids) => self.ids = ids,
                None => panic!(
                    "README line {line}: the output of `{real}` does not match.\nREADME:\n{}\nactual:\n{text}",
                    expected.join("\n")
                ),
            }
        }
    }
}

/// `(README line, command, expected output lines)` of each `$` line.
fn steps(block: &Block) -> Vec<(usize, String, Vec<String>)> {
    let mut out: Vec<(usize, String, Vec<String>)> = Vec::new();
    for (i, l) in block.lines.iter().enumerate() {
        match l.strip_prefix("$ ") {
            Some(cmd) => out.push((block.first_line + i, cmd.to_owned(), Vec::new())),
            None => {
                if let Some(step) = out.last_mut() {
                    step.2.push(l.clone());
                }
            }
        }
    }
    out
}

/// Whether `actual` matches `expected` (module doc, rule 3); the ids bound
/// on the way when it does.
pub fn match_lines(
    expected: &[&str],
    actual: &[&str],
    ids: &HashMap<String, String>,
) -> Option<HashMap<String, String>> {
    match expected.split_first() {
        None => actual.is_empty().then(|| ids.clone()),
        Some((e, rest)) if e.trim() == "…" => {
            (0..=actual.len()).find_map(|k| match_lines(rest, &actual[k..], ids))
        }
        Some((e, rest)) => {
            let (a, more) = actual.split_first()?;
            let ids = match_line(e, a, ids)?;
            match_lines(rest, more, &ids)
        }
    }
}

/// One line: `…` is any text, an id binds or must equal its binding.
pub fn match_line(
    expected: &str,
    actual: &str,
    ids: &HashMap<String, String>,
) -> Option<HashMap<String, String>> {
    let pieces = pieces(expected);
    match_pieces(&pieces, actual, ids.clone())
}

#[derive(Debug)]
enum Piece {
    Text(String),
    Any,
    Id(String),
}

fn pieces(line: &str) -> Vec<Piece> {
    let mut out = Vec::new();
    let mut text = String::new();
    let chars: Vec<char> = line.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '…' {
            out.push(Piece::Text(std::mem::take(&mut text)));
            out.push(Piece::Any);
            i += 1;
            continue;
        }
        let boundary = i == 0 || !chars[i - 1].is_ascii_alphanumeric();
        if boundary && i + 26 <= chars.len() {
            let cand: String = chars[i..i + 26].iter().collect();
            let after_ok = chars.get(i + 26).is_none_or(|c| !c.is_ascii_alphanumeric());
            if after_ok && is_ulid(&cand) {
                out.push(Piece::Text(std::mem::take(&mut text)));
                out.push(Piece::Id(cand));
                i += 26;
                continue;
            }
        }
        text.push(chars[i]);
        i += 1;
    }
    out.push(Piece::Text(text));
    out
}

fn is_ulid(s: &str) -> bool {
    s.len() == 26
        && s.starts_with(|c: char| ('0'..='7').contains(&c))
        && s.chars()
            .all(|c| c.is_ascii_digit() || (c.is_ascii_uppercase() && !"ILOU".contains(c)))
}

fn match_pieces(
    pieces: &[Piece],
    actual: &str,
    ids: HashMap<String, String>,
) -> Option<HashMap<String, String>> {
    let Some((p, rest)) = pieces.split_first() else {
        return actual.is_empty().then_some(ids);
    };
    match p {
        Piece::Text(t) => match_pieces(rest, actual.strip_prefix(t.as_str())?, ids),
        Piece::Any => actual
            .char_indices()
            .map(|(i, _)| i)
            .chain([actual.len()])
            .find_map(|i| match_pieces(rest, &actual[i..], ids.clone())),
        Piece::Id(readme) => {
            let got = actual.get(..26).filter(|g| is_ulid(g))?;
            match ids.get(readme) {
                Some(bound) if bound != got => None,
                _ => {
                    let mut ids = ids;
                    ids.insert(readme.clone(), got.to_owned());
                    match_pieces(rest, &actual[26..], ids)
                }
            }
        }
    }
}
