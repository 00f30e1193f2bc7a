//! The pool: `<store>/objects/<aa>/<rest>`, reading, verifying and single puts.

use std::fs::{File, OpenOptions};
use std::io::{self, BufReader, Read, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};

use cairn_store::durable::FILE_MODE;
use cairn_store::{nofollow, Store};

use crate::batch::ObjectBatch;
use crate::dirs::Dir;
use crate::format::{Header, HeaderError, ObjectKind, HEADER_LEN};
use crate::hash::Hasher;
use crate::{ChunkConfig, NoProgress, ObjectError, ObjectHash, StoreLock};

/// The pool format this build writes, recorded in `<store>/objects/FORMAT`.
/// Format 2 adds chunk lists: objects that name other objects, which a
/// format-1 prune would not follow.
pub const POOL_FORMAT: u32 = 2;
const FORMAT_FILE: &str = "FORMAT";

/// The outcome of storing one object.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Put {
    /// The object's name: SHA-256 of the plain bytes.
    pub hash: ObjectHash,
    /// Plain length in bytes.
    pub size: u64,
    /// True when this put wrote the object; false when it was already there.
    pub new: bool,
    /// Bytes this put added to the store (header + compressed), 0 when not new.
    pub stored_bytes: u64,
}

/// What the pool holds under one name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ObjectInfo {
    /// The object's name.
    pub hash: ObjectHash,
    /// How it is stored.
    pub kind: ObjectKind,
    /// Plain length in bytes, as its header says (for a chunk list, the
    /// length of the whole content).
    pub size: u64,
    /// Size of its own file on disk (for a chunk list, the list only, not
    /// its chunks).
    pub stored_bytes: u64,
}

/// The store-global content-addressed object pool.
///
/// Objects are immutable: a name is the SHA-256 of the plain bytes, so a put of
/// content already present is a no-op, and no object is ever rewritten.
#[derive(Clone, Debug)]
pub struct ObjectPool {
    store: Store,
    dir: PathBuf,
    chunking: ChunkConfig,
}

impl ObjectPool {
    /// Opens the pool of `store`, creating `objects/` (`0700`) and its format
    /// file when missing, and raising an older format file to
    /// [`POOL_FORMAT`] (so an older cairn's prune refuses a pool that may
    /// hold chunk lists). Chunking as [`ChunkConfig::default`].
    ///
    /// # Errors
    /// The directory or format file cannot be created.
    pub fn open(store: &Store) -> Result<Self, ObjectError> {
        let pool = ObjectPool::at(store);
        let objects = pool.objects_dir_made()?;
        let current = match read_format(&objects)? {
            Some(text) => parse_format(&text),
            None => Some(0),
        };
        // A newer or unreadable format file is left alone: prune refuses it.
        if current.is_some_and(|v| v < POOL_FORMAT) {
            let text = format!("cairn-objects {POOL_FORMAT}\n");
            nofollow::replace_at(&objects.fd, FORMAT_FILE, text.as_bytes(), Some(FILE_MODE))
                .map_err(|e| ObjectError::io(e.action, objects.path.join(FORMAT_FILE), e.source))?;
        }
        Ok(pool)
    }

    /// The pool of `store` without creating anything, for readers.
    pub fn at(store: &Store) -> Self {
        ObjectPool {
            store: store.clone(),
            dir: store.objects_dir(),
            chunking: ChunkConfig::default(),
        }
    }

    /// Sets which files are stored as chunks. Default:
    /// [`ChunkConfig::default`] (files over 1 MiB).
    pub fn with_chunking(mut self, chunking: ChunkConfig) -> Self {
        self.chunking = chunking;
        self
    }

    /// Which files are stored as chunks.
    pub fn chunking(&self) -> &ChunkConfig {
        &self.chunking
    }

    /// The store this pool belongs to.
    pub fn store(&self) -> &Store {
        &self.store
    }

    /// `<store>/objects`.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Where the object named `hash` lives (whether or not it exists).
    pub fn path_of(&self, hash: &ObjectHash) -> PathBuf {
        self.dir.join(hash.fan_out()).join(hash.rest())
    }

    /// True when an object named `hash` is present (its bytes are not read):
    /// a regular file under its name, reached without following a link.
    pub fn contains(&self, hash: &ObjectHash) -> bool {
        self.has_file(hash)
    }

    /// A group of puts made durable together by [`ObjectBatch::commit`].
    ///
    /// Writing objects requires the store lock (any mode; writers hold it
    /// shared): prune, holding it exclusively, may then remove any object no
    /// manifest names and any temporary file. Hold the same lock until the
    /// manifest naming the new objects is durable.
    pub fn batch<'a>(&'a self, lock: &'a StoreLock) -> ObjectBatch<'a> {
        debug_assert_eq!(lock.path(), self.store.store_lock_path().as_path());
        ObjectBatch::new(self, lock)
    }

    /// Stores `bytes` durably as one blob, whatever their length (manifests,
    /// responses); a no-op when the object is already present. `lock` as for
    /// [`ObjectPool::batch`].
    ///
    /// # Errors
    /// Writing, syncing or renaming fails; nothing is then visible under the name.
    pub fn put_bytes(&self, lock: &StoreLock, bytes: &[u8]) -> Result<Put, ObjectError> {
        let batch = self.batch(lock);
        let put = batch.put_bytes(bytes)?;
        batch.commit(&NoProgress)?;
        Ok(put)
    }

    /// Stores the file at `path` durably, streaming it when it is large, as
    /// content-defined chunks plus a chunk list when it is larger than the
    /// [`ChunkConfig::threshold`]. The file is opened without following a
    /// symlink. `lock` as for [`ObjectPool::batch`].
    ///
    /// # Errors
    /// The file cannot be read, is not a regular file, or changed while it was
    /// read ([`ObjectError::SourceChanged`]); or the write fails.
    pub fn put_file(&self, lock: &StoreLock, path: &Path) -> Result<Put, ObjectError> {
        let file = open_nofollow(path).map_err(|e| ObjectError::io("opening", path, e))?;
        let batch = self.batch(lock);
        let put = batch.put_open_file(&file, path)?;
        batch.commit(&NoProgress)?;
        Ok(put)
    }

    /// The plain bytes of an object, verified against its name.
    ///
    /// # Errors
    /// [`ObjectError::Missing`], [`ObjectError::Corrupt`] or an IO error.
    pub fn get(&self, hash: &ObjectHash) -> Result<Vec<u8>, ObjectError> {
        let mut out = Vec::new();
        self.read_to(hash, &mut out)?;
        Ok(out)
    }

    /// Streams the plain bytes of an object into `out` and returns their
    /// length; a chunk list is reassembled chunk by chunk (each verified
    /// before its bytes are written), never held whole in memory. The whole
    /// hash is checked at the end: on [`ObjectError::Corrupt`] the bytes
    /// already written to `out` must be discarded.
    ///
    /// # Errors
    /// [`ObjectError::Missing`], [`ObjectError::Corrupt`],
    /// [`ObjectError::NewerFormat`] or an IO error (reading, or writing `out`).
    pub fn read_to(&self, hash: &ObjectHash, out: &mut dyn Write) -> Result<u64, ObjectError> {
        let path = self.path_of(hash);
        let (header, reader) = self.open_object(hash, &path)?;
        if header.kind == ObjectKind::ChunkList {
            return self.read_list_to(hash, &path, &header, reader, out);
        }
        let corrupt = |reason: String| ObjectError::Corrupt {
            hash: *hash,
            path: path.clone(),
            reason,
        };
        let mut dec = zstd::stream::read::Decoder::with_buffer(reader)
            .map_err(|e| ObjectError::io("starting to decode", &path, e))?
            .single_frame();
        let mut hasher = Hasher::default();
        let mut buf = vec![0u8; 256 << 10];
        loop {
            let n = match dec.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(corrupt(format!("its compressed bytes do not decode ({e})"))),
            };
            hasher.update(&buf[..n]);
            out.write_all(&buf[..n])
                .map_err(|e| ObjectError::io("copying the content of", &path, e))?;
        }
        let (got, len) = hasher.finish();
        if len != header.plain_len {
            return Err(corrupt(format!(
                "it decodes to {len} bytes, its header says {}",
                header.plain_len
            )));
        }
        if got != *hash {
            return Err(corrupt(format!("its content hashes to {got}")));
        }
        Ok(len)
    }

    /// Re-reads an object and checks that its plain bytes hash to its name;
    /// for a chunk list, every chunk against its own name as well. Stops at
    /// the first problem ([`ObjectPool::check`] reports them all).
    ///
    /// # Errors
    /// As [`ObjectPool::read_to`].
    pub fn verify(&self, hash: &ObjectHash) -> Result<ObjectInfo, ObjectError> {
        let size = self.read_to(hash, &mut io::sink())?;
        let mut info = self.info(hash)?;
        info.size = size;
        Ok(info)
    }

    /// The header and file size of an object, without reading its content.
    ///
    /// # Errors
    /// [`ObjectError::Missing`], a damaged header, or an IO error.
    pub fn info(&self, hash: &ObjectHash) -> Result<ObjectInfo, ObjectError> {
        let path = self.path_of(hash);
        let (header, reader) = self.open_object(hash, &path)?;
        let stored_bytes = reader
            .get_ref()
            .metadata()
            .map_err(|e| ObjectError::io("reading metadata of", &path, e))?
            .len();
        Ok(ObjectInfo {
            hash: *hash,
            kind: header.kind,
            size: header.plain_len,
            stored_bytes,
        })
    }

    pub(crate) fn open_object(
        &self,
        hash: &ObjectHash,
        path: &Path,
    ) -> Result<(Header, BufReader<File>), ObjectError> {
        let Some(file) = self.open_object_file(hash)? else {
            return Err(ObjectError::Missing { hash: *hash });
        };
        let mut reader = BufReader::with_capacity(128 << 10, file);
        let mut raw = [0u8; HEADER_LEN];
        let mut got = 0;
        while got < HEADER_LEN {
            match reader.read(&mut raw[got..]) {
                Ok(0) => break,
                Ok(n) => got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(ObjectError::io("reading object", path, e)),
            }
        }
        match Header::decode(&raw[..got]) {
            Ok(h) => Ok((h, reader)),
            Err(HeaderError::Damaged(reason)) => Err(ObjectError::Corrupt {
                hash: *hash,
                path: path.to_owned(),
                reason: format!("its file {reason}"),
            }),
            Err(HeaderError::Newer { version }) => Err(ObjectError::NewerFormat {
                path: path.to_owned(),
                version,
            }),
        }
    }

    /// Refuses a pool whose format file declares a newer format (prune only:
    /// a newer pool may hold references this build cannot follow).
    pub(crate) fn check_format(&self) -> Result<(), ObjectError> {
        let path = self.dir.join(FORMAT_FILE);
        let Some(objects) = self.objects_dir()? else {
            return Ok(());
        };
        let Some(text) = read_format(&objects)? else {
            return Ok(());
        };
        match parse_format(&text) {
            Some(v) if v <= POOL_FORMAT => Ok(()),
            _ => Err(ObjectError::NewerPool {
                path,
                found: text.trim().chars().take(40).collect(),
                known: POOL_FORMAT,
            }),
        }
    }
}

/// The pool's format file, read in the open `objects/` without following
/// a link; `None` when there is none.
fn read_format(objects: &Dir) -> Result<Option<String>, ObjectError> {
    let path = objects.path.join(FORMAT_FILE);
    let mut file = match nofollow::open_file_at(&objects.fd, FORMAT_FILE) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(ObjectError::io("reading", path, e)),
    };
    let mut text = String::new();
    // A format file is one short line: read no more than a few of them.
    (&mut file)
        .take(4096)
        .read_to_string(&mut text)
        .map_err(|e| ObjectError::io("reading", path, e))?;
    Ok(Some(text))
}

/// The version a format file declares, `None` when it is not one.
fn parse_format(text: &str) -> Option<u32> {
    text.trim()
        .strip_prefix("cairn-objects ")
        .and_then(|v| v.parse::<u32>().ok())
}

/// Opens a file for reading without following a symlink in its last
/// component, and without blocking on a FIFO swapped in after a stat.
///
/// # Errors
/// As `open(2)`: `ELOOP` for a symlink, and so on.
pub fn open_nofollow(path: &Path) -> io::Result<File> {
    OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)
}
