//! `average_bitwidth` (doc/mase-semantics.md#search-runners-hardware), with MASE's formula fixed.
//!
//! MASE averages `weight_width` over quantized `nn.Linear` modules only, weighting by
//! `in × out`, counts a bypassed layer at its config's width, and ignores convolutions and
//! unquantized layers. Here `average_bitwidth` is the mean bits per weight element over every
//! linear, conv and matmul weight of the model: quantized weights at their format's bits, float
//! (unquantized or bypassed) ones at 32. On MASE's lab case (only the one Linear of jsc-tiny
//! quantized) the two agree. `activation_bitwidth` is the same mean over the data inputs of the
//! quantizable nodes, per sample. `memory_density = compare_to / average_bitwidth`.

use crate::runner::cost::bits;
use crate::runner::{runner_table, FixedRunner, RunContext, Runner, RunnerEnv, RunnerInfo, Stage};
use crate::space::{Candidate, QUANTIZEABLE_OPS};
use crate::trial::Metrics;
use crate::{Result, SearchError};
use mase_ir::{Graph, Op, ParamStore};
use serde_json::Value;

const AT: &str = "search.strategy.hw_runner.average_bitwidth";

pub(crate) struct AverageBitwidth {
    compare_to: f64,
    sample_shape: Vec<usize>,
}

pub(crate) fn build(cfg: &Value, env: &RunnerEnv) -> Result<Box<dyn Runner>> {
    let m = runner_table(cfg, "average_bitwidth", "hw_runner", &["compare_to"])?;
    let compare_to = m
        .get("compare_to")
        .ok_or_else(|| SearchError::config(format!("{AT}.compare_to"), "missing (MASE asserts it; 32 compares to fp32)"))?;
    let compare_to = compare_to
        .as_f64()
        .filter(|x| *x > 0.0)
        .ok_or_else(|| SearchError::config(format!("{AT}.compare_to"), format!("must be a positive number, got {compare_to}")))?;
    Ok(Box::new(AverageBitwidth { compare_to, sample_shape: env.splits.info.sample_shape.clone() }))
}

/// Mean bits per weight element of the linear, conv and matmul nodes (32 if there are none).
pub fn weight_bitwidth(graph: &Graph, params: &ParamStore) -> f64 {
    let (mut elems, mut total) = (0.0, 0.0);
    for n in graph.nodes() {
        let q = n.quant.as_ref();
        let (numel, b) = match n.op {
            Op::Linear { .. } | Op::Conv1d(_) | Op::Conv2d(_) => {
                let numel = n
                    .params()
                    .iter()
                    .find(|(_, s)| s.name == "weight")
                    .map_or(0, |(name, s)| params.get(name).map_or(s.shape.iter().product(), |t| t.numel()));
                (numel as f64, bits(q, |q| q.weight.as_ref()))
            }
            _ => continue,
        };
        elems += numel;
        total += numel * b;
    }
    if elems > 0.0 {
        total / elems
    } else {
        32.0
    }
}

impl FixedRunner for AverageBitwidth {
    const INFO: RunnerInfo = RunnerInfo {
        name: "average_bitwidth",
        stage: Stage::Hardware,
        reports: &["average_bitwidth", "activation_bitwidth", "memory_density"],
    };

    fn measure(&self, cand: &mut Candidate, _cx: &RunContext) -> Result<Metrics> {
        let w = weight_bitwidth(&cand.graph, &cand.params);
        // Activations: every data input of a quantizable node, sized for one sample.
        let mut shape = vec![1];
        shape.extend(&self.sample_shape);
        let consts = |name: &str| cand.params.get(name).map(|t| t.shape.clone());
        let infos = cand.graph.infer_shapes(&[shape], &consts)?;
        let (mut elems, mut total) = (0.0, 0.0);
        for n in cand.graph.nodes() {
            if !QUANTIZEABLE_OPS.contains(&n.op.mase_op()) {
                continue;
            }
            let data_inputs = if matches!(n.op, Op::MatMul) { 1 } else { n.inputs.len() };
            for (k, u) in n.inputs.iter().take(data_inputs).enumerate() {
                let numel = infos[u.0].shape().iter().product::<usize>() as f64;
                elems += numel;
                total += numel * bits(n.quant.as_ref(), |q| q.data_in.get(k).and_then(Option::as_ref));
            }
        }
        let a = if elems > 0.0 { total / elems } else { 32.0 };
        let mut out = Metrics::new();
        out.insert("average_bitwidth".into(), w);
        out.insert("activation_bitwidth".into(), a);
        out.insert("memory_density".into(), self.compare_to / w);
        Ok(out)
    }
}
