//! Sessions as users see them: summaries for listing, the repository a session
//! belongs to, and loading a run's state for a resume.
//!
//! # Guarantees
//! - A summary never trusts anything but the journal: the figures of a finished
//!   run come from its last record (a `terminal` carries cumulative `totals`),
//!   read from the end of the file without reading the rest; any other run is
//!   read and folded in full.
//! - A session whose journal does not read is still listed, marked
//!   `valid: false` with the problem, never dropped silently and never fatal to
//!   the listing.
//!
//! ```
//! let dir = tempfile::tempdir().unwrap();
//! let store = cairn_store::Store::open(dir.path()).unwrap();
//! assert!(cairn_sessions::list(&store).unwrap().is_empty());
//! ```
#![deny(missing_docs)]

mod load;
mod repo;
mod summary;

pub use load::{load, state_for_resume, Loaded};
pub use repo::{in_repository, repository_root};
pub use summary::{list, summarize, ParentRef, Summary};
