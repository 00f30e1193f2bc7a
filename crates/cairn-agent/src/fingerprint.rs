//! The resume guard (DESIGN §4.3).
//!
//! A run's `meta` stores a [`Fingerprint`]: model, a hash of the system prompt,
//! a hash of the tool set, the thinking mode and the budgets — hashes only,
//! never the prompt. A resume whose configuration differs is refused with every
//! changed field named, unless forced, in which case an `override` record says
//! what was forced. Raising a budget (or lifting it) is the expected way to go
//! on after `budget_exhausted`; it is allowed without force and still recorded.
//! Anything added after the fingerprint is computed (memory, cache hints,
//! reminders) never blocks a resume.

use std::collections::BTreeMap;

use cairn_calls::canonical;
use cairn_journal::{Budgets, Fingerprint, ForcedField};
use cairn_tools::ToolInfo;

/// Computes a fingerprint.
pub fn fingerprint(
    model: &str,
    system: Option<&str>,
    tools: &[ToolInfo],
    thinking: Option<&str>,
    budgets: &Budgets,
) -> Fingerprint {
    Fingerprint {
        model: model.to_owned(),
        system: system.map(|s| canonical::hash_value("cairn/system\n", &serde_json::json!(s))),
        // Tool descriptions are plain data and always serialise; if one
        // ever did not, this never equals a real hash, so the guard asks.
        // The built-in tools alone: each MCP server has its own line.
        tools: tool_hash(
            "cairn/tools\n",
            &tools.iter().filter(|t| t.mcp.is_none()).collect::<Vec<_>>(),
        ),
        thinking: thinking.map(str::to_owned),
        budgets: budgets.clone(),
        mcp: mcp_hashes(tools),
    }
}

fn tool_hash<T: serde::Serialize>(domain: &str, tools: &T) -> String {
    canonical::hash(domain, tools).unwrap_or_else(|e| format!("unserialisable tool set: {e}"))
}

/// Each MCP server's tool list, hashed with the hints each tool declared
/// (DESIGN §17): a server whose tools or hints changed is named by the
/// guard.
fn mcp_hashes(tools: &[ToolInfo]) -> BTreeMap<String, String> {
    let mut by_server: BTreeMap<&str, Vec<serde_json::Value>> = BTreeMap::new();
    for t in tools {
        if let Some(o) = &t.mcp {
            by_server
                .entry(&o.server)
                .or_default()
                .push(serde_json::json!({
                    "name": o.tool,
                    "description": t.description,
                    "parameters": t.parameters,
                    "hints": o.hints,
                }));
        }
    }
    by_server
        .into_iter()
        .map(|(server, list)| (server.to_owned(), tool_hash("cairn/mcp-tools\n", &list)))
        .collect()
}

/// What a resume would change.
#[derive(Clone, Debug, PartialEq)]
pub enum Verdict {
    /// Nothing differs.
    Same,
    /// Only budgets differ, each raised or lifted: allowed, recorded.
    BudgetsRaised(Vec<ForcedField>),
    /// Something else differs (a budget lowered counts): refused unless
    /// forced. `raised` lists the budgets that were raised or lifted beside
    /// it, which need no force but are recorded with the rest.
    Changed {
        /// The fields that need `--force`.
        needs_force: Vec<ForcedField>,
        /// Budgets raised or lifted at the same time.
        raised: Vec<ForcedField>,
    },
}

fn show<T: std::fmt::Display>(v: &Option<T>) -> String {
    v.as_ref()
        .map_or_else(|| "none".to_string(), |x| x.to_string())
}

fn short(h: &Option<String>) -> String {
    h.as_ref().map_or_else(
        || "none".to_string(),
        |x| format!("sha256:{}", &x[..x.len().min(12)]),
    )
}

/// Compares the recorded fingerprint with the current one.
pub fn compare(recorded: &Fingerprint, current: &Fingerprint) -> Verdict {
    let mut other = Vec::new();
    let mut raised = Vec::new();
    let field = |name: &str, was: String, now: String, out: &mut Vec<ForcedField>| {
        if was != now {
            out.push(ForcedField {
                field: name.into(),
                was,
                now,
            });
        }
    };
    field(
        "model",
        recorded.model.clone(),
        current.model.clone(),
        &mut other,
    );
    field(
        "system",
        short(&recorded.system),
        short(&current.system),
        &mut other,
    );
    field(
        "tools",
        short(&Some(recorded.tools.clone())),
        short(&Some(current.tools.clone())),
        &mut other,
    );
    let servers: std::collections::BTreeSet<&String> =
        recorded.mcp.keys().chain(current.mcp.keys()).collect();
    for server in servers {
        let hash = |m: &BTreeMap<String, String>| short(&m.get(server).cloned());
        field(
            &format!("MCP server `{server}` tools"),
            hash(&recorded.mcp),
            hash(&current.mcp),
            &mut other,
        );
    }
    field(
        "thinking",
        show(&recorded.thinking),
        show(&current.thinking),
        &mut other,
    );
    let (r, c) = (&recorded.budgets, &current.budgets);
    // Raised or lifted (None is no limit): no force needed; lowered or newly
    // set: a real change.
    let up = |was: Option<f64>, now: Option<f64>| match (was, now) {
        (_, None) => true,
        (Some(w), Some(n)) => n >= w,
        (None, Some(_)) => false,
    };
    // (field, was, now, was as text, now as text)
    type Row<'a> = (&'a str, Option<f64>, Option<f64>, String, String);
    let budgets: [Row; 3] = [
        (
            "max_turns",
            r.max_turns.map(|x| x as f64),
            c.max_turns.map(|x| x as f64),
            show(&r.max_turns),
            show(&c.max_turns),
        ),
        (
            "max_tokens",
            r.max_tokens.map(|x| x as f64),
            c.max_tokens.map(|x| x as f64),
            show(&r.max_tokens),
            show(&c.max_tokens),
        ),
        (
            "max_cost",
            r.max_cost_usd,
            c.max_cost_usd,
            show(&r.max_cost_usd),
            show(&c.max_cost_usd),
        ),
    ];
    for (name, was, now, was_text, now_text) in budgets {
        if was != now {
            let out = if up(was, now) {
                &mut raised
            } else {
                &mut other
            };
            field(name, was_text, now_text, out);
        }
    }
    match (other.is_empty(), raised.is_empty()) {
        (true, true) => Verdict::Same,
        (true, false) => Verdict::BudgetsRaised(raised),
        _ => Verdict::Changed {
            needs_force: other,
            raised,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fp(model: &str, system: Option<&str>, turns: Option<u64>) -> Fingerprint {
        fingerprint(
            model,
            system,
            &[],
            None,
            &Budgets {
                max_turns: turns,
                ..Budgets::default()
            },
        )
    }

    #[test]
    fn verdicts() {
        let base = fp("openai:a", Some("be brief"), Some(3));
        let rows: Vec<(Fingerprint, &str)> = vec![
            (fp("openai:a", Some("be brief"), Some(3)), "same"),
            (fp("openai:b", Some("be brief"), Some(3)), "changed:model"),
            (fp("openai:a", Some("be long"), Some(3)), "changed:system"),
            (fp("openai:a", None, Some(3)), "changed:system"),
            (
                fp("openai:a", Some("be brief"), Some(5)),
                "raised:max_turns",
            ),
            (fp("openai:a", Some("be brief"), None), "raised:max_turns"),
            (
                fp("openai:a", Some("be brief"), Some(2)),
                "changed:max_turns",
            ),
            (
                fp("openai:b", Some("be brief"), Some(5)),
                "changed:model raised:max_turns",
            ),
            (
                fp("openai:b", Some("be brief"), Some(2)),
                "changed:model,max_turns",
            ),
        ];
        for (current, want) in rows {
            let got = match compare(&base, &current) {
                Verdict::Same => "same".to_string(),
                Verdict::BudgetsRaised(f) => format!(
                    "raised:{}",
                    f.iter()
                        .map(|x| x.field.as_str())
                        .collect::<Vec<_>>()
                        .join(",")
                ),
                Verdict::Changed {
                    needs_force,
                    raised,
                } => {
                    let names = |f: &[ForcedField]| {
                        f.iter()
                            .map(|x| x.field.as_str())
                            .collect::<Vec<_>>()
                            .join(",")
                    };
                    let mut s = format!("changed:{}", names(&needs_force));
                    if !raised.is_empty() {
                        s.push_str(&format!(" raised:{}", names(&raised)));
                    }
                    s
                }
            };
            assert_eq!(got, want);
        }
    }

    #[test]
    fn the_prompt_itself_is_never_stored() {
        let f = fp("m", Some("secret prompt"), None);
        let text = serde_json::to_string(&f).unwrap();
        assert!(!text.contains("secret"));
    }
}
