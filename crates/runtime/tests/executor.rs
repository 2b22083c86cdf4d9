//! Executor behaviour: batch-norm statistics, train vs eval modes, errors for bad input,
//! determinism, plan reuse across batch sizes, and PyTorch's default initialisation.

mod common;

use mase_ir::{ConvSpec, DepthMode, Graph, Init, NodeId, NormSpec, Op, ParamStore, PoolSpec, Rng, Tensor};
use mase_runtime::{init_params, ExecOptions, Executor, Mode, Optimizer, OptimizerKind, RuntimeError};

const ONE: ExecOptions = ExecOptions { threads: 1, seed: 0 };

fn single(op: Op) -> Graph {
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let y = g.call_module("m", op, &[x]);
    g.output(y);
    g
}

fn adam() -> Optimizer {
    Optimizer::new(OptimizerKind::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 }, 1e-2)
}

#[test]
fn batch_norm_running_statistics_by_hand() {
    // Channel 0 sees [1, 2, 3, 6]: mean 3, biased variance 14/4 = 3.5, unbiased 14/3.
    // Channel 1 sees [0, 0, 2, 2]: mean 1, biased variance 1, unbiased 4/3.
    // With momentum 0.1 from (mean 0, var 1): running_mean = 0.1 * mean,
    // running_var = 0.9 + 0.1 * unbiased.
    let g = single(Op::BatchNorm1d(NormSpec::new(2)));
    let params = init_params(&g, &mut Rng::new(0));
    let mut exec = Executor::new(&g, &params, ONE).unwrap();
    let x = [1.0, 0.0, 2.0, 0.0, 3.0, 2.0, 6.0, 2.0];
    let y = exec.forward(&x, &[4, 2], Mode::Train).unwrap().to_vec();
    let p = exec.params();
    let close = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(u, v)| (u - v).abs() < 1e-6);
    assert!(close(&p.get("m.running_mean").unwrap().data, &[0.3, 0.1]));
    assert!(close(&p.get("m.running_var").unwrap().data, &[0.9 + 1.4 / 3.0, 0.9 + 0.4 / 3.0]), "{:?}", p.get("m.running_var"));
    // Training output is normalised with the biased batch variance (eps 1e-5).
    let s0 = (3.5f32 + 1e-5).sqrt();
    let s1 = (1.0f32 + 1e-5).sqrt();
    let want: Vec<f32> =
        [(1.0, 0.0), (2.0, 0.0), (3.0, 2.0), (6.0, 2.0)].iter().flat_map(|&(a, b)| [(a - 3.0) / s0, (b - 1.0) / s1]).collect();
    assert!(close(&y, &want), "{y:?} vs {want:?}");
    // Evaluation uses the running statistics and leaves them alone.
    let e = exec.forward(&x, &[4, 2], Mode::Eval).unwrap().to_vec();
    let (rv0, rv1) = (0.9f32 + 1.4 / 3.0, 0.9f32 + 0.4 / 3.0);
    assert!((e[0] - (1.0 - 0.3) / (rv0 + 1e-5).sqrt()).abs() < 1e-6 && (e[1] - (0.0 - 0.1) / (rv1 + 1e-5).sqrt()).abs() < 1e-6, "{e:?}");
    assert_eq!(exec.params(), p);
}

#[test]
fn batch_norm2d_running_statistics_over_batch_and_space() {
    // One channel, N = 2, 1x2 images: values [1, 3] and [5, 7]: mean 4, biased var 5, unbiased 20/3.
    let spec = NormSpec { momentum: 0.5, ..NormSpec::new(1) };
    let g = single(Op::BatchNorm2d(spec));
    let mut exec = Executor::new(&g, &init_params(&g, &mut Rng::new(0)), ONE).unwrap();
    exec.forward(&[1.0, 3.0, 5.0, 7.0], &[2, 1, 1, 2], Mode::Train).unwrap();
    let p = exec.params();
    assert!((p.get("m.running_mean").unwrap().data[0] - 2.0).abs() < 1e-6);
    assert!((p.get("m.running_var").unwrap().data[0] - (0.5 + 10.0 / 3.0)).abs() < 1e-5);
}

#[test]
fn dropout_is_identity_in_eval_and_scaled_mask_in_train() {
    let g = single(Op::Dropout { p: 0.25 });
    let params = ParamStore::new();
    let x: Vec<f32> = (1..=4000).map(|i| i as f32).collect();
    let mut exec = Executor::new(&g, &params, ExecOptions { threads: 1, seed: 3 }).unwrap();
    assert_eq!(exec.forward(&x, &[40, 100], Mode::Eval).unwrap(), &x[..]);
    let y = exec.forward(&x, &[40, 100], Mode::Train).unwrap().to_vec();
    let dropped = y.iter().filter(|&&v| v == 0.0).count();
    assert!((900..1100).contains(&dropped), "{dropped} of 4000 dropped with p = 0.25");
    assert!(y.iter().zip(&x).all(|(a, b)| *a == 0.0 || (a - b / 0.75).abs() <= 1e-6 * a.abs()), "kept values are scaled by 1/(1-p)");
    // The same seed gives the same mask; the next step draws a new one.
    let mut again = Executor::new(&g, &params, ExecOptions { threads: 1, seed: 3 }).unwrap();
    assert_eq!(again.forward(&x, &[40, 100], Mode::Train).unwrap(), &y[..]);
    assert_ne!(again.forward(&x, &[40, 100], Mode::Train).unwrap(), &y[..]);
}

#[test]
fn stochastic_depth_drops_whole_samples_or_the_whole_batch_in_train() {
    // torchvision's arithmetic: each sample (row) or the batch is kept and scaled by 1 / (1 - p),
    // or zeroed by multiplying (a NaN stays NaN); the identity in eval.
    let mut x: Vec<f32> = (1..=600).map(|i| i as f32).collect();
    x[5] = f32::NAN;
    for (mode, rows) in [(DepthMode::Row, 100), (DepthMode::Batch, 100)] {
        let g = single(Op::StochasticDepth { p: 0.25, mode });
        let mut exec = Executor::new(&g, &ParamStore::new(), ExecOptions { threads: 1, seed: 5 }).unwrap();
        let eval = exec.forward(&x, &[rows, 2, 3], Mode::Eval).unwrap().to_vec();
        assert!(eval.iter().zip(&x).all(|(a, b)| a.to_bits() == b.to_bits()), "{mode:?}: eval is the identity");
        let mut kept_rows = 0;
        for step in 0..8 {
            let y = exec.forward(&x, &[rows, 2, 3], Mode::Train).unwrap().to_vec();
            let factors: Vec<f32> = y.chunks(6).zip(x.chunks(6)).map(|(yr, xr)| yr[1] / xr[1]).collect();
            for ((yr, xr), f) in y.chunks(6).zip(x.chunks(6)).zip(&factors) {
                assert!(*f == 0.0 || (f - 1.0 / 0.75).abs() < 1e-6, "{mode:?} step {step}: factor {f}");
                let exact = if *f == 0.0 { 0.0 } else { 1.0f32 / 0.75 };
                assert!(yr.iter().zip(xr).all(|(a, b)| (b.is_nan() && a.is_nan()) || *a == b * exact), "{mode:?}: one factor per row");
            }
            if mode == DepthMode::Batch {
                assert!(factors.iter().all(|f| (*f == 0.0) == (factors[0] == 0.0)), "batch mode: one draw for the whole batch");
            }
            kept_rows += factors.iter().filter(|f| **f != 0.0).count();
        }
        // 800 rows drawn with survival 0.75: about 600 kept (row mode), or a multiple of 100.
        match mode {
            DepthMode::Row => assert!((540..660).contains(&kept_rows), "{kept_rows} of 800 rows kept"),
            DepthMode::Batch => assert_eq!(kept_rows % 100, 0),
        }
    }
}

#[test]
fn input_and_label_errors_name_what_was_expected() {
    let g = common::jsc_toy();
    let mut exec = Executor::new(&g, &init_params(&g, &mut Rng::new(0)), ONE).unwrap();
    let x = vec![0.5; 4 * 15];
    let e = exec.forward(&x, &[4, 15], Mode::Eval).unwrap_err();
    assert_eq!(e.to_string(), "input has 15 features per sample, graph `x` expects 16");
    assert!(matches!(e, RuntimeError::InputFeatures { got: 15, expected: 16, .. }));
    let x = vec![0.5; 4 * 16];
    let cases: Vec<(Result<mase_runtime::StepStats, RuntimeError>, &str)> = vec![
        (exec.eval_batch(&x, &[4, 16], &[0, 1, 5, 2]), "label 5 of sample 2 is out of range: the model has 5 classes"),
        (exec.loss_and_grad(&x, &[4, 16], &[0, 1, 2]), "3 labels given for a batch of 4 samples"),
        (exec.eval_batch(&x[..60], &[4, 16], &[0, 1, 2, 3]), "input data has 60 values, but shape [4, 16] needs 64"),
        (exec.eval_batch(&[], &[0, 16], &[]), "input shape [0, 16] has no samples"),
        (
            exec.loss_and_grad(&x[..16], &[1, 16], &[0]),
            "node `seq_blocks_0` (batch_norm1d) needs more than one value per channel in training",
        ),
    ];
    for (got, want) in cases {
        let e = got.unwrap_err().to_string();
        assert!(e.starts_with(want), "{e:?} should start with {want:?}");
    }
    // A bad label must not have touched the running statistics.
    assert_eq!(exec.params(), init_params(&g, &mut Rng::new(0)));
    // Evaluation of a single sample is fine.
    assert_eq!(exec.forward(&x[..16], &[1, 16], Mode::Eval).unwrap().len(), 5);
}

#[test]
fn parameter_errors() {
    let g = common::jsc_toy();
    let params = init_params(&g, &mut Rng::new(0));
    let mut missing = ParamStore::new();
    for (n, e) in params.iter().filter(|(n, _)| *n != "seq_blocks.2.bias") {
        missing.insert(n, e.tensor.clone(), e.trainable);
    }
    let e = Executor::new(&g, &missing, ONE).unwrap_err();
    assert!(e.to_string().contains("seq_blocks.2.bias"), "{e}");
    let mut exec = Executor::new(&g, &params, ONE).unwrap();
    let mut wrong = params.clone();
    wrong.insert("seq_blocks.2.weight", Tensor::zeros(vec![8, 15]), true);
    let e = exec.load_params(&wrong).unwrap_err();
    assert_eq!(e.to_string(), "parameter `seq_blocks.2.weight`: shape [8, 16] expected, got [8, 15]");
    assert_eq!(exec.params(), params, "a failed load changes nothing");
    assert!(matches!(exec.backward(&[0.0; 5]), Err(RuntimeError::NoTrainingForward)));
}

#[test]
fn gradients_are_written_not_accumulated() {
    let g = common::jsc_toy();
    let mut exec = Executor::new(&g, &init_params(&g, &mut Rng::new(4)), ONE).unwrap();
    let mut rng = Rng::new(5);
    let x: Vec<f32> = (0..32 * 16).map(|_| rng.normal() as f32).collect();
    let y: Vec<u32> = (0..32).map(|i| i % 5).collect();
    let eval = exec.eval_batch(&x, &[32, 16], &y).unwrap();
    exec.loss_and_grad(&x, &[32, 16], &y).unwrap();
    let first = exec.grads();
    exec.loss_and_grad(&x, &[32, 16], &y).unwrap();
    assert_eq!(exec.grads(), first);
    assert_eq!(first.len(), 14, "weights and biases of 4 BatchNorms and 3 Linears, no running statistics");
    assert!(first.iter().any(|(_, g)| g.iter().any(|v| *v != 0.0)));
    assert_eq!(eval.count, 32);
    assert!(eval.loss > 0.0 && eval.correct <= 32);
}

fn small_cnn() -> Graph {
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let c1 = g.call_module("features.0", Op::Conv2d(ConvSpec::new(2, 3, 16, 3, 1, 1)), &[x]);
    let b1 = g.call_module("features.1", Op::BatchNorm2d(NormSpec::new(16)), &[c1]);
    let r1 = g.call_module("features.2", Op::Relu, &[b1]);
    let p1 = g.call_module("features.3", Op::MaxPool2d(PoolSpec::new(2, 2)), &[r1]);
    let c2 = g.call_module("features.4", Op::Conv2d(ConvSpec::new(2, 16, 32, 3, 1, 1)), &[p1]);
    let r2 = g.call_module("features.5", Op::Relu, &[c2]);
    let a = g.call_module("pool", Op::AdaptiveAvgPool2d { output_size: [2, 2] }, &[r2]);
    let f = g.call_function("torch.flatten", Op::Flatten { start_dim: 1, end_dim: -1 }, &[a]);
    let d = g.call_module("drop", Op::Dropout { p: 0.2 }, &[f]);
    let fc = g.call_module("fc", Op::Linear { in_features: 128, out_features: 10, bias: true }, &[d]);
    g.output(fc);
    g
}

#[test]
fn same_seed_same_bits_with_any_thread_count() {
    let g = small_cnn();
    let params = init_params(&g, &mut Rng::new(9));
    let mut rng = Rng::new(10);
    // 32x32 images make the second convolution's products large enough to be split over the
    // pool, and its batch norm and pools large enough to run in parallel.
    let x: Vec<f32> = (0..8 * 3 * 32 * 32).map(|_| rng.normal() as f32).collect();
    let y: Vec<u32> = (0..8).map(|i| i % 10).collect();
    let run = |threads: usize| {
        let mut exec = Executor::new(&g, &params, ExecOptions { threads, seed: 1 }).unwrap();
        let mut opt = adam();
        let losses: Vec<f32> = (0..3).map(|_| exec.train_step(&x, &[8, 3, 32, 32], &y, &mut opt).unwrap().loss).collect();
        (losses, exec.params())
    };
    let one = run(1);
    assert_eq!(one, run(1));
    assert_eq!(one, run(2), "two threads must give the bits of one");
    assert_eq!(one, run(3));
}

#[test]
fn each_batch_shape_gets_its_plan() {
    let g = common::jsc_toy();
    let params = init_params(&g, &mut Rng::new(1));
    let mut exec = Executor::new(&g, &params, ONE).unwrap();
    let mut rng = Rng::new(2);
    let x: Vec<f32> = (0..100 * 16).map(|_| rng.normal() as f32).collect();
    // Batches of 32 and a last batch of 4, as an epoch of 100 rows would have, then evaluation
    // with other sizes: a row's output in eval does not depend on the batch it is in (up to the
    // rounding of the matrix products, whose blocking depends on the number of rows).
    let mut opt = adam();
    for b in [32, 32, 32, 4] {
        let y: Vec<u32> = (0..b as u32).map(|i| i % 5).collect();
        exec.train_step(&x[..b * 16], &[b, 16], &y, &mut opt).unwrap();
    }
    let all = exec.forward(&x, &[100, 16], Mode::Eval).unwrap().to_vec();
    for b in [1, 7, 32] {
        let part = exec.forward(&x[..b * 16], &[b, 16], Mode::Eval).unwrap();
        assert!(part.iter().zip(&all[..b * 5]).all(|(p, a)| (p - a).abs() <= 1e-5 * a.abs().max(1.0)), "batch of {b}: {part:?}");
    }
    assert_eq!(exec.output_shape(7).unwrap(), [7, 5]);
}

#[test]
fn output_shape_before_any_batch_and_node_values() {
    let g = common::jsc_toy();
    let exec = Executor::new(&g, &init_params(&g, &mut Rng::new(1)), ONE).unwrap();
    assert_eq!(exec.output_shape(3).unwrap(), [3, 5], "implied by the first BatchNorm1d(16)");
    let cnn = small_cnn();
    let mut exec = Executor::new(&cnn, &init_params(&cnn, &mut Rng::new(1)), ONE).unwrap();
    assert!(matches!(exec.output_shape(2), Err(RuntimeError::UnknownInputShape { .. })));
    let x = vec![0.1; 2 * 3 * 8 * 8];
    exec.forward(&x, &[2, 3, 8, 8], Mode::Eval).unwrap();
    assert_eq!(exec.output_shape(5).unwrap(), [5, 10]);
    let pool = cnn.find("features_3").unwrap();
    let (shape, vals) = exec.value(pool).unwrap();
    assert_eq!(shape, [2, 16, 4, 4]);
    assert_eq!(vals.len(), 2 * 16 * 16);
    let flat = cnn.find("flatten").unwrap();
    assert_eq!(exec.value(flat).unwrap().0, [2, 128]);
    assert_eq!(exec.value(NodeId(0)).unwrap().1, &x[..]);
}

#[test]
fn init_follows_pytorch_defaults_deterministically() {
    let g = small_cnn();
    let a = init_params(&g, &mut Rng::new(42));
    assert_eq!(a, init_params(&g, &mut Rng::new(42)));
    assert_ne!(a, init_params(&g, &mut Rng::new(43)));
    let names: Vec<&str> = a.names().collect();
    assert_eq!(
        &names[..6],
        [
            "features.0.weight",
            "features.0.bias",
            "features.1.weight",
            "features.1.bias",
            "features.1.running_mean",
            "features.1.running_var"
        ]
    );
    for (name, spec) in g.param_specs() {
        let t = a.get(&name).unwrap();
        assert_eq!(t.shape, spec.shape);
        match spec.init {
            Init::Uniform { fan_in } => {
                let bound = 1.0 / (fan_in as f32).sqrt();
                assert!(t.data.iter().all(|v| v.abs() <= bound), "{name} within ±{bound}");
                let mean = t.data.iter().sum::<f32>() / t.data.len() as f32;
                assert!(t.data.len() < 100 || mean.abs() < 0.1 * bound, "{name} mean {mean}");
            }
            Init::Ones => assert!(t.data.iter().all(|&v| v == 1.0)),
            Init::Zeros => assert!(t.data.iter().all(|&v| v == 0.0)),
            Init::Normal { .. } | Init::Gaussian { .. } | Init::Xavier { .. } | Init::Arange => {
                unreachable!("the small CNN has no embedding, no position ids and no tensor of its own")
            }
        }
    }
    assert_eq!(a.trainable_count(), 3 * 16 * 9 + 16 + 32 + 16 * 32 * 9 + 32 + 1280 + 10);
}

/// A graph's own tensors (a ViT's position embedding, an attention's packed input projection) are
/// drawn with the modules', trainable as declared: N(0, 0.02^2) and `xavier_uniform_`'s bound
/// sqrt(6 / (fan_in + fan_out)).
#[test]
fn graph_parameters_are_drawn_by_their_rule() {
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let pos = g.parameter("pos", vec![100, 50], true, Init::Gaussian { std: 0.02 });
    let w = g.parameter("in_proj_weight", vec![96, 32], true, Init::Xavier { fan_in: 32, fan_out: 96 });
    let a = g.call_function("operator.add", Op::Add, &[x, pos]);
    let m = g.call_function("torch.matmul", Op::MatMul, &[a, w]);
    g.output(m);
    let store = init_params(&g, &mut Rng::new(5));
    assert_eq!(store.names().collect::<Vec<_>>(), ["pos", "in_proj_weight"]);
    assert_eq!(store.trainable_count(), 100 * 50 + 96 * 32);
    let p = &store.get("pos").unwrap().data;
    let var = p.iter().map(|&v| (v as f64).powi(2)).sum::<f64>() / p.len() as f64;
    assert!((var.sqrt() - 0.02).abs() < 0.001, "std {}", var.sqrt());
    let bound = (6.0f32 / 128.0).sqrt();
    let w = &store.get("in_proj_weight").unwrap().data;
    assert!(w.iter().all(|v| v.abs() <= bound) && w.iter().any(|v| v.abs() > 0.95 * bound), "within ±{bound}");
}

/// `nn.Embedding`'s weight is N(0, 1) with its padding row zero.
#[test]
fn embedding_weights_are_standard_normal_with_a_zero_padding_row() {
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let e = g.call_module("emb", Op::Embedding { num_embeddings: 400, embedding_dim: 50, padding_idx: Some(3), functional: false }, &[x]);
    g.output(e);
    let store = init_params(&g, &mut Rng::new(7));
    let w = &store.get("emb.weight").unwrap().data;
    assert!(w[150..200].iter().all(|&v| v == 0.0));
    let n = w.len() as f64 - 50.0;
    let mean = w.iter().map(|&v| v as f64).sum::<f64>() / n;
    let var = w.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
    assert!(mean.abs() < 0.02 && (var - 1.0).abs() < 0.03, "mean {mean} variance {var}");
}

#[test]
fn frozen_constants_get_no_gradient_and_trainable_ones_do() {
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let s = g.get_attr("scale");
    let o = g.get_attr("offset");
    let m = g.call_function("operator.mul", Op::Mul, &[x, s]);
    let a = g.call_function("operator.add", Op::Add, &[m, o]);
    g.output(a);
    let mut p = ParamStore::new();
    p.insert("scale", Tensor::new(vec![3], vec![1.0, 2.0, 3.0]).unwrap(), false);
    p.insert("offset", Tensor::new(vec![3], vec![0.0, 0.0, 0.0]).unwrap(), true);
    let mut exec = Executor::new(&g, &p, ONE).unwrap();
    // Logits [1, 4, 9] for label 2: d loss / d offset = softmax - onehot.
    exec.loss_and_grad(&[1.0, 2.0, 3.0], &[1, 3], &[2]).unwrap();
    let grads = exec.grads();
    assert_eq!(grads.len(), 1);
    let z: f32 = [1.0f32, 4.0, 9.0].iter().map(|v| v.exp()).sum();
    let want = [1f32.exp() / z, 4f32.exp() / z, 9f32.exp() / z - 1.0];
    assert!(grads[0].1.iter().zip(want).all(|(a, b)| (a - b).abs() < 1e-6), "{grads:?}");
    let mut opt = Optimizer::new(OptimizerKind::Sgd { momentum: 0.0, dampening: 0.0, weight_decay: 0.0, nesterov: false }, 1.0);
    exec.train_step(&[1.0, 2.0, 3.0], &[1, 3], &[2], &mut opt).unwrap();
    let after = exec.params();
    assert_eq!(after.get("scale").unwrap().data, [1.0, 2.0, 3.0]);
    // One SGD step with lr 1 from 0: offset = -gradient.
    let offset = &after.get("offset").unwrap().data;
    assert!(offset.iter().zip(want).all(|(o, g)| (o + g).abs() < 1e-6), "{offset:?}");
}
