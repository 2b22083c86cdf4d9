//! Lowering, emission and Verilator simulation of quantized jsc networks, checked code for code
//! against the integer executor on the jsc fixture's test split.

mod common;

use common::{have, quantize_graph, quantized, quantized_frac};
use mase_hw::simulate::{self, golden, mismatches};
use mase_hw::synth::{synth, SynthTarget};
use mase_hw::{emit, lower, Design, HwError, LowerOptions, Multipliers, Products, Step};
use mase_ir::{Graph, Op, ParamStore, Rng};
use mase_passes::{run_pass, InputSource, PassContext};
use serde_json::json;
use std::path::PathBuf;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The jsc fixture's splits (a data folder holding only the HDF5 fixture).
fn jsc() -> mase_io::Splits {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("hw_jsc_data");
    std::fs::create_dir_all(dir.join("jsc")).unwrap();
    std::fs::copy(repo_root().join("crates/io/tests/fixtures/jsc/jsc_fixture.h5"), dir.join("jsc/jsc_fixture.h5")).unwrap();
    mase_io::load_dataset("jsc", &mase_io::DataOptions { data_dir: Some(dir), ..Default::default() }).unwrap()
}

fn test_split() -> (Vec<f32>, Vec<usize>, Vec<u32>) {
    let s = jsc();
    (s.test.x.clone(), vec![s.test.len(), 16], s.test.y.clone())
}

fn codes(d: &Design, x: &[f32]) -> Vec<Vec<i64>> {
    x.chunks(d.input_len()).map(|r| d.input_codes(r)).collect()
}

/// One line per case: model, bits and fraction bits of the linears, bits of quantized relus.
const CASES: &[(&str, u32, i32, Option<u32>)] = &[
    ("jsc-three-layer", 8, 4, None),
    ("jsc-three-layer", 4, 3, None),
    ("jsc-three-layer", 8, 4, Some(6)),
    ("jsc-three-layer", 16, 8, None),
];

#[test]
fn the_design_computes_what_the_integer_executor_computes() {
    let (x, shape, _) = test_split();
    for &(model, bits, frac, relu) in CASES {
        let (g, p) = quantized_frac(model, bits, frac, relu);
        let d = lower(&g, &p, model, &LowerOptions::default()).unwrap();
        let want = golden(&g, &p, &d, &x, &shape).unwrap();
        let got: Vec<Vec<i64>> = codes(&d, &x).iter().map(|c| d.eval(c)).collect();
        assert_eq!(mismatches(&want, &got).len(), 0, "{model} at {bits} bits, relu {relu:?}");
        // The outputs are not all equal: the comparison has something to compare.
        assert!(want.iter().any(|r| r != &want[0]), "{model} at {bits} bits: constant outputs");
    }
}

#[test]
fn widths_come_from_the_worst_case_sums() {
    let (g, p) = quantized("jsc-three-layer", 8, None);
    let d = lower(&g, &p, "jsc-three-layer", &LowerOptions::default()).unwrap();
    // First layer: 16 inputs of 8-bit codes (4 fraction bits) times 8-bit weights (4 fraction
    // bits); the bias (4 fraction bits) moves up to the sums' 8.
    let l = &d.layers[0];
    assert_eq!((l.input.lo, l.input.hi, l.input.frac), (-128, 127, 4));
    assert_eq!(l.acc.frac, 8);
    let bound = |j: usize| l.bias[j].abs() + (0..16).map(|k| l.weight[j * 16 + k].abs() * 128).sum::<i64>();
    let worst = (0..l.out_features).map(bound).max().unwrap();
    assert!(l.acc.hi <= worst && -l.acc.lo <= worst, "{:?} within {worst}", l.acc);
    // Not wider than the executor's bound 16 * 128 * 128 + 128 * 2^4 (< 2^18): 19 bits at most.
    assert!(l.acc.width() <= 19, "{}", l.acc.width());
    assert_eq!((d.latency(), d.initiation_interval()), (4, 1));
}

type DesignCase = (usize, &'static [(&'static str, usize)], u64, f64);

/// One line per design: reuse factor of every layer, reuse factors of named layers, expected
/// latency and initiation interval in cycles.
const DESIGNS: &[DesignCase] = &[
    // Four register stages, one sample per cycle.
    (1, &[], 4, 1.0),
    // Every layer folded by 4: 4 + 1 cycles each, a sample every 4 cycles.
    (4, &[], 20, 4.0),
    // Only the 64 -> 32 layer folded by 8: 3 + 9 cycles, a sample every 8.
    (1, &[("seq_blocks_2", 8)], 12, 8.0),
];

#[test]
fn verilator_simulation_is_bit_exact_on_the_test_split() {
    if !have("verilator") {
        return;
    }
    let (x, shape, labels) = test_split();
    let (g, p) = quantized("jsc-three-layer", 8, None);
    let mut reference: Option<Vec<Vec<i64>>> = None;
    for &(default_reuse, named, latency, ii) in DESIGNS {
        let reuse = named.iter().map(|&(n, r)| (n.to_string(), r)).collect();
        let d = lower(&g, &p, "jsc-three-layer", &LowerOptions { reuse, default_reuse, ..Default::default() }).unwrap();
        assert_eq!((d.latency() as u64, d.initiation_interval() as f64), (latency, ii), "reuse {default_reuse} {named:?}");
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("hw_three_layer_8_r{default_reuse}_{}", named.len()));
        let _ = std::fs::remove_dir_all(&dir);
        let m = emit(&d, &dir).unwrap();
        assert_eq!(m["latency_cycles"], latency);
        simulate::build(&dir).unwrap();
        let want = golden(&g, &p, &d, &x, &shape).unwrap();
        let inputs = codes(&d, &x);
        for stall in [0, 12345] {
            let r = simulate::run(&dir, &d, &inputs, stall).unwrap();
            assert_eq!(mismatches(&want, &r.outputs), vec![], "reuse {default_reuse} {named:?}, stall seed {stall}");
            if stall == 0 {
                assert_eq!((r.latency, r.initiation_interval), (latency, ii), "reuse {default_reuse} {named:?}");
            }
            // A folded design and an unrolled one of the same network give the same outputs.
            match &reference {
                Some(first) => assert_eq!(&r.outputs, first),
                None => reference = Some(r.outputs.clone()),
            }
        }
        // The fixture's classes are learnable but these weights are untrained: the accuracy
        // of the simulated outputs is the executor's, whatever it is.
        assert_eq!(simulate::accuracy(&reference.clone().unwrap(), &labels), simulate::accuracy(&want, &labels));
    }
}

#[test]
fn designs_that_cannot_be_built_are_one_line_errors() {
    // jsc-tiny starts with a batch norm and ends with a relu after its linear: the batch norm,
    // not quantized, is named; the relu after it, which only lacks the format the batch norm
    // would have given it, is not.
    let (g, p) = quantized("jsc-tiny", 8, None);
    let e = lower(&g, &p, "jsc-tiny", &LowerOptions::default()).unwrap_err();
    assert!(matches!(e, HwError::NotInteger { .. }), "{e}");
    let text = e.to_string();
    assert_eq!(text, "the graph is not integer end to end: seq_blocks_0 (batch_norm1d): not quantized");
    // 32-bit codes (16 fraction bits) of weights near 2^15 summed over 16 inputs of up to 2^31
    // reach 2^31 * 2^31 * 16 = 2^66: 67 bits.
    let (g, mut p) = quantized("jsc-three-layer", 32, None);
    p.get_mut("seq_blocks.0.weight").unwrap().data.iter_mut().for_each(|w| *w = 40000.0);
    let e = lower(&g, &p, "m", &LowerOptions::default()).unwrap_err();
    assert!(matches!(e, HwError::AccumulatorTooWide { ref node, bits: 67 } if node == "seq_blocks_0"), "{e}");
    // A reuse factor must divide the layer's inputs (16 for the first layer).
    let (g, p) = quantized("jsc-three-layer", 8, None);
    let e =
        lower(&g, &p, "m", &LowerOptions { reuse: vec![("seq_blocks_0".into(), 3)], default_reuse: 1, ..Default::default() }).unwrap_err();
    assert_eq!(e.to_string(), "node `seq_blocks_0`: reuse factor 3 does not divide its 16 inputs per output");
    // Folded: jsc-toy's first linear (after the batch norm and relu) has 16 inputs; 16 divides
    // them but not the second linear's 8.
    let (g, p) = folded("jsc-toy", 8, 4);
    let e = lower(&g, &p, "m", &LowerOptions { reuse: vec![], default_reuse: 16, ..Default::default() }).unwrap_err();
    assert_eq!(e.to_string(), "node `seq_blocks_5`: reuse factor 16 does not divide its 8 inputs per output");
    // A float node left: the batch norm folding keeps, without formats.
    let (mut g, p) = folded("jsc-toy", 8, 4);
    g.node_mut(g.require("seq_blocks_0").unwrap()).quant = None;
    let e = lower(&g, &p, "m", &LowerOptions::default()).unwrap_err().to_string();
    assert_eq!(e, "the graph is not integer end to end: seq_blocks_0 (batch_norm1d): not quantized");
    // A batch norm quantized but not folded: its running statistics are float.
    let (g, p) = quantized("jsc-tiny", 8, None);
    let mut g = g;
    let q = json!({"by": "type", "batch_norm1d": {"config": {"name": "integer", "data_in_width": 8, "data_in_frac_width": 4}}});
    let mut cx = PassContext::new(p);
    run_pass("quantize", &mut g, &mut cx, &q).unwrap();
    let e = lower(&g, &cx.params, "m", &LowerOptions::default()).unwrap_err().to_string();
    assert!(e.starts_with("the graph is not integer end to end: seq_blocks_0 (batch_norm1d): a batch norm with running statistics (run fold_batch_norm first)"), "{e}");
    // The accumulator of a folded layer over 64 bits.
    let (g, mut p) = folded("jsc-toy", 32, 16);
    p.get_mut("seq_blocks.2.weight").unwrap().data.iter_mut().for_each(|w| *w = 40000.0);
    let e = lower(&g, &p, "m", &LowerOptions::default()).unwrap_err();
    assert!(matches!(e, HwError::AccumulatorTooWide { ref node, .. } if node == "seq_blocks_2"), "{e}");
}

/// Sets every batch norm's statistics and affine parameters to seeded values far from the
/// initial ones (untrained batch norms would be identities).
fn perturb_batch_norms(g: &Graph, p: &mut ParamStore) {
    let mut rng = Rng::new(11);
    for n in g.nodes() {
        if let Op::BatchNorm1d(s) | Op::BatchNorm2d(s) = &n.op {
            let c = s.num_features;
            let mut draw = |f: &dyn Fn(f64) -> f64| (0..c).map(|_| f(rng.normal()) as f32).collect::<Vec<_>>();
            let vals = [draw(&|z| 1.0 + 0.3 * z), draw(&|z| 0.2 * z), draw(&|z| 0.5 * z), draw(&|z| (0.5 * z).exp())];
            for (name, v) in ["weight", "bias", "running_mean", "running_var"].iter().zip(vals) {
                p.set(&format!("{}.{name}", n.target), mase_ir::Tensor::new(vec![c], v).unwrap()).unwrap();
            }
        }
    }
}

/// The sample shape and classes of a model's data set: jsc's 16 features and 5 classes, or
/// MNIST's 1x28x28 images and 10 classes.
fn sample_of(model: &str) -> (Vec<usize>, usize) {
    if model.starts_with("jsc") {
        (vec![16], 5)
    } else {
        (vec![1, 28, 28], 10)
    }
}

/// A zoo model with seeded weights and perturbed batch norms, folded by `fold_batch_norm`, then
/// quantized: linears, convolutions and the batch norms left to `integer` formats of `bits`
/// bits with `frac` fraction bits (the batch norms' weight and bias formats derived from their
/// values by `quantize`).
fn folded(model: &str, bits: u32, frac: i32) -> (Graph, ParamStore) {
    let (sample, classes) = sample_of(model);
    let g = mase_zoo::build_model(model, &mase_zoo::ModelContext { sample_shape: sample.clone(), num_classes: classes }).unwrap();
    fold_and_quantize(g, sample, bits, frac)
}

/// [`folded`] for any graph taking samples of `sample`.
fn fold_and_quantize(mut g: Graph, sample: Vec<usize>, bits: u32, frac: i32) -> (Graph, ParamStore) {
    let mut params = mase_runtime::init_params(&g, &mut Rng::new(7));
    perturb_batch_norms(&g, &mut params);
    let mut cx = PassContext::new(params);
    cx.inputs = InputSource::Random { sample_shape: sample };
    run_pass("add_common_metadata", &mut g, &mut cx, &json!(null)).unwrap();
    run_pass("fold_batch_norm", &mut g, &mut cx, &json!(null)).unwrap();
    let layer = json!({"config": {"name": "integer", "data_in_width": bits, "data_in_frac_width": frac, "weight_width": bits,
        "weight_frac_width": frac, "bias_width": bits, "bias_frac_width": frac}});
    let bn = json!({"config": {"name": "integer", "data_in_width": bits, "data_in_frac_width": frac}});
    let q = json!({"by": "type", "default": {"config": {"name": "NA"}}, "linear": layer, "conv2d": layer, "batch_norm1d": bn});
    run_pass("quantize", &mut g, &mut cx, &q).unwrap();
    (g, cx.params)
}

/// A model's test samples: the jsc fixture's test split (392 samples), or the first `n` of
/// the MNIST test split shipped in `data/mnist`.
fn test_samples(model: &str, n: usize) -> (Vec<f32>, Vec<usize>, Vec<u32>) {
    if model.starts_with("jsc") {
        return test_split();
    }
    let s =
        mase_io::load_dataset("mnist", &mase_io::DataOptions { data_dir: Some(repo_root().join("data")), ..Default::default() }).unwrap();
    let n = n.min(s.test.len());
    (s.test.x[..n * 784].to_vec(), vec![n, 1, 28, 28], s.test.y[..n].to_vec())
}

#[test]
fn folded_and_quantized_models_run_every_node_in_integer_arithmetic() {
    // One line per model: the integer executor runs every node on codes, and gives the bits of
    // the fake-quant float forward (every sum stays below 2^24 units at these widths).
    for model in ["jsc-tiny", "jsc-toy", "jsc-three-layer", "tfc", "mnist-cnn"] {
        let (g, p) = folded(model, 8, 4);
        let (x, shape, _) = test_samples(model, 32);
        let run = mase_runtime::run_integer(&g, &p, &x, &shape).unwrap();
        let float: Vec<&str> = run.report.nodes.iter().filter(|n| !n.is_integer()).map(|n| n.node.as_str()).collect();
        assert!(float.is_empty(), "{model}: nodes in float: {float:?} ({:?})", run.report.nodes);
        assert!(run.report.max_acc_bits() <= 24, "{model}: {}", run.report.max_acc_bits());
        let mut e = mase_runtime::Executor::new(&g, &p, mase_runtime::ExecOptions { threads: 1, seed: 0 }).unwrap();
        let fake = e.forward(&x, &shape, mase_runtime::Mode::Eval).unwrap();
        assert_eq!(run.output, fake, "{model}");
    }
}

/// One line per design: model, bits and fraction bits of every format, reuse factor of every
/// layer. The jsc models run on the jsc fixture's test split (392 samples), tfc on the first
/// 128 samples of the MNIST test split.
const MATRIX: &[(&str, u32, i32, usize)] = &[
    ("jsc-tiny", 8, 4, 1),
    ("jsc-tiny", 8, 4, 4),
    ("jsc-tiny", 6, 3, 1),
    ("jsc-tiny", 6, 3, 4),
    ("jsc-toy", 8, 4, 1),
    ("jsc-toy", 8, 4, 2),
    ("jsc-toy", 6, 3, 1),
    ("jsc-toy", 6, 3, 2),
    ("jsc-three-layer", 8, 4, 1),
    ("jsc-three-layer", 8, 4, 4),
    ("jsc-three-layer", 6, 3, 1),
    ("jsc-three-layer", 6, 3, 4),
    ("tfc", 8, 4, 16),
];

/// A model and the bits of its formats.
type Key = (&'static str, u32);

#[test]
fn folded_models_simulate_bit_exactly_at_two_widths_and_two_reuse_factors() {
    let sim = have("verilator");
    // The outputs of the first design of each model and width, which the others must repeat.
    let mut first: Vec<(Key, Vec<Vec<i64>>)> = Vec::new();
    for &(model, bits, frac, reuse) in MATRIX {
        let label = format!("{model} at {bits}/{frac}, reuse {reuse}");
        let (g, p) = folded(model, bits, frac);
        let (x, shape, labels) = test_samples(model, 128);
        let d = lower(&g, &p, model, &LowerOptions { reuse: vec![], default_reuse: reuse, ..Default::default() }).unwrap();
        let want = golden(&g, &p, &d, &x, &shape).unwrap();
        let inputs: Vec<Vec<i64>> = x.chunks(d.input_len()).map(|r| d.input_codes(r)).collect();
        let got: Vec<Vec<i64>> = inputs.iter().map(|c| d.eval(c)).collect();
        assert_eq!(mismatches(&want, &got).len(), 0, "{label}: design against the executor");
        assert!(want.iter().any(|r| r != &want[0]), "{label}: constant outputs");
        let outputs = if sim {
            let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("hw_matrix_{model}_{bits}_r{reuse}"));
            let _ = std::fs::remove_dir_all(&dir);
            emit(&d, &dir).unwrap();
            let r = simulate::run(&dir, &d, &inputs, 0).unwrap();
            assert_eq!(mismatches(&want, &r.outputs), vec![], "{label}: Verilator against the executor");
            assert_eq!((r.latency, r.initiation_interval), (d.latency() as u64, reuse as f64), "{label}");
            r.outputs
        } else {
            got
        };
        // The accuracy of the simulated outputs is the integer executor's.
        assert_eq!(simulate::accuracy(&outputs, &labels), simulate::accuracy(&want, &labels), "{label}");
        // A folded design and an unrolled one of the same network give the same outputs.
        match first.iter().find(|(k, _)| *k == (model, bits)) {
            Some((_, o)) => assert_eq!(&outputs, o, "{label} against reuse 1"),
            None => first.push(((model, bits), outputs)),
        }
    }
}

#[test]
fn an_affine_step_is_the_per_channel_integer_affine() {
    // jsc-tiny at 8/4: the batch norm is the first step, on the input codes themselves.
    let (g, p) = folded("jsc-tiny", 8, 4);
    let d = lower(&g, &p, "jsc-tiny", &LowerOptions::default()).unwrap();
    let l = &d.layers[0];
    let mase_hw::Step::Affine { mul, add, frac } = &l.pre[0] else { panic!("{:?}", l.pre) };
    let q = g.node(g.require("seq_blocks_0").unwrap()).quant.clone().unwrap();
    let f = |q: &Option<mase_ir::QuantFormat>| mase_quant::Fixed::of(q.as_ref().unwrap()).unwrap();
    let (fw, fb) = (f(&q.weight), f(&q.bias));
    // m x + a at 4 + f_w fraction bits (the bias moved there when it has fewer).
    let target = (4 + fw.frac_width).max(fb.frac_width);
    assert_eq!(*frac, target);
    for c in 0..16 {
        let m = fw.code(p.get("seq_blocks.0.weight").unwrap().data[c]).unwrap() << (target - 4 - fw.frac_width);
        let a = fb.code(p.get("seq_blocks.0.bias").unwrap().data[c]).unwrap() << (target - fb.frac_width);
        assert_eq!((mul[c], add[c]), (m, a), "channel {c}");
        // Hand-checked on the extreme codes of the input format.
        let r = mase_hw::Range::of(mase_quant::Fixed { width: 8, frac_width: 4, signed: true });
        assert_eq!(l.pre[0].apply(-128, c, r), -128 * m + a);
        assert_eq!(l.pre[0].apply(127, c, r), 127 * m + a);
    }
    // Then the relu on those codes and the rescale to the linear's data_in (8/4).
    assert_eq!(&l.pre[1..], &[mase_hw::Step::Relu, mase_hw::Step::Requant { width: 8, frac_width: 4, signed: true }]);
    assert_eq!(d.input_format, (8, 4, true));
    // The manifest lists the steps with the widths of their results.
    let m = mase_hw::manifest(&d);
    let steps = &m["layers"][0]["pre_steps"];
    let names: Vec<&str> = steps.as_array().unwrap().iter().map(|s| s["step"].as_str().unwrap()).collect();
    assert_eq!(names, ["affine", "relu", "requant"]);
    // The affine's width holds every channel's extremes on the input codes -128 and 127.
    let ends = mul.iter().zip(add).flat_map(|(&m, &a)| [-128 * m + a, 127 * m + a]);
    let (lo, hi) = ends.fold((0i64, 0i64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    assert_eq!(steps[0]["width"], mase_hw::design::signed_bits(lo as i128, hi as i128));
    assert_eq!((steps[2]["width"].clone(), steps[2]["frac_width"].clone()), (json!(8), json!(4)));
}

#[test]
fn an_affine_after_the_last_layer_is_one_of_its_post_steps() {
    // Linear(16, 8), ReLU, BatchNorm1d(8): nothing after the batch norm to fold into.
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let a = g.call_module("seq_blocks.0", Op::Linear { in_features: 16, out_features: 8, bias: true }, &[x]);
    let r = g.call_module("seq_blocks.1", Op::Relu, &[a]);
    let b = g.call_module("seq_blocks.2", Op::BatchNorm1d(mase_ir::NormSpec::new(8)), &[r]);
    g.output(b);
    let (g, p) = fold_and_quantize(g, vec![16], 8, 4);
    let (x, shape, _) = test_split();
    for reuse in [1, 4] {
        let d = lower(&g, &p, "post", &LowerOptions { reuse: vec![], default_reuse: reuse, ..Default::default() }).unwrap();
        let names: Vec<&str> = d.layers[0].post.iter().map(|s| s.name()).collect();
        assert_eq!(names, ["relu", "requant", "affine"]);
        let want = golden(&g, &p, &d, &x, &shape).unwrap();
        let inputs = codes(&d, &x);
        let got: Vec<Vec<i64>> = inputs.iter().map(|c| d.eval(c)).collect();
        assert_eq!(mismatches(&want, &got).len(), 0, "reuse {reuse}");
        if have("verilator") {
            let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("hw_post_affine_r{reuse}"));
            let _ = std::fs::remove_dir_all(&dir);
            emit(&d, &dir).unwrap();
            let r = simulate::run(&dir, &d, &inputs, 7).unwrap();
            assert_eq!(mismatches(&want, &r.outputs), vec![], "reuse {reuse}, Verilator");
        }
    }
}

/// Linear(16, 4), ReLU, Linear(4, 3): small enough to synthesize in seconds.
fn small_mlp() -> Graph {
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let a = g.call_module("seq_blocks.0", Op::Linear { in_features: 16, out_features: 4, bias: true }, &[x]);
    let r = g.call_module("seq_blocks.1", Op::Relu, &[a]);
    let b = g.call_module("seq_blocks.2", Op::Linear { in_features: 4, out_features: 3, bias: true }, &[r]);
    g.output(b);
    g
}

#[test]
fn yosys_counts_the_resources_of_a_small_design() {
    if !have("yosys") {
        return;
    }
    let (g, p) = quantize_graph(small_mlp(), 4, 2, None);
    let d = lower(&g, &p, "small", &LowerOptions::default()).unwrap();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("hw_small_synth");
    let _ = std::fs::remove_dir_all(&dir);
    emit(&d, &dir).unwrap();
    // The registers: each layer's valid bit and output codes; synthesis may drop bits that are
    // constant (a relu's sign bit), never add any.
    let reg_bits: u64 = d.layers.iter().map(|l| 1 + (l.out_features as u64) * l.output().width() as u64).sum();
    for target in [SynthTarget::GenericLut6, SynthTarget::Xilinx] {
        let r = synth(&dir, target).unwrap();
        eprintln!("{target:?}: {r:?}");
        assert!(
            r.flip_flops <= reg_bits && r.flip_flops >= reg_bits / 2,
            "{target:?}: {} flip-flops of {reg_bits} register bits",
            r.flip_flops
        );
        // Measured with Yosys 0.23: 257 LUTs (generic), 311 (xilinx); a factor of two either way.
        assert!((120..=650).contains(&r.luts), "{target:?}: {} LUTs", r.luts);
        assert!(r.logic_depth >= 2, "{target:?}: depth {}", r.logic_depth);
        assert_eq!(r.brams, 0);
    }
}

/// `metadata_reuse` reads each node's `hardware.reuse_factor` (as a search space or a quantize
/// entry's `hardware` table writes it); anything but a positive integer is one line naming the
/// node.
#[test]
fn reuse_factors_come_from_node_hardware_metadata() {
    let cases: &[(serde_json::Value, Result<Vec<(&str, usize)>, &str>)] = &[
        (json!(4), Ok(vec![("seq_blocks_0", 4)])),
        (json!(0), Err("node `seq_blocks_0`: hardware.reuse_factor must be a positive integer, got 0")),
        (json!("2"), Err("node `seq_blocks_0`: hardware.reuse_factor must be a positive integer, got \"2\"")),
    ];
    for (value, want) in cases {
        let mut g = small_mlp();
        let id = g.find("seq_blocks_0").unwrap();
        g.node_mut(id).meta.hardware.insert(mase_hw::REUSE_FACTOR.into(), value.clone());
        let got = mase_hw::metadata_reuse(&g).map_err(|e| e.to_string());
        let want = want.clone().map(|v| v.into_iter().map(|(n, r)| (n.to_string(), r)).collect::<Vec<_>>()).map_err(str::to_string);
        assert_eq!(got, want, "{value}");
    }
    // Lowered with it, the first layer is folded by 4 (16 inputs: 4 + 1 cycles) and the second,
    // without metadata, is unrolled.
    let (mut g, p) = quantize_graph(small_mlp(), 4, 2, None);
    let id = g.find("seq_blocks_0").unwrap();
    g.node_mut(id).meta.hardware.insert(mase_hw::REUSE_FACTOR.into(), json!(4));
    let d = lower(&g, &p, "mlp", &LowerOptions { reuse: mase_hw::metadata_reuse(&g).unwrap(), default_reuse: 1, ..Default::default() })
        .unwrap();
    assert_eq!(d.layers.iter().map(|l| l.reuse).collect::<Vec<_>>(), [4, 1]);
    assert_eq!(d.latency(), 6);
}

/// One line per pipelined design: model, bits and fraction bits, reuse factor, clock in MHz
/// (one adder level per stage at 200 MHz, three at 100 MHz), how multipliers are built
/// (`ecp5-dsp`: MULT18X18D instances, simulated with the repo's model of the primitive), and
/// how every layer's products are built (shift-add: signed digits unrolled, array multipliers
/// folded; a batch norm's products stay in the multipliers).
const PIPELINED: &[(&str, u32, i32, usize, f64, Multipliers, Products)] = &[
    ("jsc-tiny", 8, 4, 1, 200.0, Multipliers::Inferred, Products::Multipliers),
    ("jsc-tiny", 8, 4, 4, 100.0, Multipliers::Inferred, Products::Multipliers),
    ("jsc-toy", 6, 3, 2, 200.0, Multipliers::Inferred, Products::Multipliers),
    ("jsc-three-layer", 6, 3, 1, 100.0, Multipliers::Inferred, Products::Multipliers),
    ("jsc-three-layer", 6, 3, 4, 200.0, Multipliers::Inferred, Products::Multipliers),
    ("jsc-tiny", 6, 3, 1, 200.0, Multipliers::Ecp5Dsp, Products::Multipliers),
    ("jsc-toy", 6, 3, 2, 100.0, Multipliers::Ecp5Dsp, Products::Multipliers),
    ("jsc-tiny", 8, 4, 1, 200.0, Multipliers::Inferred, Products::ShiftAdd),
    ("jsc-toy", 8, 4, 2, 200.0, Multipliers::Ecp5Dsp, Products::ShiftAdd),
    ("jsc-three-layer", 6, 3, 4, 100.0, Multipliers::Inferred, Products::ShiftAdd),
];

#[test]
fn pipelined_designs_are_bit_exact_at_two_clocks_and_under_back_pressure() {
    let sim = have("verilator");
    for &(model, bits, frac, reuse, clock, multipliers, products) in PIPELINED {
        let label = format!("{model} at {bits}/{frac}, reuse {reuse}, {clock} MHz, {multipliers:?}, {products:?}");
        let (g, p) = folded(model, bits, frac);
        let (x, shape, _) = test_samples(model, 128);
        let plain = lower(&g, &p, model, &LowerOptions { reuse: vec![], default_reuse: reuse, ..Default::default() }).unwrap();
        let mut d = plain.clone().pipelined(clock).unwrap().with_multipliers(multipliers).unwrap();
        if products == Products::ShiftAdd {
            let nodes: Vec<String> = d.layers.iter().map(|l| l.node.clone()).collect();
            d = d.with_shift_add(&nodes).unwrap();
            // No weight's product is a multiplier; the estimate counts only the batch norms'.
            assert!(d.layers.iter().all(|l| l.multipliers() == 0), "{label}");
        }
        // Pipelining adds cycles, never changes the initiation interval or the arithmetic.
        assert!(d.latency() > plain.latency(), "{label}: {} cycles against {}", d.latency(), plain.latency());
        assert_eq!(d.initiation_interval(), plain.initiation_interval(), "{label}");
        let m = emit(&d, &PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("hw_pipe_manifest")).unwrap();
        let layers = m["layers"].as_array().unwrap();
        let per_layer: u64 = layers.iter().map(|l| l["latency_cycles"].as_u64().unwrap()).sum();
        assert_eq!((m["latency_cycles"].as_u64(), m["clock_mhz"].as_f64()), (Some(per_layer), Some(clock)), "{label}");
        // Every layer but the first begins with a register slice: a cycle, and a flip-flop per
        // input bit and its valid bit.
        for (i, (l, layer)) in layers.iter().zip(&d.layers).enumerate() {
            let slice = u64::from(i > 0);
            assert_eq!(l["latency_cycles"].as_u64(), Some(l["pipeline"]["latency"].as_u64().unwrap() + slice), "{label}, layer {i}");
            let top = std::fs::read_to_string(PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("hw_pipe_manifest/rtl/mase_top.v")).unwrap();
            let decl = format!("reg [{}:0] s{i}_d;", layer.in_features * layer.input.width() as usize - 1);
            assert_eq!(top.contains(&decl), i > 0, "{label}, layer {i}");
        }
        assert!(layers.iter().all(|l| l["registers_added"].as_u64().unwrap() > 0), "{label}");
        assert_eq!(m["multipliers"], multipliers.name(), "{label}");
        assert!(layers.iter().all(|l| l["products"] == products.name()), "{label}");
        // Instantiated, every nonzero weight's product and every batch norm channel's is a
        // MULT18X18D; inferred, none is.
        let instances: usize = d
            .layers
            .iter()
            .map(|l| {
                std::fs::read_to_string(
                    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("hw_pipe_manifest/rtl").join(format!("mase_{}.v", l.node)),
                )
                .unwrap()
            })
            .map(|t| t.matches("mase_mul_ecp5 #(").count())
            .sum();
        let products: usize = d.layers.iter().map(dsp_products).sum();
        assert_eq!(instances, if multipliers.instantiated() { products } else { 0 }, "{label}");
        if !sim {
            continue;
        }
        let want = golden(&g, &p, &d, &x, &shape).unwrap();
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("hw_pipe_{model}_{bits}_r{reuse}_{clock}"));
        let _ = std::fs::remove_dir_all(&dir);
        emit(&d, &dir).unwrap();
        let inputs = codes(&d, &x);
        for stall in [0, 12345] {
            let r = simulate::run(&dir, &d, &inputs, stall).unwrap();
            assert_eq!(mismatches(&want, &r.outputs), vec![], "{label}, stall seed {stall}");
            if stall == 0 {
                assert_eq!((r.latency, r.initiation_interval), (d.latency() as u64, reuse as f64), "{label}");
            }
        }
    }
}

/// The products of a layer in MULT18X18Ds: one per multiplier with a nonzero weight (per cycle
/// folded; none with shift-add products), and one per element of each batch norm affine whose
/// factors are not all zero.
fn dsp_products(l: &mase_hw::Layer) -> usize {
    let (k, r) = (l.in_features, l.reuse.max(1));
    let in_multipliers = usize::from(l.products == Products::Multipliers);
    let linear: usize = in_multipliers
        * (0..l.out_features)
            .map(|j| {
                let w = &l.weight[j * k..][..k];
                let p = k / r;
                (0..p).filter(|&q| (0..r).any(|t| w[t * p + q] != 0)).count()
            })
            .sum::<usize>();
    let affine = |steps: &[Step], n: usize| -> usize {
        steps.iter().filter(|s| matches!(s, Step::Affine { mul, .. } if mul.iter().any(|&m| m != 0))).count() * n
    };
    linear + affine(&l.pre, l.in_features) + affine(&l.post, l.out_features)
}

/// `SHA256SUMS` ties a folder together: reading back a folder that was truncated, edited, lost
/// a file or gained a Verilog file is one line naming the file. One line per damage: what it
/// does to the folder, and the end of the error's line after the folder's path.
#[test]
fn a_damaged_or_edited_design_folder_is_refused() {
    type Damage = fn(&std::path::Path);
    let again = "(the folder was edited or damaged; emit the design again)";
    let cases: &[(Damage, String)] = &[
        (|_| {}, String::new()),
        (
            |d| {
                let t = std::fs::read_to_string(d.join("manifest.json")).unwrap();
                std::fs::write(d.join("manifest.json"), &t[..t.len() / 2]).unwrap();
            },
            format!("manifest.json: differs from its checksum in SHA256SUMS {again}"),
        ),
        (
            |d| {
                let p = d.join("rtl/mase_seq_blocks_0.v");
                let t = std::fs::read_to_string(&p).unwrap().replacen("+", "-", 1);
                std::fs::write(p, t).unwrap();
            },
            format!("rtl/mase_seq_blocks_0.v: differs from its checksum in SHA256SUMS {again}"),
        ),
        (
            |d| std::fs::write(d.join("rtl/extra.v"), "module extra; endmodule\n").unwrap(),
            format!("rtl/extra.v: not listed in SHA256SUMS {again}"),
        ),
        (
            |d| {
                let p = d.join("sim/MULT18X18D.v");
                let t = std::fs::read_to_string(&p).unwrap().replacen("xa * xb", "xa + xb", 1);
                std::fs::write(p, t).unwrap();
            },
            format!("sim/MULT18X18D.v: differs from its checksum in SHA256SUMS {again}"),
        ),
        (
            |d| std::fs::remove_file(d.join("design.json")).unwrap(),
            format!("design.json: listed in SHA256SUMS {again}: No such file or directory (os error 2)"),
        ),
        (
            |d| std::fs::remove_file(d.join("SHA256SUMS")).unwrap(),
            "SHA256SUMS: not a folder written by `ch emit` (emit the design again): No such file or directory (os error 2)".into(),
        ),
    ];
    let (g, p) = quantize_graph(small_mlp(), 4, 2, None);
    let d = lower(&g, &p, "small", &LowerOptions::default()).unwrap().pipelined(150.0).unwrap();
    let d = d.with_multipliers(Multipliers::Ecp5Dsp).unwrap();
    for (i, (damage, want)) in cases.iter().enumerate() {
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("hw_damaged_{i}"));
        let _ = std::fs::remove_dir_all(&dir);
        emit(&d, &dir).unwrap();
        damage(&dir);
        match mase_hw::read_design(&dir) {
            Ok(back) => assert!(want.is_empty() && back == d, "case {i}: read back"),
            Err(e) => assert_eq!(e.to_string(), format!("{}/{want}", dir.display()), "case {i}"),
        }
    }
}

/// The slowest post-route clock the place-and-route test accepts for jsc-tiny pipelined for
/// 200 MHz with its products in MULT18X18Ds, in MHz: the goal the design is pipelined for, on
/// one of nextpnr's seeds 1 to [`ECP5_SEEDS`]. These seeded 8-bit weights route at 193.5,
/// 231.1 and 226.4 MHz with seeds 1, 2 and 3 (nextpnr-ecp5 0.11; the output FIFO written and
/// read in 32-bit chunks); the FIFO's first version gave 219.3 MHz with seed 1, and the skid
/// buffer before it 170.1 MHz (the stage enable read the consumer's `out_ready`, one net
/// reaching every copy of the enable across the chip in one clock). README, section Hardware.
const ECP5_FMAX_FLOOR_MHZ: f64 = 200.0;

/// nextpnr seeds the place-and-route test tries, in turn, for the floor.
const ECP5_SEEDS: u64 = 3;

/// jsc-tiny (8 bits, one 16 -> 5 layer after its batch norm's affine), pipelined for 200 MHz
/// with `--multipliers ecp5-dsp`, placed and routed on an ECP5-85F: the report has a
/// post-route Fmax above the floor, the resources nextpnr placed, and a critical path whose
/// delays add up to the clock's period.
#[test]
fn jsc_tiny_pipelined_for_200_mhz_places_and_routes_on_an_ecp5() {
    if !have("yosys") {
        return;
    }
    if mase_hw::ecp5::find_nextpnr().is_none() {
        assert!(std::env::var("CI").map_or(true, |v| v != "true"), "nextpnr-ecp5 is not installed and CI=true");
        eprintln!("SKIP: nextpnr-ecp5 is not installed (scripts/hw-tools.sh)");
        return;
    }
    let (g, p) = folded("jsc-tiny", 8, 4);
    let d = lower(&g, &p, "jsc-tiny", &LowerOptions::default()).unwrap().pipelined(200.0).unwrap();
    let d = d.with_multipliers(Multipliers::Ecp5Dsp).unwrap();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("hw_ecp5_tiny");
    let _ = std::fs::remove_dir_all(&dir);
    emit(&d, &dir).unwrap();
    // Seeds in turn until one places the design at the floor: placement is chaotic, as an
    // engineer closing timing knows, and a seed sweep is how it is closed.
    let mut fmaxes = Vec::new();
    let r = loop {
        let seed = fmaxes.len() as u64 + 1;
        let r = mase_hw::ecp5::place_and_route(&dir, &mase_hw::ecp5::Ecp5Options { seed, ..Default::default() }).unwrap();
        eprintln!("seed {seed}: {}", serde_json::to_string(&r).unwrap());
        fmaxes.push(r.fmax_mhz.unwrap());
        if r.fmax_mhz.unwrap() >= ECP5_FMAX_FLOOR_MHZ || seed == ECP5_SEEDS {
            break r;
        }
    };
    let fmax = r.fmax_mhz.unwrap();
    assert!(
        fmax >= ECP5_FMAX_FLOOR_MHZ,
        "{fmaxes:?} MHz post-route with seeds 1 to {ECP5_SEEDS}, below the floor of {ECP5_FMAX_FLOOR_MHZ} MHz"
    );
    assert!(r.fits && r.over.is_empty() && r.constraint_mhz == 200.0, "{r:?}");
    assert_eq!((r.part.name, r.part.available.dsps), ("LFE5U-85F", 156));
    // Every product is an instantiated MULT18X18D (each nonzero weight's and each batch norm
    // channel's), and at least the 16 inputs' and the 5 outputs' codes are in flip-flops.
    assert_eq!(r.used.dsps as usize, d.layers.iter().map(dsp_products).sum::<usize>(), "{:?}", r.used);
    assert!(r.used.flip_flops > 16 * 8 + 5 * 8 && r.used.luts > 100, "{:?}", r.used);
    // The critical path's delays are the period of the Fmax (nextpnr rounds each to 1 ps).
    let c = r.critical_path.unwrap();
    let total = c.logic_ns + c.routing_ns + c.register_ns;
    assert!((total - 1000.0 / fmax).abs() < 0.05, "{total} ns against {} ns", 1000.0 / fmax);
    let saved: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.join("synth_ecp5.json")).unwrap()).unwrap();
    assert_eq!(saved["fmax_mhz"].as_f64(), Some(fmax));
    // The cost model's LUT4s stand for Yosys's count before placement: within the 15 % the
    // hardware issue asks of it; placement adds at most the 35 % the fit allows for.
    let (synthesized, lut4) = (r.synthesized.luts as f64, mase_hw::cost::estimate(&d).lut4.unwrap());
    assert_eq!(r.synthesized, mase_hw::ecp5::yosys_resources(&r.cells_by_type));
    assert!((lut4 - synthesized).abs() <= 0.15 * synthesized, "estimate {lut4} LUT4s, Yosys {synthesized}");
    let placed = r.used.luts as f64;
    assert!(
        placed >= synthesized && placed <= mase_hw::fit::PLACED_PER_SYNTHESIZED_LUT4 * synthesized,
        "{placed} placed, {synthesized} synthesized"
    );
}
