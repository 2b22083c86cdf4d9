//! Runners measure a candidate model (doc/mase-semantics.md#search-runners-software). Software runners train or
//! evaluate it on data; hardware runners compute costs from the graph and its number formats.
//! Every runner reports named metrics; the objective picks the ones it needs.
//!
//! Runners run in stage order whatever the order of the TOML tables: training first (so the
//! evaluation sees the trained weights), then the other software runners, then hardware.
//!
//! Adding a runner: implement [`Runner`] (or, for a runner whose name, stage and metrics are
//! fixed, [`FixedRunner`]), write a constructor with the [`RunnerBuilder`]
//! signature, and add one line to [`SW_RUNNERS`] or [`HW_RUNNERS`] (`doc/search.md`).

mod bitwidth;
mod cost;
mod evaluate;
mod rtl;
mod train;

pub use cost::{node_costs, NodeCost};

use crate::config::reject_unknown_keys;
use crate::space::Candidate;
use crate::trial::Metrics;
use crate::{Result, SearchError};
use mase_io::{Dataset, Splits};
use mase_runtime::Accelerator;
use serde_json::{Map, Value};
use std::sync::Arc;

/// What runners share: the data set and the run's defaults.
#[derive(Clone, Debug)]
pub struct RunnerEnv {
    pub splits: Arc<Splits>,
    /// Default batch size (the run's `batch_size`).
    pub batch_size: usize,
    /// Default learning rate of `basic_train` (the run's `learning_rate`).
    pub learning_rate: f64,
    /// Seed of training shuffles and dropout.
    pub seed: u64,
    /// Where `basic_train` and `basic_evaluation` run the candidate (`--accelerator`).
    pub accelerator: Accelerator,
}

/// When a runner runs within a trial.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Stage {
    Train,
    Software,
    Hardware,
}

/// Per-trial settings.
#[derive(Clone, Copy, Debug)]
pub struct RunContext {
    /// Kernel threads for this trial (1 when trials run in parallel).
    pub threads: usize,
    pub trial: u64,
}

/// Measures a candidate.
pub trait Runner: Send + Sync {
    /// The registered name (`basic_evaluation`).
    fn name(&self) -> &str;
    fn stage(&self) -> Stage;
    /// The metrics it reports; [`ANY_METRIC`] for a runner that cannot tell before it runs
    /// (a Python runner registered without its metrics), whose metrics the objective then
    /// checks when it scores a trial.
    fn reports(&self) -> Vec<&str>;
    /// Runs on a candidate; a training runner replaces its parameters.
    fn run(&self, cand: &mut Candidate, cx: &RunContext) -> Result<Metrics>;
}

/// What [`Runner::reports`] lists for a runner whose metrics are known only once it has run.
pub const ANY_METRIC: &str = "*";

/// Runners supplied by the caller under names the registries do not know (the Python package's
/// registered functions). A `[search.strategy.sw_runner.<name>]` or `hw_runner` table whose name
/// is no registered runner is built by [`ExternalRunners::build`].
pub trait ExternalRunners: Sync {
    /// The runner called `name` of `stage` (software or hardware) for its config table, or
    /// `None` when the caller has no runner of that name.
    fn build(&self, name: &str, stage: Stage, cfg: &Value, env: &RunnerEnv) -> Option<Result<Box<dyn Runner>>>;

    /// The names the caller has runners for, for error messages.
    fn names(&self) -> Vec<String>;
}

/// The name, stage and reported metrics of a [`FixedRunner`].
#[derive(Clone, Copy, Debug)]
pub struct RunnerInfo {
    /// The registered name (`basic_evaluation`).
    pub name: &'static str,
    pub stage: Stage,
    /// The metrics it reports.
    pub reports: &'static [&'static str],
}

/// A runner whose name, stage and metrics never change: it states them once, as [`RunnerInfo`],
/// and is a [`Runner`] through them.
pub trait FixedRunner: Send + Sync {
    const INFO: RunnerInfo;
    /// Runs on a candidate ([`Runner::run`]).
    fn measure(&self, cand: &mut Candidate, cx: &RunContext) -> Result<Metrics>;
}

impl<R: FixedRunner> Runner for R {
    fn name(&self) -> &str {
        R::INFO.name
    }

    fn stage(&self) -> Stage {
        R::INFO.stage
    }

    fn reports(&self) -> Vec<&str> {
        R::INFO.reports.to_vec()
    }

    fn run(&self, cand: &mut Candidate, cx: &RunContext) -> Result<Metrics> {
        self.measure(cand, cx)
    }
}

/// A runner constructor: its config table and the shared environment.
pub type RunnerBuilder = fn(&Value, &RunnerEnv) -> Result<Box<dyn Runner>>;

/// Software runners: name, one line, constructor.
pub const SW_RUNNERS: &[(&str, &str, RunnerBuilder)] = &[
    ("basic_evaluation", "loss and plain accuracy over `num_samples` of a split (fresh each trial)", evaluate::build),
    ("basic_train", "trains the candidate `max_epochs` epochs on the train split (quantization-aware when quantized)", train::build),
];

/// Hardware runners: name, one line, constructor.
pub const HW_RUNNERS: &[(&str, &str, RunnerBuilder)] = &[
    (
        "average_bitwidth",
        "mean bits per weight of the quantizable layers, activation bits, memory_density = compare_to / bits",
        bitwidth::build,
    ),
    (
        "bitops",
        "bit operations per sample as the bitops pass counts them: MACs x input bits x weight bits, other operations x input bits",
        cost::build_bitops,
    ),
    ("flops", "operations per sample as the flops pass counts them (MASE's fine-grained estimator) and MACs", cost::build_flops),
    ("model_size", "parameter count and model size in bits at each tensor's number format", cost::build_model_size),
    ("latency", "measured forward time of one batch on this CPU, median of `repeats` runs (ms)", cost::build_latency),
    (
        "rtl",
        "LUTs, flip-flops, DSPs, latency and initiation interval of the candidate's RTL pipeline: the cost model, or Yosys with `synth = true`; with `clock_mhz`, pipelined, with its clock and throughput",
        rtl::build,
    ),
];

/// Builds the runners of `[search.strategy.sw_runner.*]` and `[search.strategy.hw_runner.*]`,
/// sorted by stage.
pub fn build_runners(sw: &[(String, Value)], hw: &[(String, Value)], env: &RunnerEnv) -> Result<Vec<Box<dyn Runner>>> {
    build_runners_with(sw, hw, env, None)
}

/// [`build_runners`], with the caller's runners for names the registries do not know.
pub fn build_runners_with(
    sw: &[(String, Value)],
    hw: &[(String, Value)],
    env: &RunnerEnv,
    external: Option<&dyn ExternalRunners>,
) -> Result<Vec<Box<dyn Runner>>> {
    let mut out = Vec::new();
    for (kind, stage, list, table) in [("software", Stage::Software, sw, SW_RUNNERS), ("hardware", Stage::Hardware, hw, HW_RUNNERS)] {
        for (name, cfg) in list {
            if let Some((_, _, build)) = table.iter().find(|(n, _, _)| n == name) {
                out.push(build(cfg, env)?);
                continue;
            }
            if let Some(runner) = external.and_then(|x| x.build(name, stage, cfg, env)) {
                out.push(runner?);
                continue;
            }
            let mut known: Vec<String> = table.iter().map(|(n, _, _)| n.to_string()).collect();
            known.extend(external.map(|x| x.names()).unwrap_or_default());
            return Err(SearchError::UnknownRunner { kind, name: name.clone(), known: known.join(", ") });
        }
    }
    out.sort_by_key(|r| r.stage());
    Ok(out)
}

/// Checks that a runner's table has only `allowed` keys, and returns it.
pub(crate) fn runner_table(cfg: &Value, runner: &str, kind: &str, allowed: &[&str]) -> Result<Map<String, Value>> {
    let m = match cfg {
        Value::Object(m) => m.clone(),
        Value::Null => Map::new(),
        _ => return Err(SearchError::config(format!("search.strategy.{kind}.{runner}"), "must be a table")),
    };
    let takes = if allowed.is_empty() { "no keys".into() } else { allowed.join(", ") };
    reject_unknown_keys(
        &m,
        &format!("search.strategy.{kind}.{runner}"),
        allowed,
        &format!("unknown key (the {runner} runner takes: {takes})"),
    )?;
    Ok(m)
}

/// A positive integer key.
pub(crate) fn positive(m: &Map<String, Value>, key: &str, at: &str) -> Result<Option<usize>> {
    match m.get(key) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .filter(|&x| x > 0)
            .map(|x| Some(x as usize))
            .ok_or_else(|| SearchError::config(format!("{at}.{key}"), format!("must be a positive integer, got {v}"))),
    }
}

/// The split a `dataloader` name designates (MASE's loader method names, or the bare split).
pub(crate) fn split<'a>(splits: &'a Splits, name: &str, at: &str) -> Result<&'a Dataset> {
    match name {
        "val_dataloader" | "val" | "validation" => Ok(&splits.val),
        "train_dataloader" | "train" => Ok(&splits.train),
        "test_dataloader" | "test" => Ok(&splits.test),
        other => Err(SearchError::config(
            at,
            format!("`{other}` is not a data loader: expected val_dataloader, train_dataloader or test_dataloader"),
        )),
    }
}

/// A batch gathered once and reused by every trial.
#[derive(Clone, Debug)]
pub(crate) struct Batch {
    pub x: Vec<f32>,
    pub y: Vec<u32>,
    pub shape: Vec<usize>,
}

/// The first `n` samples of `data` in batches of `batch_size`.
pub(crate) fn batches(data: &Dataset, n: usize, batch_size: usize) -> Vec<Batch> {
    mase_io::batch_order(n.min(data.len()), batch_size, None)
        .into_iter()
        .map(|idx| {
            let (mut x, mut y) = (Vec::new(), Vec::new());
            data.gather(&idx, &mut x, &mut y);
            let mut shape = vec![idx.len()];
            shape.extend(&data.sample_shape);
            Batch { x, y, shape }
        })
        .collect()
}
