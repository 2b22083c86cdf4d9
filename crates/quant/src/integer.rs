//! `integer` (alias `fixed`): signed or unsigned fixed point (doc/mase-semantics.md#format-integer).
//!
//! `out = clamp(round(x * 2^frac), lo, hi) / 2^frac` with round half to even, `lo, hi` =
//! `-2^(w-1), 2^(w-1) - 1` (signed) or `0, 2^w - 1` (unsigned). NaN stays NaN; ±inf saturate.
//! Bounds are taken in `f32`, so above 24 bits `hi` is rounded as PyTorch rounds it.

use crate::error::param;
use crate::round::{clamp_nan, exp2i, rne};
use crate::Result;
use mase_ir::{QuantFormat, Rng};

/// The format's entry in `registry::FORMATS`: its name, its one-line doc, and the functions
/// below (shared ones imported under the names the registry reads).
pub(crate) const NAME: &str = "integer";
pub(crate) const DOC: &str = "width, frac_width, signed: clamp(round_half_even(x * 2^frac), lo, hi) / 2^frac";
pub(crate) use crate::registry::{any_shape as validate_shape, on_grid_elementwise as on_grid, value_scope as scope};

/// A fixed-point format: `width` bits of which `frac_width` lie after the binary point. The
/// integer executor works on its codes (`round(x * 2^frac)`, clamped).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fixed {
    pub width: u32,
    pub frac_width: i32,
    pub signed: bool,
}

impl Fixed {
    /// The fixed-point format of an `Integer` format, or `None` for other formats.
    pub fn of(fmt: &QuantFormat) -> Option<Fixed> {
        match *fmt {
            QuantFormat::Integer { width, frac_width, signed } => Some(Fixed { width, frac_width, signed }),
            _ => None,
        }
    }

    /// The smallest code.
    pub fn lo(self) -> i64 {
        if self.signed {
            -(1i64 << (self.width - 1))
        } else {
            0
        }
    }

    /// The largest code.
    pub fn hi(self) -> i64 {
        if self.signed {
            (1i64 << (self.width - 1)) - 1
        } else {
            (1i64 << self.width) - 1
        }
    }

    /// The code of `x` (`clamp(round(x * 2^frac), lo, hi)`), or `None` for NaN.
    pub fn code(self, x: f32) -> Option<i64> {
        let v = rne(x * exp2i(self.frac_width as i64));
        if v.is_nan() {
            return None;
        }
        // Clamping in f64 first keeps ±inf and huge values inside i64.
        Some((v as f64).clamp(self.lo() as f64, self.hi() as f64) as i64)
    }

    /// The value of a code, `code / 2^frac`, rounded to `f32` (exact below 2^24).
    pub fn value(self, code: i64) -> f32 {
        (code as f64 * 2f64.powi(-self.frac_width)) as f32
    }
}

fn spec(fmt: &QuantFormat) -> Fixed {
    Fixed::of(fmt).unwrap_or_else(|| unreachable!("integer called with {}", fmt.type_name()))
}

/// Bounds as the quantizer uses them: `f32`s.
fn bounds(f: Fixed) -> (f32, f32) {
    (f.lo() as f32, f.hi() as f32)
}

pub(crate) fn validate(fmt: &QuantFormat) -> Result<()> {
    let f = spec(fmt);
    if !(1..=32).contains(&f.width) {
        return Err(param("integer", "width", f.width, "must be between 1 and 32"));
    }
    // A `frac_width` above `width` is well defined (every bit is fractional and the range shrinks
    // below 1); MASE's search examples sample such formats, so only `lint_format` refuses them.
    if f.frac_width > 64 {
        return Err(param("integer", "frac_width", f.frac_width, "must be at most 64"));
    }
    if f.frac_width < -64 {
        return Err(param("integer", "frac_width", f.frac_width, "must be at least -64"));
    }
    Ok(())
}

pub(crate) fn kernel(fmt: &QuantFormat, x: &[f32], _shape: &[usize], out: &mut [f32], _rng: &mut Rng) {
    let f = spec(fmt);
    let (lo, hi) = bounds(f);
    let (s, inv) = (exp2i(f.frac_width as i64), exp2i(-(f.frac_width as i64)));
    // Multiplying by the exact inverse of a power of two is the same as dividing by it.
    for (o, &v) in out.iter_mut().zip(x) {
        *o = clamp_nan(rne(v * s), lo, hi) * inv;
    }
}

pub(crate) fn reference(fmt: &QuantFormat, x: &[f32], _shape: &[usize], out: &mut [f32], _rng: &mut Rng) {
    let f = spec(fmt);
    let (lo, hi) = bounds(f);
    let scale = 2f32.powi(f.frac_width);
    for (o, &v) in out.iter_mut().zip(x) {
        *o = (v * scale).round_ties_even().clamp(lo, hi) / scale;
    }
}

/// `v * 2^frac` is an integer inside the bounds.
pub(crate) fn representable(fmt: &QuantFormat, v: f32) -> bool {
    let f = spec(fmt);
    let (lo, hi) = bounds(f);
    let t = v as f64 * 2f64.powi(f.frac_width);
    v.is_finite() && t.fract() == 0.0 && t >= lo as f64 && t <= hi as f64
}
