//! How close vgg7's convolutions come to this machine's fp32 GEMM peak.
//!
//! The peak is a large square product `C = A B` through the runtime's one GEMM entry point
//! (`mase_runtime::gemm`), on the same thread count. Each of vgg7's six 3x3 convolutions then runs
//! alone in the executor (`x -> conv -> output`) at the given batch: forward (training mode),
//! weight gradient (backward without the input gradient, as for vgg7's first layer) and input
//! gradient (backward of the same layer with frozen parameters). Every phase is counted as the
//! direct convolution's `2 N C_out C_in 9 H W` FLOPs, whatever the algorithm, so that rates
//! compare like with like; the table gives GFLOP/s and the fraction of the peak.
//!
//! Each layer runs with the direct path (`ConvAlgo::Exact`) and with the default
//! (`ConvAlgo::Fast`: Winograd where `winograd::pays`), or with `--algo winograd` with Winograd
//! wherever it applies (`ConvAlgo::Winograd`, to measure the shapes the default leaves direct),
//! back to back; `speedup` is direct time over the other's. `err/bound` is the largest difference between the two paths' outputs (forward) and
//! input gradients, as a fraction of the float32 error bound of a direct sum of the same length,
//! `gamma_n * sum |terms|` with `n = C_in * 9` (forward) or `C_out * 9` (input gradient).
//!
//! usage: cargo run --release -p mase-bench --example conv_layers -- [--batch N] [--threads T] [--repeat R]
//!        [--layers CIN:COUT:SIDE[:K:STRIDE],...] (KxK, stride STRIDE, padding K / 2; 3x3 and stride 1
//!        when omitted; vgg7's six layers by default)
//!        [--algo fast|winograd] (the algorithm compared with the direct path; fast by default)
//!        [--forward train|eval] (the timed forward passes' mode; eval keeps Winograd's
//!        transformed weights between batches; train by default)

use mase_bench::example::{arg, best, word};
use mase_ir::{ConvSpec, Graph, Op, ParamStore, Rng};
use mase_runtime::{gemm, init_params, ConvAlgo, ExecOptions, Executor, Mat, MatMut, Mode};

/// `(in_channels, out_channels, side)` of vgg7's 3x3 convolutions on 32x32 images.
const LAYERS: [(usize, usize, usize); 6] = [(3, 128, 32), (128, 128, 32), (128, 256, 16), (256, 256, 16), (256, 512, 8), (512, 512, 8)];

/// One layer of `--layers`: `(in_channels, out_channels, input side, kernel, stride)`, padded by
/// `kernel / 2`.
type Layer = (usize, usize, usize, usize, usize);

/// The layers of `--layers CIN:COUT:SIDE[:K:STRIDE],...` (3x3, stride 1 when omitted), vgg7's
/// by default.
fn layers() -> Vec<Layer> {
    let Some(list) = word("--layers") else {
        return LAYERS.iter().map(|&(cin, cout, side)| (cin, cout, side, 3, 1)).collect();
    };
    list.split(',')
        .map(|l| match l.split(':').map(str::parse).collect::<Result<Vec<usize>, _>>().as_deref() {
            Ok([cin, cout, side]) => (*cin, *cout, *side, 3, 1),
            Ok([cin, cout, side, k, stride]) => (*cin, *cout, *side, *k, *stride),
            _ => panic!("--layers: expected CIN:COUT:SIDE[:K:STRIDE], got {l}"),
        })
        .collect()
}

fn random(n: usize, rng: &mut Rng) -> Vec<f32> {
    (0..n).map(|_| rng.uniform() - 0.5).collect()
}

/// The seconds of each phase of one layer, and its output and input gradient.
struct Measured {
    secs: [f64; 3],
    y: Vec<f32>,
    dx: Vec<f32>,
}

/// One layer's forward, weight gradient and input gradient with `algo` on `threads` threads, each
/// the best of `repeat` runs, on the batch `xs` of `shape` and the output gradient `dy`.
fn measure(
    g: &Graph,
    params: &ParamStore,
    algo: ConvAlgo,
    (threads, repeat): (usize, usize),
    (xs, shape, dy): (&[f32], &[usize], &[f32]),
) -> Measured {
    let mut exec = Executor::new(g, params, ExecOptions { threads, seed: 0 }).expect("executor");
    exec.set_conv_algo(algo);
    exec.forward(xs, shape, Mode::Train).expect("forward");
    exec.backward(dy).expect("backward");
    let mode = forward_mode();
    exec.forward(xs, shape, mode).expect("forward");
    let fwd = best(repeat, || {
        exec.forward(xs, shape, mode).expect("forward");
    });
    let y = exec.forward(xs, shape, Mode::Train).expect("forward").to_vec();
    let dw = best(repeat, || exec.backward(dy).expect("backward"));
    // The input gradient alone: the same layer with frozen parameters.
    let mut exec = Executor::new(g, &frozen(params, |v| v), ExecOptions { threads, seed: 0 }).expect("executor");
    exec.set_conv_algo(algo);
    exec.set_keep_input_grad(true);
    exec.forward(xs, shape, Mode::Train).expect("forward");
    let dx = best(repeat, || exec.backward(dy).expect("backward"));
    let dxv = exec.input_grad().expect("input gradient").to_vec();
    Measured { secs: [fwd, dw, dx], y, dx: dxv }
}

/// The parameters, frozen, with `f` applied to every value.
fn frozen(params: &ParamStore, f: impl Fn(f32) -> f32) -> ParamStore {
    let mut out = ParamStore::new();
    for (name, e) in params.iter() {
        let mut t = e.tensor.clone();
        t.data.iter_mut().for_each(|v| *v = f(*v));
        out.insert(name, t, false);
    }
    out
}

/// The sums of absolute products of the direct path: its output on `|x|` with `|w|`, `|b|`, and
/// its input gradient from `|dy|`.
fn abs_sums(g: &Graph, params: &ParamStore, xs: &[f32], shape: &[usize], dy: &[f32]) -> (Vec<f32>, Vec<f32>) {
    let mut exec = Executor::new(g, &frozen(params, f32::abs), ExecOptions { threads: 1, seed: 0 }).expect("executor");
    exec.set_conv_algo(ConvAlgo::Exact);
    exec.set_keep_input_grad(true);
    let ax: Vec<f32> = xs.iter().map(|v| v.abs()).collect();
    let ady: Vec<f32> = dy.iter().map(|v| v.abs()).collect();
    let y = exec.forward(&ax, shape, Mode::Train).expect("forward").to_vec();
    exec.backward(&ady).expect("backward");
    (y, exec.input_grad().expect("input gradient").to_vec())
}

/// The largest `|a - b| / (gamma_n * s)` over the elements.
fn err_over_bound(a: &[f32], b: &[f32], s: &[f32], terms: usize) -> f64 {
    let nu = terms as f64 * f64::from(f32::EPSILON) / 2.0;
    let gamma = nu / (1.0 - nu);
    a.iter().zip(b).zip(s).map(|((&a, &b), &s)| (a as f64 - b as f64).abs() / (gamma * s as f64).max(f64::MIN_POSITIVE)).fold(0.0, f64::max)
}

/// The mode of the timed forward passes, `--forward train|eval` (`train` by default): an
/// evaluation forward keeps Winograd's transformed weights between batches, a training one
/// transforms them again (the weights change every step).
fn forward_mode() -> Mode {
    match word("--forward").as_deref() {
        None | Some("train") => Mode::Train,
        Some("eval") => Mode::Eval,
        Some(other) => panic!("--forward: expected train or eval, got {other}"),
    }
}

/// The algorithm of `--algo` (`fast` by default).
fn algo() -> ConvAlgo {
    match word("--algo").as_deref() {
        None | Some("fast") => ConvAlgo::Fast,
        Some("winograd") => ConvAlgo::Winograd,
        Some(other) => panic!("--algo: expected fast or winograd, got {other}"),
    }
}

fn main() {
    let (batch, threads, repeat) = (arg("--batch", 128), arg("--threads", 1), arg("--repeat", 3));
    let other = algo();
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
    println!(
        "{:>14} {:>5} {:>22} {:>22} {:>22} {:>16}",
        "layer", "algo", "forward ms GF/s %", "dW ms GF/s %", "dX ms GF/s %", "err/bound y dX"
    );
    let mut totals = [[0.0f64; 3]; 2];
    let mut flops_total = 0.0;
    let cell = |s: f64, flops: f64| format!("{:>7.1} {:>6.1} {:>4.0}%", s * 1e3, flops / s / 1e9, 100.0 * flops / s / 1e9 / peak);
    for (cin, cout, side, k, stride) in layers() {
        let mut g = Graph::new();
        let x = g.placeholder("x");
        let y = g.call_module("conv", Op::Conv2d(ConvSpec::new(2, cin, cout, k, stride, k / 2)), &[x]);
        g.output(y);
        let params = init_params(&g, &mut rng);
        let shape = [batch, cin, side, side];
        let xs = random(batch * cin * side * side, &mut rng);
        let out = (side + 2 * (k / 2) - k) / stride + 1;
        let dy = random(batch * cout * out * out, &mut rng);
        let exact = measure(&g, &params, ConvAlgo::Exact, (threads, repeat), (&xs, &shape, &dy));
        let fast = measure(&g, &params, other, (threads, repeat), (&xs, &shape, &dy));
        let (sy, sdx) = abs_sums(&g, &params, &xs, &shape, &dy);
        let flops = 2.0 * (batch * cout * cin * k * k * out * out) as f64;
        flops_total += flops;
        let name = if (k, stride) == (3, 1) { format!("{cin}->{cout}@{side}") } else { format!("{cin}->{cout}@{side}k{k}s{stride}") };
        for (i, (algo, m)) in [("exact", &exact), (other.name(), &fast)].into_iter().enumerate() {
            let err = if i == 1 {
                format!(
                    "{:>7.3} {:>7.3}",
                    err_over_bound(&fast.y, &exact.y, &sy, cin * k * k + 1),
                    err_over_bound(&fast.dx, &exact.dx, &sdx, cout * k * k)
                )
            } else {
                String::new()
            };
            let c: Vec<String> = m.secs.iter().map(|&s| cell(s, flops)).collect();
            println!("{:>14} {:>5} {:>22} {:>22} {:>22} {:>16}", name, algo, c[0], c[1], c[2], err);
            for (acc, v) in totals[i].iter_mut().zip(m.secs) {
                *acc += v;
            }
        }
        let sp: Vec<String> = (0..3).map(|k| format!("{:.2}x", exact.secs[k] / fast.secs[k])).collect();
        println!("{:>14} {:>5} {:>22} {:>22} {:>22}", "", "speed", sp[0], sp[1], sp[2]);
    }
    for (i, algo) in ["exact", other.name()].into_iter().enumerate() {
        let c: Vec<String> = totals[i].iter().map(|&s| cell(s, flops_total)).collect();
        println!("{:>14} {:>5} {:>22} {:>22} {:>22}", "all", algo, c[0], c[1], c[2]);
    }
}
