//! Following a journal that another process (a CLI run) is writing.
//!
//! A [`Follower`] reads a journal file as it grows, from the offset where it
//! stopped, and checks each new line exactly as a reader does (DESIGN §2):
//!
//! 1. A line is the bytes up to a `\n`. Bytes after the last `\n` are a line
//!    being written: they are kept in memory and completed by a later poll.
//!    NUL bytes are space the writer preallocated: reading stops at the
//!    first, and the next poll reads from there again.
//! 2. Line 1 must be a `meta` naming the followed run; its fork pin, if any,
//!    gives `h(0)` (`ChainHash::fork_genesis`), else `ChainHash::genesis`.
//! 3. Line n must carry `seq` n and `prev` = `h(n-1)`. When `prev` is wrong,
//!    the break is blamed on line n-1 if line n is consistent with line n+1
//!    (or nothing follows it), as `cairn verify` blames it; else on line n.
//! 4. A record of a newer schema, or whose body does not match its kind, is
//!    an error at its seq.
//! 5. Records before a bad line are returned; the error comes from the next
//!    poll. Before reporting a bad line, the follower re-reads the bytes it
//!    has not yet consumed, once, from the end of the last good line: a new
//!    writer may have cut a torn tail under it and appended since.
//! 6. A file shorter than the bytes already consumed is an error: it was
//!    replaced or cut by hand.
//!
//! Consumed bytes are never read again. It does not take the journal's lock
//! (readers take none) and it does not detect a change to a record it has
//! already returned: only a later record's `prev` can show that (rule 3).

use std::borrow::Cow;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use cairn_journal::{ChainHash, ForkPin, Record, RecordBody, SCHEMA_VERSION};
use serde::Deserialize;

/// Follows a journal file as it grows (a CLI run writing it): reads complete
/// new lines from where it stopped, verifies each continues the hash chain,
/// and returns the new records. A line without its newline yet (being
/// written) is left for the next poll; a line that breaks the chain is an
/// error naming the seq.
#[derive(Debug)]
pub struct Follower {
    path: PathBuf,
    run: String,
    file: File,
    /// Bytes of the verified lines returned so far.
    consumed: u64,
    /// Bytes read after `consumed` that do not make a good line yet.
    pending: Vec<u8>,
    /// `h(seq)`, or `None` before the meta record (which fixes `h(0)`).
    tail: Option<ChainHash>,
    /// The seq of the last record returned.
    seq: u64,
    /// Bytes of the last line returned, with its newline (0 before it).
    last_len: u64,
}

/// Why following a journal failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FollowError {
    /// Opening or reading the file failed.
    #[error("{action} journal {path} failed: {source}")]
    Io {
        /// What the follower was doing.
        action: &'static str,
        /// The journal.
        path: PathBuf,
        /// The cause.
        #[source]
        source: io::Error,
    },
    /// A record does not verify; everything before `seq` verified.
    #[error("journal {path} is damaged at seq {seq} (byte {offset}): {reason}. The records before seq {seq} are intact; `cairn verify` shows the details")]
    Damaged {
        /// The journal.
        path: PathBuf,
        /// The first bad seq.
        seq: u64,
        /// Byte offset of the bad record.
        offset: u64,
        /// What is wrong.
        reason: String,
    },
    /// A record written by a newer cairn.
    #[error("journal {path} has a record of schema v{found} at seq {seq}; this cairn reads up to v{supported}: upgrade cairn to follow it")]
    NewerSchema {
        /// The journal.
        path: PathBuf,
        /// The record.
        seq: u64,
        /// Its version.
        found: u32,
        /// The newest this build reads.
        supported: u32,
    },
    /// The meta record names another run.
    #[error("journal {path} belongs to session {found}, not {expected}: follow the session it belongs to")]
    WrongRun {
        /// The journal.
        path: PathBuf,
        /// The run followed.
        expected: String,
        /// The run its meta names.
        found: String,
    },
    /// The file shrank below what was already followed.
    #[error("journal {path} shrank to {len} bytes, below the {consumed} bytes already followed: it was replaced or cut by hand; run `cairn verify` and follow it again")]
    Shrank {
        /// The journal.
        path: PathBuf,
        /// Its length now.
        len: u64,
        /// Bytes already followed.
        consumed: u64,
    },
}

/// The header fields every line has.
#[derive(Deserialize)]
struct Head<'a> {
    v: u32,
    seq: u64,
    #[serde(borrow)]
    prev: Cow<'a, str>,
    #[serde(borrow)]
    kind: Cow<'a, str>,
}

/// What the meta line must hold to compute `h(0)`.
#[derive(Deserialize)]
struct MetaHead {
    run: String,
    #[serde(default)]
    fork: Option<ForkPin>,
}

/// A problem found at a line, before the path is attached.
enum Problem {
    Damaged {
        seq: u64,
        offset: u64,
        reason: String,
    },
    Newer {
        seq: u64,
        found: u32,
    },
    WrongRun {
        found: String,
    },
}

impl Follower {
    /// Opens the journal at `path` of run `run` for following; reads nothing
    /// yet.
    ///
    /// # Errors
    /// [`FollowError::Io`] when the file cannot be opened.
    pub fn open(path: &Path, run: &str) -> Result<Follower, FollowError> {
        let file = File::open(path).map_err(|source| FollowError::Io {
            action: "opening",
            path: path.to_path_buf(),
            source,
        })?;
        Ok(Follower {
            path: path.to_path_buf(),
            run: run.to_owned(),
            file,
            consumed: 0,
            pending: Vec::new(),
            tail: None,
            seq: 0,
            last_len: 0,
        })
    }

    /// New complete records since the last call (the first call returns all
    /// of them), each with its exact line (without the newline).
    ///
    /// # Errors
    /// [`FollowError::Damaged`], [`FollowError::NewerSchema`] or
    /// [`FollowError::WrongRun`] for the first bad line (only once the good
    /// lines before it were returned, rule 5); [`FollowError::Shrank`];
    /// [`FollowError::Io`]. The follower stays where it was: a later poll
    /// reports the same problem, or goes on if a writer repaired the tail.
    pub fn poll(&mut self) -> Result<Vec<(Record, String)>, FollowError> {
        let len = self
            .file
            .metadata()
            .map_err(|e| self.io("reading the length of", e))?
            .len();
        if len < self.consumed {
            return Err(FollowError::Shrank {
                path: self.path.clone(),
                len,
                consumed: self.consumed,
            });
        }
        if len < self.read_to() {
            // The unconsumed tail was cut (a writer cutting a torn tail).
            self.pending.clear();
        }
        self.read_new()?;
        let mut out = Vec::new();
        let Err(_) = self.take_lines(&mut out) else {
            return Ok(out);
        };
        // Rule 5: the bytes after the last good line may be stale.
        self.pending.clear();
        self.read_new()?;
        match self.take_lines(&mut out) {
            Ok(()) => Ok(out),
            Err(_) if !out.is_empty() => Ok(out),
            Err(p) => Err(self.error(p)),
        }
    }

    /// The seq of the last record returned (0 before the first).
    pub fn seq(&self) -> u64 {
        self.seq
    }

    /// `h(seq)` of the last record returned (`None` before the first).
    pub fn tail(&self) -> Option<ChainHash> {
        self.tail
    }

    /// Bytes of the journal returned so far (the end of the last good line).
    pub fn offset(&self) -> u64 {
        self.consumed
    }

    /// The journal followed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn read_to(&self) -> u64 {
        self.consumed + self.pending.len() as u64
    }

    /// Appends the bytes after what was read to `pending`, up to the first
    /// NUL byte: from there on the file is space its writer preallocated
    /// and has not written yet (no record holds a raw NUL), to be read again
    /// once it is.
    fn read_new(&mut self) -> Result<(), FollowError> {
        let at = self.read_to();
        if let Err(e) = self.file.seek(SeekFrom::Start(at)) {
            return Err(self.io("seeking in", e));
        }
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            let n = match self.file.read(&mut chunk) {
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(self.io("reading", e)),
            };
            if n == 0 {
                return Ok(());
            }
            match chunk[..n].iter().position(|&b| b == 0) {
                Some(i) => {
                    self.pending.extend_from_slice(&chunk[..i]);
                    return Ok(());
                }
                None => self.pending.extend_from_slice(&chunk[..n]),
            }
        }
    }

    /// Takes every complete good line from `pending` into `out`; stops at a
    /// cut line (Ok) or a bad one (Err, the bad line left in `pending`).
    fn take_lines(&mut self, out: &mut Vec<(Record, String)>) -> Result<(), Problem> {
        let mut pos = 0;
        let result = loop {
            let Some(end) = next_newline(&self.pending, pos) else {
                break Ok(());
            };
            match self.check_line(pos, end) {
                Ok((record, tail)) => {
                    let line = &self.pending[pos..end];
                    // `check_line` parsed it as JSON, so it is UTF-8.
                    let text = String::from_utf8_lossy(line).into_owned();
                    out.push((record, text));
                    self.tail = Some(tail);
                    self.seq += 1;
                    self.last_len = (end + 1 - pos) as u64;
                    self.consumed += self.last_len;
                    pos = end + 1;
                }
                Err(p) => break Err(p),
            }
        };
        self.pending.drain(..pos);
        result
    }

    /// Checks line `pending[pos..end]` as record `self.seq + 1`; returns it
    /// and its chain hash.
    fn check_line(&self, pos: usize, end: usize) -> Result<(Record, ChainHash), Problem> {
        let line = &self.pending[pos..end];
        let seq = self.seq + 1;
        let offset = self.consumed;
        let damaged = |reason: String| Problem::Damaged {
            seq,
            offset,
            reason,
        };
        let head: Head = serde_json::from_slice(line)
            .map_err(|e| damaged(format!("not a valid record ({e})")))?;
        if head.seq != seq {
            return Err(damaged(format!(
                "record carries seq {} where {seq} was expected",
                head.seq
            )));
        }
        let prev = match self.tail {
            Some(tail) => tail,
            None => self.genesis(line, &head).map_err(|p| match p {
                Some(p) => p,
                None => damaged("the first record is not a valid `meta`".into()),
            })?,
        };
        let stated = ChainHash::from_hex(&head.prev);
        if stated != Some(prev) {
            return Err(self.blame_broken_link(pos, end, seq, stated));
        }
        if head.v > SCHEMA_VERSION {
            return Err(Problem::Newer { seq, found: head.v });
        }
        let record = Record::from_line(line).map_err(|e| {
            damaged(format!(
                "the `{}` record does not match its schema: {e}",
                head.kind
            ))
        })?;
        if seq > 1 && matches!(record.body, RecordBody::Meta(_)) {
            return Err(damaged("a second `meta` record".into()));
        }
        Ok((record, prev.next(line)))
    }

    /// `h(0)` from the meta line (rule 2); `Err(None)` when it is not a meta.
    fn genesis(&self, line: &[u8], head: &Head) -> Result<ChainHash, Option<Problem>> {
        if head.kind != "meta" {
            return Err(None);
        }
        let meta: MetaHead = serde_json::from_slice(line).map_err(|_| None)?;
        if meta.run != self.run {
            return Err(Some(Problem::WrongRun { found: meta.run }));
        }
        Ok(match &meta.fork {
            Some(f) => ChainHash::fork_genesis(&f.parent, f.seq, &f.hash),
            None => ChainHash::genesis(&self.run),
        })
    }

    /// Line `seq` (at `pending[pos..end]`) states `prev` ≠ `h(seq-1)`. Blame
    /// seq-1 when line seq is consistent with the line after it, or when no
    /// complete line follows (rule 3, as `cairn verify`).
    fn blame_broken_link(
        &self,
        pos: usize,
        end: usize,
        seq: u64,
        stated: Option<ChainHash>,
    ) -> Problem {
        let line = &self.pending[pos..end];
        let here_if_stated = stated.map(|s| s.next(line));
        let next_end = next_newline(&self.pending, end + 1);
        let next_prev = next_end.and_then(|e2| {
            serde_json::from_slice::<Head>(&self.pending[end + 1..e2])
                .ok()
                .and_then(|h| ChainHash::from_hex(&h.prev))
        });
        let blame_previous = seq > 1
            && match (here_if_stated, next_prev) {
                (Some(a), Some(b)) => a == b,
                (Some(_), None) => next_end.is_none(),
                _ => false,
            };
        if blame_previous {
            Problem::Damaged {
                seq: seq - 1,
                offset: self.consumed - self.last_len,
                reason: format!(
                    "its bytes no longer match the chain hash that seq {seq} records for it"
                ),
            }
        } else {
            Problem::Damaged {
                seq,
                offset: self.consumed,
                reason: "its `prev` does not match the chain hash of the record before it".into(),
            }
        }
    }

    fn io(&self, action: &'static str, source: io::Error) -> FollowError {
        FollowError::Io {
            action,
            path: self.path.clone(),
            source,
        }
    }

    fn error(&self, p: Problem) -> FollowError {
        let path = self.path.clone();
        match p {
            Problem::Damaged {
                seq,
                offset,
                reason,
            } => FollowError::Damaged {
                path,
                seq,
                offset,
                reason,
            },
            Problem::Newer { seq, found } => FollowError::NewerSchema {
                path,
                seq,
                found,
                supported: SCHEMA_VERSION,
            },
            Problem::WrongRun { found } => FollowError::WrongRun {
                path,
                expected: self.run.clone(),
                found,
            },
        }
    }
}

fn next_newline(bytes: &[u8], from: usize) -> Option<usize> {
    bytes
        .get(from..)?
        .iter()
        .position(|&b| b == b'\n')
        .map(|i| from + i)
}
