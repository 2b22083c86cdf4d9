//! Models with several inputs or outputs, and the exact GELU chain of pre-opset-20 exports
//! (tests/fixtures/multi_io, written and run in onnxruntime by scripts/make_onnx_references.py):
//! the import gives onnxruntime's outputs to 1e-5, and the export reads back to the same outputs.

mod common;
use common::*;
use mase_interop::{export_model, import_file, import_model, ExportFormat, ExportOptions, ImportOptions, Imported};
use mase_ir::{Graph, Op, ParamStore, Tensor};
use mase_runtime::{ExecOptions, Executor, Mode};

/// Every output of the graph for one batch per input.
fn run_many(graph: &Graph, params: &ParamStore, xs: &[Tensor]) -> Vec<Tensor> {
    let mut exec = Executor::new(graph, params, ExecOptions { threads: 1, seed: 0 }).unwrap();
    let batches: Vec<(&[f32], &[usize])> = xs.iter().map(|x| (x.data.as_slice(), x.shape.as_slice())).collect();
    exec.forward_many(&batches, Mode::Eval).unwrap();
    (0..exec.output_count()).map(|k| exec.output(k).map(|(s, v)| Tensor::new(s.to_vec(), v.to_vec()).unwrap()).unwrap()).collect()
}

/// The fixture's inputs (`x0, x1, ...`) and onnxruntime's outputs (`y0, y1, ...`).
fn references(stem: &str, inputs: usize, outputs: usize) -> (Vec<Tensor>, Vec<Tensor>) {
    let rel = format!("multi_io/{stem}.npz");
    ((0..inputs).map(|k| npz(&rel, &format!("x{k}"))).collect(), (0..outputs).map(|k| npz(&rel, &format!("y{k}"))).collect())
}

fn assert_close(label: &str, got: &[Tensor], want: &[Tensor]) {
    assert_eq!(got.len(), want.len(), "{label}: outputs");
    for (k, (g, w)) in got.iter().zip(want).enumerate() {
        let (d, at) = max_diff(g, w);
        assert!(d <= 1e-5, "{label}: output {k}: largest difference {d} at {at}: {} vs {}", g.data[at], w.data[at]);
    }
}

fn load(stem: &str) -> Imported {
    import_file(&fixture(&format!("multi_io/{stem}.onnx")), &ImportOptions::default()).unwrap_or_else(|e| panic!("{stem}: {e}"))
}

#[test]
fn imports_match_onnxruntime_and_exports_read_back() {
    // Fixture, input names, output sample shapes, and the ops the graph must hold.
    let cases: &[(&str, &[&str], &[&[usize]], &[&str])] = &[
        ("two_inputs_three_outputs", &["a", "b"], &[&[3], &[4], &[4]], &["add", "linear", "relu"]),
        ("gelu_erf_chain", &["x"], &[&[4]], &["linear", "gelu"]),
        ("torch_gelu_opset17", &["x"], &[&[3]], &["linear", "gelu", "linear"]),
    ];
    for &(stem, inputs, outputs, ops) in cases {
        let m = load(stem);
        let names: Vec<&str> = m.graph.inputs().iter().map(|&i| m.graph.node(i).name.as_str()).collect();
        assert_eq!(names, inputs, "{stem}: inputs");
        let shapes: Vec<&[usize]> = m.output_shapes.iter().map(Vec::as_slice).collect();
        assert_eq!(shapes, outputs, "{stem}: output shapes");
        let got_ops: Vec<&str> =
            m.graph.nodes().iter().filter(|n| !matches!(n.op, Op::Input | Op::Output)).map(|n| n.op.mase_op()).collect();
        assert_eq!(got_ops, ops, "{stem}: ops");
        if stem.contains("gelu") {
            assert!(m.graph.nodes().iter().any(|n| n.op == Op::Gelu { tanh: false }), "{stem}: the chain is one exact GELU");
        }
        let (xs, want) = references(stem, inputs.len(), outputs.len());
        assert_close(stem, &run_many(&m.graph, &m.params, &xs), &want);
        // Export writes one ONNX input and output per graph input and output, in order.
        let exported = export_model(&m.graph, &m.params, &ExportOptions::new(ExportFormat::Onnx)).unwrap();
        let g = exported.graph.as_ref().unwrap();
        assert_eq!(g.input.iter().map(|i| i.name.as_str()).collect::<Vec<_>>(), inputs, "{stem}: exported inputs");
        assert_eq!(g.output.len(), outputs.len(), "{stem}: exported outputs");
        let back = import_model(&exported, &ImportOptions::default()).unwrap_or_else(|e| panic!("{stem} exported: {e}"));
        assert_close(&format!("{stem} exported"), &run_many(&back.graph, &back.params, &xs), &want);
    }
}

#[test]
fn a_value_returned_twice_is_exported_twice() {
    let mut g = Graph::new();
    let x = g.placeholder("x");
    let r = g.call_function("torch.relu", Op::Relu, &[x]);
    g.outputs(&[r, r]);
    let opts = ExportOptions { sample_shape: Some(vec![3]), ..ExportOptions::new(ExportFormat::Onnx) };
    let exported = export_model(&g, &ParamStore::new(), &opts).unwrap();
    let outs: Vec<String> = exported.graph.as_ref().unwrap().output.iter().map(|o| o.name.clone()).collect();
    assert_eq!(outs, ["relu", "relu_output_1"]);
    let back = import_model(&exported, &ImportOptions::default()).unwrap();
    let x = Tensor::new(vec![2, 3], vec![-1.0, 0.5, 2.0, f32::NAN, 0.0, f32::INFINITY]).unwrap();
    let got = run_many(&back.graph, &back.params, &[x]);
    for y in &got {
        assert_eq!(format!("{:?}", y.data), "[0.0, 0.5, 2.0, NaN, 0.0, inf]");
    }
}

#[test]
fn an_erf_outside_the_gelu_chain_is_refused() {
    let mut m = mase_interop::onnx::decode_model(&std::fs::read(fixture("multi_io/gelu_erf_chain.onnx")).unwrap()).unwrap();
    // A second reader of the erf's output breaks the chain: the Erf stands alone.
    let g = m.graph.as_mut().unwrap();
    g.output.push(g.output[0].clone());
    g.output[1].name = "e".into();
    let e = import_model(&m, &ImportOptions::default()).unwrap_err().to_string();
    assert_eq!(e, "unsupported ONNX operators: Erf (opset 13)");
}
