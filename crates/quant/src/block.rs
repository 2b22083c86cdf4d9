//! Blocking (doc/mase-semantics.md#blocking): how block formats cut a tensor into blocks that share an exponent or a
//! bias, and the per-block statistic they share it by.
//!
//! MASE blocks 1-D tensors (biases), 2-D tensors (activations with `skip_first_dim`, weights
//! without), and 3-D activations, and fails on anything else; its conv, relu and elementwise
//! modules first flatten 4-D tensors to `[N*C, H, W]` and block with `skip_first_dim`. mase-rs
//! blocks any rank with one rule that gives MASE's blocks wherever MASE has them:
//!
//! 1. The tensor is seen with at most three dimensions: a scalar as `[1]`; rank 4 and above as
//!    `[prod(leading), H, W]` with `skip_first_dim` forced on (what MASE's modules do).
//! 2. The block size is right-aligned to that view: extra leading entries are dropped, missing
//!    ones cover the whole dimension, and so does an entry of 0 (MASE's `-1`, which configs may
//!    write as `-1`) or one larger than its dimension. With `skip_first_dim` (on a
//!    view of rank 2 or 3) the first dimension's block is 1. A 1-D tensor ignores
//!    `skip_first_dim`, which MASE only allows off for it.
//! 3. Blocks tile the view from its start; the last block along a dimension may be partial (MASE
//!    pads with zeros, which changes no block maximum).
//!
//! The shared statistic is `max |x|` over the block, NaN if the block holds a NaN; if every block
//! is zero they all become 1, else zero blocks take the smallest non-zero maximum (MASE's guard
//! against `log2(0)`).

use std::ops::Range;

/// A tensor cut into blocks: its view as three dimensions and the block size along each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Blocking {
    /// The tensor's view, padded in front with ones to three dimensions.
    pub dims: [usize; 3],
    /// The block size along each view dimension.
    pub tile: [usize; 3],
}

impl Blocking {
    /// The blocking of a tensor of `shape` by `block_size` (see the module documentation).
    pub fn new(shape: &[usize], block_size: &[usize], skip_first_dim: bool) -> Blocking {
        let (view, skip): (Vec<usize>, bool) = match shape.len() {
            0 => (vec![1], false),
            1 => (shape.to_vec(), false),
            2 | 3 => (shape.to_vec(), skip_first_dim),
            r => (vec![shape[..r - 2].iter().product(), shape[r - 2], shape[r - 1]], true),
        };
        let r = view.len();
        let mut tile = vec![0usize; r];
        for d in 0..r {
            // Right alignment: view dimension d takes the entry r - d from the end, if any.
            let from_end = r - d;
            let want = if block_size.len() >= from_end { Some(block_size[block_size.len() - from_end]) } else { None };
            let dim = if skip && d == 0 { 1 } else { view[d] };
            tile[d] = match want {
                Some(b) if b >= 1 && b <= dim => b,
                _ => dim,
            };
        }
        let mut dims = [1usize; 3];
        let mut t = [1usize; 3];
        dims[3 - r..].copy_from_slice(&view);
        t[3 - r..].copy_from_slice(&tile);
        // An empty dimension has no blocks; a tile of 1 keeps the arithmetic below defined.
        for v in &mut t {
            *v = (*v).max(1);
        }
        Blocking { dims, tile: t }
    }

    /// Number of blocks along each view dimension.
    pub fn grid(&self) -> [usize; 3] {
        [0, 1, 2].map(|d| self.dims[d].div_ceil(self.tile[d]))
    }

    /// Number of blocks.
    pub fn count(&self) -> usize {
        self.grid().iter().product()
    }

    /// The contiguous index ranges (runs along the last view dimension) that make up block `b`,
    /// blocks numbered in row-major order of the grid.
    pub fn runs(&self, b: usize) -> impl Iterator<Item = Range<usize>> + '_ {
        let g = self.grid();
        let (t0, t1, t2) = (b / (g[1] * g[2]), (b / g[2]) % g[1], b % g[2]);
        let span = |d: usize, t: usize| t * self.tile[d]..((t + 1) * self.tile[d]).min(self.dims[d]);
        let (r0, r1, r2) = (span(0, t0), span(1, t1), span(2, t2));
        let [_, d1, d2] = self.dims;
        r0.flat_map(move |i0| r1.clone().map(move |i1| (i0 * d1 + i1) * d2)).map(move |row| row + r2.start..row + r2.end)
    }

    /// `max |x|` over block `b`; NaN if the block holds a NaN.
    pub fn block_max(&self, x: &[f32], b: usize) -> f32 {
        let mut m = 0.0f32;
        for r in self.runs(b) {
            for &v in &x[r] {
                let a = v.abs();
                // `a > m` is false for a NaN, so the NaN test comes first and then sticks.
                if a.is_nan() || m.is_nan() {
                    m = f32::NAN;
                } else if a > m {
                    m = a;
                }
            }
        }
        m
    }
}

/// MASE's guard against `log2(0)`, applied to each block maximum.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ZeroGuard {
    all_zero: bool,
    /// The smallest non-zero block maximum (NaN if some block is NaN, as `torch.min` gives).
    min_nonzero: f32,
}

impl ZeroGuard {
    /// Scans every block once.
    pub fn new(bl: &Blocking, x: &[f32]) -> ZeroGuard {
        let mut all_zero = true;
        let mut min_nonzero = f32::INFINITY;
        for b in 0..bl.count() {
            let m = bl.block_max(x, b);
            if m != 0.0 {
                all_zero = false;
                if m.is_nan() || min_nonzero.is_nan() {
                    min_nonzero = f32::NAN;
                } else if m < min_nonzero {
                    min_nonzero = m;
                }
            }
        }
        ZeroGuard { all_zero, min_nonzero }
    }

    /// The maximum a block with raw maximum `m` uses.
    pub fn apply(&self, m: f32) -> f32 {
        if self.all_zero {
            1.0
        } else if m == 0.0 {
            self.min_nonzero
        } else {
            m
        }
    }
}

/// Runs a block format's kernel: for each block, `per_block` turns the guarded block maximum into
/// the block's parameters, and `elem` quantizes one value with them.
pub(crate) fn run_blocks<P: Copy>(bl: &Blocking, x: &[f32], out: &mut [f32], per_block: impl Fn(f32) -> P, elem: impl Fn(f32, P) -> f32) {
    let guard = ZeroGuard::new(bl, x);
    for b in 0..bl.count() {
        let p = per_block(guard.apply(bl.block_max(x, b)));
        for r in bl.runs(b) {
            for (o, &v) in out[r.clone()].iter_mut().zip(&x[r]) {
                *o = elem(v, p);
            }
        }
    }
}

/// MASE's blocking written out as it does it, for the reference functions: pad the view with
/// zeros to whole blocks, gather each block into its own vector, take each block's maximum and
/// guard it against zero ([`reference_guard`]), quantize each value with `elem(value, guarded
/// block maximum)` (the padding too, as MASE does), and scatter the results back without the
/// padding.
pub(crate) fn reference_blocks(bl: &Blocking, x: &[f32], out: &mut [f32], elem: impl Fn(f32, f32) -> f32) {
    let [d0, d1, d2] = bl.dims;
    let g = bl.grid();
    let [t0, t1, t2] = bl.tile;
    let padded = [g[0] * t0, g[1] * t1, g[2] * t2];
    let at = |i: usize, j: usize, k: usize| if i < d0 && j < d1 && k < d2 { x[(i * d1 + j) * d2 + k] } else { 0.0 };
    let mut blocks = Vec::new();
    let mut origin = Vec::new();
    for b0 in 0..g[0] {
        for b1 in 0..g[1] {
            for b2 in 0..g[2] {
                let mut v = Vec::with_capacity(t0 * t1 * t2);
                for i in 0..t0 {
                    for j in 0..t1 {
                        for k in 0..t2 {
                            v.push(at(b0 * t0 + i, b1 * t1 + j, b2 * t2 + k));
                        }
                    }
                }
                blocks.push(v);
                origin.push((b0 * t0, b1 * t1, b2 * t2));
            }
        }
    }
    debug_assert!(padded.iter().product::<usize>() == blocks.iter().map(Vec::len).sum::<usize>());
    let maxes: Vec<f32> = blocks
        .iter()
        .map(|v| v.iter().map(|a| a.abs()).fold(0.0f32, |m, a| if a.is_nan() || m.is_nan() { f32::NAN } else { m.max(a) }))
        .collect();
    let maxes = reference_guard(&maxes);
    let q: Vec<Vec<f32>> = blocks.iter().zip(&maxes).map(|(blk, &pmax)| blk.iter().map(|&v| elem(v, pmax)).collect()).collect();
    for (qb, &(o0, o1, o2)) in q.iter().zip(&origin) {
        let mut n = 0;
        for i in 0..t0 {
            for j in 0..t1 {
                for k in 0..t2 {
                    let (a, b, c) = (o0 + i, o1 + j, o2 + k);
                    if a < d0 && b < d1 && c < d2 {
                        out[(a * d1 + b) * d2 + c] = qb[n];
                    }
                    n += 1;
                }
            }
        }
    }
}

/// The guard of [`ZeroGuard`] written as MASE does it, on the list of block maxima.
fn reference_guard(maxes: &[f32]) -> Vec<f32> {
    if maxes.iter().all(|&m| m == 0.0) {
        return vec![1.0; maxes.len()];
    }
    let nonzero: Vec<f32> = maxes.iter().copied().filter(|&m| m != 0.0).collect();
    let min = if nonzero.iter().any(|m| m.is_nan()) { f32::NAN } else { nonzero.iter().copied().fold(f32::INFINITY, f32::min) };
    maxes.iter().map(|&m| if m == 0.0 { min } else { m }).collect()
}

/// Validation shared by the block formats: a non-empty block size (an entry of 0 is MASE's `-1`,
/// the whole dimension).
pub(crate) fn validate_block_size(format: &'static str, block_size: &[usize]) -> crate::Result<()> {
    if block_size.is_empty() {
        return Err(crate::error::param(format, "block_size", "[]", "must name at least one block dimension"));
    }
    Ok(())
}

/// Validation shared by the formats with a per-block bias: a bias field of at most 8 bits.
pub(crate) fn validate_bias_width(format: &'static str, exponent_bias_width: u32) -> crate::Result<()> {
    if exponent_bias_width > 8 {
        return Err(crate::error::param(format, "exponent_bias_width", exponent_bias_width, "must be at most 8"));
    }
    Ok(())
}

/// `on_grid` of the formats whose blocks share a bias from `0..=bias_max` (block minifloat, block
/// log), where `fits(v, bias)` says whether a bias represents `v`. A block is on the grid when one
/// bias represents all of its values, since the bias that produced a quantized block need not be
/// the one its (rounded) maximum gives again. Otherwise the values that the bias MASE picks for
/// the block (`mase_bias` of its raw maximum; 0 for a NaN block) cannot represent are reported.
pub(crate) fn on_grid_shared_bias(
    bl: &Blocking,
    x: &[f32],
    bias_max: i64,
    mase_bias: impl Fn(f32) -> Option<i64>,
    fits: impl Fn(f32, i64) -> bool,
) -> Vec<usize> {
    let mut bad = Vec::new();
    for b in 0..bl.count() {
        let fits_all = |bias: i64| bl.runs(b).all(|r| x[r].iter().all(|&v| fits(v, bias)));
        if (0..=bias_max).any(fits_all) {
            continue;
        }
        let bias = mase_bias(bl.block_max(x, b)).unwrap_or(0);
        for r in bl.runs(b) {
            bad.extend(r.filter(|&i| !fits(x[i], bias)));
        }
    }
    bad.sort_unstable();
    bad
}

#[cfg(test)]
mod tests {
    use super::Blocking;

    /// The blocks of a tensor as lists of flat indices.
    fn blocks(shape: &[usize], block: &[usize], skip: bool) -> Vec<Vec<usize>> {
        let bl = Blocking::new(shape, block, skip);
        (0..bl.count()).map(|b| bl.runs(b).flatten().collect()).collect()
    }

    #[test]
    fn blocks_follow_mase() {
        // A bias of 5 in blocks of 2: [0,1], [2,3], [4] (MASE pads the last with a zero).
        assert_eq!(blocks(&[5], &[2], false), vec![vec![0, 1], vec![2, 3], vec![4]]);
        // An activation [2, 4] with block [2] and skip_first_dim: rows are blocked separately.
        assert_eq!(blocks(&[2, 4], &[2], true), vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]);
        // A weight [2, 4] with block [2]: right-aligned to [-1, 2], so tiles of 2 rows x 2 columns.
        assert_eq!(blocks(&[2, 4], &[2], false), vec![vec![0, 1, 4, 5], vec![2, 3, 6, 7]]);
        // A weight [3, 2] with block [2, 8]: 8 > 2 covers the row; 3 rows in tiles of 2.
        assert_eq!(blocks(&[3, 2], &[2, 8], false), vec![vec![0, 1, 2, 3], vec![4, 5]]);
        // 3-D activation [2, 2, 2] with block [1, 2]: per batch index, per row.
        assert_eq!(blocks(&[2, 2, 2], &[1, 2], true), vec![vec![0, 1], vec![2, 3], vec![4, 5], vec![6, 7]]);
        // 4-D [1, 2, 2, 2] is seen as [2, 2, 2] with skip: block [2, 2] covers each channel plane.
        assert_eq!(blocks(&[1, 2, 2, 2], &[2, 2], false), vec![vec![0, 1, 2, 3], vec![4, 5, 6, 7]]);
        // A scalar is one block.
        assert_eq!(blocks(&[], &[16], true), vec![vec![0]]);
        // MASE's -1 (stored as 0) covers the whole dimension: [-1, 2] on a weight [3, 4] is
        // column pairs over all rows, as [8, 2] is.
        assert_eq!(blocks(&[3, 4], &[0, 2], false), blocks(&[3, 4], &[8, 2], false));
        assert_eq!(blocks(&[3, 4], &[0, 2], false), vec![vec![0, 1, 4, 5, 8, 9], vec![2, 3, 6, 7, 10, 11]]);
    }
}
