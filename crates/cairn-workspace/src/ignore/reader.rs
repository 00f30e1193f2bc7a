//! Reading rule files: one reader for the root's file and every nested one.
//!
//! Every file is opened relative to its directory's descriptor with
//! `O_NOFOLLOW | O_NONBLOCK`: a symlink is never followed (git refuses a
//! symlinked `.gitignore` too) and a FIFO never blocks a capture. Only a
//! regular file is read, and at most [`RULE_FILE_MAX`] bytes of it. A
//! directory of that name is no file at all (as git treats it, at any depth).
//! What a place does with a file it cannot use differs only in policy: the
//! root's unreadable or oversized file is an error (the project's own rules
//! would silently not apply), a nested one is a warning; a symlink or a
//! special file is a warning everywhere.

use std::fs::File;
use std::io::Read;
use std::os::fd::BorrowedFd;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;

use rustix::fs::{Mode, OFlags};

use super::matcher::{Chain, Group, Link};
use super::rule::compile_file;
use super::{IgnoreRules, IgnoreWarning};

/// A rule file larger than this is not read.
pub(crate) const RULE_FILE_MAX: u64 = 4 << 20;

/// One file opened by the reader's rule.
pub(super) enum Opened {
    /// Missing, or a directory.
    Absent,
    /// A regular file, and its length.
    File(File, u64),
    /// Something is there that is not read.
    Unusable(Unusable),
}

/// What reading a rule file gave.
pub(super) enum RuleText {
    /// Missing, or a directory.
    Absent,
    /// The file's bytes.
    Text(Vec<u8>),
    /// Something is there whose rules cannot be used.
    Unusable(Unusable),
}

/// Why a file that is there is not read.
#[derive(Debug)]
pub(super) enum Unusable {
    /// A symbolic link: never followed.
    Symlink,
    /// A FIFO, socket or device.
    Special,
    /// Longer than [`RULE_FILE_MAX`].
    TooLarge(u64),
    /// It cannot be opened or read.
    Unreadable(std::io::Error),
}

impl Unusable {
    /// The warning for a file of `path` that is not read.
    pub(super) fn warning(&self, path: &Path) -> IgnoreWarning {
        let reason = match self {
            Unusable::Symlink => {
                "the file is a symbolic link, which cairn (like git) does not follow; its rules do not apply".to_owned()
            }
            Unusable::Special => {
                "the file is not a regular file (a FIFO, socket or device); its rules do not apply".to_owned()
            }
            Unusable::TooLarge(len) => format!(
                "the file ({len} bytes) is over the {RULE_FILE_MAX}-byte limit for a rule file; its rules do not apply"
            ),
            Unusable::Unreadable(e) => {
                format!("the file cannot be read ({e}); its rules do not apply")
            }
        };
        IgnoreWarning {
            source: path.to_owned(),
            line: 0,
            reason,
        }
    }

    /// True when the root's file being so is an error rather than a warning.
    pub(super) fn is_error_at_root(&self) -> bool {
        matches!(self, Unusable::TooLarge(_) | Unusable::Unreadable(_))
    }

    /// As an IO error, for [`crate::WorkspaceError::IgnoreFile`].
    pub(super) fn into_io(self) -> std::io::Error {
        match self {
            Unusable::Unreadable(e) => e,
            Unusable::TooLarge(len) => std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "the file is {len} bytes, over the {RULE_FILE_MAX}-byte limit for a rule file"
                ),
            ),
            other => std::io::Error::other(format!("{other:?}")),
        }
    }
}

/// Opens `name` in the directory `dir` by the reader's rule: no symlink
/// followed, no blocking, regular files only, a directory is absent.
pub(super) fn open(dir: BorrowedFd<'_>, name: &str) -> Opened {
    let flags = OFlags::RDONLY | OFlags::NOFOLLOW | OFlags::NONBLOCK | OFlags::CLOEXEC;
    let file = match rustix::fs::openat(dir, name, flags, Mode::empty()) {
        Ok(fd) => File::from(fd),
        Err(rustix::io::Errno::NOENT | rustix::io::Errno::NOTDIR) => return Opened::Absent,
        Err(rustix::io::Errno::LOOP) => return Opened::Unusable(Unusable::Symlink),
        Err(e) => return Opened::Unusable(Unusable::Unreadable(e.into())),
    };
    match file.metadata() {
        Ok(m) if m.is_dir() => Opened::Absent,
        Ok(m) if m.is_file() => Opened::File(file, m.len()),
        Ok(_) => Opened::Unusable(Unusable::Special),
        Err(e) => Opened::Unusable(Unusable::Unreadable(e)),
    }
}

/// Reads the rule file `name` of the directory `dir` whole.
pub(super) fn read(dir: BorrowedFd<'_>, name: &str) -> RuleText {
    let file = match open(dir, name) {
        Opened::Absent => return RuleText::Absent,
        Opened::Unusable(u) => return RuleText::Unusable(u),
        Opened::File(_, len) if len > RULE_FILE_MAX => {
            return RuleText::Unusable(Unusable::TooLarge(len))
        }
        Opened::File(f, _) => f,
    };
    let mut text = Vec::new();
    // One byte more than the limit tells a file that grew since its stat.
    match file.take(RULE_FILE_MAX + 1).read_to_end(&mut text) {
        Ok(n) if n as u64 > RULE_FILE_MAX => RuleText::Unusable(Unusable::TooLarge(n as u64)),
        Ok(_) => RuleText::Text(text),
        Err(e) => RuleText::Unusable(Unusable::Unreadable(e)),
    }
}

impl IgnoreRules {
    /// The chain in force inside directory `dir` (relative, not the root),
    /// given its parent's, after the text of its own rule file: the file's
    /// rules apply below `dir` only, after every rule read before them.
    /// `source` names the file in matches and warnings.
    fn enter(&self, dir: &str, source: &Path, text: &[u8], up: &Chain) -> Chain {
        let mut warnings = Vec::new();
        let compiled = compile_file(source, text, dir, &mut warnings);
        let chain = if compiled.is_empty() {
            up.clone()
        } else {
            let base = self.next.fetch_add(compiled.len(), Ordering::Relaxed);
            Chain(Some(Arc::new(Link {
                group: Group::new(base, compiled, &mut warnings),
                up: up.clone(),
            })))
        };
        if !warnings.is_empty() {
            self.warn(warnings);
        }
        chain
    }

    /// The chain in force in `dir` (relative, not the root) once its rule
    /// file is read from `fd`, the directory opened without following a
    /// symlink (the walk's descriptor, or a check's). A file that is not
    /// read is a warning and adds no rules.
    pub(crate) fn read_in(&self, fd: BorrowedFd<'_>, dir: &str, up: &Chain) -> Chain {
        let path = match &self.root {
            Some(root) => root.join(dir).join(self.name),
            None => Path::new(dir).join(self.name),
        };
        match read(fd, self.name) {
            RuleText::Absent => up.clone(),
            RuleText::Text(text) => self.enter(dir, &path, &text, up),
            RuleText::Unusable(u) => {
                self.warn(vec![u.warning(&path)]);
                up.clone()
            }
        }
    }
}
