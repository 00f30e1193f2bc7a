//! An object's stored encoding moved as it is: read out of the pool, and
//! checked and imported when it comes from elsewhere (DESIGN §12).
//!
//! The stored encoding is the object's file, header and zstd frame, exactly
//! as the pool wrote it (`format.rs`): copying it keeps the compression and,
//! for a large file, the chunk list, so the receiving pool holds the same
//! bytes under the same name. Bytes from elsewhere are never trusted: before
//! anything becomes visible, [`ObjectBatch::import_stored`] checks them as a
//! read of the pool would, and refuses them as
//! [`ObjectError::FetchedCorrupt`] naming the object and where they came
//! from:
//!
//! 1. the header is one this build knows (else [`ObjectError::FetchedNewer`]);
//! 2. the rest is exactly one zstd frame, nothing after it;
//! 3. a blob decodes to the header's length, and those bytes hash to the name;
//! 4. a chunk list's frame decodes to a list whose lengths add up to the
//!    header's, and every chunk it names is already in the pool (imported
//!    first, in an earlier committed batch): each chunk is read and verified
//!    against its own name, and their concatenation must hash to the list's
//!    name, as [`ObjectPool::verify`] checks a list. So a visible chunk list
//!    still names only durable chunks.
//!
//! Then the bytes are written the pool's one durable way (temporary file,
//! fsync, rename, directory fsync, by [`ObjectBatch::commit`]).

use std::io::{self, Read};

use crate::batch::ObjectBatch;
use crate::chunk::ChunkRef;
use crate::chunked_read::{decode_list_from, ListError};
use crate::format::{Header, HeaderError, ObjectKind, HEADER_LEN};
use crate::hash::Hasher;
use crate::{NoProgress, ObjectError, ObjectHash, ObjectPool, Put, StoreLock};

/// Why stored bytes do not check out.
pub(crate) enum Fault {
    /// Not a sound object of this name; the reason, in words.
    Damaged(String),
    /// Written by a newer cairn (this version byte).
    Newer(u8),
}

/// What stored bytes that checked out hold.
pub(crate) struct Checked {
    /// How the object is stored.
    pub(crate) kind: ObjectKind,
    /// The header's plain length (of the whole content, for a chunk list).
    pub(crate) plain_len: u64,
    /// A chunk list's entries; empty for a blob.
    pub(crate) list: Vec<ChunkRef>,
}

/// Checks the stored encoding of the object `hash` on its own: rules 1–3 of
/// the module notes, and for a chunk list the shape of its list (its chunks
/// are checked against the pool by the importer).
pub(crate) fn check_stored(hash: &ObjectHash, bytes: &[u8]) -> Result<Checked, Fault> {
    let header = match Header::decode(bytes) {
        Ok(h) => h,
        Err(HeaderError::Damaged(reason)) => return Err(Fault::Damaged(format!("it {reason}"))),
        Err(HeaderError::Newer { version }) => return Err(Fault::Newer(version)),
    };
    let body = &bytes[HEADER_LEN..];
    match zstd::zstd_safe::find_frame_compressed_size(body) {
        Ok(n) if n == body.len() => {}
        Ok(n) => {
            return Err(Fault::Damaged(format!(
                "{} bytes follow its compressed frame",
                body.len() - n
            )))
        }
        Err(_) => {
            return Err(Fault::Damaged(
                "its body is not one complete zstd frame".into(),
            ))
        }
    }
    if header.kind == ObjectKind::ChunkList {
        let list = decode_list_from(body, &header).map_err(|e| match e {
            ListError::Start(e) => {
                Fault::Damaged(format!("its chunk list cannot be decoded ({e})"))
            }
            ListError::Damaged(reason) => Fault::Damaged(reason),
        })?;
        return Ok(Checked {
            kind: header.kind,
            plain_len: header.plain_len,
            list,
        });
    }
    let damaged =
        |e: io::Error| Fault::Damaged(format!("its compressed bytes do not decode ({e})"));
    let dec = zstd::stream::read::Decoder::with_buffer(body)
        .map_err(damaged)?
        .single_frame();
    // Never decode more than the header promises (and one byte to see it).
    let mut dec = dec.take(header.plain_len.saturating_add(1));
    let mut hasher = Hasher::default();
    let mut buf = vec![0u8; 256 << 10];
    loop {
        match dec.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => hasher.update(&buf[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(damaged(e)),
        }
    }
    let (got, len) = hasher.finish();
    if len != header.plain_len {
        return Err(Fault::Damaged(format!(
            "it decodes to {}{len} bytes, its header says {}",
            if len > header.plain_len {
                "more than "
            } else {
                ""
            },
            header.plain_len
        )));
    }
    if got != *hash {
        return Err(Fault::Damaged(format!("its content hashes to {got}")));
    }
    Ok(Checked {
        kind: header.kind,
        plain_len: header.plain_len,
        list: Vec::new(),
    })
}

/// Why checked bytes cannot be the chunk `c` of the list `of`: a chunk is a
/// blob of the length its list gives.
pub(crate) fn not_a_chunk(checked: &Checked, c: &ChunkRef, of: &ObjectHash) -> Option<String> {
    if checked.kind != ObjectKind::Blob {
        Some(format!("it is listed as a chunk of {of} but is not a blob"))
    } else if checked.plain_len != c.size {
        Some(format!(
            "it holds {} bytes, the chunk list of {of} says {}",
            checked.plain_len, c.size
        ))
    } else {
        None
    }
}

/// The error for bytes of `hash` from `origin` that did not check out.
pub(crate) fn fetched_fault(hash: &ObjectHash, origin: &str, fault: Fault) -> ObjectError {
    match fault {
        Fault::Damaged(reason) => ObjectError::FetchedCorrupt {
            hash: *hash,
            origin: origin.to_owned(),
            reason,
        },
        Fault::Newer(version) => ObjectError::FetchedNewer {
            hash: *hash,
            origin: origin.to_owned(),
            version,
        },
    }
}

impl ObjectPool {
    /// The stored encoding of the object `hash`: its file, header and
    /// compressed body, exactly as the pool holds it (reached without
    /// following a symlink anywhere below the store's root). Not checked:
    /// [`ObjectPool::verify`] does that.
    ///
    /// # Errors
    /// [`ObjectError::Missing`]; [`ObjectError::NotPlain`] for a symlink on
    /// the way or an object file that is not a regular file; IO errors.
    pub fn stored_bytes(&self, hash: &ObjectHash) -> Result<Vec<u8>, ObjectError> {
        let path = self.path_of(hash);
        let Some(mut file) = self.open_object_file(hash)? else {
            return Err(ObjectError::Missing { hash: *hash });
        };
        let meta = file
            .metadata()
            .map_err(|e| ObjectError::io("reading metadata of", &path, e))?;
        let mut out = Vec::with_capacity(meta.len() as usize);
        file.read_to_end(&mut out)
            .map_err(|e| ObjectError::io("reading object", &path, e))?;
        Ok(out)
    }

    /// Checks `bytes`, the stored encoding of the object `hash` as
    /// [`ObjectPool::stored_bytes`] gives it, and makes it durable in this
    /// pool (see [`ObjectBatch::import_stored`]); `origin` names where the
    /// bytes came from, in messages. A no-op, after the check, when the
    /// object is present.
    ///
    /// # Errors
    /// As [`ObjectBatch::import_stored`], or the commit fails.
    pub fn import_stored(
        &self,
        lock: &StoreLock,
        hash: &ObjectHash,
        bytes: &[u8],
        origin: &str,
    ) -> Result<Put, ObjectError> {
        let batch = self.batch(lock);
        let put = batch.import_stored(hash, bytes, origin)?;
        batch.commit(&NoProgress)?;
        Ok(put)
    }
}

impl ObjectBatch<'_> {
    /// Checks `bytes`, the stored encoding of the object `hash` from
    /// `origin` (named in messages), by the rules of the module notes, and
    /// stages them unchanged (visible after [`ObjectBatch::commit`]). A chunk
    /// list is checked against its chunks in the pool, so they must have been
    /// imported, and committed, before it. A no-op, after the check, when the
    /// object is present or staged already.
    ///
    /// # Errors
    /// [`ObjectError::FetchedCorrupt`] or [`ObjectError::FetchedNewer`] when
    /// the bytes do not check out (nothing is staged); for a chunk list,
    /// [`ObjectError::Missing`] naming an absent chunk, or a local chunk's
    /// [`ObjectError::Corrupt`]; the temporary file cannot be written.
    pub fn import_stored(
        &self,
        hash: &ObjectHash,
        bytes: &[u8],
        origin: &str,
    ) -> Result<Put, ObjectError> {
        let checked = check_stored(hash, bytes).map_err(|f| fetched_fault(hash, origin, f))?;
        self.import_checked(hash, &checked, bytes, origin)
    }

    /// The rest of [`ObjectBatch::import_stored`] for bytes that passed
    /// [`check_stored`]: a chunk list is checked against its chunks in the
    /// pool, then the bytes are staged.
    pub(crate) fn import_checked(
        &self,
        hash: &ObjectHash,
        checked: &Checked,
        bytes: &[u8],
        origin: &str,
    ) -> Result<Put, ObjectError> {
        if checked.kind == ObjectKind::ChunkList {
            let pool = self.pool();
            let (got, len) =
                pool.reassemble(hash, &checked.list, &pool.path_of(hash), &mut io::sink())?;
            if got != *hash || len != checked.plain_len {
                return Err(ObjectError::FetchedCorrupt {
                    hash: *hash,
                    origin: origin.to_owned(),
                    reason: format!("its chunks verify but together hash to {got}"),
                });
            }
        }
        self.stage_checked(hash, checked, bytes)
    }

    /// As [`ObjectBatch::import_stored`] for a chunk `c` of the list `of`:
    /// the bytes must also be a blob of the length the list gives.
    pub(crate) fn import_chunk(
        &self,
        c: &ChunkRef,
        of: &ObjectHash,
        bytes: &[u8],
        origin: &str,
    ) -> Result<Put, ObjectError> {
        let checked =
            check_stored(&c.hash, bytes).map_err(|f| fetched_fault(&c.hash, origin, f))?;
        if let Some(reason) = not_a_chunk(&checked, c, of) {
            return Err(ObjectError::FetchedCorrupt {
                hash: c.hash,
                origin: origin.to_owned(),
                reason,
            });
        }
        self.stage_checked(&c.hash, &checked, bytes)
    }

    /// Stages bytes that passed [`check_stored`] (and, for a chunk list,
    /// the check against its chunks) unchanged.
    pub(crate) fn stage_checked(
        &self,
        hash: &ObjectHash,
        checked: &Checked,
        bytes: &[u8],
    ) -> Result<Put, ObjectError> {
        let mut put = Put {
            hash: *hash,
            size: checked.plain_len,
            new: false,
            stored_bytes: 0,
        };
        let Some(fan) = self.claim(*hash)? else {
            return Ok(put);
        };
        let (header, body) = bytes.split_at(HEADER_LEN);
        match self.stage_raw(&fan, *hash, checked.kind, header, body) {
            Ok(stored) => {
                put.new = true;
                put.stored_bytes = stored;
                Ok(put)
            }
            Err(e) => {
                self.unclaim(hash);
                Err(e)
            }
        }
    }
}
