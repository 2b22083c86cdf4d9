//! Costs of a candidate per sample: operations, MACs, BitOPs and model size, counted by the
//! cost passes' own function (`mase_passes::cost::count::node_cost`, doc/mase-semantics.md#cost-counts),
//! so that a search and `ch analyze --report flops,bitops` give the same numbers; and measured
//! latency.
//!
//! A tensor's width is its quantization format's bits when its node is quantized and not
//! bypassed, else 32 (float). BitOPs are `MACs x input bits x weight bits` for linear, conv and
//! matmul and `operations x input bits` for the other ops.

use crate::runner::{batches, positive, runner_table, FixedRunner, RunContext, Runner, RunnerEnv, RunnerInfo, Stage};
use crate::space::Candidate;
use crate::trial::Metrics;
use crate::{Result, SearchError};
use mase_ir::{Graph, NodeKind, NodeQuant, Op, ParamStore, QuantFormat};
use mase_passes::cost::count::node_cost;
pub use mase_passes::cost::count::NodeCost;
use mase_runtime::{ExecOptions, Executor, Mode};
use serde_json::Value;
use std::time::Instant;

/// Bits of a format slot of an active quantization, else 32.
pub(crate) fn bits(q: Option<&NodeQuant>, pick: impl Fn(&NodeQuant) -> Option<&QuantFormat>) -> f64 {
    q.filter(|q| q.is_active()).and_then(pick).map_or(32.0, QuantFormat::bits)
}

/// Per-node costs for one sample of `sample_shape`, with the node's name and whether its
/// operations are multiply-accumulates (linear, conv, matmul).
pub fn node_costs(graph: &Graph, params: &ParamStore, sample_shape: &[usize]) -> Result<Vec<(String, bool, NodeCost)>> {
    let mut shape = vec![1];
    shape.extend(sample_shape);
    let consts = |name: &str| params.get(name).map(|t| t.shape.clone());
    let infos = graph.infer_shapes(&[shape], &consts)?;
    Ok(graph
        .nodes()
        .iter()
        .zip(&infos)
        .filter(|(n, _)| !matches!(n.kind, NodeKind::Placeholder | NodeKind::Output | NodeKind::GetAttr))
        .map(|(n, v)| {
            let macs = matches!(n.op, Op::Linear { .. } | Op::Conv1d(_) | Op::Conv2d(_) | Op::MatMul);
            (n.name.clone(), macs, node_cost(n, &infos, v))
        })
        .collect())
}

struct CostRunner {
    which: &'static str,
    sample_shape: Vec<usize>,
}

fn cost_runner(cfg: &Value, env: &RunnerEnv, which: &'static str) -> Result<Box<dyn Runner>> {
    runner_table(cfg, which, "hw_runner", &[])?;
    Ok(Box::new(CostRunner { which, sample_shape: env.splits.info.sample_shape.clone() }))
}

pub(crate) fn build_bitops(cfg: &Value, env: &RunnerEnv) -> Result<Box<dyn Runner>> {
    cost_runner(cfg, env, "bitops")
}

pub(crate) fn build_flops(cfg: &Value, env: &RunnerEnv) -> Result<Box<dyn Runner>> {
    cost_runner(cfg, env, "flops")
}

pub(crate) fn build_model_size(cfg: &Value, env: &RunnerEnv) -> Result<Box<dyn Runner>> {
    cost_runner(cfg, env, "model_size")
}

impl Runner for CostRunner {
    fn name(&self) -> &'static str {
        self.which
    }

    fn stage(&self) -> Stage {
        Stage::Hardware
    }

    fn reports(&self) -> Vec<&'static str> {
        match self.which {
            "bitops" => vec!["bitops"],
            "flops" => vec!["flops", "macs"],
            _ => vec!["param_count", "model_size_bits"],
        }
    }

    fn run(&self, cand: &mut Candidate, _cx: &RunContext) -> Result<Metrics> {
        let mut out = Metrics::new();
        let which = self.which;
        let costs = node_costs(&cand.graph, &cand.params, &self.sample_shape)?;
        if which == "model_size" {
            // Weights and biases of quantized nodes at their format, buffers at 32 bits.
            out.insert("param_count".into(), costs.iter().map(|(_, _, c)| c.params as f64).sum());
            out.insert("model_size_bits".into(), costs.iter().map(|(_, _, c)| c.param_bits).sum());
        } else if which == "bitops" {
            out.insert("bitops".into(), costs.iter().map(|(_, _, c)| c.bitops).sum());
        } else {
            out.insert("flops".into(), costs.iter().map(|(_, _, c)| c.flops as f64).sum());
            out.insert("macs".into(), costs.iter().filter(|(_, macs, _)| *macs).map(|(_, _, c)| c.flops as f64).sum());
        }
        Ok(out)
    }
}

struct Latency {
    batch: crate::runner::Batch,
    repeats: usize,
}

pub(crate) fn build_latency(cfg: &Value, env: &RunnerEnv) -> Result<Box<dyn Runner>> {
    let at = "search.strategy.hw_runner.latency";
    let m = runner_table(cfg, "latency", "hw_runner", &["batch_size", "repeats"])?;
    let bs = positive(&m, "batch_size", at)?.unwrap_or(env.batch_size);
    let repeats = positive(&m, "repeats", at)?.unwrap_or(5);
    let data = if env.splits.val.is_empty() { &env.splits.test } else { &env.splits.val };
    let batch = batches(data, bs, bs).into_iter().next().ok_or_else(|| SearchError::config(at, "no samples to time a forward pass on"))?;
    Ok(Box::new(Latency { batch, repeats }))
}

impl FixedRunner for Latency {
    const INFO: RunnerInfo = RunnerInfo { name: "latency", stage: Stage::Hardware, reports: &["latency_ms"] };

    fn measure(&self, cand: &mut Candidate, cx: &RunContext) -> Result<Metrics> {
        let mut exec = Executor::new(&cand.graph, &cand.params, ExecOptions { threads: cx.threads, seed: 0 })?;
        // The first forward compiles the plan; it is not timed.
        exec.forward(&self.batch.x, &self.batch.shape, Mode::Eval)?;
        let mut times: Vec<f64> = (0..self.repeats)
            .map(|_| {
                let t = Instant::now();
                exec.forward(&self.batch.x, &self.batch.shape, Mode::Eval).map(|_| t.elapsed().as_secs_f64() * 1e3)
            })
            .collect::<std::result::Result<_, _>>()?;
        times.sort_by(f64::total_cmp);
        let mut out = Metrics::new();
        out.insert("latency_ms".into(), times[times.len() / 2]);
        Ok(out)
    }
}
