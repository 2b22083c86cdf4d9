//! jsc-tiny and jsc-toy train on the jsc fixtures in each real format (HDF5, OpenML CSV, ARFF), and
//! MASE's lab config runs unchanged.

mod common;
use common::*;
use std::path::{Path, PathBuf};

/// A data dir holding only one format of the jsc fixture.
fn jsc_dir(root: &Path, file: &str) -> PathBuf {
    let d = root.join(file.replace('.', "_"));
    std::fs::create_dir_all(d.join("jsc")).unwrap();
    let src = repo_root().join("crates/io/tests/fixtures/jsc").join(file);
    std::fs::copy(&src, d.join("jsc").join(file)).unwrap();
    d
}

#[test]
fn jsc_models_train_on_every_format() {
    let root = scratch("jsc");
    for file in ["jsc_fixture.h5", "hls4ml_lhc_jets_hlf.csv", "hls4ml_lhc_jets_hlf.arff"] {
        let data = jsc_dir(&root, file);
        for model in ["jsc-tiny", "jsc-toy"] {
            let project = format!("{model}-{}", file.replace('.', "_"));
            let args = ["train", model, "jsc", "--data-dir", data.to_str().unwrap(), "--max-epochs", "8", "--batch-size", "64"];
            let t = ch_json(&[&args[..], &["--learning-rate", "1e-2", "--project", &project]].concat(), &root);
            let h = t["history"].as_array().unwrap();
            let (first, last) = (&h[0], &h[h.len() - 1]);
            let loss = |r: &serde_json::Value| r["train_loss"].as_f64().unwrap();
            assert!(loss(last) < loss(first), "{model} on {file}: training loss should fall: {h:?}");
            let best = t["best_checkpoint"].as_str().unwrap();
            let r = ch_json(&["test", model, "jsc", "--data-dir", data.to_str().unwrap(), "--load", best], &root);
            // The fixture's classes are separable (a nearest-centroid rule scores > 80 %); chance is 20 %.
            assert!(r["test_acc"].as_f64().unwrap() > 0.4, "{model} on {file}: {r}");
        }
    }
}

#[test]
fn mase_lab_config_runs_unchanged() {
    let root = scratch("labcfg");
    let data = jsc_dir(&root, "jsc_fixture.h5");
    let cfg = repo_root().join("configs/examples/jsc_toy_by_type.toml");
    let args = ["train", "--config", cfg.to_str().unwrap(), "--data-dir", data.to_str().unwrap(), "--max-epochs", "1", "--json"];
    // The config asks for `accelerator = "gpu"`: this `ch`, built without Python, has no GPU
    // path and says so in one line, with the flag that runs the config on the CPU.
    let out = ch(&args, &root);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    let errors: Vec<&str> = stderr.lines().filter(|l| l.starts_with("error:")).collect();
    assert_eq!(errors.len(), 1, "{stderr}");
    assert!(errors[0].starts_with("error: accelerator `cuda`: this `ch` binary was built without Python;"), "{stderr}");
    assert!(errors[0].ends_with("or pass --accelerator cpu to run on mase-rs's executor"), "{stderr}");
    assert!(!root.join("mase_output/jsc-tiny/software/training_ckpts/last.ckpt").exists(), "the run stopped before training");
    let out = ch(&[&args[..], &["--accelerator", "cpu"]].concat(), &root);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(!stderr.contains("accelerator"), "the flag beats the config's gpu, without a warning: {stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["model"], "jsc-tiny");
    assert_eq!(v["trainable_params"], 117);
    // `project = "jsc-tiny"` in the config fixes the output folder.
    assert!(root.join("mase_output/jsc-tiny/software/training_ckpts/last.ckpt").exists());
}

#[test]
fn model_files_work_where_zoo_names_do() {
    let root = scratch("modelfile");
    let data = jsc_dir(&root, "jsc_fixture.h5");
    let model = repo_root().join("models/jsc-m.toml");
    let t = ch_json(
        &["train", model.to_str().unwrap(), "jsc", "--data-dir", data.to_str().unwrap(), "--max-epochs", "1", "--project", "m"],
        &root,
    );
    assert_eq!(t["trainable_params"], 1455);
    let info = ch(&["info"], &root);
    let text = String::from_utf8_lossy(&info.stdout);
    for name in ["jsc-tiny", "vgg7", "mnist", "digits", "jsc"] {
        assert!(text.contains(name), "`ch info` lists {name}: {text}");
    }
    // Every registry: number formats, passes, spaces, samplers (with aliases) and runners.
    let formats = ["integer", "minifloat_ieee", "block_log", "ternary", "int_quant", "float_quant"];
    let passes = ["add_common_metadata", "profile_statistics", "quantize", "channel_multiplier", "verify_quantization"];
    let search = ["graph/quantize/mixed_precision_ptq", "nsgaii", "qmc", "sw basic_train", "hw bitops"];
    for name in formats.iter().chain(&passes).chain(&search) {
        assert!(text.lines().any(|l| l.trim_start().starts_with(name)), "`ch info` lists {name}");
    }
    assert!(text.contains("(also: nsga2, nsga-ii)"), "sampler aliases");
}

#[test]
fn a_nan_in_the_data_is_refused_in_one_line_or_dropped_with_a_count() {
    // The OpenML CSV fixture with `nan` as the first field of line 3.
    let root = scratch("jsc-nan");
    let data = jsc_dir(&root, "hls4ml_lhc_jets_hlf.csv");
    let csv = data.join("jsc/hls4ml_lhc_jets_hlf.csv");
    let text = std::fs::read_to_string(&csv).unwrap();
    let column = text.lines().next().unwrap().split(',').next().unwrap().trim_matches('"').to_string();
    let edited: Vec<String> =
        text.lines().enumerate().map(|(i, l)| if i == 2 { format!("nan{}", &l[l.find(',').unwrap()..]) } else { l.to_string() }).collect();
    std::fs::write(&csv, edited.join("\n") + "\n").unwrap();
    let d = data.to_str().unwrap();
    let want = format!("{}, line 3, column `{column}`: NaN is not a finite number; fix the data, or pass --drop-nonfinite", csv.display());
    let line = ch_error(&["train", "jsc-tiny", "jsc", "--data-dir", d, "--max-steps", "1"], &root);
    assert!(line.contains(&want), "ch train: {line}");
    // With the flag (or `drop_nonfinite = true` in a config) the row is left out, and said so.
    let out = ch(&["train", "jsc-tiny", "jsc", "--data-dir", d, "--max-steps", "2", "--drop-nonfinite", "--json"], &root);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let said = format!("WARNING  data set `jsc`: left out 1 row with a NaN or infinite feature (--drop-nonfinite) from {}", csv.display());
    assert!(stderr.contains(&said), "{stderr}");
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(v["history"][0]["train_loss"].as_f64().unwrap().is_finite(), "{v}");
    let ckpt = v["best_checkpoint"].as_str().unwrap();
    let line = ch_error(&["test", "jsc-tiny", "jsc", "--data-dir", d, "--load", ckpt], &root);
    assert!(line.contains(&want), "ch test: {line}");
    std::fs::write(root.join("drop.toml"), "drop_nonfinite = true\n").unwrap();
    let out = ch(&["test", "jsc-tiny", "jsc", "--data-dir", d, "--load", ckpt, "--config", "drop.toml", "--json"], &root);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && stderr.contains(&said), "{stderr}");
    let r: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(r["test_loss"].as_f64().unwrap().is_finite(), "{r}");
}
