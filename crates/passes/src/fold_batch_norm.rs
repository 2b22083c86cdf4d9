//! `fold_batch_norm`: every evaluation-mode batch norm folded into the adjacent linear or
//! convolution where that is exact, and the others rewritten as a per-channel affine, so that a
//! quantized network can be integer end to end (doc/hardware.md, section Batch norms).
//!
//! In evaluation a batch norm computes `y_c = s_c x_c + t_c` with `s_c = gamma_c / sqrt(var_c +
//! eps)` and `t_c = beta_c - mean_c s_c`. Then:
//!
//! - **after** a `linear`, `conv1d` or `conv2d` that feeds it alone (its channels are the
//!   layer's outputs): `W'_o = s_o W_o`, `b'_o = s_o b_o + t_o`, and the batch norm goes;
//! - **before** a `linear` that it alone feeds, on `[N, C]` values: `W'_ok = W_ok s_k`, `b'_o =
//!   b_o + sum_k W_ok t_k`, and the batch norm goes;
//! - otherwise (after a relu, first in the graph, before a convolution, whose zero padding would
//!   see `t`): it stays, in **affine form**: weight `s`, bias `t`, running mean 0, running
//!   variance 1 and `eps` 0, where evaluation computes `s_c x + t_c` exactly. Quantized with
//!   `integer` formats (`quantize` with a `batch_norm1d`/`batch_norm2d` entry), the integer
//!   executor and the hardware run it as `rshift_rne(m_c x + a_c, shift)` clamped to its
//!   `data_out` format.
//!
//! The folds are exact in real arithmetic; in `f32` the outputs move by rounding only. Run the
//! pass before `quantize`: formats chosen from statistics are then chosen for the folded weights.
//! A batch norm that already has formats and would be folded away is an error naming it.

use crate::metadata::common::refresh;
use crate::table::{Table, TableFormat};
use crate::{PassContext, PassError, PassReport, Result};
use mase_ir::{Graph, NodeId, NodeKind, NormSpec, Op, ParamStore, Tensor};
use serde::{Deserialize, Serialize};
use serde_json::json;

const PASS: &str = "fold_batch_norm";

/// Arguments of `fold_batch_norm` (the keys of `[passes.fold_batch_norm]`): none.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FoldArgs {}

/// What happened to one batch norm.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct FoldChange {
    pub node: String,
    /// `after` (folded into the layer before it), `before` (into the linear after it) or
    /// `affine` (kept as a per-channel affine).
    pub action: &'static str,
    /// The layer it was folded into.
    pub into: Option<String>,
}

/// The pass: [`fold_graph`], then the metadata refresh.
pub fn fold_batch_norm(graph: &mut Graph, ctx: &mut PassContext, _args: &FoldArgs) -> Result<PassReport> {
    PassContext::require_one_input(PASS, graph)?;
    let sample = ctx.sample_shape(graph).ok_or_else(|| PassError::NoData {
        pass: PASS.into(),
        reason: "the input shape is unknown: give a data set or run add_common_metadata first".into(),
    })?;
    let changes = fold_graph(graph, &mut ctx.params, &sample)?;
    refresh(graph, ctx)?;
    let mut t = Table::new(["Node name", "Action", "Into"]);
    for c in &changes {
        t.push([c.node.clone(), c.action.to_string(), c.into.clone().unwrap_or_else(|| "-".into())]);
    }
    let count = |a: &str| changes.iter().filter(|c| c.action == a).count();
    let folded = count("after") + count("before");
    Ok(PassReport::new(PASS, json!({"folded": folded, "affine": count("affine"), "changes": changes}))
        .with_text(t.render(TableFormat::Simple)))
}

/// Folds or rewrites every batch norm of `graph` (see the module documentation); `sample` is
/// one input sample's shape. On an error the graph may be partly folded.
pub fn fold_graph(graph: &mut Graph, params: &mut ParamStore, sample: &[usize]) -> Result<Vec<FoldChange>> {
    let mut changes = Vec::new();
    let mut done: Vec<String> = Vec::new();
    loop {
        let next = graph.ids().find(|&id| {
            let n = graph.node(id);
            matches!(n.op, Op::BatchNorm1d(_) | Op::BatchNorm2d(_)) && !done.contains(&n.name)
        });
        let Some(id) = next else { break };
        let shapes = shapes(graph, params, sample)?;
        let node = graph.node(id).clone();
        let (Op::BatchNorm1d(spec) | Op::BatchNorm2d(spec)) = &node.op else { break };
        let (s, t) = scale_shift(&node.target, spec, params)?;
        let change = match fold_target(graph, id, &shapes, spec.num_features) {
            Some((layer, after)) => {
                if node.quant.as_ref().is_some_and(|q| q.is_active()) {
                    return Err(PassError::Node {
                        pass: PASS.into(),
                        node: node.name.clone(),
                        reason: "has number formats and would be folded away; run fold_batch_norm before quantize".into(),
                    });
                }
                let into = graph.node(layer).name.clone();
                if after {
                    fold_after(graph, params, layer, &s, &t)?;
                } else {
                    fold_before(graph, params, layer, &s, &t)?;
                }
                for (name, _) in node.params() {
                    params.remove(&name);
                }
                graph.remove_passthrough(id)?;
                FoldChange { node: node.name.clone(), action: if after { "after" } else { "before" }, into: Some(into) }
            }
            None => {
                to_affine(graph, params, id, &s, &t);
                done.push(node.name.clone());
                FoldChange { node: node.name.clone(), action: "affine", into: None }
            }
        };
        changes.push(change);
    }
    Ok(changes)
}

/// The shape of every node's value for a batch of two samples.
fn shapes(graph: &Graph, params: &ParamStore, sample: &[usize]) -> Result<Vec<Vec<usize>>> {
    let batch = [vec![2].into_iter().chain(sample.iter().copied()).collect::<Vec<_>>()];
    let values = graph.infer_shapes(&batch, &|name| params.get(name).map(|t| t.shape.clone()))?;
    Ok(values.iter().map(|v| v.shape().to_vec()).collect())
}

/// `s_c` and `t_c` of a batch norm's evaluation, computed in `f64`.
fn scale_shift(target: &str, spec: &NormSpec, params: &ParamStore) -> Result<(Vec<f64>, Vec<f64>)> {
    let c = spec.num_features;
    let get = |name: &str, default: f64| -> Result<Vec<f64>> {
        let key = format!("{target}.{name}");
        match params.get(&key) {
            Some(t) if t.data.len() == c => Ok(t.data.iter().map(|&v| f64::from(v)).collect()),
            Some(t) => Err(PassError::args(PASS, format!("parameter `{key}` has {} values, the batch norm {c}", t.data.len()))),
            None if spec.affine || matches!(name, "running_mean" | "running_var") => {
                Err(PassError::args(PASS, format!("parameter `{key}` is missing")))
            }
            None => Ok(vec![default; c]),
        }
    };
    let (gamma, beta, mean, var) = (get("weight", 1.0)?, get("bias", 0.0)?, get("running_mean", 0.0)?, get("running_var", 1.0)?);
    let eps = f64::from(spec.eps);
    let s: Vec<f64> = gamma.iter().zip(&var).map(|(g, v)| g / (v + eps).sqrt()).collect();
    let t = beta.iter().zip(&mean).zip(&s).map(|((b, m), s)| b - m * s).collect();
    Ok((s, t))
}

/// The layer a batch norm folds into exactly, and whether it comes before the batch norm.
fn fold_target(graph: &Graph, bn: NodeId, shapes: &[Vec<usize>], channels: usize) -> Option<(NodeId, bool)> {
    let node = graph.node(bn);
    let src = *node.inputs.first()?;
    let producer = graph.node(src);
    let alone = |id: NodeId| graph.users(id).len() == 1;
    let module = |id: NodeId| graph.node(id).kind == NodeKind::CallModule;
    // After: the producer's outputs are the batch norm's channels (dimension 1).
    let after_ok = match (&producer.op, &node.op) {
        (Op::Linear { out_features, .. }, Op::BatchNorm1d(_)) => *out_features == channels && shapes[src.0].len() == 2,
        (Op::Conv1d(c), Op::BatchNorm1d(_)) | (Op::Conv2d(c), Op::BatchNorm2d(_)) => c.out_channels == channels,
        _ => false,
    };
    if after_ok && module(src) && alone(src) {
        return Some((src, true));
    }
    // Before: a linear reading the batch norm's `[N, C]` values alone.
    let users = graph.users(bn);
    let [user] = users[..] else { return None };
    let u = graph.node(user);
    let before_ok = matches!(u.op, Op::Linear { in_features, .. } if in_features == channels)
        && matches!(node.op, Op::BatchNorm1d(_))
        && shapes[bn.0].len() == 2
        && u.inputs == [bn];
    (before_ok && module(user)).then_some((user, false))
}

fn f32s(v: impl IntoIterator<Item = f64>) -> Vec<f32> {
    v.into_iter().map(|x| x as f32).collect()
}

/// The layer's weight (`[O, ...]`) and bias (zeros when it has none), as `f64`.
fn layer_params(graph: &Graph, params: &ParamStore, layer: NodeId) -> Result<(Vec<usize>, Vec<f64>, Vec<f64>)> {
    let node = graph.node(layer);
    let key = format!("{}.weight", node.target);
    let w = params.get(&key).ok_or_else(|| PassError::args(PASS, format!("parameter `{key}` is missing")))?;
    let outs = w.shape.first().copied().unwrap_or(0);
    let b = match params.get(&format!("{}.bias", node.target)) {
        Some(b) => b.data.iter().map(|&v| f64::from(v)).collect(),
        None => vec![0.0; outs],
    };
    Ok((w.shape.clone(), w.data.iter().map(|&v| f64::from(v)).collect(), b))
}

/// Writes a layer's new weight and bias, giving it a bias when it had none.
fn set_layer_params(graph: &mut Graph, params: &mut ParamStore, layer: NodeId, shape: Vec<usize>, w: Vec<f64>, b: Vec<f64>) -> Result<()> {
    let node = graph.node_mut(layer);
    match &mut node.op {
        Op::Linear { bias, .. } => *bias = true,
        Op::Conv1d(c) | Op::Conv2d(c) => c.bias = true,
        other => return Err(PassError::args(PASS, format!("cannot fold into a {}", other.mase_op()))),
    }
    let target = node.target.clone();
    let outs = b.len();
    params.insert(format!("{target}.weight"), Tensor::new(shape, f32s(w))?, true);
    params.insert(format!("{target}.bias"), Tensor::new(vec![outs], f32s(b))?, true);
    Ok(())
}

/// Folds `y = s (W x + b) + t` into the layer.
fn fold_after(graph: &mut Graph, params: &mut ParamStore, layer: NodeId, s: &[f64], t: &[f64]) -> Result<()> {
    let (shape, mut w, mut b) = layer_params(graph, params, layer)?;
    let per_out = w.len() / s.len().max(1);
    for (o, row) in w.chunks_mut(per_out.max(1)).enumerate() {
        row.iter_mut().for_each(|v| *v *= s[o]);
        b[o] = s[o] * b[o] + t[o];
    }
    set_layer_params(graph, params, layer, shape, w, b)
}

/// Folds `y = W (s x + t) + b` into the linear.
fn fold_before(graph: &mut Graph, params: &mut ParamStore, layer: NodeId, s: &[f64], t: &[f64]) -> Result<()> {
    let (shape, mut w, mut b) = layer_params(graph, params, layer)?;
    let k = s.len().max(1);
    for (o, row) in w.chunks_mut(k).enumerate() {
        b[o] += row.iter().zip(t).map(|(wv, tv)| wv * tv).sum::<f64>();
        row.iter_mut().zip(s).for_each(|(wv, sv)| *wv *= sv);
    }
    set_layer_params(graph, params, layer, shape, w, b)
}

/// Rewrites a batch norm in affine form: weight `s`, bias `t`, running mean 0, running variance
/// 1, `eps` 0.
fn to_affine(graph: &mut Graph, params: &mut ParamStore, bn: NodeId, s: &[f64], t: &[f64]) {
    let node = graph.node_mut(bn);
    if let Op::BatchNorm1d(spec) | Op::BatchNorm2d(spec) = &mut node.op {
        spec.eps = 0.0;
        spec.affine = true;
    }
    let (target, c) = (node.target.clone(), s.len());
    let put = |params: &mut ParamStore, name: &str, v: Vec<f32>, trainable: bool| {
        params.insert(format!("{target}.{name}"), Tensor { shape: vec![c], data: v }, trainable);
    };
    put(params, "weight", f32s(s.iter().copied()), true);
    put(params, "bias", f32s(t.iter().copied()), true);
    put(params, "running_mean", vec![0.0; c], false);
    put(params, "running_var", vec![1.0; c], false);
}
