//! The integer executor against the fake-quant float path.
//!
//! Where the two agree exactly: the float path computes each quantized layer as `f32` sums of
//! products of dyadic numbers (codes times powers of two). Those sums are exact while every
//! partial sum, counted in units of the result's last fraction bit, stays below 2^24 (the `f32`
//! mantissa). The report gives each integer node's largest accumulator magnitude in bits; where
//! all are at most 24, every output must be the same bits. Where they are not, the float path
//! rounds, and the integer result must be the exactly rounded value of the exact sum, within the
//! float path's rounding error bound.

mod common;

use common::with_quant;
use mase_io::{load_dataset, DataOptions};
use mase_ir::{Graph, Node, NodeQuant, Op, ParamStore, QuantFormat, Rng, Tensor};
use mase_runtime::{init_params, run_integer, ExecOptions, Executor, Mode, Optimizer, OptimizerKind};
use mase_zoo::{build_model, ModelContext};
use std::path::PathBuf;

fn int(width: u32, frac_width: i32, signed: bool) -> QuantFormat {
    QuantFormat::Integer { width, frac_width, signed }
}

fn opts() -> ExecOptions {
    ExecOptions { threads: 1, seed: 0 }
}

/// Integer 8/4 on the data input, weight and bias of linear and conv layers, and unsigned 8/4
/// on ReLU inputs (MASE's `relu_integer` is unsigned).
fn quantize_8_4(node: &Node) -> Option<NodeQuant> {
    let s = int(8, 4, true);
    match node.op {
        Op::Linear { .. } | Op::Conv2d(_) => {
            Some(NodeQuant { data_in: vec![Some(s.clone())], weight: Some(s.clone()), bias: Some(s), ..Default::default() })
        }
        Op::Relu => Some(NodeQuant { data_in: vec![Some(int(8, 4, false))], ..Default::default() }),
        _ => None,
    }
}

/// The shipped MNIST data (8,000 / 1,000 / 1,000 images).
fn mnist() -> mase_io::Splits {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../data");
    load_dataset("mnist", &DataOptions { data_dir: Some(dir), ..Default::default() }).expect("the repository ships MNIST")
}

/// Trains `graph` in float for one epoch on the first `images` training images (so that weights
/// and activations have realistic sizes) and returns its parameters.
fn train_one_epoch(graph: &Graph, data: &mase_io::Dataset, images: usize) -> ParamStore {
    let mut exec = Executor::new(graph, &init_params(graph, &mut Rng::new(0)), opts()).unwrap();
    let mut opt = Optimizer::new(OptimizerKind::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 }, 2e-3);
    let (b, f) = (250, data.sample_len());
    let mut shape = vec![b];
    shape.extend(&data.sample_shape);
    for i in 0..images.min(data.len()) / b {
        exec.train_step(&data.x[i * b * f..(i + 1) * b * f], &shape, &data.y[i * b..(i + 1) * b], &mut opt).unwrap();
    }
    exec.params()
}

/// Trains on `train` images, then runs the validation and test images (`sets` of them, 1,000
/// each) through the fake-quant float path and the integer executor, in batches of 500, and
/// checks every output bit for bit; returns the integer nodes and the accuracy.
fn compare_on_mnist(model: &str, batch_shape: &[usize], train: usize, sets: usize) -> (Vec<String>, f64) {
    let data = mnist();
    let ctx = ModelContext::new(data.info.sample_shape.clone(), 10);
    let float_graph = build_model(model, &ctx).unwrap();
    let params = train_one_epoch(&float_graph, &data.train, train);
    let graph = with_quant(float_graph, quantize_8_4);
    let images = [&data.val, &data.test];
    let mut fake = Executor::new(&graph, &params, opts()).unwrap();
    let mut integer = Executor::new(&graph, &params, opts()).unwrap();
    let (mut correct, mut seen, mut nodes) = (0usize, 0usize, Vec::new());
    for set in images.into_iter().take(sets) {
        let f = set.sample_len();
        for start in (0..set.len()).step_by(500) {
            let n = 500.min(set.len() - start);
            let x = &set.x[start * f..(start + n) * f];
            let mut shape = vec![n];
            shape.extend(batch_shape);
            let want = fake.forward(x, &shape, Mode::Eval).unwrap().to_vec();
            let (got, report) = integer.forward_integer(x, &shape).unwrap();
            // Exactness holds: no accumulator needed more than 24 bits ...
            assert!(report.max_acc_bits() <= 24, "{report:#?}");
            // ... so every output is the same bits.
            let diff = got.iter().zip(&want).filter(|(a, b)| a.to_bits() != b.to_bits()).count();
            assert_eq!(diff, 0, "{model}: {diff} of {} outputs differ", want.len());
            for (row, &label) in got.chunks(10).zip(&set.y[start..start + n]) {
                let arg = row.iter().enumerate().fold(0, |b, (i, v)| if *v > row[b] { i } else { b });
                correct += (arg == label as usize) as usize;
            }
            seen += n;
            nodes = report.integer_nodes().iter().map(|s| s.to_string()).collect();
            for n in &report.nodes {
                if n.is_integer() && matches!(n.op.as_str(), "linear" | "conv2d") {
                    assert_eq!(n.input_types, ["i8", "i8"], "{n:?}");
                    assert_eq!(n.accumulator, Some("i32"), "{n:?}");
                    // Inputs and weights at 4 fraction bits, bias added at their product's 8.
                    assert_eq!(n.out_frac, Some(8), "{n:?}");
                }
                if n.op.starts_with("batch_norm") {
                    assert_eq!(n.float_reason.as_deref(), Some("not quantized"), "{n:?}");
                }
                // A max pool after an integer relu compares its codes (4 fraction bits).
                if n.op == "max_pool2d" {
                    assert_eq!((n.is_integer(), n.out_frac), (true, Some(4)), "{n:?}");
                }
            }
        }
    }
    assert_eq!(seen, 1000 * sets);
    (nodes, correct as f64 / seen as f64)
}

#[test]
fn quantized_tfc_agrees_bit_for_bit_on_2000_mnist_images() {
    let (nodes, acc) = compare_on_mnist("tfc", &[1, 28, 28], 8000, 2);
    // Four linear layers and three ReLUs ran in integer arithmetic; batch norm in float.
    assert_eq!(nodes, ["seq_blocks_1", "seq_blocks_3", "seq_blocks_4", "seq_blocks_6", "seq_blocks_7", "seq_blocks_9", "seq_blocks_10"]);
    // One epoch on 8,000 images, then 8-bit fake quantization: far above chance.
    assert!(acc > 0.8, "accuracy {acc}");
}

#[test]
fn quantized_cnn_agrees_bit_for_bit_on_1000_mnist_images() {
    // Convolutions in integer arithmetic; a smaller run, as direct convolution is slow.
    let (nodes, acc) = compare_on_mnist("mnist-cnn", &[1, 28, 28], 4000, 1);
    assert_eq!(nodes, ["seq_blocks_0", "seq_blocks_1", "seq_blocks_2", "seq_blocks_3", "seq_blocks_4", "seq_blocks_5", "seq_blocks_7"]);
    // Sixteen steps of training: well above the 10 % of chance.
    assert!(acc > 0.4, "accuracy {acc}");
}

#[test]
fn wide_accumulators_are_exact_where_the_float_path_rounds() {
    // 16-bit codes on 512 inputs: sums reach ~2^36 units, far past f32's 24 bits.
    let (k, o, n) = (512, 4, 8);
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let fc = g.call_module("fc", Op::Linear { in_features: k, out_features: o, bias: true }, &[x]);
    g.output(fc);
    let (fx, fw) = (int(16, 10, true), int(16, 12, true));
    let g = with_quant(g, |n| {
        (n.name == "fc").then(|| NodeQuant {
            data_in: vec![Some(fx.clone())],
            weight: Some(fw.clone()),
            bias: Some(fx.clone()),
            ..Default::default()
        })
    });
    let mut rng = Rng::new(17);
    let mut params = ParamStore::new();
    params.insert("fc.weight", Tensor::new(vec![o, k], (0..o * k).map(|_| rng.normal() as f32 * 2.0).collect()).unwrap(), true);
    params.insert("fc.bias", Tensor::new(vec![o], vec![0.3, -1.7, 2.2, 0.0]).unwrap(), true);
    let xs: Vec<f32> = (0..n * k).map(|_| rng.normal() as f32 * 8.0).collect();
    let run = run_integer(&g, &params, &xs, &[n, k]).unwrap();
    assert_eq!(run.shape, [n, o]);
    let node = &run.report.nodes[0];
    assert_eq!((node.input_types.as_slice(), node.accumulator), (["i16", "i16"].as_slice(), Some("i64")));
    assert!(node.acc_bits > 30, "{node:?}");
    let want = Executor::new(&g, &params, opts()).unwrap().forward(&xs, &[n, k], Mode::Eval).unwrap().to_vec();
    // The exact result: products of codes are exact in f64, and so are sums below 2^53.
    let q = |f: &QuantFormat, v: &[f32]| {
        let mut out = vec![0.0; v.len()];
        mase_quant::quantize(f, v, &[v.len()], &mut out, &mut Rng::new(0)).unwrap();
        out
    };
    let (xq, wq, bq) = (q(&fx, &xs), q(&fw, &params.get("fc.weight").unwrap().data), q(&fx, &params.get("fc.bias").unwrap().data));
    let mut rounded = 0;
    for r in 0..n {
        for c in 0..o {
            let terms: Vec<f64> = (0..k).map(|i| xq[r * k + i] as f64 * wq[c * k + i] as f64).collect();
            let exact = terms.iter().sum::<f64>() + bq[c] as f64;
            let got = run.output[r * o + c];
            assert_eq!(got, exact as f32, "the integer path is the exact sum, rounded once");
            // The float path's error is within the classic bound k * 2^-24 * sum |terms|.
            let bound = (k + 1) as f64 * 2f64.powi(-24) * (terms.iter().map(|t| t.abs()).sum::<f64>() + bq[c].abs() as f64);
            assert!(((want[r * o + c] as f64) - exact).abs() <= bound, "{} vs {exact}", want[r * o + c]);
            rounded += (want[r * o + c] != got) as usize;
        }
    }
    assert!(rounded > 0, "with 36-bit sums some float results must have been rounded");
}

#[test]
fn requantizing_shifts_and_elementwise_ops_agree_with_the_float_path() {
    // fc (data_out 12/6) -> add(fc, x) -> mul(add, add) -> relu: every node integer, results
    // passed on as codes and rescaled by shifts.
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let fc = g.call_module("fc", Op::Linear { in_features: 4, out_features: 4, bias: true }, &[x]);
    let add = g.call_function("operator.add", Op::Add, &[fc, x]);
    let mul = g.call_function("operator.mul", Op::Mul, &[add, add]);
    let relu = g.call_function("torch.nn.functional.relu", Op::Relu, &[mul]);
    g.output(relu);
    let g = with_quant(g, |n| match n.name.as_str() {
        "fc" => Some(NodeQuant {
            data_in: vec![Some(int(8, 4, true))],
            weight: Some(int(8, 5, true)),
            bias: Some(int(8, 7, true)),
            data_out: Some(int(12, 6, true)),
            ..Default::default()
        }),
        "add" => Some(NodeQuant { data_in: vec![Some(int(8, 4, true)), Some(int(8, 2, true))], ..Default::default() }),
        "mul" => Some(NodeQuant { data_in: vec![Some(int(8, 3, true)), Some(int(6, 2, true))], ..Default::default() }),
        "relu" => Some(NodeQuant { data_in: vec![Some(int(10, 5, false))], ..Default::default() }),
        _ => None,
    });
    let mut rng = Rng::new(23);
    let params = init_params(&g, &mut rng);
    let xs: Vec<f32> = (0..64 * 4).map(|_| rng.normal() as f32 * 1.5).collect();
    let run = run_integer(&g, &params, &xs, &[64, 4]).unwrap();
    assert_eq!(run.report.integer_nodes(), ["fc", "add", "mul", "relu"]);
    // The bias has 7 fraction bits, more than x (4) + w (5) = 9? No: 9 > 7, so the bias is
    // shifted up to 9; data_out then rescales to 6. add aligns 4 and 2 to 4; mul gives 3 + 2.
    let fracs: Vec<Option<i32>> = run.report.nodes.iter().map(|n| n.out_frac).collect();
    assert_eq!(fracs, [Some(6), Some(4), Some(5), Some(5)]);
    let want = Executor::new(&g, &params, opts()).unwrap().forward(&xs, &[64, 4], Mode::Eval).unwrap().to_vec();
    assert_eq!(run.output, want);
}

#[test]
fn nodes_without_integer_formats_run_in_float_and_say_why() {
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let a = g.call_module("a", Op::Linear { in_features: 3, out_features: 3, bias: true }, &[x]);
    let b = g.call_module("b", Op::Linear { in_features: 3, out_features: 2, bias: true }, &[a]);
    g.output(b);
    let mini = QuantFormat::MinifloatIeee { width: 8, exponent_width: 4, exponent_bias: None };
    let g = with_quant(g, |n| match n.name.as_str() {
        "a" => Some(NodeQuant {
            data_in: vec![Some(int(8, 4, true))],
            weight: Some(mini.clone()),
            bias: Some(int(8, 4, true)),
            ..Default::default()
        }),
        "b" => Some(NodeQuant { data_in: vec![Some(int(8, 4, true))], weight: Some(int(8, 4, true)), ..Default::default() }),
        _ => None,
    });
    let params = init_params(&g, &mut Rng::new(1));
    let xs = [0.5f32, -1.0, 2.0, 0.25, 0.125, -0.5];
    let run = run_integer(&g, &params, &xs, &[2, 3]).unwrap();
    let reasons: Vec<Option<&str>> = run.report.nodes.iter().map(|n| n.float_reason.as_deref()).collect();
    assert_eq!(reasons, [Some("the weight is not an integer format"), Some("the bias is not an integer format")]);
    let want = Executor::new(&g, &params, opts()).unwrap().forward(&xs, &[2, 3], Mode::Eval).unwrap().to_vec();
    assert_eq!(run.output, want);
}

#[test]
fn matmul_runs_in_integer_unless_it_broadcasts() {
    let build = |x_rank3: bool| {
        let mut g = Graph::new();
        let x = g.placeholder("x");
        let w = g.get_attr("w");
        let m = g.call_function("torch.matmul", Op::MatMul, &[x, w]);
        g.output(m);
        let g = with_quant(g, |n| {
            (n.name == "matmul").then(|| NodeQuant {
                data_in: vec![Some(int(8, 4, true))],
                weight: Some(int(8, 3, true)),
                ..Default::default()
            })
        });
        (g, if x_rank3 { vec![2, 2, 3] } else { vec![4, 3] })
    };
    let mut params = ParamStore::new();
    params.insert("w", Tensor::new(vec![3, 2], vec![0.3, -0.71, 1.26, 0.04, 0.5, -2.2]).unwrap(), false);
    let xs: Vec<f32> = (0..12).map(|i| (i as f32 * 0.37).sin() * 3.0).collect();
    for (rank3, integer) in [(false, true), (true, false)] {
        let (g, shape) = build(rank3);
        let run = run_integer(&g, &params, &xs, &shape).unwrap();
        let node = run.report.nodes.iter().find(|n| n.node == "matmul").expect("matmul is reported");
        assert_eq!(node.is_integer(), integer, "{node:?}");
        if integer {
            // Codes at 4 and 3 fraction bits multiply to 7.
            assert_eq!(node.out_frac, Some(7));
        } else {
            assert!(node.float_reason.as_deref().is_some_and(|r| r.contains("broadcasts")), "{node:?}");
        }
        let want = Executor::new(&g, &params, opts()).unwrap().forward(&xs, &shape, Mode::Eval).unwrap().to_vec();
        assert_eq!(run.output, want);
    }
}

#[test]
fn sums_beyond_64_bits_run_in_float_with_the_reason() {
    // (data_in, weight, whether integer): 4 products of two 32-bit codes reach 4 * 2^31 * 2^31 =
    // 2^64; with 16-bit codes they stay at 2^32.
    let cases = [(int(32, 0, true), int(32, 0, true), false), (int(16, 4, true), int(16, 8, true), true)];
    for (x_fmt, w_fmt, integer) in cases {
        let mut g = Graph::new();
        let x = g.placeholder("x");
        let fc = g.call_module("fc", Op::Linear { in_features: 4, out_features: 2, bias: false }, &[x]);
        g.output(fc);
        let g = with_quant(g, |n| {
            (n.name == "fc").then(|| NodeQuant { data_in: vec![Some(x_fmt.clone())], weight: Some(w_fmt.clone()), ..Default::default() })
        });
        let params = init_params(&g, &mut Rng::new(2));
        let xs = [0.5f32, -1.0, 2.0, 0.25, 0.125, -0.5, 3.0, 1.5];
        let run = run_integer(&g, &params, &xs, &[2, 4]).unwrap();
        let node = &run.report.nodes[0];
        assert_eq!(node.is_integer(), integer, "{node:?}");
        if !integer {
            assert!(node.float_reason.as_deref().is_some_and(|r| r.contains("2^64.0, beyond 64-bit integers")), "{node:?}");
        }
        let want = Executor::new(&g, &params, opts()).unwrap().forward(&xs, &[2, 4], Mode::Eval).unwrap().to_vec();
        assert_eq!(run.output, want, "{node:?}");
    }

    // Add aligns its operands to the finer scale: 2^31 at 0 fraction bits shifted by 40 is 2^71.
    let mut g = Graph::new();
    let a = g.placeholder("a");
    let r = g.call_module("act", Op::Relu, &[a]);
    let s = g.call_function("add", Op::Add, &[a, r]);
    g.output(s);
    let g = with_quant(g, |n| {
        (n.name == "add").then(|| NodeQuant { data_in: vec![Some(int(32, 0, true)), Some(int(32, 40, true))], ..Default::default() })
    });
    let run = run_integer(&g, &ParamStore::new(), &[0.5, -1.0], &[1, 2]).unwrap();
    let node = run.report.nodes.iter().find(|n| n.node == "add").expect("add is reported");
    assert!(node.float_reason.as_deref().is_some_and(|r| r.contains("beyond 64-bit integers")), "{node:?}");
}

#[test]
fn non_finite_values_are_refused_with_the_node_operand_and_index() {
    // x -> sqrt (float) -> fc (integer 8/4): a NaN or infinity in the batch stops at the graph
    // input; a NaN that a float node makes stops at the integer node's data input.
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let s = g.call_function("torch.sqrt", Op::Sqrt, &[x]);
    let fc = g.call_module("fc", Op::Linear { in_features: 2, out_features: 2, bias: false }, &[s]);
    g.output(fc);
    let f = int(8, 4, true);
    let g = with_quant(g, |n| {
        (n.name == "fc").then(|| NodeQuant { data_in: vec![Some(f.clone())], weight: Some(f.clone()), ..Default::default() })
    });
    let params = init_params(&g, &mut Rng::new(3));
    let msg = |xs: &[f32]| run_integer(&g, &params, xs, &[2, 2]).map(|_| ()).unwrap_err().to_string();
    let cases = [
        (
            [1.0, 4.0, f32::NAN, 1.0],
            "integer execution of node `x`: the graph input holds NaN at index 2; a NaN or infinite value has no integer code",
        ),
        (
            [1.0, f32::INFINITY, 0.0, 1.0],
            "integer execution of node `x`: the graph input holds inf at index 1; a NaN or infinite value has no integer code",
        ),
        (
            [1.0, 4.0, 9.0, -1.0],
            "integer execution of node `fc`: data input 0 holds NaN at index 3; a NaN or infinite value has no integer code",
        ),
    ];
    for (xs, want) in cases {
        assert_eq!(msg(&xs), want);
    }
    // Finite batches still run.
    assert!(run_integer(&g, &params, &[1.0, 4.0, 9.0, 0.0], &[2, 2]).is_ok());
}

/// After a linear layer with an integer `data_out` (8 bits, 4 fraction bits), an unquantized
/// op that only moves, selects or bounds values keeps the codes (and their fraction bits) for
/// the quantized linear layer after it; one that computes new values, or bounds by a value
/// that is no whole code, runs in float. Either way the output is the fake-quant float path's.
#[test]
fn ops_that_move_or_bound_codes_keep_them() {
    use mase_ir::{IndexItem, ReduceSpec};
    let full = IndexItem::full;
    // Each case: the op on the first linear layer's [n, 2, 4] result, and whether it keeps codes.
    let cases: Vec<(Op, bool)> = vec![
        (Op::Transpose { dim0: 1, dim1: 2 }, true),
        (Op::Permute { dims: vec![2, 0, 1] }, true),
        (Op::Index { items: vec![full(), IndexItem::Slice { start: Some(1), end: None, step: 1 }, IndexItem::NewAxis] }, true),
        (Op::Repeat { repeats: vec![1, 2, 1] }, true),
        (Op::Amax(ReduceSpec::new(&[1], true)), true),
        (Op::AdaptiveMaxPool1d { output_size: 2 }, true),
        (Op::Relu6, true),
        (Op::Clip { min: -0.5, max: f32::INFINITY }, true),
        (Op::Pad { begin: vec![1], end: vec![0], value: 0.25 }, true),
        // 0.3 and 0.1 are no multiples of 2^-4; a sigmoid and a sum compute new values.
        (Op::Clip { min: -0.3, max: 0.3 }, false),
        (Op::Pad { begin: vec![1], end: vec![0], value: 0.1 }, false),
        (Op::Sigmoid, false),
        (Op::Sum(ReduceSpec::new(&[1], true)), false),
    ];
    let mut rng = Rng::new(5);
    let xs: Vec<f32> = (0..6 * 2 * 3).map(|_| rng.normal() as f32 * 2.0).collect();
    // x [6, 2, 3] -> fc -> the op -> flatten -> head (quantized), with the head's width found by
    // shape inference of the graph without it.
    let build = |op: &Op, head: Option<usize>| {
        let mut g = Graph::new();
        let x = g.placeholder("x");
        let fc = g.call_module("fc", Op::Linear { in_features: 3, out_features: 4, bias: true }, &[x]);
        let moved = g.call_function("moved", op.clone(), &[fc]);
        let mut y = g.call_function("torch.flatten", Op::Flatten { start_dim: 1, end_dim: -1 }, &[moved]);
        if let Some(width) = head {
            y = g.call_module("head", Op::Linear { in_features: width, out_features: 2, bias: true }, &[y]);
        }
        g.output(y);
        (g, y)
    };
    for (op, keeps) in cases {
        let (probe, y) = build(&op, None);
        let width = probe.infer_shapes(&[vec![6, 2, 3]], &|_| None).unwrap()[y.0].shape()[1];
        let (g, _) = build(&op, Some(width));
        let g = with_quant(g, |n| match n.name.as_str() {
            "fc" => Some(NodeQuant {
                data_in: vec![Some(int(8, 4, true))],
                weight: Some(int(8, 4, true)),
                bias: Some(int(8, 4, true)),
                data_out: Some(int(8, 4, true)),
                ..Default::default()
            }),
            "head" => Some(NodeQuant {
                data_in: vec![Some(int(8, 3, true))],
                weight: Some(int(8, 4, true)),
                bias: Some(int(8, 4, true)),
                ..Default::default()
            }),
            _ => None,
        });
        let params = init_params(&g, &mut Rng::new(9));
        let run = run_integer(&g, &params, &xs, &[6, 2, 3]).unwrap();
        let node = run.report.nodes.iter().find(|n| n.node == "moved").expect("the op is reported");
        assert_eq!(node.is_integer(), keeps, "{op:?}: {node:?}");
        if keeps {
            assert_eq!(node.out_frac, Some(4), "{op:?}");
        } else {
            assert_eq!(node.float_reason.as_deref(), Some("not quantized"), "{op:?}");
        }
        assert_eq!(run.report.integer_nodes().first(), Some(&"fc"));
        let want = Executor::new(&g, &params, opts()).unwrap().forward(&xs, &[6, 2, 3], Mode::Eval).unwrap().to_vec();
        assert_eq!(run.output, want, "{op:?}");
    }
}

/// `cat` of integer results with 4 and 6 fraction bits gives codes at 6: the first input's are
/// shifted up, exactly.
#[test]
fn cat_of_codes_aligns_fraction_bits() {
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let a = g.call_module("a", Op::Linear { in_features: 3, out_features: 2, bias: true }, &[x]);
    let b = g.call_module("b", Op::Linear { in_features: 3, out_features: 3, bias: true }, &[x]);
    let cat = g.call_function("torch.cat", Op::Concat { dim: 1 }, &[a, b]);
    let head = g.call_module("head", Op::Linear { in_features: 5, out_features: 2, bias: false }, &[cat]);
    g.output(head);
    let g = with_quant(g, |n| {
        let out = match n.name.as_str() {
            "a" => 4,
            "b" => 6,
            "head" => {
                return Some(NodeQuant { data_in: vec![Some(int(10, 6, true))], weight: Some(int(8, 4, true)), ..Default::default() })
            }
            _ => return None,
        };
        Some(NodeQuant {
            data_in: vec![Some(int(8, 4, true))],
            weight: Some(int(8, 4, true)),
            bias: Some(int(8, 4, true)),
            data_out: Some(int(10, out, true)),
            ..Default::default()
        })
    });
    let params = init_params(&g, &mut Rng::new(4));
    let mut rng = Rng::new(8);
    let xs: Vec<f32> = (0..8 * 3).map(|_| rng.normal() as f32).collect();
    let run = run_integer(&g, &params, &xs, &[8, 3]).unwrap();
    assert_eq!(run.report.integer_nodes(), ["a", "b", "cat", "head"]);
    let fracs: Vec<Option<i32>> = run.report.nodes.iter().map(|n| n.out_frac).collect();
    assert_eq!(fracs, [Some(4), Some(6), Some(6), Some(10)]);
    let want = Executor::new(&g, &params, opts()).unwrap().forward(&xs, &[8, 3], Mode::Eval).unwrap().to_vec();
    assert_eq!(run.output, want);
}
