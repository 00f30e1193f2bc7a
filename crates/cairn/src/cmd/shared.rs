//! `--store nats://HOST:PORT/PREFIX` (DESIGN §12): a shared store, its
//! journals on JetStream and its objects and manifests at `--objects
//! s3://…`, used through a local cache directory on which every command
//! runs unchanged (`cairn_sessions::Shared` keeps the two in step).
//!
//! The cache is `$XDG_CACHE_HOME/cairn/shared/<the URL's host, port and
//! prefix>` (else `~/.cache/…`). No credential is written there: S3's come
//! from the `AWS_*` variables at each run.

use std::path::PathBuf;
use std::sync::Arc;

use cairn_remote::{JetStreamConfig, JetStreamJournals, S3Error, S3Objects};
use cairn_sessions::{Shared, Synced};
use cairn_store::{RunId, Store};

use crate::exit::{coded, Code};

/// A shared store and the cache that mirrors it.
pub struct SharedStore {
    /// The URL, as given.
    pub url: String,
    /// The local cache: every command's store.
    pub cache: Store,
    /// The journals, objects and manifests.
    pub shared: Arc<Shared>,
    journals: Arc<JetStreamJournals>,
}

impl SharedStore {
    /// Connects to both servers, opens the cache, and makes every journal
    /// writer of the cache publish to the shared store.
    pub fn open(url: &str, objects: Option<&str>) -> anyhow::Result<SharedStore> {
        let objects = parse_objects(url, objects)?;
        let journals = Arc::new(open_journals(url)?);
        objects.check()?;
        let objects = Arc::new(objects);
        let shared = Arc::new(Shared {
            journals: journals.clone(),
            objects: objects.clone(),
            files: objects,
        });
        let cache = Store::open(cache_root(url)?)?;
        cairn_journal::install_mirror(cache.root(), shared.clone());
        Ok(SharedStore {
            url: url.to_owned(),
            cache,
            shared,
            journals,
        })
    }

    /// Gives up the writer leases this process took: at the end of a
    /// command (a process killed leaves them to lapse). One that cannot be
    /// given up is said on stderr: another host is refused that session
    /// until it lapses.
    pub fn close(&self) {
        if let Err(e) = self.journals.release_held() {
            crate::output::note(format!(
                "cairn: warning: {e}; the writer lease lapses on its own within a minute"
            ));
        }
    }

    /// Brings the cache's copy of `id` to the shared store's records.
    pub fn sync(&self, id: &RunId) -> anyhow::Result<Synced> {
        let synced = self.shared.sync(&self.cache, id)?;
        if let Synced::SetAside(dir) = &synced {
            crate::output::note(format!(
                "cairn: the cached copy of session {id} held records {} does not; it was moved to {}",
                self.url,
                dir.display()
            ));
        }
        Ok(synced)
    }

    /// Brings every session whose record count differs into the cache.
    pub fn sync_all(&self) -> anyhow::Result<()> {
        self.shared.sync_all(&self.cache)?;
        Ok(())
    }

    /// [`SharedStore::sync_all`] given a listing of the cache just made:
    /// its record counts were checked against each journal's tail, so the
    /// cache's journals are not read again. Returns how many sessions were
    /// brought in (the listing is stale when that is not 0).
    pub fn sync_listed(&self, listed: &[cairn_sessions::Summary]) -> anyhow::Result<usize> {
        let known: std::collections::HashMap<&str, u64> = listed
            .iter()
            .filter(|s| s.valid)
            .map(|s| (s.id.as_str(), s.records))
            .collect();
        Ok(self
            .shared
            .sync_stale(&self.cache, |id| known.get(id.as_str()).copied())?)
    }
}

/// The journals at a `nats://` URL; a malformed one is bad usage.
pub fn open_journals(url: &str) -> anyhow::Result<JetStreamJournals> {
    JetStreamJournals::open(url, JetStreamConfig::default()).map_err(|e| match e {
        cairn_journal::RemoteJournalError::BadUrl { .. } => coded(Code::Usage, e.to_string()),
        e => anyhow::Error::new(e),
    })
}

/// The objects at `--objects`, required beside a `nats://` URL (not yet
/// asked anything: see [`S3Objects::check`]).
pub fn parse_objects(url: &str, objects: Option<&str>) -> anyhow::Result<S3Objects> {
    let Some(objects) = objects.filter(|u| !u.is_empty()) else {
        return Err(coded(
            Code::Usage,
            format!("{url} keeps its journals on JetStream and its objects in S3: give --objects s3://BUCKET/PREFIX (or set CAIRN_OBJECTS)"),
        ));
    };
    S3Objects::open(objects).map_err(|e| match e {
        S3Error::BadUrl { .. } => coded(Code::Usage, e.to_string()),
        e => anyhow::Error::new(e),
    })
}

/// `$XDG_CACHE_HOME/cairn/shared/<slug>`, else `~/.cache/cairn/shared/<slug>`.
fn cache_root(url: &str) -> anyhow::Result<PathBuf> {
    let base = match std::env::var_os("XDG_CACHE_HOME").filter(|v| !v.is_empty()) {
        Some(x) if PathBuf::from(&x).is_absolute() => PathBuf::from(x),
        _ => match std::env::var_os("HOME").filter(|v| !v.is_empty()) {
            Some(home) => PathBuf::from(home).join(".cache"),
            None => {
                return Err(coded(
                    Code::Usage,
                    "a shared store needs a cache directory: set XDG_CACHE_HOME or HOME",
                ))
            }
        },
    };
    let rest = url.strip_prefix("nats://").unwrap_or(url);
    let rest = rest.split('?').next().unwrap_or(rest);
    let slug: String = rest
        .chars()
        .map(|c| match c {
            'a'..='z' | 'A'..='Z' | '0'..='9' | '.' | '-' => c,
            _ => '_',
        })
        .collect();
    Ok(base.join("cairn").join("shared").join(slug))
}
