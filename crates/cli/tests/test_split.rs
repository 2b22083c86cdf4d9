//! `ch test --split train|val|test|all`: any split of the data set, `all` being every sample.

mod common;
use common::*;

#[test]
fn tfc_1w1a_scores_92_96_percent_on_all_shipped_mnist_images() {
    let root = scratch("split-tfc");
    let model = repo_root().join("crates/interop/tests/fixtures/models/TFC_1W1A.onnx");
    let m = model.to_str().unwrap();
    // All cores, as users run it (this used to panic on more than one thread).
    let run = |split: &str| ch_json(&["test", "--model-file", m, "mnist", "--split", split, "--project", "p"], &root);
    let all = run("all");
    assert_eq!(all["samples"], 10_000);
    assert_eq!(all["split"], "all");
    // 9,296 of the 10,000 t10k images, the figure of the model's zoo.
    assert_eq!(all["test_acc"].as_f64().unwrap(), 0.9296);
    // The shipped set is cut 8,000 / 1,000 / 1,000 by i % 10; `all` scores each image once.
    let mut correct = 0.0;
    for (split, samples) in [("train", 8000), ("val", 1000), ("test", 1000)] {
        let v = run(split);
        assert_eq!((v["split"].as_str().unwrap(), v["samples"].as_u64().unwrap()), (split, samples));
        correct += v["test_acc"].as_f64().unwrap() * samples as f64;
    }
    assert_eq!(correct.round() as u64, 9296);
    let ckdir = root.join("mase_output/p/software/checkpoints");
    for file in ["all_metrics.json", "train_metrics.json", "val_metrics.json", "test_metrics.json"] {
        assert!(ckdir.join(file).exists(), "{file} is written beside MASE's test_metrics.json");
    }
}

#[test]
fn an_unknown_split_is_named() {
    let root = scratch("split-bad");
    let line = ch_error(&["test", "tfc", "mnist", "--load", "x.ckpt", "--split", "holdout"], &root);
    assert_eq!(line, "error: --split `holdout` is not known: expected train, val, test or all");
}
