//! `ch transform` and `ch analyze` end to end: MASE's lab config unchanged, the saved transformed
//! model in `ch test` and `ch train` (QAT), accuracy after quantization of TFC on the shipped
//! MNIST, the reports, and one-line errors.

mod common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// A data dir holding MASE's jsc file (the HDF5 fixture).
fn jsc_data(root: &Path) -> PathBuf {
    let d = root.join("data");
    std::fs::create_dir_all(d.join("jsc")).unwrap();
    std::fs::copy(repo_root().join("crates/io/tests/fixtures/jsc/jsc_fixture.h5"), d.join("jsc/jsc_fixture.h5")).unwrap();
    d
}

fn acc(v: &Value) -> f64 {
    v["test_acc"].as_f64().unwrap()
}

#[test]
fn mase_lab_config_transforms_unchanged() {
    let root = scratch("transform-lab");
    let data = jsc_data(&root);
    let cfg = repo_root().join("configs/examples/jsc_toy_by_type.toml");
    let out = ch(&["transform", "--config", cfg.to_str().unwrap(), "--data-dir", data.to_str().unwrap(), "--explain"], &root);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(stderr.contains("WARNING") && stderr.contains("accelerator"), "gpu is reported, not refused: {stderr}");
    // The histogram: Linear 1 total / 1 changed; BatchNorm1d and ReLU unchanged.
    for row in [
        "| BatchNorm1d     | batch_norm1d |       1 |         0 |           1 |",
        "| Linear          | linear       |       1 |         1 |           0 |",
        "| ReLU            | relu         |       2 |         0 |           2 |",
    ] {
        assert!(stdout.contains(row), "missing `{row}` in:\n{stdout}");
    }
    // --explain: the resolved format of every quantizable node.
    let explain = stdout.lines().find(|l| l.starts_with("seq_blocks_2 ")).unwrap_or_default();
    assert_eq!(
        explain.split("  ").map(str::trim).filter(|c| !c.is_empty()).collect::<Vec<_>>(),
        ["seq_blocks_2", "linear", "linear", "integer", "integer [8, 4]", "integer [8, 4]", "integer [8, 4]", "-"]
    );
    assert!(stdout.lines().any(|l| l.starts_with("seq_blocks_1 ") && l.contains("default") && l.contains("NA (float)")), "{stdout}");
    let t = root.join("mase_output/jsc-tiny/software/transform");
    let hist = std::fs::read_to_string(t.join("quantize/quantize_histogram.csv")).unwrap();
    assert!(
        hist.starts_with(
            "Original type,OP,Total,Changed,Unchanged\nBatchNorm1d,batch_norm1d,1,0,1\nLinear,linear,1,1,0\nReLU,relu,2,0,2\n"
        ),
        "{hist}"
    );
    let table = std::fs::read_to_string(t.join("quantize/quantize_table.csv")).unwrap();
    assert!(table.contains("\n3,seq_blocks_2,seq_blocks_2,module_related_func,linear,Linear,LinearInteger,True\n"), "{table}");
    assert!(t.join("transformed_ckpt/node_meta_param.toml").exists());
    let ckpt = t.join("transformed_ckpt/model.ckpt");

    // The saved model keeps its formats: `ch test` runs it as quantized, `ch train` does QAT.
    let ck = mase_io::load_checkpoint(&ckpt).unwrap();
    let lin = ck.graph.node(ck.graph.require("seq_blocks_2").unwrap());
    assert_eq!(lin.quant.as_ref().unwrap().weight, Some(mase_ir::QuantFormat::Integer { width: 8, frac_width: 4, signed: true }));
    let d = data.to_str().unwrap();
    let r = ch_json(&["test", "jsc-tiny", "jsc", "--data-dir", d, "--load", ckpt.to_str().unwrap()], &root);
    assert_eq!(r["samples"], 392);
    let t = ch_json(
        &["train", "jsc-tiny", "jsc", "--data-dir", d, "--load", ckpt.to_str().unwrap(), "--max-epochs", "1", "--project", "qat"],
        &root,
    );
    let best = mase_io::load_checkpoint(Path::new(t["best_checkpoint"].as_str().unwrap())).unwrap();
    assert!(best.graph.node(best.graph.require("seq_blocks_2").unwrap()).quant.is_some(), "QAT keeps the formats in its checkpoints");
}

#[test]
fn analyze_reports_without_a_config() {
    let root = scratch("analyze");
    let data = jsc_data(&root);
    let d = data.to_str().unwrap();
    let v = ch_json(&["analyze", "jsc-toy", "jsc", "--data-dir", d, "--report", "graph,type,flops,bitops"], &root);
    let counts = &v["reports"]["graph"]["counts"];
    assert_eq!((counts["placeholder"].clone(), counts["call_module"].clone(), counts["output"].clone()), (1.into(), 11.into(), 1.into()));
    assert_eq!(v["reports"]["flops"]["total"]["params"], 327);
    // jsc-toy per sample: BN 64 + ReLU 16 + 16*8 + BN 32 + ReLU 8 + 8*8 + BN 32 + ReLU 8 + 8*5 + BN 20 + ReLU 5.
    assert_eq!(v["reports"]["flops"]["total"]["flops"], 64 + 16 + 128 + 32 + 8 + 64 + 32 + 8 + 40 + 20 + 5);
    let out = ch(&["analyze", "jsc-tiny", "jsc", "--data-dir", d, "--report", "stats,shape", "--num-samples", "16"], &root);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // Per-tensor statistics count values: 16 samples of 16 features at the first ReLU's input.
    assert!(text.contains("over 16 sample(s)") && text.contains("range_quantile") && text.contains("count=256"), "{text}");
    assert!(text.contains("seq_blocks_2:\nin:\ndata_in_0 = [128, 16]"), "{text}");
}

/// A `tfc` transform config quantizing every linear layer's input, weight and bias to integers.
fn tfc_config(dir: &Path, name: &str, weight: (u32, i32)) -> PathBuf {
    let text = format!(
        "model = \"tfc\"\ndataset = \"mnist\"\nproject = \"{name}\"\n[passes.quantize]\nby = \"type\"\n[passes.quantize.default.config]\nname = \"NA\"\n\
         [passes.quantize.linear.config]\nname = \"integer\"\ndata_in_width = 8\ndata_in_frac_width = 5\nweight_width = {}\nweight_frac_width = {}\nbias_width = 8\nbias_frac_width = 5\n",
        weight.0, weight.1
    );
    let p = dir.join(format!("{name}.toml"));
    std::fs::write(&p, text).unwrap();
    p
}

#[test]
fn tfc_post_training_and_quantization_aware_accuracy() {
    let dir = scratch("tfc-quant");
    let t = ch_json(
        &["train", "tfc", "mnist", "--max-epochs", "5", "--batch-size", "256", "--learning-rate", "1e-3", "--project", "tfc"],
        &dir,
    );
    let best = t["best_checkpoint"].as_str().unwrap().to_string();
    let float = acc(&ch_json(&["test", "tfc", "mnist", "--load", &best], &dir));

    // 8-bit integer PTQ: within half a point of float.
    let cfg = tfc_config(&dir, "ptq8", (8, 7));
    let tr = ch_json(&["transform", "--config", cfg.to_str().unwrap(), "--load", &best], &dir);
    let q8 = tr["checkpoint"].as_str().unwrap().to_string();
    let ptq = acc(&ch_json(&["test", "tfc", "mnist", "--load", &q8], &dir));
    assert!((ptq - float).abs() <= 0.005, "8-bit PTQ {ptq} vs float {float}");
    // The quantized model really computes differently from the float one.
    let v = ch_json(&["analyze", "--load", &q8, "--report", "verify"], &dir);
    assert_eq!(v["reports"]["verify"]["off_grid"], 0);
    assert!(v["reports"]["verify"]["outputs"]["max_abs_diff"].as_f64().unwrap() > 0.0, "{}", v["reports"]["verify"]["outputs"]);

    // 4-bit weights, then 3 epochs of quantization-aware training: within 2 points.
    let cfg = tfc_config(&dir, "w4", (4, 4));
    let tr = ch_json(&["transform", "--config", cfg.to_str().unwrap(), "--load", &best], &dir);
    let q4 = tr["checkpoint"].as_str().unwrap().to_string();
    let t = ch_json(
        &[
            "train",
            "tfc",
            "mnist",
            "--load",
            &q4,
            "--max-epochs",
            "3",
            "--batch-size",
            "256",
            "--learning-rate",
            "1e-3",
            "--project",
            "w4qat",
        ],
        &dir,
    );
    let qat = acc(&ch_json(&["test", "tfc", "mnist", "--load", t["best_checkpoint"].as_str().unwrap()], &dir));
    assert!(qat >= float - 0.02, "4-bit QAT {qat} vs float {float}");
}

#[test]
fn bad_transform_input_gives_one_line() {
    let dir = scratch("transform-errors");
    let data = jsc_data(&dir);
    let d = data.to_str().unwrap().to_string();
    let base = "model = \"jsc-tiny\"\ndataset = \"jsc\"\n[passes.quantize]\n";
    let lin = "[passes.quantize.linear.config]\nname = \"integer\"\ndata_in_width = 8\ndata_in_frac_width = 4\nweight_width = 8\nweight_frac_width = 4\n";
    let cases: Vec<(&str, String, Vec<&str>)> = vec![
        (
            "unknown_pass",
            "model = \"jsc-tiny\"\ndataset = \"jsc\"\n[passes.quantise]\nby = \"type\"\n".into(),
            vec!["quantise", "known passes"],
        ),
        (
            "format",
            format!("{base}by = \"type\"\n{}", lin.replace("\"integer\"", "\"posit\"")),
            vec!["unknown format `posit`", "seq_blocks_2"],
        ),
        (
            "width0",
            format!("{base}by = \"type\"\n{}", lin.replace("weight_width = 8", "weight_width = 0")),
            vec!["`width` = 0", "seq_blocks_2"],
        ),
        (
            "frac",
            format!("{base}by = \"type\"\n{}", lin.replace("data_in_frac_width = 4", "data_in_frac_width = 12")),
            vec!["`frac_width` = 12: is larger than `width` = 8"],
        ),
        (
            "regex",
            format!("{base}by = \"regex_name\"\n[passes.quantize.\"conv.*\".config]\nname = \"integer\"\n"),
            vec!["regex_name `conv.*` matches no node"],
        ),
        (
            "name",
            format!("{base}by = \"name\"\n[passes.quantize.seq_blocks_7.config]\nname = \"integer\"\n"),
            vec!["no node named `seq_blocks_7`"],
        ),
        ("key", format!("{base}by = \"type\"\n{lin}weight_widht = 8\n"), vec!["unknown key `weight_widht`"]),
        (
            "arg",
            "model = \"jsc-tiny\"\ndataset = \"jsc\"\n[passes.report_graph]\nfile = \"x\"\n".into(),
            vec!["report_graph", "unknown field `file`"],
        ),
        ("nopasses", "model = \"jsc-tiny\"\ndataset = \"jsc\"\n".into(), vec!["no [passes] table"]),
        ("nometa", "model = \"jsc-tiny\"\ndataset = \"jsc\"\n[passes.summarize_quantization]\n".into(), vec!["run `quantize` first"]),
    ];
    for (name, text, want) in cases {
        let p = dir.join(format!("{name}.toml"));
        std::fs::write(&p, text).unwrap();
        let line = ch_error(&["transform", "--config", p.to_str().unwrap(), "--data-dir", &d], &dir);
        for w in want {
            assert!(line.contains(w), "{name}: error should mention `{w}`: {line}");
        }
    }
    let line = ch_error(&["transform", "jsc-tiny", "jsc", "--data-dir", &d], &dir);
    assert!(line.contains("--config"), "{line}");
    let line = ch_error(&["analyze", "jsc-tiny", "jsc", "--data-dir", &d, "--report", "graph,bogus"], &dir);
    assert!(line.contains("unknown report `bogus`"), "{line}");
    let out = ch(&["transform", "--list-passes"], &dir);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success() && text.contains("quantize") && text.contains("profile_statistics"), "{text}");
}
