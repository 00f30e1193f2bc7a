//! Storing a large file as content-defined chunks plus a chunk list.
//!
//! One pass over the file, in windows of [`WINDOW`] bytes read with `pread`:
//! the new bytes of each window are fed to the whole-content hash while, at
//! the same time, the window is cut into chunks and every chunk is hashed
//! and (when new) compressed and staged, in parallel. A chunk that ends at
//! the window's edge is not cut until more data (or the end) is known, so
//! the boundaries are those of the whole file. The chunk list is staged last,
//! under the hash of the whole content; the batch publishes it only after
//! every chunk is durable.
//!
//! Memory: one window, the chunks being compressed, and the list (36 bytes
//! per chunk), never the whole file.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

use rayon::prelude::*;

use crate::batch::ObjectBatch;
use crate::chunk::{encode_list, ChunkRef, Chunker, AVG_CHUNK, MAX_CHUNK};
use crate::format::ObjectKind;
use crate::hash::Hasher;
use crate::{ObjectError, Put};

/// Bytes read per window: large enough to keep both cores busy with about a
/// hundred chunks, small enough to stay in cache-friendly territory.
const WINDOW: usize = 8 << 20;

impl ObjectBatch<'_> {
    /// Stages `file` (of `expect` bytes per its metadata) as chunks plus a
    /// chunk list. `path` is for messages only.
    pub(crate) fn put_chunked(
        &self,
        file: &File,
        path: &Path,
        expect: u64,
    ) -> Result<Put, ObjectError> {
        let chunker = Chunker::new();
        let mut buf = vec![0u8; WINDOW];
        let (mut start, mut filled, mut offset, mut eof) = (0usize, 0usize, 0u64, false);
        let mut whole = Hasher::default();
        let mut list: Vec<ChunkRef> = Vec::with_capacity((expect / AVG_CHUNK as u64) as usize + 16);
        let mut stored = 0u64;
        loop {
            // Keep the uncut tail, then fill the window behind it.
            buf.copy_within(start..filled, 0);
            filled -= start;
            let fresh = filled;
            while filled < buf.len() && !eof {
                match file.read_at(&mut buf[filled..], offset) {
                    Ok(0) => eof = true,
                    Ok(n) => {
                        filled += n;
                        offset += n as u64;
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(ObjectError::io("reading", path, e)),
                }
            }
            let data = &buf[..filled];
            // The whole-content hash of the new bytes on one thread; cutting,
            // then hashing (and storing) the chunks, on the others.
            let (_, (pos, puts)) = rayon::join(
                || whole.update(&data[fresh..]),
                || {
                    let mut cuts = Vec::with_capacity(filled / AVG_CHUNK + 1);
                    let mut pos = 0;
                    while pos < filled && (eof || filled - pos >= MAX_CHUNK) {
                        let len = chunker.cut(&data[pos..]);
                        cuts.push(pos..pos + len);
                        pos += len;
                    }
                    let puts = cuts
                        .par_iter()
                        .map(|r| self.put_bytes(&data[r.clone()]))
                        .collect::<Vec<_>>();
                    (pos, puts)
                },
            );
            for p in puts {
                let p = p?;
                stored += p.stored_bytes;
                list.push(ChunkRef {
                    hash: p.hash,
                    size: p.size,
                });
            }
            start = pos;
            if eof && start == filled {
                break;
            }
        }
        let (hash, size) = whole.finish();
        if size != expect {
            return Err(ObjectError::SourceChanged {
                path: path.to_owned(),
            });
        }
        if list.len() < 2 {
            // Only possible for a file no larger than one chunk, which the
            // threshold excludes; the one chunk is the whole content.
            return Ok(Put {
                hash,
                size,
                new: stored > 0,
                stored_bytes: stored,
            });
        }
        self.put_list(hash, size, &list, stored)
    }

    /// Stages the chunk list of content `hash` (`size` bytes) whose chunks,
    /// `stored` new bytes of them, are staged already.
    fn put_list(
        &self,
        hash: crate::ObjectHash,
        size: u64,
        list: &[ChunkRef],
        stored: u64,
    ) -> Result<Put, ObjectError> {
        let Some(fan) = self.claim(hash)? else {
            // Present already (or staged by another put of this batch): its
            // chunks are too, so nothing above was new unless the content was
            // stored whole before.
            return Ok(Put {
                hash,
                size,
                new: false,
                stored_bytes: stored,
            });
        };
        let body = encode_list(list);
        match self.stage_encoded(&fan, hash, ObjectKind::ChunkList, size, &body) {
            Ok(list_bytes) => Ok(Put {
                hash,
                size,
                new: true,
                stored_bytes: stored + list_bytes,
            }),
            Err(e) => {
                self.unclaim(&hash);
                Err(e)
            }
        }
    }
}

impl ObjectBatch<'_> {
    /// Stages `bytes` (a model request or response body) cut by the body
    /// class ([`Chunker::body`]) into chunks plus a chunk list named by the
    /// hash of the whole; a body of one chunk is stored whole. A body that
    /// repeats a stored one with a few KiB more costs those KiB and about one
    /// chunk.
    ///
    /// # Errors
    /// As [`ObjectBatch::put_bytes`].
    pub fn put_body(&self, bytes: &[u8]) -> Result<Put, ObjectError> {
        let chunker = Chunker::body();
        if bytes.len() <= chunker.max_chunk() {
            return self.put_bytes(bytes);
        }
        let hash = crate::ObjectHash::of(bytes);
        let mut list = Vec::new();
        let mut stored = 0u64;
        for r in chunker.chunks(bytes) {
            let p = self.put_bytes(&bytes[r])?;
            stored += p.stored_bytes;
            list.push(ChunkRef {
                hash: p.hash,
                size: p.size,
            });
        }
        let size = bytes.len() as u64;
        if list.len() < 2 {
            return self.put_bytes(bytes);
        }
        self.put_list(hash, size, &list, stored)
    }
}
