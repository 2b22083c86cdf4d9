//! Costs of a candidate per sample: operations (spec mase-ir-passes.md §10 formulas), MACs,
//! BitOPs, model size at each tensor's number format, and measured latency.
//!
//! A tensor's width is its quantization format's bits when its node is quantized and not
//! bypassed, else 32 (float). The formulas follow MASE's fine-grained estimator: linear
//! `out.numel × in_features`, conv `out.numel × (C_in / groups) × kernel`, pooling
//! `out.numel × window`, batch norm `4 × numel`, pointwise ops `numel`.

use crate::runner::{batches, positive, runner_table, RunContext, Runner, RunnerEnv, Stage};
use crate::space::Candidate;
use crate::trial::Metrics;
use crate::{Result, SearchError};
use mase_ir::{Graph, NodeQuant, Op, ParamStore, QuantFormat};
use mase_runtime::{ExecOptions, Executor, Mode};
use serde_json::Value;
use std::time::Instant;

/// The cost of one node for one sample.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeCost {
    pub name: String,
    /// Operations as MASE's fine-grained estimator counts them ("computations").
    pub flops: f64,
    /// Multiply-accumulates of linear, conv and matmul nodes.
    pub macs: f64,
    /// Bits of the first data input and of the weight (32 when float).
    pub in_bits: f64,
    pub weight_bits: f64,
}

/// Bits of a format slot of an active quantization, else 32.
pub(crate) fn bits(q: Option<&NodeQuant>, pick: impl Fn(&NodeQuant) -> Option<&QuantFormat>) -> f64 {
    q.filter(|q| q.is_active()).and_then(pick).map_or(32.0, QuantFormat::bits)
}

/// Per-node costs for one sample of `sample_shape`.
pub fn node_costs(graph: &Graph, params: &ParamStore, sample_shape: &[usize]) -> Result<Vec<NodeCost>> {
    let mut shape = vec![1];
    shape.extend(sample_shape);
    let consts = |name: &str| params.get(name).map(|t| t.shape.clone());
    let infos = graph.infer_shapes(&[shape], &consts)?;
    let numel = |i: usize| infos[i].shape().iter().product::<usize>() as f64;
    let mut out = Vec::new();
    for (i, n) in graph.nodes().iter().enumerate() {
        let in0 = n.inputs.first().map_or(0.0, |u| numel(u.0));
        let y = numel(i);
        let (flops, macs) = match &n.op {
            Op::Linear { in_features, .. } => (y * *in_features as f64, y * *in_features as f64),
            Op::Conv1d(c) | Op::Conv2d(c) => {
                let m = y * (c.in_channels / c.groups.max(1)) as f64 * c.kernel.iter().product::<usize>() as f64;
                (m, m)
            }
            Op::MatMul => {
                let k = n.inputs.first().and_then(|u| infos[u.0].shape().last().copied()).unwrap_or(0) as f64;
                (y * k, y * k)
            }
            Op::BatchNorm1d(_) | Op::BatchNorm2d(_) => (4.0 * in0, 0.0),
            Op::MaxPool1d(p) | Op::MaxPool2d(p) | Op::AvgPool1d(p) | Op::AvgPool2d(p) => {
                (y * p.kernel.iter().product::<usize>() as f64, 0.0)
            }
            Op::AdaptiveAvgPool1d { .. } | Op::AdaptiveAvgPool2d { .. } => (in0, 0.0),
            Op::Relu
            | Op::Relu6
            | Op::LeakyRelu { .. }
            | Op::Sigmoid
            | Op::Tanh
            | Op::Selu
            | Op::Gelu { .. }
            | Op::Add
            | Op::Sub
            | Op::Mul => (in0, 0.0),
            Op::Softmax { .. } | Op::LogSoftmax { .. } => (3.0 * in0, 0.0),
            _ => (0.0, 0.0),
        };
        let q = n.quant.as_ref();
        let weight_bits = match n.op {
            Op::MatMul => bits(q, |q| q.data_in.get(1).and_then(Option::as_ref)),
            _ => bits(q, |q| q.weight.as_ref()),
        };
        out.push(NodeCost {
            name: n.name.clone(),
            flops,
            macs,
            in_bits: bits(q, |q| q.data_in.first().and_then(Option::as_ref)),
            weight_bits,
        });
    }
    Ok(out)
}

/// Parameter count and storage bits: weights and biases of quantized nodes at their format,
/// everything else (buffers included) at 32 bits.
pub(crate) fn model_size(graph: &Graph, params: &ParamStore) -> (f64, f64) {
    let (mut count, mut size) = (0.0, 0.0);
    for n in graph.nodes() {
        let q = n.quant.as_ref();
        for (name, spec) in n.params() {
            let numel = params.get(&name).map_or_else(|| spec.shape.iter().product::<usize>(), |t| t.numel()) as f64;
            if spec.trainable {
                count += numel;
            }
            let b = match spec.name {
                "weight" => bits(q, |q| q.weight.as_ref()),
                "bias" => bits(q, |q| q.bias.as_ref()),
                _ => 32.0,
            };
            size += numel * b;
        }
    }
    (count, size)
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
        match self.which {
            "model_size" => {
                let (count, size) = model_size(&cand.graph, &cand.params);
                out.insert("param_count".into(), count);
                out.insert("model_size_bits".into(), size);
            }
            which => {
                let costs = node_costs(&cand.graph, &cand.params, &self.sample_shape)?;
                if which == "bitops" {
                    out.insert("bitops".into(), costs.iter().map(|c| c.macs * c.in_bits * c.weight_bits).sum());
                } else {
                    out.insert("flops".into(), costs.iter().map(|c| c.flops).sum());
                    out.insert("macs".into(), costs.iter().map(|c| c.macs).sum());
                }
            }
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

impl Runner for Latency {
    fn name(&self) -> &'static str {
        "latency"
    }

    fn stage(&self) -> Stage {
        Stage::Hardware
    }

    fn reports(&self) -> Vec<&'static str> {
        vec!["latency_ms"]
    }

    fn run(&self, cand: &mut Candidate, cx: &RunContext) -> Result<Metrics> {
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
