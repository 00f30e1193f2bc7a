//! The `meta` record: how a run was started, and a fork's pin.

use serde::{Deserialize, Serialize};

use crate::chain::ChainHash;

/// Where a fork branched from: the parent run, the seq, and the parent's chain
/// hash at that seq.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkPin {
    /// Parent run id.
    pub parent: String,
    /// Last parent record the child shares.
    pub seq: u64,
    /// Parent's `h(seq)`.
    pub hash: ChainHash,
}

/// The configuration a resume must match (DESIGN §4.3). Hashes only, never the
/// prompt itself.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Fingerprint {
    /// Model name, e.g. `openai:gpt-4.1`.
    pub model: String,
    /// SHA-256 of the system prompt, hex; `None` when there is none.
    #[serde(default)]
    pub system: Option<String>,
    /// SHA-256 of the tool set's canonical description, hex.
    #[serde(default)]
    pub tools: String,
    /// Thinking mode.
    #[serde(default)]
    pub thinking: Option<String>,
    /// Budgets.
    #[serde(default)]
    pub budgets: Budgets,
    /// For each configured MCP server (DESIGN §17), by name: SHA-256 of its
    /// tool list (names, descriptions, schemas, annotations), hex. The
    /// built-in tools stay in `tools`, so a run without MCP keeps the
    /// fingerprint it always had.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub mcp: std::collections::BTreeMap<String, String>,
}

/// Limits that stop a run with `budget_exhausted`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Budgets {
    /// Most model turns.
    #[serde(default)]
    pub max_turns: Option<u64>,
    /// Most tokens, input plus output.
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// Most cost in US dollars.
    #[serde(default)]
    pub max_cost_usd: Option<f64>,
}

/// Where model calls go: restored on resume unless overridden.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Routing {
    /// `script`, `openai` or `anthropic`.
    pub provider: String,
    /// Model name, or the script path for `script`.
    pub model: String,
    /// Base URL, when not the provider's default.
    #[serde(default)]
    pub base_url: Option<String>,
}

/// The first record.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Meta {
    /// The run id; must match the directory and feeds the genesis.
    pub run: String,
    /// Creation time, RFC 3339 UTC.
    pub created: String,
    /// Absolute workspace root.
    pub workspace: String,
    /// Human name.
    #[serde(default)]
    pub name: Option<String>,
    /// Resume guard; `None` for runs with no model (e.g. `cairn exec`).
    #[serde(default)]
    pub fingerprint: Option<Fingerprint>,
    /// Fork origin; `None` for a root run.
    #[serde(default)]
    pub fork: Option<ForkPin>,
    /// Model routing.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub routing: Option<Routing>,
    /// The system prompt file given to `cairn run`, re-read on resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system_file: Option<String>,
}
