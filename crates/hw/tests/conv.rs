//! Convolutional networks as streaming designs: `conv2d`, `max_pool2d`, `batch_norm2d` and
//! `flatten` lowered to line buffers, sliding windows and matrix-vector units, checked code for
//! code against the integer executor on the MNIST test images shipped in `data/mnist`, in Rust
//! (`Design::eval`) and in Verilator.

mod common;

use common::have;
use mase_hw::simulate::{self, golden, mismatches};
use mase_hw::{emit, lower, Design, LowerOptions};
use mase_ir::{ConvSpec, Graph, Op, ParamStore, PoolSpec, Rng};
use mase_passes::{run_pass, InputSource, PassContext};
use serde_json::json;
use std::path::PathBuf;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The first `n` images of the MNIST test split shipped in `data/mnist`, as `[n, 1, 28, 28]`.
fn mnist(n: usize) -> (Vec<f32>, Vec<usize>, Vec<u32>) {
    let s =
        mase_io::load_dataset("mnist", &mase_io::DataOptions { data_dir: Some(repo_root().join("data")), ..Default::default() }).unwrap();
    let n = n.min(s.test.len());
    (s.test.x[..n * 784].to_vec(), vec![n, 1, 28, 28], s.test.y[..n].to_vec())
}

/// Sets every batch norm's statistics and affine parameters to seeded values far from the
/// initial ones (untrained batch norms would be identities).
fn perturb_batch_norms(g: &Graph, p: &mut ParamStore) {
    let mut rng = Rng::new(11);
    for n in g.nodes() {
        if let Op::BatchNorm2d(s) = &n.op {
            let c = s.num_features;
            let mut draw = |f: &dyn Fn(f64) -> f64| (0..c).map(|_| f(rng.normal()) as f32).collect::<Vec<_>>();
            let vals = [draw(&|z| 1.0 + 0.3 * z), draw(&|z| 0.2 * z), draw(&|z| 0.5 * z), draw(&|z| (0.5 * z).exp())];
            for (name, v) in ["weight", "bias", "running_mean", "running_var"].iter().zip(vals) {
                p.set(&format!("{}.{name}", n.target), mase_ir::Tensor::new(vec![c], v).unwrap()).unwrap();
            }
        }
    }
}

/// A graph on MNIST images with seeded weights, batch norms folded where `fold_batch_norm` can,
/// then linears, convolutions and the batch norms left quantized to `integer` formats of `bits`
/// bits with `frac` fraction bits.
fn quantized(mut g: Graph, bits: u32, frac: i32) -> (Graph, ParamStore) {
    let mut params = mase_runtime::init_params(&g, &mut Rng::new(7));
    perturb_batch_norms(&g, &mut params);
    let mut cx = PassContext::new(params);
    cx.inputs = InputSource::Random { sample_shape: vec![1, 28, 28] };
    run_pass("add_common_metadata", &mut g, &mut cx, &json!(null)).unwrap();
    run_pass("fold_batch_norm", &mut g, &mut cx, &json!(null)).unwrap();
    let layer = json!({"config": {"name": "integer", "data_in_width": bits, "data_in_frac_width": frac, "weight_width": bits,
        "weight_frac_width": frac, "bias_width": bits, "bias_frac_width": frac}});
    let bn = json!({"config": {"name": "integer", "data_in_width": bits, "data_in_frac_width": frac}});
    let q = json!({"by": "type", "default": {"config": {"name": "NA"}}, "linear": layer, "conv2d": layer, "batch_norm2d": bn});
    run_pass("quantize", &mut g, &mut cx, &q).unwrap();
    (g, cx.params)
}

fn mnist_cnn(bits: u32, frac: i32) -> (Graph, ParamStore) {
    let ctx = mase_zoo::ModelContext { sample_shape: vec![1, 28, 28], num_classes: 10 };
    quantized(mase_zoo::build_model("mnist-cnn", &ctx).unwrap(), bits, frac)
}

fn conv(i: usize, o: usize, k: usize, stride: usize, padding: usize) -> Op {
    Op::Conv2d(ConvSpec {
        in_channels: i,
        out_channels: o,
        kernel: vec![k, k],
        stride: vec![stride, stride],
        padding: vec![padding, padding],
        dilation: vec![1, 1],
        groups: 1,
        bias: true,
    })
}

fn pool(k: usize, stride: usize, padding: usize) -> Op {
    Op::MaxPool2d(PoolSpec {
        kernel: vec![k, k],
        stride: vec![stride, stride],
        padding: vec![padding, padding],
        ceil_mode: false,
        count_include_pad: true,
    })
}

fn bn2d(c: usize) -> Op {
    Op::BatchNorm2d(mase_ir::NormSpec { num_features: c, eps: 1e-5, momentum: 0.1, affine: true })
}

/// A chain of `ops` on MNIST images named `seq_blocks_<i>`.
fn chain(ops: Vec<Op>) -> Graph {
    let mut g = Graph::new();
    let mut v = g.placeholder("x");
    for (i, op) in ops.into_iter().enumerate() {
        v = g.call_module(&format!("seq_blocks.{i}"), op, &[v]);
    }
    g.output(v);
    g
}

/// Lowering options for MNIST images with the reuse factors of named layers.
fn options(reuse: &[(&str, usize)]) -> LowerOptions {
    let reuse = reuse.iter().map(|&(n, r)| (n.to_string(), r)).collect();
    LowerOptions { reuse, input_shape: Some(vec![1, 28, 28]), ..Default::default() }
}

fn codes(d: &Design, x: &[f32]) -> Vec<Vec<i64>> {
    x.chunks(d.input_len()).map(|r| d.input_codes(r)).collect()
}

/// The folding of mnist-cnn: the 3x3x8 windows of the second convolution 8 inputs per cycle, the
/// last linear's 784 inputs 16 per cycle.
const MNIST_CNN_FOLDED: &[(&str, usize)] = &[("seq_blocks_3", 9), ("seq_blocks_7", 49)];

/// One line per network: what it tests, its nodes after the input, the reuse factors of a
/// folded design.
type Network = (&'static str, Graph, &'static [(&'static str, usize)]);

fn networks() -> Vec<Network> {
    vec![
        // A 5x5 kernel of stride 2 without padding, a pool of stride 1, a batch norm folded
        // into the first convolution and one in affine form after the pool.
        (
            "stride 2, kernel 5, affine batch norm",
            chain(vec![
                conv(1, 4, 5, 2, 0),
                bn2d(4),
                Op::Relu,
                pool(3, 1, 1),
                bn2d(4),
                conv(4, 3, 3, 1, 1),
                Op::Relu,
                pool(2, 2, 0),
                Op::Flatten { start_dim: 1, end_dim: -1 },
                Op::Linear { in_features: 108, out_features: 10, bias: true },
            ]),
            &[("seq_blocks_0", 5), ("seq_blocks_5", 4)],
        ),
        // A batch norm first (affine, its padding sees the shift) a 1x1 kernel, and a 4x4 kernel of stride 3.
        (
            "batch norm first, kernel 1 and padding 2",
            chain(vec![
                bn2d(1),
                conv(1, 2, 1, 1, 0),
                Op::Relu,
                conv(2, 3, 4, 3, 2),
                Op::Flatten { start_dim: 1, end_dim: -1 },
                Op::Linear { in_features: 300, out_features: 10, bias: true },
                Op::Relu,
                Op::Linear { in_features: 10, out_features: 10, bias: true },
            ]),
            &[("seq_blocks_3", 2), ("seq_blocks_5", 10)],
        ),
    ]
}

#[test]
fn mnist_cnn_designs_compute_what_the_integer_executor_computes() {
    let (x, shape, _) = mnist(64);
    let mut nets = vec![("mnist-cnn", mnist_cnn(8, 4), MNIST_CNN_FOLDED)];
    nets.extend(networks().into_iter().map(|(what, g, folded)| (what, quantized(g, 8, 4), folded)));
    for (what, (g, p), folded) in nets {
        let run = mase_runtime::run_integer(&g, &p, &x, &shape).unwrap();
        let float: Vec<&str> = run.report.nodes.iter().filter(|n| !n.is_integer()).map(|n| n.node.as_str()).collect();
        assert!(float.is_empty(), "{what}: nodes in float {float:?}");
        for reuse in [&[], folded] {
            let d = lower(&g, &p, what, &options(reuse)).unwrap();
            let want = golden(&g, &p, &d, &x, &shape).unwrap();
            let got: Vec<Vec<i64>> = codes(&d, &x).iter().map(|c| d.eval(c)).collect();
            assert_eq!(mismatches(&want, &got).len(), 0, "{what}, reuse {reuse:?}");
            assert!(want.iter().any(|r| r != &want[0]), "{what}: constant outputs");
        }
    }
}

/// One line per design of mnist-cnn 8/4 folded: the clock it is pipelined for (none: one
/// register stage per layer).
const CLOCKS: &[Option<f64>] = &[None, Some(100.0), Some(200.0)];

#[test]
fn mnist_cnn_simulates_bit_exactly_in_verilator_at_two_clocks_and_under_back_pressure() {
    if !have("verilator") {
        return;
    }
    let (x, shape, labels) = mnist(12);
    let (g, p) = mnist_cnn(8, 4);
    let plain = lower(&g, &p, "mnist-cnn", &options(MNIST_CNN_FOLDED)).unwrap();
    let want = golden(&g, &p, &plain, &x, &shape).unwrap();
    let inputs = codes(&plain, &x);
    for &clock in CLOCKS {
        let d = match clock {
            Some(f) => plain.clone().pipelined(f).unwrap(),
            None => plain.clone(),
        };
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("hw_conv_mnist_cnn_{}", clock.unwrap_or(0.0)));
        let _ = std::fs::remove_dir_all(&dir);
        let m = emit(&d, &dir).unwrap();
        assert_eq!(
            (m["latency_cycles"].as_u64(), m["initiation_interval"].as_u64()),
            (Some(d.latency() as u64), Some(d.initiation_interval() as u64))
        );
        for stall in [0, 12345, 777] {
            let r = simulate::run(&dir, &d, &inputs, stall).unwrap();
            assert_eq!(mismatches(&want, &r.outputs), vec![], "{clock:?} MHz, stall seed {stall}");
            assert_eq!(simulate::accuracy(&r.outputs, &labels), simulate::accuracy(&want, &labels));
            if stall == 0 {
                // The cycle model's schedule is the simulation's, cycle for cycle.
                let t = mase_hw::conv::timing::timing(&d, x.len() / 784);
                assert_eq!((r.latency, r.initiation_interval, r.cycles), (t.latency, t.initiation_interval, t.cycles), "{clock:?} MHz");
                assert_eq!((r.latency, r.initiation_interval), (d.latency() as u64, d.initiation_interval() as f64), "{clock:?} MHz");
            }
        }
    }
}

/// `conv` with `groups`.
fn grouped(i: usize, o: usize, groups: usize) -> Op {
    let Op::Conv2d(mut spec) = conv(i, o, 3, 1, 1) else { unreachable!() };
    spec.groups = groups;
    Op::Conv2d(spec)
}

#[test]
fn convolutional_graphs_that_cannot_be_built_are_one_line_errors() {
    let flat = || Op::Flatten { start_dim: 1, end_dim: -1 };
    let linear = |i: usize| Op::Linear { in_features: i, out_features: 10, bias: true };
    // One line per case: the graph, a change to it after quantization, the input shape given to
    // the lowering, and the error.
    type Change = fn(&mut Graph);
    let unquantize: Change = |g| g.node_mut(g.require("seq_blocks_0").unwrap()).quant = None;
    let nothing: Change = |_| {};
    let cases: Vec<(Graph, Change, Option<Vec<usize>>, &str)> = vec![
        // A float convolution is named, the relu and pool after it are not.
        (
            chain(vec![conv(1, 2, 3, 1, 1), Op::Relu, pool(2, 2, 0), flat(), linear(392)]),
            unquantize,
            Some(vec![1, 28, 28]),
            "the graph is not integer end to end: seq_blocks_0 (conv2d): not quantized",
        ),
        (
            chain(vec![conv(1, 2, 3, 1, 1), grouped(2, 2, 2), flat(), linear(1568)]),
            nothing,
            Some(vec![1, 28, 28]),
            "the graph is not integer end to end: seq_blocks_1 (conv2d): groups 2: the streaming hardware has convolutions of groups 1",
        ),
        (
            chain(vec![conv(1, 2, 3, 1, 1), flat(), linear(1568)]),
            nothing,
            None,
            "graph: node `seq_blocks_0` needs the input image's shape [C, H, W], which the checkpoint does not record (its `dataset_info`)",
        ),
        (
            chain(vec![conv(1, 2, 3, 1, 1), flat(), linear(1568)]),
            nothing,
            Some(vec![784]),
            "graph: node `seq_blocks_0` needs an image input [C, H, W], the samples have shape [784]",
        ),
        (
            chain(vec![conv(1, 2, 3, 1, 1), pool(2, 2, 0)]),
            nothing,
            Some(vec![1, 28, 28]),
            "graph: the last convolution or pool is not flattened into a linear layer; only a linear layer can end the design",
        ),
    ];
    for (g, change, shape, want) in cases {
        let (mut g, p) = quantized(g, 8, 4);
        change(&mut g);
        let opts = LowerOptions { input_shape: shape, ..Default::default() };
        let e = lower(&g, &p, "m", &opts).unwrap_err().to_string();
        assert_eq!(e, want);
    }
}
