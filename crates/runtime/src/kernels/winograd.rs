//! Winograd F(2x2, 3x3) and F(4x4, 3x3) for stride-1, dilation-1, single-group 3x3 convolutions.
//!
//! The output is cut into `m x m` tiles (`m` = 2 or 4, [`Tile`]); each reads an `a x a` tile of
//! the zero-padded input (`a = m + 2`). With the transforms `V = B^T d B` of every input tile,
//! `U = G g G^T` of every 3x3 kernel and `Y = A^T M A` of every product, the convolution becomes
//! `a^2` matrix products `M_e [C_out, T] = U_e [C_out, C_in] x V_e [C_in, T]`, one per element
//! `e` of the transformed tile, over the `T` tiles of a group of images: per output and channel
//! pair, 16/4 = 4 multiply-adds with F(2x2, 3x3) and 36/16 = 2.25 with F(4x4, 3x3), where the
//! direct convolution does 9. Each layer takes the tile that needs fewer products for its output
//! size ([`Tile::for_output`]): F(4x4, 3x3) unless a side of the output is 2 or less.
//!
//! The input gradient of a stride-1 3x3 convolution with padding `p <= 2` is itself such a
//! convolution: of the output gradient, padded by `2 - p`, with the kernel flipped in both
//! directions and its channel axes swapped. [`WinoGeom::input_grad_of`] gives its geometry.
//!
//! Rounding: the transforms add and subtract (and, for F(4x4, 3x3), scale by up to 8) a few
//! values before and after the products, so a Winograd output differs from the direct sum by
//! rounding; `tests/winograd.rs` checks that every output stays within the error bound of a
//! direct float32 sum of the same length, and `README.md` gives the differences measured on
//! vgg7's layers. The transforms would turn an infinity into NaN (`inf - inf`) where the direct
//! sum keeps it, so [`transformable`] sends any operand holding a non-finite or huge value down
//! the direct path.
//!
//! The weight gradient runs the same transforms the other way: with `Z = A dY A^T` of each
//! `m x m` output-gradient tile, `dU_e [C_out, C_in] = Z_e [C_out, T] x V_e^T [T, C_in]` summed
//! over the tiles, and `dW = G^T dU G`.
//!
//! Threads: the images are cut into groups of a size fixed by the geometry (never by the thread
//! count), the threads share the groups out, and every product is on the GEMM's general path
//! whatever the group size (see [`WinoGeom::supported`]), where each output element is the same
//! sum in the same order however many columns the product has. Results are therefore the same
//! bits on any thread count and for any cut of a batch into slices.

use super::Accum;
use crate::gemm::{gemm, general_path, Mat, MatMut};
use std::ops::Range;

/// Operand values at or above this magnitude (and NaN, and the infinities) take the direct path:
/// below it no sum of the transforms and products can overflow where the direct sum would not
/// (F(4x4, 3x3)'s transforms scale a value by at most `10^2` on the input side and `18^2` on the
/// output side).
const TRANSFORM_LIMIT: f32 = 1e14;

/// The fewest input channels (of the forward pass, or of the input gradient seen as one) for
/// F(4x4, 3x3). Its transforms scale values by up to 5 and 8 and its `G` holds sixths, so its
/// rounding error is about a fixed multiple of float32's rounding of the terms' magnitudes,
/// where a direct sum's error bound `gamma_n` grows with the sum's length `n = C_in * 9`:
/// an output's error also follows the magnitudes of its whole 6x6 input tile, so an output at
/// a zero-padded border, whose own terms are few, comes closest to its bound. `tests/winograd.rs`
/// measured up to 0.32 of the bound at 24 input channels with padding 1, and 0.60 at 36 with
/// padding 2; from 64 channels (`n = 576`, every 3x3 layer of vgg7 and resnet18 but the first)
/// F(4x4, 3x3) stays well inside it, and fewer channels take F(2x2, 3x3).
const F4_MIN_CHANNELS: usize = 64;

/// Values left unused after each plane of a transformed operand (one cache line). The
/// transforms write (and read) all planes at once, and planes a power of two bytes apart (such
/// as `128 x 128` values) would all fall on the same sets of the L1 cache, which holds only 8
/// lines per set; one line more per plane spreads them over the sets.
const PLANE_PAD: usize = 16;

/// The fewest columns of a transformed operand: a group of one image of one tile (F(4x4, 3x3)
/// on a 4x4 output) gets a zero column beside its own, so that its products stay on the GEMM's
/// general path (a single column would be a matrix-vector product, summed in another order)
/// and give the bits the image has in any larger group.
const MIN_COLUMNS: usize = 2;

/// The most planes a transformed operand has (F(4x4, 3x3)'s 6x6 tiles).
const MAX_PLANES: usize = 36;

/// The output tile of a Winograd convolution.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Tile {
    /// F(2x2, 3x3): 2x2 outputs from 4x4 input tiles, 16 products.
    F2,
    /// F(4x4, 3x3): 4x4 outputs from 6x6 input tiles, 36 products.
    F4,
}

impl Tile {
    /// The tile with fewer products for an `oh x ow` output (F(2x2, 3x3) on a tie).
    pub fn for_output(oh: usize, ow: usize) -> Tile {
        let products = |t: Tile| oh.div_ceil(t.side()) * ow.div_ceil(t.side()) * t.planes();
        if products(Tile::F4) < products(Tile::F2) {
            Tile::F4
        } else {
            Tile::F2
        }
    }

    /// Side of the output tile, `m`.
    pub fn side(self) -> usize {
        match self {
            Tile::F2 => 2,
            Tile::F4 => 4,
        }
    }

    /// Side of the input tile, `m + 2`.
    fn input_side(self) -> usize {
        self.side() + 2
    }

    /// Elements of a transformed tile, `(m + 2)^2`: the products per tile and channel pair.
    pub fn planes(self) -> usize {
        self.input_side() * self.input_side()
    }

    /// Tiles a group of images aims for: enough columns for the products to run near the
    /// GEMM's rate, few enough that a group's transformed tiles stay in the cache hierarchy
    /// (F(4x4, 3x3)'s tiles have 2.25 times the planes and 4 times the outputs).
    fn group_tiles(self) -> usize {
        match self {
            Tile::F2 => 256,
            Tile::F4 => 128,
        }
    }
}

/// The sizes of one stride-1 3x3 convolution run by Winograd (a forward pass, or the input
/// gradient seen as one), and its tile.
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
    pub tile: Tile,
}

impl WinoGeom {
    /// Rows of output tiles.
    fn th(&self) -> usize {
        self.oh.div_ceil(self.tile.side())
    }
    /// Columns of output tiles.
    fn tw(&self) -> usize {
        self.ow.div_ceil(self.tile.side())
    }
    /// Tiles of one image.
    fn tiles(&self) -> usize {
        self.th() * self.tw()
    }
    /// Planes of a transformed operand.
    fn planes(&self) -> usize {
        self.tile.planes()
    }

    /// Whether the transforms run over tiles gathered from padded planes (rows of fewer than
    /// [`BLOCK`] tiles: resnet18's and vgg7's 16x16 and smaller layers) rather than along the
    /// runs of a row's tiles.
    fn gathers(&self) -> bool {
        self.tw() < BLOCK
    }

    /// Rows of a zero-padded input plane covering every tile: `m th + 2`.
    fn padded_rows(&self) -> usize {
        self.tile.side() * self.th() + 2
    }

    /// Columns of a zero-padded input plane covering every tile: `m tw + 2`.
    fn padded_cols(&self) -> usize {
        self.tile.side() * self.tw() + 2
    }

    /// Length of one zero-padded input plane.
    fn padded_len(&self) -> usize {
        self.padded_rows() * self.padded_cols()
    }

    /// Where column `col` (image `col / tiles`, tile `col % tiles`) finds its tile in padded
    /// planes of a group's images, `len` apart, with rows of `cols`.
    fn window(&self, col: usize, len: usize, cols: usize) -> usize {
        let (j, t) = (col / self.tiles(), col % self.tiles());
        let m = self.tile.side();
        j * len + m * (t / self.tw()) * cols + m * (t % self.tw())
    }

    /// Images per group: enough for the tile's group size, at most the batch.
    pub fn images_per_group(&self) -> usize {
        self.tile.group_tiles().div_ceil(self.tiles().max(1)).clamp(1, self.n.max(1))
    }

    /// Groups the batch is cut into.
    pub fn groups(&self) -> usize {
        self.n.div_ceil(self.images_per_group())
    }

    /// The columns of a transformed operand's planes for `count` images: their tiles, and at
    /// least [`MIN_COLUMNS`] (the unused column of a group of one single-tile image is zero).
    fn columns(&self, count: usize) -> usize {
        (count * self.tiles()).max(MIN_COLUMNS)
    }

    /// The length of one plane of a transformed operand with `rows` rows for `count` images:
    /// its `rows x columns` values, then [`PLANE_PAD`] unused ones.
    fn plane_len(&self, rows: usize, count: usize) -> usize {
        rows * self.columns(count) + PLANE_PAD
    }

    /// Whether Winograd applies: a single image's products already on the GEMM's general path,
    /// so a group of any size stays on it (where each output is the same sum whatever the
    /// column count, which keeps the bits independent of grouping and threads), and padding at
    /// most 2 so that the input gradient's padding `2 - p` exists. (Padding the columns of
    /// smaller images with zeros would let them take Winograd too, but their weight gradients,
    /// sums of few terms, measured far outside a direct sum's error bound: 20x on 2x2 images.)
    /// Images whose output is one tile take it only where a side of the output is more than 2
    /// (F(4x4, 3x3) on resnet18's 4x4 layers), their single column padded to [`MIN_COLUMNS`].
    pub fn supported(&self) -> bool {
        let one_small_tile = self.tiles() == 1 && self.oh.min(self.ow) <= 2;
        self.ph <= 2 && self.pw <= 2 && self.oh > 0 && self.ow > 0 && !one_small_tile && general_path(self.cout, self.columns(1))
    }

    /// This geometry with the tile that needs fewer products for its output
    /// ([`Tile::for_output`]) where, for F(4x4, 3x3), the sums have at least
    /// [`F4_MIN_CHANNELS`] input channels; F(2x2, 3x3) otherwise.
    pub fn with_best_tile(self) -> WinoGeom {
        let best = Tile::for_output(self.oh, self.ow);
        let f4 = self.cin >= F4_MIN_CHANNELS;
        let tile = if best == Tile::F4 && f4 && (WinoGeom { tile: Tile::F4, ..self }).supported() { Tile::F4 } else { Tile::F2 };
        WinoGeom { tile, ..self }
    }

    /// The input gradient of this convolution as a forward convolution of the output gradient,
    /// with the best tile for its output (the input's size).
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
            tile: Tile::F2,
        }
        .with_best_tile()
    }

    /// Length of the transformed weights, `[planes, cout, cin]`.
    pub fn u_len(&self) -> usize {
        self.planes() * self.cout * self.cin
    }

    /// Lengths of one group's transformed input `[planes, cin, T]`, products `[planes, cout,
    /// T]`, the scratch of the transforms ([`scratch_len`]), and (0 here) the transformed
    /// weight gradient.
    pub fn workspace_len(&self) -> [usize; 4] {
        let ipg = self.images_per_group();
        [self.planes() * self.plane_len(self.cin, ipg), self.planes() * self.plane_len(self.cout, ipg), scratch_len(self), 0]
    }

    /// Whether the weight gradient's products (`[cout, cin]`, summed over tiles) are on the GEMM's
    /// general path, where their sums depend on the tile count alone, and images have more
    /// than one tile: where an image is one tile, each kernel tap's sum shares the rounding of
    /// the whole tile's terms, and `tests/winograd.rs` measured 1.46 times a direct sum's error
    /// bound on 3x3 outputs (such layers keep the direct weight gradient, which measured as
    /// fast on resnet18's 4x4 layers).
    pub fn weight_grad_supported(&self) -> bool {
        general_path(self.cout, self.cin) && self.tiles() > 1
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

/// `G g G^T` of `LANES` 3x3 kernels at once for F(2x2, 3x3): `k[t][l]` is element `t`
/// (row-major) of kernel `l`, `out[e][l]` element `e` of its 4x4 transform. Each lane computes
/// exactly what one kernel alone would, so the loops vectorise across kernels.
#[inline(always)]
fn kernel_transform_f2(k: &[[f32; LANES]; 9], out: &mut [[f32; LANES]; MAX_PLANES]) {
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

/// `G v` for F(4x4, 3x3), `G = [[1/4, 0, 0], [-1/6, -1/6, -1/6], [-1/6, 1/6, -1/6],
/// [1/24, 1/12, 1/6], [1/24, -1/12, 1/6], [0, 0, 1]]`.
#[inline(always)]
fn g_f4(v0: f32, v1: f32, v2: f32) -> [f32; 6] {
    let s = v0 + v2;
    let (p, q) = (v0 / 24.0 + v2 / 6.0, v1 / 12.0);
    [v0 / 4.0, -(s + v1) / 6.0, -(s - v1) / 6.0, p + q, p - q, v2]
}

/// `G g G^T` of `LANES` 3x3 kernels at once for F(4x4, 3x3), laid out as
/// [`kernel_transform_f2`]'s, into the 36 elements of each 6x6 transform.
#[inline(always)]
fn kernel_transform_f4(k: &[[f32; LANES]; 9], out: &mut [[f32; LANES]; MAX_PLANES]) {
    // t[3 r + c] = (G g)[r][c]: G on the columns of g, then G on the rows of G g.
    let mut t = [[0.0f32; LANES]; 18];
    for c in 0..3 {
        for l in 0..LANES {
            for (r, v) in g_f4(k[c][l], k[3 + c][l], k[6 + c][l]).into_iter().enumerate() {
                t[3 * r + c][l] = v;
            }
        }
    }
    for r in 0..6 {
        for l in 0..LANES {
            for (c, v) in g_f4(t[3 * r][l], t[3 * r + 1][l], t[3 * r + 2][l]).into_iter().enumerate() {
                out[6 * r + c][l] = v;
            }
        }
    }
}

/// The transformed weights `u` (`[planes, cout, cin]`) of the convolution `g` from a PyTorch
/// weight `w`. With `flip`, `w` is the weight of the convolution whose input gradient `g` is
/// (`[g.cin, g.cout, 3, 3]`), read flipped in both directions with its channel axes swapped.
/// The output channels are shared out over `pool`'s threads (each kernel's transform is the same
/// whoever computes it): a training step transforms every Winograd layer's weights twice, 9.4 M
/// values each time for a 512-channel layer.
pub(crate) fn transform_weights(g: &WinoGeom, w: &[f32], flip: bool, u: &mut [f32], pool: Option<&rayon::ThreadPool>) {
    let plane = g.cout * g.cin;
    let planes = planes_mut(&mut u[..g.planes() * plane], plane);
    match pool {
        Some(p) if p.current_num_threads() > 1 && g.u_len() >= crate::par::PAR_MIN_WORK => {
            p.install(|| transform_weight_rows(g, w, flip, planes, 0..g.cout, p.current_num_threads()))
        }
        _ => transform_weight_rows(g, w, flip, planes, 0..g.cout, 1),
    }
}

/// The output channels `rows` of [`transform_weights`] into `planes`, each plane's rows `rows`,
/// cut into `parts` pieces that run side by side (`rayon::join`).
fn transform_weight_rows(g: &WinoGeom, w: &[f32], flip: bool, planes: [&mut [f32]; MAX_PLANES], rows: Range<usize>, parts: usize) {
    if parts > 1 && rows.len() > 1 {
        let mid = rows.start + rows.len() * (parts / 2) / parts;
        let (left, right) = split_planes(planes, (mid - rows.start) * g.cin);
        rayon::join(
            || transform_weight_rows(g, w, flip, left, rows.start..mid, parts / 2),
            || transform_weight_rows(g, w, flip, right, mid..rows.end, parts - parts / 2),
        );
        return;
    }
    let mut planes = planes;
    let mut k = [[0.0f32; LANES]; 9];
    let mut out = [[0.0f32; LANES]; MAX_PLANES];
    for o in rows.clone() {
        for i0 in (0..g.cin).step_by(LANES) {
            let n = LANES.min(g.cin - i0);
            for l in 0..n {
                let i = i0 + l;
                let src = if flip { &w[(i * g.cout + o) * 9..][..9] } else { &w[(o * g.cin + i) * 9..][..9] };
                for (t, row) in k.iter_mut().enumerate() {
                    row[l] = if flip { src[8 - t] } else { src[t] };
                }
            }
            match g.tile {
                Tile::F2 => kernel_transform_f2(&k, &mut out),
                Tile::F4 => kernel_transform_f4(&k, &mut out),
            }
            for (dst, run) in planes.iter_mut().zip(&out).take(g.planes()) {
                dst[(o - rows.start) * g.cin + i0..][..n].copy_from_slice(&run[..n]);
            }
        }
    }
}

/// Each plane cut at `at` (or its end): the planes' heads and their tails.
fn split_planes(planes: [&mut [f32]; MAX_PLANES], at: usize) -> ([&mut [f32]; MAX_PLANES], [&mut [f32]; MAX_PLANES]) {
    let mut halves = planes.into_iter().map(|p| p.split_at_mut(at.min(p.len())));
    let mut tails: [&mut [f32]; MAX_PLANES] = std::array::from_fn(|_| &mut [][..]);
    let heads = std::array::from_fn(|e| {
        let (head, tail) = halves.next().unwrap_or_default();
        tails[e] = tail;
        head
    });
    (heads, tails)
}

/// The planes of a transformed operand `[planes, channels, t_all]`, each `plane` long; those
/// past the operand's plane count are empty.
fn planes_mut(data: &mut [f32], plane: usize) -> [&mut [f32]; MAX_PLANES] {
    let mut planes = data.chunks_exact_mut(plane.max(1));
    std::array::from_fn(|_| planes.next().unwrap_or_default())
}

/// Zeroes the columns from `used` on of each `rows x cols` plane: the padding to
/// [`MIN_COLUMNS`], which the weight gradient's products sum over.
fn zero_unused_columns(planes: &mut [&mut [f32]; MAX_PLANES], rows: usize, cols: usize, used: usize) {
    for plane in planes.iter_mut().filter(|p| !p.is_empty()) {
        (0..rows).for_each(|r| plane[r * cols + used..(r + 1) * cols].fill(0.0));
    }
}

/// The `m` column phases of [`split_columns`] in `scratch`, `len` each; the rest empty.
fn phases_mut(scratch: &mut [f32], m: usize, len: usize) -> [&mut [f32]; 4] {
    let mut bufs = scratch[..m * len].chunks_exact_mut(len.max(1));
    std::array::from_fn(|_| bufs.next().unwrap_or_default())
}

/// Row `r` (`half` long) of each column phase.
fn phase_row<'a>(phases: &'a [&mut [f32]; 4], r: usize, half: usize) -> [&'a [f32]; 4] {
    phases.each_ref().map(|p| p.get(r * half..(r + 1) * half).unwrap_or_default())
}

/// The image plane `src` (`h x w`) as `rows` rows of its zero-padded version, which starts `ph`
/// rows and `pw` columns before it, each row cut into its `m` column phases: phase `p` holds the
/// padded columns `p, p + m, p + 2m, ...`, `half` of them per row. The transforms then read the
/// columns of a tile (`m tx .. m tx + m + 2`) as `phases[0..m][tx]`, `phases[0][tx + 1]` and
/// `phases[1][tx + 1]`: contiguous runs over the tiles of a row, which the compiler vectorises.
fn split_columns(
    src: &[f32],
    (h, w): (usize, usize),
    (ph, pw): (usize, usize),
    (rows, half, m): (usize, usize, usize),
    phases: &mut [&mut [f32]; 4],
) {
    // Input column `ix` is padded column `ix + pw`. The first `lead` input columns come before
    // the first padded column that is a multiple of `m`; the rest come in runs of `m`, one
    // value per phase, from index `first` of each phase on.
    let lead = (m - pw % m) % m;
    let first = (pw + lead) / m;
    for py in 0..rows {
        let mut dst = phases.each_mut().map(|p| p.get_mut(py * half..(py + 1) * half).unwrap_or_default());
        dst.iter_mut().for_each(|d| d.fill(0.0));
        if py < ph || py - ph >= h {
            continue;
        }
        let row = &src[(py - ph) * w..][..w];
        for (ix, v) in row.iter().enumerate().take(lead) {
            if let Some(d) = dst[(ix + pw) % m].get_mut((ix + pw) / m) {
                *d = *v;
            }
        }
        let rest = &row[lead.min(w)..];
        match m {
            2 => scatter::<2>(rest, first, &mut dst),
            _ => scatter::<4>(rest, first, &mut dst),
        }
    }
}

/// Writes the runs of `M` values of `rest` (and the last, partial one), one value per phase,
/// to the phases `dst` from index `first` on.
#[inline(always)]
fn scatter<const M: usize>(rest: &[f32], first: usize, dst: &mut [&mut [f32]; 4]) {
    let runs = rest.chunks_exact(M);
    let (n, tail) = (runs.len(), runs.remainder());
    let mut it = dst.iter_mut();
    let d: [&mut [f32]; M] = std::array::from_fn(|_| it.next().map_or(&mut [][..], |p| &mut p[first..first + n]));
    for (k, run) in runs.enumerate() {
        for p in 0..M {
            d[p][k] = run[p];
        }
    }
    for (p, v) in tail.iter().enumerate() {
        if let Some(slot) = dst[p].get_mut(first + n) {
            *slot = *v;
        }
    }
}

/// Scratch the transforms need: the column phases of one padded input plane
/// ([`split_columns`]), which also holds the output rows of [`output_transform`], or the
/// padded planes of a group's images where the transforms gather their tiles.
fn scratch_len(g: &WinoGeom) -> usize {
    let m = g.tile.side();
    let gathered = if g.gathers() { g.images_per_group() * g.padded_len() } else { 0 };
    (m * (m * g.th() + 2) * (g.tw() + 1)).max(gathered)
}

/// `B^T d B` of the input tiles of images `x` (`count` images of `[cin, h, w]`) into `v`
/// (`[planes, cin, count * tiles]`, each plane followed by [`PLANE_PAD`] unused values). One channel at a time: its padded plane is split into
/// column phases in `scratch`, then each row of tiles computes its transformed elements straight
/// into their planes of `v`, a contiguous run of `tw` values each.
fn input_transform(g: &WinoGeom, x: &[f32], count: usize, v: &mut [f32], scratch: &mut [f32]) {
    if g.gathers() {
        input_transform_gathered(g, x, count, v, scratch);
    } else {
        input_transform_rows(g, x, count, v, scratch);
    }
}

/// [`input_transform`] along the runs of each row's tiles.
fn input_transform_rows(g: &WinoGeom, x: &[f32], count: usize, v: &mut [f32], scratch: &mut [f32]) {
    let (tiles, tw, th, hw, m) = (g.tiles(), g.tw(), g.th(), g.h * g.w, g.tile.side());
    let (cols, plane) = (g.columns(count), g.plane_len(g.cin, count));
    let mut planes = planes_mut(&mut v[..g.planes() * plane], plane);
    // A padded row holds the input columns -pw .. m * tw + 2 - pw, in tw + 1 runs of m phases.
    let (half, rows) = (tw + 1, m * th + 2);
    let mut phases = phases_mut(scratch, m, rows * half);
    for j in 0..count {
        for c in 0..g.cin {
            split_columns(&x[(j * g.cin + c) * hw..][..hw], (g.h, g.w), (g.ph, g.pw), (rows, half, m), &mut phases);
            let base = c * cols + j * tiles;
            for ty in 0..th {
                let at = base + ty * tw;
                let tile_rows: [[&[f32]; 4]; 6] =
                    std::array::from_fn(|r| if r < m + 2 { phase_row(&phases, m * ty + r, half) } else { [&[][..]; 4] });
                let mut out = planes.each_mut().map(|p| p.get_mut(at..at + tw).unwrap_or_default());
                match g.tile {
                    Tile::F2 => by_blocks(tw, |tx, width| match width {
                        BLOCK => input_tiles_f2::<BLOCK>(&tile_rows, tx, &mut out),
                        _ => input_tiles_f2::<1>(&tile_rows, tx, &mut out),
                    }),
                    Tile::F4 => by_blocks(tw, |tx, width| match width {
                        BLOCK => input_tiles_f4::<BLOCK>(&tile_rows, tx, &mut out),
                        _ => input_tiles_f4::<1>(&tile_rows, tx, &mut out),
                    }),
                }
            }
        }
    }
    zero_unused_columns(&mut planes, g.cin, cols, count * tiles);
}

/// [`input_transform`] for images with rows of fewer than [`BLOCK`] tiles, which the rows'
/// runs would compute one tile at a time: each channel of the group's images is copied,
/// zero-padded, into `scratch` ([`pad_plane`]), and the transforms run over `BLOCK`
/// consecutive columns at a time (tiles of several rows and images), each lane's tile read
/// from there. The same operations on each tile as the runs of rows, so the same bits.
fn input_transform_gathered(g: &WinoGeom, x: &[f32], count: usize, v: &mut [f32], scratch: &mut [f32]) {
    let padded = (g.padded_rows(), g.padded_cols());
    let plane = g.plane_len(g.cin, count);
    transform_gathered(g, Gathered::Input, (x, count, g.cin), ((g.h, g.w), (g.ph, g.pw), padded), &mut v[..g.planes() * plane], scratch);
}

/// The transforms that gather their tiles from padded planes.
#[derive(Clone, Copy)]
enum Gathered {
    /// `B^T d B` of the input tiles.
    Input,
    /// `A D A^T` of the output-gradient tiles.
    OutputGrad,
}

/// The gathered transform `kind` of `count` images of `channels` planes `src` (each
/// `h x w`) into the planes of `t` (`[planes, channels, columns]`): each channel's planes copied
/// into `scratch` as `rows x cols` planes in which they start at row `top` and column `left`,
/// then `BLOCK` columns at a time (and the rest one at a time) gathered from there.
fn transform_gathered(
    g: &WinoGeom,
    kind: Gathered,
    (src, count, channels): (&[f32], usize, usize),
    ((h, w), (top, left), (rows, pc)): ((usize, usize), (usize, usize), (usize, usize)),
    t: &mut [f32],
    scratch: &mut [f32],
) {
    let (hw, used, padded) = (h * w, count * g.tiles(), rows * pc);
    let cols = g.columns(count);
    let mut planes = planes_mut(t, t.len() / g.planes());
    let full = used / BLOCK * BLOCK;
    for c in 0..channels {
        for j in 0..count {
            pad_plane(&src[(j * channels + c) * hw..][..hw], (h, w), (top, left), (rows, pc), &mut scratch[j * padded..][..padded]);
        }
        let pads = &scratch[..count * padded];
        let base = c * cols;
        for col in (0..full).step_by(BLOCK) {
            let at: [usize; BLOCK] = std::array::from_fn(|l| g.window(col + l, padded, pc));
            gathered_tiles(kind, g.tile, pads, &at, pc, base + col, &mut planes);
        }
        for col in full..used {
            gathered_tiles(kind, g.tile, pads, &[g.window(col, padded, pc)], pc, base + col, &mut planes);
        }
    }
    zero_unused_columns(&mut planes, channels, cols, used);
}

/// The transform `kind` of the `L` tiles at `at` of the padded planes `pads` (rows `pc`
/// apart), stored at `col .. col + L` of each plane.
#[inline(always)]
fn gathered_tiles<const L: usize>(
    kind: Gathered,
    tile: Tile,
    pads: &[f32],
    at: &[usize; L],
    pc: usize,
    col: usize,
    planes: &mut [&mut [f32]; MAX_PLANES],
) {
    match (kind, tile) {
        (Gathered::Input, Tile::F2) => store_planes(&input_math_f2::<L>(&gather(pads, at, pc)), col, planes),
        (Gathered::Input, Tile::F4) => store_planes(&input_math_f4::<L>(&gather(pads, at, pc)), col, planes),
        (Gathered::OutputGrad, Tile::F2) => store_planes(&output_grad_math_f2::<L>(&gather(pads, at, pc)), col, planes),
        (Gathered::OutputGrad, Tile::F4) => store_planes(&output_grad_math_f4::<L>(&gather(pads, at, pc)), col, planes),
    }
}

/// The `S x S` input tiles whose first elements are at `at` (one per lane) of the padded planes
/// `pads`, rows `pc` apart: `d[r][s][lane]`.
#[inline(always)]
fn gather<const L: usize, const S: usize>(pads: &[f32], at: &[usize; L], pc: usize) -> [[[f32; L]; S]; S] {
    std::array::from_fn(|r| std::array::from_fn(|s| std::array::from_fn(|l| pads[at[l] + r * pc + s])))
}

/// Copies the plane `src` (`h x w`) into `dst`, a `rows x cols` plane in which it starts at
/// row `top` and column `left`, zero elsewhere (cut at `dst`'s edges).
fn pad_plane(src: &[f32], (h, w): (usize, usize), (top, left): (usize, usize), (rows, cols): (usize, usize), dst: &mut [f32]) {
    dst.fill(0.0);
    let n = w.min(cols.saturating_sub(left));
    for (iy, row) in src.chunks_exact(w).enumerate().take(h.min(rows.saturating_sub(top))) {
        dst[(iy + top) * cols + left..][..n].copy_from_slice(&row[..n]);
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

#[inline(always)]
fn scale<const L: usize>(c: f32, a: [f32; L]) -> [f32; L] {
    a.map(|v| c * v)
}

/// `B^T d B` of the `L` input tiles `tx .. tx + L` of a row of 4x4 tiles (F(2x2, 3x3)): `rows`
/// are the column phases of the row's four padded input rows, `out` the row's runs of the 16
/// planes.
#[inline(always)]
fn input_tiles_f2<const L: usize>(rows: &[[&[f32]; 4]; 6], tx: usize, out: &mut [&mut [f32]; MAX_PLANES]) {
    // Column s of the tiles: phase 0 at tx, phase 1 at tx, phase 0 at tx + 1, phase 1 at tx + 1.
    let cols = |p: &[&[f32]; 4]| [load::<L>(p[0], tx), load::<L>(p[1], tx), load::<L>(p[0], tx + 1), load::<L>(p[1], tx + 1)];
    let d = [cols(&rows[0]), cols(&rows[1]), cols(&rows[2]), cols(&rows[3])];
    store_planes(&input_math_f2(&d), tx, out);
}

/// `B^T d B` of `L` 4x4 input tiles, one per lane (`d[r][s]`: row `r`, column `s`), as the 16
/// elements of the transformed tiles.
#[inline(always)]
fn input_math_f2<const L: usize>([r0, r1, r2, r3]: &[[[f32; L]; 4]; 4]) -> [[f32; L]; 16] {
    // B^T = [[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]]; rows first.
    let t: [[[f32; L]; 4]; 4] = [
        std::array::from_fn(|s| sub(r0[s], r2[s])),
        std::array::from_fn(|s| add(r1[s], r2[s])),
        std::array::from_fn(|s| sub(r2[s], r1[s])),
        std::array::from_fn(|s| sub(r1[s], r3[s])),
    ];
    let mut e = [[0.0; L]; 16];
    for (r, [t0, t1, t2, t3]) in t.into_iter().enumerate() {
        for (k, v) in [sub(t0, t2), add(t1, t2), sub(t2, t1), sub(t1, t3)].into_iter().enumerate() {
            e[4 * r + k] = v;
        }
    }
    e
}

/// Stores the elements `e` of `L` transformed tiles at `at .. at + L` of the first `P` planes.
#[inline(always)]
fn store_planes<const L: usize, const P: usize>(e: &[[f32; L]; P], at: usize, out: &mut [&mut [f32]; MAX_PLANES]) {
    for (plane, v) in out.iter_mut().zip(e) {
        plane[at..at + L].copy_from_slice(v);
    }
}

/// `B^T v` for F(4x4, 3x3), `B^T = [[4, 0, -5, 0, 1, 0], [0, -4, -4, 1, 1, 0],
/// [0, 4, -4, -1, 1, 0], [0, -2, -1, 2, 1, 0], [0, 2, -1, -2, 1, 0], [0, 4, 0, -5, 0, 1]]`.
#[inline(always)]
fn bt_f4<const L: usize>([v0, v1, v2, v3, v4, v5]: [[f32; L]; 6]) -> [[f32; L]; 6] {
    let (a, b) = (sub(v4, scale(4.0, v2)), sub(v3, scale(4.0, v1)));
    let (c, d) = (sub(v4, v2), scale(2.0, sub(v3, v1)));
    [add(sub(scale(4.0, v0), scale(5.0, v2)), v4), add(a, b), sub(a, b), add(c, d), sub(c, d), add(sub(scale(4.0, v1), scale(5.0, v3)), v5)]
}

/// `B^T d B` of the `L` input tiles `tx .. tx + L` of a row of 6x6 tiles (F(4x4, 3x3)): `rows`
/// are the column phases of the row's six padded input rows, `out` the row's runs of the 36
/// planes.
#[inline(always)]
fn input_tiles_f4<const L: usize>(rows: &[[&[f32]; 4]; 6], tx: usize, out: &mut [&mut [f32]; MAX_PLANES]) {
    // Column s of the tiles: phases 0-3 at tx, phases 0 and 1 at tx + 1.
    let cols = |p: &[&[f32]; 4]| -> [[f32; L]; 6] {
        [load(p[0], tx), load(p[1], tx), load(p[2], tx), load(p[3], tx), load(p[0], tx + 1), load(p[1], tx + 1)]
    };
    let d: [[[f32; L]; 6]; 6] = std::array::from_fn(|r| cols(&rows[r]));
    store_planes(&input_math_f4(&d), tx, out);
}

/// `B^T d B` of `L` 6x6 input tiles, one per lane (`d[r][s]`: row `r`, column `s`), as the 36
/// elements of the transformed tiles.
#[inline(always)]
fn input_math_f4<const L: usize>(d: &[[[f32; L]; 6]; 6]) -> [[f32; L]; 36] {
    // B^T on each column (the rows of the tile combined), then on each row of the result.
    let by_col: [[[f32; L]; 6]; 6] = std::array::from_fn(|s| bt_f4(std::array::from_fn(|r| d[r][s])));
    let mut e = [[0.0; L]; 36];
    for i in 0..6 {
        for (k, v) in bt_f4(std::array::from_fn(|s| by_col[s][i])).into_iter().enumerate() {
            e[6 * i + k] = v;
        }
    }
    e
}

/// `A^T M A` of the products `m` (`[planes, cout, count * tiles]`) stored into `count` output
/// images `y` (`[cout, oh, ow]` each) as `acc` says, with the bias `b` of each channel added
/// first. One row of tiles at a time: its output rows are computed into `rows` (`m` rows of
/// `m * tw`) from the contiguous runs of the row's products, and stored.
fn output_transform(g: &WinoGeom, m: &[f32], count: usize, bias: Option<&[f32]>, y: &mut [f32], acc: Accum, rows: &mut [f32]) {
    if g.gathers() {
        output_transform_gathered(g, m, count, bias, y, acc);
    } else {
        output_transform_rows(g, m, count, bias, y, acc, rows);
    }
}

/// [`output_transform`] along the runs of each row's tiles, through the output rows `rows`.
fn output_transform_rows(g: &WinoGeom, m: &[f32], count: usize, bias: Option<&[f32]>, y: &mut [f32], acc: Accum, rows: &mut [f32]) {
    let (tiles, tw, ohw, side) = (g.tiles(), g.tw(), g.oh * g.ow, g.tile.side());
    let (cols, plane) = (g.columns(count), g.plane_len(g.cout, count));
    let rw = side * tw;
    let mut out = phases_mut(rows, side, rw);
    for j in 0..count {
        for k in 0..g.cout {
            let yk = &mut y[(j * g.cout + k) * ohw..][..ohw];
            let b = bias.map_or(0.0, |b| b[k]);
            let base = k * cols + j * tiles;
            for ty in 0..g.th() {
                let at = base + ty * tw;
                let e: [&[f32]; MAX_PLANES] = std::array::from_fn(|i| if i < g.planes() { &m[i * plane + at..][..tw] } else { &[][..] });
                match g.tile {
                    Tile::F2 => by_blocks(tw, |tx, width| match width {
                        BLOCK => output_tiles_f2::<BLOCK>(&e, tx, b, &mut out),
                        _ => output_tiles_f2::<1>(&e, tx, b, &mut out),
                    }),
                    Tile::F4 => by_blocks(tw, |tx, width| match width {
                        BLOCK => output_tiles_f4::<BLOCK>(&e, tx, b, &mut out),
                        _ => output_tiles_f4::<1>(&e, tx, b, &mut out),
                    }),
                }
                for (a, row) in out.iter().take(side).enumerate() {
                    let oy = side * ty + a;
                    if oy < g.oh {
                        let dst = &mut yk[oy * g.ow..][..g.ow];
                        match acc {
                            Accum::Write => dst.copy_from_slice(&row[..g.ow]),
                            Accum::Add => dst.iter_mut().zip(&row[..g.ow]).for_each(|(d, v)| *d += *v),
                        }
                    }
                }
            }
        }
    }
}

/// [`output_transform`] for images with rows of fewer than [`BLOCK`] tiles (as
/// [`input_transform_gathered`]): `BLOCK` consecutive columns of the products at a time, each
/// lane's output tile stored into its image.
fn output_transform_gathered(g: &WinoGeom, m: &[f32], count: usize, bias: Option<&[f32]>, y: &mut [f32], acc: Accum) {
    let (cols, plane, used) = (g.columns(count), g.plane_len(g.cout, count), count * g.tiles());
    let full = used / BLOCK * BLOCK;
    for k in 0..g.cout {
        let b = bias.map_or(0.0, |b| b[k]);
        let base = k * cols;
        for col in (0..full).step_by(BLOCK) {
            match g.tile {
                Tile::F2 => store_tiles(g, &output_math_f2::<BLOCK>(&load_planes(m, plane, base + col), b), k, col, y, acc),
                Tile::F4 => store_tiles(g, &output_math_f4::<BLOCK>(&load_planes(m, plane, base + col), b), k, col, y, acc),
            }
        }
        for col in full..used {
            match g.tile {
                Tile::F2 => store_tiles(g, &output_math_f2::<1>(&load_planes(m, plane, base + col), b), k, col, y, acc),
                Tile::F4 => store_tiles(g, &output_math_f4::<1>(&load_planes(m, plane, base + col), b), k, col, y, acc),
            }
        }
    }
}

/// `L` consecutive values from `at` of each of the first `P` planes of `m`, `plane` apart.
#[inline(always)]
fn load_planes<const L: usize, const P: usize>(m: &[f32], plane: usize, at: usize) -> [[f32; L]; P] {
    std::array::from_fn(|e| load::<L>(m, e * plane + at))
}

/// Stores the output tiles `t` (`[row][column]`, one per lane) of the columns `col ..` of
/// output channel `k` into their images of `y`, as `acc` says, cut at the output's edges.
#[inline(always)]
fn store_tiles<const L: usize, const M: usize>(g: &WinoGeom, t: &[[[f32; L]; M]; M], k: usize, col: usize, y: &mut [f32], acc: Accum) {
    let (tiles, tw, ohw) = (g.tiles(), g.tw(), g.oh * g.ow);
    for l in 0..L {
        let (j, tile) = ((col + l) / tiles, (col + l) % tiles);
        let (oy0, ox0) = (M * (tile / tw), M * (tile % tw));
        let yk = &mut y[(j * g.cout + k) * ohw..][..ohw];
        for (a, row) in t.iter().enumerate().take(g.oh.saturating_sub(oy0)) {
            let dst = &mut yk[(oy0 + a) * g.ow + ox0..];
            for (c, v) in row.iter().enumerate().take(g.ow - ox0) {
                match acc {
                    Accum::Write => dst[c] = v[l],
                    Accum::Add => dst[c] += v[l],
                }
            }
        }
    }
}

/// `A^T M A` of the `L` 4x4 product tiles `tx .. tx + L` of a row of tiles (F(2x2, 3x3)), plus
/// `b`: `e` are the row's runs of the 16 product planes, `out` its two output rows.
#[inline(always)]
fn output_tiles_f2<const L: usize>(e: &[&[f32]; MAX_PLANES], tx: usize, b: f32, out: &mut [&mut [f32]; 4]) {
    let m: [[f32; L]; 16] = std::array::from_fn(|i| load::<L>(e[i], tx));
    store_rows(&output_math_f2(&m, b), tx, out);
}

/// `A^T M A + b` of `L` 4x4 product tiles `m`, one per lane: the 2x2 outputs `[row][column]`.
#[inline(always)]
fn output_math_f2<const L: usize>(m: &[[f32; L]; 16], b: f32) -> [[[f32; L]; 2]; 2] {
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
    let mut y = [[[0.0; L]; 2]; 2];
    for s in 0..2 {
        let (t0, t1, t2, t3) = (t[s], t[2 + s], t[4 + s], t[6 + s]);
        y[0][s] = add(bias, add(add(t0, t1), t2));
        y[1][s] = add(bias, sub(sub(t1, t2), t3));
    }
    y
}

/// Stores `L` output tiles `y` (`[row][column]`, one tile per lane) as the tiles `tx .. tx + L`
/// of the output rows `out`.
#[inline(always)]
fn store_rows<const L: usize, const M: usize>(y: &[[[f32; L]; M]; M], tx: usize, out: &mut [&mut [f32]; 4]) {
    for (a, row) in y.iter().enumerate() {
        for (c, v) in row.iter().enumerate() {
            for l in 0..L {
                out[a][M * (tx + l) + c] = v[l];
            }
        }
    }
}

/// `A^T v` for F(4x4, 3x3), `A^T = [[1, 1, 1, 1, 1, 0], [0, 1, -1, 2, -2, 0],
/// [0, 1, 1, 4, 4, 0], [0, 1, -1, 8, -8, 1]]`.
#[inline(always)]
fn at_f4<const L: usize>([v0, v1, v2, v3, v4, v5]: [[f32; L]; 6]) -> [[f32; L]; 4] {
    let (a, b, c, d) = (add(v1, v2), sub(v1, v2), add(v3, v4), sub(v3, v4));
    [add(add(v0, a), c), add(b, scale(2.0, d)), add(a, scale(4.0, c)), add(add(b, scale(8.0, d)), v5)]
}

/// `A^T M A` of the `L` 6x6 product tiles `tx .. tx + L` of a row of tiles (F(4x4, 3x3)), plus
/// `b`: `e` are the row's runs of the 36 product planes, `out` its four output rows.
#[inline(always)]
fn output_tiles_f4<const L: usize>(e: &[&[f32]; MAX_PLANES], tx: usize, b: f32, out: &mut [&mut [f32]; 4]) {
    let m: [[f32; L]; 36] = std::array::from_fn(|i| load::<L>(e[i], tx));
    store_rows(&output_math_f4(&m, b), tx, out);
}

/// `A^T M A + b` of `L` 6x6 product tiles `m`, one per lane: the 4x4 outputs `[row][column]`.
#[inline(always)]
fn output_math_f4<const L: usize>(m: &[[f32; L]; 36], b: f32) -> [[[f32; L]; 4]; 4] {
    // A^T on each row of the tile (its columns combined), then on each column of the result.
    let by_row: [[[f32; L]; 4]; 6] = std::array::from_fn(|i| at_f4(std::array::from_fn(|k| m[6 * i + k])));
    let bias = [b; L];
    let mut y = [[[0.0; L]; 4]; 4];
    for c in 0..4 {
        for (a, v) in at_f4(std::array::from_fn(|i| by_row[i][c])).into_iter().enumerate() {
            y[a][c] = add(bias, v);
        }
    }
    y
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
    let cols = g.columns(count);
    input_transform(g, x, count, v, scratch);
    let (vp, mp, up) = (g.plane_len(g.cin, count), g.plane_len(g.cout, count), g.cout * g.cin);
    for e in 0..g.planes() {
        gemm(
            1.0,
            Mat::new(&u[e * up..][..up], g.cout, g.cin),
            Mat::new(&v[e * vp..][..g.cin * cols], g.cin, cols),
            0.0,
            MatMut::new(&mut m[e * mp..][..g.cout * cols], g.cout, cols),
            pool,
        );
    }
    output_transform(g, m, count, bias, y, acc, scratch);
}

/// `A D A^T` of the `m x m` output-gradient tiles of images `dy` (`count` images of
/// `[cout, oh, ow]`, zero past the edges) into `z` (`[planes, cout, count * tiles]`), one
/// channel at a time as [`input_transform`] does.
fn output_grad_transform(g: &WinoGeom, dy: &[f32], count: usize, z: &mut [f32], scratch: &mut [f32]) {
    if g.gathers() {
        output_grad_transform_gathered(g, dy, count, z, scratch);
    } else {
        output_grad_transform_rows(g, dy, count, z, scratch);
    }
}

/// [`output_grad_transform`] along the runs of each row's tiles.
fn output_grad_transform_rows(g: &WinoGeom, dy: &[f32], count: usize, z: &mut [f32], scratch: &mut [f32]) {
    let (tiles, tw, th, ohw, side) = (g.tiles(), g.tw(), g.th(), g.oh * g.ow, g.tile.side());
    let (cols, plane) = (g.columns(count), g.plane_len(g.cout, count));
    let mut planes = planes_mut(&mut z[..g.planes() * plane], plane);
    let rows = side * th;
    let mut phases = phases_mut(scratch, side, rows * tw);
    for j in 0..count {
        for k in 0..g.cout {
            split_columns(&dy[(j * g.cout + k) * ohw..][..ohw], (g.oh, g.ow), (0, 0), (rows, tw, side), &mut phases);
            let base = k * cols + j * tiles;
            for ty in 0..th {
                let at = base + ty * tw;
                let tile_rows: [[&[f32]; 4]; 4] =
                    std::array::from_fn(|r| if r < side { phase_row(&phases, side * ty + r, tw) } else { [&[][..]; 4] });
                let mut out = planes.each_mut().map(|p| p.get_mut(at..at + tw).unwrap_or_default());
                match g.tile {
                    Tile::F2 => by_blocks(tw, |tx, width| match width {
                        BLOCK => output_grad_tiles_f2::<BLOCK>(&tile_rows, tx, &mut out),
                        _ => output_grad_tiles_f2::<1>(&tile_rows, tx, &mut out),
                    }),
                    Tile::F4 => by_blocks(tw, |tx, width| match width {
                        BLOCK => output_grad_tiles_f4::<BLOCK>(&tile_rows, tx, &mut out),
                        _ => output_grad_tiles_f4::<1>(&tile_rows, tx, &mut out),
                    }),
                }
            }
        }
    }
    zero_unused_columns(&mut planes, g.cout, cols, count * tiles);
}

/// [`output_grad_transform`] for images with rows of fewer than [`BLOCK`] tiles (as
/// [`input_transform_gathered`]): each channel's output gradients, zero past their edges, in
/// `scratch`, and `BLOCK` consecutive columns at a time gathered from there.
fn output_grad_transform_gathered(g: &WinoGeom, dy: &[f32], count: usize, z: &mut [f32], scratch: &mut [f32]) {
    let m = g.tile.side();
    let plane = g.plane_len(g.cout, count);
    let padded = (m * g.th(), m * g.tw());
    transform_gathered(g, Gathered::OutputGrad, (dy, count, g.cout), ((g.oh, g.ow), (0, 0), padded), &mut z[..g.planes() * plane], scratch);
}

/// `A D A^T` of the `L` 2x2 output-gradient tiles `tx .. tx + L` of a row of tiles
/// (F(2x2, 3x3)): `rows` are the column phases of its two rows, `out` the row's runs of the 16
/// planes.
#[inline(always)]
fn output_grad_tiles_f2<const L: usize>(rows: &[[&[f32]; 4]; 4], tx: usize, out: &mut [&mut [f32]; MAX_PLANES]) {
    let d = [[load::<L>(rows[0][0], tx), load::<L>(rows[0][1], tx)], [load::<L>(rows[1][0], tx), load::<L>(rows[1][1], tx)]];
    store_planes(&output_grad_math_f2(&d), tx, out);
}

/// `A D A^T` of `L` 2x2 output-gradient tiles, one per lane (`d[r][s]`), as the 16 elements of
/// the transformed tiles.
#[inline(always)]
fn output_grad_math_f2<const L: usize>([[a, b], [c, d]]: &[[[f32; L]; 2]; 2]) -> [[f32; L]; 16] {
    // A = [[1, 0], [1, 1], [1, -1], [0, -1]]; rows first, then columns.
    let (a, b, c, d) = (*a, *b, *c, *d);
    let neg = |v: [f32; L]| v.map(|x| -x);
    let rows4 = [(a, b), (add(a, c), add(b, d)), (sub(a, c), sub(b, d)), (neg(c), neg(d))];
    let mut e = [[0.0; L]; 16];
    for (r, (p, q)) in rows4.into_iter().enumerate() {
        for (k, v) in [p, add(p, q), sub(p, q), neg(q)].into_iter().enumerate() {
            e[4 * r + k] = v;
        }
    }
    e
}

/// `A v` for F(4x4, 3x3): `A = [[1, 0, 0, 0], [1, 1, 1, 1], [1, -1, 1, -1], [1, 2, 4, 8],
/// [1, -2, 4, -8], [0, 0, 0, 1]]`, the transpose of [`at_f4`]'s matrix.
#[inline(always)]
fn a_f4<const L: usize>([v0, v1, v2, v3]: [[f32; L]; 4]) -> [[f32; L]; 6] {
    let (e, o) = (add(v0, v2), add(v1, v3));
    let (e4, o4) = (add(v0, scale(4.0, v2)), add(scale(2.0, v1), scale(8.0, v3)));
    [v0, add(e, o), sub(e, o), add(e4, o4), sub(e4, o4), v3]
}

/// `A D A^T` of the `L` 4x4 output-gradient tiles `tx .. tx + L` of a row of tiles
/// (F(4x4, 3x3)): `rows` are the column phases of its four rows, `out` the row's runs of the 36
/// planes.
#[inline(always)]
fn output_grad_tiles_f4<const L: usize>(rows: &[[&[f32]; 4]; 4], tx: usize, out: &mut [&mut [f32]; MAX_PLANES]) {
    let d: [[[f32; L]; 4]; 4] = std::array::from_fn(|r| std::array::from_fn(|s| load::<L>(rows[r][s], tx)));
    store_planes(&output_grad_math_f4(&d), tx, out);
}

/// `A D A^T` of `L` 4x4 output-gradient tiles, one per lane (`d[r][s]`), as the 36 elements of
/// the transformed tiles.
#[inline(always)]
fn output_grad_math_f4<const L: usize>(d: &[[[f32; L]; 4]; 4]) -> [[f32; L]; 36] {
    // A on each column of the tile (its rows combined), then on each row of the result.
    let by_col: [[[f32; L]; 6]; 4] = std::array::from_fn(|s| a_f4(std::array::from_fn(|r| d[r][s])));
    let mut e = [[0.0; L]; 36];
    for r in 0..6 {
        for (k, v) in a_f4(std::array::from_fn(|s| by_col[s][r])).into_iter().enumerate() {
            e[6 * r + k] = v;
        }
    }
    e
}

/// `G^T v` for F(4x4, 3x3) (see [`g_f4`]).
#[inline(always)]
fn gt_f4([d0, d1, d2, d3, d4, d5]: [f32; 6]) -> [f32; 3] {
    [d0 / 4.0 - (d1 + d2) / 6.0 + (d3 + d4) / 24.0, (d2 - d1) / 6.0 + (d3 - d4) / 12.0, (d3 + d4 - d1 - d2) / 6.0 + d5]
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
        let cols = g.columns(c);
        input_transform(g, &x[start * x_img..][..c * x_img], c, v, scratch);
        output_grad_transform(g, &dy[start * y_img..][..c * y_img], c, z, scratch);
        let (vp, zp) = (g.plane_len(g.cin, c), g.plane_len(g.cout, c));
        let beta = if start == first { 0.0 } else { 1.0 };
        for e in 0..g.planes() {
            gemm(
                1.0,
                Mat::new(&z[e * zp..][..g.cout * cols], g.cout, cols),
                Mat::new(&v[e * vp..][..g.cin * cols], g.cin, cols).t(),
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
    match g.tile {
        Tile::F2 => kernel_grad_f2(du, up, dw),
        Tile::F4 => kernel_grad_f4(du, up, dw),
    }
}

/// `dW = G^T dU G` of F(2x2, 3x3) for each of the `up` kernels, `G^T = [[1, 1/2, 1/2, 0],
/// [0, 1/2, -1/2, 0], [0, 1/2, 1/2, 1]]`; element `e` of kernel `i`'s `dU` is `du[e * up + i]`.
fn kernel_grad_f2(du: &[f32], up: usize, dw: &mut [f32]) {
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

/// `dW = G^T dU G` of F(4x4, 3x3) for each of the `up` kernels, laid out as in
/// [`kernel_grad_f2`].
fn kernel_grad_f4(du: &[f32], up: usize, dw: &mut [f32]) {
    for (i, out) in dw.chunks_exact_mut(9).enumerate().take(up) {
        // t[a][s] = (G^T dU)[a][s]: G^T on each column of dU, then on each row of the result.
        let by_col: [[f32; 3]; 6] = std::array::from_fn(|s| gt_f4(std::array::from_fn(|r| du[(6 * r + s) * up + i])));
        for a in 0..3 {
            let row = gt_f4(std::array::from_fn(|s| by_col[s][a]));
            out[3 * a..3 * a + 3].copy_from_slice(&row);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One image and one channel each way, unpadded, through `tile`: the output and the
    /// weight gradient (against the output gradient `dy`).
    fn one_image(tile: Tile, side: usize, x: &[f32], w: &[f32], dy: &[f32]) -> (Vec<f32>, Vec<f32>) {
        let o = side - 2;
        let g = WinoGeom { n: 1, cin: 1, cout: 1, h: side, w: side, ph: 0, pw: 0, oh: o, ow: o, tile };
        let mut u = vec![0.0; g.u_len()];
        transform_weights(&g, w, false, &mut u, None);
        let [vl, ml, sl, _] = g.workspace_len();
        let (mut v, mut m, mut s, mut y) = (vec![0.0; vl], vec![0.0; ml], vec![0.0; sl], vec![0.0; o * o]);
        convolve_group(&g, &u, x, 1, Some(&[0.25]), &mut y, Accum::Write, (&mut v, &mut m, &mut s), None);
        let (mut du, mut dw) = (vec![0.0; g.u_len()], vec![0.0; 9]);
        weight_grad_of_images(&g, x, dy, 0, 1, &mut dw, (&mut v, &mut m, &mut s, &mut du));
        (y, dw)
    }

    /// Gathering each lane's tile from padded planes computes what the runs of the rows compute,
    /// bit for bit, in the input, output and output-gradient transforms: both tiles, paddings 0-2, partial
    /// tiles, rows of fewer and of more than `BLOCK` tiles, one image (a zero column beside
    /// its one tile) and several.
    #[test]
    fn gathered_tiles_give_the_bits_of_the_rows() {
        let cases = [
            // (tile, count, cin, cout, h, w, pad)
            (Tile::F2, 3, 5, 4, 7, 6, 1),
            (Tile::F2, 2, 3, 3, 19, 21, 0),
            (Tile::F2, 1, 2, 3, 3, 3, 1),
            (Tile::F4, 3, 4, 5, 9, 7, 1),
            (Tile::F4, 1, 3, 2, 4, 4, 1),
            (Tile::F4, 2, 2, 3, 10, 14, 2),
            (Tile::F4, 2, 3, 2, 35, 34, 1),
            (Tile::F4, 5, 2, 2, 8, 8, 0),
        ];
        let mut rng = mase_ir::Rng::new(7);
        for (tile, count, cin, cout, h, w, pad) in cases {
            let (oh, ow) = (h + 2 * pad - 2, w + 2 * pad - 2);
            let g = WinoGeom { n: count, cin, cout, h, w, ph: pad, pw: pad, oh, ow, tile };
            let scratch = (tile.side() * g.padded_rows() * (g.tw() + 1)).max(count * g.padded_len());
            let x: Vec<f32> = (0..count * cin * h * w).map(|_| rng.normal() as f32).collect();
            let mut runs = [vec![f32::NAN; g.planes() * g.plane_len(cin, count)], vec![f32::NAN; g.planes() * g.plane_len(cin, count)]];
            input_transform_rows(&g, &x, count, &mut runs[0], &mut vec![0.0; scratch]);
            input_transform_gathered(&g, &x, count, &mut runs[1], &mut vec![0.0; scratch]);
            let plane = g.plane_len(cin, count);
            let used = |v: &[f32]| -> Vec<u32> {
                (0..g.planes() * plane).filter(|i| i % plane < cin * g.columns(count)).map(|i| v[i].to_bits()).collect()
            };
            assert_eq!(used(&runs[0]), used(&runs[1]), "input transform of {tile:?} {count} x {cin} x {h} x {w}, padding {pad}");

            let dy: Vec<f32> = (0..count * cout * oh * ow).map(|_| rng.normal() as f32).collect();
            let plane = g.plane_len(cout, count);
            let mut zs = [vec![f32::NAN; g.planes() * plane], vec![f32::NAN; g.planes() * plane]];
            output_grad_transform_rows(&g, &dy, count, &mut zs[0], &mut vec![0.0; scratch]);
            output_grad_transform_gathered(&g, &dy, count, &mut zs[1], &mut vec![0.0; scratch]);
            let used = |v: &[f32]| -> Vec<u32> {
                (0..g.planes() * plane).filter(|i| i % plane < cout * g.columns(count)).map(|i| v[i].to_bits()).collect()
            };
            assert_eq!(used(&zs[0]), used(&zs[1]), "output-gradient transform of {tile:?} {count} x {cout} x {oh} x {ow}");

            let m: Vec<f32> = (0..g.planes() * g.plane_len(cout, count)).map(|_| rng.normal() as f32).collect();
            let bias: Vec<f32> = (0..cout).map(|_| rng.normal() as f32).collect();
            let start: Vec<f32> = (0..count * cout * oh * ow).map(|_| rng.normal() as f32).collect();
            for acc in [Accum::Write, Accum::Add] {
                let mut ys = [start.clone(), start.clone()];
                output_transform_rows(&g, &m, count, Some(&bias), &mut ys[0], acc, &mut vec![0.0; scratch]);
                output_transform_gathered(&g, &m, count, Some(&bias), &mut ys[1], acc);
                let bits = |y: &[f32]| y.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
                assert_eq!(bits(&ys[0]), bits(&ys[1]), "output transform of {tile:?} {count} x {cout} x {oh} x {ow}, {acc:?}");
            }
        }
    }

    /// `0.25 + sum w[ky][kx] x[oy + ky][ox + kx]` and `dW[t] = sum dy[oy][ox] x[oy + ky][ox + kx]`.
    fn direct(side: usize, x: &[f32], w: &[f32], dy: &[f32]) -> (Vec<f32>, Vec<f32>) {
        let o = side - 2;
        let at = |oy: usize, ox: usize, t: usize| x[(oy + t / 3) * side + ox + t % 3];
        let y = (0..o * o).map(|p| 0.25 + (0..9).map(|t| w[t] * at(p / o, p % o, t)).sum::<f32>()).collect();
        let dw = (0..9).map(|t| (0..o * o).map(|p| dy[p] * at(p / o, p % o, t)).sum::<f32>()).collect();
        (y, dw)
    }

    /// F(2x2, 3x3) on small whole numbers is exact: a 4x4 input's 2x2 output by hand.
    #[test]
    fn one_f2_tile_matches_the_direct_sum() {
        let x: Vec<f32> = (0..16).map(|i| i as f32).collect();
        let w = [1.0, 2.0, 0.0, -1.0, 0.5, 3.0, 2.0, 0.0, 1.0];
        let dy = [1.0, -2.0, 0.5, 3.0];
        let (y, dw) = one_image(Tile::F2, 4, &x, &w, &dy);
        assert_eq!((y.clone(), dw), direct(4, &x, &w, &dy));
        assert_eq!(y, vec![44.75, 53.25, 78.75, 87.25]);
    }

    /// F(4x4, 3x3) rounds (its `G` holds sixths): a 6x6 input's 4x4 output and the weight
    /// gradient within a few units of float32 rounding of the direct sums.
    #[test]
    fn one_f4_tile_matches_the_direct_sum() {
        let x: Vec<f32> = (0..36).map(|i| (i % 7) as f32 - 3.0).collect();
        let w = [1.0, 2.0, 0.0, -1.0, 0.5, 3.0, 2.0, 0.0, 1.0];
        let dy: Vec<f32> = (0..16).map(|i| (i % 5) as f32 * 0.5 - 1.0).collect();
        let (y, dw) = one_image(Tile::F4, 6, &x, &w, &dy);
        let (y_direct, dw_direct) = direct(6, &x, &w, &dy);
        for (got, want) in y.iter().zip(&y_direct).chain(dw.iter().zip(&dw_direct)) {
            assert!((got - want).abs() <= 1e-5 * 40.0, "{got} vs {want}");
        }
    }

    #[test]
    fn each_output_size_takes_the_tile_with_fewer_products() {
        // (oh, ow) -> tile: F(2x2, 3x3) only where a side of 2 or less wastes F(4x4)'s tiles.
        for (oh, ow, tile) in [
            (1, 1, Tile::F2),
            (2, 2, Tile::F2),
            (2, 64, Tile::F2),
            (3, 3, Tile::F4),
            (4, 4, Tile::F4),
            (32, 32, Tile::F4),
            (5, 9, Tile::F4),
        ] {
            assert_eq!(Tile::for_output(oh, ow), tile, "{oh}x{ow}");
        }
    }

    #[test]
    fn a_layer_takes_f4_where_its_sums_are_long() {
        // (cin, cout, side, padding) -> the forward pass's tile, the input gradient's tile.
        let geom = |cin, cout, side: usize, pad: usize| {
            let o = side + 2 * pad - 2;
            WinoGeom { n: 4, cin, cout, h: side, w: side, ph: pad, pw: pad, oh: o, ow: o, tile: Tile::F2 }.with_best_tile()
        };
        for (cin, cout, side, pad, fwd, bwd) in [
            (128, 128, 32, 1, Tile::F4, Tile::F4), // vgg7's
            (64, 64, 32, 1, Tile::F2, Tile::F2),   // 64 tiles an image at 64 outputs: F4 off the general path
            (512, 512, 4, 1, Tile::F4, Tile::F4),  // one F4 tile an image, a zero column beside it
            (96, 96, 4, 1, Tile::F2, Tile::F2),    // one F4 tile at 96 outputs: off the general path even so
            (32, 128, 40, 1, Tile::F2, Tile::F4),  // a short forward sum
            (128, 32, 40, 1, Tile::F4, Tile::F2),  // a short input-gradient sum
            (64, 64, 2, 1, Tile::F2, Tile::F2),    // a 2x2 output
            (72, 64, 8, 1, Tile::F2, Tile::F4),    // 4 tiles an image: general at 72 outputs, not at 64
            (16, 16, 32, 1, Tile::F2, Tile::F2),   // short sums both ways
        ] {
            let g = geom(cin, cout, side, pad);
            assert_eq!((g.tile, g.input_grad_of().tile), (fwd, bwd), "{cin}->{cout}, {side}x{side}");
        }
    }

    #[test]
    fn non_finite_and_huge_values_are_not_transformable() {
        for (v, ok) in [(1.0, true), (-1e13, true), (1e15, false), (f32::INFINITY, false), (f32::NEG_INFINITY, false), (f32::NAN, false)] {
            assert_eq!(transformable(&[0.0, v]), ok, "{v}");
        }
    }
}
