//! `nn.Conv1d` / `nn.Conv2d` by im2col and GEMM, with stride, padding, dilation and groups.
//!
//! A 1-D convolution is run as a 2-D one of height 1. Each image is unrolled into a column matrix
//! `[C_in * kh * kw, OH * OW]` (rows ordered channel, kernel row, kernel column, as the weight is
//! stored), and each group's output is one product `W_g [C_out/g, C_in/g * kh * kw] x col_g`.
//!
//! Threads: the forward pass and the input gradient split the batch into one slice of images per
//! thread, each with its own column workspace. The weight gradient, a sum over images, is cut
//! into [`DW_GROUPS`] fixed groups of consecutive images whatever the thread count: each group
//! sums its images into its own partial gradient (the threads share the groups out), and the
//! partials are then added in group order. Every product is computed the same way in both modes
//! (see `gemm`) and every sum has the same order, so results do not depend on the number of
//! threads.

use super::winograd::{self, WinoGeom};
use super::{Accum, Bwd, Fwd, Kernel};
use crate::executor::ConvAlgo;
use crate::fuse::Epilogue;
use crate::gemm::{gemm, Mat, MatMut};
use crate::par::for_each_chunk;
use mase_ir::ConvSpec;

/// Sizes of one convolution for one batch shape.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ConvGeom {
    pub n: usize,
    pub cin: usize,
    pub h: usize,
    pub w: usize,
    pub cout: usize,
    pub oh: usize,
    pub ow: usize,
    pub kh: usize,
    pub kw: usize,
    pub sh: usize,
    pub sw: usize,
    pub ph: usize,
    pub pw: usize,
    pub dh: usize,
    pub dw: usize,
    pub groups: usize,
}

impl ConvGeom {
    /// Geometry from the spec and the input/output shapes (`[N, C, L]` or `[N, C, H, W]`).
    pub fn new(spec: &ConvSpec, x: &[usize], y: &[usize]) -> ConvGeom {
        let two = |v: &[usize], fill: usize| if v.len() == 1 { (fill, v[0]) } else { (v[0], v[1]) };
        let (h, w) = if x.len() == 3 { (1, x[2]) } else { (x[2], x[3]) };
        let (oh, ow) = if y.len() == 3 { (1, y[2]) } else { (y[2], y[3]) };
        let (kh, kw) = two(&spec.kernel, 1);
        let (sh, sw) = two(&spec.stride, 1);
        let (ph, pw) = two(&spec.padding, 0);
        let (dh, dw) = two(&spec.dilation, 1);
        ConvGeom { n: x[0], cin: x[1], h, w, cout: y[1], oh, ow, kh, kw, sh, sw, ph, pw, dh, dw, groups: spec.groups.max(1) }
    }

    fn hw(&self) -> usize {
        self.h * self.w
    }
    fn ohw(&self) -> usize {
        self.oh * self.ow
    }
    /// Rows of the column matrix of one group.
    fn kkg(&self) -> usize {
        self.cin / self.groups * self.kh * self.kw
    }
    /// Output channels of one group.
    fn cog(&self) -> usize {
        self.cout / self.groups
    }
    /// A 1x1 kernel with stride 1 and no padding: an image is its own column matrix.
    fn is_direct(&self) -> bool {
        self.kh == 1 && self.kw == 1 && self.sh == 1 && self.sw == 1 && self.ph == 0 && self.pw == 0
    }
    /// A direct convolution whose weight gradient reads the image as it is: its rows need no
    /// wider stride ([`transposed_stride`]), so it is not copied into the column workspace.
    fn weight_grad_reads_image(&self) -> bool {
        self.is_direct() && transposed_stride(self.ohw()) == self.ohw()
    }

    /// Output columns `ox` whose input column `ox * sw + x0` lies inside `0..w`.
    fn valid_cols(&self, x0: isize) -> (usize, usize) {
        let (w, sw, ow) = (self.w as isize, self.sw as isize, self.ow as isize);
        // ox * sw + x0 >= 0  <=>  ox >= ceil(-x0 / sw);  ox * sw + x0 < w  <=>  ox < ceil((w - x0) / sw)
        let lo = if x0 >= 0 { 0 } else { (-x0 + sw - 1) / sw };
        let hi = if w - x0 <= 0 { 0 } else { (w - x0 + sw - 1) / sw };
        let lo = lo.clamp(0, ow);
        (lo as usize, hi.clamp(lo, ow) as usize)
    }
}

/// Unrolls one channel `xc` (`[h, w]`) into its `kh * kw` rows of the column matrix, rows
/// `stride` values apart (wider than `ohw` for the rows of several images side by side, or for
/// [`transposed_stride`]).
fn im2col_channel(g: &ConvGeom, xc: &[f32], out: &mut [f32], stride: usize) {
    let ohw = g.ohw();
    for ky in 0..g.kh {
        for kx in 0..g.kw {
            let dst = &mut out[(ky * g.kw + kx) * stride..][..ohw];
            let x0 = (kx * g.dw) as isize - g.pw as isize;
            let (lo, hi) = g.valid_cols(x0);
            for oy in 0..g.oh {
                let drow = &mut dst[oy * g.ow..][..g.ow];
                let iy = (oy * g.sh + ky * g.dh) as isize - g.ph as isize;
                if iy < 0 || iy >= g.h as isize {
                    drow.fill(0.0);
                    continue;
                }
                let srow = &xc[iy as usize * g.w..][..g.w];
                drow[..lo].fill(0.0);
                drow[hi..].fill(0.0);
                if g.sw == 1 {
                    // An empty range (a kernel column that only ever reads padding, as a 7x7
                    // kernel on a 2x2 input does) has no source start.
                    if hi > lo {
                        let s0 = (lo as isize + x0) as usize;
                        drow[lo..hi].copy_from_slice(&srow[s0..s0 + (hi - lo)]);
                    }
                } else {
                    for (ox, d) in (lo..hi).zip(drow[lo..hi].iter_mut()) {
                        *d = srow[((ox * g.sw) as isize + x0) as usize];
                    }
                }
            }
        }
    }
}

/// Adds the `kh * kw` rows of a column-gradient matrix back onto one channel `dxc` (`[h, w]`).
fn col2im_channel(g: &ConvGeom, dcol: &[f32], dxc: &mut [f32]) {
    let ohw = g.ohw();
    for ky in 0..g.kh {
        for kx in 0..g.kw {
            let src = &dcol[(ky * g.kw + kx) * ohw..][..ohw];
            let x0 = (kx * g.dw) as isize - g.pw as isize;
            let (lo, hi) = g.valid_cols(x0);
            for oy in 0..g.oh {
                let iy = (oy * g.sh + ky * g.dh) as isize - g.ph as isize;
                if iy < 0 || iy >= g.h as isize {
                    continue;
                }
                let drow = &mut dxc[iy as usize * g.w..][..g.w];
                let srow = &src[oy * g.ow..][..g.ow];
                if g.sw == 1 && hi > lo {
                    // Contiguous on both sides: the same additions in the same order, vectorised.
                    let d0 = (lo as isize + x0) as usize;
                    for (d, s) in drow[d0..d0 + (hi - lo)].iter_mut().zip(&srow[lo..hi]) {
                        *d += *s;
                    }
                } else {
                    for ox in lo..hi {
                        drow[(ox as isize * g.sw as isize + x0) as usize] += srow[ox];
                    }
                }
            }
        }
    }
}

/// Groups of images the weight gradient is summed in (fewer when the batch is smaller). Four
/// keeps two threads evenly busy and costs four weight-sized partial sums per layer.
const DW_GROUPS: usize = 4;

/// A convolution node.
pub(crate) struct Conv {
    g: ConvGeom,
    weight: usize,
    bias: Option<usize>,
    /// One column matrix per thread (unused for direct 1x1 convolutions).
    cols: Vec<Vec<f32>>,
    /// One column-gradient matrix per thread, for the input gradient.
    dcols: Vec<Vec<f32>>,
    /// Images per group of the weight gradient.
    dw_per_group: usize,
    /// The groups' partial weight gradients, one weight-sized block per group.
    dw_partials: Vec<f32>,
    /// The Winograd paths, where they apply and pay (boxed: most convolutions have none).
    wino: Option<Box<WinoConv>>,
}

/// Output columns a product of the direct path should have at least: below, images are put side
/// by side in one product, so that the weight matrix is packed once for several images and the
/// weight gradient is updated once per run of images rather than once per image (resnet18's
/// 8x8 and 4x4 layers, whose products per image are 64 and 16 columns wide).
const MIN_PRODUCT_COLUMNS: usize = 256;

/// Images per product: 1 for images of at least [`MIN_PRODUCT_COLUMNS`] outputs and for grouped
/// convolutions; else enough images for that many columns, at most a weight-gradient group's
/// (so the runs start at the same images on any thread count).
fn images_per_product(g: &ConvGeom) -> usize {
    let ohw = g.ohw().max(1);
    if g.groups != 1 || ohw >= MIN_PRODUCT_COLUMNS {
        return 1;
    }
    MIN_PRODUCT_COLUMNS.div_ceil(ohw).clamp(1, g.n.div_ceil(DW_GROUPS).max(1))
}

/// The column matrix `[kkg, count * ohw]` of `count` images side by side (image `j`'s columns
/// at `j * ohw` in every row, rows `ld` values apart) into `wide`.
fn im2col_images(g: &ConvGeom, x: &[f32], count: usize, wide: &mut [f32], ld: usize) {
    let (hw, khkw) = (g.hw(), g.kh * g.kw);
    for j in 0..count {
        for c in 0..g.cin {
            let xc = &x[(j * g.cin + c) * hw..][..hw];
            im2col_channel(g, xc, &mut wide[c * khkw * ld + j * g.ohw()..], ld);
        }
    }
}

/// The row stride of a column matrix `width` values wide that the weight gradient reads
/// transposed (`dY x col^T`): `width`, or 16 values (a cache line) more where `width` is a
/// multiple of 128. The GEMM packs a transposed operand by walking down its columns, and rows a
/// multiple of 512 bytes apart fall on few sets of the L1 cache: on a Zen 5 core the product of
/// resnet18's 64 -> 64 layers on 32x32 images (1,024 values, 4 KiB, per row) ran at 64 GFLOP/s
/// with rows 1,024 values apart and at 206 with 1,040 (`examples/dw_shapes.rs`); 512- and
/// 768-wide rows lost 1.2-1.8x too, other widths nothing. The forward and input-gradient
/// products read the column matrix row by row and measured the same either way.
fn transposed_stride(width: usize) -> usize {
    if width % 128 == 0 {
        width + 16
    } else {
        width
    }
}

/// Fills each output row of `len` values with its channel's bias before a product adds into it
/// (`beta` 1, the bias added once after the sum, as addmm does); `beta` 0 without a bias.
fn bias_prefill(out: &mut [f32], bias: Option<&[f32]>, len: usize) -> f32 {
    let Some(b) = bias else { return 0.0 };
    for (row, bv) in out.chunks_exact_mut(len).zip(b) {
        row.fill(*bv);
    }
    1.0
}

/// `[rows, len]` blocks of `count` images (image-major, as a batch holds them) into `[rows,
/// count * len]` with image `j`'s block at column `j * len`.
fn side_by_side(images: &[f32], count: usize, rows: usize, len: usize, out: &mut [f32]) {
    let width = count * len;
    for j in 0..count {
        for r in 0..rows {
            out[r * width + j * len..][..len].copy_from_slice(&images[(j * rows + r) * len..][..len]);
        }
    }
}

/// The Winograd forward and input-gradient paths of one convolution (see `winograd`).
struct WinoConv {
    /// The forward pass, when Winograd runs it.
    fwd: Option<WinoGeom>,
    /// The input gradient as a forward convolution of the output gradient, when Winograd runs it.
    bwd: Option<WinoGeom>,
    /// The weight gradient, when Winograd runs it (the forward geometry).
    dw: Option<WinoGeom>,
    /// The forward geometry, whichever paths run.
    fwd_geom: WinoGeom,
    /// The transformed weights of the forward pass, `[planes, cout, cin]`.
    u: Vec<f32>,
    /// The parameter generation `u` was transformed at (`Fwd::params_generation`): evaluation
    /// batches after the first reuse it (vgg7's 512-channel layers transform 9.4 M values
    /// each; resnet18 spent 2.7 % of an eval batch transforming its weights again).
    u_generation: Option<u64>,
    /// The transformed flipped weights of the input gradient, `[planes, cin, cout]`.
    ub: Vec<f32>,
    /// One set of transformed-input, product, row and (for the weight gradient) transformed
    /// weight-gradient workspaces per thread.
    ws: Vec<[Vec<f32>; 4]>,
}

impl WinoConv {
    /// The paths that apply to `g` under `algo` (`None` when neither does).
    fn new(g: &ConvGeom, algo: ConvAlgo, threads: usize) -> Option<WinoConv> {
        let square3 = g.kh == 3 && g.kw == 3 && g.sh == 1 && g.sw == 1 && g.dh == 1 && g.dw == 1 && g.groups == 1 && g.h > 1;
        if algo == ConvAlgo::Exact || !square3 {
            return None;
        }
        let tile = winograd::Tile::F2;
        let f =
            WinoGeom { n: g.n, cin: g.cin, cout: g.cout, h: g.h, w: g.w, ph: g.ph, pw: g.pw, oh: g.oh, ow: g.ow, tile }.with_best_tile();
        let pays = |wg: &WinoGeom| algo == ConvAlgo::Winograd || winograd::pays(wg);
        let fwd = (f.supported() && pays(&f)).then_some(f);
        // The threshold is the layer's (symmetric in the channel counts), for every pass.
        let bwd = (f.supported() && f.input_grad_of().supported() && pays(&f)).then(|| f.input_grad_of());
        let dw = (f.supported() && f.weight_grad_supported() && pays(&f)).then_some(f);
        if fwd.is_none() && bwd.is_none() && dw.is_none() {
            return None;
        }
        let mut lens = [0; 4];
        for wg in fwd.iter().chain(bwd.iter()).chain(dw.iter()) {
            for (l, n) in lens.iter_mut().zip(wg.workspace_len()) {
                *l = (*l).max(n);
            }
        }
        if dw.is_some() {
            lens[3] = f.u_len();
        }
        // The weight gradient runs on as many workspaces as the direct path's partials allow.
        let lanes = threads.clamp(1, f.groups().max(f.input_grad_of().groups()).max(g.n.min(DW_GROUPS)));
        Some(WinoConv {
            u: fwd.map_or_else(Vec::new, |f| vec![0.0; f.u_len()]),
            u_generation: None,
            ub: bwd.map_or_else(Vec::new, |b| vec![0.0; b.u_len()]),
            fwd,
            bwd,
            dw,
            fwd_geom: f,
            ws: vec![lens.map(|n| vec![0.0; n]); lanes],
        })
    }
}

/// Runs the Winograd convolution `g` of the images `x` into `y` (stored as `acc` says): the
/// groups of images are shared out over the workspaces, one run of consecutive groups each, in
/// parallel on the pool when there are several workspaces and the work is large.
#[allow(clippy::too_many_arguments)]
fn winograd_batch(
    pool: Option<&rayon::ThreadPool>,
    g: &WinoGeom,
    u: &[f32],
    x: &[f32],
    bias: Option<&[f32]>,
    y: &mut [f32],
    acc: Accum,
    ws: &mut [[Vec<f32>; 4]],
    epilogue: Option<&Epilogue>,
) {
    use rayon::prelude::*;
    let work = g.n * g.cout * g.cin * 9 * g.oh * g.ow;
    let shared = pool.is_some() && ws.len() > 1 && work >= crate::par::PAR_MIN_WORK;
    // When the work is shared, groups no larger than a workspace's share of the batch, so that
    // every workspace gets one and the transforms run in parallel too (vgg7's 8x8 layers at
    // batch 32 are one group of the geometry's size). Each output is the same sum whatever its
    // group's size: a single image's products are on the GEMM's general path already
    // (`WinoGeom::supported`).
    let share = if shared { g.n.div_ceil(ws.len()) } else { g.n };
    let ipg = g.images_per_group().min(share).max(1);
    let groups = g.n.div_ceil(ipg);
    let (x_img, y_img) = (g.cin * g.h * g.w, g.cout * g.oh * g.ow);
    let lanes = ws.len().clamp(1, groups.max(1));
    let per_lane = groups.div_ceil(lanes).max(1) * ipg;
    let parallel = lanes > 1 && work >= crate::par::PAR_MIN_WORK;
    let inner = if parallel { None } else { pool };
    let lane = |first: usize, ys: &mut [f32], [v, m, s, _]: &mut [Vec<f32>; 4]| {
        let images = ys.len() / y_img;
        for (k, yg) in ys.chunks_mut(ipg * y_img).enumerate() {
            let (start, count) = (first + k * ipg, (images - k * ipg).min(ipg));
            winograd::convolve_group(g, u, &x[start * x_img..][..count * x_img], count, bias, yg, acc, (v, m, s), inner);
            // The fused epilogue, on the group's images while they are in the cache.
            if let Some(e) = epilogue {
                e.apply_planes(yg, g.oh * g.ow);
            }
        }
    };
    match pool {
        Some(p) if parallel => p.install(|| {
            y.par_chunks_mut(per_lane * y_img).zip(ws.par_iter_mut()).enumerate().for_each(|(l, (ys, w))| lane(l * per_lane, ys, w))
        }),
        _ => lane(0, y, &mut ws[0]),
    }
}

impl Conv {
    /// `threads` is the size of the pool the kernel will run on (1 without one).
    pub fn new(g: ConvGeom, weight: usize, bias: Option<usize>, threads: usize, algo: ConvAlgo) -> Conv {
        let per_product = images_per_product(&g);
        let len = if per_product > 1 {
            // The images' column matrix (rows as the weight gradient reads them), then their
            // outputs (or output gradients) side by side.
            let width = per_product * g.ohw();
            g.kkg() * transposed_stride(width) + g.cout * width
        } else if g.weight_grad_reads_image() {
            0
        } else {
            // A direct convolution's image is copied here for the weight gradient when its rows
            // need the wider stride.
            g.cin * g.kh * g.kw * transposed_stride(g.ohw())
        };
        // More workspaces than images would never be used.
        let lanes = threads.clamp(1, g.n.max(1));
        let dw_per_group = g.n.div_ceil(DW_GROUPS).max(1);
        let groups = g.n.div_ceil(dw_per_group);
        Conv {
            g,
            weight,
            bias,
            cols: vec![vec![0.0; len]; lanes],
            dcols: vec![vec![0.0; if g.is_direct() { 0 } else { g.cin * g.kh * g.kw * g.ohw() }]; lanes],
            dw_per_group,
            dw_partials: vec![0.0; groups * g.cout * g.kkg()],
            wino: WinoConv::new(&g, algo, threads).map(Box::new),
        }
    }
}

/// The weight gradient of images `first..first + count` into `dw` (written, not accumulated).
fn weight_grad_of_images(g: &ConvGeom, x: &[f32], dy: &[f32], first: usize, count: usize, col: &mut [f32], dw: &mut [f32]) {
    let (hw, ohw, kkg, cog) = (g.hw(), g.ohw(), g.kkg(), g.cog());
    let per_product = images_per_product(g);
    if per_product > 1 {
        // Runs of `per_product` images from `first`: dW [cout, kkg] (=|+=) dY [cout, run * ohw]
        // x col^T [run * ohw, kkg], with the images side by side in both.
        let (wide, dys) = col.split_at_mut(kkg * transposed_stride(per_product * ohw));
        let mut start = first;
        while start < first + count {
            let run = per_product.min(first + count - start);
            let width = run * ohw;
            let ld = transposed_stride(width);
            im2col_images(g, &x[start * g.cin * hw..], run, &mut wide[..kkg * ld], ld);
            side_by_side(&dy[start * g.cout * ohw..][..run * g.cout * ohw], run, g.cout, ohw, &mut dys[..g.cout * width]);
            let beta = if start == first { 0.0 } else { 1.0 };
            gemm(
                1.0,
                Mat::new(dys, g.cout, width),
                Mat::strided(wide, kkg, width, ld, 1).t(),
                beta,
                MatMut::new(&mut dw[..g.cout * kkg], g.cout, kkg),
                None,
            );
            start += run;
        }
        return;
    }
    let ld = transposed_stride(ohw);
    for i in first..first + count {
        let xi = &x[i * g.cin * hw..][..g.cin * hw];
        let dyi = &dy[i * g.cout * ohw..][..g.cout * ohw];
        let (cols, ld): (&[f32], usize) = if g.weight_grad_reads_image() {
            (xi, ohw)
        } else {
            im2col(g, xi, col, ld, None);
            (col, ld)
        };
        let beta = if i == first { 0.0 } else { 1.0 };
        for gi in 0..g.groups {
            // dW_g [cog, kkg] += dY_g [cog, ohw] x col_g^T [ohw, kkg]
            gemm(
                1.0,
                Mat::new(&dyi[gi * cog * ohw..], cog, ohw),
                Mat::strided(&cols[gi * kkg * ld..], kkg, ohw, ld, 1).t(),
                beta,
                MatMut::new(&mut dw[gi * cog * kkg..][..cog * kkg], cog, kkg),
                None,
            );
        }
    }
}

/// Runs `f(j, partial_j, workspace)` for each `len`-long partial gradient `j` of `partials`: the
/// workspaces take consecutive runs of partials, in parallel on the pool when there are several
/// and the work is large. Each partial is computed the same way on any thread.
fn over_partials<W, F>(pool: Option<&rayon::ThreadPool>, work: usize, partials: &mut [f32], len: usize, ws: &mut [W], f: F)
where
    W: Send,
    F: Fn(usize, &mut [f32], &mut W) + Sync + Send,
{
    use rayon::prelude::*;
    let lanes = ws.len().max(1);
    let per_lane = (partials.len() / len.max(1)).div_ceil(lanes).max(1);
    let lane = |l: usize, ps: &mut [f32], w: &mut W| {
        for (j, dw) in ps.chunks_mut(len).enumerate() {
            f(l * per_lane + j, dw, w);
        }
    };
    match pool {
        Some(p) if lanes > 1 && work >= crate::par::PAR_MIN_WORK => {
            p.install(|| partials.par_chunks_mut(per_lane * len).zip(ws.par_iter_mut()).enumerate().for_each(|(l, (ps, w))| lane(l, ps, w)))
        }
        _ => lane(0, partials, &mut ws[0]),
    }
}

/// Runs `f(first_image, image_count, out_chunk, workspace)` over the batch: one slice of images
/// per workspace, each starting at a multiple of `align`, in parallel on the pool when there is more than one workspace and the work is
/// large. `per_image` is the length of one image's part of `out`.
#[allow(clippy::too_many_arguments)]
fn over_batch<F>(
    pool: Option<&rayon::ThreadPool>,
    n: usize,
    work: usize,
    out: &mut [f32],
    per_image: usize,
    align: usize,
    ws: &mut [Vec<f32>],
    f: F,
) where
    F: Fn(usize, usize, &mut [f32], &mut Vec<f32>) + Sync + Send,
{
    use rayon::prelude::*;
    // Each lane's first image is a multiple of `align`.
    let per_lane = n.div_ceil(ws.len().max(1)).max(1).next_multiple_of(align.max(1));
    match pool {
        Some(p) if ws.len() > 1 && work >= crate::par::PAR_MIN_WORK => p.install(|| {
            out.par_chunks_mut(per_lane * per_image)
                .zip(ws.par_iter_mut())
                .enumerate()
                .for_each(|(l, (o, w))| f(l * per_lane, o.len() / per_image, o, w))
        }),
        _ => f(0, n, out, &mut ws[0]),
    }
}

/// Fills `col` from one image with rows `ld` values apart, splitting the channels over the pool
/// when the image is large.
fn im2col(g: &ConvGeom, xi: &[f32], col: &mut [f32], ld: usize, pool: Option<&rayon::ThreadPool>) {
    let (hw, rows) = (g.hw(), g.kh * g.kw * ld);
    let col = &mut col[..g.cin * rows];
    for_each_chunk(pool, col.len(), col, rows, |c, out| im2col_channel(g, &xi[c * hw..][..hw], out, ld));
}

impl Kernel for Conv {
    fn forward(&mut self, cx: &mut Fwd<'_>, y: &mut [f32]) {
        let g = self.g;
        let (hw, ohw, kkg, cog) = (g.hw(), g.ohw(), g.kkg(), g.cog());
        let x = &cx.vals[cx.ins[0]];
        let w = &cx.params[self.weight].data;
        let bias = self.bias.map(|b| cx.params[b].data.as_slice());
        let epilogue = cx.epilogue.take().map(|e| {
            e.prepare(cx.params);
            &*e
        });
        if let Some(wc) = &mut self.wino {
            if let Some(wg) = wc.fwd.filter(|_| winograd::transformable(x) && winograd::transformable(w)) {
                if cx.params_generation.is_none() || wc.u_generation != cx.params_generation {
                    winograd::transform_weights(&wg, w, false, &mut wc.u, cx.pool);
                    wc.u_generation = cx.params_generation;
                }
                winograd_batch(cx.pool, &wg, &wc.u, x, bias, y, Accum::Write, &mut wc.ws, epilogue);
                return;
            }
        }
        let batch_parallel = self.cols.len() > 1;
        // Inside a batch-parallel slice the pool is busy with the other slices.
        let inner = if batch_parallel { None } else { cx.pool };
        let work = g.n * g.cout * kkg * ohw;
        let per_product = images_per_product(&g);
        if per_product > 1 {
            // Runs of `per_product` images from a multiple of it (`over_batch` aligns the lanes),
            // side by side in one product; each output column is the sum it is per image.
            over_batch(cx.pool, g.n, work, y, g.cout * ohw, per_product, &mut self.cols, |first, count, ys, col| {
                let (wide, prod) = col.split_at_mut(kkg * transposed_stride(per_product * ohw));
                let mut done = 0;
                while done < count {
                    let run = per_product.min(count - done);
                    let width = run * ohw;
                    let (wide, prod) = (&mut wide[..kkg * width], &mut prod[..g.cout * width]);
                    im2col_images(&g, &x[(first + done) * g.cin * hw..], run, wide, width);
                    let beta = bias_prefill(prod, bias, width);
                    gemm(1.0, Mat::new(w, g.cout, kkg), Mat::new(wide, kkg, width), beta, MatMut::new(prod, g.cout, width), inner);
                    for j in 0..run {
                        let yi = &mut ys[(done + j) * g.cout * ohw..][..g.cout * ohw];
                        for (co, yrow) in yi.chunks_exact_mut(ohw).enumerate() {
                            yrow.copy_from_slice(&prod[co * width + j * ohw..][..ohw]);
                        }
                        if let Some(e) = epilogue {
                            e.apply_planes(yi, ohw);
                        }
                    }
                    done += run;
                }
            });
            return;
        }
        over_batch(cx.pool, g.n, work, y, g.cout * ohw, 1, &mut self.cols, |first, count, ys, col| {
            for j in 0..count {
                let xi = &x[(first + j) * g.cin * hw..][..g.cin * hw];
                let yi = &mut ys[j * g.cout * ohw..][..g.cout * ohw];
                let beta = bias_prefill(yi, bias, ohw);
                let cols: &[f32] = if g.is_direct() {
                    xi
                } else {
                    im2col(&g, xi, col, ohw, inner);
                    col
                };
                for gi in 0..g.groups {
                    gemm(
                        1.0,
                        Mat::new(&w[gi * cog * kkg..], cog, kkg),
                        Mat::new(&cols[gi * kkg * ohw..], kkg, ohw),
                        beta,
                        MatMut::new(&mut yi[gi * cog * ohw..][..cog * ohw], cog, ohw),
                        inner,
                    );
                }
                // The fused epilogue, on the image while it is in the cache.
                if let Some(e) = epilogue {
                    e.apply_planes(yi, ohw);
                }
            }
        });
    }

    fn backward_params(&mut self, cx: &mut Bwd<'_>) {
        let Some(acc) = cx.param_acc else { return };
        let g = self.g;
        let (ohw, kkg) = (g.ohw(), g.kkg());
        let x = &cx.vals[cx.ins[0]];
        let dy = cx.dy;
        let (per, len) = (self.dw_per_group, g.cout * kkg);
        let lanes = self.cols.len();
        let work = g.n * g.cout * kkg * ohw;
        let wino = self.wino.as_mut().filter(|wc| wc.dw.is_some() && winograd::transformable(x) && winograd::transformable(dy));
        match wino {
            Some(wc) => {
                let wg = wc.fwd_geom;
                over_partials(cx.pool, work, &mut self.dw_partials, len, &mut wc.ws, |j, dw, [v, m, s, du]| {
                    let first = j * per;
                    winograd::weight_grad_of_images(&wg, x, dy, first, per.min(g.n - first), dw, (v, m, s, du));
                });
            }
            None => over_partials(cx.pool, work, &mut self.dw_partials, len, &mut self.cols, |j, dw, col| {
                let first = j * per;
                weight_grad_of_images(&g, x, dy, first, per.min(g.n - first), col, dw);
            }),
        }
        // dW (=|+=) the partials in group order, element by element. When accumulating, the
        // partials are summed first and the sum added to the gradient held (the bits of a fresh
        // gradient plus the held one, as PyTorch accumulates).
        let partials = &self.dw_partials;
        let dw = &mut cx.params[self.weight].grad;
        for_each_chunk(cx.pool, partials.len(), dw, len.div_ceil(lanes).max(1), |c, out| {
            let start = c * len.div_ceil(lanes).max(1);
            let n = out.len();
            match acc {
                Accum::Write => {
                    out.fill(0.0);
                    for part in partials.chunks_exact(len) {
                        for (d, v) in out.iter_mut().zip(&part[start..start + n]) {
                            *d += *v;
                        }
                    }
                }
                Accum::Add => {
                    for (i, d) in out.iter_mut().enumerate() {
                        *d += partials.chunks_exact(len).fold(0.0, |s, part| s + part[start + i]);
                    }
                }
            }
        });
        if let Some(b) = self.bias {
            // Per channel, the row sums of the images are added in image order, so the channels
            // can be split over the pool without changing a bit.
            let db = &mut cx.params[b].grad;
            let per = g.cout.div_ceil(lanes).max(1);
            for_each_chunk(cx.pool, dy.len(), db, per, |k, dbs| {
                for (c, d) in dbs.iter_mut().enumerate() {
                    let at = (k * per + c) * ohw;
                    let sum = dy.chunks_exact(g.cout * ohw).fold(0.0, |s, dyi| s + dyi[at..at + ohw].iter().sum::<f32>());
                    acc.put(d, sum);
                }
            });
        }
    }

    fn backward_input(&mut self, cx: &Bwd<'_>, _i: usize, dx: &mut [f32], acc: Accum) {
        let g = self.g;
        let (hw, ohw, kkg, cog) = (g.hw(), g.ohw(), g.kkg(), g.cog());
        let w = &cx.params[self.weight].data;
        let dy = cx.dy;
        if let Some(wc) = &mut self.wino {
            if let Some(wg) = wc.bwd.filter(|_| winograd::transformable(dy) && winograd::transformable(w)) {
                winograd::transform_weights(&wg, w, true, &mut wc.ub, cx.pool);
                winograd_batch(cx.pool, &wg, &wc.ub, dy, None, dx, acc, &mut wc.ws, None);
                return;
            }
        }
        let inner = if self.dcols.len() > 1 { None } else { cx.pool };
        let work = g.n * g.cout * kkg * ohw;
        over_batch(cx.pool, g.n, work, dx, g.cin * hw, 1, &mut self.dcols, |first, count, dxs, dcol| {
            for j in 0..count {
                let dyi = &dy[(first + j) * g.cout * ohw..][..g.cout * ohw];
                let dxi = &mut dxs[j * g.cin * hw..][..g.cin * hw];
                if g.is_direct() {
                    // The column matrix is the image itself, so its gradient is the input gradient.
                    for gi in 0..g.groups {
                        gemm(
                            1.0,
                            Mat::new(&w[gi * cog * kkg..], cog, kkg).t(),
                            Mat::new(&dyi[gi * cog * ohw..], cog, ohw),
                            acc.beta(),
                            MatMut::new(&mut dxi[gi * kkg * ohw..][..kkg * ohw], kkg, ohw),
                            inner,
                        );
                    }
                    continue;
                }
                column_grad_to_image(&g, w, dyi, dcol, dxi, acc, g.column_layout(), inner);
            }
        });
    }
}

/// How the column gradient of one image is laid out.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ColumnLayout {
    /// `[kkg, ohw]`, as the column matrix: `W^T dY`.
    Rows,
    /// `[ohw, kkg]`: `dY^T W`, whose long side (`kkg`) is the output's contiguous one. For small
    /// images (the 8x8 layers of VGG: `ohw = 64`, `kkg` up to 4608) this product ran 15-25 %
    /// faster here than `W^T dY`, whose 64-wide output rows make short micro-kernel panels.
    Transposed,
}

impl ConvGeom {
    /// The layout of the column gradient: transposed for one group and images much smaller than
    /// the column count.
    fn column_layout(&self) -> ColumnLayout {
        if self.groups == 1 && self.ohw() * 16 <= self.kkg() {
            ColumnLayout::Transposed
        } else {
            ColumnLayout::Rows
        }
    }
}

/// The input gradient of one image (`dxi`, written or accumulated as `acc` says) from its output
/// gradient `dyi`, through the column gradient `dcol` (a workspace of `kkg * ohw` per group).
#[allow(clippy::too_many_arguments)]
fn column_grad_to_image(
    g: &ConvGeom,
    w: &[f32],
    dyi: &[f32],
    dcol: &mut [f32],
    dxi: &mut [f32],
    acc: Accum,
    layout: ColumnLayout,
    pool: Option<&rayon::ThreadPool>,
) {
    let (hw, ohw, kkg, cog) = (g.hw(), g.ohw(), g.kkg(), g.cog());
    match layout {
        ColumnLayout::Rows => {
            for gi in 0..g.groups {
                // dcol_g [kkg, ohw] = W_g^T [kkg, cog] x dY_g [cog, ohw]
                gemm(
                    1.0,
                    Mat::new(&w[gi * cog * kkg..], cog, kkg).t(),
                    Mat::new(&dyi[gi * cog * ohw..], cog, ohw),
                    0.0,
                    MatMut::new(&mut dcol[gi * kkg * ohw..][..kkg * ohw], kkg, ohw),
                    pool,
                );
            }
            acc.prepare(dxi);
            let rows = g.kh * g.kw * ohw;
            let dcol: &[f32] = dcol;
            for_each_chunk(pool, dcol.len(), dxi, hw, |c, dxc| col2im_channel(g, &dcol[c * rows..][..rows], dxc));
        }
        ColumnLayout::Transposed => {
            // dcol^T [ohw, kkg] = dY^T [ohw, cout] x W [cout, kkg] (one group).
            gemm(1.0, Mat::new(dyi, g.cout, ohw).t(), Mat::new(w, g.cout, kkg), 0.0, MatMut::new(&mut dcol[..ohw * kkg], ohw, kkg), pool);
            acc.prepare(dxi);
            let dcolt: &[f32] = dcol;
            for_each_chunk(pool, dcolt.len(), dxi, hw, |c, dxc| col2im_channel_t(g, dcolt, c, dxc));
        }
    }
}

/// [`col2im_channel`] from a transposed column gradient `[ohw, kkg]`: the same additions in the
/// same order, reading column `(c, ky, kx)` with a stride of `kkg`.
fn col2im_channel_t(g: &ConvGeom, dcolt: &[f32], c: usize, dxc: &mut [f32]) {
    let kkg = g.kkg();
    for ky in 0..g.kh {
        for kx in 0..g.kw {
            let r = (c * g.kh + ky) * g.kw + kx;
            let x0 = (kx * g.dw) as isize - g.pw as isize;
            let (lo, hi) = g.valid_cols(x0);
            for oy in 0..g.oh {
                let iy = (oy * g.sh + ky * g.dh) as isize - g.ph as isize;
                if iy < 0 || iy >= g.h as isize {
                    continue;
                }
                let drow = &mut dxc[iy as usize * g.w..][..g.w];
                for ox in lo..hi {
                    drow[(ox as isize * g.sw as isize + x0) as usize] += dcolt[(oy * g.ow + ox) * kkg + r];
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The weight gradient of `n` images of one geometry against a direct f64 sum, within the
    /// float32 error bound of a sum of its length; `padded` says whether the column matrix the
    /// product reads has rows wider than its width (`transposed_stride`).
    fn check_weight_grad(spec: mase_ir::ConvSpec, n: usize, side: usize, padded: bool) {
        let (cin, cout, k, s, p) = (spec.in_channels, spec.out_channels, spec.kernel[0], spec.stride[0], spec.padding[0]);
        let o = (side + 2 * p - k) / s + 1;
        let g = ConvGeom::new(&spec, &[n, cin, side, side], &[n, cout, o, o]);
        let width = images_per_product(&g) * g.ohw();
        assert_eq!(transposed_stride(width) != width, padded, "{spec:?} on {side}x{side}: rows {width} wide");
        let mut rng = mase_ir::Rng::new(side as u64);
        let x: Vec<f32> = (0..n * cin * side * side).map(|_| rng.uniform() - 0.5).collect();
        let dy: Vec<f32> = (0..n * cout * o * o).map(|_| rng.uniform() - 0.5).collect();
        let conv = Conv::new(g, 0, None, 1, ConvAlgo::Exact);
        let mut col = conv.cols[0].clone();
        let mut dw = vec![f32::NAN; cout * g.kkg()];
        weight_grad_of_images(&g, &x, &dy, 0, n, &mut col, &mut dw);
        let (cig, cog) = (cin / spec.groups, cout / spec.groups);
        for co in 0..cout {
            for (ci, ky, kx) in (0..cig).flat_map(|ci| (0..k).flat_map(move |ky| (0..k).map(move |kx| (ci, ky, kx)))) {
                let c = co / cog * cig + ci;
                let (mut sum, mut abs) = (0.0f64, 0.0f64);
                for (i, oy, ox) in (0..n).flat_map(|i| (0..o).flat_map(move |oy| (0..o).map(move |ox| (i, oy, ox)))) {
                    let (iy, ix) = ((oy * s + ky) as isize - p as isize, (ox * s + kx) as isize - p as isize);
                    if iy < 0 || ix < 0 || iy >= side as isize || ix >= side as isize {
                        continue;
                    }
                    let t = f64::from(dy[((i * cout + co) * o + oy) * o + ox])
                        * f64::from(x[((i * cin + c) * side + iy as usize) * side + ix as usize]);
                    sum += t;
                    abs += t.abs();
                }
                let got = f64::from(dw[(co * cig + ci) * k * k + ky * k + kx]);
                let bound = (n * o * o) as f64 * f64::from(f32::EPSILON) * abs;
                assert!((got - sum).abs() <= bound, "{spec:?} on {side}x{side}: dW[{co}, {ci}, {ky}, {kx}] = {got}, want {sum}");
            }
        }
    }

    #[test]
    fn weight_gradients_with_widened_column_rows_are_the_direct_sums() {
        let conv = |cin, cout, k, s, p| mase_ir::ConvSpec::new(2, cin, cout, k, s, p);
        // 16x16 outputs (256 columns, widened to 272), per image.
        check_weight_grad(conv(3, 5, 3, 1, 1), 3, 16, true);
        // A 1x1 stride-1 convolution, whose image is its column matrix: copied into wider rows.
        check_weight_grad(conv(4, 6, 1, 1, 0), 2, 16, true);
        // Groups, each reading its own rows of the widened matrix.
        check_weight_grad(mase_ir::ConvSpec { groups: 2, ..conv(4, 6, 3, 1, 1) }, 2, 16, true);
        // 8x8 outputs, four images side by side (256 columns, widened).
        check_weight_grad(conv(3, 4, 3, 1, 1), 8, 8, true);
        // Stride 2 on 32x32: 16x16 outputs, widened.
        check_weight_grad(conv(2, 3, 3, 2, 1), 2, 32, true);
        // 10x10 outputs, three images side by side (300 columns): rows as wide as the matrix.
        check_weight_grad(conv(3, 4, 3, 1, 1), 6, 10, false);
        check_weight_grad(conv(4, 6, 1, 1, 0), 2, 10, false);
    }

    #[test]
    fn both_column_gradient_layouts_give_the_same_input_gradient() {
        // (cin, cout, side, stride, padding): small images against many columns, as VGG's last
        // layers; with stride 2 and without padding too.
        for (cin, cout, side, stride, pad) in [(16, 8, 3, 1, 1), (32, 5, 4, 1, 1), (16, 4, 7, 2, 0), (20, 3, 5, 2, 1)] {
            let spec = mase_ir::ConvSpec::new(2, cin, cout, 3, stride, pad);
            let x = [1, cin, side, side];
            let o = (side + 2 * pad - 3) / stride + 1;
            let g = ConvGeom::new(&spec, &x, &[1, cout, o, o]);
            assert_eq!(g.column_layout(), if o * o * 16 <= cin * 9 { ColumnLayout::Transposed } else { ColumnLayout::Rows });
            let mut rng = mase_ir::Rng::new(cin as u64);
            let w: Vec<f32> = (0..cout * cin * 9).map(|_| rng.uniform() - 0.5).collect();
            let dy: Vec<f32> = (0..cout * o * o).map(|_| rng.uniform() - 0.5).collect();
            let mut dcol = vec![0.0; cin * 9 * o * o];
            let mut dx = |layout| {
                let mut out = vec![f32::NAN; cin * side * side];
                column_grad_to_image(&g, &w, &dy, &mut dcol, &mut out, Accum::Write, layout, None);
                out
            };
            let (rows, transposed) = (dx(ColumnLayout::Rows), dx(ColumnLayout::Transposed));
            let worst = rows.iter().zip(&transposed).map(|(a, b)| (a - b).abs()).fold(0.0, f32::max);
            assert!(worst < 1e-6, "cin {cin} side {side} stride {stride}: {worst}");
        }
    }
}
