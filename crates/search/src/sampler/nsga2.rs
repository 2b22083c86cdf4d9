//! NSGA-II as Optuna's `NSGAIISampler` runs it: generations of `population_size` trials (trial
//! `k` belongs to generation `k / population_size`); generation 0 is random; each later
//! generation breeds from the parent population, the elite of the previous generation and its
//! parents (non-domination rank, then crowding distance; infeasible trials after feasible ones
//! by violation). A child takes two parents by binary tournament, uniform crossover with
//! probability `crossover_prob` (each parameter from either parent with probability
//! `swapping_prob`), and redraws each parameter with probability `mutation_prob` (default
//! `1 / number of parameters`).

use crate::pareto::{crowding_distance, dominates, non_domination_ranks};
use crate::sampler::{num_option, options, random_point, Proposal, SampleContext, Sampler};
use crate::trial::TrialRecord;
use crate::Result;
use mase_ir::Rng;
use serde_json::{json, Value};

/// NSGA-II settings (Optuna's defaults).
#[derive(Clone, Debug, PartialEq)]
pub struct Nsga2 {
    pub population_size: usize,
    pub crossover_prob: f64,
    pub swapping_prob: f64,
    /// `None`: `1 / number of parameters`.
    pub mutation_prob: Option<f64>,
}

impl Default for Nsga2 {
    fn default() -> Nsga2 {
        Nsga2 { population_size: 50, crossover_prob: 0.9, swapping_prob: 0.5, mutation_prob: None }
    }
}

/// The keys of `[search.strategy.sampler_options]` this sampler reads.
pub(crate) const OPTIONS: &[&str] = &["population_size", "crossover_prob", "swapping_prob", "mutation_prob"];

pub(crate) fn build(opts: &Value) -> Result<Box<dyn Sampler>> {
    let m = options(opts, "nsgaii", OPTIONS)?;
    let prob = |x: f64| (0.0..=1.0).contains(&x);
    Ok(Box::new(Nsga2 {
        population_size: num_option(m, "population_size", 50.0, |x| x >= 2.0 && x.fract() == 0.0, "an integer >= 2")? as usize,
        crossover_prob: num_option(m, "crossover_prob", 0.9, prob, "a probability")?,
        swapping_prob: num_option(m, "swapping_prob", 0.5, prob, "a probability")?,
        mutation_prob: match m.and_then(|m| m.get("mutation_prob")) {
            None => None,
            Some(_) => Some(num_option(m, "mutation_prob", 0.0, prob, "a probability")?),
        },
    }))
}

/// `a` is better than `b` under constrained domination: feasible beats infeasible, less
/// violation beats more, and among feasible trials Pareto domination decides.
fn constrained_dominates(cx: &SampleContext<'_>, a: &TrialRecord, b: &TrialRecord) -> bool {
    match (a.violation <= 0.0, b.violation <= 0.0) {
        (true, false) => true,
        (false, true) => false,
        (false, false) => a.violation < b.violation,
        (true, true) => dominates(&cx.losses(a), &cx.losses(b)),
    }
}

impl Nsga2 {
    fn generation_of(&self, number: u64) -> u64 {
        number / self.population_size as u64
    }

    /// The best `population_size` of `pool`: whole fronts while they fit, then the last front by
    /// crowding distance (larger first; ties by trial number).
    fn elite<'a>(&self, cx: &SampleContext<'_>, pool: Vec<&'a TrialRecord>) -> Vec<&'a TrialRecord> {
        let (feasible, mut infeasible): (Vec<&TrialRecord>, Vec<&TrialRecord>) = pool.into_iter().partition(|t| t.violation <= 0.0);
        let losses: Vec<Vec<f64>> = feasible.iter().map(|t| cx.losses(t)).collect();
        let ranks = non_domination_ranks(&losses);
        let mut out = Vec::new();
        let max_rank = ranks.iter().copied().max();
        for r in 0..=max_rank.unwrap_or(0) {
            if max_rank.is_none() {
                break;
            }
            let idx: Vec<usize> = (0..feasible.len()).filter(|&i| ranks[i] == r).collect();
            if out.len() + idx.len() <= self.population_size {
                out.extend(idx.iter().map(|&i| feasible[i]));
            } else {
                let pts: Vec<Vec<f64>> = idx.iter().map(|&i| losses[i].clone()).collect();
                let d = crowding_distance(&pts);
                let mut order: Vec<usize> = (0..idx.len()).collect();
                order.sort_by(|&a, &b| d[b].total_cmp(&d[a]).then(feasible[idx[a]].number.cmp(&feasible[idx[b]].number)));
                let room = self.population_size - out.len();
                out.extend(order[..room].iter().map(|&k| feasible[idx[k]]));
                break;
            }
        }
        infeasible.sort_by(|a, b| a.violation.total_cmp(&b.violation).then(a.number.cmp(&b.number)));
        let room = self.population_size.saturating_sub(out.len());
        out.extend(infeasible.into_iter().take(room));
        out
    }

    /// The parent population of generation `g` (empty for generation 0).
    fn parents<'a>(&self, cx: &SampleContext<'_>, complete: &[&'a TrialRecord], g: u64) -> Vec<&'a TrialRecord> {
        let mut parents: Vec<&TrialRecord> = Vec::new();
        for gen in 1..=g {
            let mut pool: Vec<&TrialRecord> = complete.iter().copied().filter(|t| self.generation_of(t.number) == gen - 1).collect();
            for p in &parents {
                if !pool.iter().any(|t| t.number == p.number) {
                    pool.push(p);
                }
            }
            parents = self.elite(cx, pool);
        }
        parents
    }

    fn tournament<'a>(&self, cx: &SampleContext<'_>, pop: &[&'a TrialRecord], rng: &mut Rng) -> &'a TrialRecord {
        let a = pop[rng.below(pop.len() as u64) as usize];
        let b = pop[rng.below(pop.len() as u64) as usize];
        if constrained_dominates(cx, a, b) {
            a
        } else {
            b
        }
    }
}

impl Sampler for Nsga2 {
    fn name(&self) -> &'static str {
        "nsgaii"
    }

    fn sample(&self, cx: &SampleContext<'_>) -> Result<Option<Proposal>> {
        let mut rng = cx.rng();
        let g = self.generation_of(cx.number);
        let complete: Vec<&TrialRecord> = cx.complete().collect();
        let parents = if g == 0 { Vec::new() } else { self.parents(cx, &complete, g) };
        let mut prop = if parents.len() < 2 {
            Proposal::new(random_point(cx.params, &mut rng))
        } else {
            let p0 = self.tournament(cx, &parents, &mut rng);
            let mut p1 = self.tournament(cx, &parents, &mut rng);
            for _ in 0..16 {
                if p1.number != p0.number {
                    break;
                }
                p1 = self.tournament(cx, &parents, &mut rng);
            }
            let mut child = p0.point.clone();
            if rng.uniform_f64() < self.crossover_prob {
                for (c, &x) in child.iter_mut().zip(&p1.point) {
                    if rng.uniform_f64() < self.swapping_prob {
                        *c = x;
                    }
                }
            }
            let pm = self.mutation_prob.unwrap_or(1.0 / cx.params.len().max(1) as f64);
            for (c, p) in child.iter_mut().zip(cx.params) {
                if rng.uniform_f64() < pm {
                    *c = p.kind.from_unit(rng.uniform_f64());
                }
            }
            let mut prop = Proposal::new(child);
            prop.system_attrs.insert("nsga2:parents".into(), json!([p0.number, p1.number]));
            prop
        };
        prop.system_attrs.insert("nsga2:generation".into(), json!(g));
        Ok(Some(prop))
    }
}
