//! Default excludes by evidence: a directory is left out because of what it
//! holds, not what it is called.
//!
//! A name like `target` or `venv` is also a name for source (a web
//! framework's route directory, a package), and a rule that drops source
//! silently is a rule a rewind can never undo. So those trees are
//! recognised by the file their tool writes into them:
//!
//! 1. `CACHEDIR.TAG` beginning with the 43 bytes
//!    `Signature: 8a477f597d28d172789f06886806bc55` (the Cache Directory
//!    Tagging standard; cargo writes it in `target/`, as do pytest, mypy and
//!    ruff in their caches; restic, borg and GNU tar honour it);
//! 2. `pyvenv.cfg` holding a `home` key: a Python virtual environment
//!    (venv, virtualenv 20+, uv, poetry), whatever its directory is named.
//!
//! A marker is a regular file opened relative to its directory's descriptor
//! with `O_NOFOLLOW | O_NONBLOCK` (the rule-file reader's rule): a symlink, a
//! FIFO or a file that does not carry the signature is no evidence, and the
//! directory is captured.

use std::fmt;
use std::io::Read;
use std::os::fd::BorrowedFd;

use super::reader::{self, Opened};

/// The first bytes of a valid `CACHEDIR.TAG`.
pub const CACHEDIR_TAG_SIGNATURE: &[u8; 43] = b"Signature: 8a477f597d28d172789f06886806bc55";

/// How much of a `pyvenv.cfg` is read to find its `home` key.
const PYVENV_CFG_READ: u64 = 64 << 10;

/// A file whose presence shows that its directory is regenerable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Marker {
    /// `CACHEDIR.TAG` with the Cache Directory Tagging signature: a cache
    /// or build tree (cargo's `target/`, pytest's, mypy's, ruff's caches).
    CacheDirTag,
    /// `pyvenv.cfg` with a `home` key: a Python virtual environment.
    PyvenvCfg,
}

/// The markers cairn's defaults go by, in rule order.
pub const DEFAULT_MARKERS: [Marker; 2] = [Marker::CacheDirTag, Marker::PyvenvCfg];

impl Marker {
    /// The marker file's name.
    pub fn file_name(self) -> &'static str {
        match self {
            Marker::CacheDirTag => "CACHEDIR.TAG",
            Marker::PyvenvCfg => "pyvenv.cfg",
        }
    }

    fn bit(self) -> u8 {
        match self {
            Marker::CacheDirTag => 1,
            Marker::PyvenvCfg => 2,
        }
    }

    /// Whether the open file `f` carries this marker's content.
    fn holds(self, f: std::fs::File) -> bool {
        match self {
            Marker::CacheDirTag => {
                let mut head = Vec::with_capacity(CACHEDIR_TAG_SIGNATURE.len());
                f.take(CACHEDIR_TAG_SIGNATURE.len() as u64)
                    .read_to_end(&mut head)
                    .is_ok_and(|_| head == CACHEDIR_TAG_SIGNATURE)
            }
            Marker::PyvenvCfg => {
                let mut text = Vec::new();
                if f.take(PYVENV_CFG_READ).read_to_end(&mut text).is_err() {
                    return false;
                }
                // As Python's `site` reads it: `key = value` lines.
                text.split(|b| *b == b'\n').any(|line| {
                    let key = line.split(|b| *b == b'=').next().unwrap_or_default();
                    line.contains(&b'=') && key.trim_ascii().eq_ignore_ascii_case(b"home")
                })
            }
        }
    }
}

impl fmt::Display for Marker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.file_name())
    }
}

/// The evidence that excluded a directory: which marker, found where.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Evidence {
    /// The marker found.
    pub marker: Marker,
    /// The directory it was found in, relative to the workspace root.
    pub dir: String,
}

impl fmt::Display for Evidence {
    /// `CACHEDIR.TAG in target/`, as `cairn check-ignore -v` names it.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} in {}/", self.marker, self.dir)
    }
}

/// A set of markers (those named in a listing, or those verified).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Markers(u8);

impl Markers {
    /// No marker.
    pub(crate) const NONE: Markers = Markers(0);

    /// Every marker cairn knows.
    pub(crate) fn all() -> Markers {
        Markers(DEFAULT_MARKERS.iter().fold(0, |b, m| b | m.bit()))
    }

    /// The marker a directory entry of this name would be, if any.
    pub(crate) fn of_name(name: &str) -> Markers {
        DEFAULT_MARKERS
            .iter()
            .find(|m| m.file_name() == name)
            .map_or(Markers::NONE, |m| Markers(m.bit()))
    }

    pub(crate) fn with(self, other: Markers) -> Markers {
        Markers(self.0 | other.0)
    }

    pub(crate) fn has(self, m: Marker) -> bool {
        self.0 & m.bit() != 0
    }

    pub(crate) fn is_empty(self) -> bool {
        self.0 == 0
    }

    /// Those of `self` that the open directory `dir` really holds: a regular
    /// file of the marker's name, with the marker's content.
    pub(crate) fn verify(self, dir: BorrowedFd<'_>) -> Markers {
        let mut found = Markers::NONE;
        for m in DEFAULT_MARKERS.into_iter().filter(|m| self.has(*m)) {
            if let Opened::File(f, _) = reader::open(dir, m.file_name()) {
                if m.holds(f) {
                    found = found.with(Markers(m.bit()));
                }
            }
        }
        found
    }
}
