//! What the OCP Microscaling (MX) v1.0 formats share: blocks along one axis and their E8M0 scale.
//! The element formats are in [`crate::mxint`] and [`crate::mxfp`].
//!
//! A tensor is seen as `[outer, n, inner]` around its block axis (`block_dim`, negative counting
//! from the end; a scalar is one value). Along the axis, each run of `block_size` consecutive
//! values (for each index of the other axes) is a block; the last block of a run may be shorter
//! (as if padded with zeros, which change no block maximum). Per block, as the specification's
//! conversion (section 6.3) says:
//!
//! ```text
//! X = 2^clamp(floor(log2(max |V_i|)) - emax_elem, -127, 127)    (the block's E8M0 scale)
//! P_i = quantize_elem(V_i / X)                                   (round half to even, saturating)
//! out_i = P_i * X
//! ```
//!
//! `emax_elem` is the exponent of the largest power of two of the element format (0 for MXINT8,
//! 8 for E4M3, 15 for E5M2, 4 for E3M2, 2 for E2M3 and E2M1). A block of zeros has no logarithm;
//! any scale gives zeros, and `X = 2^-127` is used. E8M0 holds `2^-127 ..= 2^127`; a finite `f32`
//! never needs more than `2^127`, and blocks whose maximum is below `2^(emax_elem - 127)` take
//! `2^-127` (their small values then round in the element format, not below it).
//!
//! NaN and ±inf: the specification makes the scale NaN when a block holds a NaN (its E8M0 code
//! 0xFF) and leaves infinities to the implementation; here a block holding a NaN or an infinity
//! gets the NaN scale, so every value of that block is NaN. This is what a PyTorch user gets from
//! a fake-quantization formula (`x / 2^floor(log2(amax))` is NaN across the block once `amax` is
//! NaN or inf) and it never turns an overflow into a finite number. Other blocks are unaffected.
//! `-0.0` stays `-0.0`, and a negative value that rounds to zero gives `-0.0`, as `torch.round`.
//!
//! All steps are exact in `f32`: `X` is a power of two (subnormal at `2^-127`, still exact), the
//! element grids are coarser than `2^-16` relative to `X`, and `P_i * X` needs at most 24
//! significant bits above `2^-149`.

use crate::error::param;
use crate::registry::Scope;
use crate::round::{exp2i, floor_log2};
use crate::{QuantError, Reach, Result};
use mase_ir::QuantFormat;

/// The exponent range of E8M0 (code 255 is NaN).
pub(crate) const SCALE_EMIN: i64 = -127;
pub(crate) const SCALE_EMAX: i64 = 127;

/// Values per block processed together when the block axis is not the last one (one stack array
/// of this many maxima).
const LANES: usize = 64;

/// A tensor seen as `[outer, n, inner]` around its block axis, blocked by `block` along `n`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct AxisBlocks {
    pub outer: usize,
    pub n: usize,
    pub inner: usize,
    pub block: usize,
}

/// The axis `block_dim` names in a tensor of `rank` dimensions (a scalar has the one axis 0).
fn axis(block_dim: i64, rank: usize) -> Option<usize> {
    let r = rank.max(1) as i64;
    let a = if block_dim < 0 { block_dim + r } else { block_dim };
    (0..r).contains(&a).then_some(a as usize)
}

/// `validate_shape` of the MX formats: `block_dim` must be an axis of the tensor.
pub(crate) fn check_axis(format: &'static str, block_dim: i64, shape: &[usize]) -> Result<()> {
    match axis(block_dim, shape.len()) {
        Some(_) => Ok(()),
        None => {
            let r = shape.len().max(1) as i64;
            Err(QuantError::Axis { format, block_dim, shape: shape.to_vec(), lo: -r, hi: r - 1 })
        }
    }
}

/// `scope` of the MX formats: blocks along the first axis mix the samples of a batch, the others
/// stay within one index of it. A negative `block_dim` is the first axis of a 1-D tensor, so only
/// `block_dim >= 1` is [`Reach::Row`].
pub(crate) fn scope(fmt: &QuantFormat) -> Scope {
    let dim = match fmt {
        QuantFormat::Mxint { block_dim, .. } | QuantFormat::Mxfp { block_dim, .. } => *block_dim,
        other => unreachable!("mx scope called with {}", other.type_name()),
    };
    Scope { reach: if dim >= 1 { Reach::Row } else { Reach::Tensor }, random: false }
}

/// Validation shared by the MX formats: a block of at least one value.
pub(crate) fn validate_block(format: &'static str, block_size: usize) -> Result<()> {
    if block_size == 0 {
        return Err(param(format, "block_size", 0, "must be at least 1 (the OCP MX block is 32)"));
    }
    Ok(())
}

impl AxisBlocks {
    /// The blocks of a tensor of `shape` (whose `block_dim` was checked by [`check_axis`]).
    pub fn new(shape: &[usize], block_size: usize, block_dim: i64) -> AxisBlocks {
        let a = axis(block_dim, shape.len()).unwrap_or(0);
        let (outer, n, inner) =
            if shape.is_empty() { (1, 1, 1) } else { (shape[..a].iter().product(), shape[a], shape[a + 1..].iter().product()) };
        AxisBlocks { outer, n, inner, block: block_size.max(1) }
    }

    /// The flat indices of every block, block by block (for the reference functions).
    pub fn blocks(&self) -> Vec<Vec<usize>> {
        let mut out = Vec::new();
        for o in 0..self.outer {
            for start in (0..self.n).step_by(self.block) {
                let end = (start + self.block).min(self.n);
                for i in 0..self.inner {
                    out.push((start..end).map(|k| (o * self.n + k) * self.inner + i).collect());
                }
            }
        }
        out
    }
}

/// The shared exponent of a block whose largest magnitude is the finite `amax`:
/// `clamp(floor(log2 amax) - emax_elem, -127, 127)`, and `-127` for a block of zeros.
#[inline(always)]
pub(crate) fn shared_exponent(amax: f32, emax_elem: i64) -> i64 {
    (floor_log2(amax).saturating_sub(emax_elem)).clamp(SCALE_EMIN, SCALE_EMAX)
}

/// The scale `X` of a block and `1 / X`; NaN for a block holding a NaN or an infinity.
#[inline(always)]
fn scale_of(amax: f32, finite: bool, emax_elem: i64) -> (f32, f32) {
    if finite {
        let e = shared_exponent(amax, emax_elem);
        (exp2i(e), exp2i(-e))
    } else {
        (f32::NAN, f32::NAN)
    }
}

/// The MX kernel: per block, the shared scale `X` from the block's largest magnitude, then
/// `elem(v / X) * X` for each value (`v / X` computed as `v * (1 / X)`, the same number since
/// `1 / X` is an exact power of two). A block with a NaN or an infinity becomes NaN. Allocation
/// free; the loops over values hold no branches.
pub(crate) fn run(ab: &AxisBlocks, x: &[f32], out: &mut [f32], emax_elem: i64, elem: impl Fn(f32) -> f32 + Copy) {
    let AxisBlocks { outer, n, inner, block } = *ab;
    if inner == 1 {
        // Blocks are contiguous runs.
        for o in 0..outer {
            for start in (0..n).step_by(block) {
                let r = o * n + start..o * n + (start + block).min(n);
                let (amax, finite) = x[r.clone()].iter().fold((0.0f32, true), |(m, f), &v| {
                    let a = v.abs();
                    (if a > m { a } else { m }, f & (a <= f32::MAX))
                });
                let (s, inv) = scale_of(amax, finite, emax_elem);
                for (q, &v) in out[r.clone()].iter_mut().zip(&x[r]) {
                    *q = elem(v * inv) * s;
                }
            }
        }
        return;
    }
    // Blocks run across rows of `inner` contiguous values: take up to LANES columns at a time,
    // their maxima over the block's rows, then quantize those rows.
    let mut amax = [0.0f32; LANES];
    let mut finite = [true; LANES];
    let mut scale = [0.0f32; LANES];
    let mut inv = [0.0f32; LANES];
    for o in 0..outer {
        for start in (0..n).step_by(block) {
            let rows = start..(start + block).min(n);
            for c0 in (0..inner).step_by(LANES) {
                let w = LANES.min(inner - c0);
                amax[..w].fill(0.0);
                finite[..w].fill(true);
                for k in rows.clone() {
                    let at = (o * n + k) * inner + c0;
                    for ((m, f), &v) in amax[..w].iter_mut().zip(&mut finite[..w]).zip(&x[at..at + w]) {
                        let a = v.abs();
                        *m = if a > *m { a } else { *m };
                        *f &= a <= f32::MAX;
                    }
                }
                for (((s, i), &m), &f) in scale[..w].iter_mut().zip(&mut inv[..w]).zip(&amax[..w]).zip(&finite[..w]) {
                    (*s, *i) = scale_of(m, f, emax_elem);
                }
                for k in rows.clone() {
                    let at = (o * n + k) * inner + c0;
                    for (((q, &v), &s), &i) in out[at..at + w].iter_mut().zip(&x[at..at + w]).zip(&scale[..w]).zip(&inv[..w]) {
                        *q = elem(v * i) * s;
                    }
                }
            }
        }
    }
}

/// The MX conversion written as the specification describes it, for the reference functions:
/// gather each block, give up (NaN) on a block with a NaN or an infinity, take
/// `X = 2^clamp(floor(log2 max|V|) - emax_elem, -127, 127)` with an `f64` logarithm, and write
/// `elem(V_i / X) * X` computed in `f64`.
pub(crate) fn reference(ab: &AxisBlocks, x: &[f32], out: &mut [f32], emax_elem: i64, elem: impl Fn(f64) -> f64) {
    for idx in ab.blocks() {
        let v: Vec<f32> = idx.iter().map(|&i| x[i]).collect();
        if v.iter().any(|a| !a.is_finite()) {
            for &i in &idx {
                out[i] = f32::NAN;
            }
            continue;
        }
        let amax = v.iter().fold(0.0f32, |m, a| m.max(a.abs()));
        let e = if amax == 0.0 { SCALE_EMIN } else { ((amax as f64).log2().floor() as i64 - emax_elem).clamp(SCALE_EMIN, SCALE_EMAX) };
        let scale = 2f64.powi(e as i32);
        for (&i, &val) in idx.iter().zip(&v) {
            out[i] = (elem(val as f64 / scale) * scale) as f32;
        }
    }
}

/// `representable` of the MX formats: some E8M0 scale `X` makes `v / X` an element value
/// (`is_elem`, on `f64` values).
pub(crate) fn representable(v: f32, is_elem: impl Fn(f64) -> bool) -> bool {
    v.is_finite() && (SCALE_EMIN..=SCALE_EMAX).any(|e| is_elem(v as f64 / 2f64.powi(e as i32)))
}

/// `on_grid` of the MX formats: the values that quantizing the tensor again would change (NaN
/// included). A quantized block keeps its scale when quantized again (its largest value stays in
/// `[2^emax_elem, 2^(emax_elem + 1)) * X`, or the scale is the smallest), so the quantizer's
/// outputs are exactly the tensors this returns nothing for.
pub(crate) fn on_grid(ab: &AxisBlocks, x: &[f32], emax_elem: i64, elem: impl Fn(f32) -> f32 + Copy) -> Vec<usize> {
    let mut q = vec![0.0; x.len()];
    run(ab, x, &mut q, emax_elem, elem);
    (0..x.len()).filter(|&i| q[i].to_bits() != x[i].to_bits()).collect()
}

#[cfg(test)]
mod tests {
    use super::AxisBlocks;

    #[test]
    fn blocks_run_along_the_chosen_axis() {
        // [2, 5] along the last axis in blocks of 2: [0, 1], [2, 3], [4] per row.
        let ab = AxisBlocks::new(&[2, 5], 2, -1);
        assert_eq!(ab.blocks(), vec![vec![0, 1], vec![2, 3], vec![4], vec![5, 6], vec![7, 8], vec![9]]);
        // [3, 2] along axis 0 in blocks of 2: rows 0-1 and row 2, per column.
        let ab = AxisBlocks::new(&[3, 2], 2, 0);
        assert_eq!(ab.blocks(), vec![vec![0, 2], vec![1, 3], vec![4], vec![5]]);
        // [2, 3, 2] along axis 1 (-2) in blocks of 32: one block per (outer, inner) pair.
        let ab = AxisBlocks::new(&[2, 3, 2], 32, -2);
        assert_eq!(ab.blocks(), vec![vec![0, 2, 4], vec![1, 3, 5], vec![6, 8, 10], vec![7, 9, 11]]);
        // A scalar is one block.
        assert_eq!(AxisBlocks::new(&[], 32, -1).blocks(), vec![vec![0]]);
    }
}
