//! Hand-made hostile files, one per way a reader once panicked, overflowed its stack or asked for
//! unbounded memory: each must give one error line that names what is wrong. The mutation test
//! (`mutation.rs`) damages real files at random; these cases are too structured for it to find.

use mase_interop::onnx::proto::{AttributeProto, GraphProto, ModelProto, NodeProto, OperatorSetIdProto, TensorProto, ValueInfoProto};
use mase_interop::{import_model, ImportOptions};
use std::panic::{catch_unwind, AssertUnwindSafe};

// ---------------------------------------------------------------------------------------------
// ONNX models.

/// A float value of shape `[batch, width]` (the batch symbolic).
fn value(name: &str, width: i64) -> ValueInfoProto {
    mase_interop::onnx::float_value_info(name, &[None, Some(width as usize)])
}

fn node(name: &str, op: &str, inputs: &[&str], output: &str, attribute: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        name: name.into(),
        op_type: op.into(),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.into()],
        attribute,
        ..Default::default()
    }
}

fn ints_attr(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto { name: name.into(), ints: v.to_vec(), r#type: 7, ..Default::default() }
}

fn float_attr(name: &str, v: f32) -> AttributeProto {
    AttributeProto { name: name.into(), f: v, r#type: 1, ..Default::default() }
}

fn i64_init(name: &str, dims: &[i64], v: &[i64]) -> TensorProto {
    TensorProto { name: name.into(), dims: dims.to_vec(), data_type: 7, int64_data: v.to_vec(), ..Default::default() }
}

/// A float initializer with no values (some dimension is 0).
fn empty_init(name: &str, dims: &[i64]) -> TensorProto {
    TensorProto { name: name.into(), dims: dims.to_vec(), data_type: 1, ..Default::default() }
}

fn int_attr(name: &str, v: i64) -> AttributeProto {
    AttributeProto { name: name.into(), i: v, r#type: 2, ..Default::default() }
}

/// A model of opset 11 with input `x` of width `width` and output `y`.
fn model(width: i64, nodes: Vec<NodeProto>, initializer: Vec<TensorProto>) -> ModelProto {
    ModelProto {
        ir_version: 7,
        opset_import: vec![OperatorSetIdProto { domain: String::new(), version: 11 }],
        graph: Some(GraphProto {
            node: nodes,
            initializer,
            input: vec![value("x", width)],
            output: vec![value("y", width)],
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A 1-D `MaxPool` named `mp` with these attributes, over an input of shape `[batch, 1, 4]`.
fn pool_model(attribute: Vec<AttributeProto>) -> ModelProto {
    let mut m = model(4, vec![node("mp", "MaxPool", &["x"], "y", attribute)], vec![]);
    let g = m.graph.as_mut().expect("the model has a graph");
    g.input = vec![mase_interop::onnx::float_value_info("x", &[None, Some(1), Some(4)])];
    g.output = vec![mase_interop::onnx::float_value_info("y", &[None, Some(1), None])];
    m
}

/// (what the model does, the model, fragments of the error line)
fn onnx_cases() -> Vec<(&'static str, ModelProto, Vec<&'static str>)> {
    vec![
        (
            "Squeeze of a scalar constant names an axis it does not have",
            model(
                1,
                vec![
                    node("c", "Constant", &[], "c", vec![float_attr("value_float", 2.0)]),
                    node("sq", "Squeeze", &["c"], "s", vec![ints_attr("axes", &[0])]),
                    node("add", "Add", &["x", "s"], "y", vec![]),
                ],
                vec![],
            ),
            vec!["ONNX node `sq` (Squeeze)", "axis 0 is out of range for rank 0"],
        ),
        (
            "Pad of a value that lost its batch and became a scalar",
            model(
                1,
                vec![
                    node("t", "Transpose", &["x"], "xt", vec![ints_attr("perm", &[1, 0])]),
                    node("mm", "MatMul", &["xt", "x"], "m", vec![]),
                    node("r", "Reshape", &["m", "empty"], "s", vec![]),
                    node("p", "Pad", &["s", "empty"], "y", vec![]),
                ],
                vec![i64_init("empty", &[0], &[])],
            ),
            vec!["ONNX node `p` (Pad)", "rank-0"],
        ),
        (
            "Pad by i64::MAX on each side",
            model(4, vec![node("p", "Pad", &["x", "pads"], "y", vec![])], vec![i64_init("pads", &[4], &[0, i64::MAX, 0, i64::MAX])]),
            vec!["ONNX node `p` (Pad)", "each pad must be between 0 and 65536"],
        ),
        (
            "an empty initializer whose other sizes overflow",
            model(1, vec![node("t", "Transpose", &["e"], "y", vec![])], vec![empty_init("e", &[0, 1 << 40, 1 << 40])]),
            vec!["ONNX tensor `e`", "dimensions [0, 1099511627776, 1099511627776] overflow"],
        ),
        (
            "an empty constant reshaped to sizes that overflow",
            model(
                1,
                vec![node("r", "Reshape", &["e", "shape"], "big", vec![]), node("t", "Transpose", &["big"], "y", vec![])],
                vec![empty_init("e", &[0]), i64_init("shape", &[3], &[0, 1 << 62, 1 << 62])],
            ),
            vec!["ONNX node `r` (Reshape)", "the sizes overflow"],
        ),
        (
            "two nodes write one output name (onnxruntime refuses the graph)",
            model(4, vec![node("r1", "Relu", &["x"], "y", vec![]), node("r2", "Relu", &["x"], "y", vec![])], vec![]),
            vec!["ONNX node `r2` (Relu): writes output `y`, which node `r1` (Relu) already defines; each value needs one writer"],
        ),
        (
            "a node writes over the graph input",
            model(4, vec![node("r1", "Relu", &["x"], "x", vec![]), node("r2", "Relu", &["x"], "y", vec![])], vec![]),
            vec!["ONNX node `r1` (Relu): writes output `x`, which a graph input already defines"],
        ),
        (
            "MaxPool with a 0 kernel (onnxruntime refuses it; it was read as 1)",
            pool_model(vec![ints_attr("kernel_shape", &[0])]),
            vec!["ONNX node `mp` (MaxPool): kernel_shape [0]: each entry must be between 1 and 65536, got 0"],
        ),
        (
            "MaxPool with a negative stride",
            pool_model(vec![ints_attr("kernel_shape", &[2]), ints_attr("strides", &[-1])]),
            vec!["ONNX node `mp` (MaxPool): strides [-1]: each entry must be between 1 and 65536, got -1"],
        ),
        (
            "empty constants concatenated past the largest size",
            model(1, vec![node("c", "Concat", &["e", "e", "e"], "y", vec![int_attr("axis", 1)])], vec![empty_init("e", &[0, i64::MAX])]),
            vec!["ONNX node `c` (Concat)", "overflows"],
        ),
    ]
}

#[test]
fn hostile_onnx_models_give_one_error_line() {
    for (label, m, want) in onnx_cases() {
        let got = catch_unwind(AssertUnwindSafe(|| import_model(&m, &ImportOptions::default())));
        let e = match got {
            Err(_) => panic!("{label}: the importer panicked"),
            Ok(Ok(_)) => panic!("{label}: imported without an error"),
            Ok(Err(e)) => e.to_string(),
        };
        for w in &want {
            assert!(e.contains(w), "{label}: error lacks {w:?}: {e}");
        }
        assert!(!e.contains('\n'), "{label}: error is not one line: {e}");
    }
}

// ---------------------------------------------------------------------------------------------
// Pickles, torch.save archives, zip and npy files.

/// Pickle opcodes, written by hand.
#[derive(Default)]
struct Pkl(Vec<u8>);

impl Pkl {
    fn new() -> Pkl {
        Pkl(vec![0x80, 2])
    }
    fn op(mut self, bytes: &[u8]) -> Pkl {
        self.0.extend_from_slice(bytes);
        self
    }
    fn str(self, s: &str) -> Pkl {
        let mut b = vec![b'X'];
        b.extend((s.len() as u32).to_le_bytes());
        b.extend(s.as_bytes());
        self.op(&b)
    }
    fn global(self, module: &str, name: &str) -> Pkl {
        self.op(format!("c{module}\n{name}\n").as_bytes())
    }
    fn put(self, k: u8) -> Pkl {
        self.op(&[b'q', k])
    }
    fn get(self, k: u8) -> Pkl {
        self.op(&[b'h', k])
    }
    fn stop(self) -> Vec<u8> {
        self.op(b".").0
    }
}

/// A torch.save archive: `archive/data.pkl` and the given storages under `archive/data/`.
fn torch_zip(pkl: &[u8], storages: &[(&str, &[u8])]) -> Vec<u8> {
    let names: Vec<String> = storages.iter().map(|(k, _)| format!("archive/data/{k}")).collect();
    let mut entries: Vec<(&str, &[u8])> = vec![("archive/data.pkl", pkl)];
    entries.extend(names.iter().map(String::as_str).zip(storages.iter().map(|(_, b)| *b)));
    mase_interop::zip::write_stored(&entries)
}

/// `{'w': C}` where `C = _rebuild_parameter(*L)` and `L = [C]`: a parameter wrapping itself.
fn self_wrapping_parameter() -> Vec<u8> {
    let pkl = Pkl::new()
        .op(b"}")
        .put(0)
        .str("w")
        .op(b"]")
        .put(1)
        .op(b"0")
        .global("torch._utils", "_rebuild_parameter")
        .get(1)
        .op(b"R")
        .put(2)
        .get(1)
        .get(2)
        .op(b"a0s")
        .stop();
    torch_zip(&pkl, &[])
}

/// `{'w': _rebuild_tensor_v2(storage of 1 float, 0, (65535,) * 4, (0,) * 4)}`: a tensor that
/// repeats one stored value 65535^4 times.
fn expanded_tensor() -> Vec<u8> {
    let pkl = Pkl::new()
        .op(b"}")
        .str("w")
        .global("torch._utils", "_rebuild_tensor_v2")
        .op(b"((")
        .str("storage")
        .global("torch", "FloatStorage")
        .str("0")
        .str("cpu")
        .op(b"K\x01tQK\x00")
        .op(b"(M\xff\xffM\xff\xffM\xff\xffM\xff\xfft")
        .op(b"(K\x00K\x00K\x00K\x00t")
        .op(b"tRs")
        .stop();
    torch_zip(&pkl, &[("0", &1f32.to_le_bytes())])
}

/// A 64 KiB byte string fetched from the memo again and again: a few bytes of file per copy.
fn copy_bomb() -> Vec<u8> {
    let mut p = Pkl::new().op(b"B").op(&(65536u32).to_le_bytes()).op(&[7u8; 65536]).put(0);
    for _ in 0..1200 {
        p = p.get(0);
    }
    p.stop()
}

/// A zip whose zip64 locator points at the last bytes of the address space.
fn zip64_locator_past_the_end() -> Vec<u8> {
    let mut b = b"PK\x03\x04".to_vec();
    b.extend(0x0706_4b50u32.to_le_bytes());
    b.extend(0u32.to_le_bytes());
    b.extend((u64::MAX - 1).to_le_bytes());
    b.extend(1u32.to_le_bytes());
    b.extend(0x0605_4b50u32.to_le_bytes());
    b.extend([0u8; 18]);
    b
}

/// An `.npy` array whose dtype starts with a two-byte character.
fn npy_with_wide_dtype() -> Vec<u8> {
    let t = mase_ir::Tensor::new(vec![2], vec![1.0, 2.0]).unwrap();
    let b = mase_interop::npy::write_npy_f32(&t);
    let at = b.windows(3).position(|w| w == b"<f4").unwrap();
    let mut out = b[..at].to_vec();
    out.extend("é4".as_bytes());
    out.extend(&b[at + 3..]);
    out
}

type Reader = fn(&[u8]) -> Result<(), String>;

fn torch(b: &[u8]) -> Result<(), String> {
    mase_interop::torch::read_torch(b).map(|_| ()).map_err(|e| e.to_string())
}

fn pickle(b: &[u8]) -> Result<(), String> {
    mase_interop::torch::pickle::unpickle(b).map(|_| ()).map_err(|e| e.to_string())
}

fn npy(b: &[u8]) -> Result<(), String> {
    mase_interop::npy::read_npy(b, "a.npy").map(|_| ()).map_err(|e| e.to_string())
}

#[test]
fn hostile_weight_files_give_one_error_line() {
    // (what the file does, its bytes, the reader, fragments of the error line)
    let cases: Vec<(&str, Vec<u8>, Reader, Vec<&str>)> = vec![
        ("a parameter that wraps itself", self_wrapping_parameter(), torch, vec!["PyTorch checkpoint", "nested too deeply"]),
        ("a stride-0 tensor of 65535^4 values", expanded_tensor(), torch, vec!["storage `0`", "more than 16777216 are refused"]),
        ("DUP/GET copies of one string", copy_bomb(), pickle, vec!["pickle at byte", "copy more string data"]),
        (
            "a zip64 locator past the end",
            zip64_locator_past_the_end(),
            torch,
            vec!["zip archive", "truncated at byte 18446744073709551614"],
        ),
        ("an npy dtype of a two-byte character", npy_with_wide_dtype(), npy, vec!["npy array `a.npy`", "unsupported dtype 'é4'"]),
    ];
    for (label, bytes, read, want) in cases {
        let e = match catch_unwind(AssertUnwindSafe(|| read(&bytes))) {
            Err(_) => panic!("{label}: the reader panicked"),
            Ok(Ok(())) => panic!("{label}: read without an error"),
            Ok(Err(e)) => e,
        };
        for w in &want {
            assert!(e.contains(w), "{label}: error lacks {w:?}: {e}");
        }
        assert!(!e.contains('\n'), "{label}: error is not one line: {e}");
    }
}

/// A float initializer.
fn f32_init(name: &str, dims: &[i64], v: &[f32]) -> TensorProto {
    TensorProto { name: name.into(), dims: dims.to_vec(), data_type: 1, float_data: v.to_vec(), ..Default::default() }
}

#[test]
fn a_transpose_without_perm_that_moves_the_batch_is_named() {
    // `[N, 4]` transposed without `perm` is `[4, N]`: the batch norm after it finds the batch in
    // its channel axis.
    let stats: Vec<TensorProto> = ["scale", "bias", "mean", "var"].iter().map(|k| f32_init(k, &[4], &[1.0; 4])).collect();
    let m = model(
        4,
        vec![
            node("t", "Transpose", &["x"], "xt", vec![]),
            node("bn", "BatchNormalization", &["xt", "scale", "bias", "mean", "var"], "y", vec![]),
        ],
        stats,
    );
    let e = import_model(&m, &ImportOptions::default()).unwrap_err().to_string();
    assert_eq!(
        e,
        "ONNX node `bn` (BatchNormalization): the channel dimension must be fixed; input `xt` has the batch dimension in axis 1 \
         (the channel axis): Transpose `t` has no `perm`, so it reverses all dimensions and moves the batch out of axis 0; \
         give it a `perm` that keeps axis 0 first"
    );
}
