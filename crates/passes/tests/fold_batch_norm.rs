//! `fold_batch_norm`: hand-computed folds, the float model before and after, the affine form,
//! and the formats `quantize` gives a batch norm.

mod common;
use common::*;
use mase_ir::{Graph, NormSpec, Op, ParamStore, Rng, Tensor};
use mase_passes::{run_pass, InputSource, PassContext};
use mase_runtime::{ExecOptions, Executor, Mode};
use serde_json::json;

/// Batch norm statistics no initialisation gives: s = gamma / sqrt(var + eps) = [1, 0.5] and
/// t = beta - mean s = [0, 1] with eps = 1.
fn set_bn(p: &mut ParamStore, target: &str) {
    for (name, v) in [("weight", [2.0, 0.5]), ("bias", [1.0, 0.0]), ("running_mean", [1.0, -2.0]), ("running_var", [3.0, 0.0])] {
        p.set(&format!("{target}.{name}"), Tensor::new(vec![2], v.to_vec()).unwrap()).unwrap();
    }
}

/// `x -> ops... -> output` as `seq_blocks.i`, with the linear `W = [[1, 2], [3, 4]]`, `b =
/// [0.5, -1]` and the batch norm above.
fn two_by_two(ops: Vec<Op>) -> (Graph, PassContext) {
    let mut g = Graph::new();
    let mut v = g.placeholder("x");
    for (i, op) in ops.into_iter().enumerate() {
        v = g.call_module(&format!("seq_blocks.{i}"), op, &[v]);
    }
    g.output(v);
    let mut p = mase_runtime::init_params(&g, &mut Rng::new(1));
    for n in g.nodes() {
        match n.op {
            Op::Linear { .. } => {
                p.set(&format!("{}.weight", n.target), Tensor::new(vec![2, 2], vec![1.0, 2.0, 3.0, 4.0]).unwrap()).unwrap();
                p.set(&format!("{}.bias", n.target), Tensor::new(vec![2], vec![0.5, -1.0]).unwrap()).unwrap();
            }
            Op::BatchNorm1d(_) => set_bn(&mut p, &n.target),
            _ => {}
        }
    }
    let mut ctx = PassContext::new(p);
    ctx.inputs = InputSource::Random { sample_shape: vec![2] };
    (g, ctx)
}

fn bn(eps: f32) -> Op {
    Op::BatchNorm1d(NormSpec { eps, ..NormSpec::new(2) })
}

fn lin() -> Op {
    Op::Linear { in_features: 2, out_features: 2, bias: true }
}

fn values(p: &ParamStore, name: &str) -> Vec<f32> {
    p.get(name).unwrap_or_else(|| panic!("{name} missing")).data.clone()
}

#[test]
fn folds_are_the_hand_computed_weights() {
    // One line per case: the graph, the nodes left, then the expected tensors by name.
    type Case = (Vec<Op>, &'static [&'static str], &'static [(&'static str, &'static [f32])]);
    let cases: Vec<Case> = vec![
        // After the linear: W' = s_o W_o = [[1, 2], [1.5, 2]], b' = s b + t = [0.5, 0.5].
        (
            vec![lin(), bn(1.0)],
            &["x", "seq_blocks_0", "output"],
            &[("seq_blocks.0.weight", &[1.0, 2.0, 1.5, 2.0]), ("seq_blocks.0.bias", &[0.5, 0.5])],
        ),
        // Before the linear: W' = W diag(s) = [[1, 1], [3, 2]], b' = b + W t = [2.5, 3].
        (
            vec![bn(1.0), lin()],
            &["x", "seq_blocks_1", "output"],
            &[("seq_blocks.1.weight", &[1.0, 1.0, 3.0, 2.0]), ("seq_blocks.1.bias", &[2.5, 3.0])],
        ),
        // After a relu, with nothing after it to fold into: the affine form.
        (
            vec![lin(), Op::Relu, bn(1.0)],
            &["x", "seq_blocks_0", "seq_blocks_1", "seq_blocks_2", "output"],
            &[
                ("seq_blocks.2.weight", &[1.0, 0.5]),
                ("seq_blocks.2.bias", &[0.0, 1.0]),
                ("seq_blocks.2.running_mean", &[0.0, 0.0]),
                ("seq_blocks.2.running_var", &[1.0, 1.0]),
                ("seq_blocks.0.weight", &[1.0, 2.0, 3.0, 4.0]),
            ],
        ),
    ];
    for (ops, nodes, want) in cases {
        let label = format!("{ops:?}");
        let (mut g, mut ctx) = two_by_two(ops);
        pass("fold_batch_norm", &mut g, &mut ctx, json!(null));
        let names: Vec<&str> = g.nodes().iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, nodes, "{label}");
        for (name, v) in want {
            assert_eq!(values(&ctx.params, name), *v, "{label}: {name}");
        }
        // The parameters are exactly the graph's (a checkpoint would load).
        mase_ir::validate(&g, Some(&ctx.params)).unwrap();
    }
}

#[test]
fn an_affine_batch_norm_has_eps_zero_and_computes_s_x_plus_t() {
    let (mut g, mut ctx) = two_by_two(vec![lin(), Op::Relu, bn(1.0)]);
    let r = pass("fold_batch_norm", &mut g, &mut ctx, json!(null));
    assert_eq!((r.json["folded"].clone(), r.json["affine"].clone()), (json!(0), json!(1)));
    assert_eq!(r.json["changes"][0], json!({"node": "seq_blocks_2", "action": "affine", "into": null}));
    let Op::BatchNorm1d(spec) = &g.node(g.require("seq_blocks_2").unwrap()).op else { panic!("not a batch norm") };
    assert_eq!(spec.eps, 0.0);
    // x = [1, -1]: linear [0.5 + 1 - 2, -1 + 3 - 4] = [-0.5, -2], relu [0, 0], affine [0, 1].
    // x = [1, 1]: [3.5, 6], relu, affine [3.5, 4].
    let mut e = Executor::new(&g, &ctx.params, ExecOptions { threads: 1, seed: 0 }).unwrap();
    let y = e.forward(&[1.0, -1.0, 1.0, 1.0], &[2, 2], Mode::Eval).unwrap();
    assert_eq!(y, &[0.0, 1.0, 3.5, 4.0]);
}

/// Sets every batch norm's statistics and affine parameters to seeded values far from the
/// initial ones, so folding has something to fold.
fn perturb_batch_norms(g: &Graph, p: &mut ParamStore) {
    let mut rng = Rng::new(11);
    for n in g.nodes() {
        if let Op::BatchNorm1d(s) | Op::BatchNorm2d(s) = &n.op {
            let c = s.num_features;
            let mut draw = |f: &dyn Fn(f64) -> f64| (0..c).map(|_| f(rng.normal()) as f32).collect::<Vec<_>>();
            let vals = [draw(&|z| 1.0 + 0.3 * z), draw(&|z| 0.2 * z), draw(&|z| 0.5 * z), draw(&|z| (0.5 * z).exp())];
            for (name, v) in ["weight", "bias", "running_mean", "running_var"].iter().zip(vals) {
                p.set(&format!("{}.{name}", n.target), Tensor::new(vec![c], v).unwrap()).unwrap();
            }
        }
    }
}

#[test]
fn folded_models_compute_the_float_model() {
    // One line per model: sample shape, classes, batch norms folded, kept as affines.
    let cases: &[(&str, &[usize], usize, usize, usize)] = &[
        ("jsc-tiny", &[16], 5, 0, 1),
        ("jsc-toy", &[16], 5, 3, 1),
        ("jsc-s", &[16], 5, 2, 1),
        ("jsc-three-layer", &[16], 5, 0, 0),
        ("tfc", &[1, 28, 28], 10, 3, 0),
        ("mnist-cnn", &[1, 28, 28], 10, 0, 0),
    ];
    for &(name, sample, classes, folded, affine) in cases {
        let (mut g, mut ctx) = model(name, sample, classes);
        perturb_batch_norms(&g, &mut ctx.params);
        let n = 8;
        let mut rng = Rng::new(3);
        let x: Vec<f32> = (0..n * sample.iter().product::<usize>()).map(|_| rng.normal() as f32).collect();
        let shape: Vec<usize> = [n].iter().chain(sample).copied().collect();
        let before =
            Executor::new(&g, &ctx.params, ExecOptions { threads: 1, seed: 0 }).unwrap().forward(&x, &shape, Mode::Eval).unwrap().to_vec();
        let r = pass("fold_batch_norm", &mut g, &mut ctx, json!(null));
        assert_eq!((r.json["folded"].as_u64(), r.json["affine"].as_u64()), (Some(folded as u64), Some(affine as u64)), "{name}");
        let bns = g.nodes().iter().filter(|n| matches!(n.op, Op::BatchNorm1d(_) | Op::BatchNorm2d(_))).count();
        assert_eq!(bns, affine, "{name}: batch norms left");
        mase_ir::validate(&g, Some(&ctx.params)).unwrap();
        let after =
            Executor::new(&g, &ctx.params, ExecOptions { threads: 1, seed: 0 }).unwrap().forward(&x, &shape, Mode::Eval).unwrap().to_vec();
        let scale = before.iter().fold(0f32, |m, v| m.max(v.abs()));
        for (i, (a, b)) in before.iter().zip(&after).enumerate() {
            assert!((a - b).abs() <= 1e-5 * scale.max(1.0), "{name}: output {i}: {a} before, {b} after");
        }
        // Running the pass again changes nothing but re-derives the same affines.
        let again = pass("fold_batch_norm", &mut g, &mut ctx, json!(null));
        assert_eq!((again.json["folded"].as_u64(), again.json["affine"].as_u64()), (Some(0), Some(affine as u64)), "{name}");
    }
}

#[test]
fn quantize_gives_a_batch_norm_derived_weight_and_bias_formats() {
    // jsc-tiny's batch norm stays as an affine with s = [1, 0.5, ...]; quantize gives it 8-bit
    // data_in and derives the weight and bias formats from the largest magnitudes.
    let (mut g, mut ctx) = jsc_tiny();
    perturb_batch_norms(&g, &mut ctx.params);
    pass("fold_batch_norm", &mut g, &mut ctx, json!(null));
    let q = json!({"by": "type", "default": {"config": {"name": "NA"}},
        "batch_norm1d": {"config": {"name": "integer", "data_in_width": 8, "data_in_frac_width": 4}}});
    let r = pass("quantize", &mut g, &mut ctx, q);
    assert_eq!(r.json["quantized"], 1);
    let node = g.node(g.require("seq_blocks_0").unwrap());
    let quant = node.quant.as_ref().unwrap();
    for (name, f) in [("weight", &quant.weight), ("bias", &quant.bias)] {
        let max = values(&ctx.params, &format!("seq_blocks.0.{name}")).iter().fold(0f64, |m, &v| m.max(f64::from(v).abs()));
        let Some(mase_ir::QuantFormat::Integer { width, frac_width, signed }) = f.clone() else { panic!("{name}: {f:?}") };
        assert_eq!((width, frac_width, signed), (8, mase_passes::quantize::frac_for(max, 8), true), "{name}");
        // The most fraction bits: the largest value fits, one more bit would clamp it.
        assert!((max * 2f64.powi(frac_width)).round() <= 127.0 && (max * 2f64.powi(frac_width + 1)).round() > 127.0, "{name}: {max}");
    }
}

#[test]
fn derived_fraction_bits_are_hand_computed() {
    // One line per case: largest magnitude, width, fraction bits.
    let cases = [(1.0, 8, 6), (0.3, 8, 8), (100.0, 8, 0), (127.4, 8, 0), (127.6, 8, -1), (0.0, 8, 7), (3.0, 4, 1)];
    for (max, width, frac) in cases {
        assert_eq!(mase_passes::quantize::frac_for(max, width), frac, "{max} in {width} bits");
    }
}

#[test]
fn fold_errors_are_one_line() {
    // A batch norm quantized before folding would lose its formats.
    let (mut g, mut ctx) = two_by_two(vec![lin(), bn(1.0)]);
    let q = json!({"by": "type", "batch_norm1d": {"config": {"name": "integer", "data_in_width": 8, "data_in_frac_width": 4}}});
    pass("quantize", &mut g, &mut ctx, q);
    let e = run_pass("fold_batch_norm", &mut g, &mut ctx, &json!(null)).unwrap_err().to_string();
    assert_eq!(
        e,
        "pass `fold_batch_norm`: node `seq_blocks_1`: has number formats and would be folded away; run fold_batch_norm before quantize"
    );
    let e = run_pass("fold_batch_norm", &mut g, &mut ctx, &json!({"width": 8})).unwrap_err().to_string();
    assert!(e.starts_with("pass `fold_batch_norm`: bad arguments: unknown field `width`") && !e.contains('\n'), "{e}");
}
