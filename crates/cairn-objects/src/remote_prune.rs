//! Reclaiming a shared pool (DESIGN §12): the objects of a
//! [`RemoteObjects`] that nothing names, older than a grace period.
//!
//! # Invariants
//! - What `named` lists is kept, and so is every chunk of a named chunk
//!   list (read from the remote: its header says it is one, its list says
//!   which chunks).
//! - An object younger than `grace`, or whose age the remote does not say,
//!   is kept whatever names it: a host may have uploaded it and be about to
//!   publish the record that names it (restic's approach). The caller
//!   holds the shared pool's exclusive lease besides.
//! - A named object that is not there is not an error here (verify says
//!   so); a named chunk list that does not decode stops the prune before
//!   anything is deleted.

use std::collections::HashSet;
use std::time::{Duration, SystemTime};

use crate::format::{Header, HEADER_LEN};
use crate::stored::{check_stored, Fault};
use crate::{ObjectError, ObjectHash, ObjectKind, RemoteObjects};

/// What [`prune_remote`] did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct RemotePruneReport {
    /// Objects deleted (or, with `dry_run`, that would be).
    pub objects: u64,
    /// Their stored bytes.
    pub bytes: u64,
    /// Objects kept because something names them.
    pub kept: u64,
    /// Objects nothing names, kept because they are younger than the grace
    /// period.
    pub kept_young: u64,
    /// Nothing was deleted.
    pub dry_run: bool,
}

/// Deletes from `remote` every object that `named` (and the chunk lists
/// among them) does not name and that is older than `grace`.
///
/// # Errors
/// [`ObjectError::Remote`] when the backend cannot list, read or delete
/// (objects deleted before stay deleted: nothing named them);
/// [`ObjectError::Corrupt`] for a named chunk list that does not decode
/// (nothing deleted).
pub fn prune_remote(
    remote: &dyn RemoteObjects,
    named: &[ObjectHash],
    grace: Duration,
    dry_run: bool,
) -> Result<RemotePruneReport, ObjectError> {
    let fail = |action: &'static str, hash: ObjectHash, source| ObjectError::Remote {
        action,
        hash,
        remote: remote.name().to_owned(),
        source,
    };
    let mut live: HashSet<ObjectHash> = named.iter().copied().collect();
    for hash in named {
        let Some(head) = remote
            .get_head(hash, HEADER_LEN)
            .map_err(|e| fail("reading", *hash, e))?
        else {
            continue;
        };
        if !matches!(Header::decode(&head), Ok(h) if h.kind == ObjectKind::ChunkList) {
            continue;
        }
        let Some(bytes) = remote.get(hash).map_err(|e| fail("reading", *hash, e))? else {
            continue;
        };
        let checked = check_stored(hash, &bytes).map_err(|f| ObjectError::Corrupt {
            hash: *hash,
            path: std::path::PathBuf::from(remote.name()),
            reason: match f {
                Fault::Damaged(why) => {
                    format!("its chunk list cannot be read ({why}); nothing was deleted")
                }
                Fault::Newer(v) => {
                    format!("it was written by a newer cairn (format {v}); nothing was deleted")
                }
            },
        })?;
        live.extend(checked.list.iter().map(|c| c.hash));
    }
    let mut report = RemotePruneReport {
        dry_run,
        ..RemotePruneReport::default()
    };
    let now = SystemTime::now();
    let mut doomed = Vec::new();
    remote
        .list("", &mut |e| {
            if live.contains(&e.hash) {
                report.kept += 1;
                return;
            }
            let old = e
                .last_modified
                .and_then(|t| now.duration_since(t).ok())
                .is_some_and(|age| age >= grace);
            if old {
                doomed.push(e);
            } else {
                report.kept_young += 1;
            }
        })
        .map_err(|e| fail("listing", ObjectHash::of(b""), e))?;
    for e in doomed {
        if !dry_run {
            remote
                .delete(&e.hash)
                .map_err(|err| fail("deleting", e.hash, err))?;
        }
        report.objects += 1;
        report.bytes += e.stored_bytes;
    }
    Ok(report)
}
