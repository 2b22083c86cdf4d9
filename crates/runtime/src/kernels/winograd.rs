//! Winograd F(2x2, 3x3) for stride-1, dilation-1, single-group 3x3 convolutions.
//!
//! The output is cut into 2x2 tiles; each reads a 4x4 tile of the zero-padded input. With the
//! transforms `V = B^T d B` of every input tile, `U = G g G^T` of every 3x3 kernel and
//! `Y = A^T M A` of every product, the convolution becomes 16 matrix products
//! `M_e [C_out, T] = U_e [C_out, C_in] x V_e [C_in, T]`, one per element `e` of the 4x4
//! transformed tile, over the `T` tiles of a group of images: 16 multiply-adds per tile and
//! channel pair where the direct convolution does 36, that is 2.25 times fewer.
//!
//! The input gradient of a stride-1 3x3 convolution with padding `p <= 2` is itself such a
//! convolution: of the output gradient, padded by `2 - p`, with the kernel flipped in both
//! directions and its channel axes swapped. [`WinoGeom::input_grad_of`] gives its geometry.
//!
//! Rounding: the transforms add and subtract up to four values before and nine after the
//! products, so a Winograd output differs from the direct sum by a few units of the float32
//! rounding of a sum of the same length (`C_in * 9` terms); `tests/winograd.rs` checks the bound
//! and `README.md` gives the differences measured on vgg7's layers. The transforms would turn an
//! infinity into NaN (`inf - inf`) where the direct sum keeps it, so [`transformable`] sends any
//! operand holding a non-finite or huge value down the direct path.
//!
//! The weight gradient runs the same transforms the other way: with `Z = A dY A^T` of each 2x2
//! output-gradient tile, `dU_e [C_out, C_in] = Z_e [C_out, T] x V_e^T [T, C_in]` summed over
//! the tiles, and `dW = G^T dU G`.
//!
//! Threads: the images are cut into groups of a size fixed by the geometry (never by the thread
//! count), the threads share the groups out, and every product is on the GEMM's general path
//! whatever the group size (see [`WinoGeom::supported`]), where each output element is the same
//! sum in the same order however many columns the product has. Results are therefore the same
//! bits on any thread count and for any cut of a batch into slices.

use super::Accum;
use crate::gemm::{gemm, general_path, Mat, MatMut};

/// Tiles a group of images aims for: enough columns for the products to run near the GEMM's
/// rate, few enough that a group's transformed tiles stay in the cache hierarchy.
const GROUP_TILES: usize = 256;

/// Operand values at or above this magnitude (and NaN, and the infinities) take the direct path:
/// below it no sum of the transforms and products can overflow where the direct sum would not.
const TRANSFORM_LIMIT: f32 = 1e14;

/// The sizes of one stride-1 3x3 convolution run by Winograd (a forward pass, or the input
/// gradient seen as one).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WinoGeom {
    pub n: usize,
    pub cin: usize,
    pub cout: usize,
    pub h: usize,
    pub w: usize,
    pub ph: usize,
    pub pw: usize,
    pub oh: usize,
    pub ow: usize,
}

impl WinoGeom {
    /// Rows of 2x2 output tiles.
    fn th(&self) -> usize {
        self.oh.div_ceil(2)
    }
    /// Columns of 2x2 output tiles.
    fn tw(&self) -> usize {
        self.ow.div_ceil(2)
    }
    /// Tiles of one image.
    fn tiles(&self) -> usize {
        self.th() * self.tw()
    }

    /// Images per group: enough for [`GROUP_TILES`] tiles, at most the batch.
    pub fn images_per_group(&self) -> usize {
        GROUP_TILES.div_ceil(self.tiles().max(1)).clamp(1, self.n.max(1))
    }

    /// Groups the batch is cut into.
    pub fn groups(&self) -> usize {
        self.n.div_ceil(self.images_per_group())
    }

    /// Whether Winograd applies and its products stay on the GEMM's general path for a group of
    /// any size (a single image's tiles already are), which keeps the bits independent of the
    /// grouping. The padding is at most 2 so that the input gradient's padding `2 - p` exists.
    pub fn supported(&self) -> bool {
        self.ph <= 2 && self.pw <= 2 && self.oh > 0 && self.ow > 0 && general_path(self.cout, self.tiles())
    }

    /// The input gradient of this convolution as a forward convolution of the output gradient.
    pub fn input_grad_of(&self) -> WinoGeom {
        WinoGeom {
            n: self.n,
            cin: self.cout,
            cout: self.cin,
            h: self.oh,
            w: self.ow,
            ph: 2 - self.ph,
            pw: 2 - self.pw,
            oh: self.h,
            ow: self.w,
        }
    }

    /// Length of the transformed weights, `[16, cout, cin]`.
    pub fn u_len(&self) -> usize {
        16 * self.cout * self.cin
    }

    /// Lengths of one group's transformed input `[16, cin, T]`, products `[16, cout, T]`, the
    /// row scratch of the transforms, and (0 here) the transformed weight gradient.
    pub fn workspace_len(&self) -> [usize; 4] {
        let t = self.images_per_group() * self.tiles();
        [16 * self.cin * t, 16 * self.cout * t, 24 * self.tw() + 8, 0]
    }

    /// Whether the weight gradient's products (`[cout, cin]`, summed over tiles) are on the GEMM's
    /// general path, where their sums depend on the tile count alone.
    pub fn weight_grad_supported(&self) -> bool {
        general_path(self.cout, self.cin)
    }
}

/// Whether Winograd measured faster than the direct path for convolutions of this shape class
/// (`g` is the layer's forward geometry, for all three passes). The smallest channel count each
/// way depends on the GEMM kernels the direct path gets: with the AVX2/FMA kernels, `conv_layers`
/// (batch 32, one thread) measured Winograd 1.0-2.2x faster from 32 channels each way, and up to
/// 3x slower with 16 on either side. The AVX-512 kernels (`gemm_isa`) speed the direct path's
/// long products up more than Winograd's short ones: there, two runs of `conv_layers --algo
/// winograd` measured layers with 32 or 64 channels on a side at 0.5-1.1x in most passes (0.6x
/// for the gradients of 64->128), and layers with at least 128 each way at 1.1-1.9x in most
/// passes and in total (`bench/README.md`, "Winograd's threshold with AVX-512").
pub(crate) fn pays(g: &WinoGeom) -> bool {
    let min_channels = if crate::GemmIsa::widest() == crate::GemmIsa::Avx512 { 128 } else { 32 };
    g.cin >= min_channels && g.cout >= min_channels
}

/// Whether every value is finite and below [`TRANSFORM_LIMIT`] in magnitude.
pub(crate) fn transformable(data: &[f32]) -> bool {
    data.iter().fold(true, |ok, v| ok & (v.abs() < TRANSFORM_LIMIT))
}

/// Kernels transformed together, one per lane: the input channels `i0 .. i0 + LANES` of one
/// output channel.
const LANES: usize = 16;

/// `G g G^T` of `LANES` 3x3 kernels at once: `k[t][l]` is element `t` (row-major) of kernel `l`,
/// `out[e][l]` element `e` of its 4x4 transform. Each lane computes exactly what one kernel alone
/// would, so the loops vectorise across kernels.
#[inline(always)]
fn kernel_transform(k: &[[f32; LANES]; 9], out: &mut [[f32; LANES]; 16]) {
    // G = [[1, 0, 0], [1/2, 1/2, 1/2], [1/2, -1/2, 1/2], [0, 0, 1]]; first on the rows.
    let mut t = [[0.0f32; LANES]; 12];
    for c in 0..3 {
        for l in 0..LANES {
            let (g0, g1, g2) = (k[c][l], k[3 + c][l], k[6 + c][l]);
            t[c][l] = g0;
            t[3 + c][l] = 0.5 * (g0 + g1 + g2);
            t[6 + c][l] = 0.5 * (g0 - g1 + g2);
            t[9 + c][l] = g2;
        }
    }
    for r in 0..4 {
        for l in 0..LANES {
            let (g0, g1, g2) = (t[3 * r][l], t[3 * r + 1][l], t[3 * r + 2][l]);
            out[4 * r][l] = g0;
            out[4 * r + 1][l] = 0.5 * (g0 + g1 + g2);
            out[4 * r + 2][l] = 0.5 * (g0 - g1 + g2);
            out[4 * r + 3][l] = g2;
        }
    }
}

/// The transformed weights `u` (`[16, cout, cin]`) of the convolution `g` from a PyTorch weight
/// `w`. With `flip`, `w` is the weight of the convolution whose input gradient `g` is
/// (`[g.cin, g.cout, 3, 3]`), read flipped in both directions with its channel axes swapped.
/// `LANES` input channels at a time, so that each of the 16 output planes gets a contiguous run.
pub(crate) fn transform_weights(g: &WinoGeom, w: &[f32], flip: bool, u: &mut [f32]) {
    let plane = g.cout * g.cin;
    let mut k = [[0.0f32; LANES]; 9];
    let mut out = [[0.0f32; LANES]; 16];
    for o in 0..g.cout {
        for i0 in (0..g.cin).step_by(LANES) {
            let n = LANES.min(g.cin - i0);
            for l in 0..n {
                let i = i0 + l;
                let src = if flip { &w[(i * g.cout + o) * 9..][..9] } else { &w[(o * g.cin + i) * 9..][..9] };
                for (t, row) in k.iter_mut().enumerate() {
                    row[l] = if flip { src[8 - t] } else { src[t] };
                }
            }
            kernel_transform(&k, &mut out);
            for (e, run) in out.iter().enumerate() {
                u[e * plane + o * g.cin + i0..][..n].copy_from_slice(&run[..n]);
            }
        }
    }
}

/// `B^T d B` of the 4x4 input tiles of images `x` (`count` images of `[cin, h, w]`) into `v`
/// (`[16, cin, count * tiles]`). One row of tiles at a time: its four input rows are copied,
/// zero-padded, into `rows`, each of the 16 elements is computed for the whole row of tiles into
/// `tile`, and each element's run of `tw` values is stored contiguously.
fn input_transform(g: &WinoGeom, x: &[f32], count: usize, v: &mut [f32], (rows, tile): (&mut [f32], &mut [f32])) {
    let (tiles, tw, hw) = (g.tiles(), g.tw(), g.h * g.w);
    let t_all = count * tiles;
    let plane = g.cin * t_all;
    // A padded row holds the input columns -pw .. 2 * tw + 2 - pw.
    let rw = 2 * tw + 2;
    for j in 0..count {
        for c in 0..g.cin {
            let xc = &x[(j * g.cin + c) * hw..][..hw];
            let base = c * t_all + j * tiles;
            for ty in 0..g.th() {
                for r in 0..4 {
                    let dst = &mut rows[r * rw..][..rw];
                    let iy = (2 * ty + r) as isize - g.ph as isize;
                    if iy < 0 || iy >= g.h as isize {
                        dst.fill(0.0);
                        continue;
                    }
                    let src = &xc[iy as usize * g.w..][..g.w];
                    // Input column `ix` lands at `ix + pw`.
                    let hi = (g.w + g.pw).min(rw);
                    dst[..g.pw.min(rw)].fill(0.0);
                    dst[g.pw.min(rw)..hi].copy_from_slice(&src[..hi - g.pw.min(rw)]);
                    dst[hi..].fill(0.0);
                }
                let row = |r: usize| &rows[r * rw..][..rw];
                let (r0, r1, r2, r3) = (row(0), row(1), row(2), row(3));
                for tx in 0..tw {
                    // B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]; rows first.
                    let mut t = [0.0f32; 16];
                    for s in 0..4 {
                        let (d0, d1, d2, d3) = (r0[2 * tx + s], r1[2 * tx + s], r2[2 * tx + s], r3[2 * tx + s]);
                        t[s] = d0 - d2;
                        t[4 + s] = d1 + d2;
                        t[8 + s] = d2 - d1;
                        t[12 + s] = d1 - d3;
                    }
                    for r in 0..4 {
                        let (t0, t1, t2, t3) = (t[4 * r], t[4 * r + 1], t[4 * r + 2], t[4 * r + 3]);
                        tile[(4 * r) * tw + tx] = t0 - t2;
                        tile[(4 * r + 1) * tw + tx] = t1 + t2;
                        tile[(4 * r + 2) * tw + tx] = t2 - t1;
                        tile[(4 * r + 3) * tw + tx] = t1 - t3;
                    }
                }
                let at = base + ty * tw;
                for e in 0..16 {
                    v[e * plane + at..][..tw].copy_from_slice(&tile[e * tw..][..tw]);
                }
            }
        }
    }
}

/// `A^T M A` of the products `m` (`[16, cout, count * tiles]`) stored into `count` output images
/// `y` (`[cout, oh, ow]` each) as `acc` says, with the bias `b` of each channel added first. One
/// row of tiles at a time: its two output rows are computed into `rows` (`2 * (2 * tw)`) and
/// stored.
fn output_transform(g: &WinoGeom, m: &[f32], count: usize, bias: Option<&[f32]>, y: &mut [f32], acc: Accum, rows: &mut [f32]) {
    let (tiles, tw, ohw) = (g.tiles(), g.tw(), g.oh * g.ow);
    let t_all = count * tiles;
    let plane = g.cout * t_all;
    let rw = 2 * tw;
    for j in 0..count {
        for k in 0..g.cout {
            let yk = &mut y[(j * g.cout + k) * ohw..][..ohw];
            let b = bias.map_or(0.0, |b| b[k]);
            let base = k * t_all + j * tiles;
            for ty in 0..g.th() {
                let at = base + ty * tw;
                let e = |i: usize| &m[i * plane + at..][..tw];
                let (out0, out1) = rows[..2 * rw].split_at_mut(rw);
                for tx in 0..tw {
                    // A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]; columns first.
                    let mut t = [0.0f32; 8];
                    for r in 0..4 {
                        let (m0, m1, m2, m3) = (e(4 * r)[tx], e(4 * r + 1)[tx], e(4 * r + 2)[tx], e(4 * r + 3)[tx]);
                        t[2 * r] = m0 + m1 + m2;
                        t[2 * r + 1] = m1 - m2 - m3;
                    }
                    for s in 0..2 {
                        let (t0, t1, t2, t3) = (t[s], t[2 + s], t[4 + s], t[6 + s]);
                        out0[2 * tx + s] = b + (t0 + t1 + t2);
                        out1[2 * tx + s] = b + (t1 - t2 - t3);
                    }
                }
                for (a, out) in [&*out0, &*out1].into_iter().enumerate() {
                    let oy = 2 * ty + a;
                    if oy < g.oh {
                        let dst = &mut yk[oy * g.ow..][..g.ow];
                        match acc {
                            Accum::Write => dst.copy_from_slice(&out[..g.ow]),
                            Accum::Add => dst.iter_mut().zip(&out[..g.ow]).for_each(|(d, v)| *d += *v),
                        }
                    }
                }
            }
        }
    }
}

/// The convolution `g` of `count` images `x` into `y` (stored as `acc` says) with the
/// transformed weights `u`, through the workspaces `v`, `m` and `scratch` of
/// [`WinoGeom::workspace_len`].
/// `pool` runs the products when the caller is not already running groups in parallel.
#[allow(clippy::too_many_arguments)]
pub(crate) fn convolve_group(
    g: &WinoGeom,
    u: &[f32],
    x: &[f32],
    count: usize,
    bias: Option<&[f32]>,
    y: &mut [f32],
    acc: Accum,
    (v, m, scratch): (&mut [f32], &mut [f32], &mut [f32]),
    pool: Option<&rayon::ThreadPool>,
) {
    let t_all = count * g.tiles();
    let (rows, tile) = scratch.split_at_mut(8 * g.tw() + 8);
    input_transform(g, x, count, v, (rows, &mut tile[..16 * g.tw()]));
    let (vp, mp, up) = (g.cin * t_all, g.cout * t_all, g.cout * g.cin);
    for e in 0..16 {
        gemm(
            1.0,
            Mat::new(&u[e * up..][..up], g.cout, g.cin),
            Mat::new(&v[e * vp..][..vp], g.cin, t_all),
            0.0,
            MatMut::new(&mut m[e * mp..][..mp], g.cout, t_all),
            pool,
        );
    }
    output_transform(g, m, count, bias, y, acc, rows);
}

/// `A D A^T` of the 2x2 output-gradient tiles of images `dy` (`count` images of
/// `[cout, oh, ow]`, zero past the edges) into `z` (`[16, cout, count * tiles]`).
fn output_grad_transform(g: &WinoGeom, dy: &[f32], count: usize, z: &mut [f32], (rows, tile): (&mut [f32], &mut [f32])) {
    let (tiles, tw, ohw) = (g.tiles(), g.tw(), g.oh * g.ow);
    let t_all = count * tiles;
    let plane = g.cout * t_all;
    let rw = 2 * tw;
    for j in 0..count {
        for k in 0..g.cout {
            let dyk = &dy[(j * g.cout + k) * ohw..][..ohw];
            let base = k * t_all + j * tiles;
            for ty in 0..g.th() {
                for r in 0..2 {
                    let dst = &mut rows[r * rw..][..rw];
                    let oy = 2 * ty + r;
                    if oy < g.oh {
                        dst[..g.ow].copy_from_slice(&dyk[oy * g.ow..][..g.ow]);
                        dst[g.ow..].fill(0.0);
                    } else {
                        dst.fill(0.0);
                    }
                }
                let (r0, r1) = rows[..2 * rw].split_at(rw);
                for tx in 0..tw {
                    // A = [[1, 0], [1, 1], [1, -1], [0, -1]]; rows first, then columns.
                    let (a, b, c, d) = (r0[2 * tx], r0[2 * tx + 1], r1[2 * tx], r1[2 * tx + 1]);
                    let rows4 = [(a, b), (a + c, b + d), (a - c, b - d), (-c, -d)];
                    for (r, (p, q)) in rows4.into_iter().enumerate() {
                        tile[(4 * r) * tw + tx] = p;
                        tile[(4 * r + 1) * tw + tx] = p + q;
                        tile[(4 * r + 2) * tw + tx] = p - q;
                        tile[(4 * r + 3) * tw + tx] = -q;
                    }
                }
                let at = base + ty * tw;
                for e in 0..16 {
                    z[e * plane + at..][..tw].copy_from_slice(&tile[e * tw..][..tw]);
                }
            }
        }
    }
}

/// The weight gradient (`[cout, cin, 3, 3]`, written) of images `first..first + count` of `x`
/// and `dy`: per group of images, `dU_e [cout, cin] += Z_e [cout, T] x V_e^T [T, cin]` with the
/// transformed output gradient `Z = A dY A^T` and input `V = B^T d B`, then `dW = G^T dU G`.
/// The groups are those of [`WinoGeom::images_per_group`] counted from `first`, so every sum
/// has the same terms in the same order on any thread.
pub(crate) fn weight_grad_of_images(
    g: &WinoGeom,
    x: &[f32],
    dy: &[f32],
    first: usize,
    count: usize,
    dw: &mut [f32],
    (v, z, scratch, du): (&mut [f32], &mut [f32], &mut [f32], &mut [f32]),
) {
    let (x_img, y_img, ipg) = (g.cin * g.h * g.w, g.cout * g.oh * g.ow, g.images_per_group());
    let up = g.cout * g.cin;
    let (rows, tile) = scratch.split_at_mut(8 * g.tw() + 8);
    let tile = &mut tile[..16 * g.tw()];
    let mut start = first;
    while start < first + count {
        let c = ipg.min(first + count - start);
        let t_all = c * g.tiles();
        input_transform(g, &x[start * x_img..][..c * x_img], c, v, (&mut *rows, &mut *tile));
        output_grad_transform(g, &dy[start * y_img..][..c * y_img], c, z, (&mut *rows, &mut *tile));
        let (vp, zp) = (g.cin * t_all, g.cout * t_all);
        let beta = if start == first { 0.0 } else { 1.0 };
        for e in 0..16 {
            gemm(
                1.0,
                Mat::new(&z[e * zp..][..zp], g.cout, t_all),
                Mat::new(&v[e * vp..][..vp], g.cin, t_all).t(),
                beta,
                MatMut::new(&mut du[e * up..][..up], g.cout, g.cin),
                None,
            );
        }
        start += c;
    }
    if count == 0 {
        dw.fill(0.0);
        return;
    }
    // dW = G^T dU G, G^T = [[1, 1/2, 1/2, 0], [0, 1/2, -1/2, 0], [0, 1/2, 1/2, 1]].
    for (i, out) in dw.chunks_exact_mut(9).enumerate().take(up) {
        let e = |r: usize, s: usize| du[(4 * r + s) * up + i];
        let mut t = [0.0f32; 12];
        for s in 0..4 {
            let (d0, d1, d2, d3) = (e(0, s), e(1, s), e(2, s), e(3, s));
            t[s] = d0 + 0.5 * (d1 + d2);
            t[4 + s] = 0.5 * (d1 - d2);
            t[8 + s] = 0.5 * (d1 + d2) + d3;
        }
        for a in 0..3 {
            let (d0, d1, d2, d3) = (t[4 * a], t[4 * a + 1], t[4 * a + 2], t[4 * a + 3]);
            out[3 * a] = d0 + 0.5 * (d1 + d2);
            out[3 * a + 1] = 0.5 * (d1 - d2);
            out[3 * a + 2] = 0.5 * (d1 + d2) + d3;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One image, one channel each way: the 2x2 output of a 4x4 input by hand.
    #[test]
    fn one_tile_matches_the_direct_sum() {
        let g = WinoGeom { n: 1, cin: 1, cout: 1, h: 4, w: 4, ph: 0, pw: 0, oh: 2, ow: 2 };
        let x: Vec<f32> = (0..16).map(|i| i as f32).collect();
        let w = [1.0, 2.0, 0.0, -1.0, 0.5, 3.0, 2.0, 0.0, 1.0];
        let mut u = vec![0.0; 16];
        transform_weights(&g, &w, false, &mut u);
        let [vl, ml, sl, _] = g.workspace_len();
        let (mut v, mut m, mut s, mut y) = (vec![0.0; vl], vec![0.0; ml], vec![0.0; sl], vec![0.0; 4]);
        convolve_group(&g, &u, &x, 1, Some(&[0.25]), &mut y, Accum::Write, (&mut v, &mut m, &mut s), None);
        // y[oy][ox] = 0.25 + sum w[ky][kx] x[oy + ky][ox + kx], by hand.
        let direct = |oy: usize, ox: usize| 0.25 + (0..9).map(|t| w[t] * x[(oy + t / 3) * 4 + ox + t % 3]).sum::<f32>();
        assert_eq!(y, vec![direct(0, 0), direct(0, 1), direct(1, 0), direct(1, 1)]);
        assert_eq!(y, vec![44.75, 53.25, 78.75, 87.25]);
    }

    #[test]
    fn non_finite_and_huge_values_are_not_transformable() {
        for (v, ok) in [(1.0, true), (-1e13, true), (1e15, false), (f32::INFINITY, false), (f32::NEG_INFINITY, false), (f32::NAN, false)] {
            assert_eq!(transformable(&[0.0, v]), ok, "{v}");
        }
    }
}
