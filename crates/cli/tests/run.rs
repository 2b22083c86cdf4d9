//! `ch run`: raw outputs of a model on given inputs. Every shipped ONNX model gives onnxruntime's
//! outputs to 1e-5 on the inputs onnxruntime was run on (the reference bundles of
//! crates/interop/tests/fixtures, made by scripts/make_onnx_references.py); random inputs are
//! seeded; the integer executor is one flag away; `ch analyze --input-shape` reports on a model
//! without a data set.

mod common;
use common::*;
use mase_ir::Tensor;
use std::path::{Path, PathBuf};

fn interop_fixture(rel: &str) -> PathBuf {
    repo_root().join("crates/interop/tests/fixtures").join(rel)
}

/// The array `key` of an `.npz` file.
fn npz(path: &Path, key: &str) -> Tensor {
    let arrays = mase_interop::npy::read_npz(&std::fs::read(path).unwrap()).unwrap();
    arrays.into_iter().find(|(k, _)| k == key).unwrap_or_else(|| panic!("{} has no `{key}`", path.display())).1.tensor
}

fn npy(path: &Path) -> Tensor {
    mase_interop::npy::read_npy(&std::fs::read(path).unwrap(), "y").unwrap().tensor
}

fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
    assert_eq!(a.shape, b.shape);
    a.data.iter().zip(&b.data).map(|(x, y)| (x - y).abs()).fold(0.0, f32::max)
}

/// Every `.onnx` of a fixture folder with its reference bundle: (model, inputs file, input key,
/// expected-outputs file, output key).
fn shipped_models() -> Vec<(PathBuf, PathBuf, PathBuf)> {
    let mut cases = Vec::new();
    for folder in ["models", "ops", "trained"] {
        let mut files: Vec<PathBuf> = std::fs::read_dir(interop_fixture(folder))
            .unwrap()
            .map(|e| e.unwrap().path())
            .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
            .collect();
        files.sort();
        for f in files {
            let stem = f.file_stem().unwrap().to_str().unwrap().to_string();
            let (inputs, outputs) = match folder {
                "models" => (interop_fixture(&format!("refs/{stem}.npz")), interop_fixture(&format!("refs/{stem}.npz"))),
                "ops" => (interop_fixture(&format!("ops/{stem}.npz")), interop_fixture(&format!("ops/{stem}.npz"))),
                _ => (interop_fixture(&format!("trained/{stem}.inputs.npz")), interop_fixture(&format!("trained/{stem}.ort.npz"))),
            };
            cases.push((f, inputs, outputs));
        }
    }
    cases
}

#[test]
fn outputs_of_every_shipped_onnx_model_equal_onnxruntime() {
    let root = scratch("run-onnx");
    let cases = shipped_models();
    // 11 models, 28 operator files, 2 trained exports.
    assert_eq!(cases.len(), 41, "{cases:?}");
    for (model, inputs, outputs) in &cases {
        let name = model.file_stem().unwrap().to_str().unwrap();
        let out = root.join(format!("{name}.npz"));
        // All cores, as users run it.
        let args = ["run", "--model-file", model.to_str().unwrap(), "--input", inputs.to_str().unwrap(), "-o", out.to_str().unwrap()];
        let v = ch_json(&args, &root);
        let want = npz(outputs, "y");
        let got = npz(&out, "y");
        assert_eq!(npz(&out, "x"), npz(inputs, "x"), "{name}: the inputs are written back unchanged");
        assert_eq!(v["output_shape"], serde_json::json!(want.shape), "{name}");
        let d = max_diff(&got, &want);
        assert!(d <= 1e-5, "{name}: largest difference from onnxruntime {d}");
    }
}

#[test]
fn npy_input_and_output_and_the_json_values() {
    let root = scratch("run-npy");
    let bundle = interop_fixture("refs/three_layer_pytorch.npz");
    let x = npz(&bundle, "x");
    // The first 3 samples as an .npy file.
    let x3 = Tensor::new(vec![3, 16], x.data[..48].to_vec()).unwrap();
    std::fs::write(root.join("x.npy"), mase_interop::npy::write_npy_f32(&x3)).unwrap();
    let model = interop_fixture("models/three_layer_pytorch.onnx");
    let m = model.to_str().unwrap();
    ch_json(&["run", "--model-file", m, "--input", "x.npy", "-o", "y.npy"], &root);
    let want = npz(&bundle, "y");
    let y = npy(&root.join("y.npy"));
    assert_eq!(y.shape, [3, 5]);
    assert!(max_diff(&y, &Tensor::new(vec![3, 5], want.data[..15].to_vec()).unwrap()) <= 1e-5);
    // Without -o the values come in the JSON result.
    let v = ch_json(&["run", "--model-file", m, "--input", "x.npy"], &root);
    let values: Vec<f32> = v["output"].as_array().unwrap().iter().map(|x| x.as_f64().unwrap() as f32).collect();
    assert_eq!(values, y.data);
}

#[test]
fn random_inputs_are_seeded_and_standard_normal() {
    let root = scratch("run-random");
    let model = interop_fixture("models/two_layer_pytorch.onnx");
    let m = model.to_str().unwrap();
    let run = |seed: &str, out: &str| {
        ch_json(&["run", "--model-file", m, "--random", "4000,10", "--seed", seed, "-o", out], &root);
        (npz(&root.join(out), "x"), npz(&root.join(out), "y"))
    };
    let (x1, y1) = run("3", "a.npz");
    let (x2, y2) = run("3", "b.npz");
    let (x3, _) = run("4", "c.npz");
    assert_eq!((x1.shape.as_slice(), y1.shape.as_slice()), ([4000, 10].as_slice(), [4000, 1].as_slice()));
    assert_eq!((&x1, &y1), (&x2, &y2), "same seed, same bits");
    assert_ne!(x1, x3, "another seed, other inputs");
    // 40,000 standard normal draws: mean within 4.5 standard errors of 0 (0.0225), variance
    // within 0.05 of 1.
    let n = x1.data.len() as f64;
    let mean = x1.data.iter().map(|&v| v as f64).sum::<f64>() / n;
    let var = x1.data.iter().map(|&v| (v as f64 - mean).powi(2)).sum::<f64>() / n;
    assert!(mean.abs() < 0.0225 && (var - 1.0).abs() < 0.05, "mean {mean}, variance {var}");
}

#[test]
fn integer_executor_agrees_bit_for_bit_with_fake_quantization() {
    let root = scratch("run-integer");
    let data = root.join("data/jsc");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::copy(repo_root().join("crates/io/tests/fixtures/jsc/jsc_fixture.h5"), data.join("jsc_fixture.h5")).unwrap();
    // MASE's lab config: jsc-tiny's Linear with 8/4 integer inputs, weights and biases.
    let cfg = repo_root().join("configs/examples/jsc_toy_by_type.toml");
    let d = root.join("data");
    ch_json(&["transform", "--config", cfg.to_str().unwrap(), "--data-dir", d.to_str().unwrap()], &root);
    let ckpt = root.join("mase_output/jsc-tiny/software/transform/transformed_ckpt/model.ckpt");
    let c = ckpt.to_str().unwrap();
    let v = ch_json(&["run", "--load", c, "--random", "64,16", "--seed", "5", "--integer", "-o", "int.npz"], &root);
    assert_eq!(v["executor"], "integer");
    // The linear, and the unquantized relu after it, which compares its codes.
    assert_eq!(v["integer_nodes"], serde_json::json!(["seq_blocks_2", "seq_blocks_3"]), "{v}");
    // 16 products of 8-bit codes stay far below 24 bits, where the float path's sums are exact.
    assert!(v["max_acc_bits"].as_u64().unwrap() <= 20, "{v}");
    ch_json(&["run", "--load", c, "--random", "64,16", "--seed", "5", "-o", "float.npz"], &root);
    let (int, float) = (npz(&root.join("int.npz"), "y"), npz(&root.join("float.npz"), "y"));
    let bits = |t: &Tensor| t.data.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&int), bits(&float));
}

#[test]
fn bad_inputs_get_one_line() {
    let root = scratch("run-errors");
    let model = interop_fixture("models/three_layer_pytorch.onnx");
    let m = model.to_str().unwrap();
    let two = root.join("two.npz");
    let t = Tensor::new(vec![2, 16], vec![0.0; 32]).unwrap();
    std::fs::write(&two, mase_interop::npy::write_npz(&[("a", &t), ("b", &t)])).unwrap();
    let wrong = root.join("wrong.npy");
    std::fs::write(&wrong, mase_interop::npy::write_npy_f32(&Tensor::new(vec![2, 15], vec![0.0; 30]).unwrap())).unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["run", "--model-file", m, "--input", two.to_str().unwrap()], "2 arrays (a, b) and none named `x`"),
        (
            &["run", "--model-file", m, "--input", wrong.to_str().unwrap()],
            "input of shape [2, 15]: model `three_layer_pytorch` takes samples of shape [16]",
        ),
        (&["run", "--model-file", m], "no input given"),
        (&["run", "--model-file", m, "--random", "0,16"], "--random [0, 16]"),
        (&["run", "--model-file", m, "--random", "2,16", "-o", "y.csv"], "expected a .npy (outputs) or .npz"),
        (&["run", "--random", "2,16"], "no model given"),
        (
            &["run", "--model-file", m, "--random", "2,16", "--input-shape", "4,4"],
            "--input-shape [4, 4] does not match the input's samples [16]",
        ),
        (&["run", "--model-file", m, "--input", "missing.npy"], "input missing.npy: cannot read"),
    ];
    for (args, want) in cases {
        let line = ch_error(args, &root);
        assert!(line.contains(want), "ch {args:?}: `{line}` should contain `{want}`");
    }
}

#[test]
fn conv_algo_flag_and_key_reach_the_executor() {
    let root = scratch("run-conv-algo");
    // One 3x3 convolution, 4 -> 6 channels on 18x18 images: Winograd applies (stride 1, and 81
    // tiles per image keep its products on the GEMM's general path), and the default `fast`
    // keeps the direct sums, as it takes Winograd from 32 channels each way.
    std::fs::write(
        root.join("conv.toml"),
        "[[layers]]\nop = \"conv2d\"\nout_channels = 6\nkernel_size = 3\npadding = 1\n[[layers]]\nop = \"flatten\"\n[[layers]]\nop = \"linear\"\nout_features = \"classes\"\n",
    )
    .unwrap();
    std::fs::write(root.join("winograd.toml"), "conv_algo = \"winograd\"\n").unwrap();
    let run = |extra: &[&str], out: &str| {
        let mut args = vec!["run", "--model-file", "conv.toml", "--random", "4,4,18,18", "--num-classes", "3", "--seed", "2", "-o", out];
        args.extend_from_slice(extra);
        ch_json(&args, &root);
        npz(&root.join(out), "y")
    };
    let exact = run(&["--conv-algo", "exact"], "exact.npz");
    let fast = run(&[], "fast.npz");
    let winograd = run(&["--conv-algo", "winograd"], "winograd.npz");
    let from_toml = run(&["--config", "winograd.toml"], "toml.npz");
    let flag_wins = run(&["--config", "winograd.toml", "--conv-algo", "exact"], "flag.npz");
    let bits = |t: &Tensor| t.data.iter().map(|v| v.to_bits()).collect::<Vec<_>>();
    assert_eq!(bits(&fast), bits(&exact), "fast keeps the direct sums below 32 channels");
    assert_ne!(bits(&winograd), bits(&exact), "winograd rounds differently");
    assert_eq!(bits(&from_toml), bits(&winograd), "the TOML key selects winograd");
    assert_eq!(bits(&flag_wins), bits(&exact), "the flag wins over the TOML key");
    // The rounding of the transforms only: outputs of magnitude about 1.
    let scale = exact.data.iter().map(|v| v.abs()).fold(0.0, f32::max);
    assert!(max_diff(&winograd, &exact) <= 1e-5 * scale.max(1.0), "{} vs scale {scale}", max_diff(&winograd, &exact));
    let line = ch_error(&["run", "--model-file", "conv.toml", "--random", "2,4,18,18", "--num-classes", "3", "--conv-algo", "fft"], &root);
    assert!(line.contains("`fft`") && line.contains("--conv-algo") && line.contains("expected fast, exact or winograd"), "{line}");
}

#[test]
fn model_file_without_a_data_set_is_run_and_analysed_from_its_input_shape() {
    let root = scratch("run-model-file");
    // A model on 1x25x25 images, which no data set has.
    std::fs::write(
        root.join("odd.toml"),
        "[[layers]]\nop = \"flatten\"\n[[layers]]\nop = \"linear\"\nout_features = 7\n[[layers]]\nop = \"relu\"\n[[layers]]\nop = \"linear\"\nout_features = \"classes\"\n",
    )
    .unwrap();
    let out = ch(&["run", "--model-file", "odd.toml", "--random", "2,1,25,25", "--num-classes", "3", "--json"], &root);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("untrained initial weights"), "the untrained weights are said");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["output_shape"], serde_json::json!([2, 3]));
    let v = ch_json(&["analyze", "--model-file", "odd.toml", "--input-shape", "1,25,25", "--num-classes", "3", "--report", "flops"], &root);
    // Linear 625 -> 7 and 7 -> 3 (one FLOP per multiply-add, as MASE counts) and the ReLU's 7.
    assert_eq!(v["reports"]["flops"]["total"]["params"], 625 * 7 + 7 + 7 * 3 + 3);
    assert_eq!(v["reports"]["flops"]["total"]["flops"], 625 * 7 + 7 * 3 + 7);
    let line = ch_error(&["analyze", "--model-file", "odd.toml", "--report", "flops"], &root);
    assert!(line.contains("--input-shape"), "{line}");
}

#[test]
fn nan_inputs_give_nan_outputs_as_in_pytorch() {
    // jsc-tiny (BatchNorm1d, ReLU, Linear 16-5, ReLU) in evaluation mode: a NaN feature stays
    // NaN through the batch norm and the ReLU, and the Linear spreads it to every output, so
    // PyTorch and onnxruntime give NaN for every logit of a sample with a NaN feature.
    let root = scratch("run-nan");
    let mut data = vec![0.5f32; 3 * 16];
    data[..16].fill(f32::NAN); // sample 0: all NaN
    data[16 + 7] = f32::NAN; // sample 1: one NaN feature
    std::fs::write(root.join("x.npy"), mase_interop::npy::write_npy_f32(&Tensor::new(vec![3, 16], data).unwrap())).unwrap();
    let args = ["run", "jsc-tiny", "--num-classes", "5", "--input", "x.npy"];
    let out = ch(&args, &root);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<&str> = stdout.lines().filter(|l| !l.starts_with("INFO")).collect();
    assert_eq!(rows.len(), 3, "{stdout}");
    assert_eq!(rows[0], "NaN NaN NaN NaN NaN");
    assert_eq!(rows[1], "NaN NaN NaN NaN NaN");
    assert!(!rows[2].contains("NaN"), "a finite sample stays finite: {}", rows[2]);
    // The written outputs hold the NaNs too.
    let mut with_o = args.to_vec();
    with_o.extend(["-o", "y.npy"]);
    ch_json(&with_o, &root);
    let y = npy(&root.join("y.npy"));
    assert_eq!(y.shape, [3, 5]);
    assert!(y.data[..10].iter().all(|v| v.is_nan()), "{:?}", y.data);
    assert!(y.data[10..].iter().all(|v| v.is_finite()), "{:?}", y.data);
}
