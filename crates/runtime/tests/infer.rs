//! Batch-parallel inference (`Executor::infer`, `Executor::eval_batch`): on two threads a large
//! enough batch is cut into slices run by single-threaded replicas, and the outputs are the same
//! bits as one thread's forward pass, also after training steps and loads change the parameters.
//! A graph that mixes samples (softmax over the batch, a quantizer with blocks across samples) is
//! never cut.

mod common;

use mase_ir::{Graph, NodeId, NodeQuant, Op, ParamStore, QuantFormat, ReduceSpec, Rng};
use mase_runtime::{init_params, ExecOptions, Executor, Mode, Optimizer, OptimizerKind};
use mase_zoo::{build_model, ModelContext};

fn zoo(name: &str, sample: &[usize], classes: usize) -> Graph {
    build_model(name, &ModelContext::new(sample.to_vec(), classes)).unwrap()
}

fn batch(sample: &[usize], rows: usize, seed: u64) -> (Vec<f32>, Vec<usize>) {
    let mut shape = vec![rows];
    shape.extend_from_slice(sample);
    let mut rng = Rng::new(seed);
    ((0..shape.iter().product::<usize>()).map(|_| rng.normal() as f32).collect(), shape)
}

/// The forward pass of one thread, from a fresh executor holding `params`.
fn reference(graph: &Graph, params: &ParamStore, x: &[f32], shape: &[usize]) -> Vec<f32> {
    let mut exec = Executor::new(graph, params, ExecOptions { threads: 1, seed: 0 }).unwrap();
    exec.forward(x, shape, Mode::Eval).unwrap().to_vec()
}

/// Runs `graph` on two threads: inference, a training step, inference again, a load of other
/// parameters, inference again; each time the output must be one thread's bits, and the batch
/// must have been cut exactly when `cut` says (a cut leaves no value of the input node behind).
fn check(what: &str, graph: &Graph, sample: &[usize], classes: usize, rows: usize, cut: bool) {
    let params = init_params(graph, &mut Rng::new(1));
    let mut exec = Executor::new(graph, &params, ExecOptions { threads: 2, seed: 0 }).unwrap();
    let (x, shape) = batch(sample, rows, 2);
    let labels: Vec<u32> = (0..rows as u32).map(|i| i % classes as u32).collect();
    let mut opt = Optimizer::new(OptimizerKind::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 }, 1e-2);
    let other = init_params(graph, &mut Rng::new(3));
    for stage in ["fresh", "after a training step", "after a load"] {
        match stage {
            "after a training step" => {
                exec.train_step(&x, &shape, &labels, &mut opt).unwrap();
            }
            "after a load" => exec.load_params(&other).unwrap(),
            _ => {}
        }
        let want = reference(graph, &exec.params(), &x, &shape);
        let got = exec.infer(&x, &shape).unwrap().to_vec();
        assert!(got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "{what}, {stage}: outputs differ from one thread");
        assert_eq!(exec.value(NodeId(0)).is_none(), cut, "{what}, {stage}: cut into slices?");
        let stats = exec.eval_batch(&x, &shape, &labels).unwrap();
        let mut one = Executor::new(graph, &exec.params(), ExecOptions { threads: 1, seed: 0 }).unwrap();
        assert_eq!(stats, one.eval_batch(&x, &shape, &labels).unwrap(), "{what}, {stage}: loss and accuracy");
    }
}

#[test]
fn slices_give_the_bits_of_one_thread() {
    let tagger = zoo("jsc-three-layer", &[16], 5);
    let tfc = zoo("tfc", &[1, 28, 28], 10);
    check("jsc-three-layer, 1024 rows", &tagger, &[16], 5, 1024, true);
    check("jsc-three-layer, 256 rows (too little work)", &tagger, &[16], 5, 256, false);
    check("tfc, 131 rows (slices of 66 and 65)", &tfc, &[1, 28, 28], 10, 131, true);
    check("tfc, 129 rows (a slice would have 64)", &tfc, &[1, 28, 28], 10, 129, false);
    check("jsc-tiny, 256 rows (too little work)", &zoo("jsc-tiny", &[16], 5), &[16], 5, 256, false);
    check("tfc, 200 rows", &tfc, &[1, 28, 28], 10, 200, true);
    check("mnist-cnn, 130 rows", &zoo("mnist-cnn", &[1, 28, 28], 10), &[1, 28, 28], 10, 130, true);
    check("jsc-three-layer, integer fake-quant", &common::quantize_linears(tagger.clone(), 8, 4), &[16], 5, 1024, true);
}

#[test]
fn graphs_that_mix_samples_are_never_cut() {
    let tagger = zoo("jsc-three-layer", &[16], 5);
    let softmax_over = |dim: i64| {
        let mut g = Graph::new();
        let x = g.placeholder("x");
        let a = g.call_module("fc1", Op::Linear { in_features: 16, out_features: 256, bias: true }, &[x]);
        let b = g.call_module("fc2", Op::Linear { in_features: 256, out_features: 5, bias: true }, &[a]);
        let s = g.call_function("softmax", Op::Softmax { dim }, &[b]);
        g.output(s);
        g
    };
    check("softmax over the classes", &softmax_over(1), &[16], 5, 1024, true);
    check("softmax over the batch", &softmax_over(0), &[16], 5, 1024, false);

    let blocks = QuantFormat::BlockFp { width: 8, exponent_width: 8, exponent_bias: None, block_size: vec![16, 1], skip_first_dim: false };
    let blocked = common::with_quant(tagger.clone(), |n| {
        matches!(n.op, Op::Linear { .. }).then(|| NodeQuant { data_in: vec![Some(blocks.clone())], ..Default::default() })
    });
    check("block_fp blocks across samples", &blocked, &[16], 5, 1024, false);

    let stochastic = QuantFormat::Binary { stochastic: true, bipolar: true };
    let random = common::with_quant(tagger, |n| {
        matches!(n.op, Op::Linear { .. }).then(|| NodeQuant { weight: Some(stochastic.clone()), ..Default::default() })
    });
    let params = init_params(&random, &mut Rng::new(1));
    let mut exec = Executor::new(&random, &params, ExecOptions { threads: 2, seed: 0 }).unwrap();
    let (x, shape) = batch(&[16], 1024, 2);
    exec.infer(&x, &shape).unwrap();
    assert!(exec.value(NodeId(0)).is_some(), "stochastic quantizers draw from the executor's stream: not cut");
}

#[test]
fn reductions_are_cut_only_when_they_keep_the_batch() {
    // `b - reduce(b)` of the logits, where the reduction runs over the given dims.
    let centred = |make: fn(ReduceSpec) -> Op, dims: &[i64]| {
        let mut g = Graph::new();
        let x = g.placeholder("x");
        let a = g.call_module("fc1", Op::Linear { in_features: 16, out_features: 256, bias: true }, &[x]);
        let b = g.call_module("fc2", Op::Linear { in_features: 256, out_features: 5, bias: true }, &[a]);
        let m = g.call_method("reduce", make(ReduceSpec::new(dims, true)), &[b]);
        let y = g.call_function("operator.sub", Op::Sub, &[b, m]);
        g.output(y);
        g
    };
    check("mean over the classes", &centred(Op::Mean, &[1]), &[16], 5, 1024, true);
    check("amax over the classes (dim -1)", &centred(Op::Amax, &[-1]), &[16], 5, 1024, true);
    check("mean over the batch", &centred(Op::Mean, &[0]), &[16], 5, 1024, false);
    check("sum over the batch (dim -2)", &centred(Op::Sum, &[-2, 1]), &[16], 5, 1024, false);
    check("mean of every element", &centred(Op::Mean, &[]), &[16], 5, 1024, false);
}

/// Brevitas' TFC exports scale the input by a rank-0 constant (`Mul` by a scalar): a batch-free
/// value of rank 0 must not be read as if it had a batch dimension (it panicked on two threads).
#[test]
fn rank_zero_constants_do_not_stop_the_cut() {
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let scale = g.get_attr("scale");
    let scaled = g.call_function("mul", Op::Mul, &[x, scale]);
    let a = g.call_module("fc1", Op::Linear { in_features: 16, out_features: 256, bias: true }, &[scaled]);
    let b = g.call_module("fc2", Op::Linear { in_features: 256, out_features: 5, bias: true }, &[a]);
    g.output(b);
    let mut params = init_params(&g, &mut Rng::new(1));
    params.insert("scale", mase_ir::Tensor::scalar(2.0), false);
    let (x, shape) = batch(&[16], 1024, 2);
    let want = reference(&g, &params, &x, &shape);
    for threads in [2, 3] {
        let mut exec = Executor::new(&g, &params, ExecOptions { threads, seed: 0 }).unwrap();
        let got = exec.infer(&x, &shape).unwrap().to_vec();
        assert!(got.iter().zip(&want).all(|(a, b)| a.to_bits() == b.to_bits()), "{threads} threads: outputs differ from one thread");
        assert!(exec.value(NodeId(0)).is_none(), "{threads} threads: the batch is cut");
    }
}
