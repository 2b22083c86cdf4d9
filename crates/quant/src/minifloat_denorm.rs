//! `minifloat_denorm`: sign, exponent and a mantissa without implicit leading bit (doc/mase-semantics.md#format-minifloat_denorm).
//!
//! ```text
//! M = width - exponent_width - 1;  B = exponent_bias or 2^(E-1) - 1;  e in [-B, 2^E - 1 - B]
//! s = sign(x + 1e-9);  v = |x|;  e = clamp(ceil(log2(v + 1e-9)), e_min, e_max)
//! mi = clamp(round(v / 2^e * 2^M), 0, 2^M - 1);  out = s * 2^e * mi / 2^M
//! ```
//! Values with `|x| <= 1e-8` pass through (MASE's `isclose(x, 0)`), computed as MASE does,
//! `(~close) * out + close * x`: -0.0 becomes +0.0, and NaN and ±inf give NaN (`0 * inf`), as in
//! torch. Because of `ceil`, an exact power of two has mantissa 1.0, which saturates to
//! `(2^M - 1) / 2^M`.

use crate::error::param;
use crate::round::{ceil_log2, clamp_nan, close_to_zero, exp2i, exponent_range, mase_mask, rne, sign, zero_passthrough};
use crate::Result;
use mase_ir::{QuantFormat, Rng};

/// The format's entry in `registry::FORMATS`: its name, its one-line doc, and the functions
/// below (shared ones imported under the names the registry reads).
pub(crate) const NAME: &str = "minifloat_denorm";
pub(crate) const DOC: &str =
    "width, exponent_width, exponent_bias: s * 2^e * clamp(round(|x| / 2^e * 2^M), 0, 2^M - 1) / 2^M, e = ceil(log2 |x|)";
pub(crate) use self::validate_minifloat as validate;
pub(crate) use crate::registry::{any_shape as validate_shape, on_grid_elementwise as on_grid, value_scope as scope};

/// Mantissa bits and exponent range of a minifloat (this module's and `minifloat_ieee`'s).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Mini {
    pub m: i64,
    pub e_min: i64,
    pub e_max: i64,
}

impl Mini {
    /// `width`, `exponent_width` and an optional bias, with MASE's default bias `2^(E-1) - 1`.
    pub fn new(width: u32, exponent_width: u32, bias: Option<i32>) -> Mini {
        let (e_min, e_max) = exponent_range(exponent_width as i64, bias.map(i64::from));
        Mini { m: width as i64 - exponent_width as i64 - 1, e_min, e_max }
    }

    /// The minifloat of a `minifloat_denorm` or `minifloat_ieee` format: the two variants have the
    /// same fields and differ only in how a value is rounded.
    pub fn of(fmt: &QuantFormat) -> Mini {
        let (width, exponent_width, exponent_bias) = fields(fmt);
        Mini::new(width, exponent_width, exponent_bias)
    }
}

/// `width`, `exponent_width` and `exponent_bias` of either elementwise minifloat.
fn fields(fmt: &QuantFormat) -> (u32, u32, Option<i32>) {
    match *fmt {
        QuantFormat::MinifloatDenorm { width, exponent_width, exponent_bias }
        | QuantFormat::MinifloatIeee { width, exponent_width, exponent_bias } => (width, exponent_width, exponent_bias),
        _ => unreachable!("a minifloat called with {}", fmt.type_name()),
    }
}

/// `validate` of both elementwise minifloats; the error names the format it is given.
pub(crate) fn validate_minifloat(fmt: &QuantFormat) -> Result<()> {
    let (width, exponent_width, exponent_bias) = fields(fmt);
    validate_mini(fmt.type_name(), width, exponent_width, exponent_bias)
}

/// The checks shared by both minifloats and block minifloat: `1 <= E <= 8`, `E < width <= 32`,
/// `|bias| <= 256`.
pub(crate) fn validate_mini(format: &'static str, width: u32, exponent_width: u32, bias: Option<i32>) -> Result<()> {
    if !(2..=32).contains(&width) {
        return Err(param(format, "width", width, "must be between 2 and 32"));
    }
    if !(1..=8).contains(&exponent_width) {
        return Err(param(format, "exponent_width", exponent_width, "must be between 1 and 8 (an f32 carrier has 8 exponent bits)"));
    }
    if exponent_width >= width {
        return Err(param(
            format,
            "exponent_width",
            exponent_width,
            format!("must be smaller than `width` = {width} (one bit is the sign)"),
        ));
    }
    if let Some(b) = bias {
        if b.abs() > 256 {
            return Err(param(format, "exponent_bias", b, "must be between -256 and 256"));
        }
    }
    Ok(())
}

/// One value, exactly as the kernel computes it.
#[inline(always)]
fn one(v: f32, f: Mini, shift: f32) -> f32 {
    if !v.is_finite() {
        // NaN stays NaN; MASE's zero passthrough multiplies ±inf by 0.
        return f32::NAN;
    }
    let s = sign(v + 1e-9);
    let a = v.abs();
    let e = ceil_log2(a + 1e-9).clamp(f.e_min, f.e_max);
    let p = exp2i(e);
    let mi = clamp_nan(rne(a / p * shift), 0.0, shift - 1.0);
    zero_passthrough(v, s * p * (mi / shift))
}

pub(crate) fn kernel(fmt: &QuantFormat, x: &[f32], _shape: &[usize], out: &mut [f32], _rng: &mut Rng) {
    let f = Mini::of(fmt);
    let shift = exp2i(f.m);
    for (o, &v) in out.iter_mut().zip(x) {
        *o = one(v, f, shift);
    }
}

pub(crate) fn reference(fmt: &QuantFormat, x: &[f32], _shape: &[usize], out: &mut [f32], _rng: &mut Rng) {
    let f = Mini::of(fmt);
    let pow2 = |e: i64| 2f64.powi(e as i32) as f32;
    let shift = pow2(f.m);
    for (o, &v) in out.iter_mut().zip(x) {
        let s = sign(v + 1e-9);
        let value = v.abs();
        // `as i64` saturates: +inf gives the largest exponent, NaN 0 (its mantissa stays NaN).
        let exponent = (((value + 1e-9) as f64).log2().ceil() as i64).clamp(f.e_min, f.e_max);
        let mantissa = value / pow2(exponent);
        let shifted = (mantissa * shift).round_ties_even().clamp(0.0, shift - 1.0);
        *o = mase_mask(v, s * pow2(exponent) * (shifted / shift));
    }
}

/// `|v| <= 1e-8` (passed through), or `v = ±mi * 2^(e - M)` with `mi < 2^M` and `e` in range.
pub(crate) fn representable(fmt: &QuantFormat, v: f32) -> bool {
    let f = Mini::of(fmt);
    if !v.is_finite() {
        return false;
    }
    if close_to_zero(v) {
        return true;
    }
    let a = v.abs() as f64;
    // The largest exponent that keeps mi an integer is M + (position of a's lowest set bit);
    // the largest allowed one gives the smallest mi.
    let low_bit = lowest_bit_exponent(v.abs());
    let e = f.e_max.min(f.m + low_bit);
    e >= f.e_min && a * 2f64.powi((f.m - e) as i32) <= 2f64.powi(f.m as i32) - 1.0
}

/// `k` such that `a = odd * 2^k`, for a positive finite `a`.
pub(crate) fn lowest_bit_exponent(a: f32) -> i64 {
    let bits = a.to_bits();
    let exp = ((bits >> 23) & 0xff) as i64;
    let man = if exp == 0 { bits & 0x7f_ffff } else { (bits & 0x7f_ffff) | 0x80_0000 };
    let p = if exp == 0 { -149 } else { exp - 150 };
    p + man.trailing_zeros() as i64
}
