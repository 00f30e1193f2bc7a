//! The configuration file (`cairn_config`), `cairn config`, `cairn
//! completions` and `cairn man`.

use std::path::PathBuf;

use cairn_config::{ConfigFile, Effective, Flags, Setting};

use crate::cli::{CompletionsArgs, ConfigArgs, ManArgs};
use crate::exit::{coded, Code};
use crate::output;

/// The configuration file as read at start.
#[derive(Clone, Debug, Default)]
pub struct Loaded {
    /// Where it is looked for (`None`: no HOME nor XDG_CONFIG_HOME).
    pub path: Option<PathBuf>,
    /// Its contents, when it exists.
    pub file: Option<ConfigFile>,
}

/// The process's environment, an empty value being unset.
pub fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Reads the configuration file; a bad one is bad input (exit 2).
pub fn load() -> anyhow::Result<Loaded> {
    let path = cairn_config::config_path(&env);
    let file = match &path {
        Some(p) => ConfigFile::load(p).map_err(|e| coded(Code::Usage, e.to_string()))?,
        None => None,
    };
    Ok(Loaded { path, file })
}

impl Loaded {
    /// Every value resolved: `flags`, the environment, the file, the defaults.
    pub fn effective(&self, flags: &Flags) -> Effective {
        Effective::resolve(flags, &env, self.file.as_ref()).looked_at(self.path.clone())
    }
}

/// `cairn config`: each effective value and where it came from.
pub fn show(
    loaded: &Loaded,
    args: &ConfigArgs,
    store: Option<&std::path::Path>,
) -> anyhow::Result<Code> {
    let flags = Flags {
        store: store.map(|s| s.to_string_lossy().into_owned()),
        ..Flags::default()
    };
    let eff = loaded.effective(&flags);
    if args.json {
        output::json(&eff)?;
        return Ok(Code::Ok);
    }
    let mut s = String::new();
    match &eff.file {
        Some(p) if eff.file_found => s.push_str(&format!("config file         {}\n", p.display())),
        Some(p) => s.push_str(&format!(
            "config file         {} (none there)\n",
            p.display()
        )),
        None => s.push_str("config file         none (neither XDG_CONFIG_HOME nor HOME is set)\n"),
    }
    let row = |name: &str, v: &Option<Setting<String>>, none: &str| match v {
        Some(v) => format!("{name:<19} {}  ({})\n", v.value, v.origin),
        None => format!("{name:<19} {none}\n"),
    };
    s.push_str(&row(
        "model",
        &eff.model,
        "none: set OPENAI_API_KEY or ANTHROPIC_API_KEY, or choose one with --model, CAIRN_MODEL or `model`",
    ));
    s.push_str(&row(
        "openai_base_url",
        &eff.openai_base_url,
        "the provider's own",
    ));
    s.push_str(&row(
        "anthropic_base_url",
        &eff.anthropic_base_url,
        "the provider's own",
    ));
    s.push_str(&row("approve", &Some(eff.approve.clone()), ""));
    let default_store = cairn_store::default_store_root()
        .map(|p| format!("{}  (built-in default)", p.display()))
        .unwrap_or_else(|_| "none: set HOME, XDG_STATE_HOME or CAIRN_STORE".into());
    s.push_str(&row("store", &eff.store, &default_store));
    s.push_str(&row("serve.listen", &Some(eff.serve_listen.clone()), ""));
    s.push_str(&row(
        "gateway.listen",
        &Some(eff.gateway_listen.clone()),
        "",
    ));
    s.push_str("keys come from the environment only: OPENAI_API_KEY, ANTHROPIC_API_KEY, CAIRN_SERVE_TOKEN, CAIRN_GATEWAY_TOKEN\n");
    output::text(&s)?;
    Ok(Code::Ok)
}

/// `cairn completions SHELL`.
pub fn completions(args: &CompletionsArgs) -> anyhow::Result<Code> {
    use clap::CommandFactory;
    let mut cmd = crate::cli::Cli::command();
    let mut out = std::io::stdout().lock();
    clap_complete::generate(args.shell, &mut cmd, "cairn", &mut out);
    std::io::Write::flush(&mut out)?;
    Ok(Code::Ok)
}

/// `cairn man [--dir DIR]`.
pub fn man(args: &ManArgs) -> anyhow::Result<Code> {
    use clap::CommandFactory;
    let cmd = crate::cli::Cli::command();
    match &args.dir {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| coded(Code::Usage, format!("--dir {}: {e}", dir.display())))?;
            clap_mangen::generate_to(cmd, dir)?;
            output::note(format!("cairn: man pages written to {}", dir.display()));
        }
        None => {
            let mut out = std::io::stdout().lock();
            clap_mangen::Man::new(cmd).render(&mut out)?;
            std::io::Write::flush(&mut out)?;
        }
    }
    Ok(Code::Ok)
}
