//! Binarized networks (Brevitas/FINN's TFC: QONNX `BipolarQuant` weights and activations) as
//! integer designs of XNOR-popcount layers and threshold comparators.
//!
//! With weights and inputs in `{-1, +1}`, a layer's sum is `2 p - K`, where `p` is the number of
//! inputs equal to their weight: the popcount of `xnor(w, x)` over the `K` inputs. A stream
//! element holds the bit `b` of a bipolar value (`1` for `+1`), and with weight codes `±1` and
//! the number of `-1` weights as the bias, the layer's sum is `p` itself (`xnor(b, 1) = b`,
//! `xnor(b, 0) = 1 - b`). A hidden layer is followed by a batch norm with running statistics and
//! the next layer's `BipolarQuant`: `sign(BN(2 p - K))`, which the lowering replaces by one
//! comparison of `p` with an integer threshold per output ([`Step::Threshold`]). The threshold
//! is found by evaluating the batch norm exactly as the runtime does (`f32`, coefficients from
//! [`mase_runtime::batch_norm_eval_coefficients`]) on every `p` in `0..=K`, so it is bit-exact
//! against the float semantics by construction, ties included (`BipolarQuant` maps 0 to `+1`).
//!
//! What the graph may hold, in order: element-wise operations with a scalar constant (`mul`,
//! `div`, `add`, `sub`) and reshapes to a flat sample before the first layer (TFC's `2 x - 1`);
//! `linear` nodes without bias whose input and weight are bipolar with a power-of-two scale,
//! each but the first after a batch norm; and scalar element-wise operations after the last
//! layer (TFC's `TensorNorm`), which the design leaves to the consumer: it outputs the last
//! layer's popcounts when those operations are strictly increasing over them (so the argmax is
//! the same) and refuses the graph otherwise.

use crate::design::{Design, Layer, Range, Step};
use crate::error::{HwError, Result};
use crate::lower::LowerOptions;
use mase_ir::{Graph, Node, Op, ParamStore, QuantFormat};
use serde::{Deserialize, Serialize};

/// An element-wise float operation with a scalar constant, `v op c`, computed in `f32` as the
/// runtime's element-wise kernels compute it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "op", content = "constant", rename_all = "snake_case")]
pub enum ScalarOp {
    Add(f32),
    Sub(f32),
    Mul(f32),
    Div(f32),
}

impl ScalarOp {
    /// `v op c`.
    pub fn apply(self, v: f32) -> f32 {
        match self {
            ScalarOp::Add(c) => v + c,
            ScalarOp::Sub(c) => v - c,
            ScalarOp::Mul(c) => v * c,
            ScalarOp::Div(c) => v / c,
        }
    }
}

/// The float ends of a binarized design: what happens to the input before its first
/// `BipolarQuant`, and to the last layer's sums after it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BipolarEnds {
    /// Operations on each input value before its sign is taken (TFC: `* 2`, `- 1`).
    pub input: Vec<ScalarOp>,
    /// The value of one unit of the last layer's sum `2 p - K` (the product of its input's and
    /// its weight's scales, a power of two).
    pub acc_scale: f32,
    /// Operations on the last layer's sums that give the graph's output (TFC's `TensorNorm`).
    pub output: Vec<ScalarOp>,
}

impl BipolarEnds {
    /// The input bit of a float value: 1 where the operations give a value `>= 0` (`+1`), else
    /// 0 (NaN gives 0, as `BipolarQuant` gives `-scale`).
    pub fn input_bit(&self, x: f32) -> i64 {
        let v = self.input.iter().fold(x, |v, op| op.apply(v));
        (mase_runtime::bipolar_code(v) + 1) / 2
    }

    /// The graph's output for a popcount `p` of a last layer of `k` inputs, as the runtime
    /// computes it from the sum `2 p - k`.
    pub fn output_value(&self, p: i64, k: usize) -> f32 {
        let acc = ((2 * p - k as i64) as f64 * self.acc_scale as f64) as f32;
        self.output.iter().fold(acc, |v, op| op.apply(v))
    }
}

/// Whether the graph holds a `linear` with a bipolar weight: such graphs are lowered here.
pub fn is_bipolar(graph: &Graph) -> bool {
    graph.nodes().iter().any(|n| {
        matches!(n.op, Op::Linear { .. })
            && matches!(n.quant.as_ref().and_then(|q| q.weight.as_ref()), Some(QuantFormat::BipolarQuant { .. }))
    })
}

/// The per-channel evaluation coefficients of a batch norm pending before the next layer.
struct PendingNorm {
    node: String,
    scale: Vec<f32>,
    shift: Vec<f32>,
}

fn refuse(node: &Node, reason: impl std::fmt::Display) -> HwError {
    HwError::NotInteger { nodes: format!("{} ({}): {reason}", node.name, node.op.mase_op()) }
}

/// The scalar constant an element-wise node applies to the stream (input `prev`), and the
/// operation; `None` when the node is not such an operation.
fn scalar_op(graph: &Graph, params: &ParamStore, node: &Node, prev: usize) -> Result<Option<ScalarOp>> {
    let make: fn(f32) -> ScalarOp = match node.op {
        Op::Add => ScalarOp::Add,
        Op::Sub => ScalarOp::Sub,
        Op::Mul => ScalarOp::Mul,
        Op::Div => ScalarOp::Div,
        _ => return Ok(None),
    };
    let [a, b] = node.inputs.as_slice() else { return Err(refuse(node, "expected two inputs")) };
    let commutes = matches!(node.op, Op::Add | Op::Mul);
    let constant = match (a.0 == prev, b.0 == prev) {
        (true, false) => *b,
        (false, true) if commutes => *a,
        _ => return Err(refuse(node, "expected the stream as its first input and a constant as its second")),
    };
    let c = graph.node(constant);
    let value = match c.op {
        Op::Constant => params.get(&c.target).filter(|t| t.numel() == 1).map(|t| t.data[0]),
        _ => None,
    };
    let v = value.ok_or_else(|| refuse(node, format!("`{}` is not a constant with one value", c.name)))?;
    Ok(Some(make(v)))
}

/// Lowers a binarized graph (see the module documentation) to a design named `model`.
pub fn lower(graph: &Graph, params: &ParamStore, model: &str, opts: &LowerOptions) -> Result<Design> {
    let mut input_ops = Vec::new();
    let mut output_ops = Vec::new();
    let mut layers: Vec<Layer> = Vec::new();
    let mut scales: Vec<f32> = Vec::new();
    let mut pending: Option<PendingNorm> = None;
    // The node whose value the next node must read.
    let mut prev: Option<usize> = None;
    for (i, node) in graph.nodes().iter().enumerate() {
        if matches!(node.op, Op::Constant) {
            continue;
        }
        if let Some(p) = prev {
            if node.inputs.first().map(|u| u.0) != Some(p)
                && !(matches!(node.op, Op::Add | Op::Mul) && node.inputs.iter().any(|u| u.0 == p))
            {
                return Err(refuse(node, format!("does not read `{}`; only chains of layers are lowered", graph.nodes()[p].name)));
            }
        }
        match &node.op {
            Op::Input if prev.is_none() => {}
            Op::Output | Op::Dropout { .. } => {}
            Op::Flatten { .. } | Op::Reshape { .. } if layers.is_empty() => {}
            Op::Linear { in_features, out_features, bias } => {
                if !output_ops.is_empty() {
                    return Err(refuse(node, "float operations between two binarized layers have no hardware"));
                }
                let scale = layer_scale(node, *bias)?;
                if let Some(last) = layers.last_mut() {
                    let norm = pending.take();
                    last.post = vec![threshold_step(last.in_features, scales[scales.len() - 1], norm.as_ref())?];
                } else if pending.is_some() {
                    return Err(refuse(node, "a batch norm before the first layer has no hardware"));
                }
                layers.push(binary_layer(node, params, *in_features, *out_features, opts)?);
                scales.push(scale);
            }
            Op::BatchNorm1d(spec) => {
                if layers.is_empty() || pending.is_some() || !output_ops.is_empty() {
                    return Err(refuse(node, "a batch norm is lowered only right after a binarized layer"));
                }
                if node.quant.as_ref().is_some_and(|q| q.is_active()) {
                    return Err(refuse(node, "a quantized batch norm between binarized layers has no hardware"));
                }
                pending = Some(norm_coefficients(node, spec, params)?);
            }
            _ => match scalar_op(graph, params, node, prev.unwrap_or(0))? {
                Some(op) if layers.is_empty() => input_ops.push(op),
                Some(op) if pending.is_none() => output_ops.push(op),
                _ => return Err(refuse(node, "no hardware in a binarized network (see doc/hardware.md, Binarized networks)")),
            },
        }
        prev = Some(i);
    }
    if let Some(n) = pending {
        return Err(HwError::Structure { reason: format!("batch norm `{}` ends the network: only a binarized layer can end it", n.node) });
    }
    let Some(last) = layers.last() else {
        return Err(HwError::Structure { reason: "no binarized linear layer to build".into() });
    };
    let ends = BipolarEnds { input: input_ops, acc_scale: scales[scales.len() - 1], output: output_ops };
    check_increasing(&ends, last.in_features)?;
    Ok(Design {
        model: model.to_string(),
        input_format: (1, 0, false),
        layers,
        clock_mhz: None,
        stages: Vec::new(),
        multipliers: Default::default(),
        bipolar: Some(ends),
        part: None,
    })
}

/// The value of one unit of a binarized layer's sum: the product of its input's and its
/// weight's scales. The input and weight must be bipolar with power-of-two scales, without a
/// bias or an output format.
fn layer_scale(node: &Node, bias: bool) -> Result<f32> {
    let q = node.quant.as_ref().filter(|q| q.is_active()).ok_or_else(|| refuse(node, "not quantized"))?;
    let fx = mase_runtime::bipolar_fixed(q.data_in.first().and_then(Option::as_ref));
    let fw = mase_runtime::bipolar_fixed(q.weight.as_ref());
    let (Some(fx), Some(fw)) = (fx, fw) else {
        return Err(refuse(node, "expected a bipolar input and weight, each with one power-of-two scale"));
    };
    if bias || q.data_out.is_some() {
        return Err(refuse(node, "a binarized layer with a bias or an output format has no hardware"));
    }
    Ok(2f32.powi(-(fx.frac_width + fw.frac_width)))
}

/// The popcount layer of a binarized linear node: weight codes `±1` (the sign of each weight,
/// `+1` at 0), the number of `-1` weights as the bias, sums in `[0, K]`.
fn binary_layer(node: &Node, params: &ParamStore, k: usize, n: usize, opts: &LowerOptions) -> Result<Layer> {
    let name = format!("{}.weight", node.target);
    let w = params.get(&name).ok_or_else(|| HwError::Param { name: name.clone(), reason: "missing".into() })?;
    if w.numel() != n * k {
        return Err(HwError::Param { name, reason: format!("expected {n} x {k} values, found {}", w.numel()) });
    }
    if let Some((i, v)) = w.data.iter().enumerate().find(|(_, v)| !v.is_finite()) {
        return Err(HwError::Param { name, reason: format!("value {i} is {v}; a bipolar weight must be finite") });
    }
    let weight: Vec<i64> = w.data.iter().map(|&v| mase_runtime::bipolar_code(v)).collect();
    let bias = weight.chunks(k).map(|row| row.iter().filter(|&&c| c < 0).count() as i64).collect();
    let reuse = opts.reuse_of(&node.name);
    if k % reuse != 0 {
        return Err(HwError::ReuseFactor { node: node.name.clone(), reuse, inputs: k });
    }
    Ok(Layer {
        node: node.name.clone(),
        input: Range { lo: 0, hi: 1, frac: 0 },
        pre: Vec::new(),
        in_features: k,
        out_features: n,
        weight,
        bias,
        acc: Range { lo: 0, hi: k as i64, frac: 0 },
        post: Vec::new(),
        reuse,
        products: Default::default(),
    })
}

/// A batch norm's evaluation coefficients, as the runtime computes them.
fn norm_coefficients(node: &Node, spec: &mase_ir::NormSpec, params: &ParamStore) -> Result<PendingNorm> {
    let get = |what: &str| -> Result<Vec<f32>> {
        let name = format!("{}.{what}", node.target);
        match params.get(&name) {
            Some(t) if t.numel() == spec.num_features => Ok(t.data.clone()),
            Some(t) => Err(HwError::Param { name, reason: format!("expected {} values, found {}", spec.num_features, t.numel()) }),
            None if what == "weight" && !spec.affine => Ok(vec![1.0; spec.num_features]),
            None if what == "bias" && !spec.affine => Ok(vec![0.0; spec.num_features]),
            None => Err(HwError::Param { name, reason: "missing".into() }),
        }
    };
    let (w, b, m, v) = (get("weight")?, get("bias")?, get("running_mean")?, get("running_var")?);
    let (scale, shift) =
        (0..spec.num_features).map(|c| mase_runtime::batch_norm_eval_coefficients(w[c], b[c], m[c], v[c], spec.eps)).unzip();
    Ok(PendingNorm { node: node.name.clone(), scale, shift })
}

/// The comparator replacing `sign(BN(2 p - K))` (or `sign(2 p - K)` without a batch norm) on
/// the popcounts `p` in `[0, K]` of a layer whose sum unit is `unit`: the output bit of every
/// `p` is computed as the runtime computes it, and must be a step in `p`.
fn threshold_step(k: usize, unit: f32, norm: Option<&PendingNorm>) -> Result<Step> {
    let channels = norm.map_or(1, |n| n.scale.len());
    let (mut at, mut descending) = (Vec::with_capacity(channels), Vec::with_capacity(channels));
    for c in 0..channels {
        let bits: Vec<bool> = (0..=k as i64)
            .map(|p| {
                let v = ((2 * p - k as i64) as f64 * unit as f64) as f32;
                let y = norm.map_or(v, |n| v * n.scale[c] + n.shift[c]);
                mase_runtime::bipolar_code(y) > 0
            })
            .collect();
        let rises = bits.windows(2).filter(|w| !w[0] && w[1]).count();
        let falls = bits.windows(2).filter(|w| w[0] && !w[1]).count();
        let (t, down) = match (rises, falls) {
            // 0 below the threshold, 1 from it (or constant).
            (0 | 1, 0) => (bits.iter().position(|&b| b).unwrap_or(k + 1) as i64, false),
            // 1 up to the threshold, 0 above it.
            (0, 1) => (bits.iter().rposition(|&b| b).map_or(-1, |p| p as i64), true),
            _ => {
                let name = norm.map_or("the sign", |n| n.node.as_str());
                return Err(HwError::Structure {
                    reason: format!("`{name}` channel {c}: its sign is not monotone in the popcount, so no threshold computes it"),
                });
            }
        };
        at.push(t);
        descending.push(down);
    }
    Ok(Step::Threshold { at, descending })
}

/// The output operations must keep the order of the popcounts strictly, so that the design's
/// popcounts have the graph's argmax (ties included).
fn check_increasing(ends: &BipolarEnds, k: usize) -> Result<()> {
    let values: Vec<f32> = (0..=k as i64).map(|p| ends.output_value(p, k)).collect();
    if let Some(p) = values.windows(2).position(|w| w[0].partial_cmp(&w[1]) != Some(std::cmp::Ordering::Less)) {
        return Err(HwError::Structure {
            reason: format!(
                "the operations after the last layer map popcounts {p} and {} to {} and {}, not strictly increasing: the design's outputs would not have the graph's order (a fixed-point output affine is not built)",
                p + 1,
                values[p],
                values[p + 1]
            ),
        });
    }
    Ok(())
}

/// The popcount of a last layer of `k` inputs whose graph output is `v`, or `None` when no
/// popcount gives `v` (the runtime's float path disagrees with the design's ends).
pub fn popcount_of(ends: &BipolarEnds, k: usize, v: f32) -> Option<i64> {
    (0..=k as i64).find(|&p| ends.output_value(p, k) == v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The thresholds of one channel over popcounts `0..=4` (sums `2 p - 4` in `{-4, -2, 0, 2, 4}`)
    /// for batch norm coefficients `(scale, shift)`, against the signs worked out by hand.
    #[test]
    fn thresholds_are_the_signs_of_the_batch_norm_ties_included() {
        // (scale, shift, threshold, descending): the bit is 1 where p >= t (p <= t descending).
        let cases = [
            (1.0, 0.0, 2, false),  // 2p - 4 >= 0 from p = 2: sign(0) = +1.
            (1.0, -0.5, 3, false), // 2p - 4.5 >= 0 from p = 3.
            (-1.0, 0.0, 2, true),  // 4 - 2p >= 0 up to p = 2.
            (-2.0, 1.0, 2, true),  // -2 (2p - 4) + 1 = 9 - 4p >= 0 up to p = 2.
            (0.5, 3.0, 0, false),  // (2p - 4) / 2 + 3 >= 0 for every p.
            (0.0, -1.0, 5, false), // Never: the threshold is above every popcount.
            (-0.0, 0.0, 0, false), // Always: -0 * v + 0 is 0 (or -0), whose sign is +1.
        ];
        for (scale, shift, t, down) in cases {
            let norm = PendingNorm { node: "bn".into(), scale: vec![scale], shift: vec![shift] };
            let step = threshold_step(4, 1.0, Some(&norm)).unwrap();
            assert_eq!(step, Step::Threshold { at: vec![t], descending: vec![down] }, "scale {scale}, shift {shift}");
            for p in 0..=4i64 {
                let y = ((2 * p - 4) as f32) * scale + shift;
                assert_eq!(step.apply(p, 0, Range { lo: 0, hi: 4, frac: 0 }), i64::from(y >= 0.0), "p {p}, scale {scale}");
            }
        }
        // Without a batch norm the sign of the sum itself: +1 from p = 2.
        assert_eq!(threshold_step(4, 1.0, None).unwrap(), Step::Threshold { at: vec![2], descending: vec![false] });
    }
}
