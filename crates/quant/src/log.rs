//! `log`: base-2 logarithmic format, `±2^e` (doc/mase-semantics.md#format-log). Zero is not representable.
//!
//! ```text
//! Eb = width - 1;  B = exponent_bias or 2^(Eb-1) - 1;  e in [-B, 2^Eb - 1 - B];  t = 0.1 * 2^-B
//! out = sign(x + t) * 2^clamp(round(log2(|x| + t)), e_min, e_max)
//! ```
//! Zero maps to `2^e_min`; NaN stays NaN (torch's `sign(NaN) = 0` times `2^NaN`); ±inf saturate to
//! `±2^e_max`, as in torch.

use crate::error::param;
use crate::round::{exp2i, exponent_range, floor_log2, round_log2, sign};
use crate::Result;
use mase_ir::{QuantFormat, Rng};

/// The format's entry in `registry::FORMATS`: its name, its one-line doc, and the functions
/// below (shared ones imported under the names the registry reads).
pub(crate) const NAME: &str = "log";
pub(crate) const DOC: &str = "width, exponent_bias: sign(x) * 2^clamp(round(log2 |x|), -bias, 2^(width-1) - 1 - bias)";
pub(crate) use crate::registry::{any_shape as validate_shape, on_grid_elementwise as on_grid, value_scope as scope};

/// The exponent range: the exponent field is all but the sign bit.
fn spec(fmt: &QuantFormat) -> (i64, i64) {
    match *fmt {
        QuantFormat::Log { width, exponent_bias } => exponent_range(width as i64 - 1, exponent_bias.map(i64::from)),
        _ => unreachable!("log called with {}", fmt.type_name()),
    }
}

/// `width` between 2 (sign and one exponent bit) and 9 (8 exponent bits, as an f32 carrier has).
pub(crate) fn validate_width(format: &'static str, width: u32) -> Result<()> {
    if !(2..=9).contains(&width) {
        return Err(param(format, "width", width, "must be between 2 and 9 (a sign bit and 1 to 8 exponent bits)"));
    }
    Ok(())
}

pub(crate) fn validate(fmt: &QuantFormat) -> Result<()> {
    let QuantFormat::Log { width, exponent_bias } = *fmt else { unreachable!("log called with {}", fmt.type_name()) };
    validate_width("log", width)?;
    if let Some(b) = exponent_bias {
        if b.abs() > 256 {
            return Err(param("log", "exponent_bias", b, "must be between -256 and 256"));
        }
    }
    Ok(())
}

/// One value with offset `t` (`0.1 * 2^e_min`) and exponent range `[e_min, e_max]`.
#[inline(always)]
pub(crate) fn log_one(v: f32, t: f32, e_min: i64, e_max: i64) -> f32 {
    if v.is_nan() {
        return v;
    }
    let s = sign(v + t);
    let e = round_log2(v.abs() + t).clamp(e_min, e_max);
    s * exp2i(e)
}

/// [`log_one`] from the formula, with an `f64` logarithm.
pub(crate) fn log_reference(v: f32, t: f32, e_min: i64, e_max: i64) -> f32 {
    if v.is_nan() {
        return v;
    }
    let sign = sign(v + t);
    let value = v.abs() + t;
    let exponent = ((value as f64).log2().round_ties_even() as i64).clamp(e_min, e_max);
    sign * (2f64.powi(exponent as i32) as f32)
}

/// `±2^e` with `e` in `[e_min, e_max]`.
pub(crate) fn log_representable(v: f32, e_min: i64, e_max: i64) -> bool {
    let a = v.abs();
    if !a.is_finite() || a == 0.0 {
        return false;
    }
    let e = floor_log2(a);
    exp2i(e) == a && e >= e_min && e <= e_max
}

/// The offset MASE adds before the logarithm: `min_pos * 0.1`, with `min_pos` a Python float.
fn offset(e_min: i64) -> f32 {
    (0.1 * 2f64.powi(e_min as i32)) as f32
}

pub(crate) fn kernel(fmt: &QuantFormat, x: &[f32], _shape: &[usize], out: &mut [f32], _rng: &mut Rng) {
    let (e_min, e_max) = spec(fmt);
    let t = offset(e_min);
    for (o, &v) in out.iter_mut().zip(x) {
        *o = log_one(v, t, e_min, e_max);
    }
}

pub(crate) fn reference(fmt: &QuantFormat, x: &[f32], _shape: &[usize], out: &mut [f32], _rng: &mut Rng) {
    let (e_min, e_max) = spec(fmt);
    let t = offset(e_min);
    for (o, &v) in out.iter_mut().zip(x) {
        *o = log_reference(v, t, e_min, e_max);
    }
}

pub(crate) fn representable(fmt: &QuantFormat, v: f32) -> bool {
    let (e_min, e_max) = spec(fmt);
    log_representable(v, e_min, e_max)
}
