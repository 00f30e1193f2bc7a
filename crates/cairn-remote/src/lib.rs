//! cairn's remote backends: implementations, from above, of the storage
//! interfaces the lower crates define (DESIGN §12, §15). Async lives here
//! and only here; every interface it implements stays synchronous.
//!
//! Journals on NATS JetStream, [`JetStreamJournals`], a
//! [`cairn_journal::RemoteJournals`]: one subject per session, fenced
//! appends, writer leases in a key-value bucket.
//!
//! The object pool on S3-compatible storage, [`S3Objects`], a
//! [`cairn_objects::RemoteObjects`]. With it, [`cairn_objects::upload`]
//! puts a pool's objects in a bucket before a record naming them is
//! published, and [`cairn_objects::fetch_missing`] brings them into another
//! machine's pool, each verified against its name.
//!
//! # Guarantees
//! - Keys mirror the local layout: `PREFIX/objects/<aa>/<62 hex digits>`,
//!   each holding the object's stored encoding unchanged.
//! - Puts are create-only (`If-None-Match: *`): an object that is there is
//!   never overwritten, and finding it there is a successful dedup.
//! - A missing object reads as `None`, never as an error; a missing bucket,
//!   refused credentials and an endpoint that does not answer are
//!   [`S3Error`] variants that name the bucket or endpoint and say what to
//!   do. Credentials appear in no message and no `Debug` output.
//! - Requests time out (connect 5 s, whole request 120 s) and are retried a
//!   bounded number of times ([`S3Config`]).
//!
//! # Not guaranteed
//! - Buckets are not created: make the bucket first.
//! - An object is one `PUT` (S3 takes up to 5 GiB in one); large files are
//!   chunked by the pool long before that.
//! - A store that ignores `If-None-Match` lets a put overwrite; for
//!   content-addressed names that writes the same object again.
//!
//! # Example
//! ```no_run
//! use cairn_objects::{fetch_missing, upload, NoProgress, ObjectPool, StoreLock};
//! use cairn_remote::S3Objects;
//! use cairn_store::Store;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // Endpoint, region and credentials from AWS_* in the environment.
//! let remote = S3Objects::open("s3://my-bucket/team/cairn")?;
//! remote.check()?; // the bucket exists and takes our credentials
//!
//! let here = Store::open("/var/lib/cairn")?;
//! let pool = ObjectPool::open(&here)?;
//! let lock = StoreLock::shared(&here)?;
//! let put = pool.put_bytes(&lock, b"a file's content")?;
//! upload(&pool, &remote, &[put.hash], &NoProgress)?;
//! // ... only now publish the record that names put.hash ...
//!
//! let there = Store::open("/tmp/other-machine")?;
//! let other = ObjectPool::open(&there)?;
//! let lock = StoreLock::shared(&there)?;
//! fetch_missing(&other, &lock, &remote, &[put.hash], &NoProgress)?;
//! assert_eq!(other.get(&put.hash)?, b"a file's content");
//! # Ok(())
//! # }
//! ```
#![deny(missing_docs)]

mod bridge;
mod error;
mod jetstream;
mod location;
mod retry;
mod s3;

pub use error::S3Error;
pub use jetstream::{JetStreamConfig, JetStreamJournals, WriterLease};
pub use s3::{S3Config, S3Objects};
