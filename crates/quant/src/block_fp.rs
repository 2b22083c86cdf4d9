//! `block_fp` (MSFP): one exponent shared by a block, a sign and `width - 1` mantissa bits per value
//! (doc/mase-semantics.md#format-block_fp). Blocks as in [`crate::block`].
//!
//! ```text
//! e = clamp(ceil(log2(max |x| over the block)), -B, 2^E - 1 - B);  M = width - 1
//! mi = clamp(round((|x| + 1e-9) / 2^e * 2^M), 0, 2^M - 1);  out = sign(x + 1e-9) * 2^e * mi / 2^M
//! ```
//! `|x| <= 1e-8` passes through as MASE computes it, `(~close) * out + close * x` (-0.0 becomes
//! +0.0). A NaN makes its whole block NaN, values near zero included (the shared exponent is
//! NaN); ±inf give NaN (`0 * inf`) and set their block's exponent to the largest, as in torch.

use crate::block::{reference_blocks, run_blocks, validate_block_size, Blocking};
use crate::error::param;
use crate::round::{ceil_log2, clamp_nan, close_to_zero, exp2i, exponent_range, mase_mask, rne, sign, zero_passthrough};
use crate::Result;
use mase_ir::{QuantFormat, Rng};

/// The format's entry in `registry::FORMATS`: its name, its one-line doc, and the functions
/// below (shared ones imported under the names the registry reads).
pub(crate) const NAME: &str = "block_fp";
pub(crate) const DOC: &str = "width, exponent_width, exponent_bias, block_size: shared e = ceil(log2 max|x|) per block, s * 2^e * round(|x| / 2^e * 2^(w-1)) / 2^(w-1)";
pub(crate) use crate::registry::{any_shape as validate_shape, tensor_scope as scope};

struct Spec<'a> {
    m: i64,
    e_min: i64,
    e_max: i64,
    block: &'a [usize],
    skip: bool,
}

fn spec(fmt: &QuantFormat) -> Spec<'_> {
    match fmt {
        QuantFormat::BlockFp { width, exponent_width, exponent_bias, block_size, skip_first_dim } => {
            let (e_min, e_max) = exponent_range(*exponent_width as i64, exponent_bias.map(i64::from));
            Spec { m: *width as i64 - 1, e_min, e_max, block: block_size, skip: *skip_first_dim }
        }
        _ => unreachable!("block_fp called with {}", fmt.type_name()),
    }
}

pub(crate) fn validate(fmt: &QuantFormat) -> Result<()> {
    let QuantFormat::BlockFp { width, exponent_width, exponent_bias, block_size, .. } = fmt else {
        unreachable!("block_fp called with {}", fmt.type_name())
    };
    if !(1..=32).contains(width) {
        return Err(param("block_fp", "width", width, "must be between 1 and 32 (sign and mantissa bits)"));
    }
    if !(1..=8).contains(exponent_width) {
        return Err(param("block_fp", "exponent_width", exponent_width, "must be between 1 and 8 (an f32 carrier has 8 exponent bits)"));
    }
    if let Some(b) = exponent_bias {
        if b.abs() > 256 {
            return Err(param("block_fp", "exponent_bias", b, "must be between -256 and 256"));
        }
    }
    validate_block_size("block_fp", block_size)
}

/// One value with the block's shared exponent `e` (`None` for a NaN block).
#[inline(always)]
fn one(v: f32, e: Option<i64>, shift: f32) -> f32 {
    let Some(e) = e else { return f32::NAN };
    if !v.is_finite() {
        // NaN stays NaN; MASE's zero passthrough multiplies ±inf by 0.
        return f32::NAN;
    }
    // A shared scale 2^e beyond f32 (e = 128) makes every `q = sign * inf * 0` NaN, and with it
    // the passthrough's `0 * q` of the values near zero.
    let p = exp2i(e);
    let s = sign(v + 1e-9);
    let mi = clamp_nan(rne((v.abs() + 1e-9) / p * shift), 0.0, shift - 1.0);
    zero_passthrough(v, s * p * (mi / shift))
}

pub(crate) fn kernel(fmt: &QuantFormat, x: &[f32], shape: &[usize], out: &mut [f32], _rng: &mut Rng) {
    let f = spec(fmt);
    let bl = Blocking::new(shape, f.block, f.skip);
    let shift = exp2i(f.m);
    let (lo, hi) = (f.e_min, f.e_max);
    run_blocks(&bl, x, out, |m| (!m.is_nan()).then(|| ceil_log2(m).clamp(lo, hi)), |v, e| one(v, e, shift));
}

pub(crate) fn reference(fmt: &QuantFormat, x: &[f32], shape: &[usize], out: &mut [f32], _rng: &mut Rng) {
    let f = spec(fmt);
    let bl = Blocking::new(shape, f.block, f.skip);
    let pow2 = |e: i64| 2f64.powi(e as i32) as f32;
    let shift = pow2(f.m);
    reference_blocks(&bl, x, out, |v, pmax| {
        if pmax.is_nan() {
            return f32::NAN;
        }
        let e = ((pmax as f64).log2().ceil() as i64).clamp(f.e_min, f.e_max);
        let mantissa = (v.abs() + 1e-9) / pow2(e);
        let mi = (mantissa * shift).round_ties_even().clamp(0.0, shift - 1.0);
        mase_mask(v, sign(v + 1e-9) * pow2(e) * (mi / shift))
    });
}

/// Whether `v` fits the grid of exponent `e`: `|v| = mi * 2^(e - M)` with `mi < 2^M`, or `|v| <= 1e-8`.
fn fits(v: f32, e: i64, m: i64) -> bool {
    if !v.is_finite() {
        return false;
    }
    if close_to_zero(v) {
        return true;
    }
    let t = v.abs() as f64 * 2f64.powi((m - e) as i32);
    t.fract() == 0.0 && t <= 2f64.powi(m as i32) - 1.0
}

/// Representable as a block of its own: on the grid of some exponent in range.
pub(crate) fn representable(fmt: &QuantFormat, v: f32) -> bool {
    let f = spec(fmt);
    v.is_finite() && fits(v, finest_exponent(v.abs(), &f), f.m)
}

/// The smallest exponent in range whose grid reaches `pmax`: the finest grid that can hold the
/// block, on which every coarser grid's values also lie.
fn finest_exponent(pmax: f32, f: &Spec<'_>) -> i64 {
    if pmax == 0.0 || !pmax.is_finite() {
        return f.e_min;
    }
    let c = ceil_log2(pmax);
    let top = |e: i64| (2f64.powi(f.m as i32) - 1.0) * 2f64.powi((e - f.m) as i32);
    let e = if pmax as f64 <= top(c) { c } else { c + 1 };
    e.clamp(f.e_min, f.e_max)
}

pub(crate) fn on_grid(fmt: &QuantFormat, x: &[f32], shape: &[usize]) -> Vec<usize> {
    let f = spec(fmt);
    let bl = Blocking::new(shape, f.block, f.skip);
    let mut bad = Vec::new();
    for b in 0..bl.count() {
        let pmax = bl.runs(b).flat_map(|r| x[r].iter()).filter(|v| !close_to_zero(**v)).fold(0.0f32, |m, v| m.max(v.abs()));
        let e = finest_exponent(pmax, &f);
        for r in bl.runs(b) {
            bad.extend(r.filter(|&i| !fits(x[i], e, f.m)));
        }
    }
    bad.sort_unstable();
    bad
}
