//! Costs, in three states (DESIGN §4.5).

use serde::{Deserialize, Serialize};

/// How much is known about a cost (DESIGN §4.5).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CostState {
    /// Known to be free.
    Zero,
    /// An amount from a price table.
    Known,
    /// No price known.
    Unknown,
}

/// A cost: its state and, unless unknown, an amount.
///
/// Reading one enforces, per state (anything else is a schema error, so the
/// record holding it is reported as damage at its seq):
/// 1. `zero`: `usd` is `0`;
/// 2. `known`: `usd` is a finite number, `0` or more (a number too large for
///    an `f64` does not parse at all);
/// 3. `unknown`: `usd` is `null` or absent.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Cost {
    /// zero | known | unknown.
    pub state: CostState,
    /// US dollars; `None` exactly when unknown.
    pub usd: Option<f64>,
}

impl<'de> Deserialize<'de> for Cost {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        struct Fields {
            state: CostState,
            #[serde(default)]
            usd: Option<f64>,
        }
        let f = Fields::deserialize(d)?;
        let cost = Cost {
            state: f.state,
            usd: f.usd,
        };
        match cost.problem() {
            None => Ok(cost),
            Some(why) => Err(serde::de::Error::custom(why)),
        }
    }
}

impl Cost {
    /// Free.
    pub const ZERO: Cost = Cost {
        state: CostState::Zero,
        usd: Some(0.0),
    };
    /// Not known.
    pub const UNKNOWN: Cost = Cost {
        state: CostState::Unknown,
        usd: None,
    };

    /// A known amount.
    pub fn known(usd: f64) -> Cost {
        Cost {
            state: CostState::Known,
            usd: Some(usd),
        }
    }

    /// This cost for people: `$0.0123`, `free`, or `unknown` (an unknown
    /// cost is never shown as a number).
    pub fn for_people(&self) -> String {
        match (self.state, self.usd) {
            (CostState::Zero, _) => "free".into(),
            (CostState::Known, Some(usd)) => format!("${usd:.4}"),
            _ => "unknown".into(),
        }
    }

    /// Whether this cost obeys the rules of its state (see [`Cost`]). The
    /// writer refuses to append a record with a cost that is not valid, since
    /// no reader would accept it.
    pub fn is_valid(&self) -> bool {
        self.problem().is_none()
    }

    /// What is wrong with this cost, if anything.
    fn problem(&self) -> Option<String> {
        match (self.state, self.usd) {
            (CostState::Zero, Some(0.0)) => None,
            (CostState::Zero, Some(u)) => Some(format!("a `zero` cost has usd {u}, not 0")),
            (CostState::Zero, None) => Some("a `zero` cost has no usd; it must be 0".into()),
            (CostState::Known, Some(u)) if u.is_finite() && u >= 0.0 => None,
            (CostState::Known, Some(u)) => Some(format!(
                "a `known` cost has usd {u}; it must be a finite amount of 0 or more"
            )),
            (CostState::Known, None) => Some("a `known` cost has no usd".into()),
            (CostState::Unknown, None) => None,
            (CostState::Unknown, Some(u)) => Some(format!(
                "an `unknown` cost has usd {u}; an unknown cost carries no amount"
            )),
        }
    }
}

impl std::ops::Add for Cost {
    type Output = Cost;

    /// The sum of two costs. Unknown absorbs everything: a total never turns an
    /// unknown into a number. Zero plus zero stays zero; otherwise known. A
    /// sum too large for an `f64` saturates at `f64::MAX` rather than becoming
    /// infinite (which JSON cannot hold).
    fn add(self, other: Cost) -> Cost {
        match (self.state, other.state) {
            (CostState::Unknown, _) | (_, CostState::Unknown) => Cost::UNKNOWN,
            (CostState::Zero, CostState::Zero) => Cost::ZERO,
            _ => {
                let sum = self.usd.unwrap_or(0.0) + other.usd.unwrap_or(0.0);
                Cost::known(if sum == f64::INFINITY { f64::MAX } else { sum })
            }
        }
    }
}

impl Default for Cost {
    fn default() -> Self {
        Cost::ZERO
    }
}
