//! Pricing (DESIGN §4.5): usage in, a [`Cost`] out, with one of three states.
//!
//! The library knows no prices: the binary loads a [`PriceTable`] (its own
//! defaults plus the user's file) and passes it in. Rules, in order:
//! 1. the scripted provider is free (`zero`);
//! 2. a model in the table is `known`;
//! 3. an unlisted model served from this machine (base URL on localhost or a
//!    loopback address, e.g. Ollama) is free (`zero`);
//! 4. anything else is `unknown`, and stays so in every total;
//! 5. a call whose usage the provider did not report
//!    ([`Pricing::price_reported`] with `None`) is `unknown` unless rule 1
//!    or 3 makes it `zero`: a zero would look like a free call.

use std::collections::BTreeMap;

use cairn_journal::{Cost, Usage};
use serde::{Deserialize, Serialize};

/// Prices a model call.
pub trait Pricing: Send + Sync {
    /// The cost of `usage` on `provider:model` reached at `base_url`.
    fn price(&self, provider: &str, model: &str, base_url: Option<&str>, usage: Usage) -> Cost;

    /// The cost of a call whose usage is `usage` as the provider reported
    /// it: [`Pricing::price`] when it did, else rule 5 of the module doc —
    /// `zero` when any usage there would be free, `unknown` otherwise.
    fn price_reported(
        &self,
        provider: &str,
        model: &str,
        base_url: Option<&str>,
        usage: Option<Usage>,
    ) -> Cost {
        match usage {
            Some(usage) => self.price(provider, model, base_url, usage),
            None => match self.price(provider, model, base_url, Usage::default()) {
                free if free == Cost::ZERO => free,
                _ => Cost::UNKNOWN,
            },
        }
    }
}

/// US dollars per million tokens.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Price {
    /// Per million input tokens.
    pub input_per_mtok: f64,
    /// Per million output tokens.
    pub output_per_mtok: f64,
}

/// A table of prices keyed by `provider:model`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct PriceTable {
    prices: BTreeMap<String, Price>,
}

impl PriceTable {
    /// Parses a JSON object `{"provider:model": {"input_per_mtok": N, "output_per_mtok": N}}`.
    ///
    /// # Errors
    /// The JSON does not have that shape.
    pub fn from_json(text: &str) -> Result<Self, serde_json::Error> {
        serde_json::from_str(text)
    }

    /// Adds or replaces entries from `other` (the user's file over defaults).
    pub fn extend(&mut self, other: PriceTable) {
        self.prices.extend(other.prices);
    }

    /// The price of `provider:model`, if listed. A dated model name
    /// (`gpt-4o-2024-08-06`) falls back to its undated prefix.
    pub fn get(&self, provider: &str, model: &str) -> Option<Price> {
        let key = format!("{provider}:{model}");
        if let Some(p) = self.prices.get(&key) {
            return Some(*p);
        }
        self.prices
            .iter()
            .filter(|(k, _)| {
                key.starts_with(k.as_str()) && key.as_bytes().get(k.len()) == Some(&b'-')
            })
            .max_by_key(|(k, _)| k.len())
            .map(|(_, p)| *p)
    }
}

/// True when `base_url` points at this machine.
pub fn is_local(base_url: Option<&str>) -> bool {
    let Some(url) = base_url else { return false };
    let rest = url.split("://").nth(1).unwrap_or(url);
    let host = rest.split(['/', '?']).next().unwrap_or("");
    let host = if let Some(h) = host.strip_prefix('[') {
        h.split(']').next().unwrap_or("")
    } else {
        host.rsplit_once(':').map_or(host, |(h, _)| h)
    };
    host == "localhost" || host == "::1" || host.starts_with("127.")
}

impl Pricing for PriceTable {
    fn price(&self, provider: &str, model: &str, base_url: Option<&str>, usage: Usage) -> Cost {
        if provider == "script" {
            return Cost::ZERO;
        }
        match self.get(provider, model) {
            Some(p) => Cost::known(
                usage.input_tokens as f64 * p.input_per_mtok / 1e6
                    + usage.output_tokens as f64 * p.output_per_mtok / 1e6,
            ),
            None if is_local(base_url) => Cost::ZERO,
            None => Cost::UNKNOWN,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn three_states() {
        let t = PriceTable::from_json(
            r#"{"openai:gpt-4o": {"input_per_mtok": 2.5, "output_per_mtok": 10}}"#,
        )
        .unwrap();
        let u = Usage {
            input_tokens: 1_000_000,
            output_tokens: 100_000,
        };
        assert_eq!(t.price("script", "x", None, u), Cost::ZERO);
        assert_eq!(
            t.price("openai", "llama3", Some("http://localhost:11434/v1"), u),
            Cost::ZERO
        );
        assert_eq!(
            t.price("openai", "llama3", Some("http://127.0.0.1:8080"), u),
            Cost::ZERO
        );
        assert_eq!(t.price("openai", "gpt-4o", None, u), Cost::known(3.5));
        assert_eq!(
            t.price("openai", "gpt-4o", Some("http://127.0.0.1:9/v1"), u),
            Cost::known(3.5)
        );
        assert_eq!(
            t.price("openai", "gpt-4o-2024-08-06", None, u),
            Cost::known(3.5)
        );
        assert_eq!(
            t.price("openai", "gpt-4o-mini", None, u).state,
            cairn_journal::CostState::Known
        );
        assert_eq!(
            t.price("openai", "o3", Some("https://api.openai.com/v1"), u),
            Cost::UNKNOWN
        );
        assert!(!is_local(Some("https://localhost.evil.com/v1")));
    }

    #[test]
    fn a_call_without_reported_usage_is_unknown_unless_it_is_free() {
        let t = PriceTable::from_json(
            r#"{"openai:gpt-4o": {"input_per_mtok": 2.5, "output_per_mtok": 10}}"#,
        )
        .unwrap();
        let rows = [
            ("script", "x", None, Cost::ZERO),
            (
                "openai",
                "llama3",
                Some("http://localhost:11434/v1"),
                Cost::ZERO,
            ),
            ("openai", "gpt-4o", None, Cost::UNKNOWN),
            (
                "openai",
                "gpt-4o",
                Some("http://127.0.0.1:9/v1"),
                Cost::UNKNOWN,
            ),
            ("openai", "o3", None, Cost::UNKNOWN),
        ];
        for (provider, model, base, want) in rows {
            assert_eq!(
                t.price_reported(provider, model, base, None),
                want,
                "{provider}:{model}"
            );
        }
        let u = Usage {
            input_tokens: 1_000_000,
            output_tokens: 0,
        };
        assert_eq!(
            t.price_reported("openai", "gpt-4o", None, Some(u)),
            Cost::known(2.5)
        );
    }
}
