//! Model files: the shipped examples, equivalence with named models, every op, and error cases.

use mase_ir::validate;
use mase_zoo::{build_model, load_model_file, model_file_ops, parse_model_file, trainable_params, ModelContext, ZooError};
use std::path::PathBuf;

fn jsc() -> ModelContext {
    ModelContext::new([16], 5)
}

fn example(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../models").join(name)
}

fn names(g: &mase_ir::Graph) -> Vec<&str> {
    g.nodes().iter().map(|n| n.name.as_str()).collect()
}

#[test]
fn shipped_examples_build_with_their_stated_counts() {
    // (file, trainable count stated in the file's comment, fx node names)
    let seq: Vec<String> = (0..11).map(|i| format!("seq_blocks_{i}")).collect();
    let mut jsc_m: Vec<&str> = vec!["x"];
    jsc_m.extend(seq.iter().map(String::as_str));
    jsc_m.push("output");
    let cases: &[(&str, usize, Vec<&str>)] = &[
        ("jsc-m.toml", 1455, jsc_m),
        ("jsc-residual.toml", 661, vec!["x", "bn_in", "fc1", "act1", "fc2", "add", "seq_blocks_5", "seq_blocks_6", "output"]),
    ];
    for (file, count, want) in cases {
        let c = jsc();
        let g = load_model_file(&example(file), &c).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(trainable_params(&g), *count, "{file}");
        assert_eq!(&names(&g), want, "{file}");
        validate(&g, None).unwrap();
        let shapes = g.infer_shapes(&[c.batch_shape(3)], &|_| None).unwrap();
        assert_eq!(shapes[g.output_node().unwrap().0].shape(), [3, 5], "{file}");
    }
}

#[test]
fn residual_add_reads_both_branches() {
    let g = load_model_file(&example("jsc-residual.toml"), &jsc()).unwrap();
    let add = g.node(g.require("add").unwrap());
    assert_eq!(add.target, "operator.add");
    let inputs: Vec<&str> = add.inputs.iter().map(|&i| g.node(i).name.as_str()).collect();
    assert_eq!(inputs, ["bn_in", "fc2"]);
    assert_eq!(g.node(g.require("fc1").unwrap()).target, "fc1");
    let params: Vec<String> = g.param_specs().into_iter().map(|(n, _)| n).collect();
    assert_eq!(params[..2], ["bn_in.weight".to_string(), "bn_in.bias".to_string()]);
    assert!(params.contains(&"seq_blocks.6.weight".to_string()));
}

/// A model file that spells out a named model builds the very same graph.
#[test]
fn files_equal_named_models() {
    let layers = |ops: &[&str]| ops.iter().map(|o| format!("[[layers]]\n{o}\n")).collect::<String>();
    let cases: &[(&str, ModelContext, String)] = &[
        (
            "jsc-tiny",
            jsc(),
            layers(&["op = \"batch_norm1d\"", "op = \"relu\"", "op = \"linear\"\nout_features = \"classes\"", "op = \"relu\""]),
        ),
        (
            "jsc-three-layer",
            jsc(),
            layers(&[
                "op = \"linear\"\nout_features = 64",
                "op = \"relu\"",
                "op = \"linear\"\nout_features = 32",
                "op = \"relu\"",
                "op = \"linear\"\nout_features = 32",
                "op = \"relu\"",
                "op = \"linear\"\nout_features = 5",
            ]),
        ),
        (
            "mnist-cnn",
            ModelContext::new([1, 28, 28], 10),
            layers(&[
                "op = \"conv2d\"\nout_channels = 8\nkernel_size = 3\npadding = 1",
                "op = \"relu\"",
                "op = \"max_pool2d\"\nkernel_size = 2",
                "op = \"conv2d\"\nout_channels = 16\nkernel_size = [3, 3]\npadding = [1, 1]\nstride = 1",
                "op = \"relu\"",
                "op = \"max_pool2d\"\nkernel_size = 2\nstride = 2",
                "op = \"flatten\"",
                "op = \"linear\"\nout_features = \"classes\"",
            ]),
        ),
    ];
    for (model, c, text) in cases {
        let from_file = parse_model_file(text, "inline.toml", c).unwrap_or_else(|e| panic!("{model}: {e}"));
        assert_eq!(from_file, build_model(model, c).unwrap(), "{model}");
    }
}

/// One file that uses every op; shapes are for the probe batch of 2 and 3x8x8 samples.
const EVERY_OP: &str = r#"
name = "every-op"
description = "touches every op a model file may name"
output = "probs"

[[layers]]
op = "conv2d"               # [2, 4, 8, 8]; 3*4*9 + 4 = 112 params
out_channels = 4
kernel_size = 3
padding = 1
[[layers]]
op = "batch_norm2d"         # 8 params
momentum = 0.2
eps = 1e-3
[[layers]]
op = "relu6"
[[layers]]
op = "max_pool2d"           # [2, 4, 4, 4]
kernel_size = 2
[[layers]]
op = "avg_pool2d"           # [2, 4, 3, 4]
kernel_size = [2, 1]
stride = 1
[[layers]]
op = "adaptive_avg_pool2d"  # [2, 4, 2, 2]
output_size = [2, 2]
[[layers]]
op = "reshape"              # [2, 4, 4]
shape = [4, -1]
[[layers]]
op = "conv1d"               # [2, 8, 4]; weight [8, 2, 3] = 48 params, no bias
out_channels = 8
kernel_size = 3
padding = 1
groups = 2
bias = false
[[layers]]
op = "batch_norm1d"         # 16 params
[[layers]]
op = "leaky_relu"
negative_slope = 0.2
[[layers]]
op = "max_pool1d"           # [2, 8, 2]
kernel_size = 2
[[layers]]
op = "avg_pool1d"           # [2, 8, 2]
kernel_size = 1
ceil_mode = true
count_include_pad = false
[[layers]]
op = "adaptive_avg_pool1d"  # [2, 8, 2]
output_size = 2
[[layers]]
op = "transpose"            # [2, 2, 8]
dim0 = 1
dim1 = 2
[[layers]]
name = "p"
op = "permute"              # [2, 8, 2]
dims = [0, 2, 1]
[[layers]]
name = "s"
op = "sigmoid"
[[layers]]
name = "t"
op = "tanh"
inputs = ["p"]
[[layers]]
name = "st"
op = "mul"
inputs = ["s", "t"]
[[layers]]
name = "m"
op = "selu"
[[layers]]
name = "g"
op = "gelu"
approximate = "tanh"
inputs = ["st"]
[[layers]]
name = "d"
op = "sub"
inputs = ["m", "g"]
[[layers]]
name = "sl"
op = "silu"
[[layers]]
name = "hs"
op = "hardswish"
[[layers]]
name = "hg"
op = "hardsigmoid"
[[layers]]
name = "sp"
op = "softplus"
beta = 2.0
threshold = 10
[[layers]]
name = "mi"
op = "mish"
[[layers]]
name = "me"
op = "mean"                 # [2, 8, 1]
dim = -1
keepdim = true
[[layers]]
name = "am"
op = "amax"                 # [2, 8]
dim = [2]
[[layers]]
name = "su"
op = "sum"                  # [2]
dim = 1
[[layers]]
name = "d2"
op = "mul"                  # [2, 8, 2] * [2] broadcast: [2, 8, 2]
inputs = ["mi", "su"]
[[layers]]
name = "dt"
op = "transpose"            # [2, 2, 8]
dim0 = -1
dim1 = -2
[[layers]]
name = "mm"
op = "matmul"               # [2, 8, 8]
inputs = ["d2", "dt"]
[[layers]]
op = "add"                  # [2, 8, 8]
inputs = ["mm", "mm"]
[[layers]]
op = "flatten"              # [2, 64]
[[layers]]
op = "relu"
[[layers]]
op = "dropout"
p = 0.1
[[layers]]
op = "stochastic_depth"
p = 0.2
mode = "batch"
[[layers]]
op = "linear"               # [2, 3]; 64*3 + 3 = 195 params
out_features = "classes"
[[layers]]
op = "log_softmax"
dim = 1
[[layers]]
op = "reshape"              # [2, 1, 3]
shape = [1, 3]
[[layers]]
op = "adaptive_max_pool1d"  # [2, 1, 3]
output_size = 3
[[layers]]
op = "reshape"              # [2, 1, 1, 3]
shape = [1, 1, 3]
[[layers]]
op = "adaptive_max_pool2d"  # [2, 1, 1, 3]
output_size = [1, 3]
[[layers]]
op = "flatten"              # [2, 3]
[[layers]]
name = "ln"
op = "layer_norm"           # [2, 3]; 3 + 3 params
[[layers]]
name = "gn"
op = "group_norm"           # [2, 3]; 3 + 3 params
num_groups = 3
eps = 1e-3
[[layers]]
name = "tok"
op = "embedding"            # [2, 3, 2]; 4*2 = 8 params (shapes only: the ids here are not whole numbers)
num_embeddings = 4
embedding_dim = 2
padding_idx = 0
[[layers]]
name = "scores"
op = "einsum"               # [2, 3, 3]
equation = "bqd,bkd->bqk"
inputs = ["tok", "tok"]
[[layers]]
name = "attn"
op = "scaled_dot_product_attention"  # [2, 3, 3]
inputs = ["scores", "scores", "scores"]
is_causal = true
[[layers]]
name = "pooled"
op = "mean"                 # [2, 3]
dim = -1
[[layers]]
name = "probs"
op = "softmax"
"#;

#[test]
fn every_op_builds_with_hand_computed_shapes() {
    let c = ModelContext::new([3, 8, 8], 3);
    let g = parse_model_file(EVERY_OP, "every-op.toml", &c).unwrap_or_else(|e| panic!("{e}"));
    // 112 + 8 + 48 + 16 + 195 + 6 + 6 + 8
    assert_eq!(trainable_params(&g), 399);
    let shapes = g.infer_shapes(&[c.batch_shape(2)], &|_| None).unwrap();
    let shape_of = |n: &str| shapes[g.require(n).unwrap().0].shape().to_vec();
    let cases: &[(&str, &[usize])] = &[
        ("seq_blocks_0", &[2, 4, 8, 8]),
        ("seq_blocks_4", &[2, 4, 3, 4]),
        ("seq_blocks_5", &[2, 4, 2, 2]),
        ("view", &[2, 4, 4]),
        ("seq_blocks_7", &[2, 8, 4]),
        ("seq_blocks_12", &[2, 8, 2]),
        ("transpose", &[2, 2, 8]),
        ("permute", &[2, 8, 2]),
        ("mul", &[2, 8, 2]),
        ("sub", &[2, 8, 2]),
        ("transpose_1", &[2, 2, 8]),
        ("matmul", &[2, 8, 8]),
        ("add", &[2, 8, 8]),
        ("mean", &[2, 8, 1]),
        ("amax", &[2, 8]),
        ("sum_1", &[2]),
        ("mul_1", &[2, 8, 2]),
        ("seq_blocks_33", &[2, 64]),
        ("seq_blocks_34", &[2, 64]),
        ("seq_blocks_36", &[2, 64]),
        ("seq_blocks_37", &[2, 3]),
        ("ln", &[2, 3]),
        ("gn", &[2, 3]),
        ("tok", &[2, 3, 2]),
        ("einsum", &[2, 3, 3]),
        ("scaled_dot_product_attention", &[2, 3, 3]),
        ("mean_1", &[2, 3]),
        ("probs", &[2, 3]),
    ];
    for &(node, want) in cases {
        assert_eq!(shape_of(node), want, "{node}");
    }
    let mut ops: Vec<&str> = g.nodes().iter().map(|n| n.op.mase_op()).collect();
    ops.retain(|o| !["placeholder", "output", "size"].contains(o));
    let mut want: Vec<&str> = model_file_ops().iter().map(|o| if *o == "reshape" { "view" } else { o }).collect();
    want.sort();
    ops.sort();
    ops.dedup();
    assert_eq!(ops, want, "every op is used once or more");
}

/// Builds `text` for jsc and returns the error message.
fn error_of(text: &str) -> String {
    match parse_model_file(text, "bad.toml", &jsc()) {
        Ok(g) => panic!("expected an error, built:\n{g}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn bad_files_give_errors_naming_layer_and_key() {
    const BN: &str = "[[layers]]\nop = \"batch_norm1d\"\nname = \"bn\"\n";
    // (file text, substrings the message must contain)
    let cases: &[(String, &[&str])] = &[
        (
            "[[layers]]\nop = \"einsum\"\nequation = \"ii,ij->j\"\ninputs = [\"x\", \"x\"]\n".into(),
            &["bad.toml: layer 0 (op `einsum`)", "key `equation`", "einsum equation \"ii,ij->j\": letter 'i' is repeated in \"ii\""],
        ),
        (
            "[[layers]]\nop = \"embedding\"\nnum_embeddings = 4\nembedding_dim = 2\npadding_idx = 4\n".into(),
            &["bad.toml: layer 0 (op `embedding`)", "key `padding_idx`", "4 must be below num_embeddings = 4"],
        ),
        (
            "[[layers]]\nop = \"linear\"\nout_features = 4\nbais = true\n".into(),
            &["bad.toml: layer 0 (op `linear`)", "key `bais`", "unknown key", "out_features, bias"],
        ),
        ("[[layers]]\nop = \"linear\"\nout_feature = 4\n".into(), &["layer 0", "key `out_feature`", "unknown key"]),
        ("[[layers]]\nop = \"relu\"\nslope = 1\n".into(), &["layer 0", "key `slope`", "takes no keys"]),
        (
            "[[layers]]\nop = \"layer_norm\"\nnormalized_shape = [8]\n".into(),
            &["layer 0 (op `layer_norm`)", "key `normalized_shape`", "[8] must be the trailing dimensions of the input [2, 16]"],
        ),
        (
            "[[layers]]\nop = \"group_norm\"\nnum_groups = 5\n".into(),
            &["layer 0 (op `group_norm`)", "key `num_groups`", "5 groups must divide the input's 16 channels"],
        ),
        ("[[layers]]\nop = \"max_pool1d\"\nkernel_size = 2\ncount_include_pad = false\n".into(), &["layer 0", "key `count_include_pad`", "unknown key"]),
        ("[[layers]]\nop = \"lineer\"\n".into(), &["layer 0", "key `op`", "unknown op `lineer`", "linear, conv1d"]),
        (
            "[[layers]]\nop = \"div\"\n".into(),
            &["layer 0", "key `op`", "op `div` is not for model files: arithmetic beyond add, sub, mul and matmul arrives by ONNX", "linear, conv1d"],
        ),
        ("[[layers]]\nout_features = 4\n".into(), &["layer 0 (op `?`)", "key `op`", "missing"]),
        ("[[layers]]\nop = 3\n".into(), &["layer 0", "key `op`", "expected an op name"]),
        (format!("{BN}[[layers]]\nop = \"linear\"\n"), &["layer 1 (op `linear`)", "key `out_features`", "missing"]),
        (
            format!("{BN}[[layers]]\nop = \"linear\"\nname = \"fc1\"\nout_features = \"many\"\n"),
            &["layer 1 (op `linear`, name `fc1`)", "key `out_features`", "\"classes\"", "\"many\""],
        ),
        (format!("{BN}[[layers]]\nop = \"linear\"\nout_features = 0\n"), &["key `out_features`", "integer >= 1"]),
        (
            "[[layers]]\nop = \"linear\"\nout_features = 1073741824\n".into(),
            &["layer 0 (op `linear`)", "key `out_features`", "parameter `weight` of shape [1073741824, 16]", "more than 2147483648"],
        ),
        (
            "[[layers]]\nop = \"linear\"\nout_features = 9223372036854775807\n".into(),
            &["layer 0 (op `linear`)", "key `inputs`", "more than 2147483648 elements"],
        ),
        (
            "[[layers]]\nop = \"reshape\"\nshape = [4, 4]\n[[layers]]\nop = \"conv1d\"\nout_channels = 2\nkernel_size = 1\npadding = 9223372036854775807\n".into(),
            &["layer 1 (op `conv1d`)", "key `inputs`", "kernel larger than padded input"],
        ),
        (format!("{BN}[[layers]]\nop = \"relu\"\ninputs = [\"nope\"]\n"), &["layer 1", "key `inputs`", "`nope`"]),
        (format!("[[layers]]\nop = \"relu\"\ninputs = [\"later\"]\n{BN}"), &["layer 0", "key `inputs`", "`later`", "earlier layer"]),
        (format!("{BN}[[layers]]\nop = \"relu\"\ninputs = \"bn\"\n"), &["layer 1", "key `inputs`", "list of layer names"]),
        (format!("{BN}[[layers]]\nop = \"add\"\n"), &["layer 1 (op `add`)", "key `inputs`", "takes 2 input(s), got 1"]),
        (format!("{BN}[[layers]]\nop = \"relu\"\ninputs = [\"x\", \"bn\"]\n"), &["layer 1", "key `inputs`", "takes 1 input(s), got 2"]),
        (
            format!(
                "{BN}[[layers]]\nop = \"linear\"\nout_features = 8\nname = \"fc\"\n[[layers]]\nop = \"add\"\ninputs = [\"bn\", \"fc\"]\n"
            ),
            &["layer 2 (op `add`)", "key `inputs`", "[[2, 16], [2, 8]]", "broadcast", "probe batch of 2"],
        ),
        (
            "[[layers]]\nop = \"conv2d\"\nout_channels = 4\nkernel_size = 3\n".into(),
            &["layer 0", "key `inputs`", "[N, C, H, W]", "[2, 16]"],
        ),
        ("[[layers]]\nop = \"batch_norm2d\"\n".into(), &["layer 0", "key `inputs`", "[N, C, H, W]"]),
        (
            "[[layers]]\nop = \"reshape\"\nshape = [4, 4]\n[[layers]]\nop = \"conv1d\"\nout_channels = 6\nkernel_size = 2\ngroups = 4\n"
                .into(),
            &["layer 1", "key `groups`", "must divide"],
        ),
        (
            "[[layers]]\nop = \"reshape\"\nshape = [4, 4]\n[[layers]]\nop = \"conv1d\"\nout_channels = 6\nkernel_size = 9\n".into(),
            &["layer 1 (op `conv1d`)", "key `inputs`", "kernel larger"],
        ),
        ("[[layers]]\nop = \"reshape\"\nshape = [5, -1]\n".into(), &["layer 0", "key `inputs`", "cannot view"]),
        ("[[layers]]\nop = \"reshape\"\nshape = [0, 16]\n".into(), &["layer 0", "key `shape`", "positive or -1"]),
        ("[[layers]]\nop = \"max_pool1d\"\nkernel_size = [2, 2]\n".into(), &["layer 0", "key `kernel_size`", "list of 1"]),
        ("[[layers]]\nop = \"batch_norm1d\"\nmomentum = 1.5\n".into(), &["layer 0", "key `momentum`", "[0, 1]"]),
        ("[[layers]]\nop = \"linear\"\nout_features = 4\nbias = \"yes\"\n".into(), &["key `bias`", "true or false"]),
        ("[[layers]]\nop = \"gelu\"\napproximate = \"fast\"\n".into(), &["key `approximate`", "\"none\", \"tanh\""]),
        ("[[layers]]\nop = \"transpose\"\ndim0 = 0\n".into(), &["key `dim1`", "missing"]),
        ("[[layers]]\nop = \"mean\"\n".into(), &["layer 0 (op `mean`)", "key `dim`", "missing"]),
        ("[[layers]]\nop = \"sum\"\ndim = []\n".into(), &["key `dim`", "at least one dimension"]),
        ("[[layers]]\nop = \"sum\"\ndim = \"all\"\n".into(), &["key `dim`", "an integer or a list of integers"]),
        ("[[layers]]\nop = \"amax\"\ndim = [1, -1]\n".into(), &["layer 0", "key `inputs`", "dim -1 appears more than once"]),
        ("[[layers]]\nop = \"amax\"\ndim = 2\n".into(), &["layer 0", "key `inputs`", "dim 2 out of range for rank 2"]),
        ("[[layers]]\nop = \"softmax\"\ndim = 3\n".into(), &["layer 0", "key `inputs`", "dim 3 out of range"]),
        (format!("{BN}[[layers]]\nop = \"relu\"\nname = \"bn\"\n"), &["layer 1", "key `name`", "already"]),
        ("[[layers]]\nop = \"relu\"\nname = \"1st\"\n".into(), &["layer 0", "key `name`", "not a valid name"]),
        ("[[layers]]\nop = \"relu\"\nname = \"x\"\n".into(), &["layer 0", "key `name`", "reserved"]),
        (
            format!("{BN}[[layers]]\nop = \"relu\"\ninputs = [\"x\"]\n"),
            &["layer 0 (op `batch_norm1d`, name `bn`)", "key `output`", "never used"],
        ),
        ("layers = []\n".into(), &["bad.toml: key `layers`", "at least one"]),
        (format!("output = \"nope\"\n{BN}"), &["key `output`", "`nope`"]),
        (format!("layer = 1\n{BN}"), &["bad.toml: line 1, column 1", "unknown field `layer`"]),
        ("name = \"m\"\n".into(), &["bad.toml", "missing field `layers`"]),
        ("[[layers]]\nop = \"relu\n".into(), &["bad.toml: line 2"]),
    ];
    for (text, wants) in cases {
        let e = error_of(text);
        for w in *wants {
            assert!(e.contains(w), "message for\n{text}\nlacks {w:?}: {e}");
        }
        assert!(!e.contains('\n'), "message is one line: {e}");
    }
}

#[test]
fn layer_error_reads_as_one_sentence() {
    let e = error_of("[[layers]]\nop = \"batch_norm1d\"\nname = \"bn\"\nmomentum = -1\n");
    assert_eq!(e, "bad.toml: layer 0 (op `batch_norm1d`, name `bn`), key `momentum`: expected a number in [0, 1], got integer -1");
}

#[test]
fn structured_error_fields_name_layer_and_key() {
    let err = parse_model_file("[[layers]]\nop = \"relu\"\n[[layers]]\nop = \"linear\"\nname = \"fc\"\n", "m.toml", &jsc()).unwrap_err();
    match err {
        ZooError::Layer { origin, index, op, name, key, .. } => {
            assert_eq!(
                (origin.as_str(), index, op.as_str(), name.as_deref(), key.as_str()),
                ("m.toml", 1, "linear", Some("fc"), "out_features")
            );
        }
        other => panic!("unexpected {other:?}"),
    }
}

#[test]
fn missing_file_and_unfit_context_are_errors() {
    let e = load_model_file(&example("no-such-model.toml"), &jsc()).unwrap_err();
    assert!(matches!(&e, ZooError::Read { path, .. } if path.ends_with("no-such-model.toml")), "{e}");
    let e = load_model_file(&example("jsc-m.toml"), &ModelContext::new([16], 0)).unwrap_err().to_string();
    assert!(e.contains("`jsc-m`") && e.contains("no classes"), "{e}");
    let e = load_model_file(&example("jsc-m.toml"), &ModelContext::new([1, 4, 4], 5)).unwrap_err().to_string();
    assert!(e.contains("layer 0 (op `batch_norm1d`)") && e.contains("key `inputs`"), "{e}");
}

/// The TOML examples in doc/model-files.md build for jsc, so the documentation cannot rot.
#[test]
fn documentation_examples_build() {
    let doc_path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../doc/model-files.md");
    let doc = std::fs::read_to_string(&doc_path).unwrap();
    let blocks: Vec<&str> = doc.split("```toml\n").skip(1).filter_map(|b| b.split("```").next()).collect();
    // (trainable count, output width) of each block in order: a chain ending in "classes", and the
    // residual block ending in the add of two 16-wide values.
    let want = [(32 + 544 + 33 * 5, 5), (32 + 272 + 272, 16)];
    assert_eq!(blocks.len(), want.len(), "toml blocks in {}", doc_path.display());
    for (block, (count, width)) in blocks.iter().zip(want) {
        let c = jsc();
        let g = parse_model_file(block, "doc", &c).unwrap_or_else(|e| panic!("{e}\n{block}"));
        assert_eq!(trainable_params(&g), count, "{block}");
        let shapes = g.infer_shapes(&[c.batch_shape(4)], &|_| None).unwrap();
        assert_eq!(shapes[g.output_node().unwrap().0].shape(), [4, width], "{block}");
    }
}
