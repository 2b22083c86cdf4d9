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
    /// scratch of the transforms ([`scratch_len`]), and (0 here) the transformed weight gradient.
    pub fn workspace_len(&self) -> [usize; 4] {
        let t = self.images_per_group() * self.tiles();
        [16 * self.cin * t, 16 * self.cout * t, scratch_len(self), 0]
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

/// The 16 planes of a transformed operand `[16, channels, t_all]`, each `plane` long.
fn planes_mut(data: &mut [f32], plane: usize) -> [&mut [f32]; 16] {
    let mut planes = data.chunks_exact_mut(plane.max(1));
    std::array::from_fn(|_| planes.next().unwrap_or_default())
}

/// The image plane `src` (`h x w`) as `rows` rows of its zero-padded version, which starts `ph`
/// rows and `pw` columns before it, split into the even (`even`) and odd (`odd`) columns of
/// each row, `half` of each per row. The transforms then read the four columns of a tile
/// (`2 tx .. 2 tx + 4`) as `even[tx], odd[tx], even[tx + 1], odd[tx + 1]`: four contiguous
/// runs over the tiles of a row, which the compiler vectorises.
fn split_columns(
    src: &[f32],
    (h, w): (usize, usize),
    (ph, pw): (usize, usize),
    rows: usize,
    half: usize,
    even: &mut [f32],
    odd: &mut [f32],
) {
    // Padded column `ix + pw` of input column `ix`: with odd `pw` the first input column is an
    // odd one, and the rest come in (even, odd) pairs from padded column `pw + pw % 2` on.
    let (lead, first) = (pw % 2, (pw + pw % 2) / 2);
    for py in 0..rows {
        let (e, o) = (&mut even[py * half..][..half], &mut odd[py * half..][..half]);
        e.fill(0.0);
        o.fill(0.0);
        if py < ph || py - ph >= h {
            continue;
        }
        let row = &src[(py - ph) * w..][..w];
        if lead == 1 {
            if let (Some(d), Some(v)) = (o.get_mut(pw / 2), row.first()) {
                *d = *v;
            }
        }
        let rest = &row[lead.min(w)..];
        let pairs = rest.chunks_exact(2);
        let tail = pairs.remainder();
        let (e, o) = (&mut e[first.min(half)..], &mut o[first.min(half)..]);
        for ((d0, d1), pair) in e.iter_mut().zip(o.iter_mut()).zip(pairs) {
            *d0 = pair[0];
            *d1 = pair[1];
        }
        if let (Some(d), Some(v)) = (e.get_mut(rest.len() / 2), tail.first()) {
            *d = *v;
        }
    }
}

/// Scratch the transforms need: the even and odd columns of one padded input plane
/// ([`split_columns`]), which also holds the two output rows of [`output_transform`].
fn scratch_len(g: &WinoGeom) -> usize {
    2 * (2 * g.th() + 2) * (g.tw() + 1)
}

/// `B^T d B` of the 4x4 input tiles of images `x` (`count` images of `[cin, h, w]`) into `v`
/// (`[16, cin, count * tiles]`). One channel at a time: its padded plane is split into even and
/// odd columns in `scratch`, then each row of tiles computes its 16 elements straight into
/// their planes of `v`, a contiguous run of `tw` values each.
fn input_transform(g: &WinoGeom, x: &[f32], count: usize, v: &mut [f32], scratch: &mut [f32]) {
    let (tiles, tw, th, hw) = (g.tiles(), g.tw(), g.th(), g.h * g.w);
    let t_all = count * tiles;
    let mut planes = planes_mut(&mut v[..16 * g.cin * t_all], g.cin * t_all);
    // A padded row holds the input columns -pw .. 2 * tw + 2 - pw, in tw + 1 even and odd pairs.
    let (half, rows) = (tw + 1, 2 * th + 2);
    let (even, odd) = scratch[..2 * rows * half].split_at_mut(rows * half);
    for j in 0..count {
        for c in 0..g.cin {
            split_columns(&x[(j * g.cin + c) * hw..][..hw], (g.h, g.w), (g.ph, g.pw), rows, half, even, odd);
            let base = c * t_all + j * tiles;
            for ty in 0..th {
                let at = base + ty * tw;
                let row = |r: usize| (&even[(2 * ty + r) * half..][..half], &odd[(2 * ty + r) * half..][..half]);
                let rows4 = [row(0), row(1), row(2), row(3)];
                let mut out = planes.each_mut().map(|p| &mut p[at..at + tw]);
                by_blocks(tw, |tx, width| match width {
                    BLOCK => input_tiles::<BLOCK>(rows4, tx, &mut out),
                    _ => input_tiles::<1>(rows4, tx, &mut out),
                });
            }
        }
    }
}

/// Tiles computed together, one per vector lane: the transforms run over `[f32; BLOCK]` values
/// of consecutive tiles of a row, which the compiler turns into vector instructions.
const BLOCK: usize = 8;

/// Calls `f(tx, BLOCK)` for each block of `BLOCK` tiles of a row of `tw`, then `f(tx, 1)` for
/// each tile left over.
#[inline(always)]
fn by_blocks(tw: usize, mut f: impl FnMut(usize, usize)) {
    let full = tw / BLOCK * BLOCK;
    (0..full).step_by(BLOCK).for_each(|tx| f(tx, BLOCK));
    (full..tw).for_each(|tx| f(tx, 1));
}

/// `L` consecutive values of `s` from `at`.
#[inline(always)]
fn load<const L: usize>(s: &[f32], at: usize) -> [f32; L] {
    std::array::from_fn(|l| s[at + l])
}

#[inline(always)]
fn add<const L: usize>(a: [f32; L], b: [f32; L]) -> [f32; L] {
    std::array::from_fn(|l| a[l] + b[l])
}

#[inline(always)]
fn sub<const L: usize>(a: [f32; L], b: [f32; L]) -> [f32; L] {
    std::array::from_fn(|l| a[l] - b[l])
}

/// `B^T d B` of the `L` input tiles `tx .. tx + L` of a row of tiles: `rows` are the even and
/// odd columns of the row's four padded input rows, `out` the row's runs of the 16 planes.
#[inline(always)]
fn input_tiles<const L: usize>(rows: [(&[f32], &[f32]); 4], tx: usize, out: &mut [&mut [f32]; 16]) {
    // Column s of the tiles: even[tx], odd[tx], even[tx + 1], odd[tx + 1].
    let cols = |(e, o): (&[f32], &[f32])| [load::<L>(e, tx), load::<L>(o, tx), load::<L>(e, tx + 1), load::<L>(o, tx + 1)];
    let [r0, r1, r2, r3] = rows.map(cols);
    // B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]; rows first.
    let t: [[[f32; L]; 4]; 4] = [
        std::array::from_fn(|s| sub(r0[s], r2[s])),
        std::array::from_fn(|s| add(r1[s], r2[s])),
        std::array::from_fn(|s| sub(r2[s], r1[s])),
        std::array::from_fn(|s| sub(r1[s], r3[s])),
    ];
    for (r, [t0, t1, t2, t3]) in t.into_iter().enumerate() {
        for (k, v) in [sub(t0, t2), add(t1, t2), sub(t2, t1), sub(t1, t3)].into_iter().enumerate() {
            out[4 * r + k][tx..tx + L].copy_from_slice(&v);
        }
    }
}

/// `A^T M A` of the products `m` (`[16, cout, count * tiles]`) stored into `count` output images
/// `y` (`[cout, oh, ow]` each) as `acc` says, with the bias `b` of each channel added first. One
/// row of tiles at a time: its two output rows are computed into `rows` (`2 * (2 * tw)`) from
/// the 16 contiguous runs of the row's products, and stored.
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
                let e: [&[f32]; 16] = std::array::from_fn(|i| &m[i * plane + at..][..tw]);
                let (out0, out1) = rows[..2 * rw].split_at_mut(rw);
                by_blocks(tw, |tx, width| match width {
                    BLOCK => output_tiles::<BLOCK>(&e, tx, b, (out0, out1)),
                    _ => output_tiles::<1>(&e, tx, b, (out0, out1)),
                });
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

/// `A^T M A` of the `L` tiles `tx .. tx + L` of a row of tiles, plus `b`: `e` are the row's
/// runs of the 16 product planes, `out` its two output rows.
#[inline(always)]
fn output_tiles<const L: usize>(e: &[&[f32]; 16], tx: usize, b: f32, (out0, out1): (&mut [f32], &mut [f32])) {
    let m: [[f32; L]; 16] = std::array::from_fn(|i| load::<L>(e[i], tx));
    // A^T = [[1, 1, 1, 0], [0, 1, -1, -1]]; columns first.
    let t: [[f32; L]; 8] = std::array::from_fn(|i| {
        let r = i / 2;
        let (m0, m1, m2, m3) = (m[4 * r], m[4 * r + 1], m[4 * r + 2], m[4 * r + 3]);
        if i % 2 == 0 {
            add(add(m0, m1), m2)
        } else {
            sub(sub(m1, m2), m3)
        }
    });
    let bias = [b; L];
    for s in 0..2 {
        let (t0, t1, t2, t3) = (t[s], t[2 + s], t[4 + s], t[6 + s]);
        let (y0, y1) = (add(bias, add(add(t0, t1), t2)), add(bias, sub(sub(t1, t2), t3)));
        for l in 0..L {
            out0[2 * (tx + l) + s] = y0[l];
            out1[2 * (tx + l) + s] = y1[l];
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
    input_transform(g, x, count, v, scratch);
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
    output_transform(g, m, count, bias, y, acc, scratch);
}

/// `A D A^T` of the 2x2 output-gradient tiles of images `dy` (`count` images of
/// `[cout, oh, ow]`, zero past the edges) into `z` (`[16, cout, count * tiles]`), one channel
/// at a time as [`input_transform`] does.
fn output_grad_transform(g: &WinoGeom, dy: &[f32], count: usize, z: &mut [f32], scratch: &mut [f32]) {
    let (tiles, tw, th, ohw) = (g.tiles(), g.tw(), g.th(), g.oh * g.ow);
    let t_all = count * tiles;
    let mut planes = planes_mut(&mut z[..16 * g.cout * t_all], g.cout * t_all);
    let rows = 2 * th;
    let (even, odd) = scratch[..2 * rows * tw].split_at_mut(rows * tw);
    for j in 0..count {
        for k in 0..g.cout {
            split_columns(&dy[(j * g.cout + k) * ohw..][..ohw], (g.oh, g.ow), (0, 0), rows, tw, even, odd);
            let base = k * t_all + j * tiles;
            for ty in 0..th {
                let at = base + ty * tw;
                let mut out = planes.each_mut().map(|p| &mut p[at..at + tw]);
                let r0 = (&even[2 * ty * tw..][..tw], &odd[2 * ty * tw..][..tw]);
                let r1 = (&even[(2 * ty + 1) * tw..][..tw], &odd[(2 * ty + 1) * tw..][..tw]);
                by_blocks(tw, |tx, width| match width {
                    BLOCK => output_grad_tiles::<BLOCK>([r0, r1], tx, &mut out),
                    _ => output_grad_tiles::<1>([r0, r1], tx, &mut out),
                });
            }
        }
    }
}

/// `A D A^T` of the `L` output-gradient tiles `tx .. tx + L` of a row of tiles: `rows` are the
/// even and odd columns of its two rows, `out` the row's runs of the 16 planes.
#[inline(always)]
fn output_grad_tiles<const L: usize>(rows: [(&[f32], &[f32]); 2], tx: usize, out: &mut [&mut [f32]; 16]) {
    let [(e0, o0), (e1, o1)] = rows;
    // A = [[1, 0], [1, 1], [1, -1], [0, -1]]; rows first, then columns.
    let (a, b, c, d) = (load::<L>(e0, tx), load::<L>(o0, tx), load::<L>(e1, tx), load::<L>(o1, tx));
    let neg = |v: [f32; L]| v.map(|x| -x);
    let rows4 = [(a, b), (add(a, c), add(b, d)), (sub(a, c), sub(b, d)), (neg(c), neg(d))];
    for (r, (p, q)) in rows4.into_iter().enumerate() {
        for (k, v) in [p, add(p, q), sub(p, q), neg(q)].into_iter().enumerate() {
            out[4 * r + k][tx..tx + L].copy_from_slice(&v);
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
    let mut start = first;
    while start < first + count {
        let c = ipg.min(first + count - start);
        let t_all = c * g.tiles();
        input_transform(g, &x[start * x_img..][..c * x_img], c, v, scratch);
        output_grad_transform(g, &dy[start * y_img..][..c * y_img], c, z, scratch);
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
