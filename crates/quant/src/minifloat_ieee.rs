//! `minifloat_ieee`: IEEE-style minifloat with an implicit leading bit and subnormals, but no
//! infinities or NaN codes (doc/mase-semantics.md#format-minifloat_ieee).
//!
//! ```text
//! e = clamp(floor(log2(|x| + 1e-9)), -B, 2^E - 1 - B);  m = |x| / 2^e
//! normal (e != -B): mi = clamp(round(m 2^M - 2^M), 0, 2^M - 1);  mant = 1 + mi / 2^M
//! subnormal:        mi = clamp(round(m 2^M / 2), 0, 2^M - 1);    mant = 2 mi / 2^M
//! out = sign(x + 1e-9) * 2^e * mant
//! ```
//! `|x| <= 1e-8` passes through as MASE computes it, `(~close) * out + close * x` (-0.0 becomes
//! +0.0); large finite values saturate at `2^e_max (2 - 2^-M)`; NaN and ±inf give NaN (`0 * inf`
//! in that passthrough), as in torch.

use crate::minifloat_denorm::{lowest_bit_exponent, Mini};
use crate::round::{clamp_nan, close_to_zero, exp2i, floor_log2, mase_mask, rne, sign, zero_passthrough};
use mase_ir::{QuantFormat, Rng};

/// The format's entry in `registry::FORMATS`: its name, its one-line doc, and the functions
/// below (shared ones imported under the names the registry reads).
pub(crate) const NAME: &str = "minifloat_ieee";
pub(crate) const DOC: &str =
    "width, exponent_width, exponent_bias: IEEE-like s * 2^e * (1 + mi / 2^M), subnormals at e = -bias, saturating";
pub(crate) use crate::minifloat_denorm::validate_minifloat as validate;
pub(crate) use crate::registry::{any_shape as validate_shape, on_grid_elementwise as on_grid, value_scope as scope};

/// One value with mantissa bits `m` (`shift = 2^m`) and exponent range `[e_min, e_max]`; shared
/// with block minifloat, whose bias (and so range) is per block.
#[inline(always)]
pub(crate) fn ieee_one(v: f32, e_min: i64, e_max: i64, shift: f32) -> f32 {
    if !v.is_finite() {
        // NaN stays NaN; MASE's zero passthrough multiplies ±inf by 0.
        return f32::NAN;
    }
    let s = sign(v + 1e-9);
    let a = v.abs();
    let e = floor_log2(a + 1e-9).clamp(e_min, e_max);
    let p = exp2i(e);
    let m = a / p;
    let mant = if e != e_min {
        1.0 + clamp_nan(rne(m * shift - shift), 0.0, shift - 1.0) / shift
    } else {
        clamp_nan(rne(m * shift / 2.0), 0.0, shift - 1.0) / shift * 2.0
    };
    zero_passthrough(v, s * p * mant)
}

/// [`ieee_one`] written from the formula with `f64` logarithms and powers.
pub(crate) fn ieee_reference(v: f32, e_min: i64, e_max: i64, m_bits: i64) -> f32 {
    let pow2 = |e: i64| 2f64.powi(e as i32) as f32;
    let shift = pow2(m_bits);
    let sign = sign(v + 1e-9);
    let value = v.abs();
    let exponent = (((value + 1e-9) as f64).log2().floor() as i64).clamp(e_min, e_max);
    let mantissa = value / pow2(exponent);
    let is_normal = exponent != e_min;
    let mant = if is_normal {
        1.0 + (mantissa * shift - shift).round_ties_even().clamp(0.0, shift - 1.0) / shift
    } else {
        (mantissa * shift / 2.0).round_ties_even().clamp(0.0, shift - 1.0) / shift * 2.0
    };
    mase_mask(v, sign * pow2(exponent) * mant)
}

/// Whether `v` is an output of the minifloat with mantissa bits `m` and range `[e_min, e_max]`:
/// `|v| <= 1e-8`, a subnormal `mi * 2^(e_min + 1 - M)`, or a normal number with at most `M + 1`
/// significant bits and exponent in `(e_min, e_max]`.
pub(crate) fn ieee_representable(v: f32, m: i64, e_min: i64, e_max: i64) -> bool {
    if !v.is_finite() {
        return false;
    }
    if close_to_zero(v) {
        return true;
    }
    let a = v.abs();
    let sub = a as f64 * 2f64.powi((m - 1 - e_min) as i32);
    if sub.fract() == 0.0 && sub <= 2f64.powi(m as i32) - 1.0 {
        return true;
    }
    let e = floor_log2(a);
    e > e_min && e <= e_max && lowest_bit_exponent(a) >= e - m
}

pub(crate) fn kernel(fmt: &QuantFormat, x: &[f32], _shape: &[usize], out: &mut [f32], _rng: &mut Rng) {
    let f = Mini::of(fmt);
    let shift = exp2i(f.m);
    for (o, &v) in out.iter_mut().zip(x) {
        *o = ieee_one(v, f.e_min, f.e_max, shift);
    }
}

pub(crate) fn reference(fmt: &QuantFormat, x: &[f32], _shape: &[usize], out: &mut [f32], _rng: &mut Rng) {
    let f = Mini::of(fmt);
    for (o, &v) in out.iter_mut().zip(x) {
        *o = ieee_reference(v, f.e_min, f.e_max, f.m);
    }
}

pub(crate) fn representable(fmt: &QuantFormat, v: f32) -> bool {
    let f = Mini::of(fmt);
    ieee_representable(v, f.m, f.e_min, f.e_max)
}
