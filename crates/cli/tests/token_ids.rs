//! `ch run --random` on a model that takes token ids (bert-tiny): the batch is whole-number ids
//! over the embedding's rows, which the model accepts, where standard normal values would be
//! refused by its embedding.

mod common;
use common::*;

#[test]
fn random_batches_for_bert_tiny_are_token_ids() {
    let dir = scratch("token-ids");
    let run = |seed: &str| {
        let out = ch(&["run", "bert-tiny", "--random", "3,64", "--num-classes", "10", "--seed", seed, "--json"], &dir);
        let stderr = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(out.status.success(), "{stderr}");
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {stderr}"));
        v["output"].to_string()
    };
    let (a, b) = (run("1"), run("1"));
    assert_eq!(a, b, "the same seed gives the same ids and outputs");
    assert!(a.matches(',').count() >= 29, "3 x 10 logits: {a}");
    assert_ne!(run("2"), a);
    let _ = std::fs::remove_dir_all(&dir);
}
