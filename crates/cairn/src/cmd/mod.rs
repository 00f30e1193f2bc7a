//! One module per subcommand, plus what they share.

pub mod checkpoint;
pub mod exec;
pub mod fork;
pub mod gateway;
pub mod prices;
pub mod progress;
pub mod rewind;
pub mod run;
pub mod serve;
pub mod sessions;
pub mod shared;
pub mod transfer;
pub mod tui;
pub mod verify;
pub mod vm;
pub mod workspace;

use std::path::{Path, PathBuf};

use cairn_store::{RunId, Store};

use crate::exit::{coded, Code};

/// What every command needs: the store and the directory it runs in.
#[derive(Clone)]
pub struct Context {
    /// The store (not created until a command writes); for a shared store,
    /// its local cache.
    pub store: Store,
    /// The current directory, absolute.
    pub cwd: PathBuf,
    /// `--objects` / `CAIRN_OBJECTS`: where a shared store keeps objects.
    pub objects: Option<String>,
    /// With `--store nats://…`: the shared store the cache mirrors.
    pub shared: Option<std::sync::Arc<shared::SharedStore>>,
}

impl Context {
    /// The store named by `--store`, else `CAIRN_STORE`, else the default,
    /// checked to be usable as a directory.
    pub fn new(store: Option<PathBuf>, objects: Option<String>) -> anyhow::Result<Self> {
        let cwd = std::env::current_dir()?;
        let given = match store {
            Some(p) if p.as_os_str().is_empty() => {
                return Err(coded(Code::Usage, "--store is empty: give the store's directory"))
            }
            Some(p) => Some(p),
            None => match std::env::var_os("CAIRN_STORE") {
                Some(v) if v.is_empty() => {
                    return Err(coded(
                        Code::Usage,
                        "CAIRN_STORE is set but empty: unset it to use the default store, or set it to a directory",
                    ))
                }
                Some(v) => Some(PathBuf::from(v)),
                None => None,
            },
        };
        if let Some(url) = given
            .as_ref()
            .and_then(|p| p.to_str())
            .filter(|u| u.starts_with("nats://"))
        {
            let shared = shared::SharedStore::open(url, objects.as_deref())?;
            return Ok(Context {
                store: shared.cache.clone(),
                cwd,
                objects,
                shared: Some(std::sync::Arc::new(shared)),
            });
        }
        let root = match given {
            Some(p) if p.is_absolute() => p,
            Some(p) => cwd.join(p),
            None => cairn_store::default_store_root()?,
        };
        check_store_path(&root)?;
        Ok(Context {
            store: Store::at(root),
            cwd,
            objects,
            shared: None,
        })
    }

    /// Refuses a workspace that holds the store: a model's tools or a
    /// command run there could rewrite the journals that record them.
    pub fn refuse_store_inside(&self, workspace: &Path) -> anyhow::Result<()> {
        let ws = std::fs::canonicalize(workspace).unwrap_or_else(|_| workspace.to_path_buf());
        let store = canonical_prefix(self.store.root());
        if store.starts_with(&ws) {
            return Err(coded(
                Code::Usage,
                format!(
                    "the store {} is inside the workspace {}: the session's tools and commands could rewrite the journal that records them, and a rewind could not undo it. Put the store outside the workspace (--store DIR or CAIRN_STORE), or work in another directory",
                    store.display(),
                    ws.display()
                ),
            ));
        }
        Ok(())
    }

    /// Parses a session id given on the command line and checks it exists.
    pub fn existing_run(&self, id: &str) -> anyhow::Result<RunId> {
        let id = RunId::parse(id)?;
        if let Some(shared) = &self.shared {
            // The cache's copy brought to the shared store's records first.
            if shared.sync(&id)? == cairn_sessions::Synced::Absent {
                return Err(coded(
                    Code::Usage,
                    format!(
                        "no session {id} in the shared store {}: list sessions with `cairn sessions --all`",
                        shared.url
                    ),
                ));
            }
        }
        if !self.store.journal_path(&id).is_file() {
            return Err(coded(
                Code::Usage,
                format!(
                    "no session {id} in store {}: list sessions with `cairn sessions --all`",
                    self.store.root().display()
                ),
            ));
        }
        Ok(id)
    }
}

/// Refuses, on a shared store, what only a store directory can do.
pub fn refuse_shared(ctx: &Context, what: &str) -> anyhow::Result<()> {
    match &ctx.shared {
        Some(s) => Err(coded(
            Code::Usage,
            format!(
                "{what} works on a store directory, not on the shared store {}: its journals are kept whole",
                s.url
            ),
        )),
        None => Ok(()),
    }
}

/// Refuses a store path that is, or lies below, something that is not a
/// directory.
fn check_store_path(root: &Path) -> anyhow::Result<()> {
    let mut at = Some(root);
    while let Some(p) = at {
        match std::fs::metadata(p) {
            Ok(m) if m.is_dir() => return Ok(()),
            Ok(_) => {
                return Err(coded(
                    Code::Usage,
                    format!(
                        "the store {} cannot be used: {} is a file, not a directory; give a directory with --store or CAIRN_STORE",
                        root.display(),
                        p.display()
                    ),
                ))
            }
            Err(_) => at = p.parent(),
        }
    }
    Ok(())
}

/// `path` with its longest existing prefix canonicalised (the store may not
/// exist yet).
fn canonical_prefix(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut at = path;
    loop {
        if let Ok(c) = std::fs::canonicalize(at) {
            return rest.iter().rev().fold(c, |acc, part| acc.join(part));
        }
        match (at.parent(), at.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_owned());
                at = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}
