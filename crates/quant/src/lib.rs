//! Number formats of mase-rs: MASE's quantizers (doc/mase-semantics.md#quantizers) and QONNX's
//! `IntQuant`, `BipolarQuant`, `FloatQuant` and `Trunc`, and the OCP microscaling (MX) formats
//! `mxint` and `mxfp`.
//!
//! A format is described by an [`mase_ir::QuantFormat`] (quantization is data on the graph's
//! nodes); this crate gives it arithmetic. Each format is one module holding
//!
//! - a **reference** function written straight from the formula (MASE's or QONNX's order of
//!   operations, one value, row or block at a time, allocating freely), and
//! - a **kernel** over slices, allocation-free, written so the compiler can vectorise it,
//!
//! which agree bit for bit on every input (property tests in `tests/`). The backward pass of every
//! format is the straight-through estimator: the gradient of the float operand is the gradient of
//! its quantized value, unchanged and unmasked, as in MASE ([`ste_backward`]).
//!
//! NaN and infinity follow what MASE's torch formulas give (checked against them in
//! `tests/nonfinite.rs`): NaN stays NaN in the arithmetic formats, and a NaN in a block makes the
//! whole block NaN (the shared exponent is NaN). ±inf saturate in `integer` (`clamp`) and the log
//! formats, and become NaN in the minifloat formats and `block_fp`, whose zero passthrough
//! `(~close) * q + close * x` multiplies them by 0 (the same products turn a -0.0 input into
//! +0.0). Sign-based formats give what their comparison gives (`x >= 0` is false: bipolar -1);
//! ternary counts NaN as 0. QONNX's FloatQuant turns ±inf into NaN, as its reference does. The
//! microscaling formats (`mxint`, `mxfp`) make a block holding a NaN or ±inf NaN as a whole (the
//! OCP specification's NaN scale). Each
//! module's documentation says where it differs from MASE on purpose.
//!
//! ```
//! use mase_ir::{QuantFormat, Rng};
//! let fmt = QuantFormat::Integer { width: 8, frac_width: 4, signed: true };
//! let mut out = [0.0; 4];
//! mase_quant::quantize(&fmt, &[0.07, 0.5 / 16.0, 1.5 / 16.0, 100.0], &[4], &mut out, &mut Rng::new(0)).unwrap();
//! assert_eq!(out, [0.0625, 0.0, 0.125, 7.9375]);
//! ```

mod bcast;
pub mod binary;
pub mod bipolar_quant;
pub mod block;
pub mod block_fp;
pub mod block_log;
pub mod block_minifloat;
mod error;
pub mod float_quant;
pub mod int_quant;
pub mod integer;
pub mod log;
pub mod minifloat_denorm;
pub mod minifloat_ieee;
pub mod mx;
pub mod mxfp;
pub mod mxint;
mod registry;
pub mod round;
pub mod ternary;
pub mod trunc;

pub use block::Blocking;
pub use error::{QuantError, Result};
pub use integer::Fixed;
pub use registry::Reach;
pub use trunc::{trunc, TruncSpec};

use mase_ir::{QuantFormat, Rng};
use registry::lookup;

/// Checks a format's parameters; the error names the format and the field (`width = 0`,
/// `frac_width > width`, `exponent_width >= width`, an empty `block_size`, ...).
pub fn validate_format(fmt: &QuantFormat) -> Result<()> {
    (lookup(fmt).validate)(fmt)
}

/// `validate_format` plus the checks for formats a person writes by hand: an integer
/// `frac_width` above its `width` computes (MASE's formula is defined for it, and search spaces
/// enumerate such products), but in a hand-written config it is almost always a typo, so
/// `ch transform` refuses it.
pub fn lint_format(fmt: &QuantFormat) -> Result<()> {
    validate_format(fmt)?;
    if let QuantFormat::Integer { width, frac_width, .. } = fmt {
        if *frac_width > *width as i32 {
            return Err(QuantError::Param {
                format: "integer",
                field: "frac_width",
                value: frac_width.to_string(),
                reason: format!("is larger than `width` = {width}"),
            });
        }
    }
    Ok(())
}

/// Checks a format and that it applies to tensors of `shape` (QONNX scales and zero points must
/// broadcast to it). Every format applies to every shape otherwise.
pub fn validate_for_shape(fmt: &QuantFormat, shape: &[usize]) -> Result<()> {
    let f = lookup(fmt);
    (f.validate)(fmt)?;
    (f.validate_shape)(fmt, shape)
}

fn check_lengths(shape: &[usize], x: usize, out: Option<usize>) -> Result<()> {
    let expected = shape.iter().product::<usize>();
    if x != expected {
        return Err(QuantError::Length { what: "the input", shape: shape.to_vec(), expected, got: x });
    }
    match out {
        Some(got) if got != expected => Err(QuantError::Length { what: "the output", shape: shape.to_vec(), expected, got }),
        _ => Ok(()),
    }
}

/// Quantizes `x` (a tensor of `shape`, row-major) into `out` with the vectorised kernel. `rng`
/// is drawn from only by stochastic binary (one uniform number per value, in index order).
pub fn quantize(fmt: &QuantFormat, x: &[f32], shape: &[usize], out: &mut [f32], rng: &mut Rng) -> Result<()> {
    validate_for_shape(fmt, shape)?;
    check_lengths(shape, x.len(), Some(out.len()))?;
    (lookup(fmt).quantize)(fmt, x, shape, out, rng);
    Ok(())
}

/// [`quantize`] with the reference function: the formula as specified, one value (row, block) at
/// a time. Slow; for tests and for checking the kernels.
pub fn quantize_reference(fmt: &QuantFormat, x: &[f32], shape: &[usize], out: &mut [f32], rng: &mut Rng) -> Result<()> {
    validate_for_shape(fmt, shape)?;
    check_lengths(shape, x.len(), Some(out.len()))?;
    (lookup(fmt).reference)(fmt, x, shape, out, rng);
    Ok(())
}

/// Which values of a tensor decide how one of its values is quantized (see [`Reach`]).
pub fn reach(fmt: &QuantFormat) -> Reach {
    (registry::lookup(fmt).scope)(fmt).reach
}

/// Whether quantizing with `fmt` draws random numbers.
pub fn draws_random(fmt: &QuantFormat) -> bool {
    (registry::lookup(fmt).scope)(fmt).random
}

/// Whether `value` is a value the format can hold on its own: on its grid and inside its range.
///
/// For formats whose scale depends on the tensor (block formats, zero-scaled binary, scaled
/// ternary, per-channel QONNX scales) this asks whether *some* block, row or channel could hold
/// it; [`on_grid`] checks a whole tensor with its real blocks and rows. MASE's minifloat and block
/// formats pass values within 1e-8 of zero through unchanged, so those count as representable.
/// An invalid format represents nothing.
pub fn representable(fmt: &QuantFormat, value: f32) -> bool {
    let f = lookup(fmt);
    (f.validate)(fmt).is_ok() && (f.representable)(fmt, value)
}

/// Indices (ascending) of the values of `x` that are *not* on the format's grid, judging each
/// block, row or channel with its own shared exponent or scale: the check of the verification
/// report that quantized weights lie on their grid. An empty list means every value is one the
/// quantizer can produce for this tensor.
pub fn on_grid(fmt: &QuantFormat, x: &[f32], shape: &[usize]) -> Result<Vec<usize>> {
    validate_for_shape(fmt, shape)?;
    check_lengths(shape, x.len(), None)?;
    Ok((lookup(fmt).on_grid)(fmt, x, shape))
}

/// The straight-through estimator: the gradient of a quantizer's input is the gradient of its
/// output, unchanged (`grad_in = grad_out`). The runtime does not call this; it routes the
/// gradient of a quantized operand straight to the float operand, which is the same thing.
pub fn ste_backward(grad_out: &[f32], grad_in: &mut [f32]) {
    grad_in.copy_from_slice(grad_out);
}

/// The formats this crate implements: `(name, one-line description)`, in `QuantFormat` order.
pub fn formats() -> impl Iterator<Item = (&'static str, &'static str)> {
    registry::FORMATS.iter().map(|f| (f.name, f.doc))
}
