//! `binary` (doc/mase-semantics.md#format-binary), on tensors of any rank (MASE's zero-scaled variant is 4-D only).
//!
//! - bipolar: `x >= 0 ? 1 : -1` (NaN gives -1);
//! - zero-scaled (not bipolar): `α_i = mean |x|` over each index `i` of the first dimension (the
//!   other dimensions are reduced), `out = (x > 0) * α_i`;
//! - stochastic: `p = clamp((x + 1) / 2, 0, 1)`; bipolar draws `r ~ U[0, 1)` per value (in index
//!   order, from the `Rng` given) and gives `p >= r ? 1 : -1`; zero-scaled applies the rule above
//!   to `p` and draws nothing (MASE draws `r` and ignores it).
//!
//! Row means are summed in `f64`, in index order.

use crate::registry::{on_grid_elementwise, Reach, Scope};
use crate::round::clamp_nan;
use crate::Result;
use mase_ir::{QuantFormat, Rng};

/// The format's entry in `registry::FORMATS`: its name, its one-line doc, and the functions
/// below (shared ones imported under the names the registry reads).
pub(crate) const NAME: &str = "binary";
pub(crate) const DOC: &str =
    "stochastic, bipolar: bipolar x >= 0 ? 1 : -1; else (x > 0) * mean|x| per index of dim 0; stochastic on p = clamp((x + 1) / 2, 0, 1)";
pub(crate) use crate::registry::any_shape as validate_shape;

fn spec(fmt: &QuantFormat) -> (bool, bool) {
    match *fmt {
        QuantFormat::Binary { stochastic, bipolar } => (stochastic, bipolar),
        _ => unreachable!("binary called with {}", fmt.type_name()),
    }
}

/// Bipolar binary looks at each value alone and, when stochastic, draws one number per value;
/// the zero-scaled form scales by a mean over each index of the first dimension and draws none.
pub(crate) fn scope(fmt: &QuantFormat) -> Scope {
    let (stochastic, bipolar) = spec(fmt);
    Scope { reach: if bipolar { Reach::Value } else { Reach::Row }, random: stochastic && bipolar }
}

pub(crate) fn validate(_fmt: &QuantFormat) -> Result<()> {
    Ok(())
}

/// Length of the rows that binary and ternary reduce over: everything but the first dimension
/// (a scalar is one row of one value).
pub(crate) fn row_len(shape: &[usize], len: usize) -> usize {
    match shape.first() {
        Some(&n) if n > 0 => (len / n).max(1),
        _ => len.max(1),
    }
}

#[inline(always)]
fn prob(v: f32) -> f32 {
    clamp_nan((v + 1.0) / 2.0, 0.0, 1.0)
}

/// `out = (f(x) > 0) * mean |f(x)|` per row, without storing `f(x)`.
fn zero_scaled(x: &[f32], out: &mut [f32], n: usize, f: impl Fn(f32) -> f32) {
    for (xr, or) in x.chunks(n).zip(out.chunks_mut(n)) {
        let alpha = (xr.iter().map(|&v| f(v).abs() as f64).sum::<f64>() / xr.len() as f64) as f32;
        for (o, &v) in or.iter_mut().zip(xr) {
            *o = if f(v) > 0.0 { 1.0 } else { 0.0 } * alpha;
        }
    }
}

pub(crate) fn kernel(fmt: &QuantFormat, x: &[f32], shape: &[usize], out: &mut [f32], rng: &mut Rng) {
    let n = row_len(shape, x.len());
    match spec(fmt) {
        (false, true) => out.iter_mut().zip(x).for_each(|(o, &v)| *o = if v >= 0.0 { 1.0 } else { -1.0 }),
        (false, false) => zero_scaled(x, out, n, |v| v),
        (true, true) => out.iter_mut().zip(x).for_each(|(o, &v)| *o = if prob(v) >= rng.uniform() { 1.0 } else { -1.0 }),
        (true, false) => zero_scaled(x, out, n, prob),
    }
}

pub(crate) fn reference(fmt: &QuantFormat, x: &[f32], shape: &[usize], out: &mut [f32], rng: &mut Rng) {
    let (stochastic, bipolar) = spec(fmt);
    let n = row_len(shape, x.len());
    let values: Vec<f32> = if stochastic { x.iter().map(|&v| ((v + 1.0) / 2.0).clamp(0.0, 1.0)).collect() } else { x.to_vec() };
    if bipolar {
        for (i, &p) in values.iter().enumerate() {
            let threshold = if stochastic { rng.uniform() } else { 0.0 };
            out[i] = if p >= threshold { 1.0 } else { -1.0 };
        }
        return;
    }
    for row in 0..values.len().div_ceil(n) {
        let r = row * n..((row + 1) * n).min(values.len());
        let mut sum = 0.0f64;
        for i in r.clone() {
            sum += values[i].abs() as f64;
        }
        let alpha = (sum / r.len() as f64) as f32;
        for i in r {
            let pos_one = if values[i] > 0.0 { 1.0 } else { 0.0 };
            out[i] = pos_one * alpha;
        }
    }
}

/// Bipolar: ±1. Zero-scaled: 0 or a positive scale, i.e. any non-negative finite value.
pub(crate) fn representable(fmt: &QuantFormat, v: f32) -> bool {
    match spec(fmt) {
        (_, true) => v == 1.0 || v == -1.0,
        (_, false) => v.is_finite() && v >= 0.0,
    }
}

/// Zero-scaled rows must hold one positive value besides zeros.
pub(crate) fn on_grid(fmt: &QuantFormat, x: &[f32], shape: &[usize]) -> Vec<usize> {
    if spec(fmt).1 {
        return on_grid_elementwise(fmt, x, shape);
    }
    let n = row_len(shape, x.len());
    let mut bad = Vec::new();
    for (r, xr) in x.chunks(n).enumerate() {
        let alpha = xr.iter().copied().find(|&v| v > 0.0 && v.is_finite());
        bad.extend(xr.iter().enumerate().filter(|&(_, &v)| !(v == 0.0 || Some(v) == alpha)).map(|(i, _)| r * n + i));
    }
    bad
}
