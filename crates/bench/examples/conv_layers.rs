//! How close vgg7's convolutions come to this machine's fp32 GEMM peak.
//!
//! The peak is a large square product `C = A B` through the runtime's one GEMM entry point
//! (`mase_runtime::gemm`), on the same thread count. Each of vgg7's six 3x3 convolutions then runs
//! alone in the executor (`x -> conv -> output`) at the given batch: forward (training mode),
//! weight gradient (backward without the input gradient, as for vgg7's first layer) and input
//! gradient (backward of the same layer with frozen parameters). Every phase is `2 N C_out C_in 9 H W` FLOPs;
//! the table gives GFLOP/s and the fraction of the peak.
//!
//! usage: cargo run --release -p mase-bench --example conv_layers -- [--batch N] [--threads T] [--repeat R]

use mase_ir::{ConvSpec, Graph, Op, Rng};
use mase_runtime::{gemm, init_params, ExecOptions, Executor, Mat, MatMut, Mode};
use std::time::Instant;

/// `(in_channels, out_channels, side)` of vgg7's 3x3 convolutions on 32x32 images.
const LAYERS: [(usize, usize, usize); 6] = [(3, 128, 32), (128, 128, 32), (128, 256, 16), (256, 256, 16), (256, 512, 8), (512, 512, 8)];

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter().position(|a| a == name).and_then(|i| args.get(i + 1)).and_then(|v| v.parse().ok()).unwrap_or(default)
}

/// Seconds of the fastest of `repeat` runs of `f`.
fn best(repeat: usize, mut f: impl FnMut()) -> f64 {
    (0..repeat.max(1))
        .map(|_| {
            let t = Instant::now();
            f();
            t.elapsed().as_secs_f64()
        })
        .fold(f64::INFINITY, f64::min)
}

fn random(n: usize, rng: &mut Rng) -> Vec<f32> {
    (0..n).map(|_| rng.uniform() - 0.5).collect()
}

fn main() {
    let (batch, threads, repeat) = (arg("--batch", 128), arg("--threads", 1), arg("--repeat", 3));
    let mut rng = Rng::new(1);
    let pool = rayon::ThreadPoolBuilder::new().num_threads(threads).build().expect("thread pool");
    // The peak: the best rate of square products of a few sizes, each the best of `repeat` runs.
    let mut peak: f64 = 0.0;
    let mut sizes = String::new();
    for n in [1024, 1536, 2048] {
        let (a, b) = (random(n * n, &mut rng), random(n * n, &mut rng));
        let mut c = vec![0.0f32; n * n];
        let t = best(repeat, || gemm(1.0, Mat::new(&a, n, n), Mat::new(&b, n, n), 0.0, MatMut::new(&mut c, n, n), Some(&pool)));
        let rate = 2.0 * (n * n * n) as f64 / t / 1e9;
        sizes += &format!(" {n}: {rate:.1}");
        peak = peak.max(rate);
    }
    println!("threads {threads}, batch {batch}; peak {peak:.1} GFLOP/s (square GEMMs{sizes})");
    println!("{:>16} {:>24} {:>24} {:>24}", "layer", "forward ms GF/s %", "dW ms GF/s %", "dX ms GF/s %");
    let mut totals = [0.0f64; 3];
    let mut flops_total = 0.0;
    for (cin, cout, side) in LAYERS {
        let mut g = Graph::new();
        let x = g.placeholder("x");
        let y = g.call_module("conv", Op::Conv2d(ConvSpec::new(2, cin, cout, 3, 1, 1)), &[x]);
        g.output(y);
        let params = init_params(&g, &mut rng);
        let mut exec = Executor::new(&g, &params, ExecOptions { threads, seed: 0 }).expect("executor");
        let shape = [batch, cin, side, side];
        let xs = random(batch * cin * side * side, &mut rng);
        let dy = random(batch * cout * side * side, &mut rng);
        exec.forward(&xs, &shape, Mode::Train).expect("forward");
        exec.backward(&dy).expect("backward");
        let fwd = best(repeat, || {
            exec.forward(&xs, &shape, Mode::Train).expect("forward");
        });
        let dw = best(repeat, || exec.backward(&dy).expect("backward"));
        // The input gradient alone: the same layer with frozen parameters.
        let mut frozen = mase_ir::ParamStore::new();
        for (name, e) in params.iter() {
            frozen.insert(name, e.tensor.clone(), false);
        }
        let mut exec = Executor::new(&g, &frozen, ExecOptions { threads, seed: 0 }).expect("executor");
        exec.set_keep_input_grad(true);
        exec.forward(&xs, &shape, Mode::Train).expect("forward");
        let dx = best(repeat, || exec.backward(&dy).expect("backward"));
        let flops = 2.0 * (batch * cout * cin * 9 * side * side) as f64;
        flops_total += flops;
        let cell = |s: f64| format!("{:>8.1} {:>6.1} {:>4.0}%", s * 1e3, flops / s / 1e9, 100.0 * flops / s / 1e9 / peak);
        println!("{:>16} {:>24} {:>24} {:>24}", format!("{cin}->{cout}@{side}"), cell(fwd), cell(dw), cell(dx));
        for (acc, v) in totals.iter_mut().zip([fwd, dw, dx]) {
            *acc += v;
        }
    }
    let cell = |s: f64| format!("{:>8.1} {:>6.1} {:>4.0}%", s * 1e3, flops_total / s / 1e9, 100.0 * flops_total / s / 1e9 / peak);
    println!("{:>16} {:>24} {:>24} {:>24}", "all six", cell(totals[0]), cell(totals[1]), cell(totals[2]));
}
