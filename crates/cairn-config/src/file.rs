//! Reading `config.toml`: where it is, what it may hold, and the refusal of
//! anything that looks like a credential.

use std::path::{Path, PathBuf};

use serde::Deserialize;

/// What went wrong with the configuration file.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// The file exists but cannot be read.
    #[error("cannot read the configuration file {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The file is not valid TOML, or holds something cairn does not know.
    #[error("the configuration file {}, line {line}, column {column}: {message}; fix it (see `cairn config` and the README's Configuration section) or move it away", path.display())]
    Invalid {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// What is wrong.
        message: String,
    },
    /// The file holds what looks like a credential.
    #[error("the configuration file {}, line {line}: `{key}` looks like a credential, and keys never go in the configuration file (it is not private, and it is copied around); remove it and set {env} in the environment instead", path.display())]
    Credential {
        /// The file.
        path: PathBuf,
        /// 1-based line.
        line: usize,
        /// The entry, dotted (`gateway.token`).
        key: String,
        /// The environment variable to use.
        env: String,
    },
}

/// The file's contents, checked. Unknown keys are refused (rule 3).
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ConfigFile {
    /// Where it was read from (not in the file).
    #[serde(skip)]
    pub path: PathBuf,
    /// The model for new sessions: `openai:MODEL`, `anthropic:MODEL`,
    /// `script:PATH`.
    pub model: Option<String>,
    /// The OpenAI-compatible base URL (new sessions, the gateway's upstream).
    pub openai_base_url: Option<String>,
    /// The Anthropic base URL (new sessions, the gateway's upstream).
    pub anthropic_base_url: Option<String>,
    /// Which tool calls wait for a yes: `never`, `shell`, `writes`.
    pub approve: Option<String>,
    /// The store: a directory or `nats://HOST:PORT/PREFIX`.
    pub store: Option<String>,
    /// `[serve]`.
    #[serde(default)]
    pub serve: Listen,
    /// `[gateway]`.
    #[serde(default)]
    pub gateway: Listen,
}

/// A server's table: where it listens.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Listen {
    /// `HOST:PORT`.
    pub listen: Option<String>,
}

/// `$XDG_CONFIG_HOME/cairn/config.toml` when `XDG_CONFIG_HOME` is an
/// absolute path, else `$HOME/.config/cairn/config.toml`; `None` when
/// neither is set. `env` reads the environment.
pub fn config_path(env: &dyn Fn(&str) -> Option<String>) -> Option<PathBuf> {
    let set = |name: &str| env(name).filter(|v| !v.is_empty());
    if let Some(x) = set("XDG_CONFIG_HOME").map(PathBuf::from) {
        if x.is_absolute() {
            return Some(x.join("cairn").join("config.toml"));
        }
    }
    set("HOME").map(|h| PathBuf::from(h).join(".config/cairn/config.toml"))
}

/// The environment variable a credential-like entry belongs in.
fn credential_env(dotted: &str) -> &'static str {
    let d = dotted.to_ascii_lowercase();
    if d.contains("anthropic") {
        "ANTHROPIC_API_KEY"
    } else if d.contains("openai") {
        "OPENAI_API_KEY"
    } else if d.starts_with("serve") {
        "CAIRN_SERVE_TOKEN"
    } else if d.starts_with("gateway") {
        "CAIRN_GATEWAY_TOKEN"
    } else {
        "OPENAI_API_KEY or ANTHROPIC_API_KEY"
    }
}

/// Whether an entry's name says it holds a credential.
fn named_like_credential(key: &str) -> bool {
    let k = key.to_ascii_lowercase().replace('-', "_");
    [
        "api_key",
        "apikey",
        "key",
        "token",
        "secret",
        "password",
        "passwd",
        "auth",
        "authorization",
        "bearer",
    ]
    .contains(&k.as_str())
        || ["_key", "_token", "_secret", "_password"]
            .iter()
            .any(|s| k.ends_with(s))
}

/// Whether a value looks like a credential (an OpenAI or Anthropic key).
fn valued_like_credential(v: &str) -> bool {
    let v = v.trim();
    v.starts_with("sk-") || v.starts_with("sk_")
}

/// The first entry, depth first, that looks like a credential: its dotted
/// name and its own key.
fn find_credential(table: &toml::Table, prefix: &str) -> Option<(String, String)> {
    for (k, v) in table {
        let dotted = if prefix.is_empty() {
            k.clone()
        } else {
            format!("{prefix}.{k}")
        };
        let hit = named_like_credential(k)
            || matches!(v, toml::Value::String(s) if valued_like_credential(s));
        if hit {
            return Some((dotted, k.clone()));
        }
        if let toml::Value::Table(t) = v {
            if let Some(found) = find_credential(t, &dotted) {
                return Some(found);
            }
        }
    }
    None
}

/// 1-based line and column of byte `at` in `text`.
fn line_column(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let column = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, column)
}

impl ConfigFile {
    /// Reads the file at `path`; `Ok(None)` when there is none.
    ///
    /// # Errors
    /// [`ConfigError`]: unreadable, invalid, or holding a credential.
    pub fn load(path: &Path) -> Result<Option<ConfigFile>, ConfigError> {
        match std::fs::read_to_string(path) {
            Ok(text) => Self::parse(path, &text).map(Some),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(ConfigError::Read {
                path: path.to_owned(),
                source,
            }),
        }
    }

    /// Parses `text` as the file at `path` (rules 2 and 3 of the crate doc).
    ///
    /// # Errors
    /// [`ConfigError::Invalid`] or [`ConfigError::Credential`].
    pub fn parse(path: &Path, text: &str) -> Result<ConfigFile, ConfigError> {
        let invalid = |e: toml::de::Error| {
            let (line, column) = e.span().map_or((1, 1), |s| line_column(text, s.start));
            ConfigError::Invalid {
                path: path.to_owned(),
                line,
                column,
                message: e.message().trim_end().to_owned(),
            }
        };
        // Credentials first: a key is refused even where the file has
        // other faults, and it is named before anything else is said.
        let table: toml::Table = toml::from_str(text).map_err(invalid)?;
        if let Some((dotted, key)) = find_credential(&table, "") {
            let line = text
                .lines()
                .position(|l| {
                    let l = l.trim_start().trim_start_matches(['"', '\'']);
                    l.starts_with(&key)
                })
                .map_or(1, |i| i + 1);
            return Err(ConfigError::Credential {
                path: path.to_owned(),
                line,
                env: credential_env(&dotted).to_owned(),
                key: dotted,
            });
        }
        let mut file: ConfigFile = toml::from_str(text).map_err(invalid)?;
        file.path = path.to_owned();
        Ok(file)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ConfigFile, ConfigError> {
        ConfigFile::parse(Path::new("/c/config.toml"), text)
    }

    #[test]
    fn a_full_file_reads() {
        let f = parse(
            "model = \"openai:gpt-4.1\"\nopenai_base_url = \"http://localhost:11434/v1\"\n\
             anthropic_base_url = \"https://a.example\"\napprove = \"writes\"\nstore = \"/s\"\n\
             [serve]\nlisten = \"127.0.0.1:1\"\n[gateway]\nlisten = \"127.0.0.1:2\"\n",
        )
        .unwrap();
        assert_eq!(f.model.as_deref(), Some("openai:gpt-4.1"));
        assert_eq!(f.gateway.listen.as_deref(), Some("127.0.0.1:2"));
        assert_eq!(f.path, Path::new("/c/config.toml"));
        assert_eq!(parse("").unwrap().model, None);
    }

    #[test]
    fn credentials_are_refused_with_the_variable_to_use() {
        let rows = [
            (
                "api_key = \"x\"\n",
                "api_key",
                "OPENAI_API_KEY or ANTHROPIC_API_KEY",
                1,
            ),
            (
                "model = \"m\"\nopenai_api_key = \"x\"\n",
                "openai_api_key",
                "OPENAI_API_KEY",
                2,
            ),
            (
                "ANTHROPIC_API_KEY = \"x\"\n",
                "ANTHROPIC_API_KEY",
                "ANTHROPIC_API_KEY",
                1,
            ),
            (
                "[gateway]\ntoken = \"t\"\n",
                "gateway.token",
                "CAIRN_GATEWAY_TOKEN",
                2,
            ),
            (
                "[serve]\nlisten = \"x\"\nauth-token = \"t\"\n",
                "serve.auth-token",
                "CAIRN_SERVE_TOKEN",
                3,
            ),
            // A key's value under any name, even one cairn knows.
            (
                "model = \"sk-proj-abc\"\n",
                "model",
                "OPENAI_API_KEY or ANTHROPIC_API_KEY",
                1,
            ),
            (
                "[openai]\nsecret = \"s\"\n",
                "openai.secret",
                "OPENAI_API_KEY",
                2,
            ),
        ];
        for (text, key, env, line) in rows {
            match parse(text) {
                Err(e @ ConfigError::Credential { .. }) => {
                    let m = e.to_string();
                    assert!(m.contains(&format!("`{key}`")), "{text:?}: {m}");
                    assert!(
                        m.contains(&format!("set {env} in the environment")),
                        "{text:?}: {m}"
                    );
                    assert!(m.contains(&format!("line {line}:")), "{text:?}: {m}");
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn bad_files_name_line_and_column() {
        let rows = [
            ("model = \n", 1),
            ("model = \"m\"\nmodle = \"n\"\n", 2),
            ("[serve]\nlisten = 7\n", 2),
            ("model = \"m\"\n\n[nope]\n", 3),
        ];
        for (text, line) in rows {
            match parse(text) {
                Err(e @ ConfigError::Invalid { .. }) => {
                    let m = e.to_string();
                    assert!(m.contains(&format!("line {line}, column")), "{text:?}: {m}");
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn where_the_file_is() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| (*v).to_owned())
            }
        };
        assert_eq!(
            config_path(&env(&[("XDG_CONFIG_HOME", "/x"), ("HOME", "/h")])),
            Some(PathBuf::from("/x/cairn/config.toml"))
        );
        assert_eq!(
            config_path(&env(&[("XDG_CONFIG_HOME", "rel"), ("HOME", "/h")])),
            Some(PathBuf::from("/h/.config/cairn/config.toml"))
        );
        assert_eq!(config_path(&env(&[])), None);
    }
}
