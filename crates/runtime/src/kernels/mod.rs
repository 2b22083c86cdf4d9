//! Forward and backward kernels, one module per op family.
//!
//! A kernel is a struct holding the geometry of one node for one batch shape (sizes, strides,
//! parameter slot indices) and the workspaces it keeps between forward and backward (batch
//! statistics, pooling argmax, dropout masks, im2col columns). The plan builds one per node;
//! [`NodeKernel`] dispatches to them with one `match` per node per step.

pub(crate) mod activation;
pub(crate) mod attention;
pub(crate) mod conv;
pub(crate) mod dropout;
pub(crate) mod elementwise;
pub(crate) mod gelu;
pub(crate) mod indexing;
pub(crate) mod layer_norm;
pub(crate) mod linear;
pub(crate) mod matmul;
pub(crate) mod norm;
pub(crate) mod pool;
pub(crate) mod reduce;
pub(crate) mod select;
pub(crate) mod shape_ops;
pub(crate) mod softmax;
pub(crate) mod vector;
pub(crate) mod winograd;

use crate::slots::ParamSlot;
use mase_ir::Rng;
use rayon::ThreadPool;

/// Whether a backward kernel overwrites its gradient buffer or adds to it. The plan picks `Write`
/// for the first contribution to a buffer in backward order and `Add` for the others, so no
/// buffer needs zeroing before a step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Accum {
    Write,
    Add,
}

impl Accum {
    /// The `beta` of a GEMM that writes (`0`) or accumulates (`1`).
    pub fn beta(self) -> f32 {
        match self {
            Accum::Write => 0.0,
            Accum::Add => 1.0,
        }
    }

    /// Stores `v` into `d`.
    #[inline(always)]
    pub fn put(self, d: &mut f32, v: f32) {
        match self {
            Accum::Write => *d = v,
            Accum::Add => *d += v,
        }
    }

    /// Prepares a buffer that a kernel will only add into (scatters, reductions): zeroes it
    /// when this contribution is the first.
    pub fn prepare(self, d: &mut [f32]) {
        if self == Accum::Write {
            d.fill(0.0);
        }
    }
}

/// `dst[i] (=|+=) f(i)` for every index, with the write/add decision taken outside the loop.
#[inline(always)]
pub(crate) fn store_each(acc: Accum, dst: &mut [f32], f: impl Fn(usize) -> f32) {
    match acc {
        Accum::Write => dst.iter_mut().enumerate().for_each(|(i, d)| *d = f(i)),
        Accum::Add => dst.iter_mut().enumerate().for_each(|(i, d)| *d += f(i)),
    }
}

/// `dst[i] (=|+=) f(a[i], b[i])`, written with iterators so that the loop vectorises.
#[inline(always)]
pub(crate) fn store_zip(acc: Accum, dst: &mut [f32], a: &[f32], b: &[f32], f: impl Fn(f32, f32) -> f32) {
    let it = dst.iter_mut().zip(a.iter().zip(b));
    match acc {
        Accum::Write => it.for_each(|(d, (&x, &y))| *d = f(x, y)),
        Accum::Add => it.for_each(|(d, (&x, &y))| *d += f(x, y)),
    }
}

/// What a forward kernel sees besides its output buffer.
pub(crate) struct Fwd<'a> {
    /// Every value buffer of the plan, indexed by storage (the output's own buffer is lent out).
    pub vals: &'a [Vec<f32>],
    /// Storage index of each input of the node.
    pub ins: &'a [usize],
    pub params: &'a mut [ParamSlot],
    pub train: bool,
    pub pool: Option<&'a ThreadPool>,
    pub rng: &'a mut Rng,
    /// The fused epilogue a convolution or linear kernel applies to its output (`crate::fuse`),
    /// in an evaluation forward that fuses; the output buffer is then the chain's last node's.
    pub epilogue: Option<&'a mut crate::fuse::Epilogue>,
    /// The executor's parameter generation, bumped whenever a parameter or buffer changes; a
    /// kernel may keep what it derives from its parameters while this stays the same. `None`
    /// where the caller does not track it (derive again every time).
    pub params_generation: Option<u64>,
}

impl Fwd<'_> {
    /// The value of input `i`.
    pub fn input(&self, i: usize) -> &[f32] {
        &self.vals[self.ins[i]]
    }
}

/// What a backward kernel sees besides the gradient buffer it writes.
pub(crate) struct Bwd<'a> {
    pub vals: &'a [Vec<f32>],
    pub ins: &'a [usize],
    /// The node's output value and the gradient of the loss with respect to it.
    pub y: &'a [f32],
    pub dy: &'a [f32],
    pub params: &'a mut [ParamSlot],
    /// How to store parameter gradients, or `None` when the node's parameters need none.
    pub param_acc: Option<Accum>,
    pub pool: Option<&'a ThreadPool>,
    /// For a batch norm whose ReLU's backward is fused in (`crate::fuse`): the ReLU's output,
    /// whose mask applies to `dy` (then the ReLU's output gradient).
    pub relu_out: Option<&'a [f32]>,
}

impl Bwd<'_> {
    /// The value of input `i`.
    pub fn input(&self, i: usize) -> &[f32] {
        &self.vals[self.ins[i]]
    }
}

/// The forward and backward halves of an op.
pub(crate) trait Kernel {
    /// Computes the output `y` from the inputs.
    fn forward(&mut self, cx: &mut Fwd<'_>, y: &mut [f32]);

    /// Runs first in backward: writes parameter gradients (when `cx.param_acc` asks) and any
    /// per-node reductions that the input gradients reuse.
    fn backward_params(&mut self, _cx: &mut Bwd<'_>) {}

    /// Stores the gradient of input `i` into `dx`.
    fn backward_input(&mut self, cx: &Bwd<'_>, i: usize, dx: &mut [f32], acc: Accum);
}

macro_rules! kernels {
    ($($variant:ident($ty:ty)),* $(,)?) => {
        /// The kernel of one node. `Nop` is for nodes whose value is another node's buffer
        /// (output, flatten, view) or a shape integer (size), and for the graph input.
        pub(crate) enum NodeKernel {
            Nop,
            $($variant($ty)),*
        }

        impl NodeKernel {
            pub fn forward(&mut self, cx: &mut Fwd<'_>, y: &mut [f32]) {
                match self {
                    NodeKernel::Nop => {}
                    $(NodeKernel::$variant(k) => k.forward(cx, y)),*
                }
            }

            pub fn backward_params(&mut self, cx: &mut Bwd<'_>) {
                match self {
                    NodeKernel::Nop => {}
                    $(NodeKernel::$variant(k) => k.backward_params(cx)),*
                }
            }

            pub fn backward_input(&mut self, cx: &Bwd<'_>, i: usize, dx: &mut [f32], acc: Accum) {
                match self {
                    NodeKernel::Nop => {}
                    $(NodeKernel::$variant(k) => k.backward_input(cx, i, dx, acc)),*
                }
            }
        }
    };
}

kernels! {
    Constant(shape_ops::Constant),
    Linear(linear::Linear),
    Conv(conv::Conv),
    BatchNorm(norm::BatchNorm),
    Act(activation::Activation),
    Softmax(softmax::Softmax),
    MaxPool(pool::MaxPool),
    AvgPool(pool::AvgPool),
    AdaptiveAvgPool(pool::AdaptiveAvgPool),
    Permute(shape_ops::Permute),
    Binary(elementwise::Binary),
    MatMul(matmul::MatMul),
    Einsum(attention::Einsum),
    Attention(attention::Attention),
    Embedding(attention::Embedding),
    Dropout(dropout::Dropout),
    StochasticDepth(dropout::StochasticDepth),
    Concat(shape_ops::Concat),
    Pad(shape_ops::Pad),
    Reduce(reduce::Reduce),
    RowNorm(layer_norm::RowNorm),
    AdaptiveMaxPool(pool::AdaptiveMaxPool),
    Gather(indexing::Gather),
    Where(select::Where),
}

impl NodeKernel {
    /// Takes what made the last forward run of this kernel invalid (an embedding id that is not
    /// a row of its table), which stops the run.
    pub fn take_bad_id(&mut self) -> Option<attention::BadId> {
        match self {
            NodeKernel::Embedding(k) => k.bad.take(),
            // Other kernels accept every value (non-finite ones propagate).
            _ => None,
        }
    }
}
