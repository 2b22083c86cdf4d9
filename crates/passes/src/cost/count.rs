//! Operation and memory counts of one node for one input sample (MASE's fine-grained estimator,
//! doc/mase-semantics.md#cost-counts, which reads the first sample of the batch).
//!
//! | op | FLOPs (forward) | params |
//! |---|---|---|
//! | linear | `in_features * out_features * rows` (one per multiply-accumulate; bias adds not counted, as MASE) | weight + bias |
//! | conv1d, conv2d | `out.numel * prod(kernel) * in_channels / groups` | weight + bias |
//! | batch_norm1d, batch_norm2d | `4 * numel` | `2 * num_features` |
//! | layer_norm, group_norm | `5 * numel` (MASE's rule for LayerNorm) | weight + bias |
//! | relu, relu6, leaky_relu, sigmoid, tanh, selu, gelu, silu, hardswish, hardsigmoid, softplus, mish | `numel` | |
//! | mean, sum, amax | `in.numel` (one add or comparison per input value) | |
//! | softmax, log_softmax | `3 * numel` (exp, sum, divide) | |
//! | max/avg pool | `out.numel * prod(kernel)` | |
//! | adaptive avg pool | `in.numel` | |
//! | sqrt, clamp | `numel` | |
//! | add, sub, mul, div, pow | `out.numel` | |
//! | matmul, bmm | `batch * m * n * k` | |
//! | einsum | the product of every letter's size (one multiply-accumulate each) | |
//! | scaled_dot_product_attention | `batch * L * S * (E + Ev)` multiply-accumulates and `3 * batch * L * S` for the softmax | |
//! | embedding | 0 (a table lookup) | weight |
//! | dropout, flatten, view, transpose, permute, size, cat, pad, placeholder, get_attr, output | 0 | |
//!
//! Backward FLOPs are twice the forward ones for linear, conv, matmul, einsum and attention (gradients of the input
//! and of the weight) and equal to them otherwise. MASE's estimator covers only some modules and
//! `add`; the rules for the other ops are mase-rs's.
//!
//! BitOPs weigh each operation by the widths of its operands, read from `node.quant` (32 for a
//! float operand): `MACs * bits(data_in_0) * bits(weight)` for linear and conv,
//! `MACs * bits(data_in_0) * bits(data_in_1)` for matmul and einsum, `FLOPs * bits(data_in_0)` for the rest.

use crate::metadata::precision::active_quant;
use mase_ir::{Node, NodeKind, Op, OpFamily, QuantFormat, ValueInfo};
use serde::Serialize;

/// Counts of one node.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct NodeCost {
    pub flops: u64,
    pub backward_flops: u64,
    pub bitops: f64,
    /// Trainable parameters.
    pub params: u64,
    /// Buffers (batch-norm running statistics).
    pub buffers: u64,
    /// Values read from data inputs and written to the output.
    pub input_elements: u64,
    pub output_elements: u64,
    /// The same traffic in bits, with the formats of `node.quant`.
    pub input_bits: f64,
    pub output_bits: f64,
    /// Bits of the node's parameters and buffers as stored (quantized widths where quantized).
    pub param_bits: f64,
    /// Bits per value of the first data input and, for linear, conv and matmul, of the weight
    /// (the right operand for matmul); 32 when float.
    pub data_in_width: f64,
    pub weight_width: Option<f64>,
}

fn bits(f: Option<&QuantFormat>) -> f64 {
    f.map_or(32.0, QuantFormat::bits)
}

/// How an op's operations are counted (the table above).
enum Rule {
    /// `in_features * out_features` multiply-accumulates per row.
    Linear { in_features: usize, out_features: usize },
    /// `window` multiply-accumulates per output value (kernel size times input channels per group).
    Conv { window: usize },
    /// `k` multiply-accumulates per output value, `k` the left operand's last dimension.
    MatMul,
    /// One multiply-accumulate per combination of the letters' indices.
    Einsum,
    /// `q k^T` and `P v` multiply-accumulates, plus three operations per score for the softmax.
    Attention,
    /// This many operations per input value.
    PerInput(u64),
    /// This many operations per output value.
    PerOutput(u64),
    /// `size` operations per output value (a pooling window).
    Window { size: usize },
    /// Data movement or graph plumbing: no arithmetic.
    Free,
}

/// The counting rule of each op; a new op must choose one here.
fn rule(op: &Op) -> Rule {
    match op {
        Op::Linear { in_features, out_features, .. } => Rule::Linear { in_features: *in_features, out_features: *out_features },
        Op::Conv1d(c) | Op::Conv2d(c) => Rule::Conv { window: c.kernel.iter().product::<usize>() * (c.in_channels / c.groups.max(1)) },
        Op::MaxPool1d(p) | Op::MaxPool2d(p) | Op::AvgPool1d(p) | Op::AvgPool2d(p) => Rule::Window { size: p.kernel.iter().product() },
        // Dropout passes values on in evaluation, as MASE counts it.
        Op::Dropout { .. } | Op::StochasticDepth { .. } => Rule::Free,
        // MASE's estimator counts LayerNorm as 5 operations per input value.
        Op::LayerNorm { .. } | Op::GroupNorm { .. } => Rule::PerInput(5),
        Op::Einsum { .. } => Rule::Einsum,
        other => match other.family() {
            OpFamily::Norm => Rule::PerInput(4),
            OpFamily::Softmax => Rule::PerInput(3),
            OpFamily::Pointwise | OpFamily::AdaptivePool | OpFamily::Reduce => Rule::PerInput(1),
            OpFamily::Binary => Rule::PerOutput(1),
            OpFamily::MatMul => Rule::MatMul,
            OpFamily::Graph | OpFamily::Shape => Rule::Free,
            // What a PyTorch module kept whole computes is not known to mase-rs: not counted
            // (README "mg.model is a PyTorch module" says so).
            OpFamily::Opaque => Rule::Free,
            // Linear, conv and pools have their rules above, from their sizes; a new op of these
            // families counts one operation per input value until it gets its own.
            OpFamily::Linear | OpFamily::Conv | OpFamily::Pool => Rule::PerInput(1),
            OpFamily::Attention => Rule::Attention,
            // A lookup copies rows: no arithmetic.
            OpFamily::Embedding => Rule::Free,
        },
    }
}

/// Counts for `node` given the value shapes of a one-sample run.
pub fn node_cost(node: &Node, values: &[ValueInfo], own: &ValueInfo) -> NodeCost {
    let q = active_quant(node);
    let ins: Vec<&[usize]> = node.inputs.iter().filter_map(|u| values.get(u.0)).filter(|v| v.is_tensor()).map(ValueInfo::shape).collect();
    let numel = |s: &[usize]| s.iter().product::<usize>() as u64;
    let in0 = ins.first().map_or(0, |s| numel(s));
    let out = if own.is_tensor() { numel(own.shape()) } else { 0 };
    let macs: u64 = match rule(&node.op) {
        Rule::Linear { in_features, out_features } => {
            let rows = if in_features == 0 { 0 } else { in0 / in_features as u64 };
            (in_features * out_features) as u64 * rows
        }
        Rule::Conv { window } => out * window as u64,
        Rule::MatMul => match (ins.first(), ins.get(1)) {
            (Some(a), Some(_)) if !a.is_empty() => out * *a.last().unwrap_or(&0) as u64,
            _ => 0,
        },
        Rule::Einsum => match (&node.op, ins.first(), ins.get(1)) {
            (Op::Einsum { equation }, Some(a), Some(b)) => {
                mase_ir::Contraction::parse(equation).ok().and_then(|c| c.macs([a, b])).unwrap_or(0) as u64
            }
            _ => 0,
        },
        // q [.., L, E] and k [.., S, E] give the scores, v [.., S, Ev] the output [.., L, Ev].
        Rule::Attention => match (ins.first(), ins.get(1)) {
            (Some(q), Some(k)) if q.len() >= 2 && k.len() >= 2 => {
                let scores = numel(&q[..q.len() - 1]) * k[k.len() - 2] as u64;
                let ev = if q.is_empty() { 0 } else { out / numel(&q[..q.len() - 1]).max(1) };
                scores * (*q.last().unwrap_or(&0) as u64 + ev)
            }
            _ => 0,
        },
        Rule::PerInput(_) | Rule::PerOutput(_) | Rule::Window { .. } | Rule::Free => 0,
    };
    // The attention scores, for its softmax.
    let scores = match (&node.op, ins.first(), ins.get(1)) {
        (Op::ScaledDotProductAttention { .. }, Some(q), Some(k)) if q.len() >= 2 && k.len() >= 2 => {
            numel(&q[..q.len() - 1]) * k[k.len() - 2] as u64
        }
        _ => 0,
    };
    let flops = match rule(&node.op) {
        Rule::Linear { .. } | Rule::Conv { .. } | Rule::MatMul | Rule::Einsum => macs,
        Rule::Attention => macs + 3 * scores,
        Rule::PerInput(k) => k * in0,
        Rule::PerOutput(k) => k * out,
        Rule::Window { size } => out * size as u64,
        Rule::Free => 0,
    };
    let backward_flops = match rule(&node.op) {
        Rule::Linear { .. } | Rule::Conv { .. } | Rule::MatMul | Rule::Einsum | Rule::Attention => 2 * flops,
        Rule::PerInput(_) | Rule::PerOutput(_) | Rule::Window { .. } | Rule::Free => flops,
    };
    let din = |k: usize| bits(q.and_then(|q| q.data_in.get(k)).and_then(Option::as_ref));
    let weight_width = q.and_then(|q| q.weight.as_ref()).map(QuantFormat::bits).unwrap_or(32.0);
    let bitops = match rule(&node.op) {
        Rule::Linear { .. } | Rule::Conv { .. } => macs as f64 * din(0) * weight_width,
        Rule::MatMul | Rule::Einsum => macs as f64 * din(0) * din(1),
        Rule::Attention => macs as f64 * din(0) * din(1) + 3.0 * scores as f64 * 32.0,
        Rule::PerInput(_) | Rule::PerOutput(_) | Rule::Window { .. } | Rule::Free => flops as f64 * din(0),
    };
    let (mut params, mut buffers, mut param_bits) = (0u64, 0u64, 0f64);
    if node.kind == NodeKind::CallModule {
        for spec in node.op.param_specs() {
            let n = spec.shape.iter().product::<usize>() as u64;
            if spec.trainable {
                params += n;
            } else {
                buffers += n;
            }
            let w = match spec.name {
                "weight" => q.and_then(|q| q.weight.as_ref()),
                "bias" => q.and_then(|q| q.bias.as_ref()),
                _ => None,
            };
            param_bits += n as f64 * bits(w);
        }
    }
    let input_elements: u64 = ins.iter().map(|s| numel(s)).sum();
    let input_bits: f64 = ins.iter().enumerate().map(|(k, s)| numel(s) as f64 * din(k)).sum();
    let output_bits = out as f64 * bits(q.and_then(|q| q.data_out.as_ref()));
    // Layers that multiply by a weight (MASE's average-width pass looks at these only).
    let has_weight = matches!(node.op, Op::Linear { .. } | Op::Conv1d(_) | Op::Conv2d(_) | Op::MatMul | Op::Einsum { .. });
    NodeCost {
        flops,
        backward_flops,
        bitops,
        params,
        buffers,
        input_elements,
        output_elements: out,
        input_bits,
        output_bits,
        param_bits,
        data_in_width: din(0),
        weight_width: has_weight.then(|| if matches!(node.op, Op::MatMul | Op::Einsum { .. }) { din(1) } else { weight_width }),
    }
}
