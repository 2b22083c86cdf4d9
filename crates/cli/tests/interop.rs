//! ONNX models and PyTorch/Lightning checkpoints through `ch`: `--model-file model.onnx` in train
//! and test, `--load best.ckpt --load-type pl`, and `ch export` to ONNX and QONNX.

mod common;
use common::*;
use std::path::{Path, PathBuf};

fn interop_fixture(rel: &str) -> String {
    repo_root().join("crates/interop/tests/fixtures").join(rel).display().to_string()
}

/// A data dir holding MASE's jsc fixture (HDF5), as jsc.rs makes it.
fn jsc_data(root: &Path) -> PathBuf {
    let d = root.join("data");
    std::fs::create_dir_all(d.join("jsc")).unwrap();
    std::fs::copy(repo_root().join("crates/io/tests/fixtures/jsc/jsc_fixture.h5"), d.join("jsc/jsc_fixture.h5")).unwrap();
    d
}

#[test]
fn onnx_models_test_and_train_from_their_own_weights() {
    let root = scratch("interop-onnx");
    let data = jsc_data(&root);
    let data = data.to_str().unwrap();
    let onnx = interop_fixture("models/jsc-tiny_lab_model_dynbatch.onnx");
    let t = ch_json(&["test", "--model-file", &onnx, "jsc", "--data-dir", data], &root);
    assert_eq!(t["model"], "jsc-tiny_lab_model_dynbatch");
    assert!(t["test_acc"].as_f64().unwrap() > 0.0, "{t}");
    // A learning rate of 1e-30 (Adam moves each weight by about that much, below an f32 ulp of
    // the weights): the linear layer's weights stay the file's, which shows training started
    // from them rather than from fresh ones.
    let r = ch_json(
        &["train", "--model-file", &onnx, "jsc", "--data-dir", data, "--max-epochs", "1", "--learning-rate", "1e-30", "--project", "onnx"],
        &root,
    );
    let ck = mase_io::load_checkpoint(Path::new(r["best_checkpoint"].as_str().unwrap())).unwrap();
    let m = mase_interop::import_file(Path::new(&onnx), &mase_interop::ImportOptions::default()).unwrap();
    assert_eq!(ck.params.get("seq_blocks.2.weight"), m.params.get("seq_blocks.2.weight"));
}

#[test]
fn import_notes_are_printed_and_in_the_json_result() {
    let root = scratch("interop-notes");
    let data = jsc_data(&root);
    let onnx = interop_fixture("models/jsc-tiny_lab_model_batch8.onnx");
    let note = "input `input.1` fixes the batch size to 8; the imported model takes any batch size";
    let out = ch(&["test", "--model-file", &onnx, "jsc", "--data-dir", data.to_str().unwrap(), "--json"], &root);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let notes: Vec<&str> = stderr.lines().filter(|l| l.starts_with("NOTE")).collect();
    assert_eq!(notes, [format!("NOTE     {onnx}: {note}")]);
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(r["import_notes"], serde_json::json!([{"file": onnx, "note": note}]));
}

#[test]
fn lightning_checkpoints_load_into_zoo_models_and_export() {
    let root = scratch("interop-pl");
    let data = jsc_data(&root);
    let data = data.to_str().unwrap();
    let ckpt = interop_fixture("models/jsc-tiny_best.ckpt");
    let t = ch_json(&["test", "jsc-tiny", "jsc", "--data-dir", data, "--load", &ckpt, "--load-type", "pl"], &root);
    assert_eq!(t["model"], "jsc-tiny");
    let out = root.join("jsc_tiny.onnx");
    let e = ch_json(
        &["export", "jsc-tiny", "jsc", "--data-dir", data, "--load", &ckpt, "--load-type", "pl", "-o", out.to_str().unwrap()],
        &root,
    );
    assert_eq!((e["format"].as_str(), e["quantized_nodes"].as_u64()), (Some("onnx"), Some(0)));
    // The exported file holds the checkpoint's weights under the zoo's names.
    let m = mase_interop::import_file(&out, &mase_interop::ImportOptions::default()).unwrap();
    let npz = mase_interop::read_weights(Path::new(&interop_fixture("models/jsc-tiny_best.state_dict.npz"))).unwrap();
    for (k, w) in npz {
        assert_eq!(m.params.get(k.trim_start_matches("model.")), Some(&w.tensor), "{k}");
    }
}

#[test]
fn qonnx_models_export_with_their_formats() {
    let root = scratch("interop-qonnx");
    let out = root.join("jet.onnx");
    let q = interop_fixture("models/qkeras_jettagging.onnx");
    let e = ch_json(&["export", "--model-file", &q, "--format", "qonnx", "-o", out.to_str().unwrap()], &root);
    assert_eq!(e["quantized_nodes"].as_u64(), Some(4));
    let err = ch_error(&["export", "--model-file", &q, "--format", "onnx", "-o", out.to_str().unwrap()], &root);
    assert!(err.contains("export it as QONNX"), "{err}");
}

#[test]
fn bad_model_files_give_one_error_line() {
    let root = scratch("interop-bad");
    let bytes = std::fs::read(interop_fixture("models/two_layer_keras.onnx")).unwrap();
    let cut = root.join("cut.onnx");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let err = ch_error(&["export", "--model-file", cut.to_str().unwrap(), "-o", "x.onnx"], &root);
    assert!(err.contains("cut.onnx") && err.contains("truncated or not an ONNX model"), "{err}");
    let pt = root.join("weights.ckpt");
    std::fs::write(&pt, b"PK\x03\x04 not really").unwrap();
    let err = ch_error(&["test", "jsc-tiny", "toy_tiny", "--load", pt.to_str().unwrap()], &root);
    assert!(err.contains("weights.ckpt"), "{err}");
}
