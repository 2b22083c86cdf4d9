//! The quantize transform, its summary and verification (doc/mase-semantics.md#quantize-transform).

mod common;
use common::*;
use mase_ir::{ArgMeta, Graph, NodeQuant, Op, QuantFormat};
use mase_passes::quantize::{quantize_graph, QuantizeArgs};
use mase_passes::{parse_args, run_pass};
use serde_json::{json, Value};

fn int(width: u32, frac_width: i32) -> Option<QuantFormat> {
    Some(QuantFormat::Integer { width, frac_width, signed: true })
}

fn quant<'a>(g: &'a Graph, node: &str) -> Option<&'a NodeQuant> {
    g.node(g.require(node).unwrap()).quant.as_ref()
}

fn edge(g: &Graph, node: &str, table: &str, key: &str) -> (String, Value) {
    let c = &g.node(g.require(node).unwrap()).meta.common;
    let t = if table == "args" { &c.args } else { &c.results };
    match t.get(key) {
        Some(ArgMeta::Tensor(m)) => (m.kind.clone(), Value::from(m.precision.clone())),
        other => panic!("{node}.{table}.{key}: {other:?}"),
    }
}

/// An integer 8/4 config for data_in, weight and bias (MASE's lab config).
fn cfg_8_4() -> Value {
    lab_linear_8_4()["linear"]["config"].clone()
}

#[test]
fn lab_config_quantizes_linear_and_propagates_formats() {
    let (mut g, mut ctx) = jsc_tiny();
    with_metadata(&mut g, &mut ctx);
    let args = lab_linear_8_4();
    let before = args.clone();
    let r = pass("quantize", &mut g, &mut ctx, args.clone());
    assert_eq!(args, before, "the arguments are not mutated");
    assert_eq!(r.json["quantized"], 1);
    let q = quant(&g, "seq_blocks_2").expect("linear is quantized");
    assert_eq!(q.data_in, vec![int(8, 4)]);
    assert_eq!((q.weight.clone(), q.bias.clone(), q.data_out.clone()), (int(8, 4), int(8, 4), None));
    for n in ["seq_blocks_0", "seq_blocks_1", "seq_blocks_3"] {
        assert!(quant(&g, n).is_none(), "{n}");
    }
    // doc/mase-semantics.md#quantize-metadata for the inputs; outputs propagated: 8 + 8 + clog2(16) = 20, + 1 for the bias add.
    let cases = [
        ("seq_blocks_2", "args", "data_in_0", "integer", json!([8, 4])),
        ("seq_blocks_2", "args", "weight", "integer", json!([8, 4])),
        ("seq_blocks_2", "args", "bias", "integer", json!([8, 4])),
        ("seq_blocks_2", "results", "data_out_0", "integer", json!([21, 8])),
        ("seq_blocks_3", "args", "data_in_0", "integer", json!([21, 8])),
        ("seq_blocks_3", "results", "data_out_0", "integer", json!([21, 8])),
        ("seq_blocks_1", "results", "data_out_0", "float", json!([32])),
        ("seq_blocks_0", "args", "weight", "float", json!([32])),
    ];
    for (node, table, key, kind, precision) in cases {
        assert_eq!(edge(&g, node, table, key), (kind.to_string(), precision), "{node}.{table}.{key}");
    }
    // Running the same arguments again gives the same graph.
    let again = g.clone();
    pass("quantize", &mut g, &mut ctx, args);
    assert_eq!(g, again);
}

#[test]
fn selection_by_name_and_regex() {
    // jsc-three-linear: Linear layers seq_blocks_2, _4, _6 with ReLUs between.
    let cfg4 = json!({"name": "integer", "data_in_width": 4, "data_in_frac_width": 2, "weight_width": 4, "weight_frac_width": 2, "bias_width": 4, "bias_frac_width": 2});
    // (arguments, [(node, width of its first input, if quantized)]).
    type Case<'a> = (Value, Vec<(&'a str, Option<u32>)>);
    let cases: Vec<Case<'_>> = vec![
        (
            json!({"by": "name", "default": {"config": {"name": "NA"}}, "seq_blocks_4": {"config": cfg_8_4()}}),
            vec![("seq_blocks_2", None), ("seq_blocks_4", Some(8)), ("seq_blocks_6", None), ("seq_blocks_3", None)],
        ),
        (
            json!({"by": "name", "default": {"config": cfg_8_4()}, "seq_blocks_4": {"config": cfg4}}),
            vec![("seq_blocks_2", Some(8)), ("seq_blocks_4", Some(4)), ("seq_blocks_6", Some(8)), ("seq_blocks_3", Some(8))],
        ),
        (
            json!({"by": "regex_name", "default": {"config": {"name": "NA"}}, "seq_blocks_[24]": {"config": cfg_8_4()}}),
            vec![("seq_blocks_2", Some(8)), ("seq_blocks_4", Some(8)), ("seq_blocks_6", None), ("seq_blocks_1", None)],
        ),
        // The first matching pattern wins; `default` and `report` are not patterns.
        (
            json!({"by": "regex_name", "report": true, "seq_blocks_2": {"config": cfg4}, "seq_blocks_[0-9]": {"config": cfg_8_4()}, "default": {"config": {"name": "NA"}}}),
            vec![("seq_blocks_2", Some(4)), ("seq_blocks_4", Some(8)), ("seq_blocks_3", Some(8)), ("seq_blocks_0", None)],
        ),
        (json!({"by": "type", "relu": {"config": cfg_8_4()}}), vec![("seq_blocks_1", Some(8)), ("seq_blocks_2", None)]),
    ];
    for (args, want) in cases {
        let (mut g, mut ctx) = model("jsc-three-linear", &[16], 5);
        pass("quantize", &mut g, &mut ctx, args.clone());
        for (node, width) in want {
            let got = quant(&g, node).and_then(|q| match q.data_in.first() {
                Some(Some(QuantFormat::Integer { width, .. })) => Some(*width),
                _ => None,
            });
            assert_eq!(got, width, "{args}: {node}");
        }
    }
    // ReLU reads its input as unsigned integers, as MASE's ReLUInteger.
    let (mut g, mut ctx) = model("jsc-three-linear", &[16], 5);
    pass(
        "quantize",
        &mut g,
        &mut ctx,
        json!({"by": "type", "relu": {"config": {"name": "integer", "data_in_width": 8, "data_in_frac_width": "NA"}}}),
    );
    assert_eq!(
        quant(&g, "seq_blocks_3").unwrap().data_in,
        vec![Some(QuantFormat::Integer { width: 8, frac_width: 4, signed: false })],
        "NA frac_width is width // 2"
    );
}

#[test]
fn functions_and_operand_roles() {
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let l = g.call_module("fc", Op::Linear { in_features: 4, out_features: 4, bias: false }, &[x]);
    let a = g.call_function("operator.add", Op::Add, &[l, x]);
    let t = g.call_method("transpose", Op::Transpose { dim0: 0, dim1: 1 }, &[a]);
    let m = g.call_function("torch.matmul", Op::MatMul, &[a, t]);
    let r = g.call_function("torch.nn.functional.relu", Op::Relu, &[m]);
    g.output(r);
    let params = mase_runtime::init_params(&g, &mut mase_ir::Rng::new(1));
    let mut ctx = mase_passes::PassContext::new(params);
    ctx.inputs = mase_passes::InputSource::Random { sample_shape: vec![4] };
    with_metadata(&mut g, &mut ctx);
    let cfg = json!({"name": "integer", "data_in_width": 8, "data_in_frac_width": 3, "weight_width": 6, "weight_frac_width": 2});
    let args = json!({"by": "type", "add": {"config": cfg}, "matmul": {"config": cfg}, "linear": {"config": cfg}});
    pass("quantize", &mut g, &mut ctx, args);
    assert_eq!(quant(&g, "add").unwrap().data_in, vec![int(8, 3), int(8, 3)], "both operands use data_in");
    assert_eq!(quant(&g, "matmul").unwrap().data_in, vec![int(8, 3), int(6, 2)], "the right operand uses weight");
    assert_eq!(quant(&g, "fc").unwrap().bias, None, "no bias, no bias format");
    assert!(quant(&g, "relu").is_none());
    // fc: [8 + 6 + clog2(4), 3 + 2] = [16, 5] without a bias; add: [max(16 - 5, 8 - 3) + 5 + 1, 5]
    // but add quantizes both inputs to [8, 3] first: [max(5, 5) + 3 + 1, 3] = [9, 3]; matmul: [8 + 6 + 2, 5].
    let cases = [
        ("fc", json!([16, 5])),
        ("add", json!([9, 3])),
        ("transpose", json!([9, 3])),
        ("matmul", json!([16, 5])),
        ("relu", json!([16, 5])),
    ];
    for (node, p) in cases {
        assert_eq!(edge(&g, node, "results", "data_out_0"), ("integer".to_string(), p), "{node}");
    }
    // The summary reports function replacements as changed (MASE says False).
    let r = pass("summarize_quantization", &mut g, &mut ctx, json!({}));
    let rows = r.json["table"].as_array().unwrap();
    let row = |n: &str| rows.iter().find(|r| r["new_name"] == n).unwrap().clone();
    assert_eq!(
        (row("add")["original_type"].clone(), row("add")["quantized_type"].clone(), row("add")["changed"].clone()),
        (json!("add"), json!("add_integer"), json!(true))
    );
    assert_eq!(row("matmul")["quantized_type"], "matmul_integer");
    assert_eq!(row("fc")["quantized_type"], "LinearInteger");
    assert_eq!(row("relu")["changed"], false);
}

/// einsum takes matmul's groups, attention a data_in format on its query, key and value, and an
/// embedding a weight format on its table, where a type key names them; the executor then runs
/// the attention on the quantized operands.
#[test]
fn attention_ops_quantize_by_type() {
    use mase_runtime::{ExecOptions, Executor, Mode};
    let attention = || Op::ScaledDotProductAttention { mask: None, is_causal: false, scale: None };
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let e = g.call_function("torch.functional.einsum", Op::Einsum { equation: "bqd,bkd->bqk".into() }, &[x, x]);
    let a = g.call_function("torch.nn.functional.scaled_dot_product_attention", attention(), &[x, x, x]);
    let w = g.get_attr("table");
    let emb = Op::Embedding { num_embeddings: 5, embedding_dim: 3, padding_idx: None, functional: true };
    // Two lookups whose values nothing reads: only their formats are checked.
    g.call_function("torch.nn.functional.embedding", emb, &[x, w]);
    g.call_module("tok", Op::Embedding { num_embeddings: 5, embedding_dim: 3, padding_idx: None, functional: false }, &[x]);
    let y = g.call_function("operator.add", Op::Add, &[e, a]);
    g.output(y);
    let cfg = json!({"name": "integer", "data_in_width": 8, "data_in_frac_width": 3, "weight_width": 6, "weight_frac_width": 2});
    let types = ["einsum", "scaled_dot_product_attention", "embedding"];
    let args: Value = types.iter().fold(json!({"by": "type"}), |mut a, t| {
        a[t] = json!({"config": cfg});
        a
    });
    mase_passes::quantize::quantize_json(&mut g, &args).unwrap();
    assert_eq!(quant(&g, "einsum").unwrap().data_in, vec![int(8, 3), int(6, 2)], "the right operand uses weight");
    assert_eq!(quant(&g, "scaled_dot_product_attention").unwrap().data_in, vec![int(8, 3); 3]);
    assert_eq!(quant(&g, "embedding").unwrap().data_in, vec![None, int(6, 2)], "a function call's table is input 1");
    let tok = quant(&g, "tok").unwrap();
    assert_eq!((tok.data_in.clone(), tok.weight.clone()), (vec![], int(6, 2)), "the module quantizes its table only");
    assert!(quant(&g, "add").is_none(), "a default-free type config leaves other ops alone");

    // The attention of the quantized graph is the float attention of the input rounded to 8/3
    // (multiples of 1/8, well inside [-16, 15.875]).
    let mut rng = mase_ir::Rng::new(3);
    let input: Vec<f32> = (0..2 * 4 * 3).map(|_| rng.normal() as f32).collect();
    let rounded: Vec<f32> = input.iter().map(|v| (v * 8.0).round() / 8.0).collect();
    let mut only = Graph::new();
    let x = only.placeholder("x");
    let a = only.call_function("torch.nn.functional.scaled_dot_product_attention", attention(), &[x, x, x]);
    only.output(a);
    let mut quantized = only.clone();
    quantized.node_mut(quantized.require("scaled_dot_product_attention").unwrap()).quant =
        quant(&g, "scaled_dot_product_attention").cloned();
    let run = |g: &Graph, x: &[f32]| {
        let mut exec = Executor::new(g, &mase_ir::ParamStore::new(), ExecOptions { threads: 1, seed: 0 }).unwrap();
        exec.forward(x, &[2, 4, 3], Mode::Eval).unwrap().to_vec()
    };
    assert_eq!(run(&quantized, &input), run(&only, &rounded));
    assert_ne!(run(&quantized, &input), run(&only, &input));
}

#[test]
fn summary_of_the_lab_config_on_jsc_tiny() {
    let (mut g, mut ctx) = jsc_tiny();
    with_metadata(&mut g, &mut ctx);
    pass("quantize", &mut g, &mut ctx, lab_linear_8_4());
    let dir = std::env::temp_dir().join(format!("mase-passes-summary-{}", std::process::id()));
    let r = pass("summarize_quantization", &mut g, &mut ctx, json!({"save_dir": dir}));
    let hist: Vec<(String, String, u64, u64, u64)> = r.json["histogram"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| {
            (
                h["original_type"].as_str().unwrap().into(),
                h["op"].as_str().unwrap().into(),
                h["total"].as_u64().unwrap(),
                h["changed"].as_u64().unwrap(),
                h["unchanged"].as_u64().unwrap(),
            )
        })
        .collect();
    let want = [
        ("BatchNorm1d", "batch_norm1d", 1, 0, 1),
        ("Linear", "linear", 1, 1, 0),
        ("ReLU", "relu", 2, 0, 2),
        ("output", "output", 1, 0, 1),
        ("x", "placeholder", 1, 0, 1),
    ];
    assert_eq!(hist, want.map(|(a, b, c, d, e)| (a.to_string(), b.to_string(), c, d, e)));
    let h = std::fs::read_to_string(dir.join("quantize_histogram.csv")).unwrap();
    assert_eq!(h, "Original type,OP,Total,Changed,Unchanged\nBatchNorm1d,batch_norm1d,1,0,1\nLinear,linear,1,1,0\nReLU,relu,2,0,2\noutput,output,1,0,1\nx,placeholder,1,0,1\n");
    let t = std::fs::read_to_string(dir.join("quantize_table.csv")).unwrap();
    let lines: Vec<&str> = t.lines().collect();
    assert_eq!(lines[0], ",Ori name,New name,MASE_TYPE,Mase_OP,Original type,Quantized type,Changed");
    assert_eq!(lines[3], "2,seq_blocks_1,seq_blocks_1,module_related_func,relu,ReLU,ReLU,False");
    assert_eq!(lines[4], "3,seq_blocks_2,seq_blocks_2,module_related_func,linear,Linear,LinearInteger,True");
    assert!(r.text.contains("| Linear          | linear       |       1 |         1 |           0 |"), "{}", r.text);
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn special_configs() {
    let cases: Vec<(Value, NodeQuant)> = vec![
        // bypass keeps the node in float.
        (
            json!({"name": "integer", "bypass": true}),
            NodeQuant { bypass: true, config: json!({"name": "integer", "bypass": true}), ..NodeQuant::default() },
        ),
        // binary on a linear layer binarizes the weight only (MASE's LinearBinary).
        (
            json!({"name": "binary", "data_in_width": 1, "data_in_stochastic": 0, "data_in_bipolar": 1, "weight_width": 1, "weight_stochastic": false,
                   "weight_bipolar": true, "bias_width": 1, "bias_stochastic": 0, "bias_bipolar": 1, "binary_training": "NA"}),
            NodeQuant {
                data_in: vec![None],
                weight: Some(QuantFormat::Binary { stochastic: false, bipolar: true }),
                ..NodeQuant::default()
            },
        ),
        // ternary's threshold: 0.75 * mean when the config gives it.
        (
            json!({"name": "ternary", "data_in_width": 2, "data_in_scaling_factor": false, "data_in_mean": "NA", "data_in_median": "NA", "data_in_max": "NA",
                   "weight_width": 2, "weight_scaling_factor": true, "weight_mean": 0.4, "weight_median": "NA", "weight_max": 2.0}),
            NodeQuant {
                data_in: vec![None],
                weight: Some(QuantFormat::Ternary { scaling_factor: true, threshold: Some(0.3) }),
                ..NodeQuant::default()
            },
        ),
        (
            json!({"name": "block_fp", "data_in_width": 7, "data_in_exponent_width": 8, "data_in_exponent_bias": 127, "data_in_block_size": [1, 16],
                   "weight_width": 7, "weight_exponent_width": 8, "weight_exponent_bias": "NA", "weight_block_size": 16}),
            NodeQuant {
                data_in: vec![Some(QuantFormat::BlockFp {
                    width: 7,
                    exponent_width: 8,
                    exponent_bias: Some(127),
                    block_size: vec![1, 16],
                    skip_first_dim: true,
                })],
                weight: Some(QuantFormat::BlockFp {
                    width: 7,
                    exponent_width: 8,
                    exponent_bias: None,
                    block_size: vec![16],
                    skip_first_dim: false,
                }),
                ..NodeQuant::default()
            },
        ),
        // MASE's -1, the whole dimension, is stored as 0.
        (
            json!({"name": "block_log", "data_in_width": 8, "data_in_exponent_bias_width": 4, "data_in_block_size": [1, -1],
                   "weight_width": 8, "weight_exponent_bias_width": 4, "weight_block_size": [-1, 4]}),
            NodeQuant {
                data_in: vec![Some(QuantFormat::BlockLog {
                    width: 8,
                    exponent_bias_width: 4,
                    block_size: vec![1, 0],
                    skip_first_dim: true,
                })],
                weight: Some(QuantFormat::BlockLog { width: 8, exponent_bias_width: 4, block_size: vec![0, 4], skip_first_dim: false }),
                ..NodeQuant::default()
            },
        ),
        // The microscaling formats with MASE's keys; block_size 32 and block_dim -1 by default.
        (
            json!({"name": "mxint", "data_in_width": 8, "weight_width": 8, "weight_block_size": 16, "weight_block_dim": 1,
                   "bias_width": 4, "bias_block_size": 8, "bias_block_dim": 0}),
            NodeQuant {
                data_in: vec![Some(QuantFormat::Mxint { width: 8, block_size: 32, block_dim: -1 })],
                weight: Some(QuantFormat::Mxint { width: 8, block_size: 16, block_dim: 1 }),
                bias: Some(QuantFormat::Mxint { width: 4, block_size: 8, block_dim: 0 }),
                ..NodeQuant::default()
            },
        ),
        (
            json!({"name": "mxfp", "data_in_exponent_width": 4, "data_in_frac_width": 3, "data_in_block_size": 32,
                   "weight_exponent_width": 2, "weight_frac_width": 1, "weight_block_size": 32}),
            NodeQuant {
                data_in: vec![Some(QuantFormat::Mxfp { exponent_width: 4, frac_width: 3, block_size: 32, block_dim: -1 })],
                weight: Some(QuantFormat::Mxfp { exponent_width: 2, frac_width: 1, block_size: 32, block_dim: -1 }),
                ..NodeQuant::default()
            },
        ),
    ];
    for (cfg, mut want) in cases {
        let (mut g, _) = jsc_tiny();
        let args: QuantizeArgs = parse_args("quantize", &json!({"by": "name", "seq_blocks_2": {"config": cfg.clone()}})).unwrap();
        quantize_graph(&mut g, &args).unwrap();
        if want.config.is_null() {
            want.config = cfg.clone();
        }
        assert_eq!(quant(&g, "seq_blocks_2"), Some(&want), "{cfg}");
    }
}

#[test]
fn bad_configs_are_one_line_errors() {
    let with = |k: &str, v: Value| {
        let mut c = cfg_8_4();
        c[k] = v;
        json!({"by": "type", "linear": {"config": c}})
    };
    let cases: Vec<(Value, &str)> = vec![
        (with("name", json!("posit")), "unknown format `posit`"),
        (with("weight_width", json!(0)), "`width` = 0"),
        (with("data_in_frac_width", json!(9)), "`frac_width` = 9: is larger than `width` = 8"),
        (with("weight_widht", json!(8)), "unknown key `weight_widht` for format `integer`"),
        (with("name", json!("logicnets")), "not supported by mase-rs"),
        (
            json!({"by": "type", "linear": {"config": {"name": "block_log", "data_in_width": 8, "data_in_exponent_bias_width": 4,
                "data_in_block_size": [16, -2], "weight_width": 8, "weight_exponent_bias_width": 4, "weight_block_size": [16]}}}),
            "`data_in_block_size = [16,-2]`: expected a positive integer, -1 (the whole dimension) or a list of them",
        ),
        (
            json!({"by": "type", "linear": {"config": {"name": "integer", "data_in_width": 8, "data_in_frac_width": 4}}}),
            "missing key `weight_width`",
        ),
        (json!({"by": "regex_name", "conv.*": {"config": cfg_8_4()}}), "regex_name `conv.*` matches no node"),
        (json!({"by": "name", "seq_blocks_9": {"config": cfg_8_4()}}), "no node named `seq_blocks_9`"),
        (json!({"by": "name", "x": {"config": cfg_8_4()}}), "a `placeholder` node cannot be quantized"),
        (json!({"by": "type", "linaer": {"config": cfg_8_4()}}), "no op has type `linaer`"),
        (json!({"by": "type", "max_pool2d": {"config": cfg_8_4()}}), "`max_pool2d` ops cannot be quantized"),
        (json!({"by": "kind", "linear": {"config": cfg_8_4()}}), "`by = \"kind\"`"),
        (json!({"linear": {"config": cfg_8_4()}}), "missing key `by`"),
        (json!({"by": "type", "linear": {"cfg": cfg_8_4()}}), "`linear.cfg`: unknown key"),
        (json!({"by": "type", "linear": {"config": {"data_in_width": 8}}}), "missing key `name`"),
        (
            json!({"by": "type", "linear": {"config": {"name": "mxint", "data_in_width": 8, "weight_width": 8, "weight_block_size": 0}}}),
            "`weight_block_size = 0`: expected a positive integer",
        ),
        (
            json!({"by": "type", "linear": {"config": {"name": "mxfp", "data_in_exponent_width": 4, "data_in_frac_width": 4,
                "weight_exponent_width": 4, "weight_frac_width": 3}}}),
            "mxfp format: `exponent_width` = 4 with frac_width = 4: must name an OCP MX element format",
        ),
        (
            json!({"by": "type", "linear": {"config": {"name": "mxint", "data_in_width": 8, "weight_width": 8, "weight_exponent_width": 4}}}),
            "unknown key `weight_exponent_width` for format `mxint`",
        ),
    ];
    for (args, want) in cases {
        let (mut g, mut ctx) = jsc_tiny();
        let e = run_pass("quantize", &mut g, &mut ctx, &args).unwrap_err().to_string();
        assert!(e.contains(want), "{args}: {e}");
        assert!(!e.contains('\n'), "{e}");
        assert!(g.nodes().iter().all(|n| n.quant.is_none()), "a failed quantize leaves the graph unchanged");
    }
}

#[test]
fn verify_shows_weights_on_their_grid() {
    let (mut g, mut ctx) = jsc_tiny();
    with_metadata(&mut g, &mut ctx);
    pass("quantize", &mut g, &mut ctx, lab_linear_8_4());
    let r = pass("verify_quantization", &mut g, &mut ctx, json!({"num_values": 4, "num_samples": 16}));
    assert_eq!(r.json["off_grid"], 0);
    let grid = r.json["grid"].as_array().unwrap();
    assert_eq!(grid.len(), 2, "weight and bias of seq_blocks_2");
    assert_eq!(grid[0]["values"], 80);
    // Initial weights lie in +-1/4 = +-0.25: rounding to steps of 1/16 errs by at most 1/32.
    assert!(grid[0]["max_abs_error"].as_f64().unwrap() <= 1.0 / 32.0 + 1e-7, "{}", grid[0]);
    let v = &r.json["values"]["seq_blocks_2"];
    for (f, q) in v["float"].as_array().unwrap().iter().zip(v["quantized"].as_array().unwrap()) {
        let (f, q) = (f.as_f64().unwrap(), q.as_f64().unwrap());
        assert_eq!(q, (f * 16.0).round_ties_even() / 16.0);
    }
    assert_eq!(r.json["outputs"]["samples"], 16);
}

#[test]
fn every_format_puts_weights_on_its_grid() {
    let cfgs = [
        json!({"name": "minifloat_ieee", "data_in_width": 8, "data_in_exponent_width": 4, "data_in_exponent_bias": "NA", "weight_width": 8, "weight_exponent_width": 4, "weight_exponent_bias": "NA", "bias_width": 8, "bias_exponent_width": 4, "bias_exponent_bias": "NA"}),
        json!({"name": "minifloat_denorm", "data_in_width": 8, "data_in_exponent_width": 4, "data_in_exponent_bias": 7, "weight_width": 8, "weight_exponent_width": 4, "weight_exponent_bias": 7}),
        json!({"name": "log", "data_in_width": 8, "data_in_exponent_bias": "NA", "weight_width": 6, "weight_exponent_bias": "NA"}),
        json!({"name": "block_fp", "data_in_width": 7, "data_in_exponent_width": 8, "data_in_exponent_bias": 127, "data_in_block_size": [1, 16], "weight_width": 5, "weight_exponent_width": 8, "weight_exponent_bias": 127, "weight_block_size": [1, 16], "bias_width": 5, "bias_exponent_width": 8, "bias_exponent_bias": 127, "bias_block_size": [16]}),
        json!({"name": "block_log", "data_in_width": 8, "data_in_exponent_bias_width": 4, "data_in_block_size": [16], "weight_width": 8, "weight_exponent_bias_width": 4, "weight_block_size": [16]}),
        json!({"name": "integer", "data_in_width": 4, "data_in_frac_width": 2, "weight_width": 3, "weight_frac_width": 3, "bias_width": 4, "bias_frac_width": "NA"}),
        json!({"name": "mxint", "data_in_width": 8, "weight_width": 8, "weight_block_size": 4, "bias_width": 8, "bias_block_size": 2}),
        json!({"name": "mxfp", "data_in_exponent_width": 2, "data_in_frac_width": 1, "weight_exponent_width": 4, "weight_frac_width": 3, "weight_block_size": 4, "weight_block_dim": 0}),
    ];
    for cfg in cfgs {
        let (mut g, mut ctx) = jsc_tiny();
        with_metadata(&mut g, &mut ctx);
        pass("quantize", &mut g, &mut ctx, json!({"by": "type", "linear": {"config": cfg.clone()}}));
        let r = pass("verify_quantization", &mut g, &mut ctx, json!({"num_samples": 8}));
        assert_eq!(r.json["off_grid"], 0, "{cfg}: {}", r.text);
        assert!(r.json["grid"].as_array().unwrap().iter().all(|x| x["levels"].as_u64().unwrap() >= 1), "{}", r.text);
    }
}
