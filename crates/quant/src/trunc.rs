//! QONNX `Trunc`: re-quantization of an integer tensor to fewer bits by a power-of-two shift
//! (the average-pool truncation of FINN), as its reference implementation computes it:
//!
//! ```text
//! y = round_half_even(x / scale + zero_point)
//! t = 2^round(log2(output_scale / scale));  y = y / t
//! y = clamp(y, min_int(signed, narrow, output_bit_width), max_int(...))
//! y = rounding_mode(y)                        # FLOOR by default: truncation
//! out = (y - zero_point / t) * output_scale
//! ```
//! Not a [`mase_ir::QuantFormat`] (MASE has no such quantizer): a function for ONNX import.

use crate::error::param;
use crate::int_quant::{max_int, min_int};
use crate::round::round_mode;
use crate::{QuantError, Result};
use mase_ir::RoundingMode;

/// The attributes and scalar inputs of a `Trunc` node.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TruncSpec {
    pub scale: f32,
    pub zero_point: f32,
    pub input_bit_width: f32,
    pub output_scale: f32,
    pub output_bit_width: f32,
    pub signed: bool,
    pub narrow: bool,
    pub rounding_mode: RoundingMode,
}

/// Applies `Trunc` to `x`, writing `out`.
pub fn trunc(spec: &TruncSpec, x: &[f32], out: &mut [f32]) -> Result<()> {
    if out.len() != x.len() {
        return Err(QuantError::Length { what: "the output", shape: vec![x.len()], expected: x.len(), got: out.len() });
    }
    let bw = spec.output_bit_width;
    if !(bw.fract() == 0.0 && (1.0..=32.0).contains(&bw)) {
        return Err(param("trunc", "output_bit_width", bw, "must be an integer between 1 and 32"));
    }
    for (field, v) in [("scale", spec.scale), ("output_scale", spec.output_scale)] {
        if !(v.is_finite() && v > 0.0) {
            return Err(param("trunc", field, v, "must be finite and positive"));
        }
    }
    let t = ((spec.output_scale as f64 / spec.scale as f64).log2().round_ties_even()).exp2() as f32;
    let (lo, hi) = (min_int(spec.signed, spec.narrow, bw as u32) as f32, max_int(spec.signed, spec.narrow, bw as u32) as f32);
    let zt = spec.zero_point / t;
    for (o, &v) in out.iter_mut().zip(x) {
        let y = (v / spec.scale + spec.zero_point).round_ties_even() / t;
        let y = if y > hi { hi } else { y };
        let y = if y < lo { lo } else { y };
        *o = (round_mode(spec.rounding_mode, y) - zt) * spec.output_scale;
    }
    Ok(())
}
