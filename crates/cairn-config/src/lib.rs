//! cairn's configuration (DESIGN §16): `$XDG_CONFIG_HOME/cairn/config.toml`
//! (else `~/.config/cairn/config.toml`) holds the defaults people set once.
//!
//! # Guarantees
//! 1. Every value is resolved the same way: a command-line flag, else the
//!    environment, else the file, else the built-in default; each
//!    [`Setting`] says which of them it came from ([`Origin`]), so `cairn
//!    config` can show it.
//! 2. A key never comes from the file: an entry named like a credential
//!    (`api_key`, `token`, `secret`, `password`, anything ending in `_key` or
//!    `_token`) or whose value looks like one (`sk-…`) is refused with the
//!    environment variable to use instead, and the file is not used.
//! 3. A file that does not parse, or holds a key cairn does not know, is an
//!    error naming its line and column; it is never half-read.
//! 4. No file is fine: everything falls through to the built-in defaults.
//!
//! This crate reads; it never writes the file.
//!
//! ```
//! let file = cairn_config::ConfigFile::parse(
//!     std::path::Path::new("config.toml"),
//!     "model = \"anthropic:claude-sonnet-4-5\"\n[serve]\nlisten = \"127.0.0.1:9000\"\n",
//! )
//! .unwrap();
//! let env = |_: &str| None;
//! let c = cairn_config::Effective::resolve(&cairn_config::Flags::default(), &env, Some(&file));
//! assert_eq!(c.model.as_ref().unwrap().value, "anthropic:claude-sonnet-4-5");
//! assert_eq!(c.serve_listen.value, "127.0.0.1:9000");
//! assert_eq!(c.gateway_listen.value, cairn_config::DEFAULT_GATEWAY_LISTEN);
//! ```
#![deny(missing_docs)]

mod file;
mod resolve;

pub use file::{config_path, ConfigError, ConfigFile};
pub use resolve::{
    Effective, Flags, Origin, Setting, DEFAULT_ANTHROPIC_MODEL, DEFAULT_GATEWAY_LISTEN,
    DEFAULT_OPENAI_MODEL, DEFAULT_SERVE_LISTEN,
};
