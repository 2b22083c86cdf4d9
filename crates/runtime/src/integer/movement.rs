//! Ops that only move, select or bound values: run on integer results, they give codes of the
//! same format, as hardware would route them (wires, multiplexers and comparators, no
//! arithmetic). Their float kernels compute exactly these values from the dequantized codes, so
//! the executor runs the float kernel and reads the codes back from its result.
//!
//! Exactness: a code `c` with `f` fraction bits is written as the `f32` `c * 2^-f`, which is exact
//! while `|c| < 2^24` (the inputs are checked); moving, selecting, comparing and clamping to
//! bounds that are whole codes create no new values, and `y * 2^F` of a result is then the exact
//! code at `F` fraction bits, the most any input has (inputs with fewer are shifted up).

use mase_ir::Op;

/// Bits below which a code is exactly an `f32`.
const EXACT_BITS: u32 = 24;

/// The fraction bits of the codes of an unquantized node's result when its tensor inputs are
/// integer results with `fracs` fraction bits and `bits` bits of magnitude, or `None` when the
/// op computes new values (it has its own integer kernel, or runs in float).
pub(super) fn code_frac(op: &Op, fracs: &[i32], bits: &[u32]) -> Option<i32> {
    if fracs.is_empty() || bits.iter().any(|&b| b >= EXACT_BITS) {
        return None;
    }
    let frac = fracs.iter().copied().max()?;
    // A bound or fill value must be a whole code at `frac` fraction bits.
    let whole = |v: f32| v.is_infinite() || (v as f64 * 2f64.powi(frac)).fract() == 0.0;
    let moves = match op {
        Op::Index { .. } | Op::Transpose { .. } | Op::Permute { .. } | Op::Expand { .. } | Op::Repeat { .. } => true,
        Op::Concat { .. } | Op::Stack { .. } => true,
        Op::Amax(_) | Op::AdaptiveMaxPool1d { .. } | Op::AdaptiveMaxPool2d { .. } => true,
        Op::Relu6 => whole(6.0),
        Op::Clip { min, max } => whole(*min) && whole(*max),
        Op::Pad { value, .. } => whole(*value),
        // Aliases of their input's buffer: its codes already are theirs.
        Op::Flatten { .. } | Op::Reshape { .. } | Op::Output => false,
        // Integer kernels of their own, or kept on the codes by `passthrough`.
        Op::Linear { .. }
        | Op::Conv1d(_)
        | Op::Conv2d(_)
        | Op::BatchNorm1d(_)
        | Op::BatchNorm2d(_)
        | Op::Relu
        | Op::Add
        | Op::Sub
        | Op::Mul
        | Op::MatMul
        | Op::MaxPool1d(_)
        | Op::MaxPool2d(_)
        | Op::Dropout { .. }
        | Op::StochasticDepth { .. } => false,
        // New values: products by constants that are not powers of two, divisions, sums that
        // could round in `f32`, transcendental functions, normalisations.
        Op::LeakyRelu { .. }
        | Op::Sigmoid
        | Op::Tanh
        | Op::Selu
        | Op::Gelu { .. }
        | Op::Silu
        | Op::Hardswish
        | Op::Hardsigmoid
        | Op::Softplus { .. }
        | Op::Mish
        | Op::Mean(_)
        | Op::Sum(_)
        | Op::Softmax { .. }
        | Op::LogSoftmax { .. }
        | Op::AvgPool1d(_)
        | Op::AvgPool2d(_)
        | Op::AdaptiveAvgPool1d { .. }
        | Op::AdaptiveAvgPool2d { .. }
        | Op::Div
        | Op::Pow
        | Op::Sqrt
        | Op::LayerNorm { .. }
        | Op::GroupNorm { .. }
        | Op::Einsum { .. }
        | Op::ScaledDotProductAttention { .. }
        | Op::Embedding { .. } => false,
        // A comparison's 0 or 1 is no code of its inputs' format; `where` reads a condition
        // that is none either (both run in float).
        Op::Eq | Op::Ne | Op::Lt | Op::Le | Op::Gt | Op::Ge | Op::Where => false,
        // Not values of the data path.
        Op::Input | Op::Constant | Op::Size { .. } | Op::SizeArith { .. } | Op::Opaque { .. } => false,
    };
    moves.then_some(frac)
}

/// The codes at `frac` fraction bits of values `y` that `code_frac` vouched for.
pub(super) fn codes_of(y: &[f32], frac: i32) -> Vec<i64> {
    let scale = 2f64.powi(frac);
    y.iter().map(|&v| (v as f64 * scale) as i64).collect()
}
