//! Pointwise activations with PyTorch's formulas for value and derivative.

use super::{store_zip, Accum, Bwd, Fwd, Kernel};

/// SELU constants (`torch.nn.SELU`).
const SELU_ALPHA: f32 = 1.673_263_2;
const SELU_SCALE: f32 = 1.050_701;

/// Which activation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum ActKind {
    Relu,
    Relu6,
    LeakyRelu(f32),
    Sigmoid,
    Tanh,
    Selu,
    /// `x * Phi(x)` with the exact normal CDF.
    Gelu,
    /// GELU's tanh approximation.
    GeluTanh,
    /// `x * sigmoid(x)`.
    Silu,
    /// `x * relu6(x + 3) / 6`.
    Hardswish,
    /// `relu6(x + 3) / 6`.
    Hardsigmoid,
    /// `log1p(exp(beta * x)) / beta`, or `x` where `beta * x > threshold`.
    Softplus {
        beta: f32,
        threshold: f32,
    },
    /// `x * tanh(log1p(exp(x)))`.
    Mish,
    Sqrt,
    /// `clamp(x, min, max)`.
    Clip(f32, f32),
}

/// A pointwise activation node.
pub(crate) struct Activation {
    kind: ActKind,
}

impl Activation {
    pub fn new(kind: ActKind) -> Activation {
        Activation { kind }
    }
}

const SQRT_2_OVER_PI: f32 = 0.797_884_6;
const GELU_KAPPA: f32 = 0.044_715;

/// `y[i] = f(x[i])`, monomorphised per activation so the loop has no indirect call.
#[inline(always)]
fn map(y: &mut [f32], x: &[f32], f: impl Fn(f32) -> f32) {
    y.iter_mut().zip(x).for_each(|(o, &v)| *o = f(v));
}

/// `torch.clamp(v, lo, hi)` as PyTorch's `min(max(v, lo), hi)` with comparisons: NaN stays NaN,
/// -0.0 stays -0.0 at a bound of 0, `lo > hi` gives `hi` (as numpy and ONNX do too), and an
/// open side (`f32::MIN` / `f32::MAX`, as `Op::Clip` writes a missing bound) leaves infinities
/// alone.
fn clip(v: f32, lo: f32, hi: f32) -> f32 {
    let v = if lo != f32::MIN && v < lo { lo } else { v };
    if hi != f32::MAX && hi < v {
        hi
    } else {
        v
    }
}

/// PyTorch's ReLU, `x < 0 ? 0 : x`: NaN and -0.0 pass through. The fused epilogues
/// (`crate::fuse`) call it too, so fused and unfused outputs are the same bits.
#[inline(always)]
pub(crate) fn relu(v: f32) -> f32 {
    if v < 0.0 {
        0.0
    } else {
        v
    }
}

/// ReLU's gradient from its output `y` and the output gradient `g`, as PyTorch's
/// threshold_backward: `y <= 0 ? 0 : g` (a NaN output passes the gradient).
#[inline(always)]
pub(crate) fn relu_grad(y: f32, g: f32) -> f32 {
    if y <= 0.0 {
        0.0
    } else {
        g
    }
}

/// `min(max(v, 0), 6)` with NaN passed through, as PyTorch's vectorised `maximum`/`minimum` do.
fn relu6_nan(v: f32) -> f32 {
    if v.is_nan() {
        v
    } else {
        v.clamp(0.0, 6.0)
    }
}

impl Kernel for Activation {
    fn forward(&mut self, cx: &mut Fwd<'_>, y: &mut [f32]) {
        let x = cx.input(0);
        match self.kind {
            ActKind::Relu => map(y, x, relu),
            ActKind::Relu6 => map(y, x, |v| clip(v, 0.0, 6.0)),
            ActKind::LeakyRelu(s) => map(y, x, |v| if v > 0.0 { v } else { v * s }),
            ActKind::Sigmoid => map(y, x, |v| 1.0 / (1.0 + (-v).exp())),
            ActKind::Tanh => map(y, x, f32::tanh),
            ActKind::Selu => map(y, x, |v| if v > 0.0 { SELU_SCALE * v } else { SELU_SCALE * SELU_ALPHA * v.exp_m1() }),
            ActKind::Gelu => super::gelu::forward(y, x),
            ActKind::GeluTanh => map(y, x, |v| 0.5 * v * (1.0 + (SQRT_2_OVER_PI * (v + GELU_KAPPA * v * v * v)).tanh())),
            ActKind::Sqrt => map(y, x, f32::sqrt),
            ActKind::Clip(lo, hi) => map(y, x, |v| clip(v, lo, hi)),
            // PyTorch's `x / (1 + exp(-x))`: -inf gives -inf / inf = NaN, as in PyTorch.
            ActKind::Silu => map(y, x, |v| v / (1.0 + (-v).exp())),
            // `x * 0` at -inf is NaN, and at -3 or below -0.0, as in PyTorch.
            ActKind::Hardswish => map(y, x, |v| v * relu6_nan(v + 3.0) / 6.0),
            ActKind::Hardsigmoid => map(y, x, |v| relu6_nan(v + 3.0) / 6.0),
            ActKind::Softplus { beta, threshold } => map(y, x, |v| if v * beta > threshold { v } else { (v * beta).exp().ln_1p() / beta }),
            // `x * tanh(softplus(x))` without a threshold, as PyTorch's mish: -inf gives -inf * 0 = NaN.
            ActKind::Mish => map(y, x, |v| v * v.exp().ln_1p().tanh()),
        }
    }

    fn backward_input(&mut self, cx: &Bwd<'_>, _i: usize, dx: &mut [f32], acc: Accum) {
        let (x, y, dy) = (cx.input(0), cx.y, cx.dy);
        match self.kind {
            // ReLU's mask is taken from the output, as PyTorch's threshold_backward does
            // (`y <= 0 ? 0 : g`, so a NaN output passes the gradient).
            ActKind::Relu => store_zip(acc, dx, y, dy, relu_grad),
            ActKind::Relu6 => store_zip(acc, dx, x, dy, |x, g| if x > 0.0 && x < 6.0 { g } else { 0.0 }),
            ActKind::LeakyRelu(s) => store_zip(acc, dx, x, dy, |x, g| if x > 0.0 { g } else { g * s }),
            ActKind::Sigmoid => store_zip(acc, dx, y, dy, |y, g| g * (1.0 - y) * y),
            ActKind::Tanh => store_zip(acc, dx, y, dy, |y, g| g * (1.0 - y * y)),
            // PyTorch's elu_backward tests `x <= 0`, so NaN takes the positive side's slope.
            ActKind::Selu => {
                store_zip(acc, dx, x, dy, |x, g| if x <= 0.0 { g * SELU_SCALE * SELU_ALPHA * x.exp() } else { g * SELU_SCALE })
            }
            ActKind::Gelu => super::gelu::backward(acc, dx, x, dy),
            ActKind::GeluTanh => store_zip(acc, dx, x, dy, |v, g| {
                let t = (SQRT_2_OVER_PI * (v + GELU_KAPPA * v * v * v)).tanh();
                let left = 0.5 * (1.0 + t);
                let right = 0.5 * v * (1.0 - t * t) * SQRT_2_OVER_PI * (1.0 + 3.0 * GELU_KAPPA * v * v);
                g * (left + right)
            }),
            ActKind::Sqrt => store_zip(acc, dx, y, dy, |y, g| g / (2.0 * y)),
            // torch.clamp (2.x) passes the gradient strictly inside the bounds it was given,
            // and never at NaN; an open side (`f32::MIN` / `f32::MAX`) is no bound.
            ActKind::Clip(lo, hi) => store_zip(acc, dx, x, dy, |x, g| {
                let above = lo == f32::MIN || x > lo;
                let below = hi == f32::MAX || x < hi;
                if above && below && !x.is_nan() {
                    g
                } else {
                    0.0
                }
            }),
            ActKind::Silu => store_zip(acc, dx, x, dy, |x, g| {
                let s = 1.0 / (1.0 + (-x).exp());
                g * s * (1.0 + x * (1.0 - s))
            }),
            // PyTorch's hardswish_backward: zero up to -3 (included), the slope `x / 3 + 1/2` below
            // 3, and the gradient itself from 3 on and at NaN (whose comparisons are all false).
            ActKind::Hardswish => store_zip(acc, dx, x, dy, |x, g| {
                if x <= -3.0 {
                    0.0
                } else if x < 3.0 {
                    g * (x / 3.0 + 0.5)
                } else {
                    g
                }
            }),
            ActKind::Hardsigmoid => store_zip(acc, dx, x, dy, |x, g| if x > -3.0 && x < 3.0 { g / 6.0 } else { 0.0 }),
            ActKind::Softplus { beta, threshold } => store_zip(acc, dx, x, dy, |x, g| {
                let z = (x * beta).exp();
                if x * beta > threshold {
                    g
                } else {
                    g * z / (z + 1.0)
                }
            }),
            ActKind::Mish => store_zip(acc, dx, x, dy, |x, g| {
                let s = 1.0 / (1.0 + (-x).exp());
                let t = x.exp().ln_1p().tanh();
                g * (t + x * s * (1.0 - t * t))
            }),
        }
    }
}
