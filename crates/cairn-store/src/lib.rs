//! The cairn store: where every run lives, and how files in it are written.
//!
//! One store holds every run (DESIGN §1). This crate owns three rules so that no
//! other crate has to restate them:
//!
//! 1. **Layout.** [`Store`] names every path under the store root; nothing else
//!    builds store paths by hand.
//! 2. **Identity.** [`RunId`] is the only way to turn a string into a path
//!    component: 1–128 characters from `[0-9A-Za-z_-]`. New ids are ULIDs, so
//!    they sort by creation time.
//! 3. **Durability.** [`durable::write_atomic`] is the one helper for a file that
//!    is replaced: temporary name, fsync, rename, fsync of the directory.
//!    [`durable::create_dir_private`] creates directories `0700` and fsyncs the
//!    parent, files are created `0600`.
//!
//! 4. **No symlinks below a root.** [`nofollow`] reaches every path below a
//!    root through one resolver, [`nofollow::open_beneath`] (`openat2` with
//!    `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS` on Linux, a component-wise
//!    `O_NOFOLLOW` walk elsewhere), and `*at` calls on the directory it
//!    opened, for the file tools and every restore.
//! 5. **Safe paths and modes.** [`safe`] holds the validated relative path
//!    ([`safe::RelPath`]), the one mode rule, the one mtime conversion and
//!    the one temporary-name scheme.
//! 6. **Who may call a cairn HTTP server.** [`access`] holds the loopback
//!    `Host` rule, the same-origin and JSON rules, the token's carriers and
//!    their constant-time comparison, for `cairn serve` and the gateway
//!    alike (over header values as text: no HTTP stack here).
//!
//! It does no networking and starts no threads.
//!
//! ```
//! use cairn_store::{RunId, Store};
//! let dir = tempfile::tempdir().unwrap();
//! let store = Store::open(dir.path()).unwrap();
//! let id = RunId::new();
//! assert!(store.run_dir(&id).starts_with(store.root()));
//! assert!(RunId::parse("../etc").is_err());
//! ```
#![deny(missing_docs)]

pub mod access;
mod beneath;
mod durable_impl;
mod error;
mod id;
mod layout;
pub mod nofollow;
pub mod safe;
pub mod storage;
pub mod text;

/// Durable file-system primitives (fsync discipline of DESIGN §1 and §2).
pub mod durable {
    pub use crate::durable_impl::{
        create_dir_all_durable, create_dir_deferred, create_dir_private, create_file_private,
        dirty_bytes, fsync_dir, fsync_dir_at, open_or_create_private, sync_filesystem,
        sync_filesystem_held, write_atomic, write_atomic_with, DIR_MODE, FILE_MODE,
    };
}
pub use error::{ErrorKind, StoreError};
pub use id::{RunId, RunIdError};
pub use layout::{canonical_prefix, default_store_root, RunsDir, Store, REMOVING_PREFIX};
