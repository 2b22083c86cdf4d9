//! End-to-end `ch train` / `ch test` on the data shipped in the repo (issue acceptance checks).

mod common;
use common::*;

fn f(v: &serde_json::Value, k: &str) -> f64 {
    v[k].as_f64().unwrap_or_else(|| panic!("no number `{k}` in {v}"))
}

#[test]
fn tfc_on_shipped_mnist_reaches_90_percent() {
    let dir = scratch("tfc");
    let t = ch_json(
        &["train", "tfc", "mnist", "--max-epochs", "5", "--batch-size", "256", "--learning-rate", "1e-3", "--project", "tfc"],
        &dir,
    );
    let history = t["history"].as_array().expect("history");
    assert_eq!(history.len(), 5);
    for k in ["epoch", "train_loss", "val_loss", "val_acc"] {
        assert!(history[0].get(k).is_some(), "history rows have `{k}`");
    }
    let best = t["best_checkpoint"].as_str().expect("best_checkpoint");
    assert!(std::path::Path::new(t["last_checkpoint"].as_str().unwrap()).exists());
    let r = ch_json(&["test", "tfc", "mnist", "--load", best], &dir);
    assert!(f(&r, "test_acc") >= 0.90, "tfc test accuracy {}", f(&r, "test_acc"));
    assert!(f(&r, "test_loss") < 0.5);
    let csv = std::fs::read_to_string(dir.join("mase_output/tfc/software/training_ckpts/metrics.csv")).unwrap();
    assert_eq!(csv.lines().count(), 6, "header + one row per epoch");
}

#[test]
fn digits_with_small_mlp_reaches_93_percent() {
    let dir = scratch("digits");
    let t =
        ch_json(&["train", "mlp", "digits", "--max-epochs", "30", "--batch-size", "32", "--learning-rate", "3e-3", "--project", "d"], &dir);
    let r = ch_json(&["test", "mlp", "digits", "--load", t["best_checkpoint"].as_str().unwrap()], &dir);
    assert!(f(&r, "test_acc") >= 0.93, "digits test accuracy {}", f(&r, "test_acc"));
}

#[test]
fn same_seed_same_bits() {
    let dir = scratch("seed");
    let run = |p: &str, seed: &str| {
        let args = format!("train toy toy_tiny --max-epochs 2 --batch-size 512 --learning-rate 1e-2 --seed {seed} --project {p}");
        ch_json(&args.split_whitespace().collect::<Vec<_>>(), &dir);
        let ck = mase_io::load_checkpoint(&dir.join(format!("mase_output/{p}/software/training_ckpts/last.ckpt"))).unwrap();
        ck.params
    };
    let (a, b, c) = (run("a", "3"), run("b", "3"), run("c", "4"));
    let bits = |p: &mase_ir::ParamStore| {
        p.iter().flat_map(|(_, e)| e.tensor.data.iter().map(|v| v.to_bits()).collect::<Vec<_>>()).collect::<Vec<_>>()
    };
    assert_eq!(bits(&a), bits(&b), "same seed must give identical weights");
    assert_ne!(bits(&a), bits(&c), "another seed must give other weights");
}

#[test]
fn accumulated_gradients_step_once_per_group_and_at_the_epoch_end() {
    let dir = scratch("accumulate");
    let run = |p: &str, k: &str| {
        let args =
            format!("train mlp digits --max-epochs 2 --batch-size 64 --learning-rate 3e-3 --project {p} --accumulate-grad-batches {k}");
        ch_json(&args.split_whitespace().collect::<Vec<_>>(), &dir)
    };
    let (one, three) = (run("k1", "1"), run("k3", "3"));
    let batches = one["global_step"].as_u64().unwrap() / 2;
    assert!(batches % 3 != 0, "{batches} batches per epoch: the last group of each epoch is partial");
    assert_eq!(three["global_step"].as_u64().unwrap(), 2 * batches.div_ceil(3), "Lightning steps after 3 batches and at the last batch");
    let (l1, l3) = (f(&one["history"][1], "train_loss"), f(&three["history"][1], "train_loss"));
    assert!(l3.is_finite() && l3 != l1, "accumulation changes the run: {l1} vs {l3}");
}
