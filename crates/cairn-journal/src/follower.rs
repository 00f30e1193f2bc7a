//! Following a journal that another process (its writer) is appending to.
//!
//! A [`JournalFollower`] is an [`IncrementalReader`] fed from a file:
//! 1. Each poll reads the file from the end of the consumed lines to its
//!    end and judges those bytes afresh (`forget_unconsumed`): only they can
//!    have changed since the last poll — the writer overwrites the zeros it
//!    preallocated, and a new writer cuts a torn tail and appends after it.
//!    Consumed lines are never read again.
//! 2. It reports what `cairn verify` reports of the bytes it has, at the
//!    moment it read them: new records first (a poll that yields records
//!    returns them, and any problem comes from the next poll); a torn tail
//!    (a line being written, zeros preallocated, a final region that holds
//!    no record yet) is waited for, not reported; so is a journal whose
//!    `meta` line is not complete yet (`verify` calls that damage at seq 1,
//!    creation interrupted; a follower cannot tell it from a creation in
//!    progress).
//! 3. Before reporting a problem it reads once more: a read racing a
//!    writer that cuts a torn tail can see some of both.
//! 4. A file shorter than the bytes consumed is an error: it was replaced
//!    or cut by hand.
//!
//! It takes no lock (readers take none), and it does not detect a change to
//! a line it has consumed: only a later line's `prev` can show that (rule 4
//! of the reader).

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use crate::chain::ChainHash;
use crate::incremental::{IncrementalReader, Problem};
use crate::record::Record;
use crate::JournalError;

/// Follows a journal file as it grows: each [`JournalFollower::poll`]
/// returns the records completed since the last one, every record once, in
/// order, however the bytes arrive.
#[derive(Debug)]
pub struct JournalFollower {
    path: PathBuf,
    run: String,
    file: File,
    reader: IncrementalReader,
}

impl JournalFollower {
    /// Opens the journal at `path` of run `run` for following; reads
    /// nothing yet.
    ///
    /// # Errors
    /// [`JournalError::Io`] when the file cannot be opened.
    pub fn open(path: &Path, run: &str) -> Result<JournalFollower, JournalError> {
        let file = File::open(path).map_err(|e| JournalError::io("opening", path, e))?;
        Ok(JournalFollower {
            path: path.to_path_buf(),
            run: run.to_owned(),
            file,
            reader: IncrementalReader::new(run),
        })
    }

    /// New complete records since the last call (the first call returns all
    /// of them), each with its exact line (without the newline).
    ///
    /// # Errors
    /// [`JournalError::Damaged`], [`JournalError::NewerSchema`] or
    /// [`JournalError::WrongRun`] (`expected` is the run followed): what
    /// `cairn verify` reports of the bytes read, once the records before
    /// the problem were returned; [`JournalError::Shrank`];
    /// [`JournalError::Io`]. The follower stays where it was: a later poll
    /// reports the same problem, another one that later bytes show first,
    /// or goes on if a writer repaired the tail.
    pub fn poll(&mut self) -> Result<Vec<(Record, String)>, JournalError> {
        let new = self.read_again()?;
        if !new.is_empty() || self.problem().is_none() {
            return Ok(new);
        }
        let new = self.read_again()?;
        match self.problem() {
            Some(p) if new.is_empty() => Err(self.error(p)),
            _ => Ok(new),
        }
    }

    /// The seq of the last record returned (0 before the first).
    pub fn seq(&self) -> u64 {
        self.reader.seq()
    }

    /// `h(seq)` of the last record returned (`None` before the first).
    pub fn tail(&self) -> Option<ChainHash> {
        self.reader.tail()
    }

    /// Bytes of the journal returned so far (the end of the last record
    /// returned).
    pub fn offset(&self) -> u64 {
        self.reader.offset()
    }

    /// The journal followed.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// What `cairn verify` says of the bytes read so far.
    pub fn report(&self) -> crate::VerifyReport {
        self.reader.report()
    }

    /// Reads the bytes after the consumed lines, as the file holds them
    /// now, into the reader (rule 1).
    fn read_again(&mut self) -> Result<Vec<(Record, String)>, JournalError> {
        let consumed = self.reader.consumed();
        let len = self
            .file
            .metadata()
            .map_err(|e| JournalError::io("reading the length of", &self.path, e))?
            .len();
        if len < consumed {
            return Err(JournalError::Shrank {
                path: self.path.clone(),
                len,
                consumed,
            });
        }
        self.file
            .seek(SeekFrom::Start(consumed))
            .map_err(|e| JournalError::io("seeking in", &self.path, e))?;
        let mut bytes = Vec::with_capacity(usize::try_from(len - consumed).unwrap_or(0));
        self.file
            .read_to_end(&mut bytes)
            .map_err(|e| JournalError::io("reading", &self.path, e))?;
        self.reader.forget_unconsumed();
        Ok(self.reader.push(&bytes))
    }

    /// The problem to report, if any (rule 2: not a missing `meta` line).
    fn problem(&self) -> Option<Problem> {
        match self.reader.outcome().problem {
            Some(Problem::Unstarted) | None => None,
            Some(p) => Some(p),
        }
    }

    fn error(&self, p: Problem) -> JournalError {
        p.into_error(&self.path, self.run.clone())
    }
}
