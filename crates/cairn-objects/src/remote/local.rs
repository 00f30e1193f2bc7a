//! Another store's pool on this machine, seen as a remote: what `cairn
//! push` and `cairn pull` between store directories copy from and to, so a
//! copy between two directories takes exactly the path of a copy to or from
//! S3 ([`upload`](super::upload), [`fetch_missing`](super::fetch_missing)):
//! objects move in their stored encoding, and every one is checked against
//! its name before it becomes visible at the receiving end.

use super::{PutOutcome, RemoteEntry, RemoteObjects};
use crate::error::RemoteError;
use crate::prune::{list_pool, PoolFile};
use crate::{ObjectError, ObjectHash, ObjectPool, StoreLock};

/// An [`ObjectPool`] behind the [`RemoteObjects`] interface. Reads never
/// follow a link ([`ObjectPool::stored_bytes`]); a put checks the bytes
/// and makes them durable the pool's way ([`ObjectPool::import_stored`]),
/// under the store lock held shared, as a capture holds it.
pub struct PoolRemote<'a> {
    pool: &'a ObjectPool,
    name: String,
}

impl<'a> PoolRemote<'a> {
    /// `pool` as a remote, named in messages by its directory.
    pub fn new(pool: &'a ObjectPool) -> PoolRemote<'a> {
        PoolRemote {
            pool,
            name: pool.store().root().display().to_string(),
        }
    }
}

impl RemoteObjects for PoolRemote<'_> {
    fn name(&self) -> &str {
        &self.name
    }

    fn contains(&self, hash: &ObjectHash) -> Result<bool, RemoteError> {
        Ok(self.pool.contains(hash))
    }

    fn put_create(&self, hash: &ObjectHash, stored: &[u8]) -> Result<PutOutcome, RemoteError> {
        if self.pool.contains(hash) {
            return Ok(PutOutcome::AlreadyThere);
        }
        let lock = StoreLock::shared(self.pool.store())?;
        self.pool.import_stored(&lock, hash, stored, "an upload")?;
        Ok(PutOutcome::Created)
    }

    fn get(&self, hash: &ObjectHash) -> Result<Option<Vec<u8>>, RemoteError> {
        match self.pool.stored_bytes(hash) {
            Ok(bytes) => Ok(Some(bytes)),
            Err(ObjectError::Missing { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    fn list(
        &self,
        hex_prefix: &str,
        visit: &mut dyn FnMut(RemoteEntry),
    ) -> Result<(), RemoteError> {
        for file in list_pool(self.pool)? {
            let PoolFile::Object {
                hash,
                len,
                modified: last_modified,
                ..
            } = file
            else {
                continue;
            };
            if !hash.to_hex().starts_with(hex_prefix) {
                continue;
            }
            visit(RemoteEntry {
                hash,
                stored_bytes: len,
                last_modified,
            });
        }
        Ok(())
    }
}
