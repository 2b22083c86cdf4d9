//! Optuna's `TPESampler` (v4/v5 defaults, univariate): after `n_startup_trials` random trials,
//! split the finished trials into "below" (the best `gamma(n)`) and "above", fit a Parzen
//! estimator to each per parameter (a mixture with one kernel per observation plus a prior), draw
//! `n_ei_candidates` values from the "below" mixture and keep the one maximising
//! `log l(x) - log g(x)`.
//!
//! Kernels are Optuna's: a discrete truncated normal for ordered choices (MASE's `suggest_int`),
//! a truncated normal for real ranges, a smoothed one-hot for unordered choices. Single-objective
//! `gamma(n) = min(ceil(0.1 n), 25)` with Optuna's ramp weights; multi-objective
//! `gamma(n) = ceil(0.1 n)`, the split by non-domination rank with hypervolume subset selection
//! breaking ties, uniform weights below. Infeasible trials (a violated constraint) rank after
//! every feasible one, by violation.

use crate::math::{log_gauss_mass, truncnorm_ppf};
use crate::pareto::{hssp_greedy, non_domination_ranks, reference_point};
use crate::sampler::{num_option, options, random_point, Proposal, SampleContext, Sampler};
use crate::trial::TrialRecord;
use crate::{ParamKind, Result};
use mase_ir::Rng;
use serde_json::Value;

const EPS: f64 = 1e-12;

/// TPE settings (Optuna's names and defaults).
#[derive(Clone, Debug, PartialEq)]
pub struct Tpe {
    pub n_startup_trials: usize,
    pub n_ei_candidates: usize,
    pub prior_weight: f64,
    pub consider_magic_clip: bool,
    pub consider_endpoints: bool,
}

impl Default for Tpe {
    fn default() -> Tpe {
        Tpe { n_startup_trials: 10, n_ei_candidates: 24, prior_weight: 1.0, consider_magic_clip: true, consider_endpoints: false }
    }
}

/// The keys of `[search.strategy.sampler_options]` this sampler reads.
pub(crate) const OPTIONS: &[&str] = &["n_startup_trials", "n_ei_candidates", "prior_weight", "consider_magic_clip", "consider_endpoints"];

pub(crate) fn build(opts: &Value) -> Result<Box<dyn Sampler>> {
    let m = options(opts, "tpe", OPTIONS)?;
    let d = Tpe::default();
    let int = |x: f64| x >= 0.0 && x.fract() == 0.0;
    let flag = |key: &str, default: bool| -> Result<bool> {
        match m.and_then(|m| m.get(key)) {
            None => Ok(default),
            Some(v) => v
                .as_bool()
                .ok_or_else(|| crate::SearchError::config(format!("search.strategy.sampler_options.{key}"), "must be true or false")),
        }
    };
    Ok(Box::new(Tpe {
        n_startup_trials: num_option(m, "n_startup_trials", d.n_startup_trials as f64, int, "a non-negative integer")? as usize,
        n_ei_candidates: num_option(m, "n_ei_candidates", d.n_ei_candidates as f64, |x| int(x) && x >= 1.0, "a positive integer")? as usize,
        prior_weight: num_option(m, "prior_weight", d.prior_weight, |x| x >= 0.0, "a non-negative number")?,
        consider_magic_clip: flag("consider_magic_clip", d.consider_magic_clip)?,
        consider_endpoints: flag("consider_endpoints", d.consider_endpoints)?,
    }))
}

/// Optuna's `default_weights`: flat for the 25 most recent observations, a linear ramp before.
pub fn default_weights(n: usize) -> Vec<f64> {
    if n < 25 {
        return vec![1.0; n];
    }
    let ramp = n - 25;
    let mut w: Vec<f64> = (0..ramp)
        .map(|i| if ramp == 1 { 1.0 / n as f64 } else { 1.0 / n as f64 + (1.0 - 1.0 / n as f64) * i as f64 / (ramp - 1) as f64 })
        .collect();
    w.extend([1.0; 25]);
    w
}

/// Where a numerical parameter's kernels live: truncated normals on `[low, high]` (already
/// widened by half a step for discrete ones, in log space for log-scaled ones); `step` is 1 for
/// choice indices, 0 for reals; samples are clamped to `[grid_low, grid_high]`.
#[derive(Clone, Copy, Debug)]
struct Domain {
    low: f64,
    high: f64,
    step: f64,
    log: bool,
    grid_low: f64,
    grid_high: f64,
}

/// One parameter's Parzen estimator: mixture weights and one kernel per component.
enum Parzen {
    /// Discrete or continuous truncated normals on a [`Domain`].
    Numerical { weights: Vec<f64>, mus: Vec<f64>, sigmas: Vec<f64>, norms: Vec<f64>, domain: Domain },
    /// One row of choice probabilities per component.
    Categorical { weights: Vec<f64>, probs: Vec<Vec<f64>> },
}

impl Tpe {
    fn parzen(&self, kind: &ParamKind, obs: &[f64], weights: Vec<f64>) -> Parzen {
        let mut w = weights;
        if obs.is_empty() {
            w = vec![1.0];
        } else {
            w.push(self.prior_weight);
        }
        let total: f64 = w.iter().sum();
        w.iter_mut().for_each(|x| *x /= total);
        match *kind {
            ParamKind::Categorical { choices } => {
                if obs.is_empty() {
                    return Parzen::Categorical { weights: w, probs: vec![vec![1.0 / choices as f64; choices]] };
                }
                let k = obs.len() + 1;
                let mut probs = vec![vec![self.prior_weight / k as f64; choices]; k];
                for (row, &o) in probs.iter_mut().zip(obs) {
                    row[(o as usize).min(choices - 1)] += 1.0;
                }
                for row in &mut probs {
                    let s: f64 = row.iter().sum();
                    if s > 0.0 {
                        row.iter_mut().for_each(|x| *x /= s);
                    }
                }
                Parzen::Categorical { weights: w, probs }
            }
            ParamKind::Index { choices } => {
                let domain =
                    Domain { low: -0.5, high: choices as f64 - 0.5, step: 1.0, log: false, grid_low: 0.0, grid_high: choices as f64 - 1.0 };
                self.numerical(w, obs.to_vec(), domain)
            }
            ParamKind::Float { low, high, log } => {
                let (lo, hi, o) = if log { (low.ln(), high.ln(), obs.iter().map(|x| x.ln()).collect()) } else { (low, high, obs.to_vec()) };
                self.numerical(w, o, Domain { low: lo, high: hi, step: 0.0, log, grid_low: low, grid_high: high })
            }
        }
    }

    fn numerical(&self, weights: Vec<f64>, mus: Vec<f64>, domain: Domain) -> Parzen {
        let (low, high) = (domain.low, domain.high);
        let n = mus.len();
        let mut order: Vec<usize> = (0..n).collect();
        order.sort_by(|&a, &b| mus[a].total_cmp(&mus[b]));
        let mut ends = Vec::with_capacity(n + 2);
        ends.push(low);
        ends.extend(order.iter().map(|&i| mus[i]));
        ends.push(high);
        let mut sorted_sigmas: Vec<f64> = (1..=n).map(|i| (ends[i] - ends[i - 1]).max(ends[i + 1] - ends[i])).collect();
        if !self.consider_endpoints && ends.len() >= 4 {
            sorted_sigmas[0] = ends[2] - ends[1];
            sorted_sigmas[n - 1] = ends[n] - ends[n - 1];
        }
        let maxsigma = high - low;
        let minsigma = if self.consider_magic_clip { (high - low) / 100.0f64.min(1.0 + (n + 1) as f64) } else { EPS };
        let mut sigmas = vec![0.0; n];
        for (k, &i) in order.iter().enumerate() {
            sigmas[i] = sorted_sigmas[k].clamp(minsigma, maxsigma);
        }
        let mut mus = mus;
        mus.push(0.5 * (low + high));
        sigmas.push(high - low);
        // log(weight) minus the log mass inside [low, high] of each kernel, once per estimator.
        let norms =
            mus.iter().zip(&sigmas).zip(&weights).map(|((&mu, &s), w)| w.ln() - log_gauss_mass((low - mu) / s, (high - mu) / s)).collect();
        Parzen::Numerical { weights, mus, sigmas, norms, domain }
    }
}

impl Parzen {
    fn weights(&self) -> &[f64] {
        match self {
            Parzen::Numerical { weights, .. } | Parzen::Categorical { weights, .. } => weights,
        }
    }

    fn sample(&self, rng: &mut Rng) -> f64 {
        // The component, by inverse CDF of the mixture weights.
        let u = rng.uniform_f64();
        let w = self.weights();
        let mut acc = 0.0;
        let mut k = w.len() - 1;
        for (i, x) in w.iter().enumerate() {
            acc += x;
            if u < acc {
                k = i;
                break;
            }
        }
        match self {
            Parzen::Categorical { probs, .. } => {
                let row = &probs[k.min(probs.len() - 1)];
                let q = rng.uniform_f64();
                let mut c = 0.0;
                for (i, p) in row.iter().enumerate() {
                    c += p;
                    if q < c {
                        return i as f64;
                    }
                }
                (row.len() - 1) as f64
            }
            Parzen::Numerical { mus, sigmas, domain, .. } => {
                let Domain { low, high, step, log, grid_low, grid_high } = *domain;
                let (mu, s) = (mus[k], sigmas[k]);
                let z = truncnorm_ppf(rng.uniform_f64(), (low - mu) / s, (high - mu) / s);
                let x = mu + s * z;
                if step > 0.0 {
                    (grid_low + ((x - grid_low) / step).round() * step).clamp(grid_low, grid_high)
                } else if log {
                    x.exp().clamp(grid_low, grid_high)
                } else {
                    x.clamp(grid_low, grid_high)
                }
            }
        }
    }

    fn log_pdf(&self, x: f64) -> f64 {
        let w = self.weights();
        let terms: Vec<f64> = match self {
            Parzen::Categorical { probs, .. } => probs.iter().zip(w).map(|(row, wk)| wk.ln() + row[x as usize].ln()).collect(),
            Parzen::Numerical { mus, sigmas, norms, domain: Domain { step, log, .. }, .. } => mus
                .iter()
                .zip(sigmas)
                .zip(norms)
                .map(|((&mu, &s), norm)| {
                    let lp = if *step > 0.0 {
                        log_gauss_mass((x - step / 2.0 - mu) / s, (x + step / 2.0 - mu) / s)
                    } else {
                        let v = if *log { x.ln() } else { x };
                        let z = (v - mu) / s;
                        -0.5 * z * z - (s * (2.0 * std::f64::consts::PI).sqrt()).ln() - if *log { v } else { 0.0 }
                    };
                    lp + norm
                })
                .collect(),
        };
        let m = terms.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if m == f64::NEG_INFINITY {
            return m;
        }
        m + terms.iter().map(|t| (t - m).exp()).sum::<f64>().ln()
    }
}

impl Tpe {
    /// Optuna's `_split_trials`: feasible complete trials by value (or by non-domination rank),
    /// then infeasible ones by violation.
    fn split<'a>(&self, cx: &SampleContext<'_>, complete: &[&'a TrialRecord]) -> (Vec<&'a TrialRecord>, Vec<&'a TrialRecord>) {
        let n = complete.len();
        let multi = cx.directions.len() > 1;
        let gamma = if multi { (0.1 * n as f64).ceil() as usize } else { ((0.1 * n as f64).ceil() as usize).min(25) };
        let (feasible, mut infeasible): (Vec<&TrialRecord>, Vec<&TrialRecord>) = complete.iter().partition(|t| t.violation <= 0.0);
        let n_below = gamma.min(feasible.len());
        let mut below: Vec<&TrialRecord>;
        let mut above: Vec<&TrialRecord>;
        if !multi {
            let mut keyed: Vec<(f64, &TrialRecord)> = feasible.iter().map(|t| (cx.losses(t)[0], *t)).collect();
            keyed.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.number.cmp(&b.1.number)));
            let mut sorted: Vec<&TrialRecord> = keyed.into_iter().map(|(_, t)| t).collect();
            above = sorted.split_off(n_below);
            below = sorted;
        } else if n_below == 0 || n_below == feasible.len() {
            below = feasible[..n_below].to_vec();
            above = feasible[n_below..].to_vec();
        } else {
            let losses: Vec<Vec<f64>> = feasible.iter().map(|t| cx.losses(t)).collect();
            let ranks = non_domination_ranks(&losses);
            let max_rank = ranks.iter().copied().max().unwrap_or(0);
            let mut chosen = vec![false; feasible.len()];
            let mut count = 0;
            for r in 0..=max_rank {
                let idx: Vec<usize> = (0..feasible.len()).filter(|&i| ranks[i] == r).collect();
                if count + idx.len() <= n_below {
                    idx.iter().for_each(|&i| chosen[i] = true);
                    count += idx.len();
                } else {
                    let pts: Vec<Vec<f64>> = idx.iter().map(|&i| losses[i].clone()).collect();
                    let refp = reference_point(&pts);
                    for s in hssp_greedy(&pts, n_below - count, &refp) {
                        chosen[idx[s]] = true;
                    }
                    break;
                }
                if count == n_below {
                    break;
                }
            }
            below = Vec::new();
            above = Vec::new();
            for (t, c) in feasible.iter().zip(chosen) {
                if c {
                    below.push(t);
                } else {
                    above.push(t);
                }
            }
        }
        let rest = gamma.saturating_sub(below.len());
        infeasible.sort_by(|a, b| a.violation.total_cmp(&b.violation).then(a.number.cmp(&b.number)));
        let rest = rest.min(infeasible.len());
        above.extend(infeasible.split_off(rest));
        below.extend(infeasible);
        below.sort_by_key(|t| t.number);
        above.sort_by_key(|t| t.number);
        (below, above)
    }
}

impl Sampler for Tpe {
    fn name(&self) -> &'static str {
        "tpe"
    }

    fn sample(&self, cx: &SampleContext<'_>) -> Result<Option<Proposal>> {
        let mut rng = cx.rng();
        let complete: Vec<&TrialRecord> = cx.complete().collect();
        if complete.len() < self.n_startup_trials || complete.is_empty() {
            return Ok(Some(Proposal::new(random_point(cx.params, &mut rng))));
        }
        let (below, above) = self.split(cx, &complete);
        let multi = cx.directions.len() > 1;
        let w_below = if multi { vec![1.0; below.len()] } else { default_weights(below.len()) };
        let w_above = default_weights(above.len());
        let mut point = Vec::with_capacity(cx.params.len());
        for (j, p) in cx.params.iter().enumerate() {
            if p.kind.cardinality() == Some(1) {
                point.push(0.0);
                continue;
            }
            let obs_b: Vec<f64> = below.iter().map(|t| t.point[j]).collect();
            let obs_a: Vec<f64> = above.iter().map(|t| t.point[j]).collect();
            let l = self.parzen(&p.kind, &obs_b, w_below.clone());
            let g = self.parzen(&p.kind, &obs_a, w_above.clone());
            // Finite choices: the acquisition of every value, computed once (the candidates
            // repeat the same few values).
            let table: Option<Vec<f64>> = p.kind.cardinality().map(|n| (0..n).map(|x| l.log_pdf(x as f64) - g.log_pdf(x as f64)).collect());
            let mut best = (f64::NEG_INFINITY, f64::NAN);
            for _ in 0..self.n_ei_candidates {
                let x = l.sample(&mut rng);
                let acq = match &table {
                    Some(t) => t[x as usize],
                    None => l.log_pdf(x) - g.log_pdf(x),
                };
                if acq > best.0 || best.1.is_nan() {
                    best = (acq, x);
                }
            }
            point.push(best.1);
        }
        Ok(Some(Proposal::new(point)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn optuna_default_weights() {
        assert_eq!(default_weights(3), [1.0, 1.0, 1.0]);
        let w = default_weights(30);
        // numpy.linspace(1/30, 1, 5) then 25 ones.
        let want =
            [1.0 / 30.0, 1.0 / 30.0 + 0.25 * (29.0 / 30.0), 1.0 / 30.0 + 0.5 * (29.0 / 30.0), 1.0 / 30.0 + 0.75 * (29.0 / 30.0), 1.0];
        for (a, b) in w[..5].iter().zip(want) {
            assert!((a - b).abs() < 1e-12);
        }
        assert_eq!(w.len(), 30);
        assert!(w[5..].iter().all(|&x| x == 1.0));
    }

    #[test]
    fn parzen_sigmas_follow_optuna() {
        // Observations 0 and 2 of an index with 5 choices: range [-0.5, 4.5]; neighbours give
        // sigma max(0.5, 2) = 2 for both (endpoints not considered: the outer gaps are replaced
        // by the inner one); the prior sits at 2 with sigma 5.
        let t = Tpe::default();
        let Parzen::Numerical { mus, sigmas, weights, .. } = t.parzen(&ParamKind::Index { choices: 5 }, &[0.0, 2.0], vec![1.0, 1.0]) else {
            panic!()
        };
        assert_eq!(mus, [0.0, 2.0, 2.0]);
        assert_eq!(sigmas, [2.0, 2.0, 5.0]);
        assert_eq!(weights, [1.0 / 3.0; 3]);
        // Probabilities of a discrete mixture sum to one over the grid.
        let p = t.parzen(&ParamKind::Index { choices: 5 }, &[0.0, 2.0], vec![1.0, 1.0]);
        let total: f64 = (0..5).map(|x| p.log_pdf(x as f64).exp()).sum();
        assert!((total - 1.0).abs() < 1e-9, "{total}");
        let c = t.parzen(&ParamKind::Categorical { choices: 3 }, &[1.0], vec![1.0]);
        let total: f64 = (0..3).map(|x| c.log_pdf(x as f64).exp()).sum();
        assert!((total - 1.0).abs() < 1e-12);
        // Observation 1 with 2 kernels: the prior adds 1/2 to every cell, the observation 1 to its
        // own: [0.5, 1.5, 0.5] / 2.5. The prior's row is uniform.
        let Parzen::Categorical { probs, .. } = c else { panic!() };
        assert_eq!(probs[0], [0.2, 0.6, 0.2]);
        assert_eq!(probs[1], [1.0 / 3.0; 3]);
    }
}
