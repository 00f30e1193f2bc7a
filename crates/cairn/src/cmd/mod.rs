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
pub mod transfer;
pub mod tui;
pub mod verify;
pub mod workspace;

use std::path::{Path, PathBuf};

use cairn_store::{RunId, Store};

use crate::exit::{coded, Code};

/// What every command needs: the store and the directory it runs in.
#[derive(Clone)]
pub struct Context {
    /// The store (not created until a command writes).
    pub store: Store,
    /// The current directory, absolute.
    pub cwd: PathBuf,
}

impl Context {
    /// The store named by `--store`, else `CAIRN_STORE`, else the default,
    /// checked to be usable as a directory.
    pub fn new(store: Option<PathBuf>) -> anyhow::Result<Self> {
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
        let root = match given {
            Some(p) if p.is_absolute() => p,
            Some(p) => cwd.join(p),
            None => cairn_store::default_store_root()?,
        };
        check_store_path(&root)?;
        Ok(Context {
            store: Store::at(root),
            cwd,
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
