//! Independent uniform sampling (Optuna's `RandomSampler`).

use crate::sampler::{options, random_point, Proposal, SampleContext, Sampler};
use crate::Result;
use serde_json::Value;

/// Draws every parameter uniformly.
#[derive(Clone, Copy, Debug, Default)]
pub struct RandomSampler;

/// The keys of `[search.strategy.sampler_options]` this sampler reads.
pub(crate) const OPTIONS: &[&str] = &[];

pub(crate) fn build(opts: &Value) -> Result<Box<dyn Sampler>> {
    options(opts, "random", OPTIONS)?;
    Ok(Box::new(RandomSampler))
}

impl Sampler for RandomSampler {
    fn name(&self) -> &'static str {
        "random"
    }

    fn sample(&self, cx: &SampleContext<'_>) -> Result<Option<Proposal>> {
        Ok(Some(Proposal::new(random_point(cx.params, &mut cx.rng()))))
    }
}
