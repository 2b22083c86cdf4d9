//! Fused epilogues, planned once per plan (see `doc/runtime.md`, "Fused epilogues").
//!
//! **Evaluation forward.** A convolution or linear node whose only reader is a batch norm (and
//! that norm's only reader a ReLU), or whose only reader is a ReLU, runs the chain in its own
//! output pass: the bias, the norm's `x * scale + shift` with the running statistics, and the
//! ReLU are applied to each image (or the whole `[N, C]` product) while it is still in the cache,
//! and the result is written straight into the buffer of the chain's last node. The nodes inside
//! the chain are skipped, so their values are not kept ([`crate::Executor::value`] answers `None`
//! for them after such a forward). Only [`crate::Executor::infer`] and
//! [`crate::Executor::eval_batch`] fuse; [`crate::Executor::forward`] keeps every value.
//!
//! **Training backward.** A batch norm whose only reader is a ReLU takes in the ReLU's output
//! gradient and output and applies the ReLU's mask (`y <= 0 ? 0 : g`) as it reads them, so the
//! ReLU's backward and the gradient buffer between the two are skipped.
//!
//! Each fused value is computed by the same expressions in the same order as the unfused kernels
//! (`BatchNorm::eval_coefficients`, [`crate::kernels::activation::relu`]), so the results are the
//! same bits (`tests/fused.rs`).
//!
//! **Output fake quantization.** A chain also runs the output quantizers (`data_out`) of its
//! nodes, each where the unfused path runs it: the head's on the layer's result before the norm,
//! the norm's after it, the ReLU's after the ReLU. A chain may even be the head alone, when it
//! quantizes its output: the quantizer then runs on each image while it is in the cache instead
//! of in a pass over the whole tensor. Only formats that quantize each value on its own and draw
//! no random numbers are run this way ([`piecewise`]): quantizing a piece of the tensor then
//! gives the bits of quantizing the whole. Any other quantization of a member (its input, its
//! parameters, an output format whose blocks or rows span values) ends the chain before that
//! member, and a head whose output format is not piecewise heads no chain.

use crate::kernels::activation::relu;
use crate::kernels::norm::{eval_coefficients, NormSlots};
use crate::slots::ParamSlot;
use crate::topo::Topo;
use mase_ir::{Graph, Node, NodeId, Op, QuantFormat, Rng};
use mase_quant::Reach;

/// Values an output quantizer of a chain takes at a time (a stack buffer of 4 KiB): its input
/// is copied there, as the format's kernel writes to another slice than it reads.
const QUANT_CHUNK: usize = 1024;

/// The per-channel work a convolution or linear node applies to its output in an evaluation
/// forward with epilogues.
#[derive(Debug)]
pub(crate) struct Epilogue {
    /// The head's own output quantizer, run before the norm.
    head_quant: Option<QuantFormat>,
    /// The batch norm's parameter slots and epsilon, when the chain has one.
    norm: Option<(NormSlots, f32)>,
    /// The norm's output quantizer.
    norm_quant: Option<QuantFormat>,
    /// Whether a ReLU follows.
    relu: bool,
    /// The ReLU's output quantizer.
    relu_quant: Option<QuantFormat>,
    /// Per-channel `x * scale + shift` of the norm, refreshed by [`Epilogue::prepare`].
    scale: Vec<f32>,
    shift: Vec<f32>,
}

impl Epilogue {
    /// Computes the norm's coefficients from the current running statistics (once per forward).
    pub fn prepare(&mut self, params: &[ParamSlot]) {
        if let Some((slots, eps)) = self.norm {
            eval_coefficients(&slots, eps, params, &mut self.scale, &mut self.shift);
        }
    }

    /// Whether the chain quantizes anything.
    fn quantizes(&self) -> bool {
        self.head_quant.is_some() || self.norm_quant.is_some() || self.relu_quant.is_some()
    }

    /// Applies the chain to `y`, laid out `[images, channels, per_channel]`.
    pub fn apply_planes(&self, y: &mut [f32], per_channel: usize) {
        let c = self.scale.len().max(1);
        if self.quantizes() {
            return self.apply_steps(y, |y| {
                for image in y.chunks_exact_mut(c * per_channel) {
                    for (plane, (&a, &b)) in image.chunks_exact_mut(per_channel.max(1)).zip(self.scale.iter().zip(&self.shift)) {
                        plane.iter_mut().for_each(|v| *v = *v * a + b);
                    }
                }
            });
        }
        for image in y.chunks_exact_mut(c * per_channel) {
            for (ch, plane) in image.chunks_exact_mut(per_channel.max(1)).enumerate() {
                match self.norm {
                    Some(_) => {
                        let (a, b) = (self.scale[ch], self.shift[ch]);
                        if self.relu {
                            plane.iter_mut().for_each(|v| *v = relu(*v * a + b));
                        } else {
                            plane.iter_mut().for_each(|v| *v = *v * a + b);
                        }
                    }
                    None => plane.iter_mut().for_each(|v| *v = relu(*v)),
                }
            }
        }
    }

    /// Applies the chain to `y`, laid out `[rows, channels]` (a linear layer's output).
    pub fn apply_rows(&self, y: &mut [f32], channels: usize) {
        if self.quantizes() {
            return self.apply_steps(y, |y| {
                for row in y.chunks_exact_mut(channels.max(1)) {
                    row.iter_mut().zip(self.scale.iter().zip(&self.shift)).for_each(|(v, (&a, &b))| *v = *v * a + b);
                }
            });
        }
        match self.norm {
            Some(_) => {
                for row in y.chunks_exact_mut(channels.max(1)) {
                    let it = row.iter_mut().zip(self.scale.iter().zip(&self.shift));
                    if self.relu {
                        it.for_each(|(v, (&a, &b))| *v = relu(*v * a + b));
                    } else {
                        it.for_each(|(v, (&a, &b))| *v = *v * a + b);
                    }
                }
            }
            None => y.iter_mut().for_each(|v| *v = relu(*v)),
        }
    }

    /// Applies the chain one node at a time, as the unfused kernels do (each step a pass over
    /// `y`: a convolution hands over an image or a group of images while they are in the cache,
    /// a linear layer its whole product): the head's quantizer, the norm (`norm`, which knows
    /// the layout) and its quantizer, the ReLU and its quantizer.
    fn apply_steps(&self, y: &mut [f32], norm: impl Fn(&mut [f32])) {
        quantize_piecewise(self.head_quant.as_ref(), y);
        if self.norm.is_some() {
            norm(y);
            quantize_piecewise(self.norm_quant.as_ref(), y);
        }
        if self.relu {
            y.iter_mut().for_each(|v| *v = relu(*v));
            quantize_piecewise(self.relu_quant.as_ref(), y);
        }
    }
}

/// Quantizes `y` in place with `fmt`, a [`piecewise`] format, a chunk at a time.
fn quantize_piecewise(fmt: Option<&QuantFormat>, y: &mut [f32]) {
    let Some(fmt) = fmt else { return };
    let mut buf = [0.0f32; QUANT_CHUNK];
    // Piecewise formats draw nothing from it.
    let mut rng = Rng::new(0);
    for chunk in y.chunks_mut(QUANT_CHUNK) {
        let x = &mut buf[..chunk.len()];
        x.copy_from_slice(chunk);
        if let Err(e) = mase_quant::quantize(fmt, x, &[x.len()], chunk, &mut rng) {
            unreachable!("the fusion plan checked that this format quantizes any piece: {e}");
        }
    }
}

/// Whether quantizing the pieces of a tensor with `fmt` gives the bits of quantizing it whole:
/// each value quantized on its own, no random numbers, and any shape accepted.
fn piecewise(fmt: &QuantFormat) -> bool {
    mase_quant::reach(fmt) == Reach::Value && !mase_quant::draws_random(fmt) && mase_quant::validate_for_shape(fmt, &[1]).is_ok()
}

/// What a node's quantization leaves a chain to do: `Some(None)` nothing, `Some(Some(f))` an
/// output quantizer the chain runs ([`piecewise`]), `None` work a chain cannot take over (a
/// quantized input or parameter, or an output format that is not piecewise).
fn chain_quant(node: &Node) -> Option<Option<QuantFormat>> {
    let Some(q) = node.quant.as_ref().filter(|q| q.is_active()) else { return Some(None) };
    if q.data_in.iter().any(Option::is_some) || q.weight.is_some() || q.bias.is_some() {
        return None;
    }
    match &q.data_out {
        None => Some(None),
        Some(f) if piecewise(f) => Some(Some(f.clone())),
        Some(_) => None,
    }
}

/// A chain of nodes run by its head's kernel in an evaluation forward.
#[derive(Debug)]
pub(crate) struct Chain {
    pub epilogue: Epilogue,
    /// The chain's last node, whose buffer the head writes.
    pub last: usize,
}

/// What a plan fuses.
#[derive(Debug, Default)]
pub(crate) struct FusionPlan {
    /// Per node: the chain it heads in an evaluation forward.
    pub heads: Vec<Option<Chain>>,
    /// Per node: whether it lies inside a chain after its head (skipped when fused).
    pub inside: Vec<bool>,
    /// Per node: whether a fused forward leaves its value uncomputed (a chain's head and the
    /// members before its last).
    pub stale: Vec<bool>,
    /// Per batch-norm node: the ReLU whose mask its backward applies.
    pub norm_relu: Vec<Option<usize>>,
    /// Per node: whether it is a ReLU whose backward a batch norm runs.
    pub relu_in_norm: Vec<bool>,
}

/// Whether a node has an active quantization.
fn quantized(node: &Node) -> bool {
    node.quant.as_ref().is_some_and(|q| q.is_active())
}

/// The only reader of node `i`'s value, when it has exactly one and nothing else (the graph
/// output, an alias) reads its buffer.
fn only_reader(graph: &Graph, topo: &Topo, i: usize) -> Option<usize> {
    let users = graph.users(NodeId(i));
    match users.as_slice() {
        [u] if topo.storage[u.0] == u.0 && graph.node(*u).inputs.len() == 1 && i != topo.storage[topo.output] => Some(u.0),
        _ => None,
    }
}

/// The batch norm node's slots and epsilon, when `op` is one.
fn norm_of(op: &Op, slots: &[usize]) -> Option<(NormSlots, f32)> {
    let (Op::BatchNorm1d(n) | Op::BatchNorm2d(n)) = op else { return None };
    // A norm without its own parameter slots (none in today's graphs) is not fused.
    if slots.len() < if n.affine { 4 } else { 2 } {
        return None;
    }
    let s = if n.affine {
        NormSlots { weight: Some(slots[0]), bias: Some(slots[1]), running_mean: slots[2], running_var: slots[3] }
    } else {
        NormSlots { weight: None, bias: None, running_mean: slots[0], running_var: slots[1] }
    };
    Some((s, n.eps))
}

/// Plans the fusion of a graph for one batch shape (`shapes` by node).
pub(crate) fn plan(graph: &Graph, topo: &Topo, shapes: &[Vec<usize>]) -> FusionPlan {
    let n = graph.len();
    let mut f = FusionPlan {
        heads: (0..n).map(|_| None).collect(),
        inside: vec![false; n],
        stale: vec![false; n],
        norm_relu: vec![None; n],
        relu_in_norm: vec![false; n],
    };
    for (i, node) in graph.nodes().iter().enumerate() {
        // Backward: a batch norm read only by a ReLU, neither quantized.
        if norm_of(&node.op, &topo.slots[i]).is_some() && !quantized(node) {
            if let Some(k) = only_reader(graph, topo, i).filter(|&k| matches!(graph.node(NodeId(k)).op, Op::Relu)) {
                if !quantized(graph.node(NodeId(k))) {
                    f.norm_relu[i] = Some(k);
                    f.relu_in_norm[k] = true;
                }
            }
        }
        // Forward: a convolution or linear layer followed by a norm and/or a ReLU, or quantizing
        // its output.
        let rows = match &node.op {
            Op::Conv1d(_) | Op::Conv2d(_) => false,
            // A linear layer's channels are its last dimension, a norm's its second.
            Op::Linear { .. } => true,
            _ => continue,
        };
        let head_quant = match node.quant.as_ref().filter(|q| q.is_active()).map(|q| &q.data_out) {
            None | Some(None) => None,
            Some(Some(fmt)) if piecewise(fmt) => Some(fmt.clone()),
            Some(Some(_)) => continue,
        };
        let channels = shapes[i].get(1).copied().unwrap_or(0);
        // The norm: the layer's only reader, unless it quantizes more than its output.
        let norm = only_reader(graph, topo, i).and_then(|k| {
            let member = graph.node(NodeId(k));
            let spec = norm_of(&member.op, &topo.slots[k]).filter(|_| !rows || shapes[i].len() == 2)?;
            Some((k, spec, chain_quant(member)?))
        });
        // The ReLU: the norm's only reader, or the layer's own; likewise.
        let after = match &norm {
            Some((k, ..)) => only_reader(graph, topo, *k),
            None => only_reader(graph, topo, i),
        };
        let relu = after.and_then(|k| {
            let member = graph.node(NodeId(k));
            matches!(member.op, Op::Relu).then_some(())?;
            Some((k, chain_quant(member)?))
        });
        let last = relu.as_ref().map(|r| r.0).or(norm.as_ref().map(|n| n.0));
        if last.is_none() && head_quant.is_none() {
            continue;
        }
        // A chain of the head alone writes the head's own (quantized) value.
        let last = last.unwrap_or(i);
        f.stale[i] = last != i;
        for k in norm.iter().map(|n| n.0).chain(relu.iter().map(|r| r.0)) {
            f.inside[k] = true;
            f.stale[k] = k != last;
        }
        let (norm, norm_quant) = norm.map_or((None, None), |(_, spec, q)| (Some(spec), q));
        let (relu, relu_quant) = relu.map_or((false, None), |(_, q)| (true, q));
        let scale = vec![0.0; if norm.is_some() { channels } else { 0 }];
        f.heads[i] =
            Some(Chain { epilogue: Epilogue { head_quant, norm, norm_quant, relu, relu_quant, shift: scale.clone(), scale }, last });
    }
    f
}
