//! `ternary` (doc/mase-semantics.md#format-ternary), with its threshold honoured and on tensors of any rank (MASE computes
//! a threshold and then ignores it, and only runs on 4-D tensors).
//!
//! Per index `i` of the first dimension (the other dimensions are reduced):
//! ```text
//! δ_i = threshold, or 0.75 * Σ|x_i| / n when no threshold is given (n = values per index)
//! t = 1 where x > δ_i, -1 where x < -δ_i, else 0
//! scaled: out = t * α_i, α_i = mean(|x| over the values with |x| > δ_i);  else out = t
//! ```
//! When no value exceeds `δ_i`, `α_i = 0` (MASE divides by zero and gives NaN). NaN values count
//! as 0 (not above the threshold) and come out as 0. Sums are taken in `f64`, in index order.

use crate::binary::row_len;
use crate::error::param;
use crate::registry::on_grid_elementwise;
use crate::Result;
use mase_ir::{QuantFormat, Rng};

/// The format's entry in `registry::FORMATS`: its name, its one-line doc, and the functions
/// below (shared ones imported under the names the registry reads).
pub(crate) const NAME: &str = "ternary";
pub(crate) const DOC: &str =
    "scaling_factor, threshold: 1 / 0 / -1 around ±δ (threshold, or 0.75 * mean|x| per index of dim 0), times mean|x| above δ when scaled";
pub(crate) use crate::registry::{any_shape as validate_shape, row_scope as scope};

fn spec(fmt: &QuantFormat) -> (bool, Option<f32>) {
    match *fmt {
        QuantFormat::Ternary { scaling_factor, threshold } => (scaling_factor, threshold),
        _ => unreachable!("ternary called with {}", fmt.type_name()),
    }
}

pub(crate) fn validate(fmt: &QuantFormat) -> Result<()> {
    if let (_, Some(t)) = spec(fmt) {
        if !(t.is_finite() && t >= 0.0) {
            return Err(param("ternary", "threshold", t, "must be a finite number >= 0"));
        }
    }
    Ok(())
}

pub(crate) fn kernel(fmt: &QuantFormat, x: &[f32], shape: &[usize], out: &mut [f32], _rng: &mut Rng) {
    let (scaled, threshold) = spec(fmt);
    let n = row_len(shape, x.len());
    for (xr, or) in x.chunks(n).zip(out.chunks_mut(n)) {
        let delta = threshold.unwrap_or_else(|| ((0.75 * xr.iter().map(|v| v.abs() as f64).sum::<f64>()) / xr.len() as f64) as f32);
        let alpha = if scaled {
            let (sum, count) = xr.iter().filter(|v| v.abs() > delta).fold((0.0f64, 0usize), |(s, c), v| (s + v.abs() as f64, c + 1));
            if count == 0 {
                0.0
            } else {
                (sum / count as f64) as f32
            }
        } else {
            1.0
        };
        for (o, &v) in or.iter_mut().zip(xr) {
            let t = if v > delta {
                1.0
            } else if v < -delta {
                -1.0
            } else {
                0.0
            };
            *o = t * alpha;
        }
    }
}

pub(crate) fn reference(fmt: &QuantFormat, x: &[f32], shape: &[usize], out: &mut [f32], _rng: &mut Rng) {
    let (scaled, threshold) = spec(fmt);
    let n = row_len(shape, x.len());
    for row in 0..x.len().div_ceil(n) {
        let idx = row * n..((row + 1) * n).min(x.len());
        let mut abs_sum = 0.0f64;
        for i in idx.clone() {
            abs_sum += x[i].abs() as f64;
        }
        let delta = match threshold {
            Some(t) => t,
            None => ((0.75 * abs_sum) / idx.len() as f64) as f32,
        };
        let mut truth_num = 0usize;
        let mut above = 0.0f64;
        for i in idx.clone() {
            if x[i].abs() > delta {
                truth_num += 1;
                above += x[i].abs() as f64;
            }
        }
        let alpha = if !scaled {
            1.0
        } else if truth_num == 0 {
            0.0
        } else {
            (above / truth_num as f64) as f32
        };
        for i in idx {
            let pos_one = if x[i] > delta { 1.0 } else { 0.0 };
            let neg_one = if x[i] < -delta { -1.0 } else { 0.0 };
            out[i] = (pos_one + neg_one) * alpha;
        }
    }
}

/// Unscaled: -1, 0 or 1. Scaled: any finite value (0 or ±α for some α).
pub(crate) fn representable(fmt: &QuantFormat, v: f32) -> bool {
    match spec(fmt) {
        (false, _) => v == 0.0 || v == 1.0 || v == -1.0,
        (true, _) => v.is_finite(),
    }
}

/// Scaled rows must hold one magnitude besides zeros.
pub(crate) fn on_grid(fmt: &QuantFormat, x: &[f32], shape: &[usize]) -> Vec<usize> {
    if !spec(fmt).0 {
        return on_grid_elementwise(fmt, x, shape);
    }
    let n = row_len(shape, x.len());
    let mut bad = Vec::new();
    for (r, xr) in x.chunks(n).enumerate() {
        let alpha = xr.iter().map(|v| v.abs()).find(|&a| a > 0.0 && a.is_finite());
        bad.extend(xr.iter().enumerate().filter(|&(_, &v)| !(v == 0.0 || Some(v.abs()) == alpha)).map(|(i, _)| r * n + i));
    }
    bad
}
