//! QONNX `FloatQuant`: arbitrary-precision minifloat, as its reference implementation computes it.
//!
//! ```text
//! X = x / scale
//! es = max(floor(log2(|X| + tiny)) - M, 1 - bias - M)        # tiny: smallest normal f32
//! xq = 2^es * round(X / 2^es)                                  # rounding_mode
//! max = min((2 - 2^-M) * 2^(2^E - 1 - bias), max_val)
//! xq = clamp(xq, -max, max)
//! not saturating: values beyond ±max become ±inf (has_inf) or NaN (has_nan)
//! out = xq * scale
//! ```
//! Subnormals are always produced (`has_subnormal` only informs back ends, as in QONNX). NaN stays
//! NaN, and ±inf give NaN, as in the reference (`inf / inf`).

use crate::bcast::{check, map_runs, value_at};
use crate::error::param;
use crate::int_quant::validate_param;
use crate::registry::{Reach, Scope};
use crate::round::{exp2i, floor_log2, rne, round_mode, with_rounding};
use crate::Result;
use mase_ir::{QuantFormat, Rng, RoundingMode, Tensor};

/// The format's entry in `registry::FORMATS`: its name, its one-line doc, and the functions
/// below (shared ones imported under the names the registry reads).
pub(crate) const NAME: &str = "float_quant";
pub(crate) const DOC: &str = "scale, exponent_bitwidth, mantissa_bitwidth, exponent_bias, max_val, ...: 2^es * round(x / 2^es), es = max(floor(log2|x|) - M, 1 - bias - M), clamped (QONNX FloatQuant)";

struct Spec<'a> {
    scale: &'a Tensor,
    m: i64,
    /// `1 - bias - M`: the exponent of the smallest subnormal step.
    es_min: i64,
    max: f32,
    saturation: bool,
    has_inf: bool,
    has_nan: bool,
    mode: RoundingMode,
}

fn spec(fmt: &QuantFormat) -> Spec<'_> {
    match fmt {
        QuantFormat::FloatQuant {
            scale,
            exponent_bitwidth,
            mantissa_bitwidth,
            exponent_bias,
            max_val,
            has_inf,
            has_nan,
            saturation,
            rounding_mode,
            ..
        } => {
            let (e, m, b) = (*exponent_bitwidth as i64, *mantissa_bitwidth as i64, *exponent_bias as i64);
            let computed = (2.0 - 2f64.powi(-(m as i32))) * 2f64.powi(((1i64 << e) - 1 - b) as i32);
            Spec {
                scale,
                m,
                es_min: 1 - b - m,
                max: (computed.min(*max_val as f64)) as f32,
                saturation: *saturation,
                has_inf: *has_inf,
                has_nan: *has_nan,
                mode: *rounding_mode,
            }
        }
        _ => unreachable!("float_quant called with {}", fmt.type_name()),
    }
}

/// Per value with a per-tensor scale; a per-channel one ties values to positions.
pub(crate) fn scope(fmt: &QuantFormat) -> Scope {
    let reach = if spec(fmt).scale.numel() == 1 { Reach::Value } else { Reach::Tensor };
    Scope { reach, random: false }
}

pub(crate) fn validate(fmt: &QuantFormat) -> Result<()> {
    let QuantFormat::FloatQuant {
        scale,
        exponent_bitwidth: e,
        mantissa_bitwidth: m,
        exponent_bias: b,
        max_val,
        has_inf,
        has_nan,
        saturation,
        ..
    } = fmt
    else {
        unreachable!("float_quant called with {}", fmt.type_name())
    };
    if !(e.fract() == 0.0 && (1.0..=8.0).contains(e)) {
        return Err(param("float_quant", "exponent_bitwidth", e, "must be an integer between 1 and 8"));
    }
    if !(m.fract() == 0.0 && (0.0..=23.0).contains(m)) {
        return Err(param("float_quant", "mantissa_bitwidth", m, "must be an integer between 0 and 23"));
    }
    if !(b.is_finite() && b.fract() == 0.0) {
        return Err(param("float_quant", "exponent_bias", b, "must be an integer"));
    }
    let top = (1i64 << *e as i64) - 1 - *b as i64;
    if top > 127 || 1 - (*b as i64) - (*m as i64) < -149 {
        return Err(param("float_quant", "exponent_bias", b, "puts the format's range outside what an f32 holds (exponents -149 to 127)"));
    }
    if !(max_val.is_finite() && *max_val > 0.0) {
        return Err(param("float_quant", "max_val", max_val, "must be finite and positive"));
    }
    if !saturation && !has_inf && !has_nan {
        return Err(param(
            "float_quant",
            "saturation",
            "false",
            "a non-saturating format needs `has_inf` or `has_nan` for out-of-range values",
        ));
    }
    validate_param("float_quant", "scale", scale, true)
}

pub(crate) fn validate_shape(fmt: &QuantFormat, shape: &[usize]) -> Result<()> {
    check("float_quant", "scale", spec(fmt).scale, shape)
}

/// One value with its scale.
#[inline(always)]
fn one(v: f32, s: f32, f: &Spec<'_>, round: impl Fn(f32) -> f32) -> f32 {
    let x = v / s;
    if x.is_nan() {
        return x;
    }
    let es = (floor_log2(x.abs() + f32::MIN_POSITIVE) - f.m).max(f.es_min);
    let is = exp2i(es);
    let xq = is * round(x / is);
    let inf = xq.is_infinite();
    let (p, n) = (xq > f.max, xq < -f.max);
    let mut xq = if p {
        f.max
    } else if n {
        -f.max
    } else {
        xq
    };
    if !f.saturation {
        if f.has_inf {
            xq = if p {
                f32::INFINITY
            } else if n {
                f32::NEG_INFINITY
            } else {
                xq
            };
        } else if f.has_nan && (p || n || inf) {
            xq = f32::NAN;
        }
    }
    xq * s
}

pub(crate) fn kernel(fmt: &QuantFormat, x: &[f32], shape: &[usize], out: &mut [f32], _rng: &mut Rng) {
    let f = spec(fmt);
    let s = &f.scale.data;
    with_rounding!(f.mode, |round| map_runs(&f.scale.shape, shape, x, out, |v, k| one(v, s[k], &f, round)))
}

pub(crate) fn reference(fmt: &QuantFormat, x: &[f32], shape: &[usize], out: &mut [f32], _rng: &mut Rng) {
    let f = spec(fmt);
    for (i, &v) in x.iter().enumerate() {
        let scale = value_at(f.scale, shape, i);
        let x = v / scale;
        let internal_scale = ((x.abs() + f32::MIN_POSITIVE) as f64).log2().floor() - f.m as f64;
        // np.maximum propagates NaN.
        let internal_scale = if internal_scale.is_nan() { internal_scale } else { internal_scale.max(f.es_min as f64) };
        let internal_scale = internal_scale.exp2() as f32;
        let mut x_q = internal_scale * round_mode(f.mode, x / internal_scale);
        let inf_mask = x_q.is_infinite();
        let p_max_val_mask = x_q > f.max;
        let n_max_val_mask = x_q < -f.max;
        if !x_q.is_nan() {
            x_q = x_q.clamp(-f.max, f.max);
        }
        if !f.saturation {
            if f.has_inf {
                if p_max_val_mask {
                    x_q = f32::INFINITY;
                }
                if n_max_val_mask {
                    x_q = f32::NEG_INFINITY;
                }
            } else if p_max_val_mask || n_max_val_mask || inf_mask {
                x_q = f32::NAN;
            }
        }
        out[i] = x_q * scale;
    }
}

/// A value that quantizing again with round-to-nearest leaves unchanged, for some channel's
/// scale: a finite grid value, or ±inf for a non-saturating format with infinities. The grid does
/// not depend on the rounding mode, and nearest rounding finds a grid point again even where
/// `v / scale` is off by a rounding step.
pub(crate) fn representable(fmt: &QuantFormat, v: f32) -> bool {
    let f = spec(fmt);
    fits(v, &f, f.scale.data.iter().copied())
}

fn fits(v: f32, f: &Spec<'_>, mut scales: impl Iterator<Item = f32>) -> bool {
    if v.is_infinite() {
        return !f.saturation && f.has_inf;
    }
    v.is_finite() && scales.any(|s| one(v, s, f, rne) == v)
}

pub(crate) fn on_grid(fmt: &QuantFormat, x: &[f32], shape: &[usize]) -> Vec<usize> {
    let f = spec(fmt);
    (0..x.len())
        .filter(|&i| {
            let s = value_at(f.scale, shape, i);
            !fits(x[i], &f, std::iter::once(s))
        })
        .collect()
}
