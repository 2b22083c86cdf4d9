//! One or two operators at a time, across opsets 6 to 21 (tests/fixtures/ops, written and run in
//! onnxruntime by scripts/make_onnx_references.py): every attribute and input form the importer
//! reads gives onnxruntime's outputs to 1e-5.

mod common;
use common::*;
use mase_interop::onnx::proto::{AttributeProto, ModelProto};
use mase_interop::{import_model, ImportOptions};

fn check(label: &str, model: &ModelProto, stem: &str) {
    let m = import_model(model, &ImportOptions::default()).unwrap_or_else(|e| panic!("{label}: {e}"));
    let x = npz(&format!("ops/{stem}.npz"), "x");
    let want = npz(&format!("ops/{stem}.npz"), "y");
    let got = run(&m.graph, &m.params, &x);
    let (d, at) = max_diff(&got, &want);
    assert!(d <= 1e-5, "{label}: largest difference {d} at {at}: {} vs {}", got.data[at], want.data[at]);
}

fn load(stem: &str) -> ModelProto {
    mase_interop::onnx::decode_model(&std::fs::read(fixture(&format!("ops/{stem}.onnx"))).unwrap()).unwrap()
}

#[test]
fn every_operator_matches_onnxruntime() {
    let mut stems: Vec<String> = std::fs::read_dir(fixture("ops"))
        .unwrap()
        .filter_map(|e| e.ok()?.path().file_name()?.to_str()?.strip_suffix(".onnx").map(str::to_string))
        .collect();
    stems.sort();
    assert_eq!(stems.len(), 28, "{stems:?}");
    for stem in &stems {
        check(stem, &load(stem), stem);
    }
}

/// Sets the standard opset of a model and adds an attribute to its first node.
fn legacy(mut m: ModelProto, opset: i64, attr: &str, value: i64) -> ModelProto {
    m.opset_import.iter_mut().for_each(|o| o.version = opset);
    let g = m.graph.as_mut().unwrap();
    g.node[0].attribute.push(AttributeProto { name: attr.into(), i: value, r#type: 2, ..Default::default() });
    m
}

#[test]
fn legacy_attributes_of_opset_6_are_read() {
    // onnxruntime has no kernels for these opset-6 forms; the opset-7 files' outputs are theirs.
    check("Gemm broadcast=1 (opset 6)", &legacy(load("gemm_transB_opset7"), 6, "broadcast", 1), "gemm_transB_opset7");
    check("BatchNormalization is_test=1 (opset 6)", &legacy(load("batchnorm_legacy_opset7"), 6, "is_test", 1), "batchnorm_legacy_opset7");
}

#[test]
fn unsupported_operators_are_listed_in_one_error() {
    let mut m = load("activations");
    let g = m.graph.as_mut().unwrap();
    g.node[1].op_type = "Elu".into();
    g.node[3].op_type = "Softsign".into();
    g.node[4].op_type = "Elu".into();
    g.node[2].domain = "com.example".into();
    let e = import_model(&m, &ImportOptions::default()).unwrap_err().to_string();
    assert_eq!(e, "unsupported ONNX operators: Elu (opset 14), com.example:Tanh (opset 1), Softsign (opset 14)");
    m.opset_import[0].version = 22;
    let e = import_model(&m, &ImportOptions::default()).unwrap_err().to_string();
    assert!(e.contains("opset 22 of domain `ai.onnx` is not supported"), "{e}");
}
