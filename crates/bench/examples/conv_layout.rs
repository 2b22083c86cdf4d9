//! Convolution layouts against each other (issue 22, item 4): the runtime's NCHW convolution
//! (im2col per image and one GEMM, `ConvAlgo::Exact`; Winograd where it pays, `ConvAlgo::Fast`)
//! against two NHWC formulations built on the same GEMM entry point (`mase_runtime::gemm`):
//!
//! - `nhwc-im2col`: the patches of a group of images as rows `[N OH OW, K K C_in]`, each tap a
//!   contiguous copy of `C_in` values (zeros in the padding), times the weights as
//!   `[K K C_in, C_out]`, giving the NHWC output `[N OH OW, C_out]` in one product;
//! - `nhwc-shifted` (stride 1): no patches at all. Each image is padded once into
//!   `[(H + 2P), (W + 2P), C_in]`; for each of the `K K` taps, the rows of the padded image shifted
//!   by the tap are a `[OH (W + 2P), C_in]` matrix in place, and `K K` products accumulate into a
//!   wide output `[OH (W + 2P), C_out]` whose `2P` extra columns per row are dropped when it is
//!   copied out (the arithmetic on them is the method's waste, counted in its time);
//! - `nchw-shifted` (stride 1): the same shifted products in NCHW, to tell the layout from the
//!   method: the padded image is `[C_in, (H + 2P) (W + 2P)]`, each tap's operand the columns
//!   shifted by the tap (`[C_in, OH (W + 2P)]`, rows a padded plane apart), the weights of the tap
//!   `[C_out, C_in]`, the wide output `[C_out, OH (W + 2P)]`.
//!
//! Forward only, on one batch; the variants take turns for `--repeat` rounds after a warm-up round
//! (this VM's speed moves by up to 1.5x from minute to minute), each keeping its best, and a rate
//! counts the direct convolution's `2 N C_out C_in K K OH OW` FLOPs, so rates compare like with
//! like. `transpose ms` is what converting the input to NHWC and the output back costs per layer,
//! the price a layout change pays at each graph edge it does not remove. `max rel` is the largest
//! difference of each NHWC output from the NCHW direct output, relative to the largest output,
//! to show the variants compute the same convolution.
//!
//! usage: cargo run --release -p mase-bench --example conv_layout -- [--batch N] [--threads T] [--repeat R]
//!        [--layers CIN:COUT:SIDE[:K:STRIDE],...] (padding K/2; vgg7's and resnet18's 3x3 layers by default)

use mase_bench::example::{arg, word};
use mase_ir::{ConvSpec, Graph, Op, Rng};
use mase_runtime::{gemm, init_params, ConvAlgo, ExecOptions, Executor, Mat, MatMut, Mode};
use rayon::ThreadPool;
use std::time::Instant;

/// One convolution: `(in_channels, out_channels, side, kernel, stride)`, padding `kernel / 2`.
type Layer = (usize, usize, usize, usize, usize);

/// vgg7's and resnet18's (CIFAR stem) convolutions on 32x32 images, each shape once.
const LAYERS: [Layer; 13] = [
    (3, 128, 32, 3, 1),
    (128, 128, 32, 3, 1),
    (128, 256, 16, 3, 1),
    (256, 512, 8, 3, 1),
    (512, 512, 8, 3, 1),
    (3, 64, 32, 3, 1),
    (64, 64, 32, 3, 1),
    (64, 128, 32, 3, 2),
    (64, 128, 32, 1, 2),
    (128, 128, 16, 3, 1),
    (256, 256, 8, 3, 1),
    (256, 512, 8, 3, 2),
    (512, 512, 4, 3, 1),
];

/// Rows of patches (output positions) per NHWC im2col product, about: whole images are grouped
/// until a group has this many.
const GROUP_ROWS: usize = 1024;

/// The layers of `--layers`, the default list otherwise.
fn layers() -> Vec<Layer> {
    let Some(list) = word("--layers") else { return LAYERS.to_vec() };
    list.split(',')
        .map(|l| match l.split(':').map(str::parse).collect::<Result<Vec<usize>, _>>().as_deref() {
            Ok([cin, cout, side]) => (*cin, *cout, *side, 3, 1),
            Ok([cin, cout, side, k, stride]) => (*cin, *cout, *side, *k, *stride),
            _ => panic!("--layers: expected CIN:COUT:SIDE or CIN:COUT:SIDE:K:STRIDE, got {l}"),
        })
        .collect()
}

/// Seconds of one run of `f`.
fn once(f: impl FnOnce()) -> f64 {
    let t = Instant::now();
    f();
    t.elapsed().as_secs_f64()
}

/// The geometry of one layer at one batch.
#[derive(Clone, Copy)]
struct Geom {
    n: usize,
    cin: usize,
    cout: usize,
    h: usize,
    k: usize,
    stride: usize,
    pad: usize,
    oh: usize,
}

impl Geom {
    fn new((cin, cout, side, k, stride): Layer, n: usize) -> Geom {
        let pad = k / 2;
        Geom { n, cin, cout, h: side, k, stride, pad, oh: (side + 2 * pad - k) / stride + 1 }
    }

    fn flops(&self) -> f64 {
        2.0 * (self.n * self.cout * self.cin * self.k * self.k * self.oh * self.oh) as f64
    }
}

/// `[N, C, H, W]` to `[N, H, W, C]`.
fn to_nhwc(x: &[f32], n: usize, c: usize, hw: usize, out: &mut [f32]) {
    for i in 0..n {
        let (src, dst) = (&x[i * c * hw..][..c * hw], &mut out[i * c * hw..][..c * hw]);
        for ch in 0..c {
            for p in 0..hw {
                dst[p * c + ch] = src[ch * hw + p];
            }
        }
    }
}

/// `[N, H, W, C]` to `[N, C, H, W]`.
fn to_nchw(x: &[f32], n: usize, c: usize, hw: usize, out: &mut [f32]) {
    for i in 0..n {
        let (src, dst) = (&x[i * c * hw..][..c * hw], &mut out[i * c * hw..][..c * hw]);
        for p in 0..hw {
            for ch in 0..c {
                dst[ch * hw + p] = src[p * c + ch];
            }
        }
    }
}

/// The weights `[C_out, C_in, K, K]` reordered: weight `(co, ci, tap)` goes to `at(tap, ci, co)`.
fn weights_by_tap(w: &[f32], g: &Geom, at: impl Fn(usize, usize, usize) -> usize) -> Vec<f32> {
    let kk = g.k * g.k;
    let mut out = vec![0.0; w.len()];
    for co in 0..g.cout {
        for ci in 0..g.cin {
            for t in 0..kk {
                out[at(t, ci, co)] = w[(co * g.cin + ci) * kk + t];
            }
        }
    }
    out
}

/// The weights as `[K, K, C_in, C_out]` (NHWC products).
fn weights_hwio(w: &[f32], g: &Geom) -> Vec<f32> {
    weights_by_tap(w, g, |t, ci, co| (t * g.cin + ci) * g.cout + co)
}

/// The weights as `[K K, C_out, C_in]` (NCHW shifted products).
fn weights_per_tap(w: &[f32], g: &Geom) -> Vec<f32> {
    weights_by_tap(w, g, |t, ci, co| (t * g.cout + co) * g.cin + ci)
}

/// NHWC im2col: groups of whole images, one product per group.
fn nhwc_im2col(g: &Geom, x: &[f32], w: &[f32], y: &mut [f32], patches: &mut [f32], pool: Option<&ThreadPool>) {
    let (ohw, kk) = (g.oh * g.oh, g.k * g.k * g.cin);
    let per_group = GROUP_ROWS.div_ceil(ohw).clamp(1, g.n);
    for first in (0..g.n).step_by(per_group) {
        let images = per_group.min(g.n - first);
        let rows = images * ohw;
        let p = &mut patches[..rows * kk];
        for i in 0..images {
            let xi = &x[(first + i) * g.h * g.h * g.cin..][..g.h * g.h * g.cin];
            for oy in 0..g.oh {
                for ox in 0..g.oh {
                    let row = &mut p[((i * g.oh + oy) * g.oh + ox) * kk..][..kk];
                    for ky in 0..g.k {
                        for kx in 0..g.k {
                            let dst = &mut row[(ky * g.k + kx) * g.cin..][..g.cin];
                            let (iy, ix) = ((oy * g.stride + ky) as isize - g.pad as isize, (ox * g.stride + kx) as isize - g.pad as isize);
                            if iy < 0 || ix < 0 || iy >= g.h as isize || ix >= g.h as isize {
                                dst.fill(0.0);
                            } else {
                                dst.copy_from_slice(&xi[(iy as usize * g.h + ix as usize) * g.cin..][..g.cin]);
                            }
                        }
                    }
                }
            }
        }
        let out = &mut y[first * ohw * g.cout..][..rows * g.cout];
        gemm(1.0, Mat::new(p, rows, kk), Mat::new(w, kk, g.cout), 0.0, MatMut::new(out, rows, g.cout), pool);
    }
}

/// NHWC shifted products (stride 1): per image, the padded image and `K K` accumulating products
/// into a wide output, copied out without its padding columns.
fn nhwc_shifted(g: &Geom, x: &[f32], w: &[f32], y: &mut [f32], padded: &mut [f32], wide: &mut [f32], pool: Option<&ThreadPool>) {
    let (pw, cin, cout) = (g.h + 2 * g.pad, g.cin, g.cout);
    let rows = g.oh * pw;
    for i in 0..g.n {
        let xi = &x[i * g.h * g.h * cin..][..g.h * g.h * cin];
        padded.fill(0.0);
        for r in 0..g.h {
            padded[((r + g.pad) * pw + g.pad) * cin..][..g.h * cin].copy_from_slice(&xi[r * g.h * cin..][..g.h * cin]);
        }
        for ky in 0..g.k {
            for kx in 0..g.k {
                let a = &padded[(ky * pw + kx) * cin..][..rows * cin];
                let wt = &w[(ky * g.k + kx) * cin * cout..][..cin * cout];
                let beta = if ky == 0 && kx == 0 { 0.0 } else { 1.0 };
                gemm(1.0, Mat::new(a, rows, cin), Mat::new(wt, cin, cout), beta, MatMut::new(wide, rows, cout), pool);
            }
        }
        let yi = &mut y[i * g.oh * g.oh * cout..][..g.oh * g.oh * cout];
        for oy in 0..g.oh {
            yi[oy * g.oh * cout..][..g.oh * cout].copy_from_slice(&wide[oy * pw * cout..][..g.oh * cout]);
        }
    }
}

/// NCHW shifted products (stride 1): per image, the padded planes and `K K` accumulating
/// products into a wide output, copied out without its padding columns.
fn nchw_shifted(g: &Geom, x: &[f32], w: &[f32], y: &mut [f32], padded: &mut [f32], wide: &mut [f32], pool: Option<&ThreadPool>) {
    let (pw, cin, cout) = (g.h + 2 * g.pad, g.cin, g.cout);
    // A padded plane, and room for the last tap's shift past it.
    let plane = pw * pw + 2 * g.pad;
    let cols = g.oh * pw;
    for i in 0..g.n {
        let xi = &x[i * cin * g.h * g.h..][..cin * g.h * g.h];
        padded.fill(0.0);
        for c in 0..cin {
            for r in 0..g.h {
                padded[c * plane + (r + g.pad) * pw + g.pad..][..g.h].copy_from_slice(&xi[(c * g.h + r) * g.h..][..g.h]);
            }
        }
        for ky in 0..g.k {
            for kx in 0..g.k {
                let off = ky * pw + kx;
                let b = Mat::strided(&padded[off..], cin, cols, plane, 1);
                let wt = &w[(ky * g.k + kx) * cout * cin..][..cout * cin];
                let beta = if ky == 0 && kx == 0 { 0.0 } else { 1.0 };
                gemm(1.0, Mat::new(wt, cout, cin), b, beta, MatMut::new(wide, cout, cols), pool);
            }
        }
        let yi = &mut y[i * cout * g.oh * g.oh..][..cout * g.oh * g.oh];
        for co in 0..cout {
            for oy in 0..g.oh {
                yi[(co * g.oh + oy) * g.oh..][..g.oh].copy_from_slice(&wide[co * cols + oy * pw..][..g.oh]);
            }
        }
    }
}

/// The largest `|a - b|` over the largest `|b|`.
fn max_rel(a: &[f32], b: &[f32]) -> f64 {
    let scale = b.iter().fold(0.0f64, |m, &v| m.max(v.abs() as f64)).max(f64::MIN_POSITIVE);
    a.iter().zip(b).map(|(&a, &b)| (a as f64 - b as f64).abs()).fold(0.0, f64::max) / scale
}

fn main() {
    let (batch, threads, repeat) = (arg("--batch", 32), arg("--threads", 1), arg("--repeat", 3));
    let mut rng = Rng::new(1);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("thread pool");
    let pool = (threads > 1).then_some(&pool);
    println!("threads {threads}, batch {batch}; forward ms and GFLOP/s (direct convolution's FLOPs)");
    println!(
        "{:>18} {:>15} {:>15} {:>15} {:>15} {:>15} {:>10} {:>27}",
        "layer", "nchw exact", "nchw fast", "nchw-shifted", "nhwc-im2col", "nhwc-shifted", "transpose", "max rel: nchw-sh im2col sh"
    );
    let mut totals = [0.0f64; 6];
    for layer in layers() {
        let g = Geom::new(layer, batch);
        let mut graph = Graph::new();
        let xin = graph.placeholder("x");
        let conv = graph.call_module("conv", Op::Conv2d(ConvSpec::new(2, g.cin, g.cout, g.k, g.stride, g.pad)), &[xin]);
        graph.output(conv);
        let params = init_params(&graph, &mut rng);
        let w = &params.get("conv.weight").expect("the conv's weight").data;
        let bias = &params.get("conv.bias").expect("the conv's bias").data;
        let shape = [g.n, g.cin, g.h, g.h];
        let x: Vec<f32> = (0..g.n * g.cin * g.h * g.h).map(|_| rng.uniform() - 0.5).collect();
        let mut execs: Vec<Executor> = [ConvAlgo::Exact, ConvAlgo::Fast]
            .into_iter()
            .map(|algo| {
                let mut exec = Executor::new(&graph, &params, ExecOptions { threads, seed: 0 }).expect("executor");
                exec.set_conv_algo(algo);
                exec
            })
            .collect();
        let mut reference = execs[0].forward(&x, &shape, Mode::Eval).expect("forward").to_vec();
        // The NHWC variants leave out the bias, which the reference has: compare without it.
        let ohw = g.oh * g.oh;
        for (k, v) in reference.iter_mut().enumerate() {
            *v -= bias[k / ohw % g.cout];
        }
        let mut xh = vec![0.0; x.len()];
        let mut yh = vec![0.0; g.n * ohw * g.cout];
        let mut back = vec![0.0; yh.len()];
        let (wh, wt) = (weights_hwio(w, &g), weights_per_tap(w, &g));
        let per_group = GROUP_ROWS.div_ceil(ohw).clamp(1, g.n);
        let mut patches = vec![0.0; per_group * ohw * g.k * g.k * g.cin];
        let pw = g.h + 2 * g.pad;
        // The padded image, with room for the last tap's shift past it; the wide output.
        let mut padded = vec![0.0; (pw * pw + 2 * g.pad) * g.cin];
        let mut wide = vec![0.0; g.oh * pw * g.cout];
        to_nhwc(&x, g.n, g.cin, g.h * g.h, &mut xh);
        // The variants take turns, round after round, so that each sees the machine's moods alike;
        // each keeps its best round. Strided layers have no shifted variants (NaN).
        let shifted = g.stride == 1;
        let mut secs = [f64::INFINITY; 6];
        let mut rel = [f64::NAN; 3];
        for round in 0..repeat.max(1) + 1 {
            let mut times = [f64::NAN; 6];
            for (slot, exec) in execs.iter_mut().enumerate() {
                times[slot] = once(|| {
                    exec.forward(&x, &shape, Mode::Eval).expect("forward");
                });
            }
            if shifted {
                times[2] = once(|| nchw_shifted(&g, &x, &wt, &mut back, &mut padded, &mut wide, pool));
                rel[0] = max_rel(&back, &reference);
            }
            times[3] = once(|| nhwc_im2col(&g, &xh, &wh, &mut yh, &mut patches, pool));
            to_nchw(&yh, g.n, g.cout, ohw, &mut back);
            rel[1] = max_rel(&back, &reference);
            if shifted {
                times[4] = once(|| nhwc_shifted(&g, &xh, &wh, &mut yh, &mut padded, &mut wide, pool));
                to_nchw(&yh, g.n, g.cout, ohw, &mut back);
                rel[2] = max_rel(&back, &reference);
            }
            times[5] = once(|| {
                to_nhwc(&x, g.n, g.cin, g.h * g.h, &mut xh);
                to_nchw(&yh, g.n, g.cout, ohw, &mut back);
            });
            // The first round warms up.
            if round > 0 {
                for (best, t) in secs.iter_mut().zip(times) {
                    *best = if t.is_nan() { t } else { best.min(t) };
                }
            }
        }
        let [exact, fast, nchw_sh, im2col, nhwc_sh, transpose] = secs;
        let [rel_nchw_sh, rel_im2col, rel_shifted] = rel;
        let flops = g.flops();
        let cell = |s: f64| if s.is_nan() { format!("{:>15}", "-") } else { format!("{:>7.1} {:>7.1}", s * 1e3, flops / s / 1e9) };
        let name = format!("{}->{}@{} k{} s{}", g.cin, g.cout, g.h, g.k, g.stride);
        println!(
            "{:>18} {} {} {} {} {} {:>10.1} {:>8.1e} {:>8.1e} {:>8.1e}",
            name,
            cell(exact),
            cell(fast),
            cell(nchw_sh),
            cell(im2col),
            cell(nhwc_sh),
            transpose * 1e3,
            rel_nchw_sh,
            rel_im2col,
            rel_shifted
        );
        // Where the shifted products do not apply (strides), the totals take the layout's other way.
        let or = |t: f64, other: f64| if t.is_nan() { other } else { t };
        for (acc, v) in totals.iter_mut().zip([exact, fast, or(nchw_sh, exact), im2col, or(nhwc_sh, im2col), transpose]) {
            *acc += v;
        }
    }
    println!(
        "{:>18} {:>15.1} {:>15.1} {:>15.1} {:>15.1} {:>15.1} {:>10.1}   (ms; shifted: exact or im2col where it does not apply)",
        "all",
        totals[0] * 1e3,
        totals[1] * 1e3,
        totals[2] * 1e3,
        totals[3] * 1e3,
        totals[4] * 1e3,
        totals[5] * 1e3
    );
}
