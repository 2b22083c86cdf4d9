//! QONNX models: quantizers become number formats on nodes, the runtime applies them, and the
//! results equal QONNX's reference semantics (onnxruntime running the quantizers rewritten into
//! standard operators, scripts/make_onnx_references.py).

mod common;
use common::*;
use mase_interop::{export_bytes, import_bytes, ExportFormat, ExportOptions, ImportOptions};
use mase_ir::{Op, QuantFormat, Tensor};
use std::io::Read;

#[test]
fn qonnx_models_match_the_reference() {
    for file in ["bnn_model_fc_1layer.onnx", "qkeras_jettagging.onnx", "TFC_1W1A.onnx"] {
        let m = import(file);
        let stem = file.trim_end_matches(".onnx");
        let x = npz(&format!("refs/{stem}.npz"), "x");
        let got = run(&m.graph, &m.params, &x);
        let (d, at) = max_diff(&got, &npz(&format!("refs/{stem}.npz"), "y"));
        assert!(d <= 1e-5, "{file}: largest difference {d} at {at}");
    }
}

fn int_quant(f: &Option<QuantFormat>) -> (f32, bool, f32) {
    match f {
        Some(QuantFormat::IntQuant { scale, bit_width, signed, .. }) => (*bit_width, *signed, scale.data[0]),
        other => panic!("expected IntQuant, got {other:?}"),
    }
}

#[test]
fn qkeras_jet_tagger_has_six_bit_formats_and_round_trips_bit_exactly() {
    let m = import("qkeras_jettagging.onnx");
    let linears: Vec<_> = m.graph.nodes().iter().filter(|n| matches!(n.op, Op::Linear { .. })).collect();
    assert_eq!(linears.len(), 4);
    for (i, n) in linears.iter().enumerate() {
        let q = n.quant.as_ref().expect("quantized");
        assert_eq!(int_quant(&q.weight), (6.0, true, 1.0 / 32.0), "{}", n.name);
        assert_eq!(int_quant(&q.bias), (6.0, true, 1.0 / 32.0), "{}", n.name);
        // Activations: 6-bit unsigned after each ReLU, read by the next layer.
        if i > 0 {
            assert_eq!(int_quant(&q.data_in[0]), (6.0, false, 1.0 / 64.0), "{}", n.name);
        } else {
            assert!(q.data_in.iter().all(Option::is_none));
        }
    }
    let bytes = export_bytes(&m.graph, &m.params, &ExportOptions::new(ExportFormat::Qonnx)).unwrap();
    let again = import_bytes(&bytes, &ImportOptions::default()).unwrap();
    let x = npz("refs/qkeras_jettagging.npz", "x");
    let (a, b) = (run(&m.graph, &m.params, &x), run(&again.graph, &again.params, &x));
    assert_eq!(a.data.iter().map(|v| v.to_bits()).collect::<Vec<_>>(), b.data.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    assert_eq!(m.params, again.params);
}

#[test]
fn folded_weights_lie_on_their_grid_and_change_nothing() {
    let opts = ImportOptions { weight_quant: mase_interop::WeightQuant::Fold };
    let bytes = std::fs::read(fixture("models/qkeras_jettagging.onnx")).unwrap();
    let folded = import_bytes(&bytes, &opts).unwrap();
    let kept = import("qkeras_jettagging.onnx");
    let w = folded.params.get("MatMul_0.weight").unwrap();
    assert!(
        w.data.iter().all(|v| (v * 32.0).fract() == 0.0 && (-1.0..=31.0 / 32.0).contains(v)),
        "not on the 6-bit grid: {:?}",
        &w.data[..8]
    );
    assert_ne!(kept.params.get("MatMul_0.weight"), Some(w));
    let x = npz("refs/qkeras_jettagging.npz", "x");
    assert_eq!(run(&folded.graph, &folded.params, &x), run(&kept.graph, &kept.params, &x));
}

#[test]
fn brevitas_binary_layer_keeps_every_format() {
    let m = import("bnn_model_fc_1layer.onnx");
    let fc = m.graph.nodes().iter().find(|n| matches!(n.op, Op::Linear { .. })).unwrap();
    assert_eq!(fc.target, "linear");
    let q = fc.quant.as_ref().unwrap();
    assert!(matches!(q.data_in[0], Some(QuantFormat::BipolarQuant { .. })));
    assert!(matches!(q.weight, Some(QuantFormat::BipolarQuant { .. })));
    assert!(matches!(q.bias, Some(QuantFormat::IntQuant { .. })));
    assert!(matches!(q.data_out, Some(QuantFormat::BipolarQuant { .. })));
}

/// The MNIST test set shipped in the repository, with pixels / 255.
fn mnist_test() -> (Tensor, Vec<u8>) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/mnist");
    let gunzip = |name: &str| {
        let mut v = Vec::new();
        flate2::read::GzDecoder::new(std::fs::File::open(dir.join(name)).unwrap()).read_to_end(&mut v).unwrap();
        v
    };
    let images = gunzip("t10k-images-idx3-ubyte.gz");
    let labels = gunzip("t10k-labels-idx1-ubyte.gz");
    let x = images[16..].iter().map(|&p| p as f32 / 255.0).collect();
    (Tensor::new(vec![10_000, 1, 28, 28], x).unwrap(), labels[8..].to_vec())
}

#[test]
fn tfc_1w1a_scores_92_96_percent_on_mnist() {
    let m = import("TFC_1W1A.onnx");
    let (x, labels) = mnist_test();
    let y = run(&m.graph, &m.params, &x);
    let correct = y.data.chunks(10).zip(&labels).filter(|(row, &l)| {
        let best = row.iter().enumerate().fold(0, |b, (i, v)| if *v > row[b] { i } else { b });
        best == l as usize
    });
    assert_eq!(correct.count(), 9296);
}
