//! Families of ops, for the sites that decide per family rather than per op, and one example op
//! of every variant, for the tests that check each string-keyed op table against [`Op`].

use crate::{ConvSpec, DimArg, IndexItem, NormSpec, Op, PoolSpec, ReduceSpec, SizeOp};

/// What kind of computation an op is. Sites that treat every op of a family alike (how many
/// inputs it takes, how its operations are counted, whether it mixes batch rows) match on this
/// instead of repeating the list of variants; sites where each op needs its own decision (shape
/// inference, the kernels, the exporter) still match on [`Op`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpFamily {
    /// Graph plumbing: `placeholder`, `output` and `get_attr` constants.
    Graph,
    /// `linear`: a weighted sum of the last dimension.
    Linear,
    /// `conv1d`, `conv2d`: weighted sums over a window.
    Conv,
    /// Normalisations: batch, layer and group norm.
    Norm,
    /// Element-wise functions of one tensor: activations, `sqrt`, `clamp`, `dropout`.
    Pointwise,
    /// `softmax`, `log_softmax` along one dimension.
    Softmax,
    /// Max and average pools over a window.
    Pool,
    /// Adaptive average and max pools.
    AdaptivePool,
    /// Element-wise functions of two tensors with broadcasting: `add`, `sub`, `mul`, `div`, `pow`,
    /// the comparisons `eq`, `ne`, `lt`, `le`, `gt`, `ge`; and of three, `where`.
    Binary,
    /// Matrix products: `matmul`, `einsum`.
    MatMul,
    /// `scaled_dot_product_attention`: two matrix products around a softmax.
    Attention,
    /// Table lookups: `embedding`.
    Embedding,
    /// Reductions over dimensions: `mean`, `sum`, `amax`.
    Reduce,
    /// Data movement without arithmetic: `flatten`, `view`, `transpose`, `permute`, `size`, `cat`,
    /// `pad`, `getitem`, `expand`, `repeat`, `stack`; and arithmetic on sizes (`size_arith`).
    Shape,
    /// A PyTorch module kept whole, which only PyTorch runs (`Op::Opaque`).
    Opaque,
}

impl Op {
    /// The op's family; a new variant must choose one here.
    pub fn family(&self) -> OpFamily {
        match self {
            Op::Input | Op::Output | Op::Constant => OpFamily::Graph,
            Op::Linear { .. } => OpFamily::Linear,
            Op::Conv1d(_) | Op::Conv2d(_) => OpFamily::Conv,
            Op::BatchNorm1d(_) | Op::BatchNorm2d(_) => OpFamily::Norm,
            Op::Relu
            | Op::Relu6
            | Op::LeakyRelu { .. }
            | Op::Sigmoid
            | Op::Tanh
            | Op::Selu
            | Op::Gelu { .. }
            | Op::Silu
            | Op::Hardswish
            | Op::Hardsigmoid
            | Op::Softplus { .. }
            | Op::Mish
            | Op::Sqrt
            | Op::Clip { .. }
            | Op::Dropout { .. }
            | Op::StochasticDepth { .. } => OpFamily::Pointwise,
            Op::Softmax { .. } | Op::LogSoftmax { .. } => OpFamily::Softmax,
            Op::MaxPool1d(_) | Op::MaxPool2d(_) | Op::AvgPool1d(_) | Op::AvgPool2d(_) => OpFamily::Pool,
            Op::AdaptiveAvgPool1d { .. } | Op::AdaptiveAvgPool2d { .. } => OpFamily::AdaptivePool,
            Op::Add | Op::Sub | Op::Mul | Op::Div | Op::Pow => OpFamily::Binary,
            Op::Eq | Op::Ne | Op::Lt | Op::Le | Op::Gt | Op::Ge | Op::Where => OpFamily::Binary,
            Op::MatMul => OpFamily::MatMul,
            Op::Mean(_) | Op::Sum(_) | Op::Amax(_) => OpFamily::Reduce,
            Op::Flatten { .. }
            | Op::Reshape { .. }
            | Op::Transpose { .. }
            | Op::Permute { .. }
            | Op::Size { .. }
            | Op::Concat { .. }
            | Op::Pad { .. } => OpFamily::Shape,
            Op::Opaque { .. } => OpFamily::Opaque,
            Op::LayerNorm { .. } | Op::GroupNorm { .. } => OpFamily::Norm,
            Op::AdaptiveMaxPool1d { .. } | Op::AdaptiveMaxPool2d { .. } => OpFamily::AdaptivePool,
            Op::Index { .. } | Op::Expand { .. } | Op::Repeat { .. } | Op::Stack { .. } | Op::SizeArith { .. } => OpFamily::Shape,
            Op::Einsum { .. } => OpFamily::MatMul,
            Op::ScaledDotProductAttention { .. } => OpFamily::Attention,
            Op::Embedding { .. } => OpFamily::Embedding,
        }
    }
}

/// Defines [`Op::examples`] from one `pattern => example` line per variant. The patterns form an
/// exhaustive `match`, so a new variant does not compile until it has a line (and so an example);
/// a unit test checks that each example is of its line's variant.
macro_rules! examples {
    ($($pattern:pat => $example:expr,)*) => {
        impl Op {
            /// One op of every variant, with small valid settings, in declaration order: what the
            /// tests walk to find every op in each table keyed by op names.
            pub fn examples() -> Vec<Op> {
                let ops = vec![$($example),*];
                // `listed` is never false; calling it keeps its exhaustive match compiled.
                debug_assert!(ops.iter().all(listed));
                ops
            }
        }

        /// Whether the op's variant has a line; the match fails to compile when one is missing.
        fn listed(op: &Op) -> bool {
            match op {
                $($pattern => true,)*
            }
        }

        /// Each example with whether it matches its own line's pattern.
        #[cfg(test)]
        fn examples_with_their_pattern() -> Vec<(Op, bool)> {
            vec![$({
                let op = $example;
                let ok = matches!(op, $pattern);
                (op, ok)
            }),*]
        }
    };
}

examples! {
    Op::Input => Op::Input,
    Op::Output => Op::Output,
    Op::Constant => Op::Constant,
    Op::Linear { .. } => Op::Linear { in_features: 4, out_features: 3, bias: true },
    Op::Conv1d(_) => Op::Conv1d(ConvSpec::new(1, 2, 3, 3, 1, 1)),
    Op::Conv2d(_) => Op::Conv2d(ConvSpec::new(2, 2, 3, 3, 1, 1)),
    Op::BatchNorm1d(_) => Op::BatchNorm1d(NormSpec::new(2)),
    Op::BatchNorm2d(_) => Op::BatchNorm2d(NormSpec::new(2)),
    Op::Relu => Op::Relu,
    Op::Relu6 => Op::Relu6,
    Op::LeakyRelu { .. } => Op::LeakyRelu { negative_slope: 0.01 },
    Op::Sigmoid => Op::Sigmoid,
    Op::Tanh => Op::Tanh,
    Op::Selu => Op::Selu,
    Op::Gelu { .. } => Op::Gelu { tanh: false },
    Op::Silu => Op::Silu,
    Op::Hardswish => Op::Hardswish,
    Op::Hardsigmoid => Op::Hardsigmoid,
    Op::Softplus { .. } => Op::Softplus { beta: 1.0, threshold: 20.0 },
    Op::Mish => Op::Mish,
    Op::Mean(_) => Op::Mean(ReduceSpec::new(&[-1], false)),
    Op::Sum(_) => Op::Sum(ReduceSpec::new(&[1], true)),
    Op::Amax(_) => Op::Amax(ReduceSpec::new(&[], false)),
    Op::Softmax { .. } => Op::Softmax { dim: -1 },
    Op::LogSoftmax { .. } => Op::LogSoftmax { dim: -1 },
    Op::MaxPool1d(_) => Op::MaxPool1d(PoolSpec::new(1, 2)),
    Op::MaxPool2d(_) => Op::MaxPool2d(PoolSpec::new(2, 2)),
    Op::AvgPool1d(_) => Op::AvgPool1d(PoolSpec::new(1, 2)),
    Op::AvgPool2d(_) => Op::AvgPool2d(PoolSpec::new(2, 2)),
    Op::AdaptiveAvgPool1d { .. } => Op::AdaptiveAvgPool1d { output_size: 1 },
    Op::AdaptiveAvgPool2d { .. } => Op::AdaptiveAvgPool2d { output_size: [1, 1] },
    Op::Flatten { .. } => Op::Flatten { start_dim: 1, end_dim: -1 },
    Op::Reshape { .. } => Op::Reshape { shape: vec![DimArg::Input(1), DimArg::Const(-1)] },
    Op::Transpose { .. } => Op::Transpose { dim0: 1, dim1: 2 },
    Op::Permute { .. } => Op::Permute { dims: vec![0, 2, 1] },
    Op::Size { .. } => Op::Size { dim: 0 },
    Op::Add => Op::Add,
    Op::Sub => Op::Sub,
    Op::Mul => Op::Mul,
    Op::MatMul => Op::MatMul,
    Op::Dropout { .. } => Op::Dropout { p: 0.5 },
    Op::StochasticDepth { .. } => Op::StochasticDepth { p: 0.25, mode: crate::op::DepthMode::Row },
    Op::Div => Op::Div,
    Op::Pow => Op::Pow,
    Op::Sqrt => Op::Sqrt,
    Op::Clip { .. } => Op::Clip { min: -1.0, max: 1.0 },
    Op::Concat { .. } => Op::Concat { dim: 1 },
    Op::Pad { .. } => Op::Pad { begin: vec![1], end: vec![1], value: 0.0 },
    Op::Opaque { .. } => Op::Opaque { class: "MyBlock".into(), sample_shape: Some(vec![4]) },
    Op::LayerNorm { .. } => Op::LayerNorm { normalized_shape: vec![4], eps: 1e-5, elementwise_affine: true, bias: true },
    Op::GroupNorm { .. } => Op::GroupNorm { num_groups: 2, num_channels: 4, eps: 1e-5, affine: true, bias: true },
    Op::AdaptiveMaxPool1d { .. } => Op::AdaptiveMaxPool1d { output_size: 1 },
    Op::AdaptiveMaxPool2d { .. } => Op::AdaptiveMaxPool2d { output_size: [1, 1] },
    Op::Index { .. } => Op::Index { items: vec![IndexItem::full(), IndexItem::Select(0)] },
    Op::Expand { .. } => Op::Expand { shape: vec![DimArg::Const(2), DimArg::Const(-1)] },
    Op::Repeat { .. } => Op::Repeat { repeats: vec![1, 2] },
    Op::Stack { .. } => Op::Stack { dim: 1 },
    Op::SizeArith { .. } => Op::SizeArith { arith: SizeOp::FloorDiv, args: [DimArg::Input(0), DimArg::Const(2)] },
    Op::Einsum { .. } => Op::Einsum { equation: "bqd,bkd->bqk".into() },
    Op::ScaledDotProductAttention { .. } => Op::ScaledDotProductAttention { mask: None, is_causal: false, scale: None },
    Op::Embedding { .. } => Op::Embedding { num_embeddings: 10, embedding_dim: 4, padding_idx: None, functional: false },
    Op::Eq => Op::Eq,
    Op::Ne => Op::Ne,
    Op::Lt => Op::Lt,
    Op::Le => Op::Le,
    Op::Gt => Op::Gt,
    Op::Ge => Op::Ge,
    Op::Where => Op::Where,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;
    use std::mem::discriminant;

    #[test]
    fn every_example_is_of_its_own_variant_and_each_variant_comes_once() {
        let pairs = examples_with_their_pattern();
        for (op, ok) in &pairs {
            assert!(ok, "the example {op:?} does not match the pattern of its line");
        }
        let distinct: HashSet<_> = pairs.iter().map(|(op, _)| discriminant(op)).collect();
        assert_eq!(distinct.len(), pairs.len(), "a variant has two lines");
        assert_eq!(Op::examples(), pairs.into_iter().map(|(op, _)| op).collect::<Vec<_>>());
    }

    #[test]
    fn examples_have_valid_settings() {
        for op in Op::examples() {
            assert_eq!(op.check_spec(), Ok(()), "{op:?}");
        }
    }

    #[test]
    fn families_hold_the_ops_they_name() {
        let names = |f: OpFamily| Op::examples().iter().filter(|op| op.family() == f).map(|op| op.mase_op()).collect::<Vec<_>>().join(" ");
        let table = [
            (OpFamily::Graph, "placeholder output constant"),
            (OpFamily::Linear, "linear"),
            (OpFamily::Conv, "conv1d conv2d"),
            (OpFamily::Norm, "batch_norm1d batch_norm2d layer_norm group_norm"),
            (
                OpFamily::Pointwise,
                "relu relu6 leaky_relu sigmoid tanh selu gelu silu hardswish hardsigmoid softplus mish dropout stochastic_depth sqrt clamp",
            ),
            (OpFamily::Softmax, "softmax log_softmax"),
            (OpFamily::Pool, "max_pool1d max_pool2d avg_pool1d avg_pool2d"),
            (OpFamily::AdaptivePool, "adaptive_avg_pool1d adaptive_avg_pool2d adaptive_max_pool1d adaptive_max_pool2d"),
            (OpFamily::Binary, "add sub mul div pow eq ne lt le gt ge where"),
            (OpFamily::MatMul, "matmul einsum"),
            (OpFamily::Attention, "scaled_dot_product_attention"),
            (OpFamily::Embedding, "embedding"),
            (OpFamily::Reduce, "mean sum amax"),
            (OpFamily::Shape, "flatten view transpose permute size cat pad getitem expand repeat stack size_arith"),
        ];
        for (family, want) in table {
            assert_eq!(names(family), want, "{family:?}");
        }
    }
}
