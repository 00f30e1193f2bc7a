//! Snapshot manifests: `<run>/workspace/snapshots/<id>.json` (DESIGN §5.1).

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::str::FromStr;

use cairn_objects::ObjectHash;
use cairn_store::safe::RelPath;
use serde::{Deserialize, Serialize};

use crate::{Label, WorkspaceError};

/// The manifest format this build writes; it reads this version and older.
pub const MANIFEST_VERSION: u32 = 1;

/// A snapshot's id: a ULID for new snapshots; when reading, 1–64 characters
/// of `[0-9A-Za-z_-]`, so an id is always one safe path component.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct SnapshotId(String);

/// A string that is not a snapshot id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("`{shown}` is not a snapshot id: ids are 1-64 letters, digits, `_` or `-` (list them with `cairn rewind ID --list-snapshots`)")]
pub struct SnapshotIdError {
    shown: String,
}

impl SnapshotId {
    pub(crate) fn new() -> Self {
        SnapshotId(ulid::Ulid::new().to_string())
    }

    /// Validates an id.
    ///
    /// # Errors
    /// [`SnapshotIdError`] for anything but 1–64 of `[0-9A-Za-z_-]`.
    pub fn parse(s: &str) -> Result<Self, SnapshotIdError> {
        let ok = !s.is_empty()
            && s.len() <= 64
            && s.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if ok {
            Ok(SnapshotId(s.to_owned()))
        } else {
            Err(SnapshotIdError {
                shown: s.chars().take(70).collect(),
            })
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SnapshotId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for SnapshotId {
    type Err = SnapshotIdError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        SnapshotId::parse(s)
    }
}

impl Serialize for SnapshotId {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

impl<'de> Deserialize<'de> for SnapshotId {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = <std::borrow::Cow<'de, str>>::deserialize(d)?;
        SnapshotId::parse(&s).map_err(serde::de::Error::custom)
    }
}

/// One captured file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Its content's object.
    pub hash: ObjectHash,
    /// Its length in bytes.
    pub size: u64,
    /// Its permission bits (`0o777` at most).
    pub mode: u32,
}

/// Why a path in the tree was not captured: a coverage gap, always reported.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
#[non_exhaustive]
pub enum SkipReason {
    /// A symbolic link: never followed, never captured.
    Symlink,
    /// Larger than the configured limit.
    TooLarge {
        /// Its size.
        size: u64,
        /// The limit in force.
        limit: u64,
    },
    /// A FIFO, socket or device.
    Special,
    /// It could not be read (e.g. permission denied).
    Unreadable {
        /// The error.
        detail: String,
    },
    /// Its name is not UTF-8 (the path shown is a lossy rendering).
    NotUtf8,
    /// It kept changing while it was read.
    Changing,
}

impl fmt::Display for SkipReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SkipReason::Symlink => f.write_str("symbolic link (not followed or captured)"),
            SkipReason::TooLarge { size, limit } => write!(
                f,
                "{size} bytes, over the {limit}-byte limit (raise CAIRN_WORKSPACE_MAX_FILE_MB to capture it)"
            ),
            SkipReason::Special => f.write_str("not a regular file (FIFO, socket or device)"),
            SkipReason::Unreadable { detail } => write!(f, "unreadable: {detail}"),
            SkipReason::NotUtf8 => f.write_str("name is not UTF-8"),
            SkipReason::Changing => f.write_str("kept changing while it was read"),
        }
    }
}

/// A path that was not captured, with the reason.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    /// The path, relative to the workspace root.
    pub path: String,
    /// Why.
    #[serde(flatten)]
    pub reason: SkipReason,
}

/// A snapshot manifest: the whole tree at one boundary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Manifest {
    /// Format version.
    pub version: u32,
    /// This snapshot's id (equal to its file name).
    pub id: SnapshotId,
    /// The head when it was captured.
    pub parent: Option<SnapshotId>,
    /// The label it was captured under, written once and never moved.
    pub label: Label,
    /// When it was captured, RFC 3339 UTC.
    pub created: String,
    /// Number of entries.
    pub files: u64,
    /// Sum of entry sizes.
    pub bytes: u64,
    /// Captured files by path (`/`-separated, relative to the root).
    pub entries: BTreeMap<String, Entry>,
    /// Paths present but not captured.
    pub skipped: Vec<Skipped>,
}

/// A manifest as a capture writes it: the same JSON, field for field, as
/// [`Manifest`], but borrowed from the capture's own path-sorted list, so
/// no map of every path is built (and no path copied) just to write it.
pub(crate) struct ManifestOut<'a, T> {
    pub(crate) version: u32,
    pub(crate) id: &'a SnapshotId,
    pub(crate) parent: Option<&'a SnapshotId>,
    pub(crate) label: &'a Label,
    pub(crate) created: &'a str,
    pub(crate) files: u64,
    pub(crate) bytes: u64,
    pub(crate) entries: SortedEntries<'a, T>,
    pub(crate) skipped: &'a [Skipped],
}

/// Entries held in a list sorted by path (as a capture holds them),
/// written as the map `path → entry`. The list must be sorted and free
/// of duplicates, as a `BTreeMap` would be.
pub(crate) struct SortedEntries<'a, T> {
    pub(crate) list: &'a [T],
    pub(crate) get: fn(&T) -> (&str, Entry),
}

impl<T> ManifestOut<'_, T> {
    /// The manifest's bytes.
    #[cfg(test)]
    pub(crate) fn encode(&self) -> Result<Vec<u8>, WorkspaceError> {
        let mut out = Vec::new();
        self.write_to(&mut out)
            .map_err(|e| WorkspaceError::io("encoding", "manifest", e))?;
        Ok(out)
    }

    /// Writes the manifest durably at `path` (streamed, not held whole).
    pub(crate) fn write(&self, path: &Path) -> Result<(), WorkspaceError> {
        cairn_store::durable::write_atomic_with(path, |w| self.write_to(w))?;
        Ok(())
    }

    /// The manifest's JSON, byte for byte what serde writes for it, with
    /// the entries (nearly all of it) written by hand: one buffer per entry
    /// and no escaping work for a path that needs none.
    pub(crate) fn write_to(&self, w: &mut dyn std::io::Write) -> std::io::Result<()> {
        fn json(w: &mut dyn std::io::Write, v: &impl Serialize) -> std::io::Result<()> {
            serde_json::to_writer(w, v).map_err(std::io::Error::from)
        }
        write!(w, "{{\"version\":{},\"id\":", self.version)?;
        json(w, self.id)?;
        w.write_all(b",\"parent\":")?;
        json(w, &self.parent)?;
        w.write_all(b",\"label\":")?;
        json(w, self.label)?;
        w.write_all(b",\"created\":")?;
        json(w, &self.created)?;
        write!(
            w,
            ",\"files\":{},\"bytes\":{},\"entries\":{{",
            self.files, self.bytes
        )?;
        let mut rec: Vec<u8> = Vec::with_capacity(512);
        for (i, item) in self.entries.list.iter().enumerate() {
            let (path, e) = (self.entries.get)(item);
            rec.clear();
            if i > 0 {
                rec.push(b',');
            }
            if path.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
                rec.push(b'"');
                rec.extend_from_slice(path.as_bytes());
                rec.push(b'"');
            } else {
                serde_json::to_writer(&mut rec, path).map_err(std::io::Error::from)?;
            }
            rec.extend_from_slice(b":{\"hash\":\"");
            rec.extend_from_slice(&e.hash.hex_bytes());
            std::io::Write::write_fmt(
                &mut rec,
                format_args!("\",\"size\":{},\"mode\":{}}}", e.size, e.mode),
            )?;
            w.write_all(&rec)?;
        }
        w.write_all(b"},\"skipped\":")?;
        json(w, &self.skipped)?;
        w.write_all(b"}")
    }
}

/// The listing fields of a manifest, read without its entries.
#[derive(Clone, Debug, Deserialize)]
pub(crate) struct Summary {
    pub(crate) version: u32,
    pub(crate) id: SnapshotId,
    pub(crate) parent: Option<SnapshotId>,
    pub(crate) label: Label,
    pub(crate) created: String,
    pub(crate) files: u64,
    pub(crate) bytes: u64,
}

impl Manifest {
    /// Reads and checks the manifest at `path` (its id must equal `expect`).
    pub(crate) fn load(path: &Path, expect: &SnapshotId) -> Result<Manifest, WorkspaceError> {
        let bytes = std::fs::read(path).map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => WorkspaceError::NoSuchSnapshot {
                snapshot: expect.to_string(),
            },
            _ => WorkspaceError::io("reading manifest", path, e),
        })?;
        Self::from_bytes(&bytes, path, expect)
    }

    /// Parses and checks the bytes of a manifest read from `path` (named in
    /// errors), whose id must equal `expect`: the checks of every read (the
    /// format version, the id, the one path rule for every entry), for a
    /// reader that fetched the bytes its own way (a copy between stores).
    ///
    /// # Errors
    /// [`WorkspaceError::ManifestDamaged`] or [`WorkspaceError::UnsafePath`].
    pub fn from_bytes(
        bytes: &[u8],
        path: &Path,
        expect: &SnapshotId,
    ) -> Result<Manifest, WorkspaceError> {
        let damaged = |reason: String| WorkspaceError::ManifestDamaged {
            path: path.to_owned(),
            reason,
        };
        let m: Manifest = serde_json::from_slice(bytes).map_err(|e| damaged(e.to_string()))?;
        if m.version > MANIFEST_VERSION {
            return Err(damaged(format!(
                "format version {} is newer than this cairn's {MANIFEST_VERSION}; upgrade cairn",
                m.version
            )));
        }
        if m.id != *expect {
            return Err(damaged(format!("it names itself {}", m.id)));
        }
        // The one path rule (`cairn_store::safe::RelPath`): relative, plain
        // components, no `..` (also between backslashes), no NUL, nothing in
        // `.git` in any letter case.
        for p in m.entries.keys() {
            RelPath::parse(p).map_err(|rule| WorkspaceError::UnsafePath {
                snapshot: m.id.to_string(),
                path: p.clone(),
                reason: rule.to_string(),
            })?;
        }
        Ok(m)
    }

    /// Reads and checks snapshot `id` of run `run` from the store, without
    /// opening a [`crate::Workspace`] (for readers of another run's
    /// snapshots, such as a checkpoint's materialisation). The same checks
    /// as every other read: the format version, the id, and the one path
    /// rule for every entry.
    ///
    /// # Errors
    /// [`WorkspaceError::NoSuchSnapshot`] when the manifest is missing,
    /// [`WorkspaceError::ManifestDamaged`] or [`WorkspaceError::UnsafePath`]
    /// when it does not pass the checks, IO errors otherwise.
    pub fn read(
        store: &cairn_store::Store,
        run: &cairn_store::RunId,
        id: &SnapshotId,
    ) -> Result<Manifest, WorkspaceError> {
        Self::load(&store.snapshots_dir(run).join(format!("{id}.json")), id)
    }

    /// Reads the listing fields of the manifest at `path` and checks it is
    /// snapshot `expect` (its id, a version this build reads); `None` when
    /// there is no such file (the snapshot is not in this run). Cheaper than
    /// [`Manifest::load`]: the entries are parsed over, not kept.
    ///
    /// # Errors
    /// [`WorkspaceError::ManifestDamaged`] when the file is there but does
    /// not parse or names another snapshot; IO errors.
    pub(crate) fn summary_if_present(
        path: &Path,
        expect: &SnapshotId,
    ) -> Result<Option<Summary>, WorkspaceError> {
        let bytes = match std::fs::read(path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(WorkspaceError::io("reading manifest", path, e)),
        };
        let damaged = |reason: String| WorkspaceError::ManifestDamaged {
            path: path.to_owned(),
            reason,
        };
        let s: Summary = serde_json::from_slice(&bytes).map_err(|e| damaged(e.to_string()))?;
        if s.version > MANIFEST_VERSION {
            return Err(damaged(format!(
                "format version {} is newer than this cairn's {MANIFEST_VERSION}; upgrade cairn",
                s.version
            )));
        }
        if s.id != *expect {
            return Err(damaged(format!("it names itself {}", s.id)));
        }
        Ok(Some(s))
    }

    /// Reads the listing fields of the manifest at `path`.
    pub(crate) fn load_summary(path: &Path) -> Result<Summary, WorkspaceError> {
        let bytes =
            std::fs::read(path).map_err(|e| WorkspaceError::io("reading manifest", path, e))?;
        serde_json::from_slice(&bytes).map_err(|e| WorkspaceError::ManifestDamaged {
            path: path.to_owned(),
            reason: e.to_string(),
        })
    }

    /// The paths added, changed (content or mode) or removed between `self`
    /// and `other`, sorted: the one manifest diff (rewinds scope by it; the
    /// agent loop and `cairn exec` report it). Coverage gaps are not
    /// compared.
    pub fn changed_paths(&self, other: &Manifest) -> Vec<String> {
        let mut out = std::collections::BTreeSet::new();
        diff_entries(&self.entries, &other.entries, &mut out);
        out.into_iter().collect()
    }

    /// True when both hold the same files with the same content and modes,
    /// and the same coverage gaps.
    pub fn same_tree(&self, other: &Manifest) -> bool {
        self.entries == other.entries && self.skipped == other.skipped
    }
}

/// Adds to `out` every path whose entry differs between `a` and `b`
/// (present in one only, or with another hash, size or mode).
pub(crate) fn diff_entries(
    a: &BTreeMap<String, Entry>,
    b: &BTreeMap<String, Entry>,
    out: &mut std::collections::BTreeSet<String>,
) {
    for (p, e) in a {
        if b.get(p) != Some(e) {
            out.insert(p.clone());
        }
    }
    for p in b.keys() {
        if !a.contains_key(p) {
            out.insert(p.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Label;
    use proptest::prelude::*;

    fn reason(k: u8, n: u64, text: &str) -> SkipReason {
        match k % 6 {
            0 => SkipReason::Symlink,
            1 => SkipReason::TooLarge { size: n, limit: 7 },
            2 => SkipReason::Special,
            3 => SkipReason::Unreadable {
                detail: text.to_owned(),
            },
            4 => SkipReason::NotUtf8,
            _ => SkipReason::Changing,
        }
    }

    proptest! {
        /// The capture's borrowed encoder writes exactly the bytes serde
        /// writes for the owned manifest, whatever the paths hold (quotes,
        /// backslashes, control characters, non-ASCII), so every reader of
        /// `Manifest` reads what a capture wrote.
        #[test]
        fn borrowed_encoding_is_the_manifest_encoding(
            entries in proptest::collection::btree_map(
                "[a-z\"\\\\\u{1}\n\t é/.-]{1,12}",
                (any::<[u8; 32]>(), any::<u64>(), 0u32..0o1000),
                0..40,
            ),
            skipped in proptest::collection::vec(("[a-z\"\\\\ é/]{1,8}", any::<u8>(), any::<u64>()), 0..5),
            parent in any::<bool>(),
            label_n in 1u32..1000,
        ) {
            let list: Vec<(String, Entry)> = entries
                .iter()
                .map(|(p, (h, size, mode))| {
                    (p.clone(), Entry { hash: ObjectHash::from_bytes(*h), size: *size, mode: *mode })
                })
                .collect();
            let skipped: Vec<Skipped> = skipped
                .iter()
                .map(|(p, k, n)| Skipped { path: p.clone(), reason: reason(*k, *n, p) })
                .collect();
            let id = SnapshotId::new();
            let parent = parent.then(SnapshotId::new);
            let label = Label::parse(&format!("post:turn:{label_n}")).unwrap();
            let owned = Manifest {
                version: MANIFEST_VERSION,
                id: id.clone(),
                parent: parent.clone(),
                label: label.clone(),
                created: "2026-11-29T00:00:00Z".into(),
                files: list.len() as u64,
                bytes: 12,
                entries: list.iter().cloned().collect(),
                skipped: skipped.clone(),
            };
            let borrowed = ManifestOut {
                version: MANIFEST_VERSION,
                id: &id,
                parent: parent.as_ref(),
                label: &label,
                created: "2026-11-29T00:00:00Z",
                files: list.len() as u64,
                bytes: 12,
                entries: SortedEntries { list: &list, get: |(p, e)| (p.as_str(), *e) },
                skipped: &skipped,
            };
            let bytes = borrowed.encode().unwrap();
            prop_assert_eq!(&bytes, &serde_json::to_vec(&owned).unwrap());
            let back: Manifest = serde_json::from_slice(&bytes).unwrap();
            prop_assert_eq!(back, owned);
        }
    }
}
