//! Lowering: a quantized graph to a [`Design`], checking that every node computes in integer
//! arithmetic exactly as the integer executor (`mase_runtime::run_integer`) runs it.
//!
//! The graph must be a chain from its input to its output of:
//! - `linear` nodes whose `data_in`, weight and bias have `integer` formats (`data_out`, when
//!   present, an `integer` format too): one layer each;
//! - `relu` nodes, quantized with `integer` formats or not quantized (then they act on the codes
//!   of the value before them, which is what the executor computes in float, exactly);
//! - `flatten` and `dropout`, which do nothing to one flat sample in inference.
//!
//! Any other node, or a linear/relu with a non-integer format, is named in one error listing
//! every such node.

use crate::design::{signed_bits, Design, Layer, Range, Step};
use crate::error::{HwError, Result};
use mase_ir::{Graph, NodeKind, Op, ParamStore, QuantFormat};
use mase_quant::Fixed;

/// Per-layer choices of the lowering.
#[derive(Clone, Debug, Default)]
pub struct LowerOptions {
    /// Reuse factor per layer node name; layers not named are fully unrolled (1).
    pub reuse: Vec<(String, usize)>,
    /// Reuse factor of every layer not named in `reuse` (0 or 1: fully unrolled).
    pub default_reuse: usize,
}

impl LowerOptions {
    fn reuse_of(&self, node: &str) -> usize {
        self.reuse.iter().find(|(n, _)| n == node).map_or(self.default_reuse.max(1), |(_, r)| (*r).max(1))
    }
}

fn fixed(f: Option<&QuantFormat>) -> Option<Fixed> {
    f.and_then(Fixed::of)
}

/// Lowers `graph` (quantized, with its parameters) to a design named `model`.
pub fn lower(graph: &Graph, params: &ParamStore, model: &str, opts: &LowerOptions) -> Result<Design> {
    let mut not_integer = Vec::new();
    let mut layers: Vec<Layer> = Vec::new();
    let mut input_format: Option<Fixed> = None;
    // Steps met before the first layer have no format to work on yet.
    let mut prev = None;
    for (i, node) in graph.nodes().iter().enumerate() {
        let label = format!("{} ({})", node.name, node.op.mase_op());
        if node.kind != NodeKind::Placeholder {
            if let Some(p) = prev {
                if node.inputs.first().map(|u| u.0) != Some(p) || node.inputs.len() != 1 {
                    return Err(HwError::Structure {
                        reason: format!("node `{}` does not read the node before it alone; only chains of layers are lowered", node.name),
                    });
                }
            }
        }
        prev = Some(i);
        let q = node.quant.as_ref().filter(|q| q.is_active());
        match &node.op {
            Op::Input => {
                if i != 0 {
                    return Err(HwError::Structure { reason: format!("input `{}` is not the first node", node.name) });
                }
            }
            Op::Output | Op::Flatten { .. } | Op::Dropout { .. } => {}
            Op::Linear { in_features, out_features, bias } => {
                let Some(q) = q else {
                    not_integer.push(format!("{label}: not quantized"));
                    continue;
                };
                let fx = fixed(q.data_in.first().and_then(Option::as_ref));
                let fw = fixed(q.weight.as_ref());
                let fb = if *bias { fixed(q.bias.as_ref()) } else { Some(Fixed { width: 1, frac_width: 0, signed: true }) };
                let fo = q.data_out.as_ref().map(Fixed::of);
                let (Some(fx), Some(fw), Some(fb), None | Some(Some(_))) = (fx, fw, fb, fo) else {
                    not_integer.push(format!("{label}: data_in, weight and bias need `integer` formats"));
                    continue;
                };
                let mut pre = Vec::new();
                let input = match layers.last() {
                    Some(l) => {
                        pre.push(Step::requant(fx));
                        l.output()
                    }
                    None => {
                        input_format = Some(fx);
                        Range::of(fx)
                    }
                };
                let w = param_codes(params, &format!("{}.weight", node.target), fw, in_features * out_features)?;
                let frac = fx.frac_width + fw.frac_width;
                let (target, w, b) = if *bias {
                    let b = param_codes(params, &format!("{}.bias", node.target), fb, *out_features)?;
                    // The bias at the accumulator's scale: whichever has fewer fraction bits moves up.
                    let target = frac.max(fb.frac_width);
                    let up_w = 1i64 << (target - frac);
                    let up_b = 1i64 << (target - fb.frac_width);
                    (target, w.iter().map(|v| v * up_w).collect(), b.iter().map(|v| v * up_b).collect())
                } else {
                    (frac, w, vec![0; *out_features])
                };
                let xr = pre.iter().fold(input, |r, s: &Step| s.range(r));
                let (lo, hi) = sum_bounds(&w, &b, *in_features, xr);
                let bits = signed_bits(lo, hi);
                if bits > 64 {
                    return Err(HwError::AccumulatorTooWide { node: node.name.clone(), bits });
                }
                let reuse = opts.reuse_of(&node.name);
                if in_features % reuse != 0 {
                    return Err(HwError::ReuseFactor { node: node.name.clone(), reuse, inputs: *in_features });
                }
                let mut post = Vec::new();
                if let Some(Some(fo)) = fo {
                    post.push(Step::requant(fo));
                }
                layers.push(Layer {
                    node: node.name.clone(),
                    input,
                    pre,
                    in_features: *in_features,
                    out_features: *out_features,
                    weight: w,
                    bias: b,
                    acc: Range { lo: lo as i64, hi: hi as i64, frac: target },
                    post,
                    reuse,
                });
            }
            Op::Relu => {
                let mut steps = Vec::new();
                if let Some(q) = q {
                    let fi = fixed(q.data_in.first().and_then(Option::as_ref));
                    let fo = q.data_out.as_ref().map(Fixed::of);
                    let (Some(fi), None | Some(Some(_))) = (fi, fo) else {
                        not_integer.push(format!("{label}: data_in and data_out need `integer` formats"));
                        continue;
                    };
                    steps.push(Step::requant(fi));
                    steps.push(Step::Relu);
                    if let Some(Some(fo)) = fo {
                        steps.push(Step::requant(fo));
                    }
                } else {
                    steps.push(Step::Relu);
                }
                match layers.last_mut() {
                    Some(l) => l.post.extend(steps),
                    None => not_integer.push(format!("{label}: comes before the first integer layer, so its input has no integer format")),
                }
            }
            other => not_integer.push(format!("{label}: no integer hardware for {}", other.mase_op())),
        }
    }
    if !not_integer.is_empty() {
        return Err(HwError::NotInteger { nodes: not_integer.join("; ") });
    }
    let (Some(fx), false) = (input_format, layers.is_empty()) else {
        return Err(HwError::Structure { reason: "no quantized linear layer to build".into() });
    };
    Ok(Design { model: model.to_string(), input_format: (fx.width, fx.frac_width, fx.signed), layers })
}

/// The codes of a parameter, checked against the size the layer needs.
fn param_codes(params: &ParamStore, name: &str, f: Fixed, len: usize) -> Result<Vec<i64>> {
    let t = params.get(name).ok_or_else(|| HwError::Param { name: name.into(), reason: "missing".into() })?;
    if t.data.len() != len {
        return Err(HwError::Param { name: name.into(), reason: format!("has {} values, the layer needs {len}", t.data.len()) });
    }
    t.data.iter().map(|&v| f.code(v).ok_or_else(|| HwError::Param { name: name.into(), reason: "holds NaN".into() })).collect()
}

/// The smallest and largest sum `b_j + sum_k w_jk x_k` over inputs in `x` and every output `j`.
pub(crate) fn sum_bounds(w: &[i64], b: &[i64], in_features: usize, x: Range) -> (i128, i128) {
    let (mut lo, mut hi) = (i128::MAX, i128::MIN);
    for (j, &bj) in b.iter().enumerate() {
        let (mut l, mut h) = (bj as i128, bj as i128);
        for &wk in &w[j * in_features..][..in_features] {
            let (p, q) = (wk as i128 * x.lo as i128, wk as i128 * x.hi as i128);
            l += p.min(q);
            h += p.max(q);
        }
        lo = lo.min(l);
        hi = hi.max(h);
    }
    if b.is_empty() {
        (0, 0)
    } else {
        (lo, hi)
    }
}
