//! Every ONNX model of the shared model collection imports, and on 100 random inputs each its
//! outputs equal onnxruntime's (made once by scripts/make_onnx_references.py) to 1e-5.

mod common;
use common::*;

/// The float models: file, per-sample input shape, per-sample output shape.
const FLOAT_MODELS: &[(&str, &[usize], &[usize])] = &[
    ("three_layer_keras.onnx", &[16], &[5]),
    ("three_layer_pytorch.onnx", &[16], &[5]),
    ("two_layer_keras.onnx", &[10], &[1]),
    ("two_layer_pytorch.onnx", &[10], &[1]),
    ("conv1d_small_keras.onnx", &[10, 4], &[5]),
    ("conv2d_small_keras.onnx", &[8, 8, 1], &[10]),
    ("jsc-tiny_lab_model_batch8.onnx", &[16], &[5]),
    ("jsc-tiny_lab_model_dynbatch.onnx", &[16], &[5]),
];

fn check_against_onnxruntime(file: &str, sample: &[usize], out: &[usize]) {
    let m = import(file);
    assert_eq!((m.sample_shape.as_slice(), m.output_shape.as_slice()), (sample, out), "{file}");
    let stem = file.trim_end_matches(".onnx");
    let x = npz(&format!("refs/{stem}.npz"), "x");
    let want = npz(&format!("refs/{stem}.npz"), "y");
    assert_eq!(x.shape[0], 100);
    let got = run(&m.graph, &m.params, &x);
    let (d, at) = max_diff(&got, &want);
    assert!(d <= 1e-5, "{file}: largest difference {d} at {at}: {} vs {}", got.data[at], want.data[at]);
}

#[test]
fn float_models_match_onnxruntime() {
    for (file, sample, out) in FLOAT_MODELS {
        check_against_onnxruntime(file, sample, out);
    }
}

#[test]
fn pytorch_names_and_parameters_are_kept() {
    // MASE's lab export of jsc-tiny: the node and parameter names of the zoo model.
    let m = import("jsc-tiny_lab_model_dynbatch.onnx");
    let names: Vec<&str> = m.graph.nodes().iter().map(|n| n.name.as_str()).collect();
    // `input` is a Python builtin, which torch.fx's namer avoids, as it does here.
    assert_eq!(names, ["input_1", "seq_blocks_0", "seq_blocks_1", "seq_blocks_2", "seq_blocks_3", "output"]);
    let keys: Vec<&str> = m.params.names().collect();
    assert_eq!(
        keys,
        [
            "seq_blocks.0.weight",
            "seq_blocks.0.bias",
            "seq_blocks.0.running_mean",
            "seq_blocks.0.running_var",
            "seq_blocks.2.weight",
            "seq_blocks.2.bias"
        ]
    );
    // The same weights in the zoo's jsc-tiny give the same outputs, bit for bit.
    let zoo = mase_zoo::build_model("jsc-tiny", &mase_zoo::ModelContext::new(vec![16], 5)).unwrap();
    let (params, report) = mase_interop::map_onto_graph(
        &zoo,
        &m.params
            .iter()
            .map(|(k, e)| (k.to_string(), mase_interop::Weight { dtype: mase_interop::DType::F32, tensor: e.tensor.clone() }))
            .collect(),
    )
    .unwrap();
    assert!(report.unused.is_empty() && report.prefix.is_empty());
    let x = npz("refs/jsc-tiny_lab_model_dynbatch.npz", "x");
    assert_eq!(run(&zoo, &params, &x), run(&m.graph, &m.params, &x));
}

#[test]
fn fixed_batches_become_dynamic_and_are_noted() {
    for (file, hard) in [("three_layer_pytorch.onnx", "789444"), ("jsc-tiny_lab_model_batch8.onnx", "8"), ("conv2d_small_keras.onnx", "1")]
    {
        let m = import(file);
        assert!(m.notes.iter().any(|n| n.contains(&format!("fixes the batch size to {hard}"))), "{file}: {:?}", m.notes);
        let x = mase_ir::Tensor::zeros([vec![7], m.sample_shape.clone()].concat());
        assert_eq!(run(&m.graph, &m.params, &x).shape[0], 7, "{file}");
    }
}

#[test]
fn keras_conv_exports_keep_their_layout_ops() {
    let m = import("conv1d_small_keras.onnx");
    let ops: Vec<&str> = m.graph.nodes().iter().map(|n| n.op.mase_op()).collect();
    // Transpose NWC->NCW, pads [1, 2] as a symmetric 1 plus an explicit pad of 1 at the end, and
    // Keras' Flatten(axis = 0) read as a flatten that keeps the batch.
    assert_eq!(
        ops,
        [
            "placeholder",
            "permute",
            "pad",
            "conv1d",
            "relu",
            "pad",
            "conv1d",
            "relu",
            "pad",
            "conv1d",
            "relu",
            "permute",
            "flatten",
            "linear",
            "relu",
            "linear",
            "softmax",
            "output"
        ]
    );
    let conv = m.graph.nodes().iter().find(|n| n.op.mase_op() == "conv1d").unwrap();
    let mase_ir::Op::Conv1d(c) = &conv.op else { unreachable!() };
    assert_eq!((c.padding.clone(), c.kernel.clone()), (vec![1], vec![4]));
}
