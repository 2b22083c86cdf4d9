//! A search assembled from its config and checked as a whole before any trial runs: the space,
//! the sampler and the runners are built, and every metric the objective or a constraint reads
//! must be reported by a configured runner.

use crate::config::SearchConfig;
use crate::runner::{build_runners_with, ExternalRunners, Runner, RunnerEnv, ANY_METRIC};
use crate::sampler::{build_sampler, share_sampler_options, Sampler};
use crate::space::{build_space, BaseModel, Quantizer, SearchSpace, SpaceInputs};
use crate::{Result, SearchError};
use serde_json::Value;
use std::sync::Arc;

/// Everything a study needs, built from a `[search]` table.
pub struct SearchSetup {
    pub config: SearchConfig,
    pub space: Box<dyn SearchSpace>,
    pub sampler: Box<dyn Sampler>,
    pub runners: Vec<Box<dyn Runner>>,
}

/// Parses `search` (the `[search]` table as JSON) and builds its parts on `base`.
pub fn assemble_search(search: &Value, base: Arc<BaseModel>, quantizer: Arc<dyn Quantizer>, env: &RunnerEnv) -> Result<SearchSetup> {
    assemble_search_with(search, base, quantizer, env, None)
}

/// [`assemble_search`], with the caller's runners for runner tables the registries do not know.
pub fn assemble_search_with(
    search: &Value,
    base: Arc<BaseModel>,
    quantizer: Arc<dyn Quantizer>,
    env: &RunnerEnv,
    external: Option<&dyn ExternalRunners>,
) -> Result<SearchSetup> {
    let mut config = SearchConfig::parse(search)?;
    let shared = share_sampler_options(&config.sampler_options, &[config.setup.sampler.as_str()])?;
    config.warnings.extend(shared.warnings);
    let sampler = build_sampler(&config.setup.sampler, &shared.options[0])?;
    let runners = build_runners_with(&config.sw_runners, &config.hw_runners, env, external)?;
    let reported: Vec<&str> = runners.iter().flat_map(|r| r.reports()).collect();
    for m in config.objective.required_metrics() {
        if !reported.contains(&m) && !reported.contains(&ANY_METRIC) {
            return Err(SearchError::MetricWithoutRunner {
                metric: m.to_string(),
                available: if reported.is_empty() { "nothing (no runner is configured)".into() } else { reported.join(", ") },
            });
        }
    }
    let space = build_space(&SpaceInputs { config: &config.space, base, quantizer })?;
    Ok(SearchSetup { config, space, sampler, runners })
}

/// [`assemble_search`], for callers that only want to know whether a config is usable.
pub fn check_search_config(search: &Value, base: Arc<BaseModel>, quantizer: Arc<dyn Quantizer>, env: &RunnerEnv) -> Result<SearchSetup> {
    assemble_search(search, base, quantizer, env)
}
