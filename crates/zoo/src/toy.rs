//! MASE's toy models (doc/mase-semantics.md#models-toy), which flatten each sample with
//! `x.view(x.size(0), -1)` before their linear layers.

use crate::context::ModelContext;
use crate::layers::{chain, linear};
use crate::Result;
use mase_ir::{DimArg, Graph, NodeId, Op};

/// Appends `x.view(x.size(0), -1)`: a `size` node (dim 0) and a `view` node fed by `x` and it.
fn flatten_view(g: &mut Graph, x: NodeId) -> NodeId {
    let size = g.call_method("size", Op::Size { dim: 0 }, &[x]);
    g.call_method("view", Op::Reshape { shape: vec![DimArg::Input(1), DimArg::Const(-1)] }, &[x, size])
}

/// `ToyNet`: `seq_blocks(x.view(x.size(0), -1))` with Linear(in, 8), ReLU, Linear(8, 8), ReLU,
/// Linear(8, c). 130 trainable parameters on toy_tiny (in = 4, c = 2).
pub(crate) fn toy(name: &str, ctx: &ModelContext) -> Result<Graph> {
    ctx.check_basic(name)?;
    let (f, c) = (ctx.sample_numel(), ctx.num_classes);
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let v = flatten_view(&mut g, x);
    let y = chain(&mut g, "seq_blocks", 0, v, vec![linear(f, 8), Op::Relu, linear(8, 8), Op::Relu, linear(8, c)]);
    g.output(y);
    Ok(g)
}

/// `ToyTiny` as MASE traces it: view, `l1 = Linear(in, 2)`, `relu_1`, and the output is
/// `relu_1`'s value, so the model has 2 outputs whatever the class count. MASE also registers
/// `l2 = Linear(2, c)` and `relu_2`, which its forward never calls; fx drops unused modules, so
/// they are not built here, and the graph holds 10 trainable parameters on toy_tiny where
/// PyTorch's module count says 16.
pub(crate) fn toy_tiny(name: &str, ctx: &ModelContext) -> Result<Graph> {
    ctx.check_basic(name)?;
    let f = ctx.sample_numel();
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let v = flatten_view(&mut g, x);
    let l1 = g.call_module("l1", linear(f, 2), &[v]);
    let r = g.call_module("relu_1", Op::Relu, &[l1]);
    g.output(r);
    Ok(g)
}
