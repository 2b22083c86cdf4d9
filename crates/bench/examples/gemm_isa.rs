//! The `gemm` crate's AVX2 and AVX-512 kernel sets against each other, on one thread, on the
//! matrix products of vgg7 (im2col convolution per image, and the Winograd path's batched
//! products), tfc and the jsc models (batch 256), products with narrow outputs, and the square
//! products of `conv_layers`' peak.
//!
//! Each product runs through `mase_runtime::gemm_with` with each kernel set in turn, alternating,
//! `--repeat` rounds; a round times enough calls for about 20 ms, and the table gives the best
//! round's GFLOP/s of each set and their ratio (`512/2 > 1`: AVX-512 faster), then the largest
//! difference between the two results relative to `sum_k |a_ik b_kj|` (`rel`), and `=` where the
//! bits agree. The last column is the set `GemmIsa::for_shape` picks for the product.
//!
//! usage: cargo run --release -p mase-bench --example gemm_isa -- [--repeat R]

use mase_bench::example::arg;
use mase_ir::Rng;
use mase_runtime::{gemm_with, GemmIsa, Mat, MatMut};
use std::time::Instant;

/// One product: `C [m, n] = A [m, k] B [k, n]`, `A` stored transposed (`[k, m]`) when `at`, `B`
/// when `bt`.
#[derive(Clone, Debug)]
struct Shape {
    label: String,
    m: usize,
    k: usize,
    n: usize,
    at: bool,
    bt: bool,
}

fn shape(label: impl Into<String>, (m, k, n): (usize, usize, usize), (at, bt): (bool, bool)) -> Shape {
    Shape { label: label.into(), m, k, n, at, bt }
}

/// vgg7's 3x3 convolutions on 32x32 images: `(in_channels, out_channels, side)`.
const VGG7: [(usize, usize, usize); 6] = [(3, 128, 32), (128, 128, 32), (128, 256, 16), (256, 256, 16), (256, 512, 8), (512, 512, 8)];

/// Tiles per Winograd group (`kernels/winograd.rs`, `GROUP_TILES`): every vgg7 layer's batched
/// products have this many columns at batch 32 or more.
const WINO_TILES: usize = 256;

/// The rows of the tabular and MNIST models' batches in `mase-bench`.
const ROWS: usize = 256;

fn shapes() -> Vec<Shape> {
    let mut out = Vec::new();
    for (cin, cout, side) in VGG7 {
        let (kk, hw) = (cin * 9, side * side);
        let l = format!("{cin}->{cout}@{side}");
        out.push(shape(format!("vgg7 {l} im2col fwd"), (cout, kk, hw), (false, false)));
        out.push(shape(format!("vgg7 {l} im2col dW"), (cout, hw, kk), (false, true)));
        out.push(shape(format!("vgg7 {l} im2col dX"), (hw, cout, kk), (true, false)));
    }
    for (cin, cout, side) in VGG7.into_iter().filter(|&(cin, _, _)| cin >= 32) {
        let l = format!("{cin}->{cout}@{side}");
        out.push(shape(format!("vgg7 {l} wino fwd"), (cout, cin, WINO_TILES), (false, false)));
        out.push(shape(format!("vgg7 {l} wino dX"), (cin, cout, WINO_TILES), (false, false)));
        out.push(shape(format!("vgg7 {l} wino dW"), (cout, WINO_TILES, cin), (false, true)));
    }
    let linears = |model: &str, layers: &[(usize, usize)], out: &mut Vec<Shape>| {
        for (i, &(inf, outf)) in layers.iter().enumerate() {
            let l = format!("{model} fc{i} {inf}->{outf}");
            out.push(shape(format!("{l} fwd"), (ROWS, inf, outf), (false, true)));
            out.push(shape(format!("{l} dW"), (outf, ROWS, inf), (true, false)));
            if i > 0 {
                out.push(shape(format!("{l} dX"), (ROWS, outf, inf), (false, false)));
            }
        }
    };
    linears("tfc", &[(784, 64), (64, 64), (64, 64), (64, 10)], &mut out);
    linears("jsc3", &[(16, 64), (64, 32), (32, 32), (32, 5)], &mut out);
    linears("jsc-toy", &[(16, 8), (8, 8), (8, 5)], &mut out);
    linears("jsc-tiny", &[(16, 5)], &mut out);
    // Narrow outputs, around the class boundary of `GemmIsa::for_shape`.
    for n in [4, 8, 12, 16, 24] {
        out.push(shape(format!("narrow n={n} fwd"), (ROWS, 64, n), (false, true)));
        out.push(shape(format!("narrow n={n} dX"), (ROWS, 64, n), (false, false)));
    }
    // The square products of `conv_layers`' peak.
    for n in [1024, 2048] {
        out.push(shape(format!("square {n}"), (n, n, n), (false, false)));
    }
    // One row (inference of a single sample).
    for (k, n) in [(16, 64), (784, 64), (64, 64), (64, 16)] {
        out.push(shape(format!("one row {k}->{n} fwd"), (1, k, n), (false, true)));
    }
    out
}

fn random(n: usize, rng: &mut Rng) -> Vec<f32> {
    (0..n).map(|_| rng.uniform() - 0.5).collect()
}

/// The operands of `s` as views, `A` and `B` from `a` and `b`.
fn views<'a>(s: &Shape, a: &'a [f32], b: &'a [f32]) -> (Mat<'a>, Mat<'a>) {
    let a = if s.at { Mat::new(a, s.k, s.m).t() } else { Mat::new(a, s.m, s.k) };
    let b = if s.bt { Mat::new(b, s.n, s.k).t() } else { Mat::new(b, s.k, s.n) };
    (a, b)
}

fn main() {
    let repeat = arg("--repeat", 5);
    let isas = [GemmIsa::Avx2, GemmIsa::Avx512];
    for isa in isas {
        if !isa.available() {
            println!("this CPU lacks {}: nothing to compare", isa.name());
            return;
        }
    }
    println!("one thread, best of {repeat} rounds (about 20 ms each) per kernel set, alternating");
    println!("{:<34} {:>16} {:>9} {:>9} {:>7} {:>9} {:>7}", "product", "m x k x n", "avx2 GF", "512 GF", "512/2", "rel", "picks");
    let mut rng = Rng::new(7);
    let mut wins = 0;
    for s in shapes() {
        let (a, b) = (random(s.m * s.k, &mut rng), random(s.k * s.n, &mut rng));
        let flops = 2.0 * (s.m * s.k * s.n) as f64;
        let calls = ((2e7 / flops) as usize).max(1);
        let mut outs = [vec![0.0f32; s.m * s.n], vec![0.0f32; s.m * s.n]];
        let mut secs = [f64::INFINITY; 2];
        for _ in 0..repeat.max(1) {
            for (i, &isa) in isas.iter().enumerate() {
                let (av, bv) = views(&s, &a, &b);
                let t = Instant::now();
                for _ in 0..calls {
                    gemm_with(isa, 1.0, av, bv, 0.0, MatMut::new(&mut outs[i], s.m, s.n), None);
                }
                secs[i] = secs[i].min(t.elapsed().as_secs_f64() / calls as f64);
            }
        }
        // The scale of each element's sum: |A| |B|.
        let (aa, ab): (Vec<f32>, Vec<f32>) = (a.iter().map(|v| v.abs()).collect(), b.iter().map(|v| v.abs()).collect());
        let mut scale = vec![0.0f32; s.m * s.n];
        let (av, bv) = views(&s, &aa, &ab);
        gemm_with(GemmIsa::Avx2, 1.0, av, bv, 0.0, MatMut::new(&mut scale, s.m, s.n), None);
        let rel =
            outs[0].iter().zip(&outs[1]).zip(&scale).map(|((x, y), s)| (x - y).abs() / s.max(f32::MIN_POSITIVE)).fold(0.0f32, f32::max);
        let same = if outs[0] == outs[1] { "=".to_string() } else { format!("{rel:.1e}") };
        let ratio = secs[0] / secs[1];
        if ratio > 1.0 {
            wins += 1;
        }
        println!(
            "{:<34} {:>16} {:>9.1} {:>9.1} {:>6.2}x {:>9} {:>7}",
            s.label,
            format!("{}x{}x{}", s.m, s.k, s.n),
            flops / secs[0] / 1e9,
            flops / secs[1] / 1e9,
            ratio,
            same,
            GemmIsa::for_shape(s.m, s.k, s.n).name()
        );
    }
    println!("AVX-512 faster on {wins} of {} products", shapes().len());
}
