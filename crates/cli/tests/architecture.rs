//! Issue 6 end to end: vgg7 on the CIFAR-format fixture, `--augment` (seeded per epoch, so a
//! resumed run is exact), the `channel_multiplier` transform followed by `ch train` and
//! `ch test`, and the lab 4 channel search.

mod common;
use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The folder holding `cifar10/cifar-10-batches-bin/` (and `jsc/`) fixtures.
fn fixtures() -> PathBuf {
    repo_root().join("crates/io/tests/fixtures")
}

fn last(dir: &Path, project: &str) -> mase_io::Checkpoint {
    mase_io::load_checkpoint(&dir.join(format!("mase_output/{project}/software/training_ckpts/last.ckpt"))).expect("last.ckpt")
}

#[test]
fn vgg7_trains_on_the_cifar_fixture() {
    let dir = scratch("vgg7-cifar");
    let data = fixtures();
    let args = ["train", "vgg7", "cifar10", "--data-dir", data.to_str().unwrap(), "--max-steps", "1", "--batch-size", "8", "--augment"];
    let r = ch_json(&[&args[..], &["--project", "v"]].concat(), &dir);
    assert_eq!(r["trainable_params"], 14_029_450);
    assert_eq!(r["global_step"], 1);
    let h = &r["history"][0];
    assert!(h["train_loss"].as_f64().unwrap().is_finite() && h["val_loss"].as_f64().unwrap().is_finite(), "{r}");
    let ck = last(&dir, "v");
    assert_eq!(ck.meta["dataset_info"]["name"], "cifar10");
    assert_eq!(ck.meta["settings"]["augment"], true);
    let t =
        ch_json(&["test", "vgg7", "cifar10", "--data-dir", data.to_str().unwrap(), "--load", r["last_checkpoint"].as_str().unwrap()], &dir);
    assert_eq!(t["samples"], 40, "the fixture's test_batch.bin has 40 records");
}

/// `ch train mnist-cnn cifar10` on the fixture: 144 training images, 4 batches of 36 per epoch.
fn small_run(dir: &Path, project: &str, extra: &[&str]) -> Value {
    let data = fixtures();
    let mut args = vec![
        "train",
        "mnist-cnn",
        "cifar10",
        "--data-dir",
        data.to_str().unwrap(),
        "--max-epochs",
        "3",
        "--batch-size",
        "36",
        "--learning-rate",
        "1e-3",
        "--seed",
        "4",
        "--project",
        project,
    ];
    args.extend(extra);
    ch_json(&args, dir)
}

#[test]
fn augmentation_is_seeded_per_epoch_so_a_resumed_run_is_exact() {
    let dir = scratch("augment-resume");
    small_run(&dir, "full", &["--augment"]);
    // Stop after the 4 steps of epoch 0 (its checkpoint is written), then resume for epochs 1-2.
    let part = small_run(&dir, "part", &["--augment", "--max-steps", "4"]);
    assert_eq!(part["history"].as_array().unwrap().len(), 1);
    small_run(&dir, "part", &["--augment", "--resume"]);
    let (full, resumed) = (last(&dir, "full"), last(&dir, "part"));
    assert_eq!(resumed.meta["epoch"], 3);
    assert!(full.params == resumed.params, "a resumed augmented run ends with the uninterrupted run's weights");
    // Augmentation changes what is learnt; the same seed gives the same bits.
    small_run(&dir, "plain", &[]);
    assert!(last(&dir, "plain").params != full.params);
    small_run(&dir, "again", &["--augment"]);
    assert!(last(&dir, "again").params == full.params);
}

#[test]
fn augment_refuses_data_that_are_not_cifar_images() {
    let dir = scratch("augment-jsc");
    let data = fixtures();
    let e = ch_error(&["train", "jsc-tiny", "jsc", "--data-dir", data.to_str().unwrap(), "--augment"], &dir);
    assert!(e.contains("--augment") && e.contains("[16]"), "{e}");
}

#[test]
fn widened_model_from_transform_trains_and_tests() {
    let dir = scratch("channel-transform");
    let data = fixtures();
    let cfg = dir.join("lab4.toml");
    std::fs::write(
        &cfg,
        r#"
model = "jsc-three-linear"
dataset = "jsc"
project = "wide"

[passes.channel_multiplier]
by = "name"
keep_weights = true
[passes.channel_multiplier.default.config]
name = "NA"
[passes.channel_multiplier.seq_blocks_2.config]
name = "output_only"
channel_multiplier = 2
[passes.channel_multiplier.seq_blocks_4.config]
name = "both"
channel_multiplier = 4
[passes.channel_multiplier.seq_blocks_6.config]
name = "input_only"
"#,
    )
    .unwrap();
    let out = ch(&["transform", "--config", cfg.to_str().unwrap(), "--data-dir", data.to_str().unwrap()], &dir);
    let (stdout, stderr) = (String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stderr}");
    assert!(stdout.contains("Linear(in_features=32, out_features=64, bias=True)"), "{stdout}");
    assert!(stdout.contains("Trainable parameters: 661 -> 3013"), "{stdout}");
    let model = dir.join("mase_output/wide/software/transform/transformed_ckpt/model.ckpt");
    let ck = mase_io::load_checkpoint(&model).unwrap();
    assert_eq!(ck.params.trainable_count(), 3013);

    let d = data.to_str().unwrap();
    let m = model.to_str().unwrap();
    let train = ["train", "jsc-three-linear", "jsc", "--data-dir", d, "--load", m, "--max-epochs", "3", "--learning-rate", "1e-2"];
    let r = ch_json(&[&train[..], &["--project", "wide-train"]].concat(), &dir);
    assert_eq!(r["trainable_params"], 3013);
    let t = ch_json(&["test", "jsc-three-linear", "jsc", "--data-dir", d, "--load", r["best_checkpoint"].as_str().unwrap()], &dir);
    assert!(t["test_acc"].as_f64().unwrap() > 0.3, "{t}");

    // An inconsistent config is one line naming the node.
    let bad = dir.join("bad.toml");
    std::fs::write(
        &bad,
        "model = \"jsc-three-linear\"\ndataset = \"jsc\"\n[passes.channel_multiplier]\nby = \"name\"\n\
         [passes.channel_multiplier.seq_blocks_4.config]\nname = \"input_only\"\n",
    )
    .unwrap();
    let e = ch_error(&["transform", "--config", bad.to_str().unwrap(), "--data-dir", d], &dir);
    assert!(e.contains("`seq_blocks_4`") && e.contains("no widened layer feeds it"), "{e}");
}

#[test]
fn lab4_channel_search_with_tpe_writes_the_best_multipliers() {
    let dir = scratch("lab4-search");
    let data = fixtures();
    let cfg = repo_root().join("configs/jsc_three_linear_channel_search.toml");
    let r = ch_json(&["search", "--config", cfg.to_str().unwrap(), "--data-dir", data.to_str().unwrap()], &dir);
    assert_eq!(r["studies"][0]["sampler"], "tpe");
    assert_eq!(r["studies"][0]["complete"], 20, "{r}");
    let out = dir.join("mase_output/jsc_three_linear_channel_search/software/search_ckpts");
    let best: Value = serde_json::from_str(&std::fs::read_to_string(out.join("best.json")).unwrap()).unwrap();
    let b = &best["0"];
    let cfg = &b["sampled_config"];
    let choices = [1, 2, 4, 6, 8, 10];
    let m2 = cfg["seq_blocks_2"]["config"]["channel_multiplier"].as_u64().unwrap() as usize;
    let m4 = cfg["seq_blocks_4"]["config"]["channel_multiplier"].as_u64().unwrap() as usize;
    assert!(choices.contains(&m2) && choices.contains(&m4), "{cfg}");
    assert_eq!(cfg["seq_blocks_6"]["config"]["name"], "input_only");
    // The best trial's costs are those of its widths: 32 + 17a + ab + b + 5b + 5 parameters and
    // 16a + ab + 5b MACs per sample, with a = 16 m2 and b = 16 m4.
    let (a, bw) = (16 * m2, 16 * m4);
    assert_eq!(b["hardware_metrics"]["param_count"].as_f64().unwrap(), (32 + 17 * a + a * bw + bw + 5 * bw + 5) as f64, "{b}");
    assert_eq!(b["hardware_metrics"]["macs"].as_f64().unwrap(), (16 * a + a * bw + 5 * bw) as f64, "{b}");
    let acc = b["software_metrics"]["accuracy"].as_f64().unwrap();
    assert!(acc > 0.3 && b["value"][0].as_f64().unwrap() == acc, "{b}");
    // Every trial trained and was measured; the multipliers vary across trials.
    let log: Value = serde_json::from_str(&std::fs::read_to_string(out.join("log.json")).unwrap()).unwrap();
    let trials = log.as_object().unwrap();
    assert_eq!(trials.len(), 20);
    let seen: std::collections::BTreeSet<String> =
        trials.values().map(|t| t["user_attrs_sampled_config"]["seq_blocks_2"].to_string()).collect();
    assert!(seen.len() > 1, "{seen:?}");
}
