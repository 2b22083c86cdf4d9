//! Metadata and report passes on the zoo models: the worked example of doc/mase-semantics.md#common-metadata-example,
//! MASE's op counts and layer types, software and hardware entries, and errors.

mod common;
use common::*;
use mase_ir::{ArgMeta, TensorMeta};
use mase_passes::{run_pass, PassError};
use serde_json::{json, Value};

/// The entry `key` of a node's common `args` or `results`.
fn entry<'g>(g: &'g mase_ir::Graph, node: &str, table: &str, key: &str) -> Option<&'g ArgMeta> {
    let n = g.node(g.require(node).unwrap());
    let t = if table == "args" { &n.meta.common.args } else { &n.meta.common.results };
    t.get(key)
}

fn tensor(g: &mase_ir::Graph, node: &str, table: &str, key: &str) -> TensorMeta {
    match entry(g, node, table, key) {
        Some(ArgMeta::Tensor(m)) => m.clone(),
        other => panic!("{node}.{table}.{key}: {other:?}"),
    }
}

fn config(g: &mase_ir::Graph, node: &str, table: &str, key: &str) -> Value {
    match entry(g, node, table, key) {
        Some(ArgMeta::Config(v)) => v.clone(),
        other => panic!("{node}.{table}.{key}: {other:?}"),
    }
}

#[test]
fn toy_worked_example() {
    // doc/mase-semantics.md#common-metadata-example: ToyNet on x of shape [8, 784].
    let (mut g, mut ctx) = model("toy", &[784], 10);
    with_metadata(&mut g, &mut ctx);
    let names: Vec<&str> = g.nodes().iter().map(|n| n.name.as_str()).collect();
    assert_eq!(names, ["x", "size", "view", "seq_blocks_0", "seq_blocks_1", "seq_blocks_2", "seq_blocks_3", "seq_blocks_4", "output"]);
    let n = g.node(g.require("seq_blocks_0").unwrap());
    assert_eq!(n.meta.common.mase_type.as_deref(), Some("module_related_func"));
    assert_eq!(n.meta.common.mase_op.as_deref(), Some("linear"));
    assert_eq!(n.meta.common.args.keys().collect::<Vec<_>>(), ["data_in_0", "weight", "bias"]);
    let f32 = |shape: Vec<usize>, is_param: bool| TensorMeta {
        shape,
        torch_dtype: "torch.float32".into(),
        kind: "float".into(),
        precision: vec![json!(32)],
        is_param,
    };
    let cases = [
        ("seq_blocks_0", "args", "data_in_0", f32(vec![8, 784], false)),
        ("seq_blocks_0", "args", "weight", f32(vec![8, 784], true)),
        ("seq_blocks_0", "args", "bias", f32(vec![8], true)),
        ("seq_blocks_0", "results", "data_out_0", f32(vec![8, 8], false)),
        ("seq_blocks_1", "results", "data_out_0", f32(vec![8, 8], false)),
        ("seq_blocks_4", "results", "data_out_0", f32(vec![8, 10], false)),
        ("view", "args", "data_in_0", f32(vec![8, 784], false)),
        ("view", "results", "data_out_0", f32(vec![8, 784], false)),
        ("x", "results", "data_out_0", f32(vec![8, 784], false)),
        ("output", "results", "data_out_0", f32(vec![8, 10], false)),
    ];
    for (node, table, key, want) in cases {
        assert_eq!(tensor(&g, node, table, key), want, "{node}.{table}.{key}");
    }
    assert_eq!(config(&g, "size", "args", "dim"), json!(0));
    assert_eq!(config(&g, "size", "results", "data_out_0"), json!({"type": "int", "shape": [1], "value": 8}));
    assert_eq!(config(&g, "view", "args", "shape_0"), json!(8));
    assert_eq!(config(&g, "view", "args", "shape_1"), json!(-1));
    for (node, ty, op) in [
        ("x", "placeholder", "placeholder"),
        ("size", "implicit_func", "size"),
        ("view", "implicit_func", "view"),
        ("seq_blocks_1", "module_related_func", "relu"),
        ("output", "output", "output"),
    ] {
        let c = &g.node(g.require(node).unwrap()).meta.common;
        assert_eq!((c.mase_type.as_deref(), c.mase_op.as_deref()), (Some(ty), Some(op)), "{node}");
    }
    assert_eq!(g.meta.common["nodes_in"], json!(["seq_blocks_0"]));
    assert_eq!(g.meta.common["nodes_out"], json!(["seq_blocks_4"]));
    assert_eq!(g.meta.common["args"]["data_in_0"]["shape"], json!([8, 784]));
    assert_eq!(g.meta.common["results"]["data_out_0"]["shape"], json!([8, 10]));
    for n in g.nodes() {
        let implicit = ["x", "size", "view", "output"].contains(&n.name.as_str());
        assert_eq!(n.meta.hardware.get("is_implicit") == Some(&json!(true)), implicit, "{}", n.name);
    }
}

#[test]
fn report_graph_counts_like_mase() {
    let cases = [
        (
            "jsc-tiny",
            4,
            vec![
                "BatchNorm1d(16, eps=1e-05, momentum=0.1, affine=True, track_running_stats=True)",
                "ReLU()",
                "Linear(in_features=16, out_features=5, bias=True)",
                "ReLU()",
            ],
        ),
        ("jsc-toy", 11, vec![]),
    ];
    for (name, modules, layers) in cases {
        let (mut g, mut ctx) = model(name, &[16], 5);
        let r = pass("report_graph", &mut g, &mut ctx, json!({}));
        let want = json!({"placeholder": 1, "get_attr": 0, "call_function": 0, "call_method": 0, "call_module": modules, "output": 1});
        assert_eq!(r.json["counts"], want, "{name}");
        let counts =
            format!("{{'placeholder': 1, 'get_attr': 0, 'call_function': 0, 'call_method': 0, 'call_module': {modules}, 'output': 1}}");
        assert!(r.text.contains(&format!("\nNetwork overview:\n{counts}\nLayer types:\n[")), "{}", r.text);
        assert!(r.text.starts_with("graph():\n    %x : [num_users=1] = placeholder[target=x]"), "{}", r.text);
        if !layers.is_empty() {
            assert_eq!(r.json["layer_types"], json!(layers), "{name}");
            assert!(r.text.ends_with(&format!("[{}]", layers.join(", "))), "{}", r.text);
        }
    }
    // jsc-toy: BN, ReLU, then 3 x (Linear, BN, ReLU).
    let (mut g, mut ctx) = model("jsc-toy", &[16], 5);
    let r = pass("report_graph", &mut g, &mut ctx, json!({}));
    let kinds: Vec<String> =
        r.json["layer_types"].as_array().unwrap().iter().map(|l| l.as_str().unwrap().split('(').next().unwrap().to_string()).collect();
    assert_eq!(
        kinds,
        ["BatchNorm1d", "ReLU", "Linear", "BatchNorm1d", "ReLU", "Linear", "BatchNorm1d", "ReLU", "Linear", "BatchNorm1d", "ReLU"]
    );
}

#[test]
fn software_entries_follow_mase() {
    let (mut g, mut ctx) = model("toy", &[784], 10);
    with_metadata(&mut g, &mut ctx);
    let (mut t, mut tctx) = jsc_tiny();
    with_metadata(&mut t, &mut tctx);
    let keys = |g: &mase_ir::Graph, node: &str, table: &str| -> Vec<String> {
        let n = g.node(g.require(node).unwrap());
        n.meta.software[table].as_object().unwrap().keys().cloned().collect()
    };
    let cases: Vec<(&mase_ir::Graph, &str, &str, Vec<&str>)> = vec![
        (&t, "seq_blocks_0", "args", vec!["data_in_0", "weight", "bias", "running_mean", "running_var"]),
        (&t, "seq_blocks_0", "results", vec!["data_out_0"]),
        (&t, "seq_blocks_2", "args", vec!["data_in_0", "weight", "bias"]),
        (&t, "x", "args", vec![]),
        (&t, "x", "results", vec!["data_out_0"]),
        (&t, "output", "args", vec!["data_in_0"]),
        (&t, "output", "results", vec![]),
        (&g, "size", "args", vec!["data_in_0"]),
        (&g, "size", "results", vec![]),
        (&g, "view", "args", vec!["data_in_0", "data_in_1"]),
    ];
    for (graph, node, table, want) in cases {
        assert_eq!(keys(graph, node, table), want, "{node}.{table}");
    }
    let n = t.node(t.require("seq_blocks_2").unwrap());
    assert_eq!(n.meta.software["args"]["weight"], json!({"stat": {}}));
}

#[test]
fn hardware_metadata_without_the_rank_3_crash() {
    let (mut g, mut ctx) = jsc_tiny();
    with_metadata(&mut g, &mut ctx);
    pass("add_hardware_metadata", &mut g, &mut ctx, json!(null));
    let hw = |g: &mase_ir::Graph, node: &str| g.node(g.require(node).unwrap()).meta.hardware.clone();
    let lin = hw(&g, "seq_blocks_2");
    assert_eq!(lin["toolchain"], "INTERNAL");
    assert_eq!(lin["module"], "fixed_linear");
    assert_eq!(lin["device_id"], -1);
    assert_eq!(lin["parallelism"], json!([1, 4]));
    assert_eq!(lin["interface"]["weight"], json!({"storage": "BRAM", "transpose": false}));
    let vp = &lin["verilog_param"];
    let want = [
        ("DATA_IN_0_PRECISION_0", json!(32)),
        ("DATA_IN_0_TENSOR_SIZE_DIM_0", json!(16)),
        ("DATA_IN_0_TENSOR_SIZE_DIM_1", json!(8)),
        ("DATA_IN_0_PARALLELISM_DIM_0", json!(4)),
        ("DATA_IN_0_PARALLELISM_DIM_1", json!(1)),
        ("WEIGHT_TENSOR_SIZE_DIM_0", json!(16)),
        ("WEIGHT_TENSOR_SIZE_DIM_1", json!(5)),
        ("BIAS_TENSOR_SIZE_DIM_0", json!(5)),
        ("BIAS_PARALLELISM_DIM_0", json!(1)),
        ("DATA_OUT_0_TENSOR_SIZE_DIM_0", json!(5)),
    ];
    for (k, v) in want {
        assert_eq!(vp[k], v, "{k}");
    }
    assert_eq!(hw(&g, "seq_blocks_0")["toolchain"], "HLS");
    assert_eq!(hw(&g, "x")["is_implicit"], true);
    assert_eq!(
        g.meta.hardware["verilog_sources"].as_array().unwrap().len(),
        13,
        "fixed_linear's 11 files and fixed_relu's 1 for each of the two ReLUs"
    );
    // Rank-4 activations: MASE raises IndexError here.
    let (mut c, mut cctx) = model("mnist-cnn", &[1, 28, 28], 10);
    with_metadata(&mut c, &mut cctx);
    pass("add_hardware_metadata", &mut c, &mut cctx, json!(null));
    let vp = hw(&c, "seq_blocks_0")["verilog_param"].clone();
    assert_eq!(vp["DATA_IN_0_TENSOR_SIZE_DIM_3"], 8, "batch is the outermost dimension");
    assert_eq!(vp["DATA_IN_0_PARALLELISM_DIM_2"], 1);
    assert_eq!(vp["DATA_IN_0_PARALLELISM_DIM_0"], 4);
}

#[test]
fn reports_render() {
    let (mut g, mut ctx) = jsc_tiny();
    with_metadata(&mut g, &mut ctx);
    let r = pass("report_node_type", &mut g, &mut ctx, json!({}));
    let lines: Vec<&str> = r.text.lines().collect();
    assert_eq!(lines[0], "Inspecting graph [add_common_node_type_analysis_pass]");
    assert_eq!(
        lines[1].split_whitespace().collect::<Vec<_>>(),
        ["Node", "name", "Fx", "Node", "op", "Mase", "type", "Mase", "op", "Value", "type"]
    );
    assert_eq!(lines[3].split_whitespace().collect::<Vec<_>>(), ["x", "placeholder", "placeholder", "placeholder", "NA"]);
    assert_eq!(lines[4].split_whitespace().collect::<Vec<_>>(), ["seq_blocks_0", "call_module", "module", "batch_norm1d", "float"]);
    let r = pass("report_node_shape", &mut g, &mut ctx, json!({}));
    assert!(r.text.contains("seq_blocks_2:\nin:\ndata_in_0 = [8, 16]\n"), "{}", r.text);
    assert!(r.text.contains("out:\ndata_out_0 = [8, 5]"), "{}", r.text);
    let r = pass("report_node_meta_param", &mut g, &mut ctx, json!({"which": ["common", "software"]}));
    let header = r.text.lines().nth(1).unwrap();
    assert!(header.contains("Common Param") && header.contains("Software Param") && !header.contains("Hardware Param"), "{header}");
    assert!(r.text.contains("'mase_op': 'linear'"), "{}", r.text);
    assert!(r.text.contains("'torch_dtype': torch.float32"), "{}", r.text);
}

#[test]
fn save_and_load_node_meta_round_trip() {
    let (mut g, mut ctx) = jsc_tiny();
    with_metadata(&mut g, &mut ctx);
    pass("quantize", &mut g, &mut ctx, lab_linear_8_4());
    let dir = std::env::temp_dir().join(format!("mase-passes-meta-{}", std::process::id()));
    let path = dir.join("node_meta_param.toml");
    pass("save_node_meta_param", &mut g, &mut ctx, json!({"save_path": path}));
    let saved = g.clone();
    pass("init_metadata", &mut g, &mut ctx, json!(null));
    assert_ne!(g.nodes()[3].meta, saved.nodes()[3].meta);
    pass("load_node_meta_param", &mut g, &mut ctx, json!({"load_path": path}));
    for (a, b) in g.nodes().iter().zip(saved.nodes()) {
        assert_eq!(a.meta, b.meta, "{}", a.name);
    }
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(text.contains("[seq_blocks_2.common]") || text.contains("[seq_blocks_2.common.args"), "{text}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn bad_arguments_and_missing_metadata_are_one_line_errors() {
    let (mut g, mut ctx) = jsc_tiny();
    let cases: Vec<(&str, Value, &str)> = vec![
        ("report_graph", json!({"file": "x.txt"}), "unknown field `file`"),
        ("report_node_type", json!({}), "node `x` has no common metadata; run `add_common_metadata` first"),
        ("add_software_metadata", json!({}), "run `add_common_metadata` first"),
        ("report_node_meta_param", json!({"which": ["everything"]}), "`which` entry `everything`"),
        ("no_such_pass", json!({}), "unknown pass `no_such_pass`"),
        ("add_common_metadata", json!({"dummy_in": 1}), "unknown field `dummy_in`"),
    ];
    for (p, args, want) in cases {
        let e: PassError = run_pass(p, &mut g, &mut ctx, &args).unwrap_err();
        let s = e.to_string();
        assert!(s.contains(want), "{p}: {s}");
        assert!(!s.contains('\n'), "{p}: {s}");
    }
}

/// A graph of implicit nodes only (a reshape and a flatten between input and output): the output
/// is reached from both ends and must be counted once (it was counted twice, and the node count
/// underflowed).
#[test]
fn hardware_metadata_of_a_graph_without_hardware_nodes() {
    let mut g = mase_ir::Graph::new();
    let x = g.placeholder("x");
    let shape = vec![mase_ir::DimArg::Const(-1), mase_ir::DimArg::Const(3), mase_ir::DimArg::Const(8)];
    let r = g.call_method("reshape", mase_ir::Op::Reshape { shape }, &[x]);
    let f = g.call_function("torch.flatten", mase_ir::Op::Flatten { start_dim: 1, end_dim: -1 }, &[r]);
    g.output(f);
    let mut ctx = mase_passes::PassContext::new(mase_ir::ParamStore::new());
    ctx.inputs = mase_passes::InputSource::Random { sample_shape: vec![6, 4] };
    with_metadata(&mut g, &mut ctx);
    let report = pass("add_hardware_metadata", &mut g, &mut ctx, json!(null));
    assert_eq!(report.json["hardware_nodes"], 0);
}

/// `forward(a, b)` returning `(fc(a) + b, fc(a))`, its inputs' shapes recorded in the
/// placeholders' metadata (as the ONNX importer and Python's `dummy_in` record them).
fn two_inputs_two_outputs() -> (mase_ir::Graph, mase_passes::PassContext) {
    use mase_ir::{Graph, Op};
    let mut g = Graph::new();
    let a = g.placeholder("a");
    let b = g.placeholder("b");
    let fc = g.call_module("fc", Op::Linear { in_features: 4, out_features: 3, bias: true }, &[a]);
    let s = g.call_function("operator.add", Op::Add, &[fc, b]);
    g.outputs(&[s, fc]);
    for (name, shape) in [("a", vec![2, 4]), ("b", vec![2, 3])] {
        let id = g.require(name).unwrap();
        g.node_mut(id).meta.common.results.insert("data_out_0".into(), ArgMeta::Tensor(TensorMeta::float32(shape)));
    }
    let params = mase_runtime::init_params(&g, &mut mase_ir::Rng::new(0));
    (g, mase_passes::PassContext::new(params))
}

#[test]
fn several_inputs_and_outputs_get_metadata_and_costs() {
    let (mut g, mut ctx) = two_inputs_two_outputs();
    let r = run_pass("add_common_metadata", &mut g, &mut ctx, &json!({"batch_size": 5})).unwrap();
    assert_eq!(r.json["input_shape"], json!([[5, 4], [5, 3]]));
    // Every input and output edge, by name: (node, table, key, shape).
    let cases: &[(&str, &str, &str, &[usize])] = &[
        ("a", "results", "data_out_0", &[5, 4]),
        ("b", "results", "data_out_0", &[5, 3]),
        ("add", "args", "data_in_1", &[5, 3]),
        ("output", "args", "data_in_0", &[5, 3]),
        ("output", "args", "data_in_1", &[5, 3]),
    ];
    for &(node, table, key, shape) in cases {
        assert_eq!(tensor(&g, node, table, key).shape, shape, "{node}.{table}.{key}");
    }
    run_pass("add_software_metadata", &mut g, &mut ctx, &json!({})).unwrap();
    let sw = &g.node(g.require("output").unwrap()).meta.software;
    assert_eq!(sw["args"].as_object().unwrap().keys().collect::<Vec<_>>(), ["data_in_0", "data_in_1"]);
    // The cost passes see both inputs: the linear layer's 4 x 3 weight and 3 biases, and the
    // addition of `b`'s 3 values per sample.
    let flops = run_pass("flops", &mut g, &mut ctx, &json!({})).unwrap();
    assert_eq!(flops.json["total"]["params"], json!(15), "{}", flops.json);
    let add = flops.json["nodes"].as_array().unwrap().iter().find(|n| n["name"] == "add").unwrap();
    assert_eq!(add["flops"], json!(3), "{add}");
    // Passes that run the model on the data set's batches take one input tensor.
    for (pass, args) in [("latency", json!({})), ("fold_batch_norm", json!({}))] {
        let e = run_pass(pass, &mut g, &mut ctx, &args).unwrap_err().to_string();
        assert_eq!(e, format!("pass `{pass}` runs the model on batches of one input tensor; the graph has 2 inputs"));
    }
}
