//! `block_log`: the log format with an exponent bias shared by a block (doc/mase-semantics.md#format-block_log).
//!
//! ```text
//! Eb = width - 1;  bias = clamp(2^Eb - 1 - ceil(log2(max |x| over the block)), 0, 2^ebw - 1)
//! out = log(x, width, exponent_bias = bias)    # e_max = ceil(log2 max) when unclamped
//! ```
//! Zero blocks take the smallest non-zero block maximum (MASE's guard), which sets the value
//! zeros map to. A NaN makes its block NaN; ±inf saturate to `±2^e_max` (the log format has no
//! zero passthrough to multiply them by 0), as in torch.

use crate::block::{on_grid_shared_bias, reference_blocks, run_blocks, validate_bias_width, validate_block_size, Blocking};
use crate::log::{log_one, log_reference, log_representable, validate_width};
use crate::round::{ceil_log2, exp2i, exponent_range};
use crate::Result;
use mase_ir::{QuantFormat, Rng};

/// The format's entry in `registry::FORMATS`: its name, its one-line doc, and the functions
/// below (shared ones imported under the names the registry reads).
pub(crate) const NAME: &str = "block_log";
pub(crate) const DOC: &str =
    "width, exponent_bias_width, block_size: log format with bias clamp(2^(w-1) - 1 - ceil(log2 max|x|), 0, 2^ebw - 1) per block";
pub(crate) use crate::registry::{any_shape as validate_shape, tensor_scope as scope};

struct Spec<'a> {
    width: u32,
    bias_max: i64,
    block: &'a [usize],
    skip: bool,
}

impl Spec<'_> {
    /// `2^Eb - 1`: the largest exponent code.
    fn top(&self) -> i64 {
        (1i64 << (self.width - 1)) - 1
    }

    /// Exponent range for a block bias (the exponent field is all but the sign bit).
    fn range(&self, bias: i64) -> (i64, i64) {
        exponent_range(self.width as i64 - 1, Some(bias))
    }

    /// Whether the block bias `bias` represents `v`.
    fn fits(&self, v: f32, bias: i64) -> bool {
        let (lo, hi) = self.range(bias);
        log_representable(v, lo, hi)
    }

    /// The bias MASE picks for a (guarded) block maximum; `None` for NaN.
    fn bias(&self, pmax: f32) -> Option<i64> {
        (!pmax.is_nan()).then(|| (self.top() - ceil_log2(pmax)).clamp(0, self.bias_max))
    }
}

fn spec(fmt: &QuantFormat) -> Spec<'_> {
    match fmt {
        QuantFormat::BlockLog { width, exponent_bias_width, block_size, skip_first_dim } => {
            Spec { width: *width, bias_max: (1i64 << *exponent_bias_width) - 1, block: block_size, skip: *skip_first_dim }
        }
        _ => unreachable!("block_log called with {}", fmt.type_name()),
    }
}

pub(crate) fn validate(fmt: &QuantFormat) -> Result<()> {
    let QuantFormat::BlockLog { width, exponent_bias_width, block_size, .. } = fmt else {
        unreachable!("block_log called with {}", fmt.type_name())
    };
    validate_width("block_log", *width)?;
    validate_bias_width("block_log", *exponent_bias_width)?;
    validate_block_size("block_log", block_size)
}

pub(crate) fn kernel(fmt: &QuantFormat, x: &[f32], shape: &[usize], out: &mut [f32], _rng: &mut Rng) {
    let f = spec(fmt);
    let bl = Blocking::new(shape, f.block, f.skip);
    run_blocks(
        &bl,
        x,
        out,
        |m| {
            f.bias(m).map(|b| {
                let (lo, hi) = f.range(b);
                // `min_pos * 0.1` with `min_pos = 2 ** bias_tensor`: an f32 product.
                (exp2i(lo) * 0.1, lo, hi)
            })
        },
        |v, p| match p {
            Some((t, lo, hi)) => log_one(v, t, lo, hi),
            None => f32::NAN,
        },
    );
}

pub(crate) fn reference(fmt: &QuantFormat, x: &[f32], shape: &[usize], out: &mut [f32], _rng: &mut Rng) {
    let f = spec(fmt);
    let bl = Blocking::new(shape, f.block, f.skip);
    reference_blocks(&bl, x, out, |v, pmax| {
        let max_exponent = (pmax as f64).log2().ceil();
        if max_exponent.is_nan() {
            return f32::NAN;
        }
        let bias = (f.top() as f64 - max_exponent).clamp(0.0, f.bias_max as f64) as i64;
        let (lo, hi) = f.range(bias);
        let min_pos = 2f64.powi(lo as i32) as f32;
        log_reference(v, min_pos * 0.1, lo, hi)
    });
}

/// Representable as a block of its own: `±2^e` for some bias.
pub(crate) fn representable(fmt: &QuantFormat, v: f32) -> bool {
    let f = spec(fmt);
    let (lo, _) = f.range(f.bias_max);
    let (_, hi) = f.range(0);
    log_representable(v, lo, hi)
}

/// A block is on the grid when one bias represents all of its values ([`on_grid_shared_bias`]).
pub(crate) fn on_grid(fmt: &QuantFormat, x: &[f32], shape: &[usize]) -> Vec<usize> {
    let f = spec(fmt);
    let bl = Blocking::new(shape, f.block, f.skip);
    on_grid_shared_bias(&bl, x, f.bias_max, |m| f.bias(m), |v, bias| f.fits(v, bias))
}
