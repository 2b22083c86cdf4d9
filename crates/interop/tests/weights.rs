//! PyTorch, Lightning, npz and safetensors weights, read by content and mapped onto models.

mod common;
use common::*;
use mase_interop::{map_onto_graph, read_weights, torch::read_torch, DType};
use mase_ir::Tensor;

fn get<'a>(sd: &'a mase_interop::StateDict, key: &str) -> &'a mase_interop::Weight {
    &sd.iter().find(|(k, _)| k == key).unwrap_or_else(|| panic!("no `{key}`")).1
}

#[test]
fn torch_zip_tensors_keep_strides_offsets_and_dtypes() {
    let f = read_torch(&std::fs::read(fixture("torch/mixed_state_dict.pt")).unwrap()).unwrap();
    assert_eq!(f.kind, "state_dict");
    let sd = &f.state_dict;
    // fc.weight = base[:, 1:4] of base[i][j] = (6 i + j) / 8: storage offset 1, row stride 6.
    let w = get(sd, "fc.weight");
    let want: Vec<f32> = (0..4).flat_map(|i| (1..4).map(move |j| (6 * i + j) as f32 / 8.0)).collect();
    assert_eq!((w.dtype, &w.tensor), (DType::F32, &Tensor::new(vec![4, 3], want).unwrap()));
    // fc.weight_t = base.t(): strides (1, 6) over the same storage.
    let wt = get(sd, "fc.weight_t");
    let want: Vec<f32> = (0..6).flat_map(|j| (0..4).map(move |i| (6 * i + j) as f32 / 8.0)).collect();
    assert_eq!(wt.tensor, Tensor::new(vec![6, 4], want).unwrap());
    let cases: [(&str, DType, Vec<usize>, Vec<f32>); 5] = [
        ("fc.bias", DType::F32, vec![4], vec![0.5, -1.25, 3.0, 1e-3]),
        ("half", DType::F16, vec![3], vec![1.0, -2.0, 0.333_251_95]),
        ("bf16", DType::BF16, vec![2], vec![1.0, -3.5]),
        ("count", DType::I64, vec![], vec![7.0]),
        ("scalar", DType::F32, vec![], vec![2.5]),
    ];
    for (key, dtype, shape, data) in cases {
        let w = get(sd, key);
        assert_eq!((w.dtype, &w.tensor.shape, &w.tensor.data), (dtype, &shape, &data), "{key}");
    }
}

#[test]
fn pickled_modules_give_their_state_dict() {
    let f = read_torch(&std::fs::read(fixture("torch/module.pt")).unwrap()).unwrap();
    assert_eq!(f.kind, "module");
    let keys: Vec<&str> = f.state_dict.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(keys, ["0.weight", "0.bias", "1.weight", "1.bias", "1.running_mean", "1.running_var", "1.num_batches_tracked"]);
    let npz = read_weights(&fixture("torch/module_state.npz")).unwrap();
    for (k, w) in &npz {
        assert_eq!(&get(&f.state_dict, k).tensor, &w.tensor, "{k}");
    }
}

#[test]
fn npz_reads_deflated_and_column_major_arrays() {
    let sd = read_weights(&fixture("torch/compressed.npz")).unwrap();
    let cases: [(&str, DType, Vec<usize>, Vec<f32>); 3] = [
        ("a", DType::F64, vec![2, 3], vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]),
        ("b", DType::I32, vec![2, 2], vec![1.0, 3.0, 2.0, 4.0]),
        ("c", DType::F32, vec![2, 3], vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]),
    ];
    for (key, dtype, shape, data) in cases {
        let w = get(&sd, key);
        assert_eq!((w.dtype, &w.tensor.shape, &w.tensor.data), (dtype, &shape, &data), "{key}");
    }
}

#[test]
fn safetensors_files_are_read_by_content() {
    use safetensors::tensor::{serialize, TensorView};
    let a: Vec<u8> = [1.5f32, -2.0, 0.25, 8.0].iter().flat_map(|v| v.to_le_bytes()).collect();
    let b: Vec<u8> = [3i64, -4].iter().flat_map(|v| v.to_le_bytes()).collect();
    let views = vec![
        ("layer.weight", TensorView::new(safetensors::Dtype::F32, vec![2, 2], &a).unwrap()),
        ("steps", TensorView::new(safetensors::Dtype::I64, vec![2], &b).unwrap()),
    ];
    let bytes = serialize(views, &None).unwrap();
    assert_eq!(mase_interop::sniff(&bytes), Some(mase_interop::WeightFormat::Safetensors));
    let sd = mase_interop::read_weight_bytes(&bytes).unwrap();
    assert_eq!(get(&sd, "layer.weight").tensor, Tensor::new(vec![2, 2], vec![1.5, -2.0, 0.25, 8.0]).unwrap());
    assert_eq!((get(&sd, "steps").dtype, get(&sd, "steps").tensor.data.clone()), (DType::I64, vec![3.0, -4.0]));
}

fn jsc_tiny() -> mase_ir::Graph {
    mase_zoo::build_model("jsc-tiny", &mase_zoo::ModelContext::new(vec![16], 5)).unwrap()
}

#[test]
fn mase_lightning_checkpoint_loads_into_jsc_tiny() {
    let path = fixture("models/jsc-tiny_best.ckpt");
    let f = read_torch(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!(f.kind, "lightning");
    assert_eq!((f.meta["epoch"].as_i64(), f.meta["global_step"].as_i64()), (Some(5), Some(18504)));
    assert_eq!(f.meta["pytorch-lightning_version"], "2.1.3");
    let g = jsc_tiny();
    let (params, report) = map_onto_graph(&g, &read_weights(&path).unwrap()).unwrap();
    assert_eq!(report.prefix, "model.");
    assert_eq!(report.unused, ["model.seq_blocks.0.num_batches_tracked"]);
    // The same tensors from the npz beside it (keys with the same `model.` prefix).
    let (from_npz, r2) = map_onto_graph(&g, &read_weights(&fixture("models/jsc-tiny_best.state_dict.npz")).unwrap()).unwrap();
    assert_eq!((r2.prefix.as_str(), r2.unused.len()), ("model.", 0));
    assert_eq!(params, from_npz);
    // Outputs on 100 random inputs equal PyTorch's for the same checkpoint.
    let x = npz("refs/jsc-tiny_best.ckpt.npz", "x");
    let got = run(&g, &params, &x);
    let (d, at) = max_diff(&got, &npz("refs/jsc-tiny_best.ckpt.npz", "y"));
    assert!(d <= 1e-5, "largest difference {d} at {at}");
    assert_eq!(got, run(&g, &from_npz, &x));
}

#[test]
fn weights_that_do_not_fit_name_the_key() {
    let g = jsc_tiny();
    let mut sd = read_weights(&fixture("models/jsc-tiny_best.state_dict.npz")).unwrap();
    sd.retain(|(k, _)| !k.ends_with("running_var"));
    let e = map_onto_graph(&g, &sd).unwrap_err().to_string();
    assert!(e.contains("missing model.seq_blocks.0.running_var"), "{e}");
    let mut sd = read_weights(&fixture("models/jsc-tiny_best.state_dict.npz")).unwrap();
    sd.iter_mut().find(|(k, _)| k.ends_with("2.weight")).unwrap().1.tensor = Tensor::zeros(vec![5, 15]);
    let e = map_onto_graph(&g, &sd).unwrap_err().to_string();
    assert!(e.contains("`model.seq_blocks.2.weight` has shape [5, 15], the model needs [5, 16]"), "{e}");
}

#[test]
fn truncated_checkpoints_give_one_clear_error() {
    let bytes = std::fs::read(fixture("models/jsc-tiny_best.ckpt")).unwrap();
    for cut in [0, 10, 100, 5_000, 8_000, bytes.len() - 30, bytes.len() - 1] {
        let e = mase_interop::read_weight_bytes(&bytes[..cut]).unwrap_err().to_string();
        assert!(
            !e.contains('\n') && (e.contains("truncated") || e.contains("not a weight file") || e.contains("zip")),
            "cut at {cut}: {e}"
        );
    }
    let e = read_weights(&fixture("models/three_layer_keras.onnx")).unwrap_err().to_string();
    assert!(e.contains("three_layer_keras.onnx") && e.contains("not a weight file"), "{e}");
}
