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

use crate::config::reject_unknown_keys;
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

/// The option keys of each sampler, by canonical name.
pub const SAMPLER_OPTIONS: &[(&str, &[&str])] =
    &[("brute", brute::OPTIONS), ("random", random::OPTIONS), ("tpe", tpe::OPTIONS), ("nsgaii", nsga2::OPTIONS), ("qmc", qmc::OPTIONS)];

const OPTIONS_AT: &str = "search.strategy.sampler_options";

/// The canonical name of the sampler called `name` (any of its names, case-insensitive).
pub fn canonical_sampler(name: &str) -> Option<&'static str> {
    let lower = name.to_ascii_lowercase();
    SAMPLERS.iter().find(|(names, _, _)| names.contains(&lower.as_str())).map(|(names, _, _)| names[0])
}

fn unknown_sampler(name: &str) -> SearchError {
    SearchError::UnknownSampler { name: name.to_string(), known: SAMPLERS.iter().map(|(n, _, _)| n[0]).collect::<Vec<_>>().join(", ") }
}

/// The option keys of a sampler by canonical name.
fn option_names(canonical: &str) -> &'static [&'static str] {
    SAMPLER_OPTIONS.iter().find(|(n, _)| *n == canonical).map_or(&[], |(_, o)| o)
}

fn listed(options: &[&str]) -> String {
    if options.is_empty() {
        "none".to_string()
    } else {
        options.join(", ")
    }
}

/// One `[search.strategy.sampler_options]` table shared out between the samplers of a run.
#[derive(Clone, Debug, PartialEq)]
pub struct SamplerOptions {
    /// The options of each sampler of the run, in the run's order: a flat table (or `Null`).
    pub options: Vec<Value>,
    /// Tables for samplers that this run does not use.
    pub warnings: Vec<String>,
}

/// Shares `table` (`[search.strategy.sampler_options]`, or `Null`) between the samplers of a run
/// (`run`: the configured sampler, or every sampler of `--compare-samplers`).
///
/// The table holds options directly (`n_startup_trials = 5`) and tables named by a sampler
/// (`[search.strategy.sampler_options.tpe]`, under any of its names). Each sampler gets the direct
/// options it takes, with its own table's over them. A direct option goes only to the samplers of
/// the run that take it; one that only other samplers take is left aside with a warning (a TPE
/// config run with `--sampler brute`), and one that no sampler takes is an error (a typo). A
/// table's keys must all be options of its sampler; a table for a sampler outside the run is left
/// aside with a warning. Every sampler's options are checked by building it, so a bad value fails
/// before any trial.
pub fn share_sampler_options(table: &Value, run: &[&str]) -> Result<SamplerOptions> {
    let canon: Vec<&str> = run.iter().map(|n| canonical_sampler(n).ok_or_else(|| unknown_sampler(n))).collect::<Result<_>>()?;
    let m = match table {
        Value::Null => return Ok(SamplerOptions { options: vec![Value::Null; run.len()], warnings: Vec::new() }),
        Value::Object(m) => m,
        _ => return Err(SearchError::config(OPTIONS_AT, "must be a table")),
    };
    let mut direct = Map::new();
    let mut ignored = Vec::new();
    // (key as written, canonical sampler, its table)
    let mut own: Vec<(&str, &str, &Map<String, Value>)> = Vec::new();
    for (k, v) in m {
        if let Some(c) = canonical_sampler(k) {
            let t = v.as_object().ok_or_else(|| {
                SearchError::config(format!("{OPTIONS_AT}.{k}"), format!("must be a table of the {c} sampler's options, got {v}"))
            })?;
            if let Some((other, _, _)) = own.iter().find(|(_, oc, _)| *oc == c) {
                return Err(SearchError::config(format!("{OPTIONS_AT}.{k}"), format!("the {c} sampler already has its table `{other}`")));
            }
            let allowed = option_names(c);
            if let Some(key) = t.keys().find(|key| !allowed.contains(&key.as_str())) {
                return Err(SearchError::config(
                    format!("{OPTIONS_AT}.{k}.{key}"),
                    format!("not an option of the {c} sampler (options: {})", listed(allowed)),
                ));
            }
            own.push((k.as_str(), c, t));
            continue;
        }
        if !canon.iter().any(|c| option_names(c).contains(&k.as_str())) {
            let owners: Vec<&str> = SAMPLER_OPTIONS.iter().filter(|(_, o)| o.contains(&k.as_str())).map(|(n, _)| *n).collect();
            if !owners.is_empty() {
                ignored.push(format!(
                    "{OPTIONS_AT}.{k} is ignored: it is an option of {}, and this search runs {}",
                    owners.join(", "),
                    canon.join(", ")
                ));
                continue;
            }
            let reason = match canon.as_slice() {
                [one] => format!("not an option of the {one} sampler (options: {})", listed(option_names(one))),
                _ => format!(
                    "not an option of any compared sampler ({}); options of one sampler go in its own table, e.g. [{OPTIONS_AT}.tpe]",
                    canon.join(", ")
                ),
            };
            return Err(SearchError::config(format!("{OPTIONS_AT}.{k}"), reason));
        }
        direct.insert(k.clone(), v.clone());
    }
    let mut warnings = ignored;
    warnings.extend(
        own.iter().filter(|(_, c, _)| !canon.contains(c)).map(|(k, c, _)| {
            format!("{OPTIONS_AT}.{k} is ignored: it is the {c} sampler's table, and this search runs {}", canon.join(", "))
        }),
    );
    let mut options = Vec::with_capacity(run.len());
    for (name, c) in run.iter().zip(&canon) {
        let allowed = option_names(c);
        let mut mine: Map<String, Value> =
            direct.iter().filter(|(k, _)| allowed.contains(&k.as_str())).map(|(k, v)| (k.clone(), v.clone())).collect();
        let table = own.iter().find(|(_, oc, _)| oc == c);
        if let Some((_, _, t)) = table {
            mine.extend(t.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        let mine = if mine.is_empty() { Value::Null } else { Value::Object(mine) };
        // A bad value in the sampler's own table is reported at its key there.
        build_one(name, &mine).map_err(|e| match (e, table) {
            (SearchError::Config { key, reason }, Some((tk, _, t))) => {
                let key = match key.strip_prefix(&format!("{OPTIONS_AT}.")) {
                    Some(k) if t.contains_key(k) => format!("{OPTIONS_AT}.{tk}.{k}"),
                    _ => key,
                };
                SearchError::Config { key, reason }
            }
            (e, _) => e,
        })?;
        options.push(mine);
    }
    Ok(SamplerOptions { options, warnings })
}

/// Builds the sampler called `name` (case-insensitive) with its share of `options` (see
/// [`share_sampler_options`]; tables for other samplers are left aside).
pub fn build_sampler(name: &str, options: &Value) -> Result<Box<dyn Sampler>> {
    let shared = share_sampler_options(options, &[name])?;
    build_one(name, &shared.options[0])
}

/// Builds the sampler called `name` with a flat table of its options.
fn build_one(name: &str, options: &Value) -> Result<Box<dyn Sampler>> {
    let lower = name.to_ascii_lowercase();
    let (_, _, build) = SAMPLERS.iter().find(|(names, _, _)| names.contains(&lower.as_str())).ok_or_else(|| unknown_sampler(name))?;
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
    let options = if allowed.is_empty() { "none".to_string() } else { allowed.join(", ") };
    let reason = format!("not an option of the {sampler} sampler (options: {options})");
    reject_unknown_keys(m, "search.strategy.sampler_options", allowed, &reason)?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn options_go_to_the_samplers_they_belong_to() {
        let table = json!({"n_startup_trials": 5, "population_size": 8, "tpe": {"n_ei_candidates": 7, "n_startup_trials": 3},
                           "qmc": {"scramble": false}});
        let shared = share_sampler_options(&table, &["brute", "TPE", "nsga2"]).unwrap();
        assert_eq!(shared.options, [Value::Null, json!({"n_startup_trials": 3, "n_ei_candidates": 7}), json!({"population_size": 8})]);
        assert_eq!(
            shared.warnings,
            ["search.strategy.sampler_options.qmc is ignored: it is the qmc sampler's table, and this search runs brute, tpe, nsgaii"]
        );
        // A TPE config run with another sampler: TPE's options are left aside, with a warning.
        let other = share_sampler_options(&json!({"n_startup_trials": 5, "tpe": {"n_ei_candidates": 7}}), &["brute"]).unwrap();
        assert_eq!(other.options, [Value::Null]);
        assert_eq!(
            other.warnings,
            [
                "search.strategy.sampler_options.n_startup_trials is ignored: it is an option of tpe, and this search runs brute",
                "search.strategy.sampler_options.tpe is ignored: it is the tpe sampler's table, and this search runs brute"
            ]
        );
        // The options MASE configs give for their one sampler are unchanged.
        let one = share_sampler_options(&json!({"n_startup_trials": 5}), &["tpe"]).unwrap();
        assert_eq!(one.options, [json!({"n_startup_trials": 5})]);
        assert!(build_sampler("halton", &json!({"qmc": {"scramble": false}})).is_ok());
    }

    /// One line per bad table: (table, the samplers of the run, the key named, words of the reason).
    #[test]
    fn bad_options_fail_with_one_line_naming_the_key() {
        let at = "search.strategy.sampler_options";
        let cases = [
            (json!({"n_startup": 5}), vec!["brute"], format!("{at}.n_startup"), "not an option of the brute sampler (options: none)"),
            (json!({"n_startup": 5}), vec!["tpe"], format!("{at}.n_startup"), "(options: n_startup_trials, n_ei_candidates"),
            (json!({"bogus": 1}), vec!["brute", "tpe"], format!("{at}.bogus"), "not an option of any compared sampler (brute, tpe)"),
            (json!({"tpe": {"population_size": 8}}), vec!["tpe"], format!("{at}.tpe.population_size"), "not an option of the tpe sampler"),
            (json!({"tpe": {"n_startup_trials": -1}}), vec!["random", "tpe"], format!("{at}.tpe.n_startup_trials"), "non-negative integer"),
            (json!({"n_startup_trials": 1.5}), vec!["random", "tpe"], format!("{at}.n_startup_trials"), "non-negative integer"),
            (json!({"tpe": 3}), vec!["tpe"], format!("{at}.tpe"), "must be a table of the tpe sampler's options"),
            (json!({"nsgaii": {}, "nsga2": {}}), vec!["nsgaii"], format!("{at}.nsga2"), "already has its table `nsgaii`"),
            (json!(3), vec!["tpe"], at.to_string(), "must be a table"),
        ];
        for (table, run, key, words) in cases {
            match share_sampler_options(&table, &run) {
                Err(SearchError::Config { key: k, reason }) => {
                    assert_eq!(k, key, "{table}");
                    assert!(reason.contains(words) && !reason.contains('\n'), "{table}: {reason}");
                }
                other => panic!("{table}: {other:?}"),
            }
        }
        assert!(matches!(share_sampler_options(&Value::Null, &["anneal"]), Err(SearchError::UnknownSampler { .. })));
    }
}
