//! The price table: cairn's defaults (`src/prices.json`), extended by the
//! user's file — `CAIRN_PRICES`, else `$XDG_CONFIG_HOME/cairn/prices.json`,
//! else `~/.config/cairn/prices.json` — whose entries win.

use std::path::PathBuf;

use cairn_agent::PriceTable;

use crate::exit::{coded, Code};

const DEFAULTS: &str = include_str!("prices.json");

fn user_file() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CAIRN_PRICES").filter(|v| !v.is_empty()) {
        return Some(PathBuf::from(p));
    }
    let base = std::env::var_os("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".config")))?;
    Some(base.join("cairn/prices.json"))
}

/// The table in force.
pub fn load() -> anyhow::Result<PriceTable> {
    let mut table = PriceTable::from_json(DEFAULTS)?;
    if let Some(path) = user_file() {
        match std::fs::read_to_string(&path) {
            Ok(text) => {
                let user = PriceTable::from_json(&text).map_err(|e| {
                    coded(
                        Code::Usage,
                        format!(
                            "the price file {} is not valid ({e}); it must map \"provider:model\" to {{\"input_per_mtok\": N, \"output_per_mtok\": N}}",
                            path.display()
                        ),
                    )
                })?;
                table.extend(user);
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(coded(
                    Code::Usage,
                    format!("reading {}: {e}", path.display()),
                ))
            }
        }
    }
    Ok(table)
}
