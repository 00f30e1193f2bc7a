//! One module per subcommand, plus what they share: the [`Context`],
//! `progress` (progress bars) and `shared` (a shared store's cache). A
//! command module parses, calls the library, renders; none calls another
//! (`tests/crate_map.rs` holds that). What several commands need beyond
//! that is not a command: `crate::setup` (the launcher, trackers, ids),
//! `crate::serving` (listen addresses, the gateway's configuration,
//! serving until stopped), `crate::job` (a command run as a node).

pub mod checkpoint;
pub mod config;
pub mod exec;
pub mod fork;
pub mod gateway;
pub mod mcp;
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
pub mod wrap;

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
    /// The configuration file (`cairn_config`).
    pub config: config::Loaded,
}

impl Context {
    /// The store named by `--store`, else `CAIRN_STORE`, else `store` in the
    /// configuration file, else the default, checked to be usable as a
    /// directory.
    pub fn new(
        store: Option<PathBuf>,
        objects: Option<String>,
        config: config::Loaded,
    ) -> anyhow::Result<Self> {
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
                None => match config.file.as_ref().and_then(|f| f.store.as_deref()) {
                    Some(s) => Some(config_store(s, &config)?),
                    None => None,
                },
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
                config,
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
            config,
        })
    }

    /// Refuses a workspace that holds the store: a model's tools or a
    /// command run there could rewrite the journals that record them.
    pub fn refuse_store_inside(&self, workspace: &Path) -> anyhow::Result<()> {
        Ok(cairn_agent::refuse_store_inside(&self.store, workspace)?)
    }

    /// The effective configuration with these flags given.
    pub fn effective(&self, flags: &cairn_config::Flags) -> cairn_config::Effective {
        self.config.effective(flags)
    }

    /// The approval policy: `--approve`, else `CAIRN_APPROVE`, else the
    /// configuration file's `approve`, else never.
    pub fn approve(
        &self,
        flag: Option<cairn_agent::ApprovePolicy>,
    ) -> anyhow::Result<cairn_agent::ApprovePolicy> {
        if let Some(p) = flag {
            return Ok(p);
        }
        let s = self.effective(&cairn_config::Flags::default()).approve;
        s.value.parse().map_err(|e| {
            coded(
                Code::Usage,
                format!("approve = {:?} ({}): {e}", s.value, s.origin),
            )
        })
    }

    /// The model a new session uses: `--model`, else `CAIRN_MODEL`, else the
    /// configuration file's `model`, else the default of the provider whose
    /// key is set (`cairn_config::Effective::resolve`).
    pub fn model(&self, flag: Option<&str>) -> Option<cairn_config::Setting<String>> {
        self.effective(&cairn_config::Flags {
            model: flag.map(str::to_owned),
            ..cairn_config::Flags::default()
        })
        .model
    }

    /// The base URL of a new session's provider when no `--base-url` is
    /// given: its environment variable, else the configuration file's.
    pub fn base_url(&self, kind: cairn_model::ProviderKind) -> Option<String> {
        let e = self.effective(&cairn_config::Flags::default());
        match kind {
            cairn_model::ProviderKind::OpenAi => e.openai_base_url,
            cairn_model::ProviderKind::Anthropic => e.anthropic_base_url,
            _ => None,
        }
        .map(|s| s.value)
    }

    /// The session a reference on the command line names: its id, a
    /// unique prefix, its name, or `@last` (`cairn_sessions::resolve_session`).
    pub fn existing_run(&self, text: &str) -> anyhow::Result<RunId> {
        if let Some(shared) = &self.shared {
            // The cache brought to the shared store's records first: the
            // one session named by its id, else every session (a prefix or
            // a name is resolved over all of them).
            match RunId::parse(text) {
                Ok(id) if shared.sync(&id)? != cairn_sessions::Synced::Absent => {}
                _ => shared.sync_all()?,
            }
        }
        let repository = cairn_sessions::repository_root(&self.cwd);
        Ok(cairn_sessions::resolve_session(
            &self.store,
            text,
            &repository,
        )?)
    }
}

/// The store the configuration file names: a `nats://` URL, an absolute
/// path, or `~/…` below HOME.
fn config_store(s: &str, config: &config::Loaded) -> anyhow::Result<PathBuf> {
    let home = config::env("HOME");
    let p = match (s.strip_prefix("~/"), home) {
        (Some(rest), Some(home)) => PathBuf::from(home).join(rest),
        _ => PathBuf::from(s),
    };
    if s.starts_with("nats://") || p.is_absolute() {
        return Ok(p);
    }
    let file = config
        .path
        .as_ref()
        .map_or_else(String::new, |f| format!(" in {}", f.display()));
    Err(coded(
        Code::Usage,
        format!("store = {s:?}{file} is not an absolute path: give /path/to/store, ~/path or nats://HOST:PORT/PREFIX"),
    ))
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
