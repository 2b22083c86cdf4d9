//! Brute force (the sampler lab 3 asks students to write): every point of a finite space once, in
//! lexicographic order of the choice indices (the first parameter varies slowest, as
//! `itertools.product`). A point is taken once a trial holds it, running or complete; failed and
//! interrupted trials free their point again. When every point is taken the sampler returns
//! `None` and the study ends.

use crate::sampler::{options, Proposal, SampleContext, Sampler};
use crate::trial::TrialState;
use crate::{Result, SearchError};
use serde_json::Value;
use std::collections::HashSet;

/// Exhaustive enumeration.
#[derive(Clone, Copy, Debug, Default)]
pub struct BruteForce;

/// The keys of `[search.strategy.sampler_options]` this sampler reads.
pub(crate) const OPTIONS: &[&str] = &[];

pub(crate) fn build(opts: &Value) -> Result<Box<dyn Sampler>> {
    options(opts, "brute", OPTIONS)?;
    Ok(Box::new(BruteForce))
}

impl BruteForce {
    /// The number of points of a space with these cardinalities (saturating at `u128::MAX`).
    pub fn size(radices: &[usize]) -> u128 {
        radices.iter().fold(1u128, |a, &r| a.saturating_mul(r as u128))
    }

    /// The point at lexicographic position `index`.
    pub fn decode(mut index: u128, radices: &[usize]) -> Vec<usize> {
        let mut out = vec![0; radices.len()];
        for (slot, &r) in out.iter_mut().zip(radices).rev() {
            *slot = (index % r as u128) as usize;
            index /= r as u128;
        }
        out
    }
}

impl Sampler for BruteForce {
    fn name(&self) -> &'static str {
        "brute"
    }

    fn sample(&self, cx: &SampleContext<'_>) -> Result<Option<Proposal>> {
        let radices: Vec<usize> = cx
            .params
            .iter()
            .map(|p| {
                p.kind.cardinality().ok_or_else(|| {
                    SearchError::config(
                        "search.strategy.setup.sampler",
                        format!("brute force needs finite choices, but `{}` is a real range", p.name),
                    )
                })
            })
            .collect::<Result<_>>()?;
        let taken: HashSet<Vec<usize>> = cx
            .trials
            .iter()
            .filter(|t| matches!(t.state, TrialState::Running | TrialState::Complete))
            .map(|t| t.point.iter().map(|&x| x as usize).collect())
            .collect();
        let size = BruteForce::size(&radices);
        // The lowest free position is at most the number of taken points.
        let mut i = 0u128;
        while i < size {
            let p = BruteForce::decode(i, &radices);
            if !taken.contains(&p) {
                return Ok(Some(Proposal::new(p.iter().map(|&x| x as f64).collect())));
            }
            i += 1;
        }
        Ok(None)
    }
}
