//! Times training steps of the executor on the shapes of `shared/reference/torch_bench.py`, for
//! tuning the kernels. The cross-framework benchmark with its PyTorch reference is `crates/bench`.
//!
//! usage: cargo run --release -p mase-runtime --example step_speed -- [jsc-toy|tagger|vgg7] [--threads N] [--batch N]

use mase_ir::{ConvSpec, Graph, NormSpec, Op, PoolSpec, Rng};
use mase_runtime::{init_params, ExecOptions, Executor, Mode, Optimizer, OptimizerKind};
use std::time::Instant;

fn model(name: &str) -> Option<(Graph, Vec<usize>, u32)> {
    let mut g = Graph::new();
    let mut v = g.placeholder("x");
    let mut i = 0;
    let mut push = |g: &mut Graph, v: &mut mase_ir::NodeId, op: Op| {
        *v = g.call_module(&format!("seq_blocks.{i}"), op, &[*v]);
        i += 1;
    };
    let lin = |a, b| Op::Linear { in_features: a, out_features: b, bias: true };
    let (shape, classes) = match name {
        "jsc-toy" => {
            for op in [
                Op::BatchNorm1d(NormSpec::new(16)),
                Op::Relu,
                lin(16, 8),
                Op::BatchNorm1d(NormSpec::new(8)),
                Op::Relu,
                lin(8, 8),
                Op::BatchNorm1d(NormSpec::new(8)),
                Op::Relu,
                lin(8, 5),
                Op::BatchNorm1d(NormSpec::new(5)),
                Op::Relu,
            ] {
                push(&mut g, &mut v, op);
            }
            (vec![16], 5)
        }
        "tagger" => {
            for op in [lin(16, 64), Op::Relu, lin(64, 32), Op::Relu, lin(32, 32), Op::Relu, lin(32, 5)] {
                push(&mut g, &mut v, op);
            }
            (vec![16], 5)
        }
        "vgg7" => {
            for (ci, co, pool) in
                [(3, 128, false), (128, 128, true), (128, 256, false), (256, 256, true), (256, 512, false), (512, 512, true)]
            {
                push(&mut g, &mut v, Op::Conv2d(ConvSpec::new(2, ci, co, 3, 1, 1)));
                push(&mut g, &mut v, Op::BatchNorm2d(NormSpec::new(co)));
                push(&mut g, &mut v, Op::Relu);
                if pool {
                    push(&mut g, &mut v, Op::MaxPool2d(PoolSpec::new(2, 2)));
                }
            }
            push(&mut g, &mut v, Op::Flatten { start_dim: 1, end_dim: -1 });
            for op in [lin(8192, 1024), Op::Relu, lin(1024, 1024), Op::Relu, lin(1024, 10)] {
                push(&mut g, &mut v, op);
            }
            (vec![3, 32, 32], 10)
        }
        _ => return None,
    };
    g.output(v);
    Some((g, shape, classes))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let get = |k: &str| args.iter().position(|a| a == k).and_then(|i| args.get(i + 1)).and_then(|v| v.parse::<usize>().ok());
    let name = args.get(1).map(String::as_str).unwrap_or("jsc-toy");
    let Some((g, feat, classes)) = model(name) else {
        eprintln!("unknown model {name}; use jsc-toy, tagger or vgg7");
        std::process::exit(2);
    };
    let threads = get("--threads").unwrap_or(1);
    let batch = get("--batch").unwrap_or(if name == "vgg7" { 32 } else { 256 });
    let steps = get("--steps").unwrap_or(if name == "vgg7" { 3 } else { 2000 });
    let mut rng = Rng::new(1);
    let params = init_params(&g, &mut rng);
    let per: usize = feat.iter().product();
    let x: Vec<f32> = (0..batch * per).map(|_| rng.normal() as f32).collect();
    let y: Vec<u32> = (0..batch).map(|_| rng.below(u64::from(classes)) as u32).collect();
    let mut shape = vec![batch];
    shape.extend(&feat);
    let mut exec = Executor::new(&g, &params, ExecOptions { threads, seed: 0 }).expect("executor");
    let mut opt = Optimizer::new(OptimizerKind::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 }, 1e-3);
    exec.train_step(&x, &shape, &y, &mut opt).expect("warm-up");
    let mut t = Vec::new();
    for _ in 0..steps {
        let s = Instant::now();
        exec.train_step(&x, &shape, &y, &mut opt).expect("step");
        t.push(s.elapsed().as_secs_f64() * 1e6);
    }
    let mut e = Vec::new();
    for _ in 0..steps {
        let s = Instant::now();
        std::hint::black_box(exec.forward(&x, &shape, Mode::Eval).expect("eval"));
        e.push(s.elapsed().as_secs_f64() * 1e6);
    }
    let (ts, es) = (median(t), median(e));
    println!(
        "{{\"model\":\"{name}\",\"batch\":{batch},\"threads\":{threads},\"train_step_us\":{ts:.1},\"eval_batch_us\":{es:.1},\"train_samples_per_s\":{:.0}}}",
        batch as f64 / ts * 1e6
    );
}
