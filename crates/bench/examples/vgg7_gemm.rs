//! Where vgg7's training step goes, GEMM by GEMM: the products of each conv layer as the
//! runtime issues them (one per sample, over an im2col matrix of `ohw` columns) against the same
//! work issued as one product over the whole batch (`N * ohw` columns).
//!
//! usage: cargo run --release -p mase-bench --example vgg7_gemm [-- BATCH]
//! Prints, per layer and in total, milliseconds for forward (Y = W col), weight gradient
//! (dW += dY col^T) and column gradient (dcol = W^T dY), per sample and batched.

use mase_ir::Rng;
use mase_runtime::{gemm, Mat, MatMut};
use std::time::Instant;

/// `(in_channels, out_channels, side)` of vgg7's six 3x3 convolutions on 32x32 images.
const LAYERS: [(usize, usize, usize); 6] = [(3, 128, 32), (128, 128, 32), (128, 256, 16), (256, 256, 16), (256, 512, 8), (512, 512, 8)];

fn random(n: usize, rng: &mut Rng) -> Vec<f32> {
    (0..n).map(|_| rng.uniform() - 0.5).collect()
}

/// Milliseconds of the fastest of three runs of `f`.
fn best_ms(mut f: impl FnMut()) -> f64 {
    (0..3)
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64() * 1e3
        })
        .fold(f64::INFINITY, f64::min)
}

fn main() {
    let n: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(32);
    let mut rng = Rng::new(1);
    println!("batch {n}; ms per training step; 'per-sample' is how the runtime issues the products today");
    println!("{:>14} {:>22} {:>22} {:>22}", "layer", "forward sample|batch", "dW sample|batch", "dcol sample|batch");
    let mut total = [0.0f64; 6];
    for (cin, cout, side) in LAYERS {
        let (kkg, ohw) = (cin * 9, side * side);
        let w = random(cout * kkg, &mut rng);
        let col = random(kkg * ohw * n, &mut rng);
        let dy = random(cout * ohw * n, &mut rng);
        let mut y = vec![0.0f32; cout * ohw * n];
        let mut dw = vec![0.0f32; cout * kkg];
        let mut dcol = vec![0.0f32; kkg * ohw * n];
        let t = [
            best_ms(|| {
                for i in 0..n {
                    let c = Mat::new(&col[i * kkg * ohw..][..kkg * ohw], kkg, ohw);
                    gemm(1.0, Mat::new(&w, cout, kkg), c, 0.0, MatMut::new(&mut y[i * cout * ohw..][..cout * ohw], cout, ohw), None);
                }
            }),
            best_ms(|| gemm(1.0, Mat::new(&w, cout, kkg), Mat::new(&col, kkg, ohw * n), 0.0, MatMut::new(&mut y, cout, ohw * n), None)),
            best_ms(|| {
                for i in 0..n {
                    let d = Mat::new(&dy[i * cout * ohw..][..cout * ohw], cout, ohw);
                    let c = Mat::new(&col[i * kkg * ohw..][..kkg * ohw], kkg, ohw).t();
                    gemm(1.0, d, c, if i == 0 { 0.0 } else { 1.0 }, MatMut::new(&mut dw, cout, kkg), None);
                }
            }),
            best_ms(|| {
                gemm(1.0, Mat::new(&dy, cout, ohw * n), Mat::new(&col, kkg, ohw * n).t(), 0.0, MatMut::new(&mut dw, cout, kkg), None)
            }),
            best_ms(|| {
                for i in 0..n {
                    let d = Mat::new(&dy[i * cout * ohw..][..cout * ohw], cout, ohw);
                    gemm(1.0, Mat::new(&w, cout, kkg).t(), d, 0.0, MatMut::new(&mut dcol[i * kkg * ohw..][..kkg * ohw], kkg, ohw), None);
                }
            }),
            best_ms(|| {
                gemm(1.0, Mat::new(&w, cout, kkg).t(), Mat::new(&dy, cout, ohw * n), 0.0, MatMut::new(&mut dcol, kkg, ohw * n), None)
            }),
        ];
        for (acc, v) in total.iter_mut().zip(t) {
            *acc += v;
        }
        let name = format!("{cin}->{cout}@{side}");
        println!("{name:>14} {:>10.1} | {:>9.1} {:>10.1} | {:>9.1} {:>10.1} | {:>9.1}", t[0], t[1], t[2], t[3], t[4], t[5]);
    }
    println!(
        "{:>14} {:>10.1} | {:>9.1} {:>10.1} | {:>9.1} {:>10.1} | {:>9.1}",
        "total", total[0], total[1], total[2], total[3], total[4], total[5]
    );
}
