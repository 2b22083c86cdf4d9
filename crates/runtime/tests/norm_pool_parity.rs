//! Layer norm, group norm and the pools' `ceil_mode`, padding and `count_include_pad` against
//! PyTorch: outputs, input gradients and parameter gradients.
//!
//! `tests/fixtures/norm_pool_ops.txt` (made by `scripts/make_norm_pool_references.py`) holds,
//! per case, an input (ordinary values, odd sizes whose last `ceil_mode` window is partial, rows
//! and windows holding NaN and infinities), the parameters, PyTorch's output, an output
//! gradient and PyTorch's gradients. Each line of the table below builds the one-op graph of a
//! case. NaN must meet NaN and an infinity the same infinity; finite values agree to 1e-5
//! relative (the runtime sums statistics in f64, PyTorch in f32).

mod common;

use common::read_text_fixture;
use mase_ir::{Graph, Op, ParamStore, PoolSpec, Tensor};
use mase_runtime::{ExecOptions, Executor, Mode};
use std::collections::HashMap;

type Fixture = HashMap<String, Vec<f32>>;

/// How a case's graph uses its op.
enum Form {
    /// `m(x)`, the module's parameters from the fixture.
    Module(Op),
    /// `F.<op>(x, ..., weight, bias)` with the weight and bias as trainable constants.
    Function(Op),
}

fn shape(fx: &Fixture, key: &str) -> Vec<usize> {
    fx[key].iter().map(|&v| v as usize).collect()
}

/// The one-op graph of a case, and the state-dict name of each fixture parameter.
fn build(fx: &Fixture, case: &str, form: Form) -> (Graph, ParamStore, Vec<(String, String)>) {
    let mut g = Graph::new();
    let mut params = ParamStore::new();
    let mut names = Vec::new();
    let x = g.placeholder("x");
    let y = match form {
        Form::Module(op) => {
            let y = g.call_module("m", op, &[x]);
            for (name, spec) in g.param_specs() {
                let local = name.strip_prefix("m.").expect("module parameters live under m.").to_string();
                let data = fx[&format!("{case}.p.{local}")].clone();
                params.insert(name.clone(), Tensor::new(spec.shape.clone(), data).expect("parameter size"), spec.trainable);
                names.push((local, name));
            }
            y
        }
        Form::Function(op) => {
            let mut ins = vec![x];
            for local in ["weight", "bias"] {
                let Some(data) = fx.get(&format!("{case}.p.{local}")) else { continue };
                let shape = match &op {
                    Op::LayerNorm { normalized_shape, .. } => normalized_shape.clone(),
                    _ => vec![data.len()],
                };
                params.insert(local, Tensor::new(shape, data.clone()).expect("parameter size"), true);
                ins.push(g.get_attr(local));
                names.push((local.to_string(), local.to_string()));
            }
            g.call_function(&format!("torch.nn.functional.{}", op.mase_op()), op, &ins)
        }
    };
    g.output(y);
    (g, params, names)
}

/// Whether `got` is `want` in the sense of the module docs.
fn same(got: f32, want: f32) -> bool {
    if want.is_nan() || got.is_nan() {
        return want.is_nan() && got.is_nan();
    }
    if want.is_infinite() {
        return got == want;
    }
    (got - want).abs() <= 1e-5 * want.abs().max(1.0)
}

/// The mismatches of `got` against `want`, as one line, or `None`.
fn compare(case: &str, what: &str, got: &[f32], want: &[f32]) -> Option<String> {
    common::mismatches(case, what, got, want, same)
}

/// Runs one case forward and backward and returns its mismatches.
fn check(fx: &Fixture, case: &str, form: Form) -> Vec<String> {
    let (g, params, names) = build(fx, case, form);
    let mut exec = Executor::new(&g, &params, ExecOptions { threads: 1, seed: 0 }).unwrap_or_else(|e| panic!("{case}: {e}"));
    exec.set_keep_input_grad(true);
    let x = &fx[&format!("{case}.x")];
    let y = exec.forward(x, &shape(fx, &format!("{case}.shape")), Mode::Train).unwrap_or_else(|e| panic!("{case}: {e}")).to_vec();
    let mut bad: Vec<String> = compare(case, "y", &y, &fx[&format!("{case}.y")]).into_iter().collect();
    exec.backward(&fx[&format!("{case}.dy")]).unwrap_or_else(|e| panic!("{case}: {e}"));
    bad.extend(compare(case, "dx", exec.input_grad().expect("input gradient kept"), &fx[&format!("{case}.dx")]));
    let grads = exec.grads();
    for (local, name) in names {
        let grad = grads.iter().find(|(n, _)| *n == name).unwrap_or_else(|| panic!("{case}: no gradient for {name}"));
        bad.extend(compare(case, &format!("g.{local}"), &grad.1, &fx[&format!("{case}.g.{local}")]));
    }
    bad
}

fn layer_norm(shape: &[usize], eps: f32, affine: bool, bias: bool) -> Op {
    Op::LayerNorm { normalized_shape: shape.to_vec(), eps, elementwise_affine: affine, bias }
}

fn group_norm(groups: usize, channels: usize, affine: bool) -> Op {
    Op::GroupNorm { num_groups: groups, num_channels: channels, eps: 1e-5, affine, bias: affine }
}

/// A window of `k` and stride `s` with padding `p` over `dims` dimensions; `ceil_mode` and
/// `count_include_pad` as given.
fn window(dims: usize, k: usize, s: usize, p: usize, ceil_mode: bool, count_include_pad: bool) -> PoolSpec {
    PoolSpec { ceil_mode, count_include_pad, ..PoolSpec::window(vec![k; dims], vec![s; dims], vec![p; dims]) }
}

#[test]
fn norms_and_pools_match_pytorch() {
    use Form::{Function as F, Module as M};
    let fx = read_text_fixture("norm_pool_ops.txt");
    let cases: Vec<(&str, Form)> = vec![
        ("ln", M(layer_norm(&[5], 1e-5, true, true))),
        ("ln_2d", M(layer_norm(&[3, 4], 1e-5, true, false))),
        ("ln_plain", M(layer_norm(&[6], 1e-5, false, false))),
        ("ln_fn", F(layer_norm(&[4], 1e-6, false, false))),
        ("ln_nonfinite", M(layer_norm(&[4], 1e-5, true, true))),
        ("gn", M(group_norm(2, 4, true))),
        ("gn_per_channel", M(group_norm(3, 3, true))),
        ("gn_one_group", M(group_norm(1, 6, false))),
        ("gn_fn", F(group_norm(2, 4, false))),
        ("gn_nonfinite", M(group_norm(2, 4, true))),
        ("mp_ceil", M(Op::MaxPool2d(window(2, 3, 2, 0, true, true)))),
        ("mp_ceil_even", M(Op::MaxPool2d(window(2, 3, 2, 0, true, true)))),
        ("mp1_ceil_pad", M(Op::MaxPool1d(window(1, 2, 2, 1, true, true)))),
        ("mp_ceil_nonfinite", M(Op::MaxPool2d(window(2, 3, 2, 0, true, true)))),
        ("ap_ceil", M(Op::AvgPool2d(window(2, 3, 2, 0, true, true)))),
        ("ap_ceil_pad", M(Op::AvgPool2d(window(2, 3, 2, 1, true, true)))),
        ("ap_no_pad_count", M(Op::AvgPool2d(window(2, 3, 2, 1, false, false)))),
        ("ap_ceil_no_pad_count", M(Op::AvgPool2d(window(2, 3, 2, 1, true, false)))),
        ("ap1_ceil_no_pad_count", M(Op::AvgPool1d(window(1, 3, 2, 1, true, false)))),
        ("aap_7x5_to_3x4", M(Op::AdaptiveAvgPool2d { output_size: [3, 4] })),
        ("aap1_10_to_4", M(Op::AdaptiveAvgPool1d { output_size: 4 })),
        ("amp_7x5_to_3x4", M(Op::AdaptiveMaxPool2d { output_size: [3, 4] })),
        ("amp1_10_to_4_nonfinite", M(Op::AdaptiveMaxPool1d { output_size: 4 })),
    ];
    let bad: Vec<String> = cases.into_iter().flat_map(|(case, form)| check(&fx, case, form)).collect();
    assert!(bad.is_empty(), "{} mismatches:\n{}", bad.len(), bad.join("\n"));
}
