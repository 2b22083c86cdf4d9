//! einsum, matmul, scaled_dot_product_attention and embedding against PyTorch.
//!
//! `tests/fixtures/attention_ops.txt` (made by `scripts/make_attention_references.py`) holds, per
//! case, the inputs, PyTorch's output, an output gradient and PyTorch's gradients. Each line of
//! the table builds the case's one-op graph: input 0 is the graph input, the other inputs are
//! trainable `get_attr` constants (so their gradients are checked as well), and an embedding
//! module's weight is its own parameter. NaN must meet NaN, an infinity or a zero the same bits,
//! and a finite value PyTorch's to within rounding.

mod common;

use common::read_text_fixture;
use mase_ir::{AttnMask, Graph, Op, ParamStore, Tensor};
use mase_runtime::{ExecOptions, Executor, Mode, RuntimeError};
use std::collections::HashMap;

type Fixture = HashMap<String, Vec<f32>>;

fn shape(fx: &Fixture, key: &str) -> Vec<usize> {
    fx[key].iter().map(|&v| v as usize).collect()
}

fn same(got: f32, want: f32) -> bool {
    if want.is_nan() || got.is_nan() {
        return want.is_nan() && got.is_nan();
    }
    if want.is_infinite() {
        return got == want;
    }
    (got - want).abs() <= 1e-5 * want.abs().max(0.1)
}

fn compare(case: &str, what: &str, got: &[f32], want: &[f32]) -> Option<String> {
    common::mismatches(case, what, got, want, same)
}

/// Runs one case forward and backward and returns its mismatches.
fn check(fx: &Fixture, case: &str, op: Op, inputs: usize) -> Vec<String> {
    let mut g = Graph::new();
    let mut params = ParamStore::new();
    let mut ins = vec![g.placeholder("x")];
    for i in 1..inputs {
        let name = format!("c{i}");
        ins.push(g.get_attr(&name));
        let t = Tensor::new(shape(fx, &format!("{case}.shape{i}")), fx[&format!("{case}.in{i}")].clone()).expect("constant size");
        params.insert(name, t, true);
    }
    let module = op.module_class().is_some();
    let y = if module { g.call_module("m", op, &ins) } else { g.call_function("f", op, &ins) };
    g.output(y);
    if module {
        for (name, spec) in g.param_specs() {
            let t = Tensor::new(spec.shape.clone(), fx[&format!("{case}.p.weight")].clone()).expect("weight size");
            params.insert(name, t, true);
        }
    }
    let mut exec = Executor::new(&g, &params, ExecOptions { threads: 1, seed: 0 }).unwrap_or_else(|e| panic!("{case}: {e}"));
    exec.set_keep_input_grad(true);
    let x = &fx[&format!("{case}.in0")];
    let out = exec.forward(x, &shape(fx, &format!("{case}.shape0")), Mode::Train).unwrap_or_else(|e| panic!("{case}: {e}"));
    let mut bad: Vec<String> = compare(case, "y", out, &fx[&format!("{case}.y")]).into_iter().collect();
    exec.backward(&fx[&format!("{case}.dy")]).unwrap_or_else(|e| panic!("{case}: {e}"));
    if let Some(d0) = fx.get(&format!("{case}.d0")) {
        bad.extend(compare(case, "d0", exec.input_grad().expect("input gradient kept"), d0));
    }
    let grads: HashMap<String, Vec<f32>> = exec.grads().into_iter().collect();
    for i in 1..inputs {
        if let Some(want) = fx.get(&format!("{case}.d{i}")) {
            bad.extend(compare(case, &format!("d{i}"), &grads[&format!("c{i}")], want));
        }
    }
    if module {
        bad.extend(compare(case, "dp.weight", &grads["m.weight"], &fx[&format!("{case}.dp.weight")]));
    }
    bad
}

fn einsum(eq: &str) -> Op {
    Op::Einsum { equation: eq.into() }
}

fn sdpa(mask: Option<AttnMask>, is_causal: bool, scale: Option<f32>) -> Op {
    Op::ScaledDotProductAttention { mask, is_causal, scale }
}

#[test]
fn attention_ops_match_pytorch() {
    let fx = read_text_fixture("attention_ops.txt");
    let emb = |padding_idx, functional| Op::Embedding { num_embeddings: 6, embedding_dim: 3, padding_idx, functional };
    let cases: Vec<(&str, Op, usize)> = vec![
        ("einsum_bhqd_bhkd", einsum("bhqd,bhkd->bhqk"), 2),
        ("einsum_bhqk_bhkd", einsum("bhqk,bhkd->bhqd"), 2),
        ("einsum_bij_bjk", einsum("bij,bjk->bik"), 2),
        ("einsum_bqd_kd_to_bkq", einsum("bqd,kd->bkq"), 2),
        ("einsum_implicit_ij_jk", einsum("ij,jk"), 2),
        ("einsum_outer_bi_bj", einsum("bi,bj->bij"), 2),
        ("matmul_4d_by_2d", Op::MatMul, 2),
        ("bmm", Op::MatMul, 2),
        ("sdpa", sdpa(None, false, None), 3),
        ("sdpa_causal", sdpa(None, true, None), 3),
        ("sdpa_causal_more_keys", sdpa(None, true, None), 3),
        ("sdpa_scale", sdpa(None, false, Some(0.3)), 3),
        ("sdpa_bool_mask", sdpa(Some(AttnMask::Bool), false, None), 4),
        ("sdpa_float_mask", sdpa(Some(AttnMask::Additive), false, None), 4),
        ("sdpa_nan_query", sdpa(None, false, None), 3),
        ("embedding_module_padding", emb(Some(3), false), 1),
        ("embedding_function", emb(None, true), 2),
        ("matmul_vector_by_3d", Op::MatMul, 2),
        ("matmul_3d_by_vector", Op::MatMul, 2),
    ];
    let bad: Vec<String> = cases.into_iter().flat_map(|(case, op, n)| check(&fx, case, op, n)).collect();
    assert!(bad.is_empty(), "{} mismatches:\n{}", bad.len(), bad.join("\n"));
}

/// Ids that are not rows of the table stop the run with one line naming the node, the id and
/// where it is, in training and in evaluation.
#[test]
fn embedding_refuses_ids_that_are_not_rows() {
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let e = g.call_module("tok", Op::Embedding { num_embeddings: 4, embedding_dim: 2, padding_idx: None, functional: false }, &[x]);
    g.output(e);
    let params = mase_runtime::init_params(&g, &mut mase_ir::Rng::new(0));
    let mut exec = Executor::new(&g, &params, ExecOptions { threads: 1, seed: 0 }).unwrap();
    let table = [
        (vec![0.0, 1.5, 2.0], "id 1.5 at index 1 of its input is not a whole number in 0..4"),
        (vec![0.0, 1.0, 4.0], "id 4 at index 2 of its input is not a whole number in 0..4"),
        (vec![-1.0, 1.0, 2.0], "id -1 at index 0 of its input is not a whole number in 0..4"),
        (vec![0.0, f32::NAN, 2.0], "id NaN at index 1 of its input is not a whole number in 0..4"),
    ];
    for (ids, want) in table {
        for mode in [Mode::Train, Mode::Eval] {
            let err = exec.forward(&ids, &[1, 3], mode).unwrap_err();
            assert!(matches!(err, RuntimeError::EmbeddingId { .. }));
            assert_eq!(err.to_string(), format!("node `tok` (embedding): {want}"));
        }
    }
    // Whole ids in range run, and give the table's rows.
    let y = exec.forward(&[3.0, 0.0], &[1, 2], Mode::Eval).unwrap().to_vec();
    let w = params.get("tok.weight").unwrap();
    assert_eq!(y, [&w.data[6..8], &w.data[0..2]].concat());
}
