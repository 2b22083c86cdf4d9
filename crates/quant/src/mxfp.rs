//! `mxfp`: OCP microscaling floating point, MASE's `mxfp` quantizer
//! (`mxfp_quantizer(x, block_size, element_exp_bits, element_frac_bits, block_dim)`) computed as
//! the OCP MX v1.0 specification defines it, for its five element formats. Blocks and their E8M0
//! scale are in [`crate::mx`].
//!
//! | element | exponent_width, frac_width | bias | emax_elem | largest value | smallest subnormal |
//! |---|---|---|---|---|---|
//! | FP8 E4M3 | 4, 3 | 7 | 8 | 448 (no inf; `S.1111.111` is NaN) | 2^-9 |
//! | FP8 E5M2 | 5, 2 | 15 | 15 | 57344 (IEEE-like, with inf) | 2^-16 |
//! | FP6 E3M2 | 3, 2 | 3 | 4 | 28 (no inf or NaN) | 2^-4 |
//! | FP6 E2M3 | 2, 3 | 1 | 2 | 7.5 (no inf or NaN) | 2^-3 |
//! | FP4 E2M1 | 2, 1 | 1 | 2 | 6 (no inf or NaN) | 2^-1 |
//!
//! ```text
//! X = 2^clamp(floor(log2 max|x|) - emax_elem, -127, 127)
//! v = x / X;  e = max(floor(log2 |v|), 1 - bias);  P = sign(v) * min(round(|v| / 2^(e-M)) * 2^(e-M), max)
//! out = P * X
//! ```
//! Rounding is half to even and saturates at the element's largest value (the specification's
//! conversion with saturation; an element never becomes inf or NaN from a finite input), with
//! subnormal elements. NaN or ±inf in a block makes the block NaN (see [`crate::mx`]).
//!
//! Departures from MASE's `mxfp`, on purpose: MASE takes the scale `2^ceil(log2(max|x| + 1e-9))`
//! and rounds elements with its `minifloat_denorm` quantizer (no implicit leading bit: its E4M3
//! tops out at `7/8 * 2^8 = 224`), which are not the OCP element formats; other exponent and
//! mantissa widths than the five above are refused here.

use crate::error::param;
pub(crate) use crate::mx::scope;
use crate::mx::{self, check_axis, validate_block, AxisBlocks};
use crate::round::rne;
use crate::Result;
use mase_ir::{QuantFormat, Rng};

/// The format's entry in `registry::FORMATS`: its name, its one-line doc, and the functions
/// below (shared ones imported under the names the registry reads).
pub(crate) const NAME: &str = "mxfp";
pub(crate) const DOC: &str = "exponent_width, frac_width, block_size, block_dim: OCP MXFP8 (E4M3, E5M2), MXFP6 (E3M2, E2M3), MXFP4 (E2M1), X = 2^(floor(log2 max|x|) - emax_elem) (E8M0) per block, elements rounded half to even, saturating";

/// The OCP element formats: `(exponent_width, frac_width, largest value)`.
const ELEMENTS: [(u32, u32, f32); 5] = [(4, 3, 448.0), (5, 2, 57344.0), (3, 2, 28.0), (2, 3, 7.5), (2, 1, 6.0)];

#[derive(Clone, Copy)]
struct Spec {
    /// Mantissa (fraction) bits.
    m: i32,
    /// The smallest normal exponent, `1 - bias`.
    emin: i32,
    /// The exponent of the largest power of two.
    emax: i32,
    /// The largest value.
    max: f32,
    blocks: (usize, i64),
}

fn spec(fmt: &QuantFormat) -> Spec {
    match fmt {
        QuantFormat::Mxfp { exponent_width, frac_width, block_size, block_dim } => {
            let max = ELEMENTS.iter().find(|(e, m, _)| e == exponent_width && m == frac_width).map_or(f32::NAN, |t| t.2);
            // Only the five OCP element formats pass `validate`; the others get a NaN maximum.
            let bias = (1i32 << exponent_width.saturating_sub(1).min(16)) - 1;
            Spec {
                m: *frac_width as i32,
                emin: 1 - bias,
                emax: crate::round::floor_log2(max) as i32,
                max,
                blocks: (*block_size, *block_dim),
            }
        }
        _ => unreachable!("mxfp called with {}", fmt.type_name()),
    }
}

pub(crate) fn validate(fmt: &QuantFormat) -> Result<()> {
    let QuantFormat::Mxfp { exponent_width, frac_width, block_size, .. } = fmt else {
        unreachable!("mxfp called with {}", fmt.type_name())
    };
    if !ELEMENTS.iter().any(|(e, m, _)| e == exponent_width && m == frac_width) {
        return Err(param(
            NAME,
            "exponent_width",
            format!("{exponent_width} with frac_width = {frac_width}"),
            "must name an OCP MX element format: E4M3 (4, 3), E5M2 (5, 2), E3M2 (3, 2), E2M3 (2, 3) or E2M1 (2, 1)",
        ));
    }
    validate_block(NAME, *block_size)
}

pub(crate) fn validate_shape(fmt: &QuantFormat, shape: &[usize]) -> Result<()> {
    let QuantFormat::Mxfp { block_dim, .. } = fmt else { unreachable!("mxfp called with {}", fmt.type_name()) };
    check_axis(NAME, *block_dim, shape)
}

/// One element of a scaled finite value `v`, from the bits of `|v|`: its exponent, clamped below
/// at the subnormal exponent, fixes the step `2^(e-M)`; round half to even; saturate.
#[inline(always)]
fn elem_fn(f: Spec) -> impl Fn(f32) -> f32 + Copy {
    move |v: f32| {
        let a = v.abs();
        // floor(log2 a) for a normal `a`; below `emin` (f32 subnormals and zero included) the
        // clamp decides. `a` stays below 2^(emax + 1) by the choice of the block scale.
        let e = ((a.to_bits() >> 23) as i32 - 127).clamp(f.emin, f.emax);
        let step = f32::from_bits(((e - f.m + 127) as u32) << 23);
        let inv = f32::from_bits(((f.m - e + 127) as u32) << 23);
        let q = rne(a * inv) * step;
        (if q > f.max { f.max } else { q }).copysign(v)
    }
}

/// One element as the specification writes it, in `f64`.
fn elem_reference(f: &Spec, v: f64) -> f64 {
    if v == 0.0 {
        return v;
    }
    let e = (v.abs().log2().floor() as i32).max(f.emin);
    let step = 2f64.powi(e - f.m);
    let q = ((v.abs() / step).round_ties_even() * step).min(f.max as f64);
    q.copysign(v)
}

pub(crate) fn kernel(fmt: &QuantFormat, x: &[f32], shape: &[usize], out: &mut [f32], _rng: &mut Rng) {
    let f = spec(fmt);
    let ab = AxisBlocks::new(shape, f.blocks.0, f.blocks.1);
    mx::run(&ab, x, out, f.emax as i64, elem_fn(f));
}

pub(crate) fn reference(fmt: &QuantFormat, x: &[f32], shape: &[usize], out: &mut [f32], _rng: &mut Rng) {
    let f = spec(fmt);
    let ab = AxisBlocks::new(shape, f.blocks.0, f.blocks.1);
    mx::reference(&ab, x, out, f.emax as i64, |v| elem_reference(&f, v));
}

/// Some block scale holds `v`: `v / X` is an element value.
pub(crate) fn representable(fmt: &QuantFormat, v: f32) -> bool {
    let f = spec(fmt);
    mx::representable(v, |e| elem_reference(&f, e) == e)
}

pub(crate) fn on_grid(fmt: &QuantFormat, x: &[f32], shape: &[usize]) -> Vec<usize> {
    let f = spec(fmt);
    let ab = AxisBlocks::new(shape, f.blocks.0, f.blocks.1);
    mx::on_grid(&ab, x, f.emax as i64, elem_fn(f))
}
