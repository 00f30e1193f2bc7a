//! The effective configuration: each value from a flag, else the
//! environment, else the file, else the built-in default, with its origin.

use std::path::PathBuf;

use serde::Serialize;

use crate::ConfigFile;

/// The model a new session uses when none is named and only
/// `OPENAI_API_KEY` is set (or both keys are).
pub const DEFAULT_OPENAI_MODEL: &str = "openai:gpt-4.1";

/// The model a new session uses when none is named and only
/// `ANTHROPIC_API_KEY` is set.
pub const DEFAULT_ANTHROPIC_MODEL: &str = "anthropic:claude-sonnet-4-5";

/// Where `cairn serve` listens by default.
pub const DEFAULT_SERVE_LISTEN: &str = "127.0.0.1:7878";

/// Where `cairn gateway` listens by default: another port than `serve`'s,
/// so both run side by side.
pub const DEFAULT_GATEWAY_LISTEN: &str = "127.0.0.1:7879";

/// Where a value came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "from", rename_all = "snake_case")]
pub enum Origin {
    /// A command-line flag, e.g. `--model`.
    Flag {
        /// The flag.
        name: String,
    },
    /// An environment variable.
    Env {
        /// The variable.
        name: String,
    },
    /// The configuration file.
    File {
        /// The file.
        path: PathBuf,
    },
    /// The built-in default.
    Default,
    /// Chosen because a key is set (the default model for that provider).
    Key {
        /// The key's variable, e.g. `OPENAI_API_KEY`.
        name: String,
    },
}

impl std::fmt::Display for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Origin::Flag { name } => write!(f, "flag {name}"),
            Origin::Env { name } => write!(f, "environment ${name}"),
            Origin::File { path } => write!(f, "file {}", path.display()),
            Origin::Default => f.write_str("built-in default"),
            Origin::Key { name } => write!(f, "default for ${name}, which is set"),
        }
    }
}

/// A value and where it came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Setting<T> {
    /// The value.
    pub value: T,
    /// Its origin.
    pub origin: Origin,
}

/// What was given on the command line (`None`: not given).
#[derive(Clone, Debug, Default)]
pub struct Flags {
    /// `--model`.
    pub model: Option<String>,
    /// `--approve`.
    pub approve: Option<String>,
    /// `--store`.
    pub store: Option<String>,
    /// `serve --listen`.
    pub serve_listen: Option<String>,
    /// `gateway --listen`.
    pub gateway_listen: Option<String>,
    /// `--openai-upstream` (the gateway's).
    pub openai_base_url: Option<String>,
    /// `--anthropic-upstream` (the gateway's).
    pub anthropic_base_url: Option<String>,
}

/// Every configurable value, resolved (`cairn config` prints this).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Effective {
    /// The configuration file, whether or not it exists.
    pub file: Option<PathBuf>,
    /// Whether it exists (and was read).
    pub file_found: bool,
    /// The model for new sessions; `None` when nothing names one and no key
    /// is set.
    pub model: Option<Setting<String>>,
    /// The OpenAI-compatible base URL; `None`: the provider's own.
    pub openai_base_url: Option<Setting<String>>,
    /// The Anthropic base URL; `None`: the provider's own.
    pub anthropic_base_url: Option<Setting<String>>,
    /// `never`, `shell` or `writes`.
    pub approve: Setting<String>,
    /// The store; `None`: the default location (`$XDG_STATE_HOME/cairn`).
    pub store: Option<Setting<String>>,
    /// Where `cairn serve` listens.
    pub serve_listen: Setting<String>,
    /// Where `cairn gateway` listens.
    pub gateway_listen: Setting<String>,
}

/// The first of flag, environment variable `env_name`, file value.
fn first(
    flag: (&str, Option<&String>),
    env_name: Option<&str>,
    env: &dyn Fn(&str) -> Option<String>,
    file: Option<(&PathBuf, Option<&String>)>,
) -> Option<Setting<String>> {
    if let Some(v) = flag.1 {
        return Some(Setting {
            value: v.clone(),
            origin: Origin::Flag {
                name: flag.0.to_owned(),
            },
        });
    }
    if let Some(name) = env_name {
        if let Some(v) = env(name).filter(|v| !v.is_empty()) {
            return Some(Setting {
                value: v,
                origin: Origin::Env {
                    name: name.to_owned(),
                },
            });
        }
    }
    match file {
        Some((path, Some(v))) => Some(Setting {
            value: v.clone(),
            origin: Origin::File { path: path.clone() },
        }),
        _ => None,
    }
}

fn or_default(s: Option<Setting<String>>, default: &str) -> Setting<String> {
    s.unwrap_or_else(|| Setting {
        value: default.to_owned(),
        origin: Origin::Default,
    })
}

impl Effective {
    /// Resolves every value: `flags`, then the environment (`env`), then
    /// `file`, then the built-in defaults. The model, when none is named,
    /// is the default of the provider whose key is set: OpenAI's when
    /// `OPENAI_API_KEY` is (whether or not `ANTHROPIC_API_KEY` is too),
    /// else Anthropic's when `ANTHROPIC_API_KEY` is.
    pub fn resolve(
        flags: &Flags,
        env: &dyn Fn(&str) -> Option<String>,
        file: Option<&ConfigFile>,
    ) -> Effective {
        let path = file.map(|f| &f.path);
        let from = |get: fn(&ConfigFile) -> Option<&String>| file.map(|f| (&f.path, get(f)));
        let key_set = |name: &str| env(name).is_some_and(|v| !v.trim().is_empty());
        let model = first(
            ("--model", flags.model.as_ref()),
            Some("CAIRN_MODEL"),
            env,
            from(|f| f.model.as_ref()),
        )
        .or_else(|| {
            [
                ("OPENAI_API_KEY", DEFAULT_OPENAI_MODEL),
                ("ANTHROPIC_API_KEY", DEFAULT_ANTHROPIC_MODEL),
            ]
            .into_iter()
            .find(|(k, _)| key_set(k))
            .map(|(k, m)| Setting {
                value: m.to_owned(),
                origin: Origin::Key { name: k.to_owned() },
            })
        });
        Effective {
            file: path.cloned(),
            file_found: file.is_some(),
            model,
            openai_base_url: first(
                ("--openai-upstream", flags.openai_base_url.as_ref()),
                Some("OPENAI_BASE_URL"),
                env,
                from(|f| f.openai_base_url.as_ref()),
            ),
            anthropic_base_url: first(
                ("--anthropic-upstream", flags.anthropic_base_url.as_ref()),
                Some("ANTHROPIC_BASE_URL"),
                env,
                from(|f| f.anthropic_base_url.as_ref()),
            ),
            approve: or_default(
                first(
                    ("--approve", flags.approve.as_ref()),
                    Some("CAIRN_APPROVE"),
                    env,
                    from(|f| f.approve.as_ref()),
                ),
                "never",
            ),
            store: first(
                ("--store", flags.store.as_ref()),
                Some("CAIRN_STORE"),
                env,
                from(|f| f.store.as_ref()),
            ),
            serve_listen: or_default(
                first(
                    ("--listen", flags.serve_listen.as_ref()),
                    Some("CAIRN_SERVE_LISTEN"),
                    env,
                    from(|f| f.serve.listen.as_ref()),
                ),
                DEFAULT_SERVE_LISTEN,
            ),
            gateway_listen: or_default(
                first(
                    ("--listen", flags.gateway_listen.as_ref()),
                    Some("CAIRN_GATEWAY_LISTEN"),
                    env,
                    from(|f| f.gateway.listen.as_ref()),
                ),
                DEFAULT_GATEWAY_LISTEN,
            ),
        }
    }

    /// The file's path for display even when it was not found (set by the
    /// caller, which knows where it looked).
    pub fn looked_at(mut self, path: Option<PathBuf>) -> Effective {
        if self.file.is_none() {
            self.file = path;
        }
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let pairs: Vec<(String, String)> = pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        move |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone())
    }

    fn file(model: Option<&str>) -> ConfigFile {
        ConfigFile {
            path: PathBuf::from("/c.toml"),
            model: model.map(str::to_owned),
            approve: Some("shell".into()),
            ..ConfigFile::default()
        }
    }

    #[test]
    fn flag_then_environment_then_file_then_default() {
        let flag = Flags {
            model: Some("script:f".into()),
            ..Flags::default()
        };
        let f = file(Some("openai:file-model"));
        let e = env(&[("CAIRN_MODEL", "openai:env-model"), ("OPENAI_API_KEY", "k")]);
        let no_flags = Flags::default();
        // (flags, environment, file, model, origin)
        type Row<'a> = (
            &'a Flags,
            &'a dyn Fn(&str) -> Option<String>,
            Option<&'a ConfigFile>,
            Option<&'a str>,
            &'a str,
        );
        let rows: Vec<Row> = vec![
            (&flag, &e, Some(&f), Some("script:f"), "flag --model"),
            (
                &no_flags,
                &e,
                Some(&f),
                Some("openai:env-model"),
                "environment $CAIRN_MODEL",
            ),
        ];
        for (flags, env, file, want, origin) in rows {
            let c = Effective::resolve(flags, env, file);
            assert_eq!(c.model.as_ref().map(|m| m.value.as_str()), want);
            assert_eq!(c.model.unwrap().origin.to_string(), origin);
        }
        let none = env(&[]);
        let c = Effective::resolve(&Flags::default(), &none, Some(&f));
        assert_eq!(
            c.model.unwrap().origin,
            Origin::File {
                path: "/c.toml".into()
            }
        );
        assert_eq!(c.approve.value, "shell");
        let c = Effective::resolve(&Flags::default(), &none, None);
        assert_eq!(c.model, None);
        assert_eq!(
            c.approve,
            Setting {
                value: "never".into(),
                origin: Origin::Default
            }
        );
        assert_eq!(c.serve_listen.value, DEFAULT_SERVE_LISTEN);
        assert_eq!(c.gateway_listen.value, DEFAULT_GATEWAY_LISTEN);
        assert_ne!(DEFAULT_SERVE_LISTEN, DEFAULT_GATEWAY_LISTEN);
        // An empty variable is not set.
        let empty = env(&[("CAIRN_MODEL", "")]);
        assert_eq!(
            Effective::resolve(&Flags::default(), &empty, None).model,
            None
        );
    }

    #[test]
    fn a_key_chooses_its_providers_default_model() {
        let rows = [
            (vec![("OPENAI_API_KEY", "k")], Some(DEFAULT_OPENAI_MODEL)),
            (
                vec![("ANTHROPIC_API_KEY", "k")],
                Some(DEFAULT_ANTHROPIC_MODEL),
            ),
            (
                vec![("ANTHROPIC_API_KEY", "k"), ("OPENAI_API_KEY", "k")],
                Some(DEFAULT_OPENAI_MODEL),
            ),
            (vec![("OPENAI_API_KEY", " ")], None),
            (vec![], None),
        ];
        for (vars, want) in rows {
            let e = env(&vars);
            let c = Effective::resolve(&Flags::default(), &e, None);
            assert_eq!(c.model.as_ref().map(|m| m.value.as_str()), want, "{vars:?}");
            if let Some(m) = c.model {
                assert!(matches!(m.origin, Origin::Key { .. }));
            }
        }
        // A named model wins over a key.
        let e = env(&[("OPENAI_API_KEY", "k")]);
        let c = Effective::resolve(&Flags::default(), &e, Some(&file(Some("anthropic:x"))));
        assert_eq!(c.model.unwrap().value, "anthropic:x");
    }
}
