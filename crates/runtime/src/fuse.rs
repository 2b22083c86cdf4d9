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
//! same bits (`tests/fused.rs`). Quantization blocks fusion: a chain never extends past a node
//! with an active quantization, except that the output quantizer of a chain's last node runs on
//! the fused result, as it would on the unfused one.

use crate::kernels::activation::relu;
use crate::kernels::norm::{eval_coefficients, NormSlots};
use crate::slots::ParamSlot;
use crate::topo::Topo;
use mase_ir::{Graph, Node, NodeId, Op};

/// The per-channel work a convolution or linear node applies to its output in an evaluation
/// forward with epilogues.
#[derive(Debug)]
pub(crate) struct Epilogue {
    /// The batch norm's parameter slots and epsilon, when the chain has one.
    norm: Option<(NormSlots, f32)>,
    /// Whether a ReLU follows.
    relu: bool,
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

    /// Applies the chain to `y`, laid out `[images, channels, per_channel]`.
    pub fn apply_planes(&self, y: &mut [f32], per_channel: usize) {
        let c = self.scale.len().max(1);
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
        // Forward: a convolution or linear layer followed by a norm and/or a ReLU.
        let rows = match &node.op {
            Op::Conv1d(_) | Op::Conv2d(_) => false,
            // A linear layer's channels are its last dimension, a norm's its second.
            Op::Linear { .. } => true,
            _ => continue,
        };
        if node.quant.as_ref().is_some_and(|q| q.is_active() && q.data_out.is_some()) {
            continue;
        }
        let Some(first) = only_reader(graph, topo, i) else { continue };
        let channels = shapes[i].get(1).copied().unwrap_or(0);
        let first_node = graph.node(NodeId(first));
        let norm = norm_of(&first_node.op, &topo.slots[first]).filter(|_| !quantized(first_node) && (!rows || shapes[i].len() == 2));
        // The candidate ReLU: the norm's only reader, or the layer's own.
        let after = if norm.is_some() { only_reader(graph, topo, first) } else { Some(first) };
        let relu = after.filter(|&k| matches!(graph.node(NodeId(k)).op, Op::Relu) && !quantized(graph.node(NodeId(k))));
        let members: Vec<usize> = norm.map(|_| first).into_iter().chain(relu).collect();
        let Some(&last) = members.last() else { continue };
        f.stale[i] = true;
        for &k in &members {
            f.inside[k] = true;
            f.stale[k] = k != last;
        }
        let relu = relu.is_some();
        let scale = vec![0.0; if norm.is_some() { channels } else { 0 }];
        f.heads[i] = Some(Chain { epilogue: Epilogue { norm, relu, shift: scale.clone(), scale }, last });
    }
    f
}
