//! `block_minifloat`: a minifloat whose exponent bias is shared by a block (doc/mase-semantics.md#format-block_minifloat).
//!
//! ```text
//! bias = clamp(floor(log2(max |x| over the block)), 0, 2^exponent_bias_width - 1)
//! out = minifloat_ieee(x, width, exponent_width, exponent_bias = bias)
//! ```
//! As in MASE the bias is non-negative and subtracted, so blocks with large values get a range
//! shifted *down*; reproduced as written. A NaN makes its whole block NaN, values near zero
//! included (the bias is NaN); ±inf give NaN as in `minifloat_ieee`, as in torch.

use crate::block::{on_grid_shared_bias, reference_blocks, run_blocks, validate_bias_width, validate_block_size, Blocking};
use crate::minifloat_denorm::validate_mini;
use crate::minifloat_ieee::{ieee_one, ieee_reference, ieee_representable};
use crate::round::{exp2i, exponent_range, floor_log2};
use crate::Result;
use mase_ir::{QuantFormat, Rng};

/// The format's entry in `registry::FORMATS`: its name, its one-line doc, and the functions
/// below (shared ones imported under the names the registry reads).
pub(crate) const NAME: &str = "block_minifloat";
pub(crate) const DOC: &str =
    "width, exponent_width, exponent_bias_width, block_size: minifloat_ieee with bias clamp(floor(log2 max|x|), 0, 2^ebw - 1) per block";
pub(crate) use crate::registry::{any_shape as validate_shape, tensor_scope as scope};

struct Spec<'a> {
    m: i64,
    e: i64,
    bias_max: i64,
    block: &'a [usize],
    skip: bool,
}

impl Spec<'_> {
    /// Exponent range for a block bias.
    fn range(&self, bias: i64) -> (i64, i64) {
        exponent_range(self.e, Some(bias))
    }

    /// Whether the block bias `bias` represents `v`.
    fn fits(&self, v: f32, bias: i64) -> bool {
        let (lo, hi) = self.range(bias);
        ieee_representable(v, self.m, lo, hi)
    }

    /// The bias MASE picks for a (guarded) block maximum; `None` for NaN.
    fn bias(&self, pmax: f32) -> Option<i64> {
        (!pmax.is_nan()).then(|| floor_log2(pmax).clamp(0, self.bias_max))
    }
}

fn spec(fmt: &QuantFormat) -> Spec<'_> {
    match fmt {
        QuantFormat::BlockMinifloat { width, exponent_width, exponent_bias_width, block_size, skip_first_dim } => Spec {
            m: *width as i64 - *exponent_width as i64 - 1,
            e: *exponent_width as i64,
            bias_max: (1i64 << *exponent_bias_width) - 1,
            block: block_size,
            skip: *skip_first_dim,
        },
        _ => unreachable!("block_minifloat called with {}", fmt.type_name()),
    }
}

pub(crate) fn validate(fmt: &QuantFormat) -> Result<()> {
    let QuantFormat::BlockMinifloat { width, exponent_width, exponent_bias_width, block_size, .. } = fmt else {
        unreachable!("block_minifloat called with {}", fmt.type_name())
    };
    validate_mini("block_minifloat", *width, *exponent_width, None)?;
    validate_bias_width("block_minifloat", *exponent_bias_width)?;
    validate_block_size("block_minifloat", block_size)
}

pub(crate) fn kernel(fmt: &QuantFormat, x: &[f32], shape: &[usize], out: &mut [f32], _rng: &mut Rng) {
    let f = spec(fmt);
    let bl = Blocking::new(shape, f.block, f.skip);
    let shift = exp2i(f.m);
    run_blocks(
        &bl,
        x,
        out,
        |m| f.bias(m).map(|b| f.range(b)),
        |v, r| match r {
            Some((lo, hi)) => ieee_one(v, lo, hi, shift),
            None => f32::NAN,
        },
    );
}

pub(crate) fn reference(fmt: &QuantFormat, x: &[f32], shape: &[usize], out: &mut [f32], _rng: &mut Rng) {
    let f = spec(fmt);
    let bl = Blocking::new(shape, f.block, f.skip);
    reference_blocks(&bl, x, out, |v, pmax| {
        let bias = (pmax as f64).log2().floor();
        if bias.is_nan() {
            return f32::NAN;
        }
        let b = (bias as i64).clamp(0, f.bias_max);
        let (lo, hi) = f.range(b);
        ieee_reference(v, lo, hi, f.m)
    });
}

/// Representable as a block of its own: some bias in `[0, 2^ebw - 1]` represents it.
pub(crate) fn representable(fmt: &QuantFormat, v: f32) -> bool {
    let f = spec(fmt);
    (0..=f.bias_max).any(|b| f.fits(v, b))
}

/// A block is on the grid when one bias represents all of its values ([`on_grid_shared_bias`]).
pub(crate) fn on_grid(fmt: &QuantFormat, x: &[f32], shape: &[usize]) -> Vec<usize> {
    let f = spec(fmt);
    let bl = Blocking::new(shape, f.block, f.skip);
    on_grid_shared_bias(&bl, x, f.bias_max, |m| f.bias(m), |v, bias| f.fits(v, bias))
}
