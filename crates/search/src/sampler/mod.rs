//! Samplers: given the space and the trials so far, propose the next point.
//!
//! Samplers are stateless: a proposal depends only on the study's seed, the number the new trial
//! will get, and the trials already stored. So a resumed study, or several workers sharing one
//! store, propose exactly what one uninterrupted process would given the same history, and a
//! proposal can be made inside the store's claim transaction (see `Storage::claim`).
//!
//! Adding a sampler: implement [`Sampler`] and add one line to [`SAMPLERS`] (`doc/search.md`).

mod brute;
mod nsga2;
mod qmc;
mod random;
mod tpe;

pub use brute::BruteForce;
pub use nsga2::Nsga2;
pub use qmc::{Qmc, QmcKind};
pub use random::RandomSampler;
pub use tpe::Tpe;

use crate::trial::{TrialRecord, TrialState};
use crate::{Direction, ParamDef, Result, SearchError};
use mase_ir::Rng;
use serde_json::{Map, Value};

/// What a sampler sees when asked for a point.
pub struct SampleContext<'a> {
    pub params: &'a [ParamDef],
    /// Every trial of the study so far, in number order (running and failed ones included).
    pub trials: &'a [TrialRecord],
    /// One per objective value.
    pub directions: &'a [Direction],
    /// The number the proposed trial will get.
    pub number: u64,
    /// The study's seed.
    pub seed: u64,
}

impl SampleContext<'_> {
    /// The random stream of this trial: the same for the same seed and trial number.
    pub fn rng(&self) -> Rng {
        Rng::new(self.seed).fork(self.number.wrapping_add(1))
    }

    /// Finished trials with values (feasible or not).
    pub fn complete(&self) -> impl Iterator<Item = &TrialRecord> {
        self.trials.iter().filter(|t| t.state == TrialState::Complete && t.values.is_some())
    }

    /// The values of a trial as losses (smaller is better).
    pub fn losses(&self, t: &TrialRecord) -> Vec<f64> {
        let v = t.values.as_deref().unwrap_or(&[]);
        self.directions.iter().zip(v).map(|(d, &x)| d.loss(x)).collect()
    }
}

/// A proposed point and the sampler's notes about it.
#[derive(Clone, Debug, PartialEq)]
pub struct Proposal {
    pub point: Vec<f64>,
    pub system_attrs: Map<String, Value>,
}

impl Proposal {
    /// A proposal without notes.
    pub fn new(point: Vec<f64>) -> Proposal {
        Proposal { point, system_attrs: Map::new() }
    }
}

/// Proposes points.
pub trait Sampler: Send + Sync {
    /// The name the config uses.
    fn name(&self) -> &'static str;

    /// The next point, or `None` when the sampler has nothing left to propose (an exhausted
    /// brute-force space).
    fn sample(&self, cx: &SampleContext<'_>) -> Result<Option<Proposal>>;
}

/// A sampler constructor: the `[search.strategy.sampler_options]` table (or `Null`).
pub type SamplerBuilder = fn(&Value) -> Result<Box<dyn Sampler>>;

/// Every registered sampler: names (the first is canonical), one-line description, constructor.
pub const SAMPLERS: &[(&[&str], &str, SamplerBuilder)] = &[
    (
        &["brute", "bruteforce", "brute_force", "grid"],
        "every point once, in lexicographic order; stops when the space is exhausted",
        brute::build,
    ),
    (&["random"], "independent uniform draws", random::build),
    (&["tpe"], "Optuna's tree-structured Parzen estimator (single- and multi-objective)", tpe::build),
    (&["nsgaii", "nsga2", "nsga-ii"], "Optuna's NSGA-II genetic algorithm", nsga2::build),
    (&["qmc", "sobol", "halton"], "quasi-Monte-Carlo points (scrambled Sobol by default, or Halton)", qmc::build),
];

/// Builds the sampler called `name` (case-insensitive).
pub fn build_sampler(name: &str, options: &Value) -> Result<Box<dyn Sampler>> {
    let lower = name.to_ascii_lowercase();
    let (_, _, build) = SAMPLERS.iter().find(|(names, _, _)| names.contains(&lower.as_str())).ok_or_else(|| {
        SearchError::UnknownSampler { name: name.to_string(), known: SAMPLERS.iter().map(|(n, _, _)| n[0]).collect::<Vec<_>>().join(", ") }
    })?;
    let mut opts = options.clone();
    // `sampler = "halton"` / `"sobol"` name the QMC sequence directly.
    if lower == "halton" || lower == "sobol" {
        let mut m = opts.as_object().cloned().unwrap_or_default();
        m.entry("qmc_type").or_insert(Value::from(lower.clone()));
        opts = Value::Object(m);
    }
    build(&opts)
}

/// Reads sampler options: checks every key is one of `allowed`.
pub(crate) fn options<'a>(options: &'a Value, sampler: &str, allowed: &[&str]) -> Result<Option<&'a Map<String, Value>>> {
    let Some(m) = options.as_object() else {
        return if options.is_null() { Ok(None) } else { Err(SearchError::config("search.strategy.sampler_options", "must be a table")) };
    };
    for k in m.keys() {
        if !allowed.contains(&k.as_str()) {
            return Err(SearchError::config(
                format!("search.strategy.sampler_options.{k}"),
                format!(
                    "not an option of the {sampler} sampler (options: {})",
                    if allowed.is_empty() { "none".to_string() } else { allowed.join(", ") }
                ),
            ));
        }
    }
    Ok(Some(m))
}

/// A numeric option with a default and a validity check.
pub(crate) fn num_option(m: Option<&Map<String, Value>>, key: &str, default: f64, ok: impl Fn(f64) -> bool, what: &str) -> Result<f64> {
    match m.and_then(|m| m.get(key)) {
        None => Ok(default),
        Some(v) => v
            .as_f64()
            .filter(|&x| ok(x))
            .ok_or_else(|| SearchError::config(format!("search.strategy.sampler_options.{key}"), format!("must be {what}, got {v}"))),
    }
}

/// One uniform draw for each parameter.
pub(crate) fn random_point(params: &[ParamDef], rng: &mut Rng) -> Vec<f64> {
    params.iter().map(|p| p.kind.from_unit(rng.uniform_f64())).collect()
}
