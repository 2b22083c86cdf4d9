//! The `channel_multiplier` transform: widths derived from the graph, parameter counts worked
//! out by hand or in closed form, PyTorch-style initialisation, kept weights, training and
//! gradients of the widened model, and the configs it must refuse.

mod common;

use common::{model, pass};
use mase_io::{load_dataset, DataOptions};
use mase_ir::{Graph, NormSpec, Op, ParamStore, Rng};
use mase_passes::{run_pass, PassContext};
use mase_runtime::{ExecOptions, Executor, Mode, Optimizer, OptimizerKind};
use serde_json::{json, Value};

/// MASE lab 4's three configs on jsc-three-linear, with the two multipliers of the output sides.
fn lab4(m2: usize, m4: usize) -> Value {
    json!({
        "by": "name",
        "default": {"config": {"name": "NA"}},
        "seq_blocks_2": {"config": {"name": "output_only", "channel_multiplier": m2}},
        "seq_blocks_4": {"config": {"name": "both", "channel_multiplier": m4}},
        "seq_blocks_6": {"config": {"name": "input_only"}},
    })
}

fn linear_shapes(g: &Graph) -> Vec<(String, usize, usize)> {
    g.nodes()
        .iter()
        .filter_map(|n| match n.op {
            Op::Linear { in_features, out_features, .. } => Some((n.name.clone(), in_features, out_features)),
            _ => None,
        })
        .collect()
}

fn trainable(p: &ParamStore) -> usize {
    p.trainable_count()
}

#[test]
fn jsc_three_linear_with_multipliers_2_and_4() {
    let (mut g, mut ctx) = model("jsc-three-linear", &[16], 5);
    assert_eq!(trainable(&ctx.params), 661);
    let r = pass("channel_multiplier", &mut g, &mut ctx, lab4(2, 4));
    let want = vec![("seq_blocks_2".to_string(), 16, 32), ("seq_blocks_4".to_string(), 32, 64), ("seq_blocks_6".to_string(), 64, 5)];
    assert_eq!(linear_shapes(&g), want);
    // BN(16): 32; Linear(16, 32): 16*32 + 32; Linear(32, 64): 32*64 + 64; Linear(64, 5): 64*5 + 5.
    let by_hand = 32 + (16 * 32 + 32) + (32 * 64 + 64) + (64 * 5 + 5);
    assert_eq!(by_hand, 3013);
    assert_eq!(trainable(&ctx.params), by_hand);
    assert_eq!(mase_zoo::trainable_params(&g), by_hand);
    assert_eq!(r.json["trainable_params_before"], 661);
    assert_eq!(r.json["trainable_params_after"], 3013);
    let changed: Vec<&str> = r.json["changed"].as_array().unwrap().iter().map(|c| c["node"].as_str().unwrap()).collect();
    assert_eq!(changed, ["seq_blocks_2", "seq_blocks_4", "seq_blocks_6"]);
    assert_eq!(r.json["changed"][1]["after"], "Linear(in_features=32, out_features=64, bias=True)");
    // Every parameter has the shape the new graph asks for, in state-dict order.
    let specs: Vec<(String, Vec<usize>)> = g.param_specs().into_iter().map(|(n, s)| (n, s.shape)).collect();
    let stored: Vec<(String, Vec<usize>)> = ctx.params.iter().map(|(n, e)| (n.to_string(), e.tensor.shape.clone())).collect();
    assert_eq!(specs, stored);
}

#[test]
fn widths_follow_the_producer_for_every_multiplier_pair() {
    // (m2, m4) -> the three Linear shapes and the parameter count, all from the formula
    // 32 + (16 a + a) + (a b + b) + (5 b + 5) with a = 16 m2, b = 16 m4.
    for (m2, m4) in [(1, 1), (1, 10), (6, 1), (8, 2), (10, 10)] {
        let (mut g, mut ctx) = model("jsc-three-linear", &[16], 5);
        pass("channel_multiplier", &mut g, &mut ctx, lab4(m2, m4));
        let (a, b) = (16 * m2, 16 * m4);
        let shapes: Vec<(usize, usize)> = linear_shapes(&g).into_iter().map(|(_, i, o)| (i, o)).collect();
        assert_eq!(shapes, [(16, a), (a, b), (b, 5)], "m2={m2} m4={m4}");
        assert_eq!(trainable(&ctx.params), 32 + 17 * a + a * b + b + 5 * b + 5, "m2={m2} m4={m4}");
    }
}

/// `sum(r * forward_train(x))` in f64 with a fresh executor.
fn functional(g: &Graph, p: &ParamStore, x: &[f32], shape: &[usize], r: &[f32]) -> f64 {
    let mut exec = Executor::new(g, p, ExecOptions { threads: 1, seed: 3 }).unwrap();
    let y = exec.forward(x, shape, Mode::Train).unwrap();
    y.iter().zip(r).map(|(a, b)| f64::from(*a) * f64::from(*b)).sum()
}

#[test]
fn widened_model_trains_and_its_gradients_match_finite_differences() {
    let (mut g, mut ctx) = model("jsc-three-linear", &[16], 5);
    pass("channel_multiplier", &mut g, &mut ctx, lab4(2, 4));
    let mut rng = Rng::new(5);
    let (n, f) = (6, 16);
    let shape = [n, f];
    let x: Vec<f32> = (0..n * f).map(|_| rng.normal() as f32).collect();

    // Gradients: the loss is sum(R * y), so dL/dy = R; every parameter of the widened layers is
    // compared with a central difference. A step that moves a ReLU input across 0 shows as
    // one-sided differences that disagree; such entries (a handful) are counted, not compared.
    let mut exec = Executor::new(&g, &ctx.params, ExecOptions { threads: 1, seed: 3 }).unwrap();
    let out_len = exec.forward(&x, &shape, Mode::Train).unwrap().len();
    let r: Vec<f32> = (0..out_len).map(|_| rng.normal() as f32).collect();
    exec.backward(&r).unwrap();
    let f0 = functional(&g, &ctx.params, &x, &shape, &r);
    let eps = 2e-3f32;
    let (mut checked, mut kinks) = (0, 0);
    for (name, grad) in exec.grads() {
        if !name.starts_with("seq_blocks.2") && !name.starts_with("seq_blocks.4") && !name.starts_with("seq_blocks.6") {
            continue;
        }
        let sides: Vec<(f64, f64)> = (0..grad.len())
            .map(|i| {
                let at = |e: f32| {
                    let mut p = ctx.params.clone();
                    p.get_mut(&name).unwrap().data[i] += e;
                    functional(&g, &p, &x, &shape, &r)
                };
                ((at(eps) - f0) / f64::from(eps), (f0 - at(-eps)) / f64::from(eps))
            })
            .collect();
        let scale = sides.iter().fold(0.0f64, |m, (a, b)| m.max(a.abs()).max(b.abs())).max(1e-3);
        for (i, (a, (up, down))) in grad.iter().zip(&sides).enumerate() {
            let num = 0.5 * (up + down);
            let tol = 2e-2 * num.abs() + 5e-3 * scale;
            checked += 1;
            if (up - down).abs() > tol {
                kinks += 1;
                continue;
            }
            assert!((f64::from(*a) - num).abs() <= tol, "d/d {name}[{i}]: analytic {a}, numeric {num}");
        }
    }
    assert!(kinks * 100 <= checked, "{kinks} of {checked} steps crossed a kink");
    assert_eq!(checked, (16 * 32 + 32) + (32 * 64 + 64) + (64 * 5 + 5));

    // Training: 8 epochs of Adam on the jsc fixture take the widened model well above chance (20 %).
    let splits = load_dataset("jsc", &DataOptions { data_dir: Some(io_fixtures()), ..Default::default() }).unwrap();
    let mut exec = Executor::new(&g, &ctx.params, ExecOptions { threads: 1, seed: 3 }).unwrap();
    let mut opt = Optimizer::new(OptimizerKind::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 }, 1e-2);
    let (mut xb, mut yb) = (Vec::new(), Vec::new());
    for epoch in 0..8 {
        for idx in mase_io::batch_order(splits.train.len(), 64, Some(&mut Rng::new(epoch))) {
            splits.train.gather(&idx, &mut xb, &mut yb);
            exec.train_step(&xb, &[idx.len(), 16], &yb, &mut opt).unwrap();
        }
    }
    let all: Vec<usize> = (0..splits.test.len()).collect();
    splits.test.gather(&all, &mut xb, &mut yb);
    let st = exec.eval_batch(&xb, &[all.len(), 16], &yb).unwrap();
    let acc = st.correct as f64 / all.len() as f64;
    assert!(acc > 0.5, "test accuracy {acc}");
}

fn io_fixtures() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../io/tests/fixtures")
}

#[test]
fn new_tensors_are_drawn_as_pytorch_and_keep_weights_keeps_the_old_block() {
    let (g0, ctx0) = model("jsc-three-linear", &[16], 5);
    let widen = |keep: bool, seed: u64| {
        let (mut g, mut ctx) = (g0.clone(), PassContext { seed, ..ctx0.clone() });
        let mut args = lab4(2, 4);
        args["keep_weights"] = json!(keep);
        pass("channel_multiplier", &mut g, &mut ctx, args);
        ctx.params
    };
    let fresh = widen(false, 0);
    assert_eq!(fresh, widen(false, 0), "same seed, same bits");
    assert_ne!(fresh.get("seq_blocks.4.weight"), widen(false, 1).get("seq_blocks.4.weight"));
    // Fresh tensors: U(-1/sqrt(fan_in), 1/sqrt(fan_in)) with the new fan-in (32 for seq_blocks.4,
    // 64 for seq_blocks.6), spread over most of the interval.
    for (name, fan_in) in
        [("seq_blocks.2.weight", 16.0f32), ("seq_blocks.4.weight", 32.0), ("seq_blocks.4.bias", 32.0), ("seq_blocks.6.weight", 64.0)]
    {
        let t = fresh.get(name).unwrap();
        let bound = 1.0 / fan_in.sqrt();
        let max = t.data.iter().fold(0.0f32, |m, v| m.max(v.abs()));
        assert!(max <= bound && max > 0.8 * bound, "{name}: max |w| {max}, bound {bound}");
    }
    // Unchanged tensors (the input batch norm) are the old ones.
    assert_eq!(fresh.get("seq_blocks.0.weight"), ctx0.params.get("seq_blocks.0.weight"));

    let kept = widen(true, 0);
    for name in ["seq_blocks.2.weight", "seq_blocks.2.bias", "seq_blocks.4.weight", "seq_blocks.4.bias", "seq_blocks.6.weight"] {
        let (old, new) = (ctx0.params.get(name).unwrap(), kept.get(name).unwrap());
        let (rows, cols) = (old.shape[0], old.shape.get(1).copied().unwrap_or(1));
        let new_cols = new.shape.get(1).copied().unwrap_or(1);
        for r in 0..rows {
            assert_eq!(&new.data[r * new_cols..r * new_cols + cols], &old.data[r * cols..(r + 1) * cols], "{name} row {r}");
        }
    }
    // The last layer's bias keeps its shape, so it is the old tensor in both modes.
    assert_eq!(kept.get("seq_blocks.6.bias"), ctx0.params.get("seq_blocks.6.bias"));
    // With kept weights, the first 16 outputs of the widened seq_blocks_2 are the old layer's.
    let mut g = g0.clone();
    let mut ctx = ctx0.clone();
    let mut args = lab4(2, 1);
    args["keep_weights"] = json!(true);
    args["seq_blocks_4"] = json!({"config": {"name": "input_only"}});
    args["seq_blocks_6"] = json!({"config": {"name": "NA"}});
    pass("channel_multiplier", &mut g, &mut ctx, args);
    let x: Vec<f32> = (0..4 * 16).map(|i| (i as f32 * 0.37).sin()).collect();
    let value = |g: &Graph, p: &ParamStore, node: &str| {
        let mut e = Executor::new(g, p, ExecOptions { threads: 1, seed: 0 }).unwrap();
        e.forward(&x, &[4, 16], Mode::Eval).unwrap();
        let (shape, v) = e.value(g.find(node).unwrap()).unwrap();
        (shape.to_vec(), v.to_vec())
    };
    let (s_old, v_old) = value(&g0, &ctx0.params, "seq_blocks_2");
    let (s_new, v_new) = value(&g, &ctx.params, "seq_blocks_2");
    assert_eq!((s_old, s_new), (vec![4, 16], vec![4, 32]));
    for b in 0..4 {
        assert_eq!(&v_new[b * 32..b * 32 + 16], &v_old[b * 16..(b + 1) * 16], "sample {b}");
    }
}

/// Conv widths of vgg7 for multipliers `m` of its six convolutions.
fn vgg7_widths(m: [usize; 6]) -> [usize; 6] {
    let base = [128, 128, 256, 256, 512, 512];
    std::array::from_fn(|i| base[i] * m[i])
}

/// Trainable parameters of vgg7 in closed form: each conv `9 c_in c_out + c_out`, its batch norm
/// `2 c_out`, the classifier `16 c_6 * 1024 + 1024`, `1024 * 1024 + 1024` and `1024 * 10 + 10`.
fn vgg7_params(m: [usize; 6]) -> usize {
    let c = vgg7_widths(m);
    let mut total = 0;
    let mut cin = 3;
    for &co in &c {
        total += 9 * cin * co + co + 2 * co;
        cin = co;
    }
    total + (16 * c[5] * 1024 + 1024) + (1024 * 1024 + 1024) + (1024 * 10 + 10)
}

/// A vgg7 config: the first conv `output_only`, the other five `both`, the classifier follows.
fn vgg7_config(m: [usize; 6]) -> Value {
    let convs = ["feature_layers_0", "feature_layers_3", "feature_layers_7", "feature_layers_10", "feature_layers_14", "feature_layers_17"];
    let mut cfg = json!({"by": "name", "classifier_0": {"config": {"name": "input_only"}}});
    for (i, (name, mult)) in convs.iter().zip(m).enumerate() {
        let mode = if i == 0 { "output_only" } else { "both" };
        cfg[*name] = json!({"config": {"name": mode, "channel_multiplier": mult}});
    }
    cfg
}

#[test]
fn vgg7_widened_convs_match_the_closed_form() {
    assert_eq!(vgg7_params([1; 6]), 14_029_450, "the closed form gives the zoo's count");
    let (g0, ctx0) = model("vgg7", &[3, 32, 32], 10);
    assert_eq!(trainable(&ctx0.params), 14_029_450);
    for m in [[2, 1, 1, 1, 1, 1], [1, 2, 1, 2, 1, 1], [1, 1, 1, 1, 1, 2]] {
        let (mut g, mut ctx) = (g0.clone(), ctx0.clone());
        pass("channel_multiplier", &mut g, &mut ctx, vgg7_config(m));
        assert_eq!(trainable(&ctx.params), vgg7_params(m), "{m:?}");
        assert_eq!(mase_zoo::trainable_params(&g), vgg7_params(m), "{m:?}");
        let c = vgg7_widths(m);
        let shapes = g.infer_shapes(&[vec![2, 3, 32, 32]], &|_| None).unwrap();
        let shape_of = |n: &str| shapes[g.find(n).unwrap().0].shape().to_vec();
        assert_eq!(shape_of("feature_layers_1"), [2, c[0], 32, 32], "{m:?}");
        assert_eq!(shape_of("feature_layers_20"), [2, c[5], 4, 4], "{m:?}");
        assert_eq!(shape_of("view"), [2, 16 * c[5]], "{m:?}");
        assert_eq!(shape_of("output"), [2, 10], "{m:?}");
        let bn = &g.node(g.find("feature_layers_15").unwrap()).op;
        assert!(matches!(bn, Op::BatchNorm2d(n) if n.num_features == c[4]), "{bn:?}");
    }
}

#[test]
fn widened_vgg7_takes_a_training_step_on_the_cifar_fixture() {
    let splits = load_dataset("cifar10", &DataOptions { data_dir: Some(io_fixtures()), ..Default::default() }).unwrap();
    let (mut g, mut ctx) = model("vgg7", &[3, 32, 32], 10);
    let m = [2, 1, 1, 1, 1, 1];
    pass("channel_multiplier", &mut g, &mut ctx, vgg7_config(m));
    let idx: Vec<usize> = (0..2).collect();
    let (mut x, mut y) = (Vec::new(), Vec::new());
    splits.train.gather(&idx, &mut x, &mut y);
    let mut exec = Executor::new(&g, &ctx.params, ExecOptions { threads: 0, seed: 0 }).unwrap();
    let mut opt = Optimizer::new(OptimizerKind::Adam { beta1: 0.9, beta2: 0.999, eps: 1e-8, weight_decay: 0.0 }, 1e-4);
    let st = exec.train_step(&x, &[2, 3, 32, 32], &y, &mut opt).unwrap();
    assert!(st.loss.is_finite() && st.count == 2, "{st:?}");
    let after = exec.params();
    assert_eq!(after.get("feature_layers.0.weight").unwrap().shape, [256, 3, 3, 3]);
    assert_ne!(after.get("feature_layers.3.weight"), ctx.params.get("feature_layers.3.weight"), "the step moved the weights");
}

/// `x -> fc1 -> relu -> fc2 -> add(relu, fc2) -> fc3 -> output`: a residual block.
fn residual() -> (Graph, PassContext) {
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let fc1 = g.call_module("fc1", Op::Linear { in_features: 8, out_features: 16, bias: true }, &[x]);
    let r = g.call_module("relu", Op::Relu, &[fc1]);
    let fc2 = g.call_module("fc2", Op::Linear { in_features: 16, out_features: 16, bias: true }, &[r]);
    let add = g.call_function("operator.add", Op::Add, &[r, fc2]);
    let bn = g.call_module("bn", Op::BatchNorm1d(NormSpec::new(16)), &[add]);
    let fc3 = g.call_module("fc3", Op::Linear { in_features: 16, out_features: 4, bias: true }, &[bn]);
    g.output(fc3);
    let params = mase_runtime::init_params(&g, &mut Rng::new(1));
    let mut ctx = PassContext::new(params);
    ctx.inputs = mase_passes::InputSource::Random { sample_shape: vec![8] };
    (g, ctx)
}

#[test]
fn a_residual_add_whose_sides_widen_alike_is_followed() {
    let (mut g, mut ctx) = residual();
    let args = json!({"by": "regex_name", "fc1": {"config": {"name": "output_only", "channel_multiplier": 3}},
                      "fc2": {"config": {"name": "both", "channel_multiplier": 3}}});
    pass("channel_multiplier", &mut g, &mut ctx, args);
    let shapes: Vec<(usize, usize)> = linear_shapes(&g).into_iter().map(|(_, i, o)| (i, o)).collect();
    assert_eq!(shapes, [(8, 48), (48, 48), (48, 4)]);
    assert!(matches!(&g.node(g.find("bn").unwrap()).op, Op::BatchNorm1d(n) if n.num_features == 48));
    let mut e = Executor::new(&g, &ctx.params, ExecOptions { threads: 1, seed: 0 }).unwrap();
    assert_eq!(e.forward(&[0.5; 16], &[2, 8], Mode::Train).unwrap().len(), 8);
}

#[test]
fn inconsistent_configs_are_refused_with_the_node_names() {
    let lin = |name: &str, mode: &str, m: Option<usize>| {
        let mut c = json!({"name": mode});
        if let Some(m) = m {
            c["channel_multiplier"] = json!(m);
        }
        (name.to_string(), json!({"config": c}))
    };
    let by_name = |entries: Vec<(String, Value)>| {
        let mut a = json!({"by": "name"});
        for (k, v) in entries {
            a[k] = v;
        }
        a
    };
    // (model, arguments, words the one-line error must contain)
    let cases: Vec<(&str, Value, Vec<&str>)> = vec![
        (
            "jsc",
            by_name(vec![lin("seq_blocks_2", "input_only", None)]),
            vec!["`seq_blocks_2`", "input_only", "`seq_blocks_1` is not widened"],
        ),
        ("jsc", by_name(vec![lin("seq_blocks_4", "both", Some(2))]), vec!["`seq_blocks_4`", "`both`", "no widened layer feeds it"]),
        (
            "jsc",
            by_name(vec![lin("seq_blocks_2", "output_only", Some(2)), lin("seq_blocks_4", "input_only", Some(4))]),
            vec!["`seq_blocks_4`", "channel_multiplier 4", "`seq_blocks_2` gives it 32"],
        ),
        (
            "jsc",
            by_name(vec![lin("seq_blocks_6", "output_only", Some(2))]),
            vec!["`output`", "[2, 5] to [2, 10]", "widened by `seq_blocks_6`"],
        ),
        (
            "jsc",
            json!({"by": "type", "linear": {"config": {"name": "output_only", "channel_multiplier": 2}}}),
            vec!["`output`", "widened by `seq_blocks_6`"],
        ),
        ("jsc", by_name(vec![lin("seq_blocks_1", "output_only", Some(2))]), vec!["`seq_blocks_1`", "`relu` node cannot be widened"]),
        ("jsc", by_name(vec![lin("seq_blocks_9", "output_only", Some(2))]), vec!["no node named `seq_blocks_9`"]),
        (
            "jsc",
            json!({"by": "type", "relu": {"config": {"name": "output_only", "channel_multiplier": 2}}}),
            vec!["`relu` layers cannot be widened"],
        ),
        ("jsc", by_name(vec![lin("seq_blocks_2", "widen", Some(2))]), vec!["seq_blocks_2.config.name", "\"widen\""]),
        ("jsc", by_name(vec![lin("seq_blocks_2", "output_only", Some(0))]), vec!["channel_multiplier = 0", "positive integer"]),
        ("jsc", by_name(vec![lin("seq_blocks_2", "output_only", None)]), vec!["`output_only` needs a `channel_multiplier`"]),
        (
            "jsc",
            json!({"by": "name", "seq_blocks_2": {"config": {"name": "output_only", "channel_multiplier": 2, "multiplier": 3}}}),
            vec!["seq_blocks_2.config.multiplier", "unknown key"],
        ),
        ("jsc", json!({"seq_blocks_2": {"config": {"name": "output_only", "channel_multiplier": 2}}}), vec!["missing key `by`"]),
        (
            "residual",
            json!({"by": "name", "fc1": {"config": {"name": "output_only", "channel_multiplier": 2}}}),
            vec!["`add`", "`relu` gives [2, 32] (widened by `fc1`)", "`fc2` gives [2, 16] (not widened)"],
        ),
        (
            "residual",
            json!({"by": "name", "fc1": {"config": {"name": "output_only", "channel_multiplier": 2}},
                   "fc2": {"config": {"name": "both", "channel_multiplier": 3}}}),
            vec!["`add`", "[2, 32]", "[2, 48] (widened by `fc2`)"],
        ),
    ];
    for (which, args, words) in cases {
        let (mut g, mut ctx) = if which == "jsc" { model("jsc-three-linear", &[16], 5) } else { residual() };
        let before = (g.clone(), ctx.params.clone());
        let e = run_pass("channel_multiplier", &mut g, &mut ctx, &args).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(!e.is_empty(), "{args}: should be refused");
        assert!(!e.contains('\n'), "{e}");
        for w in words {
            assert!(e.contains(w), "{args}: `{w}` missing from: {e}");
        }
        assert!(before.0 == g && before.1 == ctx.params, "{args}: a refused config leaves the model as it was");
    }
}
