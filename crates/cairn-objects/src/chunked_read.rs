//! Reading chunk lists: reassembly, deep checks, and what a list names.
//!
//! Every chunk is read whole (it is at most a few hundred KiB), decompressed
//! and checked against its name before any of its bytes are passed on, so a
//! damaged chunk never reaches the caller; the reassembled content is hashed
//! on the way and checked against the list's own name at the end. Chunks are
//! read [`PREFETCH`] at a time in parallel and passed on in order.

use std::cell::RefCell;
use std::collections::HashSet;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::Path;

use rayon::prelude::*;

use crate::chunk::{decode_list, ChunkRef};
use crate::format::{Header, HeaderError, ObjectKind, HEADER_LEN, LIST_ENTRY_LEN};
use crate::hash::Hasher;
use crate::{ObjectError, ObjectHash, ObjectPool};

/// Chunks read ahead in parallel while reassembling.
const PREFETCH: usize = 32;
/// The longest decoded chunk list accepted (about 30 million chunks).
const LIST_MAX: u64 = 1 << 30;
/// The largest chunk accepted when reading (far above what the chunker cuts).
const CHUNK_READ_MAX: u64 = 64 << 20;

thread_local! {
    static DECOMPRESSOR: RefCell<Option<zstd::bulk::Decompressor<'static>>> = const { RefCell::new(None) };
}

/// A damaged or missing object found by [`ObjectPool::check`].
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct BadObject {
    /// The object that does not verify (a chunk, or the object itself).
    pub hash: ObjectHash,
    /// True when it is missing rather than damaged.
    pub missing: bool,
    /// What is wrong, in words.
    pub reason: String,
}

/// What [`ObjectPool::check`] found for one object.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct ObjectCheck {
    /// The object checked.
    pub hash: ObjectHash,
    /// How it is stored, when its header could be read.
    pub kind: Option<ObjectKind>,
    /// Plain bytes that verified.
    pub size: u64,
    /// Every distinct chunk a chunk list names (empty for a blob).
    pub chunks: Vec<ObjectHash>,
    /// Everything that did not verify; empty when the object is sound.
    pub bad: Vec<BadObject>,
}

impl ObjectCheck {
    /// True when nothing is bad.
    pub fn ok(&self) -> bool {
        self.bad.is_empty()
    }
}

impl ObjectPool {
    /// Decodes the list of a chunk-list object whose header was just read.
    pub(crate) fn read_list(
        &self,
        hash: &ObjectHash,
        path: &Path,
        header: &Header,
        reader: BufReader<File>,
    ) -> Result<Vec<ChunkRef>, ObjectError> {
        decode_list_from(reader, header).map_err(|e| match e {
            ListError::Start(e) => ObjectError::io("starting to decode", path, e),
            ListError::Damaged(reason) => ObjectError::Corrupt {
                hash: *hash,
                path: path.to_owned(),
                reason,
            },
        })
    }

    /// The chunks of the object named `hash`: `None` for a blob.
    ///
    /// # Errors
    /// [`ObjectError::Missing`], a damaged header or list
    /// ([`ObjectError::Corrupt`]), [`ObjectError::NewerFormat`], IO errors.
    pub fn chunk_list(&self, hash: &ObjectHash) -> Result<Option<Vec<ChunkRef>>, ObjectError> {
        let path = self.path_of(hash);
        let (header, reader) = self.open_object(hash, &path)?;
        match header.kind {
            ObjectKind::ChunkList => Ok(Some(self.read_list(hash, &path, &header, reader)?)),
            _ => Ok(None),
        }
    }

    /// Checks that the object named `hash` can be read in full without
    /// reading it: it is present, and when it is a chunk list, its list
    /// decodes and every chunk it names is present. What a restore calls
    /// before it changes anything.
    ///
    /// # Errors
    /// [`ObjectError::Missing`] naming the first absent object or chunk;
    /// [`ObjectError::Corrupt`] for a damaged header or list.
    pub fn require(&self, hash: &ObjectHash) -> Result<(), ObjectError> {
        if let Some(list) = self.chunk_list(hash)? {
            for c in &list {
                if !self.contains(&c.hash) {
                    return Err(ObjectError::Missing { hash: c.hash });
                }
            }
        }
        Ok(())
    }

    /// Reads one chunk of the list `of`, verified against its name and size.
    pub(crate) fn read_chunk(&self, c: &ChunkRef, of: &ObjectHash) -> Result<Vec<u8>, ObjectError> {
        let path = self.path_of(&c.hash);
        let Some(mut file) = self.open_object_file(&c.hash)? else {
            return Err(ObjectError::Missing { hash: c.hash });
        };
        let mut bytes = Vec::new();
        file.read_to_end(&mut bytes)
            .map_err(|e| ObjectError::io("reading object", &path, e))?;
        let corrupt = |reason: String| ObjectError::Corrupt {
            hash: c.hash,
            path: path.clone(),
            reason,
        };
        let header = match Header::decode(&bytes) {
            Ok(h) => h,
            Err(HeaderError::Damaged(r)) => return Err(corrupt(format!("its file {r}"))),
            Err(HeaderError::Newer { version }) => {
                return Err(ObjectError::NewerFormat { path, version })
            }
        };
        if header.kind != ObjectKind::Blob {
            return Err(corrupt(format!(
                "it is listed as a chunk of {of} but is not a blob"
            )));
        }
        if header.plain_len != c.size || c.size > CHUNK_READ_MAX {
            return Err(corrupt(format!(
                "its header says {} bytes, the chunk list of {of} says {}",
                header.plain_len, c.size
            )));
        }
        let plain = DECOMPRESSOR
            .with(|cell| -> std::io::Result<Vec<u8>> {
                let mut slot = cell.borrow_mut();
                if slot.is_none() {
                    *slot = Some(zstd::bulk::Decompressor::new()?);
                }
                match slot.as_mut() {
                    Some(d) => d.decompress(&bytes[HEADER_LEN..], c.size as usize),
                    None => zstd::bulk::decompress(&bytes[HEADER_LEN..], c.size as usize),
                }
            })
            .map_err(|e| corrupt(format!("its compressed bytes do not decode ({e})")))?;
        if plain.len() as u64 != c.size {
            return Err(corrupt(format!(
                "it decodes to {} bytes, its header says {}",
                plain.len(),
                c.size
            )));
        }
        let got = ObjectHash::of(&plain);
        if got != c.hash {
            return Err(corrupt(format!("its content hashes to {got}")));
        }
        Ok(plain)
    }

    /// Streams the reassembled content of the chunk list `hash` into `out`.
    pub(crate) fn read_list_to(
        &self,
        hash: &ObjectHash,
        path: &Path,
        header: &Header,
        reader: BufReader<File>,
        out: &mut dyn Write,
    ) -> Result<u64, ObjectError> {
        let list = self.read_list(hash, path, header, reader)?;
        let (got, len) = self.reassemble(hash, &list, path, out)?;
        if got != *hash || len != header.plain_len {
            return Err(ObjectError::Corrupt {
                hash: *hash,
                path: path.to_owned(),
                reason: format!("its chunks verify but together hash to {got}"),
            });
        }
        Ok(len)
    }

    /// Streams the chunks of `list` (the list of `hash`, whose file is
    /// `path`, for messages) from the pool into `out`, each verified before
    /// its bytes are written, and returns the hash and length of the whole,
    /// for the caller to check against the list's name.
    pub(crate) fn reassemble(
        &self,
        hash: &ObjectHash,
        list: &[ChunkRef],
        path: &Path,
        out: &mut dyn Write,
    ) -> Result<(ObjectHash, u64), ObjectError> {
        let mut whole = Hasher::default();
        for group in list.chunks(PREFETCH) {
            let read: Vec<Result<Vec<u8>, ObjectError>> =
                group.par_iter().map(|c| self.read_chunk(c, hash)).collect();
            for plain in read {
                let plain = plain?;
                whole.update(&plain);
                out.write_all(&plain)
                    .map_err(|e| ObjectError::io("copying the content of", path, e))?;
            }
        }
        Ok(whole.finish())
    }

    /// Re-hashes an object and, for a chunk list, every chunk it names and
    /// the reassembled whole, reporting EVERY chunk that is missing or
    /// damaged (where [`ObjectPool::verify`] stops at the first).
    ///
    /// # Errors
    /// Only what prevents checking: IO errors other than a missing file,
    /// [`ObjectError::NewerFormat`]. Missing and damaged objects are in
    /// [`ObjectCheck::bad`].
    pub fn check(&self, hash: &ObjectHash) -> Result<ObjectCheck, ObjectError> {
        let mut report = ObjectCheck {
            hash: *hash,
            kind: None,
            size: 0,
            chunks: Vec::new(),
            bad: Vec::new(),
        };
        let path = self.path_of(hash);
        let opened = match self.open_object(hash, &path) {
            Ok(o) => o,
            Err(e) => return bad_or_err(report, e),
        };
        report.kind = Some(opened.0.kind);
        if opened.0.kind != ObjectKind::ChunkList {
            drop(opened);
            return match self.read_to(hash, &mut std::io::sink()) {
                Ok(n) => {
                    report.size = n;
                    Ok(report)
                }
                Err(e) => bad_or_err(report, e),
            };
        }
        let (header, reader) = opened;
        let list = match self.read_list(hash, &path, &header, reader) {
            Ok(l) => l,
            Err(e) => return bad_or_err(report, e),
        };
        let mut seen = HashSet::new();
        report.chunks = list
            .iter()
            .filter(|c| seen.insert(c.hash))
            .map(|c| c.hash)
            .collect();
        let mut whole = Hasher::default();
        let mut complete = true;
        let mut reported = HashSet::new();
        for group in list.chunks(PREFETCH) {
            let read: Vec<Result<Vec<u8>, ObjectError>> =
                group.par_iter().map(|c| self.read_chunk(c, hash)).collect();
            for (c, r) in group.iter().zip(read) {
                match r {
                    Ok(plain) if complete => whole.update(&plain),
                    Ok(_) => {}
                    Err(e) => {
                        complete = false;
                        if reported.insert(c.hash) {
                            report = bad_or_err(report, e)?;
                        }
                    }
                }
            }
        }
        if complete {
            let (got, len) = whole.finish();
            if got != *hash || len != header.plain_len {
                report.bad.push(BadObject {
                    hash: *hash,
                    missing: false,
                    reason: format!("its chunks verify but together hash to {got}"),
                });
            } else {
                report.size = len;
            }
        }
        Ok(report)
    }
}

/// Why a chunk list's body did not decode.
pub(crate) enum ListError {
    /// The decoder could not be set up.
    Start(std::io::Error),
    /// The body is not a chunk list for this header (the reason, in words).
    Damaged(String),
}

/// Decodes the zstd frame of a chunk list (positioned just after its
/// header), checking the list's shape against the header's plain length,
/// and never decoding more than such a list can hold.
pub(crate) fn decode_list_from<R: BufRead>(
    reader: R,
    header: &Header,
) -> Result<Vec<ChunkRef>, ListError> {
    let limit = header
        .plain_len
        .saturating_mul(LIST_ENTRY_LEN as u64)
        .min(LIST_MAX);
    let dec = zstd::stream::read::Decoder::with_buffer(reader)
        .map_err(ListError::Start)?
        .single_frame();
    let mut body = Vec::new();
    dec.take(limit + 1)
        .read_to_end(&mut body)
        .map_err(|e| ListError::Damaged(format!("its chunk list does not decode ({e})")))?;
    if body.len() as u64 > limit {
        return Err(ListError::Damaged(
            "its chunk list is longer than its content allows".into(),
        ));
    }
    decode_list(&body, header.plain_len).map_err(ListError::Damaged)
}

/// Records a missing or damaged object in `report`, or passes other errors on.
fn bad_or_err(mut report: ObjectCheck, e: ObjectError) -> Result<ObjectCheck, ObjectError> {
    match e {
        ObjectError::Missing { hash } => report.bad.push(BadObject {
            hash,
            missing: true,
            reason: "it is missing from the store".into(),
        }),
        ObjectError::Corrupt { hash, reason, .. } => report.bad.push(BadObject {
            hash,
            missing: false,
            reason,
        }),
        other => return Err(other),
    }
    Ok(report)
}
