//! `kill -9` during training, then `--resume`: the run continues from the last checkpoint and ends
//! with exactly the weights of an uninterrupted run.

mod common;
use common::*;
use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};

const EPOCHS: usize = 6;

fn train_args(project: &str) -> Vec<String> {
    [
        "train",
        "tfc",
        "mnist",
        "--max-epochs",
        &EPOCHS.to_string(),
        "--batch-size",
        "64",
        "--learning-rate",
        "1e-3",
        "--seed",
        "5",
        "--project",
        project,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn last_ckpt(dir: &std::path::Path, project: &str) -> mase_io::Checkpoint {
    mase_io::load_checkpoint(&dir.join(format!("mase_output/{project}/software/training_ckpts/last.ckpt"))).expect("last.ckpt")
}

#[test]
fn kill_then_resume_matches_uninterrupted_run() {
    let dir = scratch("resume");
    let mut child = Command::new(env!("CARGO_BIN_EXE_ch"))
        .args(train_args("killed"))
        .current_dir(&dir)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn ch");
    // Each epoch row is printed once its checkpoint is on disk; kill as soon as epoch 1 is done.
    let reader = BufReader::new(child.stdout.take().expect("stdout"));
    for line in reader.lines() {
        let line = line.expect("read line");
        let fields: Vec<&str> = line.split_whitespace().collect();
        if fields.len() == 7 && fields[0] == "1" {
            break;
        }
    }
    child.kill().expect("kill -9");
    let _ = child.wait();
    let saved = last_ckpt(&dir, "killed").meta["epoch"].as_u64().expect("epoch");
    assert!((2..EPOCHS as u64).contains(&saved), "the kill must land mid-run (saved epoch {saved})");

    let mut resumed_args = train_args("killed");
    resumed_args.push("--resume".into());
    let r: Vec<&str> = resumed_args.iter().map(String::as_str).collect();
    let resumed = ch_json(&r, &dir);
    let epochs: Vec<u64> = resumed["history"].as_array().unwrap().iter().map(|h| h["epoch"].as_u64().unwrap()).collect();
    assert_eq!(epochs, (0..EPOCHS as u64).collect::<Vec<_>>());

    let straight = train_args("straight");
    ch_json(&straight.iter().map(String::as_str).collect::<Vec<_>>(), &dir);
    let (k, s) = (last_ckpt(&dir, "killed"), last_ckpt(&dir, "straight"));
    for (name, e) in s.params.iter() {
        let other = k.params.get(name).expect("same tensors");
        assert!(e.tensor.data.iter().zip(&other.data).all(|(x, y)| x.to_bits() == y.to_bits()), "`{name}` differs after resume");
    }
}
