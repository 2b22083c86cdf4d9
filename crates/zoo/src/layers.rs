//! Small constructors for the ops the named models use, and the sequential-chain helper.

use crate::context::{ModelContext, PROBE_BATCH};
use crate::{Result, ZooError};
use mase_ir::{ConvSpec, Graph, NodeId, NormSpec, Op, PoolSpec};

/// `nn.Linear(i, o)` with a bias.
pub(crate) fn linear(in_features: usize, out_features: usize) -> Op {
    Op::Linear { in_features, out_features, bias: true }
}

/// `nn.BatchNorm1d(n)` with PyTorch's defaults.
pub(crate) fn bn1d(n: usize) -> Op {
    Op::BatchNorm1d(NormSpec::new(n))
}

/// `nn.BatchNorm2d(n, momentum=momentum)`.
pub(crate) fn bn2d(n: usize, momentum: f32) -> Op {
    Op::BatchNorm2d(NormSpec { momentum, ..NormSpec::new(n) })
}

/// `nn.Conv2d(i, o, k, padding=p)`.
pub(crate) fn conv2d(in_channels: usize, out_channels: usize, k: usize, padding: usize) -> Op {
    Op::Conv2d(ConvSpec::new(2, in_channels, out_channels, k, 1, padding))
}

/// `nn.MaxPool2d(k)`.
pub(crate) fn max_pool2d(k: usize) -> Op {
    Op::MaxPool2d(PoolSpec::new(2, k))
}

/// `nn.Flatten()`: flattens every dimension after the batch.
pub(crate) fn flatten() -> Op {
    Op::Flatten { start_dim: 1, end_dim: -1 }
}

/// Appends `ops` as the modules `<prefix>.<start>`, `<prefix>.<start + 1>`, ..., each fed by the
/// one before (the first by `input`), as an `nn.Sequential` traces; returns the last node.
pub(crate) fn chain(g: &mut Graph, prefix: &str, start: usize, input: NodeId, ops: Vec<Op>) -> NodeId {
    ops.into_iter().enumerate().fold(input, |prev, (i, op)| g.call_module(&format!("{prefix}.{}", start + i), op, &[prev]))
}

/// The graph `x -> seq_blocks(x) -> output` that every jsc model traces to.
pub(crate) fn seq_blocks_model(ops: Vec<Op>) -> Graph {
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let y = chain(&mut g, "seq_blocks", 0, x, ops);
    g.output(y);
    g
}

/// The shape of node `id` for a probe batch of `ctx`'s samples.
pub(crate) fn probe_shape(model: &str, g: &Graph, ctx: &ModelContext, id: NodeId) -> Result<Vec<usize>> {
    let shapes = g
        .infer_shapes(&[ctx.batch_shape(PROBE_BATCH)], &|_| None)
        .map_err(|source| ZooError::Graph { model: model.to_string(), source })?;
    Ok(shapes[id.0].shape().to_vec())
}

/// Checks a finished graph: its structure (`mase_ir::validate`) and that shapes propagate from a
/// probe batch to the output.
pub(crate) fn check_graph(model: &str, g: &Graph, ctx: &ModelContext) -> Result<()> {
    mase_ir::validate(g, None).map_err(|source| ZooError::Graph { model: model.to_string(), source })?;
    let out = g.output_node().map_err(|source| ZooError::Graph { model: model.to_string(), source })?;
    probe_shape(model, g, ctx, out).map(|_| ())
}
