//! Export: zoo models and hand-built graphs go to ONNX and come back with the same names,
//! parameters and outputs; models trained here run in onnxruntime with our outputs.

mod common;
use common::*;
use mase_interop::{export_bytes, export_model, import_bytes, ExportFormat, ExportOptions, ImportOptions};
use mase_ir::{ConvSpec, Graph, NodeKind, Op, PoolSpec, QuantFormat, ReduceSpec, Rng, RoundingMode, Tensor};
use mase_runtime::init_params;
use mase_zoo::{build_model, ModelContext};

fn random_input(shape: &[usize], seed: u64) -> Tensor {
    let mut rng = Rng::new(seed);
    let n = shape.iter().product();
    Tensor::new(shape.to_vec(), (0..n).map(|_| rng.normal() as f32).collect()).unwrap()
}

/// Exports, imports again, and checks names, parameters and bit-identical outputs.
fn round_trip(label: &str, g: &Graph, sample: &[usize]) {
    let mut params = init_params(g, &mut Rng::new(3));
    // Running statistics away from 0 and 1, so that batch norm's buffers are really carried.
    for (name, e) in params.iter_mut() {
        if name.ends_with("running_mean") || name.ends_with("running_var") {
            e.tensor.data.iter_mut().enumerate().for_each(|(i, v)| *v += 0.1 * (i % 5) as f32);
        }
    }
    let opts = ExportOptions { format: ExportFormat::Onnx, sample_shape: Some(sample.to_vec()) };
    let bytes = export_bytes(g, &params, &opts).unwrap_or_else(|e| panic!("{label}: {e}"));
    let m = import_bytes(&bytes, &ImportOptions::default()).unwrap_or_else(|e| panic!("{label}: {e}"));
    assert_eq!(m.sample_shape, sample, "{label}");
    let modules = |g: &Graph| {
        g.nodes()
            .iter()
            .filter(|n| n.kind == NodeKind::CallModule && !n.op.param_specs().is_empty())
            .map(|n| n.target.clone())
            .collect::<Vec<_>>()
    };
    assert_eq!(modules(&m.graph), modules(g), "{label}: module paths");
    assert_eq!(m.params.names().collect::<Vec<_>>(), params.names().collect::<Vec<_>>(), "{label}: parameter names");
    let x = random_input(&[[4].as_slice(), sample].concat(), 9);
    assert_eq!(run(&m.graph, &m.params, &x), run(g, &params, &x), "{label}: outputs");
}

#[test]
fn zoo_models_round_trip_through_onnx() {
    let cases: [(&str, Vec<usize>, usize); 7] = [
        ("jsc-tiny", vec![16], 5),
        ("jsc-toy", vec![16], 5),
        ("jsc-s", vec![16], 5),
        ("jsc-three-layer", vec![16], 5),
        ("tfc", vec![1, 28, 28], 10),
        ("mnist-cnn", vec![1, 28, 28], 10),
        ("toy", vec![2, 2], 2),
    ];
    for (name, sample, classes) in cases {
        let g = build_model(name, &ModelContext::new(sample.clone(), classes)).unwrap();
        round_trip(name, &g, &sample);
    }
    let g = mase_zoo::load_model_file(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../models/jsc-residual.toml"),
        &ModelContext::new(vec![16], 5),
    )
    .unwrap();
    round_trip("jsc-residual.toml", &g, &[16]);
}

#[test]
fn every_exportable_op_round_trips() {
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let c1 = g.call_module("conv1", Op::Conv2d(ConvSpec { groups: 2, dilation: vec![1, 2], ..ConvSpec::new(2, 2, 4, 3, 1, 1) }), &[x]);
    let bn = g.call_module("bn", Op::BatchNorm2d(mase_ir::NormSpec::new(4)), &[c1]);
    let lr = g.call_module("act", Op::LeakyRelu { negative_slope: 0.2 }, &[bn]);
    let mp = g.call_module("pool", Op::MaxPool2d(PoolSpec::window(vec![3, 3], vec![2, 2], vec![1, 1])), &[lr]);
    let ap = g.call_module("avg", Op::AvgPool2d(PoolSpec::new(2, 2)), &[mp]);
    let gp = g.call_module("gap", Op::AdaptiveAvgPool2d { output_size: [1, 1] }, &[ap]);
    let fl = g.call_function("torch.flatten", Op::Flatten { start_dim: 1, end_dim: -1 }, &[gp]);
    let pad = g.call_function("torch.nn.functional.pad", Op::Pad { begin: vec![1], end: vec![2], value: 0.5 }, &[fl]);
    let cat = g.call_function("torch.cat", Op::Concat { dim: 1 }, &[pad, pad]);
    let sq = g.call_function("torch.sigmoid", Op::Sigmoid, &[cat]);
    let sr = g.call_function("torch.sqrt", Op::Sqrt, &[sq]);
    let cl = g.call_function("torch.clamp", Op::Clip { min: 0.6, max: 0.9 }, &[sr]);
    let k = g.get_attr("scale");
    let dv = g.call_function("operator.truediv", Op::Div, &[cl, k]);
    let pw = g.call_function("operator.pow", Op::Pow, &[dv, k]);
    let fc = g.call_module("fc", Op::Linear { in_features: 14, out_features: 3, bias: true }, &[pw]);
    let th = g.call_module("tanh", Op::Tanh, &[fc]);
    let sm = g.call_module("sm", Op::LogSoftmax { dim: 1 }, &[th]);
    g.output(sm);
    let mut params = init_params(&g, &mut Rng::new(1));
    params.insert("scale", Tensor::new(vec![14], (0..14).map(|i| 1.0 + i as f32 / 10.0).collect()).unwrap(), false);
    let bytes = export_bytes(&g, &params, &ExportOptions { format: ExportFormat::Onnx, sample_shape: Some(vec![2, 9, 9]) }).unwrap();
    let m = import_bytes(&bytes, &ImportOptions::default()).unwrap();
    let x = random_input(&[3, 2, 9, 9], 4);
    let (a, b) = (run(&g, &params, &x), run(&m.graph, &m.params, &x));
    assert!(a.max_abs_diff(&b) == 0.0, "{:?} vs {:?}", a.data, b.data);
}

#[test]
fn activations_and_reductions_round_trip() {
    let r = ReduceSpec::new;
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let a = g.call_module("silu", Op::Silu, &[x]);
    let b = g.call_function("torch.nn.functional.hardswish", Op::Hardswish, &[a]);
    let c = g.call_module("hsig", Op::Hardsigmoid, &[b]);
    let d = g.call_module("sp", Op::Softplus { beta: 2.0, threshold: 20.0 }, &[c]);
    let e = g.call_module("mish", Op::Mish, &[d]);
    let f = g.call_method("mean", Op::Mean(r(&[2, 3], true)), &[e]);
    let fl = g.call_function("torch.flatten", Op::Flatten { start_dim: 1, end_dim: -1 }, &[f]);
    let s = g.call_method("sum", Op::Sum(r(&[-1], false)), &[x]);
    let m = g.call_function("torch.amax", Op::Amax(r(&[2], false)), &[s]);
    let sp = g.call_module("sp1", Op::Softplus { beta: 1.0, threshold: 20.0 }, &[m]);
    let y = g.call_function("operator.add", Op::Add, &[fl, sp]);
    g.output(y);
    let params = init_params(&g, &mut Rng::new(1));
    let bytes = export_bytes(&g, &params, &ExportOptions { format: ExportFormat::Onnx, sample_shape: Some(vec![3, 4, 5]) }).unwrap();
    let proto = mase_interop::onnx::decode_model(&bytes).unwrap();
    let types: Vec<&str> = proto.graph.as_ref().unwrap().node.iter().map(|n| n.op_type.as_str()).collect();
    let want =
        "Sigmoid Mul HardSigmoid Mul HardSigmoid Mul Softplus Div Softplus Tanh Mul ReduceMean Reshape ReduceSum ReduceMax Softplus Add";
    assert_eq!(types.join(" "), want);
    let m = import_bytes(&bytes, &ImportOptions::default()).unwrap();
    let x = random_input(&[4, 3, 4, 5], 4);
    // silu and hardswish come back as their ONNX forms (a sigmoid or hard sigmoid, then a product),
    // which round differently.
    let (d, at) = max_diff(&run(&g, &params, &x), &run(&m.graph, &m.params, &x));
    assert!(d <= 1e-5, "largest difference {d} at {at}");
}

/// An embedding (`Cast` and `Gather`), einsum (`Einsum`) and causal attention (its `MatMul`,
/// `Softmax` form) export and import back to the same values.
#[test]
fn embedding_einsum_and_attention_round_trip() {
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let e = g.call_module("tok", Op::Embedding { num_embeddings: 10, embedding_dim: 8, padding_idx: None, functional: false }, &[x]);
    let s = g.call_function("torch.functional.einsum", Op::Einsum { equation: "bqd,bkd->bqk".into() }, &[e, e]);
    let p = g.call_function("torch.softmax", Op::Softmax { dim: -1 }, &[s]);
    let c = g.call_function("torch.functional.einsum", Op::Einsum { equation: "bqk,bkd->bqd".into() }, &[p, e]);
    let sdpa = Op::ScaledDotProductAttention { mask: None, is_causal: true, scale: None };
    let a = g.call_function("torch.nn.functional.scaled_dot_product_attention", sdpa, &[e, e, c]);
    let y = g.call_function("operator.add", Op::Add, &[a, c]);
    g.output(y);
    let params = init_params(&g, &mut Rng::new(1));
    let bytes = export_bytes(&g, &params, &ExportOptions { format: ExportFormat::Onnx, sample_shape: Some(vec![6]) }).unwrap();
    let proto = mase_interop::onnx::decode_model(&bytes).unwrap();
    let types: Vec<&str> = proto.graph.as_ref().unwrap().node.iter().map(|n| n.op_type.as_str()).collect();
    assert_eq!(types.join(" "), "Cast Gather Einsum Softmax Einsum Transpose MatMul Mul Add Softmax MatMul Add");
    let m = import_bytes(&bytes, &ImportOptions::default()).unwrap();
    let ops: Vec<&str> = m.graph.nodes().iter().map(|n| n.op.mase_op()).collect();
    assert_eq!(
        ops.join(" "),
        "placeholder embedding einsum softmax einsum permute matmul constant mul constant add softmax matmul add output"
    );
    let ids: Vec<f32> = (0..4 * 6).map(|i| ((i * 7) % 10) as f32).collect();
    let x = Tensor::new(vec![4, 6], ids).unwrap();
    let (d, at) = max_diff(&run(&g, &params, &x), &run(&m.graph, &m.params, &x));
    assert!(d <= 1e-5, "largest difference {d} at {at}");
}

/// Comparisons (`Equal`, `Not`, `Greater`, ... and a `Cast` to float), `where` (a `Cast` of its
/// condition to bool, then `Where`) and attention with a bool mask (`Equal` of the mask and 0,
/// `Where` of -inf) export and import back to the same values; the mask's comparison, of two
/// constants, folds on import.
#[test]
fn comparisons_where_and_bool_masked_attention_round_trip() {
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let (c, mask) = (g.get_attr("c"), g.get_attr("mask"));
    let sdpa = Op::ScaledDotProductAttention { mask: Some(mase_ir::AttnMask::Bool), is_causal: false, scale: None };
    let a = g.call_function("torch.nn.functional.scaled_dot_product_attention", sdpa, &[x, x, x, mask]);
    let gt = g.call_function("operator.gt", Op::Gt, &[x, c]);
    let w = g.call_function("torch.where", Op::Where, &[gt, x, a]);
    let ne = g.call_function("operator.ne", Op::Ne, &[x, a]);
    let le = g.call_function("operator.le", Op::Le, &[a, c]);
    let s = g.call_function("operator.add", Op::Add, &[w, ne]);
    let y = g.call_function("operator.add", Op::Add, &[s, le]);
    g.output(y);
    let mut params = mase_ir::ParamStore::new();
    params.insert("c", random_input(&[8], 2), false);
    // Row 1 attends to nothing but position 3; the others to all but one position.
    let m: Vec<f32> =
        (0..16).map(|i| if i / 4 == 1 { f32::from(u8::from(i % 4 == 3)) } else { f32::from(u8::from(i % 4 != i / 4)) }).collect();
    params.insert("mask", Tensor::new(vec![4, 4], m).unwrap(), false);
    let bytes = export_bytes(&g, &params, &ExportOptions { format: ExportFormat::Onnx, sample_shape: Some(vec![4, 8]) }).unwrap();
    let proto = mase_interop::onnx::decode_model(&bytes).unwrap();
    let types: Vec<&str> = proto.graph.as_ref().unwrap().node.iter().map(|n| n.op_type.as_str()).collect();
    assert_eq!(
        types.join(" "),
        "Transpose MatMul Mul Equal Where Softmax MatMul Greater Cast Cast Where Equal Not Cast LessOrEqual Cast Add Add"
    );
    let m = import_bytes(&bytes, &ImportOptions::default()).unwrap();
    let ops: Vec<&str> = m.graph.nodes().iter().map(|n| n.op.mase_op()).collect();
    assert_eq!(
        ops.join(" "),
        "placeholder permute matmul constant mul constant constant where softmax matmul constant gt where ne constant le add add output"
    );
    let ne = m.graph.nodes().iter().find(|n| n.op == Op::Ne).unwrap();
    assert_eq!(ne.target, "operator.ne");
    let x = random_input(&[3, 4, 8], 5);
    let (want, got) = (run(&g, &params, &x), run(&m.graph, &m.params, &x));
    assert!(want.data.iter().all(|v| v.is_finite()), "{want:?}");
    let (d, at) = max_diff(&want, &got);
    assert!(d <= 1e-5, "largest difference {d} at {at}");
}

#[test]
fn softplus_below_threshold_20_is_refused_by_export() {
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let y = g.call_module("sp", Op::Softplus { beta: 1.0, threshold: 5.0 }, &[x]);
    g.output(y);
    let params = init_params(&g, &mut Rng::new(1));
    let e = export_bytes(&g, &params, &ExportOptions { format: ExportFormat::Onnx, sample_shape: Some(vec![3]) }).unwrap_err();
    assert_eq!(e.to_string(), "export of node `sp`: softplus with threshold 5 (below 20) has no ONNX equivalent");
}

#[test]
fn quantized_graphs_need_qonnx_and_carry_their_formats() {
    let mut g = build_model("jsc-tiny", &ModelContext::new(vec![16], 5)).unwrap();
    let params = init_params(&g, &mut Rng::new(0));
    let fc = g.find("seq_blocks_2").unwrap();
    let fmt = QuantFormat::Integer { width: 8, frac_width: 4, signed: true };
    g.node_mut(fc).quant = Some(mase_ir::NodeQuant {
        data_in: vec![Some(fmt.clone())],
        weight: Some(fmt.clone()),
        bias: Some(fmt.clone()),
        ..Default::default()
    });
    let e = export_model(&g, &params, &ExportOptions::new(ExportFormat::Onnx)).unwrap_err().to_string();
    assert!(e.contains("seq_blocks_2") && e.contains("export it as QONNX"), "{e}");
    let m = export_model(&g, &params, &ExportOptions::new(ExportFormat::Qonnx)).unwrap();
    let q: Vec<&str> = m
        .graph
        .as_ref()
        .unwrap()
        .node
        .iter()
        .filter(|n| n.domain == mase_interop::qonnx::QONNX_DOMAIN)
        .map(|n| n.op_type.as_str())
        .collect();
    assert_eq!(q, ["IntQuant", "IntQuant", "IntQuant"]);
    // MASE's fixed point comes back as the equivalent QONNX IntQuant, with the same outputs.
    let again = mase_interop::import_model(&m, &ImportOptions::default()).unwrap();
    let node = again.graph.nodes().iter().find(|n| n.target == "seq_blocks.2").unwrap();
    let want = QuantFormat::IntQuant {
        scale: Tensor::scalar(1.0 / 16.0),
        zero_point: Tensor::scalar(0.0),
        bit_width: 8.0,
        signed: true,
        narrow: false,
        rounding_mode: RoundingMode::Round,
    };
    assert_eq!(node.quant.as_ref().unwrap().weight.as_ref(), Some(&want));
    let x = random_input(&[8, 16], 2);
    assert_eq!(run(&g, &params, &x), run(&again.graph, &again.params, &x));
}

#[test]
fn microscaling_formats_are_refused_by_qonnx_export_in_one_line() {
    let mut g = build_model("jsc-tiny", &ModelContext::new(vec![16], 5)).unwrap();
    let params = init_params(&g, &mut Rng::new(0));
    let fc = g.find("seq_blocks_2").unwrap();
    for (fmt, name) in [
        (QuantFormat::Mxint { width: 8, block_size: 32, block_dim: -1 }, "mxint"),
        (QuantFormat::Mxfp { exponent_width: 2, frac_width: 1, block_size: 16, block_dim: -1 }, "mxfp"),
    ] {
        g.node_mut(fc).quant = Some(mase_ir::NodeQuant { weight: Some(fmt.clone()), ..Default::default() });
        let e = export_model(&g, &params, &ExportOptions::new(ExportFormat::Qonnx)).unwrap_err().to_string();
        assert!(!e.contains('\n'), "{e}");
        assert!(e.contains("/seq_blocks.2/weight_quant"), "{e}");
        let size = if name == "mxint" { 32 } else { 16 };
        let why = format!(
            "number format `{name}` has no QONNX equivalent: its power-of-two scale is chosen per block of {size} values from the values it quantizes"
        );
        assert!(e.contains(&why), "{e}");
    }
}

#[test]
fn models_trained_here_run_in_onnxruntime_with_our_outputs() {
    // tests/fixtures/trained: made by `cargo run -p mase-interop --example make_trained_fixture`
    // (5 epochs on digits) and run in onnxruntime by scripts/make_onnx_references.py.
    for model in ["mnist-cnn_digits", "tfc_digits"] {
        let x = npz(&format!("trained/{model}.inputs.npz"), "x");
        let ours = npz(&format!("trained/{model}.ours.npz"), "y");
        let ort = npz(&format!("trained/{model}.ort.npz"), "y");
        let (d, at) = max_diff(&ours, &ort);
        assert!(d <= 1e-5, "{model}: ours vs onnxruntime differ by {d} at {at}");
        let m = import(&format!("../trained/{model}.onnx"));
        let (d, at) = max_diff(&run(&m.graph, &m.params, &x), &ours);
        assert!(d <= 1e-5, "{model}: re-imported vs ours differ by {d} at {at}");
    }
}

#[test]
fn norms_and_ceil_mode_pools_round_trip() {
    let ln =
        |shape: Vec<usize>, affine: bool| Op::LayerNorm { normalized_shape: shape, eps: 1e-5, elementwise_affine: affine, bias: affine };
    let gn = |affine: bool| Op::GroupNorm { num_groups: 2, num_channels: 4, eps: 1e-5, affine, bias: affine };
    let ceil = |k: usize, s: usize, p: usize, count_include_pad: bool| PoolSpec {
        ceil_mode: true,
        count_include_pad,
        ..PoolSpec::window(vec![k, k], vec![s, s], vec![p, p])
    };
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let n1 = g.call_module("gn", gn(true), &[x]);
    let mp = g.call_module("pool", Op::MaxPool2d(ceil(3, 2, 0, true)), &[n1]);
    let ap = g.call_module("avg", Op::AvgPool2d(ceil(3, 2, 1, false)), &[mp]);
    let p1 = g.call_function("torch.permute", Op::Permute { dims: vec![0, 2, 3, 1] }, &[ap]);
    let n2 = g.call_module("ln", ln(vec![4], true), &[p1]);
    let (w, b) = (g.get_attr("ln_w"), g.get_attr("ln_b"));
    let n3 = g.call_function("torch.nn.functional.layer_norm", ln(vec![3, 4], false), &[n2, w, b]);
    let p2 = g.call_function("torch.permute", Op::Permute { dims: vec![0, 3, 1, 2] }, &[n3]);
    let gw = g.get_attr("gn_w");
    let n4 = g.call_function("torch.nn.functional.group_norm", gn(false), &[p2, gw]);
    let fl = g.call_function("torch.flatten", Op::Flatten { start_dim: 1, end_dim: -1 }, &[n4]);
    let amax = g.call_module("amax", Op::AdaptiveMaxPool2d { output_size: [1, 1] }, &[ap]);
    let fl2 = g.call_function("torch.flatten", Op::Flatten { start_dim: 1, end_dim: -1 }, &[amax]);
    let cat = g.call_function("torch.cat", Op::Concat { dim: 1 }, &[fl, fl2]);
    let fc = g.call_module("fc", Op::Linear { in_features: 40, out_features: 3, bias: true }, &[cat]);
    g.output(fc);
    let mut params = init_params(&g, &mut Rng::new(1));
    let mut rng = Rng::new(5);
    let mut draw = |shape: Vec<usize>| {
        let n = shape.iter().product();
        Tensor::new(shape, (0..n).map(|_| 1.0 + 0.5 * rng.normal() as f32).collect()).unwrap()
    };
    for (name, e) in params.iter_mut() {
        if name.starts_with("gn.") || name.starts_with("ln.") {
            e.tensor = draw(e.tensor.shape.clone());
        }
    }
    params.insert("ln_w", draw(vec![3, 4]), true);
    params.insert("ln_b", draw(vec![3, 4]), true);
    params.insert("gn_w", draw(vec![4]), true);
    let m = export_model(&g, &params, &ExportOptions { format: ExportFormat::Onnx, sample_shape: Some(vec![4, 8, 8]) }).unwrap();
    assert_eq!(m.opset_import[0].version, 17, "LayerNormalization is an opset-17 operator");
    let types: Vec<&str> = m.graph.as_ref().unwrap().node.iter().map(|n| n.op_type.as_str()).collect();
    assert_eq!(types.iter().filter(|t| **t == "LayerNormalization").count(), 2, "{types:?}");
    assert_eq!(types.iter().filter(|t| **t == "InstanceNormalization").count(), 2, "{types:?}");
    assert!(types.contains(&"GlobalMaxPool"), "{types:?}");
    let back = mase_interop::import_model(&m, &ImportOptions::default()).unwrap();
    let x = random_input(&[3, 4, 8, 8], 8);
    let (a, b) = (run(&g, &params, &x), run(&back.graph, &back.params, &x));
    assert_eq!(a.shape, [3, 3]);
    assert!(a.max_abs_diff(&b) <= 1e-5, "{:?} vs {:?}", a.data, b.data);
    // Without a layer norm the export stays at opset 13.
    let plain = build_model("mnist-cnn", &ModelContext::new(vec![1, 28, 28], 10)).unwrap();
    let opts = ExportOptions { format: ExportFormat::Onnx, sample_shape: Some(vec![1, 28, 28]) };
    let m = export_model(&plain, &init_params(&plain, &mut Rng::new(0)), &opts).unwrap();
    assert_eq!(m.opset_import[0].version, 13);
}
