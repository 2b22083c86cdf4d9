//! profile_statistics on jsc-tiny: weights and activations land in software metadata and equal
//! direct computations on the same tensors.

mod common;
use common::*;
use mase_passes::{run_pass, Split};
use serde_json::{json, Value};

fn stat(g: &mase_ir::Graph, node: &str, entry: &str) -> Value {
    g.node(g.require(node).unwrap()).meta.software["args"][entry]["stat"].clone()
}

#[test]
fn weights_and_activations_are_profiled() {
    let (mut g, mut ctx) = jsc_tiny();
    with_metadata(&mut g, &mut ctx);
    let args = json!({
        "by": "type",
        "target_weight_nodes": ["linear"],
        "target_activation_nodes": ["batch_norm1d", "relu"],
        "weight_statistics": {"variance_precise": {"device": "cpu", "dims": "all"}, "range_min_max": {"dims": [1]}},
        "activation_statistics": {"range_min_max": {"dims": [0]}, "abs_mean": {"dims": "all"}},
        "num_samples": 10,
        "batch_size": 4,
    });
    let r = pass("profile_statistics", &mut g, &mut ctx, args);
    assert_eq!(r.json["samples"], 10, "exactly num_samples, in batches of 4, 4 and 2");

    // Weights: the whole tensor is one sample.
    let w = ctx.params.get("seq_blocks.2.weight").unwrap().data.clone();
    let n = w.len() as f64;
    let mean = w.iter().map(|&x| x as f64).sum::<f64>() / n;
    let var = w.iter().map(|&x| (x as f64 - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let s = stat(&g, "seq_blocks_2", "weight");
    assert!((s["variance_precise"]["mean"].as_f64().unwrap() - mean).abs() < 1e-12);
    assert!((s["variance_precise"]["variance"].as_f64().unwrap() - var).abs() < 1e-12);
    assert_eq!(s["variance_precise"]["count"], 80);
    // Per output row of the [5, 16] weight.
    let row_min: Vec<f64> = w.chunks(16).map(|r| r.iter().fold(f64::INFINITY, |m, &x| m.min(x as f64))).collect();
    assert_eq!(s["range_min_max"]["min"], json!(row_min));
    assert_eq!(stat(&g, "seq_blocks_2", "bias")["variance_precise"]["count"], 5);
    assert_eq!(stat(&g, "seq_blocks_2", "data_in_0"), json!({}), "linear is no activation target");

    // Activations: batch norm reads the raw inputs, per feature over the 10 samples.
    let b = ctx.batches("t", &g, Split::Train, 10, 10).unwrap().remove(0);
    let feat_max: Vec<f64> = (0..16).map(|f| (0..10).map(|i| b.x[i * 16 + f] as f64).fold(f64::NEG_INFINITY, f64::max)).collect();
    let s = stat(&g, "seq_blocks_0", "data_in_0");
    assert_eq!(s["range_min_max"]["max"], json!(feat_max));
    assert_eq!(s["range_min_max"]["count"], 10);
    let abs_mean = b.x.iter().map(|&x| (x as f64).abs()).sum::<f64>() / 160.0;
    assert!((s["abs_mean"]["abs_mean"].as_f64().unwrap() - abs_mean).abs() < 1e-12);
    assert_eq!(s["abs_mean"]["count"], 160);
    // MASE would put activation statistics on batch norm's parameters and then exit(1).
    assert_eq!(stat(&g, "seq_blocks_0", "weight"), json!({}));
    // ReLUs are profiled on their inputs; the second one reads the linear output (5 features).
    assert_eq!(stat(&g, "seq_blocks_3", "data_in_0")["range_min_max"]["max"].as_array().unwrap().len(), 5);
}

#[test]
fn profile_errors() {
    let (mut g, mut ctx) = jsc_tiny();
    let base = json!({"by": "type", "target_weight_nodes": ["linear"], "weight_statistics": {"abs_mean": {}}});
    let e = run_pass("profile_statistics", &mut g, &mut ctx, &base).unwrap_err().to_string();
    assert!(e.contains("run `add_software_metadata` first"), "{e}");
    with_metadata(&mut g, &mut ctx);
    let cases = [
        (json!({"by": "kind"}), "`by = \"kind\"`"),
        (json!({"by": "name", "target_weight_nodes": ["fc9"]}), "no node named `fc9`"),
        (json!({"by": "type", "weight_statistics": {"median": {}}}), "unknown statistic `median`"),
        (json!({"by": "type", "num_samples": 10, "input_generator": "x"}), "unknown field `input_generator`"),
    ];
    for (args, want) in cases {
        let e = run_pass("profile_statistics", &mut g, &mut ctx, &args).unwrap_err().to_string();
        assert!(e.contains(want), "{args}: {e}");
    }
    // Without a data set or random inputs, activations cannot be profiled.
    ctx.inputs = mase_passes::InputSource::None;
    let args = json!({"by": "type", "target_activation_nodes": ["relu"], "activation_statistics": {"abs_mean": {}}});
    let e = run_pass("profile_statistics", &mut g, &mut ctx, &args).unwrap_err().to_string();
    assert!(e.contains("needs input samples"), "{e}");
}
