//! NaN, +inf, -inf and -0.0 through every op, against PyTorch.
//!
//! `tests/fixtures/nonfinite_ops.txt` (made by `scripts/make_nonfinite_references.py`) holds, per
//! case, an input with special values, PyTorch's output, an output gradient and PyTorch's input
//! gradient. Each line of the table below builds the one-op graph of a case; `check` runs it
//! forward (and backward where PyTorch gave a gradient) and compares every value: NaN must meet
//! NaN, an infinity the same infinity, a zero the zero of the same sign, and a finite value the
//! reference to within rounding.

mod common;

use common::read_text_fixture;
use mase_ir::{ConvSpec, Graph, NodeId, NormSpec, Op, ParamStore, PoolSpec, ReduceSpec, Tensor};
use mase_runtime::{ExecOptions, Executor, Mode};
use std::collections::HashMap;

type Fixture = HashMap<String, Vec<f32>>;

/// How a case's graph uses its op.
enum Form {
    /// `m(x)` with the module's parameters from the fixture.
    Module(Op),
    /// `torch.<op>(x)`.
    Function(Op),
    /// `op(x, c)` with the fixture's constant `c`.
    WithConst(Op),
}

fn shape(fx: &Fixture, key: &str) -> Vec<usize> {
    fx[key].iter().map(|&v| v as usize).collect()
}

fn build(fx: &Fixture, case: &str, form: Form) -> (Graph, ParamStore) {
    let mut g = Graph::new();
    let mut params = ParamStore::new();
    let x = g.placeholder("x");
    let y: NodeId = match form {
        Form::Module(op) => {
            let y = g.call_module("m", op, &[x]);
            for (name, spec) in g.param_specs() {
                let local = name.strip_prefix("m.").expect("module parameters live under m.");
                let data = fx[&format!("{case}.p.{local}")].clone();
                params.insert(name.clone(), Tensor::new(spec.shape.clone(), data).expect("parameter size"), spec.trainable);
            }
            y
        }
        Form::Function(op) => g.call_function(&format!("torch.{}", op.mase_op()), op, &[x]),
        Form::WithConst(op) => {
            let c = g.get_attr("c");
            let t = Tensor::new(shape(fx, &format!("{case}.cshape")), fx[&format!("{case}.c")].clone()).expect("constant size");
            params.insert("c", t, false);
            g.call_function(&format!("torch.{}", op.mase_op()), op, &[x, c])
        }
    };
    g.output(y);
    (g, params)
}

/// Whether `got` is `want` in the sense of the module docs.
fn same(got: f32, want: f32) -> bool {
    if want.is_nan() || got.is_nan() {
        return want.is_nan() && got.is_nan();
    }
    if want.is_infinite() || want == 0.0 {
        return got.to_bits() == want.to_bits();
    }
    (got - want).abs() <= 2e-6 * want.abs().max(1.0)
}

/// The mismatches of `got` against `want`, as one line, or `None`.
fn compare(case: &str, what: &str, got: &[f32], want: &[f32]) -> Option<String> {
    common::mismatches(case, what, got, want, same)
}

/// Runs one case forward (and backward when the fixture has `dx`) and returns its mismatches.
fn check(fx: &Fixture, case: &str, mode: Mode, form: Form) -> Vec<String> {
    let (g, params) = build(fx, case, form);
    let mut exec = Executor::new(&g, &params, ExecOptions { threads: 1, seed: 0 }).unwrap_or_else(|e| panic!("{case}: {e}"));
    exec.set_keep_input_grad(true);
    let x = &fx[&format!("{case}.x")];
    let y = exec.forward(x, &shape(fx, &format!("{case}.shape")), mode).unwrap_or_else(|e| panic!("{case}: {e}")).to_vec();
    let mut bad: Vec<String> = compare(case, "y", &y, &fx[&format!("{case}.y")]).into_iter().collect();
    if mode == Mode::Train {
        if let Some(dx) = fx.get(&format!("{case}.dx")) {
            exec.backward(&fx[&format!("{case}.dy")]).unwrap_or_else(|e| panic!("{case}: {e}"));
            bad.extend(compare(case, "dx", exec.input_grad().expect("input gradient kept"), dx));
        }
    }
    bad
}

fn pool(k: usize, s: usize, p: usize) -> PoolSpec {
    PoolSpec::window(vec![k; 2], vec![s; 2], vec![p; 2])
}

#[test]
fn nonfinite_values_propagate_as_in_pytorch() {
    use Form::{Function as F, Module as M, WithConst as C};
    let fx = read_text_fixture("nonfinite_ops.txt");
    let t = Mode::Train;
    let mut bad = Vec::new();
    bad.extend(check(&fx, "relu", t, M(Op::Relu)));
    bad.extend(check(&fx, "relu6", t, M(Op::Relu6)));
    bad.extend(check(&fx, "leaky_relu", t, M(Op::LeakyRelu { negative_slope: 0.1 })));
    bad.extend(check(&fx, "sigmoid", t, M(Op::Sigmoid)));
    bad.extend(check(&fx, "tanh", t, M(Op::Tanh)));
    bad.extend(check(&fx, "selu", t, M(Op::Selu)));
    bad.extend(check(&fx, "gelu", t, M(Op::Gelu { tanh: false })));
    bad.extend(check(&fx, "gelu_tanh", t, M(Op::Gelu { tanh: true })));
    bad.extend(check(&fx, "sqrt", t, F(Op::Sqrt)));
    bad.extend(check(&fx, "clip", t, F(Op::Clip { min: -1.0, max: 1.0 })));
    bad.extend(check(&fx, "clip_min", t, F(Op::Clip { min: 0.0, max: f32::MAX })));
    bad.extend(check(&fx, "clip_max", t, F(Op::Clip { min: f32::MIN, max: 0.0 })));
    bad.extend(check(&fx, "clip_bounds", t, F(Op::Clip { min: -1.0, max: 1.0 })));
    bad.extend(check(&fx, "relu6_bounds", t, M(Op::Relu6)));
    bad.extend(check(&fx, "softmax", t, F(Op::Softmax { dim: 1 })));
    bad.extend(check(&fx, "log_softmax", t, F(Op::LogSoftmax { dim: 1 })));
    bad.extend(check(&fx, "max_pool2d", t, M(Op::MaxPool2d(pool(2, 2, 0)))));
    bad.extend(check(&fx, "max_pool2d_k3_p1", t, M(Op::MaxPool2d(pool(3, 1, 1)))));
    bad.extend(check(&fx, "max_pool1d", t, M(Op::MaxPool1d(PoolSpec::new(1, 2)))));
    bad.extend(check(&fx, "avg_pool2d", t, M(Op::AvgPool2d(pool(2, 2, 0)))));
    bad.extend(check(&fx, "avg_pool2d_k3_p1", t, M(Op::AvgPool2d(pool(3, 1, 1)))));
    bad.extend(check(&fx, "adaptive_avg_pool2d", t, M(Op::AdaptiveAvgPool2d { output_size: [3, 3] })));
    bad.extend(check(&fx, "bn_train", t, M(Op::BatchNorm1d(NormSpec::new(3)))));
    bad.extend(check(&fx, "bn_eval", Mode::Eval, M(Op::BatchNorm1d(NormSpec::new(3)))));
    bad.extend(check(&fx, "linear", t, M(Op::Linear { in_features: 3, out_features: 2, bias: true })));
    bad.extend(check(&fx, "conv2d", t, M(Op::Conv2d(ConvSpec::new(2, 1, 2, 3, 1, 1)))));
    bad.extend(check(&fx, "matmul", t, C(Op::MatMul)));
    bad.extend(check(&fx, "add", t, C(Op::Add)));
    bad.extend(check(&fx, "sub", t, C(Op::Sub)));
    bad.extend(check(&fx, "mul", t, C(Op::Mul)));
    bad.extend(check(&fx, "div", t, C(Op::Div)));
    bad.extend(check(&fx, "pow", t, C(Op::Pow)));
    bad.extend(check(&fx, "add_broadcast", t, C(Op::Add)));
    bad.extend(check(&fx, "pad", t, F(Op::Pad { begin: vec![1], end: vec![2], value: 0.0 })));
    bad.extend(check(&fx, "concat", t, C(Op::Concat { dim: 1 })));
    assert!(bad.is_empty(), "{} mismatches:\n{}", bad.len(), bad.join("\n"));
}

/// The activations and reductions of `tests/fixtures/activation_ops.txt` (made by
/// `scripts/make_activation_references.py`): special values, kinks, softplus's threshold on both
/// sides, large magnitudes, ties of maxima, and ordinary values, forward and backward.
#[test]
fn activations_and_reductions_match_pytorch() {
    use Form::{Function as F, Module as M};
    let fx = read_text_fixture("activation_ops.txt");
    let r = |dims: &[i64], keepdim| ReduceSpec::new(dims, keepdim);
    let cases: Vec<(&str, Form)> = vec![
        ("silu", M(Op::Silu)),
        ("hardswish", M(Op::Hardswish)),
        ("hardsigmoid", M(Op::Hardsigmoid)),
        ("softplus", M(Op::Softplus { beta: 1.0, threshold: 20.0 })),
        ("softplus_beta2_threshold5", M(Op::Softplus { beta: 2.0, threshold: 5.0 })),
        ("mish", M(Op::Mish)),
        ("mean_dims_1_2", F(Op::Mean(r(&[1, 2], false)))),
        ("mean_last_keepdim", F(Op::Mean(r(&[-1], true)))),
        ("mean_all", F(Op::Mean(r(&[], false)))),
        ("sum_dim_1", F(Op::Sum(r(&[1], false)))),
        ("sum_dims_0_2_keepdim", F(Op::Sum(r(&[0, 2], true)))),
        ("sum_all", F(Op::Sum(r(&[], false)))),
        ("amax_last", F(Op::Amax(r(&[-1], false)))),
        ("amax_dims_0_2_keepdim", F(Op::Amax(r(&[0, 2], true)))),
        ("amax_dim_1", F(Op::Amax(r(&[1], false)))),
        ("mean_all_finite", F(Op::Mean(r(&[], false)))),
        ("sum_all_finite", F(Op::Sum(r(&[], false)))),
        ("amax_all_finite", F(Op::Amax(r(&[], false)))),
    ];
    let bad: Vec<String> = cases.into_iter().flat_map(|(case, form)| check(&fx, case, Mode::Train, form)).collect();
    assert!(bad.is_empty(), "{} mismatches:\n{}", bad.len(), bad.join("\n"));
}

/// `op(x, c)` of one graph node, forward in evaluation.
fn eval_with_const(op: Op, x: &[f32], c: &[f32]) -> Vec<f32> {
    let mut g = Graph::new();
    let xn = g.placeholder("x");
    let cn = g.get_attr("c");
    let y = g.call_function(&format!("operator.{}", op.mase_op()), op, &[xn, cn]);
    g.output(y);
    let mut params = ParamStore::new();
    params.insert("c", Tensor::new(vec![c.len()], c.to_vec()).unwrap(), false);
    let mut exec = Executor::new(&g, &params, ExecOptions { threads: 1, seed: 0 }).unwrap();
    exec.forward(x, &[1, x.len()], Mode::Eval).unwrap().to_vec()
}

/// IEEE comparisons, as PyTorch's: NaN is unordered (equal to nothing, unequal to everything),
/// infinities compare as numbers, -0.0 equals 0.0.
#[test]
fn comparisons_treat_nan_and_infinities_as_pytorch() {
    let nan = f32::NAN;
    let (inf, ninf) = (f32::INFINITY, f32::NEG_INFINITY);
    let x = [nan, 1.0, 2.0, ninf, inf, -0.0, nan];
    let c = [2.0, 2.0, 2.0, 2.0, inf, 0.0, nan];
    let cases: [(Op, [f32; 7]); 6] = [
        (Op::Eq, [0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0]),
        (Op::Ne, [1.0, 1.0, 0.0, 1.0, 0.0, 0.0, 1.0]),
        (Op::Lt, [0.0, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0]),
        (Op::Le, [0.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0]),
        (Op::Gt, [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]),
        (Op::Ge, [0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0]),
    ];
    for (op, want) in cases {
        let got = eval_with_const(op.clone(), &x, &c);
        assert_eq!(got, want, "{}", op.mase_op());
    }
}

/// `where(cond, a, b)`: a NaN condition holds (PyTorch's cast of NaN to bool is true), -0.0 does
/// not; a NaN or infinity in the value not chosen does not reach the output or the gradients,
/// and the chosen one passes its gradient unchanged.
#[test]
fn where_chooses_by_nonzero_and_keeps_nonfinite_values_apart() {
    let nan = f32::NAN;
    let mut g = Graph::new();
    let a = g.placeholder("a");
    let cond = g.get_attr("cond");
    let b = g.get_attr("b");
    let y = g.call_function("torch.where", Op::Where, &[cond, a, b]);
    g.output(y);
    let mut params = ParamStore::new();
    params.insert("cond", Tensor::new(vec![4], vec![nan, 0.0, 1.0, -0.0]).unwrap(), false);
    params.insert("b", Tensor::new(vec![4], vec![nan, 20.0, f32::INFINITY, 40.0]).unwrap(), true);
    let mut exec = Executor::new(&g, &params, ExecOptions { threads: 1, seed: 0 }).unwrap();
    exec.set_keep_input_grad(true);
    let y = exec.forward(&[1.0, f32::NEG_INFINITY, nan, 4.0], &[1, 4], Mode::Train).unwrap().to_vec();
    let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&y), bits(&[1.0, 20.0, nan, 40.0]));
    exec.backward(&[0.5, 0.25, 2.0, 4.0]).unwrap();
    assert_eq!(exec.input_grad().unwrap(), &[0.5, 0.0, 2.0, 0.0]);
    let grads: HashMap<String, Vec<f32>> = exec.grads().into_iter().collect();
    assert_eq!(grads["b"], vec![0.0, 0.25, 0.0, 4.0]);
}
