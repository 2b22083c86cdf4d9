//! The parameters a sampler chooses, and the direction of an objective.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What kind of value a parameter takes. Samplers work on an internal number per parameter (as
/// Optuna's "internal representation"): the index of the choice for [`ParamKind::Index`] and
/// [`ParamKind::Categorical`], the value itself for [`ParamKind::Float`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ParamKind {
    /// An index into `choices` values, treated as an ordered integer in `0..choices`. This is what
    /// MASE asks Optuna for (`trial.suggest_int(key, 0, len - 1)`), so TPE models it with a
    /// discrete truncated normal kernel.
    Index { choices: usize },
    /// An index into `choices` unordered values (Optuna's categorical distribution).
    Categorical { choices: usize },
    /// A real number in `[low, high]`, on a log scale when `log` is set.
    Float { low: f64, high: f64, log: bool },
}

impl ParamKind {
    /// The number of distinct values, or `None` for a continuous range.
    pub fn cardinality(&self) -> Option<usize> {
        match self {
            ParamKind::Index { choices } | ParamKind::Categorical { choices } => Some(*choices),
            ParamKind::Float { .. } => None,
        }
    }

    /// Maps `u` in `[0, 1)` onto the parameter's internal value (used by random and QMC sampling).
    pub fn from_unit(&self, u: f64) -> f64 {
        match self {
            ParamKind::Index { choices } | ParamKind::Categorical { choices } => {
                ((u * *choices as f64).floor() as usize).min(choices - 1) as f64
            }
            ParamKind::Float { low, high, log: false } => low + (high - low) * u,
            ParamKind::Float { low, high, log: true } => (low.ln() + (high.ln() - low.ln()) * u).exp(),
        }
    }
}

/// One parameter of a search space: its flattened name (`seq_blocks_2/config/weight_width`) and
/// its kind.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ParamDef {
    pub name: String,
    #[serde(flatten)]
    pub kind: ParamKind,
    /// The value of each choice, for a parameter whose name is not a path of the trial config
    /// (tuple choices such as `data_in = [[8, 4], [4, 2]]`, or a parameter tied across nodes), so
    /// that reports can show what was chosen. `None` when the config holds the value at `name`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<Value>>,
}

impl ParamDef {
    /// A parameter whose value the trial config holds at `name`.
    pub fn new(name: impl Into<String>, kind: ParamKind) -> ParamDef {
        ParamDef { name: name.into(), kind, values: None }
    }
}

/// Whether an objective is to be made large or small.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Direction {
    Maximize,
    Minimize,
}

impl Direction {
    /// Parses MASE's spelling (`"maximize"`, `"minimize"`).
    pub fn parse(s: &str) -> Option<Direction> {
        match s.to_ascii_lowercase().as_str() {
            "maximize" | "max" => Some(Direction::Maximize),
            "minimize" | "min" => Some(Direction::Minimize),
            _ => None,
        }
    }

    /// `value` turned into a loss (smaller is better), as samplers compare.
    pub fn loss(self, value: f64) -> f64 {
        match self {
            Direction::Minimize => value,
            Direction::Maximize => -value,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Direction::Maximize => "maximize",
            Direction::Minimize => "minimize",
        }
    }
}
