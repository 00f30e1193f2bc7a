//! The budget check (DESIGN §4.5): pure, from the budgets and the totals so
//! far to why the run must stop, if it must.
//!
//! A budget is used up when the totals reach it (`>=`): turns, tokens
//! (input plus output, saturating), or dollars. A cost budget cannot be
//! kept while any cost is unknown, so an unknown cost stops the run rather
//! than let it spend without a bound. Each reason names the command that
//! raises the limit and goes on — a plain resume would stop again at once,
//! and a raised budget needs no `--force` (the resume guard).

use cairn_journal::{Budgets, CostState, Totals};

/// Why a run of session `run` with `budgets` must stop at `totals`.
pub(crate) fn over_budget(budgets: &Budgets, totals: &Totals, run: &str) -> Option<String> {
    if let Some(max) = budgets.max_turns {
        if totals.turns >= max {
            let more = totals.turns.max(max).saturating_add(max.max(1));
            return Some(format!(
                "the turn budget of {max} is used up; raise it to go on: cairn resume {run} --max-turns {more}"
            ));
        }
    }
    if let Some(max) = budgets.max_tokens {
        let used = totals.tokens();
        if used >= max {
            let more = used.max(max).saturating_add(max.max(1));
            return Some(format!(
                "{used} tokens used of a budget of {max}; raise it to go on: cairn resume {run} --max-tokens {more}"
            ));
        }
    }
    if let Some(max) = budgets.max_cost_usd {
        match (totals.cost.state, totals.cost.usd) {
            (CostState::Unknown, _) => {
                return Some("the cost so far is unknown (no price for this model), so a cost budget cannot be kept; add a price or resume without --max-cost".into())
            }
            (_, Some(usd)) if usd >= max => {
                let more = usd.max(max) + max.max(0.01);
                return Some(format!(
                    "${usd:.4} spent of a budget of ${max}; raise it to go on: cairn resume {run} --max-cost {more:.2}"
                ));
            }
            _ => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use cairn_journal::Cost;

    use super::*;

    fn totals(turns: u64, input: u64, output: u64, cost: Cost) -> Totals {
        Totals {
            turns,
            input_tokens: input,
            output_tokens: output,
            cost,
            ..Totals::default()
        }
    }

    #[test]
    fn each_budget_stops_when_reached_and_names_the_resume_that_raises_it() {
        let turns = Budgets {
            max_turns: Some(3),
            ..Budgets::default()
        };
        assert_eq!(over_budget(&turns, &totals(2, 0, 0, Cost::ZERO), "R"), None);
        let why = over_budget(&turns, &totals(3, 0, 0, Cost::ZERO), "R").unwrap();
        assert!(why.ends_with("cairn resume R --max-turns 6"), "{why}");

        let tokens = Budgets {
            max_tokens: Some(100),
            ..Budgets::default()
        };
        assert_eq!(
            over_budget(&tokens, &totals(9, 60, 39, Cost::ZERO), "R"),
            None
        );
        let why = over_budget(&tokens, &totals(9, 60, 40, Cost::ZERO), "R").unwrap();
        assert!(why.starts_with("100 tokens used"), "{why}");
        assert!(why.ends_with("--max-tokens 200"), "{why}");

        let dollars = Budgets {
            max_cost_usd: Some(1.0),
            ..Budgets::default()
        };
        assert_eq!(
            over_budget(&dollars, &totals(1, 0, 0, Cost::known(0.5)), "R"),
            None
        );
        let why = over_budget(&dollars, &totals(1, 0, 0, Cost::known(1.25)), "R").unwrap();
        assert!(why.ends_with("--max-cost 2.25"), "{why}");
    }

    #[test]
    fn an_unknown_cost_stops_a_cost_budget_and_nothing_else() {
        let dollars = Budgets {
            max_cost_usd: Some(1.0),
            ..Budgets::default()
        };
        let why = over_budget(&dollars, &totals(1, 0, 0, Cost::UNKNOWN), "R").unwrap();
        assert!(why.contains("cost so far is unknown"), "{why}");
        assert_eq!(
            over_budget(&Budgets::default(), &totals(1, 0, 0, Cost::UNKNOWN), "R"),
            None
        );
    }

    #[test]
    fn token_counts_near_the_limit_of_u64_saturate_and_still_stop() {
        let tokens = Budgets {
            max_tokens: Some(u64::MAX - 1),
            ..Budgets::default()
        };
        let why = over_budget(&tokens, &totals(1, u64::MAX, u64::MAX, Cost::ZERO), "R").unwrap();
        assert!(why.contains(&format!("--max-tokens {}", u64::MAX)), "{why}");
    }
}
