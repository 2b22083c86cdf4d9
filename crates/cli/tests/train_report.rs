//! What `ch train` reports: TensorBoard event files (read back with a reader of their own,
//! checked first against a file written by TensorBoard's writer), the curves, and the
//! divergence stop.

mod common;
mod tfevents_reader;

use common::{ch, ch_json, scratch};
use std::path::{Path, PathBuf};
use tfevents_reader::{read_events, scalars};

fn ckpts(dir: &Path, project: &str) -> PathBuf {
    dir.join(format!("mase_output/{project}/software/training_ckpts"))
}

/// The event files of a project, in version order.
fn event_files(dir: &Path, project: &str) -> Vec<PathBuf> {
    let logs = dir.join(format!("mase_output/{project}/software/tensorboard/lightning_logs"));
    let mut versions: Vec<PathBuf> = std::fs::read_dir(&logs).map(|r| r.flatten().map(|e| e.path()).collect()).unwrap_or_default();
    versions.sort();
    versions
        .iter()
        .flat_map(|v| std::fs::read_dir(v).expect("version dir").flatten().map(|e| e.path()))
        .filter(|p| p.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.starts_with("events.out.tfevents.")))
        .collect()
}

fn weight_bits(path: &Path) -> Vec<u32> {
    let ck = mase_io::load_checkpoint(path).expect("checkpoint");
    ck.params.iter().flat_map(|(_, e)| e.tensor.data.iter().map(|v| v.to_bits()).collect::<Vec<_>>()).collect()
}

#[test]
fn reader_reads_tensorboards_own_file() {
    let bytes = std::fs::read(common::repo_root().join("crates/cli/tests/fixtures/tensorboard/reference.tfevents")).unwrap();
    let events = read_events(&bytes).unwrap();
    assert_eq!(events.len(), 8);
    assert_eq!((events[0].file_version.as_deref(), events[0].wall_time), (Some("brain.Event:2"), 1_700_000_000.0));
    let loss = scalars(&events, "train_loss_step");
    assert_eq!(&loss[..3], &[(0, 2.3125), (1, 1.5), (300, 0.0)]);
    assert!(loss[3].0 == 303 && loss[3].1.is_nan());
    assert_eq!(scalars(&events, "lr-Adam"), [(302, f32::MAX)]);
    assert_eq!(scalars(&events, "val_acc_epoch"), [(301, -1.25)]);
    assert_eq!(events[7].scalars, [("val_loss_epoch".to_string(), 0.5), ("epoch".to_string(), 3.0)]);
    assert_eq!(events[7].wall_time, 1_700_000_007.0);
    // A flipped bit anywhere in a record fails its CRC.
    let mut bad = bytes.clone();
    bad[200] ^= 1;
    assert!(read_events(&bad).is_err());
}

/// `ch train mlp digits` at learning rate `lr` for `epochs` epochs into `project`.
fn train_at<'a>(lr: &'a str, epochs: &'a str, project: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args =
        vec!["train", "mlp", "digits", "--max-epochs", epochs, "--batch-size", "64", "--learning-rate", lr, "--project", project];
    args.extend(extra);
    args
}

/// [`train_at`] a learning rate that trains.
fn train<'a>(epochs: &'a str, project: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    train_at("3e-3", epochs, project, extra)
}

#[test]
fn tensorboard_scalars_are_the_runs_numbers() {
    let dir = scratch("tb");
    let r = ch_json(&train("2", "p", &["--log-every-n-steps", "1"]), &dir);
    let files = event_files(&dir, "p");
    assert_eq!(files.len(), 1, "{files:?}");
    assert!(files[0].parent().unwrap().ends_with("lightning_logs/version_0"), "{files:?}");
    let events = read_events(&std::fs::read(&files[0]).unwrap()).unwrap();
    assert_eq!(events[0].file_version.as_deref(), Some("brain.Event:2"));

    let steps = r["global_step"].as_u64().unwrap() as i64;
    let history = r["history"].as_array().unwrap();
    let step_loss = scalars(&events, "train_loss_step");
    assert_eq!(step_loss.iter().map(|s| s.0).collect::<Vec<_>>(), (0..steps).collect::<Vec<_>>(), "one loss per optimizer step");
    assert_eq!(scalars(&events, "train_acc_step").len(), steps as usize);
    // The epoch's train loss is the mean of its steps' losses (one batch per step here).
    let per_epoch = steps / 2;
    for (e, rec) in history.iter().enumerate() {
        let f = |k: &str| rec[k].as_f64().unwrap() as f32;
        let at = per_epoch * (e as i64 + 1);
        for (tag, key) in [
            ("train_loss_epoch", "train_loss"),
            ("train_acc_epoch", "train_acc"),
            ("val_loss_epoch", "val_loss"),
            ("val_acc_epoch", "val_acc"),
            ("lr-Adam", "lr"),
            ("epoch", "epoch"),
        ] {
            assert_eq!(scalars(&events, tag)[e], (at, f(key)), "{tag} of epoch {e}");
        }
        let losses = &step_loss[(per_epoch * e as i64) as usize..(per_epoch * (e as i64 + 1)) as usize];
        let mean = losses.iter().map(|s| f64::from(s.1)).sum::<f64>() / losses.len() as f64;
        assert!((mean - rec["train_loss"].as_f64().unwrap()).abs() < 1e-5, "epoch {e}: {mean} vs {}", rec["train_loss"]);
    }
    // Every event after the first is stamped no earlier than the file was opened.
    assert!(events.windows(2).all(|w| w[1].wall_time >= w[0].wall_time && w[0].wall_time > 1.6e9));

    // A second run of the project (here `--resume` to 3 epochs) gets version_1, as Lightning.
    ch_json(&train("3", "p", &["--log-every-n-steps", "1", "--resume"]), &dir);
    let files = event_files(&dir, "p");
    assert_eq!(files.len(), 2, "{files:?}");
    assert!(files[1].parent().unwrap().ends_with("version_1"));
    let resumed = read_events(&std::fs::read(&files[1]).unwrap()).unwrap();
    assert_eq!(scalars(&resumed, "epoch").iter().map(|s| s.1).collect::<Vec<_>>(), [2.0]);
    assert_eq!(scalars(&resumed, "train_loss_step").first().map(|s| s.0), Some(steps), "steps go on from the checkpoint's");
}

#[test]
fn curves_beside_metrics() {
    let dir = scratch("curves");
    ch_json(&train("2", "c", &[]), &dir);
    let png = std::fs::read(ckpts(&dir, "c").join("curves.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    // IHDR: three panels of 560 x 460.
    assert_eq!((u32::from_be_bytes(png[16..20].try_into().unwrap()), u32::from_be_bytes(png[20..24].try_into().unwrap())), (1680, 460));
    let svg = std::fs::read_to_string(ckpts(&dir, "c").join("curves.svg")).unwrap();
    for text in ["training of mlp", "train_loss", "val_loss", "train_acc", "val_acc", "learning rate", "epoch"] {
        assert!(svg.contains(text), "curves.svg lacks `{text}`");
    }
}

#[test]
fn reporting_leaves_the_weights_alone() {
    let dir = scratch("report-bits");
    let run = |p: &str, report: &str| {
        ch_json(&train("2", p, &["--log-every-n-steps", "1", "--report-to", report]), &dir);
        weight_bits(&ckpts(&dir, p).join("last.ckpt"))
    };
    assert_eq!(run("tb", "tensorboard"), run("none", "none"), "same seed, same bits, whatever is reported");
    assert_eq!(event_files(&dir, "tb").len(), 1);
    assert!(!dir.join("mase_output/none/software/tensorboard").exists(), "--report-to none writes no events");
}

fn all_finite(path: &Path) -> bool {
    let ck = mase_io::load_checkpoint(path).expect("checkpoint");
    let finite = ck.params.iter().all(|(_, e)| e.tensor.data.iter().all(|v| v.is_finite()));
    finite
}

/// Runs `ch` expecting a divergence: exit status 1 and one error line, which is returned.
fn diverges(args: &[&str], dir: &Path) -> String {
    let line = common::ch_error(args, dir);
    assert!(line.starts_with("error: training diverged: "), "{line}");
    assert!(line.ends_with("(lower the learning rate)"), "{line}");
    assert_eq!(ch(args, dir).status.code(), Some(1));
    line
}

#[test]
fn a_nan_loss_stops_the_run_and_keeps_the_last_good_checkpoints() {
    let dir = scratch("diverge");
    // Learning rate 1e30: the first step makes the weights ~1e30, the second batch's logits overflow.
    let line = diverges(&train_at("1e30", "3", "fresh", &[]), &dir);
    assert_eq!(
        line,
        "error: training diverged: loss is NaN at epoch 0, step 1; stopped, no checkpoint was written (lower the learning rate)"
    );
    assert!(!ckpts(&dir, "fresh").join("last.ckpt").exists() && !ckpts(&dir, "fresh").join("best.ckpt").exists());

    // One good epoch, then resumed with the huge rate: epoch 1's first step (step 23, the
    // epoch has 23 batches) blows the weights up and step 24's loss is NaN. The checkpoints,
    // metrics and curves stay those of epoch 0, byte for byte.
    ch_json(&train("1", "resumed", &[]), &dir);
    let files = ["last.ckpt", "best.ckpt", "metrics.csv", "curves.png"];
    let read = |name: &str| std::fs::read(ckpts(&dir, "resumed").join(name)).unwrap();
    let before: Vec<Vec<u8>> = files.iter().map(|f| read(f)).collect();
    let line = diverges(&train_at("1e30", "3", "resumed", &["--resume"]), &dir);
    assert_eq!(
        line,
        "error: training diverged: loss is NaN at epoch 1, step 24; stopped, last.ckpt keeps epoch 0 and best.ckpt the best epoch so far (lower the learning rate)"
    );
    for (f, b) in files.iter().zip(&before) {
        assert!(read(f) == *b, "{f} changed");
    }
    assert!(all_finite(&ckpts(&dir, "resumed").join("last.ckpt")) && all_finite(&ckpts(&dir, "resumed").join("best.ckpt")));
    // The run's event file is whole and stops before the broken step.
    let events = read_events(&std::fs::read(&event_files(&dir, "resumed")[1]).unwrap()).unwrap();
    assert!(events[0].file_version.is_some() && scalars(&events, "epoch").is_empty());
}

#[test]
fn broken_weights_at_the_end_of_an_epoch_are_not_saved() {
    let dir = scratch("diverge-epoch-end");
    // Learning rate 1e30, one line per case: model, data set, optimizer, extra flags, the error.
    let cases: [(&str, &str, &str, &[&str], &str); 2] = [
        // One step (its loss is the initial, finite one), then the epoch ends: the validation
        // loss of the ~1e30 weights is NaN.
        ("mlp", "digits", "adam", &["--max-steps", "1"], "validation loss is NaN after epoch 0, step 1"),
        // SGD's first step overflows the first layer's weights; the second step's loss is NaN,
        // as in PyTorch (ReLU once mapped the NaN to 0, and only the weight check caught it).
        ("jsc-tiny", "wine", "sgd", &[], "loss is NaN at epoch 0, step 1"),
    ];
    for (i, (model, dataset, optimizer, extra, what)) in cases.into_iter().enumerate() {
        let project = format!("case{i}");
        let mut args = vec!["train", model, dataset, "--optimizer", optimizer, "--learning-rate", "1e30", "--max-epochs", "3"];
        args.extend(["--project", &project]);
        args.extend(extra);
        let line = diverges(&args, &dir);
        assert_eq!(line, format!("error: training diverged: {what}; stopped, no checkpoint was written (lower the learning rate)"));
        let ck = ckpts(&dir, &project);
        assert!(!ck.join("last.ckpt").exists() && !ck.join("best.ckpt").exists() && !ck.join("metrics.csv").exists(), "case {i}");
    }
}

#[test]
fn an_exploding_but_finite_loss_warns_once() {
    let dir = scratch("explode");
    // Learning rate 10: the second batch's loss is ~1.8e4, over 1e3 x the first (2.32); the
    // run then settles and finishes.
    let out = ch(&train_at("10", "3", "e", &[]), &dir);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("exploding")).collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    assert!(warnings[0].starts_with("WARNING  the training loss is exploding: 1.8"), "{}", warnings[0]);
    assert!(warnings[0].contains("at epoch 0, step 1, more than 1e3 x the first loss 2.32"), "{}", warnings[0]);
    // At 3e-3 there is no warning.
    let calm = ch(&train("1", "calm", &[]), &dir);
    assert!(!String::from_utf8_lossy(&calm.stderr).contains("exploding"));
}
