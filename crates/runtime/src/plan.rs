//! A plan: the graph compiled for one input shape. It owns one buffer per value (and per value
//! gradient once training starts) and one kernel per node, so steps allocate nothing.

use crate::executor::ConvAlgo;
use crate::kernels::activation::{ActKind, Activation};
use crate::kernels::attention::{Attention, Einsum, Embedding};
use crate::kernels::conv::{Conv, ConvGeom};
use crate::kernels::dropout::{Dropout, StochasticDepth};
use crate::kernels::elementwise::{BinOp, Binary};
use crate::kernels::indexing::Gather;
use crate::kernels::layer_norm::{Affine, RowLayout, RowNorm};
use crate::kernels::linear::Linear;
use crate::kernels::matmul::MatMul;
use crate::kernels::norm::{BatchNorm, NormSlots};
use crate::kernels::pool::{AdaptiveAvgPool, AdaptiveMaxPool, AvgPool, MaxPool, PoolGeom};
use crate::kernels::reduce::{Reduce, ReduceKind};
use crate::kernels::select::Where;
use crate::kernels::shape_ops::{Concat, Constant, Pad, Permute};
use crate::kernels::softmax::Softmax;
use crate::kernels::NodeKernel;
use crate::slots::ParamSlot;
use crate::topo::{is_alias, Topo};
use crate::{Result, RuntimeError};
use mase_ir::{Graph, Node, Op, ValueInfo};

/// The graph compiled for one input shape.
pub(crate) struct Plan {
    /// Shape of the first input batch.
    pub x_shape: Vec<usize>,
    /// Shape of every input batch, in placeholder order (the plan's key).
    pub in_shapes: Vec<Vec<usize>>,
    /// Shape of every node's value (`[]` for integers).
    pub shapes: Vec<Vec<usize>>,
    /// Value buffers by storage; empty for aliases and integers.
    pub vals: Vec<Vec<f32>>,
    /// Gradient buffers by storage, allocated at the first training step.
    pub grads: Vec<Vec<f32>>,
    pub kerns: Vec<NodeKernel>,
    /// Whether the last forward on this plan ran in training mode (backward needs it).
    pub trained: bool,
    /// Why this shape cannot run in training mode, if it cannot.
    pub train_blocker: Option<RuntimeError>,
    /// Storage each node's kernel reads its inputs from: the producers' buffers, or the node's
    /// quantized copies of them (`crate::quant`). Gradients still go to the producers' buffers.
    pub ins: Vec<Vec<usize>>,
    /// Data-input and output quantization by node.
    pub quant: Vec<crate::quant::PlanQuant>,
    /// The fused epilogues and the batch norms that run their ReLU's backward (`crate::fuse`).
    pub fusion: crate::fuse::FusionPlan,
    /// Whether the last forward on this plan fused its chains (then the values inside the
    /// chains were not computed).
    pub fused: bool,
}

/// Resolves a possibly negative dimension against a rank (shape inference has checked it).
fn dim(d: i64, rank: usize) -> usize {
    if d < 0 {
        (d + rank as i64).max(0) as usize
    } else {
        d as usize
    }
}

impl Plan {
    /// Compiles the graph for inputs of `in_shapes` (one per placeholder); `threads` is the size
    /// of the executor's pool, which sets how many per-thread workspaces batch-parallel kernels get.
    pub fn build(
        graph: &Graph,
        topo: &Topo,
        params: &[ParamSlot],
        in_shapes: &[Vec<usize>],
        threads: usize,
        algo: ConvAlgo,
    ) -> Result<Plan> {
        let constant_shape = |name: &str| params.iter().find(|s| s.name == name).map(|s| s.shape.clone());
        let infos = graph.infer_shapes(in_shapes, &constant_shape)?;
        let shapes: Vec<Vec<usize>> = infos.iter().map(|v| v.shape().to_vec()).collect();
        let mut vals = Vec::with_capacity(graph.len());
        let mut kerns = Vec::with_capacity(graph.len());
        let mut train_blocker = None;
        for (i, node) in graph.nodes().iter().enumerate() {
            let owns = !is_alias(&node.op) && matches!(infos[i], ValueInfo::Tensor(_));
            vals.push(if owns { vec![0.0; shapes[i].iter().product()] } else { Vec::new() });
            let in_shapes: Vec<&[usize]> = node.inputs.iter().map(|u| shapes[u.0].as_slice()).collect();
            if let (Op::BatchNorm1d(_) | Op::BatchNorm2d(_), Some(x)) = (&node.op, in_shapes.first()) {
                if x.iter().enumerate().filter(|&(d, _)| d != 1).map(|(_, &v)| v).product::<usize>() <= 1 && train_blocker.is_none() {
                    train_blocker = Some(RuntimeError::BatchNormSingleValue {
                        node: node.name.clone(),
                        op: node.op.mase_op().into(),
                        shape: x.to_vec(),
                    });
                }
            }
            if let Op::Opaque { class, .. } = &node.op {
                return Err(RuntimeError::Opaque { node: node.name.clone(), class: class.clone() });
            }
            kerns.push(compile(node, &in_shapes, &shapes[i], &topo.slots[i], threads, algo));
        }
        let (ins, quant) = crate::quant::plan_quant(graph, topo, &shapes, &mut vals)?;
        let fusion = crate::fuse::plan(graph, topo, &shapes);
        Ok(Plan {
            x_shape: in_shapes.first().cloned().unwrap_or_default(),
            in_shapes: in_shapes.to_vec(),
            shapes,
            vals,
            grads: Vec::new(),
            kerns,
            trained: false,
            train_blocker,
            ins,
            quant,
            fusion,
            fused: false,
        })
    }

    /// Allocates the gradient buffers (once per plan).
    pub fn ensure_grads(&mut self) {
        if self.grads.is_empty() {
            // Buffers past the graph's nodes are quantized copies, whose gradients go to the
            // originals (straight-through), so they get none.
            let n = self.kerns.len();
            self.grads = self.vals.iter().enumerate().map(|(i, v)| if i < n { vec![0.0; v.len()] } else { Vec::new() }).collect();
        }
    }
}

/// The kernel of one node for concrete shapes. Shape inference has already checked every shape,
/// so this only reads sizes.
fn compile(node: &Node, ins: &[&[usize]], out: &[usize], slots: &[usize], threads: usize, algo: ConvAlgo) -> NodeKernel {
    let x = ins.first().copied().unwrap_or(&[]);
    let numel = |s: &[usize]| s.iter().product::<usize>();
    let act = |k| NodeKernel::Act(Activation::new(k));
    let pool_geom = |p| PoolGeom::new(p, x, out);
    match &node.op {
        Op::Input | Op::Output | Op::Flatten { .. } | Op::Reshape { .. } | Op::Size { .. } | Op::SizeArith { .. } => NodeKernel::Nop,
        Op::Constant => NodeKernel::Constant(Constant::new(slots[0])),
        Op::Linear { in_features, out_features, bias } => {
            NodeKernel::Linear(Linear::new(numel(x), *in_features, *out_features, slots[0], bias.then(|| slots[1])))
        }
        Op::Conv1d(c) | Op::Conv2d(c) => {
            NodeKernel::Conv(Conv::new(ConvGeom::new(c, x, out), slots[0], c.bias.then(|| slots[1]), threads, algo))
        }
        Op::BatchNorm1d(n) | Op::BatchNorm2d(n) => {
            let s = if n.affine {
                NormSlots { weight: Some(slots[0]), bias: Some(slots[1]), running_mean: slots[2], running_var: slots[3] }
            } else {
                NormSlots { weight: None, bias: None, running_mean: slots[0], running_var: slots[1] }
            };
            NodeKernel::BatchNorm(BatchNorm::new(n, x, s))
        }
        Op::Relu => act(ActKind::Relu),
        Op::Relu6 => act(ActKind::Relu6),
        Op::LeakyRelu { negative_slope } => act(ActKind::LeakyRelu(*negative_slope)),
        Op::Sigmoid => act(ActKind::Sigmoid),
        Op::Tanh => act(ActKind::Tanh),
        Op::Selu => act(ActKind::Selu),
        Op::Gelu { tanh } => act(if *tanh { ActKind::GeluTanh } else { ActKind::Gelu }),
        Op::Silu => act(ActKind::Silu),
        Op::Hardswish => act(ActKind::Hardswish),
        Op::Hardsigmoid => act(ActKind::Hardsigmoid),
        Op::Softplus { beta, threshold } => act(ActKind::Softplus { beta: *beta, threshold: *threshold }),
        Op::Mish => act(ActKind::Mish),
        Op::Mean(r) => NodeKernel::Reduce(Reduce::new(x, r, ReduceKind::Mean)),
        Op::Sum(r) => NodeKernel::Reduce(Reduce::new(x, r, ReduceKind::Sum)),
        Op::Amax(r) => NodeKernel::Reduce(Reduce::new(x, r, ReduceKind::Amax)),
        Op::Softmax { dim: d } => NodeKernel::Softmax(Softmax::new(x, dim(*d, x.len()), false)),
        Op::LogSoftmax { dim: d } => NodeKernel::Softmax(Softmax::new(x, dim(*d, x.len()), true)),
        Op::MaxPool1d(p) | Op::MaxPool2d(p) => NodeKernel::MaxPool(MaxPool { g: pool_geom(p) }),
        Op::AvgPool1d(p) | Op::AvgPool2d(p) => NodeKernel::AvgPool(AvgPool { g: pool_geom(p) }),
        Op::AdaptiveAvgPool1d { .. } | Op::AdaptiveAvgPool2d { .. } => NodeKernel::AdaptiveAvgPool(AdaptiveAvgPool::new(x, out)),
        Op::Transpose { dim0, dim1 } => {
            let mut perm: Vec<usize> = (0..x.len()).collect();
            perm.swap(dim(*dim0, x.len()), dim(*dim1, x.len()));
            NodeKernel::Permute(Permute::new(x, &perm))
        }
        Op::Permute { dims } => NodeKernel::Permute(Permute::new(x, &dims.iter().map(|&d| dim(d, x.len())).collect::<Vec<_>>())),
        Op::Add => NodeKernel::Binary(Binary::new(BinOp::Add, ins[0], ins[1], out)),
        Op::Sub => NodeKernel::Binary(Binary::new(BinOp::Sub, ins[0], ins[1], out)),
        Op::Mul => NodeKernel::Binary(Binary::new(BinOp::Mul, ins[0], ins[1], out)),
        Op::MatMul => NodeKernel::MatMul(MatMul::new(ins[0], ins[1])),
        // `p = 0` is an alias of its input (`topo::is_alias`).
        Op::Dropout { p } if *p == 0.0 => NodeKernel::Nop,
        Op::Dropout { p } => NodeKernel::Dropout(Dropout::new(*p, numel(out))),
        Op::StochasticDepth { p, mode } => NodeKernel::StochasticDepth(StochasticDepth::new(*p, *mode, out)),
        Op::Div => NodeKernel::Binary(Binary::new(BinOp::Div, ins[0], ins[1], out)),
        Op::Pow => NodeKernel::Binary(Binary::new(BinOp::Pow, ins[0], ins[1], out)),
        Op::Sqrt => act(ActKind::Sqrt),
        Op::Clip { min, max } => act(ActKind::Clip(*min, *max)),
        Op::Concat { dim: d } => NodeKernel::Concat(Concat::new(ins, out, dim(*d, out.len()))),
        Op::Pad { begin, value, .. } => NodeKernel::Pad(Pad::new(x, out, begin, *value)),
        // Refused by `Plan::build` before compiling.
        Op::Opaque { .. } => NodeKernel::Nop,
        Op::LayerNorm { normalized_shape, eps, .. } => {
            let (w, b) = affine_sources(ins.len(), slots);
            NodeKernel::RowNorm(RowNorm::new(RowLayout::layer(x, numel(normalized_shape)), *eps, w, b))
        }
        Op::AdaptiveMaxPool1d { .. } | Op::AdaptiveMaxPool2d { .. } => {
            NodeKernel::AdaptiveMaxPool(AdaptiveMaxPool { w: AdaptiveAvgPool::new(x, out) })
        }
        Op::GroupNorm { num_groups, eps, .. } => {
            let (w, b) = affine_sources(ins.len(), slots);
            NodeKernel::RowNorm(RowNorm::new(RowLayout::group(x, *num_groups), *eps, w, b))
        }
        // Shape inference resolved the same items for this shape before the plan compiles.
        Op::Index { items } => mase_ir::resolve_index(items, x).map_or(NodeKernel::Nop, |ix| NodeKernel::Gather(Gather::index(x, &ix))),
        Op::Expand { .. } => NodeKernel::Gather(Gather::expand(x, out)),
        Op::Repeat { repeats } => NodeKernel::Gather(Gather::repeat(x, repeats)),
        Op::Stack { dim: d } => {
            // A stack is a concatenation of the inputs, each with a dimension of 1 at `dim`.
            let d = dim(*d, out.len());
            let unsqueezed: Vec<Vec<usize>> = ins.iter().map(|s| [&s[..d], &[1], &s[d..]].concat()).collect();
            NodeKernel::Concat(Concat::new(&unsqueezed.iter().map(Vec::as_slice).collect::<Vec<_>>(), out, d))
        }
        Op::Einsum { equation } => NodeKernel::Einsum(Einsum::new(equation, ins[0], ins[1], out)),
        Op::ScaledDotProductAttention { mask, is_causal, scale } => NodeKernel::Attention(Attention::new(ins, *mask, *is_causal, *scale)),
        Op::Embedding { num_embeddings, embedding_dim, padding_idx, functional } => {
            NodeKernel::Embedding(Embedding::new(*num_embeddings, *embedding_dim, *padding_idx, (!functional).then(|| slots[0])))
        }
        Op::Eq => NodeKernel::Binary(Binary::new(BinOp::Eq, ins[0], ins[1], out)),
        Op::Ne => NodeKernel::Binary(Binary::new(BinOp::Ne, ins[0], ins[1], out)),
        Op::Lt => NodeKernel::Binary(Binary::new(BinOp::Lt, ins[0], ins[1], out)),
        Op::Le => NodeKernel::Binary(Binary::new(BinOp::Le, ins[0], ins[1], out)),
        Op::Gt => NodeKernel::Binary(Binary::new(BinOp::Gt, ins[0], ins[1], out)),
        Op::Ge => NodeKernel::Binary(Binary::new(BinOp::Ge, ins[0], ins[1], out)),
        Op::Where => NodeKernel::Where(Where::new(ins, out)),
    }
}

/// Where a layer or group norm reads its weight and bias: the module's parameter slots (in
/// `param_specs` order: weight, then bias), or a function call's inputs 1 and 2.
fn affine_sources(inputs: usize, slots: &[usize]) -> (Affine, Affine) {
    let owned = |k: usize| slots.get(k).map_or(Affine::Absent, |&s| Affine::Slot(s));
    if !slots.is_empty() {
        return (owned(0), owned(1));
    }
    let passed = |k: usize| if k < inputs { Affine::Input(k) } else { Affine::Absent };
    (passed(1), passed(2))
}
