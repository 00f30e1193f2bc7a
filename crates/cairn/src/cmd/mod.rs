//! One module per subcommand, plus what they share.

pub mod checkpoint;
pub mod exec;
pub mod fork;
pub mod prices;
pub mod progress;
pub mod rewind;
pub mod run;
pub mod sessions;
pub mod verify;
pub mod workspace;

use std::path::PathBuf;

use cairn_store::{RunId, Store};

use crate::exit::{coded, Code};

/// What every command needs: the store and the directory it runs in.
pub struct Context {
    /// The store (not created until a command writes).
    pub store: Store,
    /// The current directory, absolute.
    pub cwd: PathBuf,
}

impl Context {
    pub fn new(store: Option<PathBuf>) -> anyhow::Result<Self> {
        let cwd = std::env::current_dir()?;
        let root = match store {
            Some(p) if p.is_absolute() => p,
            Some(p) => cwd.join(p),
            None => cairn_store::default_store_root()?,
        };
        Ok(Context {
            store: Store::at(root),
            cwd,
        })
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
