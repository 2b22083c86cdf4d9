//! `mxint`: OCP microscaling integer (MXINT8 at `width = 8`), MASE's `mxint` quantizer
//! (`mxint_quantizer(x, block_size, element_bits, block_dim)`) computed as the OCP MX v1.0
//! specification defines it. Blocks and their E8M0 scale are in [`crate::mx`].
//!
//! ```text
//! X = 2^clamp(floor(log2 max|x|), -127, 127)        (emax_elem = 0)
//! F = width - 2;  P = clamp(round(x / X * 2^F), -(2^(width-1) - 1), 2^(width-1) - 1) / 2^F
//! out = P * X
//! ```
//! MXINT8 elements are 8-bit two's complement with an implicit scale of `2^-6` (a sign bit, one
//! integer bit and six fraction bits), so `P` lies in `[-127/64, 127/64]`; other widths keep one
//! integer bit (the specification defines only `width = 8`; MASE also uses 4). The code `-128`
//! (`-2.0`) is left out so the range is symmetric, as in the specification's reference library.
//!
//! Departures from MASE's `mxint`, on purpose: MASE takes `2^ceil(log2 max|x|)` as the scale and
//! `2^(width-1)` codes below it, which is the same grid when the block maximum is not a power of
//! two, but clips a power-of-two maximum to `127/128` of itself and lets values round to the code
//! `-2^(width-1)`; and MASE needs the axis length to be a multiple of the block (here the last
//! block may be shorter).
//! NaN or ±inf in a block makes the block NaN (see [`crate::mx`]).

use crate::error::param;
pub(crate) use crate::mx::scope;
use crate::mx::{self, check_axis, validate_block, AxisBlocks};
use crate::round::{clamp_nan, exp2i, rne};
use crate::Result;
use mase_ir::{QuantFormat, Rng};

/// The format's entry in `registry::FORMATS`: its name, its one-line doc, and the functions
/// below (shared ones imported under the names the registry reads).
pub(crate) const NAME: &str = "mxint";
pub(crate) const DOC: &str = "width, block_size, block_dim: OCP MXINT, blocks along block_dim share X = 2^(floor(log2 max|x|)) (E8M0); clamp(round(x / X * 2^(w-2)), ±(2^(w-1) - 1)) / 2^(w-2) * X";

/// The largest exponent of the element format: its values lie below `2^1`.
const EMAX_ELEM: i64 = 0;

struct Spec {
    /// Fraction bits, `width - 2`.
    frac: i64,
    /// The largest code, `2^(width-1) - 1`.
    hi: f32,
    blocks: (usize, i64),
}

fn spec(fmt: &QuantFormat) -> Spec {
    match fmt {
        QuantFormat::Mxint { width, block_size, block_dim } => {
            // `validate` keeps the width in 2..=8; the clamp keeps the shift defined before it runs.
            Spec { frac: *width as i64 - 2, hi: ((1i64 << ((*width).clamp(1, 32) - 1)) - 1) as f32, blocks: (*block_size, *block_dim) }
        }
        _ => unreachable!("mxint called with {}", fmt.type_name()),
    }
}

pub(crate) fn validate(fmt: &QuantFormat) -> Result<()> {
    let QuantFormat::Mxint { width, block_size, .. } = fmt else { unreachable!("mxint called with {}", fmt.type_name()) };
    if !(2..=8).contains(width) {
        return Err(param(NAME, "width", width, "must be between 2 and 8 (MXINT8 is 8)"));
    }
    validate_block(NAME, *block_size)
}

pub(crate) fn validate_shape(fmt: &QuantFormat, shape: &[usize]) -> Result<()> {
    check_axis(NAME, spec(fmt).blocks.1, shape)
}

/// One element: `clamp(round(v * 2^F), -hi, hi) / 2^F` of a scaled value `v`.
#[inline(always)]
fn elem_fn(f: &Spec) -> impl Fn(f32) -> f32 + Copy {
    let (up, down, hi) = (exp2i(f.frac), exp2i(-f.frac), f.hi);
    move |v: f32| clamp_nan(rne(v * up), -hi, hi) * down
}

/// One element as the specification writes it, in `f64`.
fn elem_reference(f: &Spec, v: f64) -> f64 {
    let code = (v * 2f64.powi(f.frac as i32)).round_ties_even().clamp(-f.hi as f64, f.hi as f64);
    code / 2f64.powi(f.frac as i32)
}

pub(crate) fn kernel(fmt: &QuantFormat, x: &[f32], shape: &[usize], out: &mut [f32], _rng: &mut Rng) {
    let f = spec(fmt);
    let ab = AxisBlocks::new(shape, f.blocks.0, f.blocks.1);
    mx::run(&ab, x, out, EMAX_ELEM, elem_fn(&f));
}

pub(crate) fn reference(fmt: &QuantFormat, x: &[f32], shape: &[usize], out: &mut [f32], _rng: &mut Rng) {
    let f = spec(fmt);
    let ab = AxisBlocks::new(shape, f.blocks.0, f.blocks.1);
    mx::reference(&ab, x, out, EMAX_ELEM, |v| elem_reference(&f, v));
}

/// Some block scale holds `v`: `v / X` is a code over `2^F`.
pub(crate) fn representable(fmt: &QuantFormat, v: f32) -> bool {
    let f = spec(fmt);
    mx::representable(v, |e| elem_reference(&f, e) == e)
}

pub(crate) fn on_grid(fmt: &QuantFormat, x: &[f32], shape: &[usize]) -> Vec<usize> {
    let f = spec(fmt);
    let ab = AxisBlocks::new(shape, f.blocks.0, f.blocks.1);
    mx::on_grid(&ab, x, EMAX_ELEM, elem_fn(&f))
}
