//! QONNX `IntQuant` (formerly `Quant`), as its reference implementation computes it:
//!
//! ```text
//! y = x / scale + zero_point
//! y = clamp(y, min_int, max_int)          # clamp first ...
//! y = round(y)                            # ... then round, with the node's rounding mode
//! out = (y - zero_point) * scale
//! ```
//! `min_int` = `-2^(b-1) + narrow` when signed, else 0; `max_int` = `2^(b-1) - 1` when signed,
//! else `2^b - 1 - narrow`. A signed 1-bit IntQuant is bipolar (`y >= 0 ? 1 : -1`), as QONNX's
//! executor treats it. `scale` and `zero_point` broadcast against the data (per tensor or per
//! channel). NaN stays NaN (clamping keeps it), ±inf saturate.

use crate::bcast::{check, map_runs, value_at};
use crate::error::param;
use crate::registry::{Reach, Scope};
use crate::round::{rne, round_mode, with_rounding};
use crate::Result;
use mase_ir::{QuantFormat, Rng, RoundingMode, Tensor};

/// The format's entry in `registry::FORMATS`: its name, its one-line doc, and the functions
/// below (shared ones imported under the names the registry reads).
pub(crate) const NAME: &str = "int_quant";
pub(crate) const DOC: &str =
    "scale, zero_point, bit_width, signed, narrow, rounding_mode: (round(clamp(x / s + z, min, max)) - z) * s (QONNX IntQuant)";

struct Spec<'a> {
    scale: &'a Tensor,
    zp: &'a Tensor,
    lo: f32,
    hi: f32,
    bipolar: bool,
    mode: RoundingMode,
}

/// QONNX's `min_int(signed, narrow, bit_width)`.
pub fn min_int(signed: bool, narrow: bool, bit_width: u32) -> i64 {
    match (signed, narrow) {
        (true, true) => -(1i64 << (bit_width - 1)) + 1,
        (true, false) => -(1i64 << (bit_width - 1)),
        (false, _) => 0,
    }
}

/// QONNX's `max_int(signed, narrow, bit_width)`.
pub fn max_int(signed: bool, narrow: bool, bit_width: u32) -> i64 {
    match (signed, narrow) {
        (false, false) => (1i64 << bit_width) - 1,
        (false, true) => (1i64 << bit_width) - 2,
        (true, _) => (1i64 << (bit_width - 1)) - 1,
    }
}

fn spec(fmt: &QuantFormat) -> Spec<'_> {
    match fmt {
        QuantFormat::IntQuant { scale, zero_point, bit_width, signed, narrow, rounding_mode } => {
            let b = *bit_width as u32;
            Spec {
                scale,
                zp: zero_point,
                lo: min_int(*signed, *narrow, b) as f32,
                hi: max_int(*signed, *narrow, b) as f32,
                bipolar: b == 1 && *signed,
                mode: *rounding_mode,
            }
        }
        _ => unreachable!("int_quant called with {}", fmt.type_name()),
    }
}

/// Checks a QONNX parameter tensor: values matching its shape, at least one, all finite, and
/// positive where `positive` is asked for.
pub(crate) fn validate_param(format: &'static str, field: &'static str, t: &Tensor, positive: bool) -> Result<()> {
    check(format, field, t, &t.shape)?;
    if t.data.is_empty() {
        return Err(param(format, field, "[]", "needs at least one value"));
    }
    if let Some(v) = t.data.iter().find(|v| !v.is_finite() || (positive && **v <= 0.0)) {
        return Err(param(format, field, v, if positive { "values must be finite and positive" } else { "values must be finite" }));
    }
    Ok(())
}

/// Per value with a per-tensor scale; a per-channel one ties values to positions.
pub(crate) fn scope(fmt: &QuantFormat) -> Scope {
    let s = spec(fmt);
    let reach = if s.scale.numel() == 1 && s.zp.numel() == 1 { Reach::Value } else { Reach::Tensor };
    Scope { reach, random: false }
}

pub(crate) fn validate(fmt: &QuantFormat) -> Result<()> {
    let QuantFormat::IntQuant { scale, zero_point, bit_width, .. } = fmt else { unreachable!("int_quant called with {}", fmt.type_name()) };
    if !(bit_width.fract() == 0.0 && (1.0..=32.0).contains(bit_width)) {
        return Err(param("int_quant", "bit_width", bit_width, "must be an integer between 1 and 32"));
    }
    validate_param("int_quant", "scale", scale, true)?;
    validate_param("int_quant", "zero_point", zero_point, false)
}

pub(crate) fn validate_shape(fmt: &QuantFormat, shape: &[usize]) -> Result<()> {
    let f = spec(fmt);
    check("int_quant", "scale", f.scale, shape)?;
    check("int_quant", "zero_point", f.zp, shape)
}

/// One value with its scale and zero point, in the reference's order of operations.
#[inline(always)]
fn one(v: f32, s: f32, z: f32, f: &Spec<'_>, round: impl Fn(f32) -> f32) -> f32 {
    let y = v / s + z;
    let y = if f.bipolar {
        if y >= 0.0 {
            1.0
        } else {
            -1.0
        }
    } else {
        let y = if y > f.hi { f.hi } else { y };
        let y = if y < f.lo { f.lo } else { y };
        round(y)
    };
    (y - z) * s
}

fn run(f: &Spec<'_>, x: &[f32], shape: &[usize], out: &mut [f32], round: impl Fn(f32) -> f32 + Copy) {
    let (s, z) = (&f.scale.data, &f.zp.data);
    if z.len() == 1 || f.zp.shape == f.scale.shape {
        // The zero point is per tensor or indexed as the scale, so it follows the scale's runs.
        map_runs(&f.scale.shape, shape, x, out, |v, k| one(v, s[k], if z.len() == 1 { z[0] } else { z[k] }, f, round));
    } else {
        for (i, (o, &v)) in out.iter_mut().zip(x).enumerate() {
            *o = one(v, value_at(f.scale, shape, i), value_at(f.zp, shape, i), f, round);
        }
    }
}

pub(crate) fn kernel(fmt: &QuantFormat, x: &[f32], shape: &[usize], out: &mut [f32], _rng: &mut Rng) {
    let f = spec(fmt);
    with_rounding!(f.mode, |round| run(&f, x, shape, out, round))
}

pub(crate) fn reference(fmt: &QuantFormat, x: &[f32], shape: &[usize], out: &mut [f32], _rng: &mut Rng) {
    let f = spec(fmt);
    for (i, &v) in x.iter().enumerate() {
        let scale = value_at(f.scale, shape, i);
        let zeropt = value_at(f.zp, shape, i);
        let mut y_int = v / scale;
        y_int += zeropt;
        if f.bipolar {
            y_int = if y_int >= 0.0 { 1.0 } else { -1.0 };
        } else {
            if y_int > f.hi {
                y_int = f.hi;
            }
            if y_int < f.lo {
                y_int = f.lo;
            }
            y_int = round_mode(f.mode, y_int);
        }
        out[i] = (y_int - zeropt) * scale;
    }
}

/// The (scale, zero point) pairs that apply somewhere in a tensor.
fn pairs<'a>(f: &'a Spec<'a>) -> Box<dyn Iterator<Item = (f32, f32)> + 'a> {
    let (s, z) = (&f.scale.data, &f.zp.data);
    if z.len() == 1 {
        Box::new(s.iter().map(move |&s| (s, z[0])))
    } else if f.zp.shape == f.scale.shape {
        Box::new(s.iter().copied().zip(z.iter().copied()))
    } else {
        Box::new(s.iter().flat_map(move |&s| z.iter().map(move |&z| (s, z))))
    }
}

/// A finite value that quantizing again with round-to-nearest leaves unchanged, for some
/// channel's scale and zero point. The outputs are float computations, so "on the grid" means
/// "re-quantizing finds the same grid point"; nearest rounding does so even where `v / scale`
/// is off by a rounding step, whatever the node's own rounding mode.
pub(crate) fn representable(fmt: &QuantFormat, v: f32) -> bool {
    let f = spec(fmt);
    v.is_finite() && pairs(&f).any(|(s, z)| one(v, s, z, &f, rne) == v)
}

pub(crate) fn on_grid(fmt: &QuantFormat, x: &[f32], shape: &[usize]) -> Vec<usize> {
    let f = spec(fmt);
    (0..x.len())
        .filter(|&i| {
            let (s, z) = (value_at(f.scale, shape, i), value_at(f.zp, shape, i));
            !(x[i].is_finite() && one(x[i], s, z, &f, rne) == x[i])
        })
        .collect()
}
