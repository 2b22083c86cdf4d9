//! A convolutional network through `ch emit` and `ch simulate`: mnist-cnn trained one epoch on
//! the MNIST images shipped in `data/mnist`, quantized to 8-bit integers by
//! `configs/mnist_cnn_int8.toml`, emitted as a streaming design, simulated bit-exactly on the
//! first 100 test images (`MASE_LONG_TESTS=1`: all 1,000, with the accuracy `ch test` gives the
//! checkpoint; about 10 minutes of simulation on two cores).

mod common;
use common::*;

#[test]
fn mnist_cnn_is_emitted_and_simulated_with_the_accuracy_of_ch_test() {
    let root = scratch("hw-conv");
    let data = repo_root().join("data");
    let d = data.to_str().unwrap();
    let args = ["--data-dir", d, "--max-epochs", "1", "--batch-size", "64", "--learning-rate", "1e-2", "--project", "cnn"];
    let t = ch_json(&[&["train", "mnist-cnn", "mnist"][..], &args].concat(), &root);
    let best = t["best_checkpoint"].as_str().unwrap().to_string();
    // Float, the convolutions are named, and only they and the linear: the relus and pools
    // after them only lack the formats the convolutions would have given them.
    let line = ch_error(&["emit", "--load", &best, "-o", root.join("bad").to_str().unwrap()], &root);
    assert_eq!(
        line,
        "error: the graph is not integer end to end: seq_blocks_0 (conv2d): not quantized; seq_blocks_3 (conv2d): not quantized; seq_blocks_7 (linear): not quantized"
    );
    let cfg = repo_root().join("configs/mnist_cnn_int8.toml");
    let tr = ch_json(&["transform", "--config", cfg.to_str().unwrap(), "--load", &best, "--data-dir", d], &root);
    let q = tr["checkpoint"].as_str().unwrap().to_string();
    let test_acc = ch_json(&["test", "mnist-cnn", "mnist", "--load", &q, "--data-dir", d], &root)["test_acc"].as_f64().unwrap();
    // Trained, not chance: the comparison of accuracies below has something to compare.
    assert!(test_acc > 0.5, "{test_acc}");
    let out = root.join("rtl_cnn");
    let e = ch_json(
        &["emit", "--load", &q, "-o", out.to_str().unwrap(), "--reuse-layer", "seq_blocks_3=9", "--reuse-layer", "seq_blocks_7=49"],
        &root,
    );
    let m = &e["manifest"];
    // One pixel per beat, 784 beats per image; two convolutions and two pools stream, the
    // collector flattens 16 x 7 x 7 codes into the linear.
    assert_eq!((m["beats"].as_u64(), m["input"]["elements"].as_u64(), m["input"]["element_width"].as_u64()), (Some(784), Some(1), Some(8)));
    let stages: Vec<&str> = m["stages"].as_array().unwrap().iter().map(|s| s["stage"].as_str().unwrap()).collect();
    assert_eq!(stages, ["conv2d", "max_pool2d", "conv2d", "max_pool2d"]);
    assert_eq!(m["stages"][3]["output"], serde_json::json!([16, 7, 7]));
    if !have("verilator") {
        return;
    }
    let long = std::env::var("MASE_LONG_TESTS").is_ok_and(|v| v == "1");
    let samples = if long { "1000" } else { "100" };
    let s = ch_json(&["simulate", out.to_str().unwrap(), "--data-dir", d, "--samples", samples], &root);
    assert_eq!((s["mismatches"].as_u64(), s["samples"].as_u64().map(|n| n.to_string())), (Some(0), Some(samples.to_string())), "{s}");
    if long {
        assert_eq!(s["accuracy"].as_f64(), Some(test_acc), "{s}");
    }
    assert_eq!(
        (s["latency_cycles"].as_u64(), s["initiation_interval"].as_f64()),
        (m["latency_cycles"].as_u64(), m["initiation_interval"].as_f64())
    );
    let s = ch_json(&["simulate", out.to_str().unwrap(), "--data-dir", d, "--stall-seed", "3", "--samples", "20"], &root);
    assert_eq!(s["mismatches"], 0, "under back-pressure: {s}");
}
